"""Concurrent writers.  Temporary files have unique names (two writers of one
file never collide, a reader never sees half a file), and an output folder of certify / calibrate
is locked for the run: a second run into it refuses (exit 73) or, with --wait, waits."""
import json
import os
import subprocess
import sys
import textwrap
import time

import pytest

import paths

ROOT = str(paths.ROOT)
ENV = dict(os.environ, PYTHONPATH=ROOT)
CERTIFY = [sys.executable, "-m", "certkit", "certify", "--synthetic", "gaussian:n=12,d=3,beta=1,seed=0",
           "--eps", "1/4", "--peers", "none"]


def test_two_writers_of_one_file(tmp_path):
    """Two processes rewriting one JSON file 200 times each with write_json (calibrate's JSON writer):
    no error, no stray temporary file, and the file read back is always one writer's whole document."""
    target = tmp_path / "results.json"
    code = textwrap.dedent(f"""
        import sys
        from certkit.outputs import write_json
        for i in range(200):
            write_json({str(target)!r}, {{"writer": sys.argv[1], "i": i, "pad": "x" * 20000}})
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code, w], env=ENV, stderr=subprocess.PIPE, text=True)
             for w in "ab"]
    seen = set()
    while any(p.poll() is None for p in procs):
        try:
            seen.add(json.loads(target.read_text())["writer"])        # never half a file
        except FileNotFoundError:
            pass
    errs = [p.stderr.read() for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errs
    assert json.loads(target.read_text())["i"] == 199
    assert sorted(os.listdir(tmp_path)) == ["results.json"]


def test_unique_temporary_names(tmp_path, monkeypatch):
    """write_atomic never uses the fixed name path + '.tmp' (the old collision)."""
    from certkit import outputs
    names = []
    real = outputs.os.replace
    monkeypatch.setattr(outputs.os, "replace", lambda a, b: (names.append(a), real(a, b)))
    outputs.write_atomic(tmp_path / "s.json", "1\n")
    outputs.write_atomic(tmp_path / "s.json", "2\n")
    assert len(set(names)) == 2 and all(not n.endswith("s.json.tmp") for n in names)


def hold_lock(folder, seconds):
    """A process holding the folder's lock for `seconds` (another certkit run, as far as certify knows)."""
    code = (f"import time; from certkit.outputs import FolderLock; l = FolderLock({str(folder)!r}).acquire(); "
            f"print('locked', flush=True); time.sleep({seconds})")
    p = subprocess.Popen([sys.executable, "-c", code], env=ENV, stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "locked"
    return p


def test_a_second_certify_into_a_locked_folder_refuses(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    holder = hold_lock(out, 30)
    try:
        r = subprocess.run(CERTIFY + ["--out", str(out)], env=ENV, capture_output=True, text=True, timeout=120)
        assert r.returncode == 73, r.stderr
        assert f"pid {holder.pid}" in r.stderr and "--wait" in r.stderr and str(out) in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert not (out / "summary.json").exists()          # nothing written into the other run's folder
    finally:
        holder.kill()
        holder.wait()


def test_certify_wait_waits_for_the_other_run(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    holder = hold_lock(out, 3)
    t0 = time.time()
    r = subprocess.run(CERTIFY + ["--out", str(out), "--wait"], env=ENV, capture_output=True, text=True, timeout=120)
    holder.wait()
    assert r.returncode == 0, r.stderr
    assert time.time() - t0 >= 2.5 and "waiting for the certkit run" in r.stderr
    assert json.loads((out / "summary.json").read_text())[0]["upper"] is not None


def test_two_certify_runs_never_mix_a_folder(tmp_path):
    """Two real certify runs into one folder with different heads of the same name: one refuses (73)
    or, if they did not overlap, both finish; the folder then holds one run's results only."""
    out = tmp_path / "out"
    runs = [CERTIFY[:4] + ["--synthetic", f"gaussian:n=200,d=8,beta={b},seed=0", "--eps", "1/4,1/2", "--peers", "none",
                           "--out", str(out)] for b in (1, 2)]
    procs = [subprocess.Popen(a, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for a in runs]
    codes = [p.wait(timeout=300) for p in procs]
    assert sorted(codes) in ([0, 73], [0, 0]), [p.stderr.read() for p in procs]
    rows = json.loads((out / "summary.json").read_text())
    assert len({r["beta"] for r in rows}) == 1


def test_calibrate_takes_the_lock_once_its_folder_exists(tmp_path, monkeypatch):
    """calibrate() holds the folder lock from run_grid's folder creation to its summary."""
    from certkit import calibration as cal
    from certkit.calibration import grid, summary
    from certkit.errors import OutputError
    from certkit.outputs import FolderLock
    out = tmp_path / "cal"
    seen = {}

    def fake_grid(model, out_, *a, **kw):
        lock = a[-1]
        os.makedirs(out_, exist_ok=True)
        lock.acquire()
        with pytest.raises(OutputError, match="another certkit run"):
            FolderLock(out_).acquire()                 # a second run is refused while this one runs
        seen["locked"] = True
        return 0, 0, {}
    monkeypatch.setattr(grid, "run_grid", fake_grid)
    monkeypatch.setattr(summary, "write_summary", lambda out_, plots: ([], {}))
    cal.calibrate(out=str(out), layers="0", heads="0", lengths="64", multipliers="1", eps="1/4")
    assert seen["locked"]
    FolderLock(out).acquire().release()                  # released at the end


@pytest.mark.parametrize("victim", ["summary.json", "summary.csv", ".lower.json"])
def test_a_full_disk_names_the_file(tmp_path, monkeypatch, capsys, victim):
    """ENOSPC while certify writes a certificate or a summary: one line naming that file, exit 73."""
    import errno
    from certkit import cli, outputs
    real = outputs.tempfile.NamedTemporaryFile

    class Full:
        def __init__(self, f):
            self.f, self.name = f, f.name

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

        def __getattr__(self, name):
            return getattr(self.f, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

    def fake(*a, prefix="", **k):
        f = real(*a, prefix=prefix, **k)
        d = str(k.get("dir", ""))                    # not certkit's own scratch folder (out/.certkit-work-*)
        into_out = d.startswith(str(tmp_path / "out")) and ".certkit-work-" not in d
        return Full(f) if prefix.startswith(".") and victim in prefix and into_out else f
    monkeypatch.setattr(outputs.tempfile, "NamedTemporaryFile", fake)
    out = tmp_path / "out"
    code = cli.main(["certify", "--synthetic", "gaussian:n=12,d=3,beta=1,seed=0", "--eps", "1/4", "--peers", "none",
                     "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 73 and len(err) == 1, err
    assert victim in err[0] and str(out) in err[0] and "the disk is full" in err[0]
    assert not [f for f in os.listdir(out) if f.endswith(".tmp")]          # no temporary file left behind
