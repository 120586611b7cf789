"""certkit verify at scale: --jobs N (the output of --jobs 1, in the same order), --time-limit, the
--log (JSON Lines, against its published schema) with --resume (nothing logged is checked again; a
changed file is; a line cut short is ignored), --summary, Ctrl-C (exit 130, resumable), the
progress line and the bounded window of the worker pool."""
import collections
import io
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

from certkit import batch, cli

from paths import ROOT

DATA = ROOT / "data" / "certificates"
GOLDEN = ROOT / "tests" / "golden"
FORMAT = ROOT / "certkit" / "format"
INLINE = DATA / "perm-n40-margin.json"                    # inline arrays, VERIFIED, a few ms to check
FOLDERS = ("valid", "invalid", "malformed", "unsupported")
EXPECTED = json.loads((GOLDEN / "expected.json").read_text())   # "folder/name" -> {"verdict", "contains"}
EXIT = {"VERIFIED": 0, "REJECTED": 1, "MALFORMED": 2, "UNSUPPORTED": 3}


def run(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "certkit", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=ROOT)


def expected_status(file):
    """The verdict a file of the mixed corpus must get: golden expected.json, or VERIFIED for the
    committed corpus (data/certificates, pinned by its manifest)."""
    p = pathlib.Path(file)
    if p.parent.name not in FOLDERS:           # data/certificates, or a copy of one
        return "VERIFIED"
    return EXPECTED[f"{p.parent.name}/{p.name}"]["verdict"]


def mixed():
    """The golden folders: VERIFIED, REJECTED, MALFORMED and UNSUPPORTED certificates."""
    return [GOLDEN / f for f in FOLDERS]


def log_lines(path):
    return pathlib.Path(path).read_bytes().splitlines(keepends=True)


def records(path):
    return [json.loads(line) for line in log_lines(path)]


def without_seconds(recs):
    return [{k: v for k, v in r.items() if k != "seconds"} for r in recs]


def validators():
    """(log line validator, summary validator) from the published schemas; the log schema's $ref
    is resolved against verify-output.schema.json."""
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    schemas = {n: json.loads((FORMAT / f"verify-{n}.schema.json").read_text()) for n in ("output", "log", "summary")}
    for s in schemas.values():
        Draft202012Validator.check_schema(s)
    registry = Registry().with_resources((s["$id"], Resource.from_contents(s)) for s in schemas.values())
    return (Draft202012Validator(schemas["log"], registry=registry),
            Draft202012Validator(schemas["summary"], registry=registry))


def copies(folder, n, source=INLINE):
    """n copies of a certificate under folder (c0000.json ...), a file whose bytes are its own."""
    folder.mkdir(parents=True, exist_ok=True)
    raw = source.read_bytes()
    for i in range(n):
        (folder / f"c{i:04d}.json").write_bytes(raw)
    return folder


# ---------------------------------------------------------------- --jobs: the same output, in order

def test_jobs_2_prints_the_lines_of_jobs_1_in_the_same_order(tmp_path):
    one = run("verify", "--jobs", 1, "--log", tmp_path / "one.jsonl", *mixed())
    two = run("verify", "--jobs", 2, "--log", tmp_path / "two.jsonl", *mixed())
    assert one.returncode == two.returncode == 3, one.stderr[-500:]       # the largest of 0-3
    assert "Traceback" not in one.stderr + two.stderr
    assert two.stdout == one.stdout and one.stdout.count("\n") > 150
    logged = records(tmp_path / "one.jsonl")                 # --jobs 1: the input order
    assert [line.split()[0] for line in one.stdout.splitlines()] == [r["status"] for r in logged]
    assert {r["status"] for r in logged} == {"VERIFIED", "REJECTED", "MALFORMED", "UNSUPPORTED"}
    for r in logged:
        assert r["status"] == expected_status(r["file"]), r["file"]
    # --jobs 2 logs as the checks finish: the same records, in some order
    key = lambda r: r["file"]                                # noqa: E731
    assert sorted(without_seconds(records(tmp_path / "two.jsonl")), key=key) == sorted(without_seconds(logged), key=key)
    # --json --jobs 2: the records in the input order
    js = run("verify", "--json", "--jobs", 2, *mixed())
    assert js.returncode == 3
    assert without_seconds(json.loads(js.stdout)) == without_seconds(logged)


def test_jobs_more_than_files_and_in_process_api(tmp_path):
    r = run("verify", "--jobs", 8, INLINE, DATA / "sphere-d3-lattice.json")
    assert r.returncode == 0 and [line.split()[0] for line in r.stdout.splitlines()] == ["VERIFIED", "VERIFIED"]
    import certkit
    folder = GOLDEN / "invalid"
    serial = certkit.verify(str(folder))
    assert [v.status for v in certkit.verify(str(folder), jobs=2)] == [v.status for v in serial]
    assert {v.status for v in serial} == {"REJECTED"}


# ---------------------------------------------------------------- --time-limit

@pytest.mark.parametrize("jobs", [1, 2])
def test_tiny_time_limit_is_unsupported_resource_limit_exit_3(jobs):
    r = run("verify", "--json", "--jobs", jobs, "--time-limit", "1e-6", INLINE, DATA / "gauss-n32-factor.json")
    assert r.returncode == 3, r.stderr
    out = json.loads(r.stdout)
    assert [x["status"] for x in out] == ["UNSUPPORTED", "UNSUPPORTED"]
    assert all("resource limit" in x["message"] and "time limit" in x["message"] for x in out)
    assert out[0]["kind"] == "lower-decoding-margin" and out[0]["sha256"] is not None   # the header is still read
    again = run("verify", "--time-limit", "60", INLINE)              # a generous limit changes nothing
    assert again.returncode == 0 and again.stdout.startswith("VERIFIED")


def test_api_time_limit():
    import certkit
    v = certkit.verify(str(INLINE), time_limit=1e-6)
    assert v.status == "UNSUPPORTED" and "resource limit" in v.message


@pytest.mark.parametrize("args, code, needle", [
    (["--jobs", "0"], 64, "--jobs"),
    (["--jobs", "two"], 64, "--jobs"),
    (["--time-limit", "-1"], 64, "--time-limit"),
    (["--time-limit", "nan"], 64, "--time-limit"),
    (["--resume"], 64, "--resume needs --log"),
    (["--summary", "/nonexistent-certkit-folder/s.json"], 73, "--summary"),
    (["--log", "/nonexistent-certkit-folder/l.jsonl"], 73, "--log"),
])
def test_bad_batch_options_are_usage_or_output_errors(args, code, needle, capsys):
    assert cli.main(["verify", *args, str(INLINE)]) == code
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


# ---------------------------------------------------------------- --log, --resume, --summary

def test_log_and_summary_validate_and_resume_checks_nothing_logged(tmp_path):
    log_v, summary_v = validators()
    d = tmp_path / "certs"
    shutil.copytree(GOLDEN / "invalid", d / "invalid")
    shutil.copytree(GOLDEN / "malformed", d / "malformed")
    shutil.copy(INLINE, d / "ok.json")
    log, summary = tmp_path / "run.jsonl", tmp_path / "summary.json"
    first = run("verify", "--jobs", 2, "--log", log, "--summary", summary, d)
    assert first.returncode == 2, first.stderr[-500:]                      # REJECTED and MALFORMED: 2 wins
    lines = log_lines(log)
    recs = records(log)
    n = first.stdout.count("\n")
    assert len(lines) == len(recs) == n > 60 and all(line.endswith(b"\n") for line in lines)
    for r in recs:
        errors = list(log_v.iter_errors(r))
        assert not errors, errors[:2]
    s = json.loads(summary.read_text())
    assert not list(summary_v.iter_errors(s))
    want = collections.Counter(expected_status(r["file"]) for r in recs)
    assert want["REJECTED"] > 20 and want["MALFORMED"] > 20 and want["VERIFIED"] >= 1
    assert s["counts"] == {**dict.fromkeys(["VERIFIED", "REJECTED", "MALFORMED", "UNSUPPORTED", "INTERNAL-ERROR"], 0),
                           **want}
    assert [r["status"] for r in recs] == [expected_status(r["file"]) for r in recs]
    assert s["files"] == n and s["resumed"] == 0 and s["exit_code"] == 2

    second = run("verify", "--jobs", 2, "--log", log, "--resume", "--summary", summary, d)
    assert second.returncode == 2                                          # the same report, nothing checked,
    assert second.stdout == first.stdout.replace("\n", "  [from the log]\n")   # each line marked as resumed
    assert f"{n} of {n} results taken from {log} without checking again" in second.stderr
    assert log_lines(log) == lines                                         # the log gains no line
    s2 = json.loads(summary.read_text())
    assert s2["counts"] == s["counts"] and s2["files"] == n and s2["resumed"] == n and s2["exit_code"] == 2
    assert "logged" in second.stderr

    # a file whose bytes changed is checked again (and only it)
    changed = d / "ok.json"
    changed.write_text(changed.read_text()[:-40])                         # cut short: MALFORMED now
    third = run("verify", "--log", log, "--resume", "--summary", summary, d)
    assert third.returncode == 2
    new = log_lines(log)[len(lines):]
    assert len(new) == 1 and json.loads(new[0])["file"] == str(changed) and json.loads(new[0])["status"] == "MALFORMED"
    s3 = json.loads(summary.read_text())
    assert s3["resumed"] == n - 1 and s3["counts"]["MALFORMED"] == s["counts"]["MALFORMED"] + 1
    assert s3["counts"]["VERIFIED"] == s["counts"]["VERIFIED"] - 1


def test_resume_takes_the_exit_code_of_logged_files(tmp_path):
    log = tmp_path / "run.jsonl"
    rejected = next((GOLDEN / "invalid").glob("perm-n32-margin--*.json"))
    assert run("verify", "--log", log, rejected).returncode == 1
    r = run("verify", "--log", log, "--resume", rejected, INLINE)
    assert r.returncode == 1                                               # the logged REJECTED counts
    assert len(log_lines(log)) == 2                                        # only the new file was checked


def test_truncated_last_log_line_is_ignored_and_its_file_checked_again(tmp_path):
    d = copies(tmp_path / "certs", 5)
    log, summary = tmp_path / "run.jsonl", tmp_path / "summary.json"
    assert run("verify", "--log", log, d).returncode == 0
    raw = log.read_bytes()
    lines = log_lines(log)
    cut = raw[:len(raw) - len(lines[-1]) // 2]                            # killed in the middle of the last line
    log.write_bytes(cut)
    lost = json.loads(lines[-1])["file"]
    r = run("verify", "--log", log, "--resume", "--summary", summary, d)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr
    assert "1 incomplete line" in r.stderr
    s = json.loads(summary.read_text())
    assert s["resumed"] == 4 and s["counts"]["VERIFIED"] == 5
    after = log_lines(log)
    assert after[:4] == lines[:4] and len(after) == 6                       # the fragment, closed, then the re-check
    assert json.loads(after[-1])["file"] == lost
    with pytest.raises(ValueError):
        json.loads(after[4])
    again = run("verify", "--log", log, "--resume", "--summary", summary, d)
    assert again.returncode == 0 and log_lines(log) == after                 # now nothing is checked
    assert json.loads(summary.read_text())["resumed"] == 5


def test_log_records_match_the_json_objects(tmp_path, capsys):
    log = tmp_path / "run.jsonl"
    code = cli.main(["verify", "--json", "--log", str(log), str(GOLDEN / "unsupported"), str(INLINE)])
    out = json.loads(capsys.readouterr().out)
    assert code == 3
    assert without_seconds(records(log)) == without_seconds(out)
    assert [r["seconds"] for r in records(log)] == [r["seconds"] for r in out]


# ---------------------------------------------------------------- Ctrl-C

def test_interrupted_run_exits_130_and_resume_completes(tmp_path):
    n = 250
    d = copies(tmp_path / "certs", n)
    log, summary = tmp_path / "run.jsonl", tmp_path / "summary.json"
    p = subprocess.Popen([sys.executable, "-m", "certkit", "verify", "--jobs", "2", "--log", str(log),
                          "--summary", str(summary), str(d)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         bufsize=0, cwd=ROOT)
    # the first line, read from the pipe byte by byte: a buffered readline() could take more lines
    # than it returns, and communicate() (which reads the descriptor itself) would never see them
    first = b""
    while not first.endswith(b"\n"):
        byte = os.read(p.stdout.fileno(), 1)
        assert byte, "no output before the end of the run"
        first += byte
    assert first.startswith(b"VERIFIED")
    p.send_signal(signal.SIGINT)
    t = time.perf_counter()
    out, err = (b.decode() for b in p.communicate(timeout=60))
    stopped = time.perf_counter() - t
    assert p.returncode == 130, err
    assert "interrupted" in err and "--resume" in err and "Traceback" not in err
    assert out.endswith("\n") or not out                  # Ctrl-C only stops between results: no line is cut
    printed = 1 + out.count("\n")
    assert printed < n and stopped < 10
    recs = records(log)                                    # every line a complete record
    assert printed <= len(recs) < n
    assert len({r["file"] for r in recs}) == len(recs)
    s = json.loads(summary.read_text())
    assert s["exit_code"] == 130 and s["files"] == n and s["counts"]["VERIFIED"] == printed

    r = run("verify", "--jobs", 2, "--log", log, "--resume", "--summary", summary, d)
    assert r.returncode == 0, r.stderr[-500:]
    s = json.loads(summary.read_text())
    assert s["counts"]["VERIFIED"] == n and s["files"] == n and s["resumed"] == len(recs) and s["exit_code"] == 0
    final = records(log)
    assert len(final) == n and len({r["file"] for r in final}) == n           # nothing checked twice
    assert r.stdout.count("\n") == n


def test_killed_run_loses_nothing_it_printed(tmp_path):
    """SIGKILL (no clean-up at all): every file already printed is in the log (a record is logged
    and flushed before it is printed), and --resume finishes the run."""
    n = 250
    d = copies(tmp_path / "certs", n)
    log, summary = tmp_path / "run.jsonl", tmp_path / "summary.json"
    p = subprocess.Popen([sys.executable, "-m", "certkit", "verify", "--log", str(log), str(d)],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)
    printed = [p.stdout.readline()]                     # stdout is a pipe: the first block of lines
    p.kill()
    p.wait(timeout=60)
    printed += p.stdout.read().splitlines()
    names = {line.rsplit("(", 1)[1].rstrip(")\n") for line in printed if line.strip()}
    assert 0 < len(names) < n
    logged = set()
    for line in log_lines(log):
        if line.endswith(b"\n"):
            logged.add(pathlib.Path(json.loads(line)["file"]).name)
    assert names <= logged
    r = run("verify", "--log", log, "--resume", "--summary", summary, d)
    assert r.returncode == 0
    s = json.loads(summary.read_text())
    assert s["counts"]["VERIFIED"] == n and s["resumed"] == len(logged)


# ---------------------------------------------------------------- progress line and the pool's window

def test_progress_line_shows_rate_and_eta(monkeypatch):
    clock = iter([0.0, 2.0, 2.05, 4.0])
    monkeypatch.setattr(batch.time, "perf_counter", lambda: next(clock))
    err = io.StringIO()
    bar = batch.Progress(12, 10, stream=err)
    bar.draw(2, 1, "a.json")                   # the first result: no rate yet
    bar.draw(6, 5, "b.json")                   # 4 files in 2 s: 2 files/s, 5 left: 2.5 s
    bar.draw(7, 6, "c.json")                   # 0.05 s later: not redrawn
    bar.clear()
    bar.draw(8, 9, "d.json")                   # cleared: redrawn; 8 files in 4 s, 1 left
    frames = err.getvalue().split("\r")
    assert frames[1].startswith("[2/12]  17 %  a.json")
    assert frames[2].startswith("[6/12]  50 %  2.0 files/s  ETA 0:03  b.json")
    assert not any("c.json" in f for f in frames)
    assert frames[-1].startswith("[8/12]  67 %  2.0 files/s  ETA 0:01  d.json")


def test_no_progress_line_when_stderr_is_not_a_terminal(tmp_path):
    r = run("verify", copies(tmp_path / "certs", 3))
    assert r.returncode == 0 and "\r" not in r.stderr and "ETA" not in r.stderr


def test_pool_keeps_a_bounded_window_and_stops_when_closed():
    paths = [str(INLINE)] * 60
    taken = []

    def items():
        for p in paths:
            taken.append(p)
            yield p
    results = batch.ordered(batch.check_verdict, items(), ("fast", None), jobs=2)
    assert next(results).status == "VERIFIED"
    assert len(taken) <= 2 * batch.WINDOW + 1 < len(paths)                  # not every task queued at once
    results.close()                                                        # workers terminated, no hang
    assert len(taken) < len(paths)


def test_ctrl_c_stops_workers_in_the_middle_of_a_task():
    """Ctrl-C (a real SIGINT to this process) while both workers are busy for a minute: the pool
    is stopped at once, not after them, and the caller's SIGINT handler is back."""
    import multiprocessing as mp
    import threading
    handler = signal.getsignal(signal.SIGINT)
    before = set(mp.active_children())
    results = batch.ordered(time.sleep, [60, 60, 60], (), jobs=2)
    timer = threading.Timer(1.5, os.kill, (os.getpid(), signal.SIGINT))
    t = time.perf_counter()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            next(results)
    finally:
        timer.cancel()
    assert time.perf_counter() - t < 15
    assert not set(mp.active_children()) - before              # the workers are gone
    assert signal.getsignal(signal.SIGINT) is handler


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path, monkeypatch, capsys):
    with pytest.raises(batch.WorkerDied, match="worker process died"):
        list(batch.ordered(os._exit, [3, 3, 3], (), jobs=2))            # the worker process exits: no answer

    def dies(tasks, *args, **kwargs):
        yield from batch.ordered(os._exit, (3 for _ in tasks), (), jobs=2)
    from certkit import verify_run
    monkeypatch.setattr(verify_run, "records", dies)
    summary = tmp_path / "summary.json"
    code = cli.main(["verify", "--jobs", "2", "--log", str(tmp_path / "l.jsonl"), "--summary", str(summary),
                     str(INLINE), str(DATA / "sphere-d3-lattice.json")])
    err = capsys.readouterr().err
    assert code == 4 and "worker process died" in err and "--resume" in err and "Traceback" not in err
    assert json.loads(summary.read_text())["exit_code"] == 4


# ---------------------------------------------------------------- the log is trusted: --recheck

def test_a_hand_edited_log_is_trusted_by_resume_and_caught_by_recheck(tmp_path):
    log, summary = tmp_path / "run.jsonl", tmp_path / "summary.json"
    rejected = next((GOLDEN / "invalid").glob("perm-n32-margin--*.json"))
    assert run("verify", "--log", log, rejected, INLINE).returncode == 1
    lines = log_lines(log)
    forged = []
    for line in lines:                         # REJECTED -> VERIFIED, by hand
        rec = json.loads(line)
        if rec["status"] == "REJECTED":
            rec.update(status="VERIFIED", exit_code=0)
        forged.append((json.dumps(rec, separators=(",", ":")) + "\n").encode())
    log.write_bytes(b"".join(forged))
    # --resume trusts it, but says so: the line is marked, counted on stderr and in --json / --summary
    r = run("verify", "--log", log, "--resume", "--summary", summary, rejected, INLINE)
    assert r.returncode == 0 and r.stdout.count("[from the log]") == 2
    assert "2 of 2 results taken from" in r.stderr and "trusted like the checker" in r.stderr
    assert json.loads(summary.read_text())["resumed"] == 2
    js = run("verify", "--json", "--log", log, "--resume", rejected, INLINE)
    assert [o.get("resumed") for o in json.loads(js.stdout)] == [True, True]
    # --recheck checks both again: the forged line is a disagreement, exit non-zero
    r = run("verify", "--log", log, "--resume", "--recheck", "--summary", summary, rejected, INLINE)
    assert r.returncode == 1, r.stderr
    assert f"DISAGREEMENT: {rejected}: the log {log} says VERIFIED, the checker says REJECTED" in r.stderr
    assert "1 disagreement(s)" in r.stderr and "[from the log]" not in r.stdout
    s = json.loads(summary.read_text())
    assert s["disagreements"] == 1 and s["resumed"] == 0 and s["exit_code"] == 1
    assert not list(validators()[1].iter_errors(s))
    # a log that agrees: --recheck exits 0 (INLINE alone)
    r = run("verify", "--log", log, "--resume", "--recheck", INLINE)
    assert r.returncode == 0 and "0 disagreement(s)" in r.stderr
    assert run("verify", "--log", log, "--recheck", INLINE).returncode == 64    # --recheck needs --resume


def test_summary_is_written_when_the_log_write_fails(tmp_path, monkeypatch, capsys):
    """A full disk while appending to --log: one line naming the log (exit 73), and --summary written."""
    import errno
    log, summary = tmp_path / "run.jsonl", tmp_path / "summary.json"
    real_open = open

    class Full:                                # the log's file: every write fails as on a full disk
        def __init__(self, f):
            self.f = f

        def write(self, b):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

    def fake_open(path, mode="r", *a, **k):
        f = real_open(path, mode, *a, **k)
        return Full(f) if mode == "ab" else f           # the log is the one file opened for appending bytes
    monkeypatch.setattr("builtins.open", fake_open)
    code = cli.main(["verify", "--log", str(log), "--summary", str(summary), str(INLINE)])
    err = capsys.readouterr().err
    assert code == 73 and f"--log {log}: cannot write (the disk is full)" in err and "Traceback" not in err, err
    s = json.loads(summary.read_text())
    assert s["exit_code"] == 73 and not list(validators()[1].iter_errors(s))
