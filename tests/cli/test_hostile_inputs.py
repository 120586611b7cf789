"""Hostile inputs: a golden list of what an attacker or a careless user hands certkit, each with the
exit code a careful tool gives and the promise it keeps (README "Hostile files", TRUST.md).

The destructive writes come first: an output path that exists and is not a regular file (a
symbolic link, a FIFO, a device) is refused with exit 73 and left exactly as it was; nothing is
written through a link; `verify -` creates nothing at all.
"""
import os
import pathlib
import re
import stat
import subprocess
import sys

import pytest

from paths import ROOT

CERT = ROOT / "data" / "certificates" / "perm-n40-margin.json"      # inline arrays, VERIFIED
CERTIFY = ["certify", "--synthetic", "gaussian:n=12,d=3,beta=1,seed=0", "--eps", "1/4", "--peers", "none"]


def run(*args, stdin=None, env=None):
    return subprocess.run([sys.executable, "-m", "certkit", *map(str, args)], capture_output=True, text=True,
                          timeout=300, input=stdin, env=env, cwd=ROOT)


def snapshot(path):
    """What a path is, without following it: (type, link target or bytes)."""
    st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        return "link", os.readlink(path)
    if stat.S_ISFIFO(st.st_mode):
        return "fifo", None
    return "file", pathlib.Path(path).read_bytes()


# ---------------------------------------------------------------- destructive writes

def test_the_lock_file_is_never_opened_through_a_link(tmp_path):
    """A repository can ship `.certkit.lock -> victim` under the default --out: certify refuses (73),
    the victim keeps its bytes and the link stays a link."""
    out, victim = tmp_path / "out", tmp_path / "victim"
    out.mkdir()
    victim.write_text("DATA\n")
    (out / ".certkit.lock").symlink_to(victim)
    r = run(*CERTIFY, "--out", out)
    assert r.returncode == 73, r.stderr
    assert ".certkit.lock" in r.stderr and "symbolic link" in r.stderr and "Traceback" not in r.stderr
    assert victim.read_text() == "DATA\n" and snapshot(out / ".certkit.lock") == ("link", str(victim))


def test_the_lock_file_as_a_fifo_is_refused_without_blocking(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    os.mkfifo(out / ".certkit.lock")
    r = run(*CERTIFY, "--out", out)
    assert r.returncode == 73 and "FIFO" in r.stderr, r.stderr
    assert snapshot(out / ".certkit.lock")[0] == "fifo"


@pytest.mark.parametrize("option", ["--summary", "--log"])
@pytest.mark.parametrize("what", ["fifo", "link"])
def test_verify_never_replaces_or_writes_through_what_is_not_a_regular_file(tmp_path, option, what):
    """`verify --summary /dev/full` used to rename the summary over the device node.  A FIFO and a
    link stand in for the device here (the same lstat check refuses all three): exit 73 before any
    check, the path unchanged, the link's target unchanged."""
    target, victim = tmp_path / "out.json", tmp_path / "victim"
    victim.write_text("DATA\n")
    if what == "fifo":
        os.mkfifo(target)
    else:
        target.symlink_to(victim)
    before = snapshot(target)
    r = run("verify", "-q", option, target, CERT)
    assert r.returncode == 73, r.stderr
    assert str(target) in r.stderr and "Traceback" not in r.stderr
    assert snapshot(target) == before and victim.read_text() == "DATA\n"


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
def test_verify_summary_on_a_device_is_refused():
    before = os.stat("/dev/full")
    r = run("verify", "-q", "--summary", "/dev/full", CERT)
    assert r.returncode == 73 and "/dev/full" in r.stderr and "device" in r.stderr, r.stderr
    after = os.lstat("/dev/full")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="no /dev/full")
@pytest.mark.parametrize("args", [("verify", str(CERT)), ("tables", "--help"), ("--version",)], ids=" ".join)
def test_stdout_on_a_full_device_is_an_error_naming_standard_output(args):
    """`certkit ... > /dev/full`: exit 73 and one line naming standard output (argparse's help swallowed the
    error and exited 0), never a traceback or an "Exception ignored" at exit."""
    with open("/dev/full", "w") as full:
        r = subprocess.run([sys.executable, "-m", "certkit", *args], stdout=full, stderr=subprocess.PIPE, text=True,
                           cwd=ROOT, timeout=120)
    assert r.returncode == 73, (r.returncode, r.stderr)
    assert r.stderr.strip().splitlines() == [r.stderr.strip()] and "cannot write standard output" in r.stderr


def test_write_atomic_refuses_a_link_and_keeps_regular_files_working(tmp_path):
    from certkit.errors import OutputError
    from certkit.outputs import write_atomic
    victim, link = tmp_path / "victim", tmp_path / "link.json"
    victim.write_text("DATA\n")
    link.symlink_to(victim)
    with pytest.raises(OutputError, match="symbolic link"):
        write_atomic(link, "x\n")
    assert snapshot(link) == ("link", str(victim)) and victim.read_text() == "DATA\n"
    write_atomic(tmp_path / "plain.json", "1\n")
    write_atomic(tmp_path / "plain.json", "2\n")                        # an existing regular file is replaced
    assert (tmp_path / "plain.json").read_text() == "2\n"


def test_verify_stdin_creates_nothing_when_killed_mid_check(tmp_path):
    """kill -9 while verify is reading a certificate from stdin leaves no copy anywhere: TMPDIR,
    the working folder and the certificate's folder stay as they were."""
    tmp, cwd = tmp_path / "tmp", tmp_path / "cwd"
    tmp.mkdir()
    cwd.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT))
    p = subprocess.Popen([sys.executable, "-m", "certkit", "verify", "-"], stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=cwd, env=env)
    p.stdin.write(CERT.read_bytes()[:100])                  # half a certificate: verify waits for the rest
    p.stdin.flush()
    import time
    time.sleep(2.0)
    p.kill()
    p.wait(timeout=30)
    assert list(tmp.iterdir()) == [] and list(cwd.iterdir()) == []


# ---------------------------------------------------------------- one-line errors, never exit 4
NINES = "9" * 5000
HOSTILE_ARGS = [        # (arguments, exit code, words the one-line error holds)
    (["certify", "--synthetic", "gaussian:n=8,d=100000000000", "--eps", "1/4", "--peers", "none"], 64, "d <= 512"),
    (["certify", "--synthetic", "gaussian:n=8,d=2,seed=-1", "--eps", "1/4", "--peers", "none"], 64, "seed >= 0"),
    (["certify", "--synthetic", "gaussian:n=8,d=2", "--eps", "1/4", "--peers", "evil"], 64, "unknown peer 'evil'"),
    (["compare", "--synthetic", "gaussian:n=8,d=2", "--method", f"lowrank:k={NINES}"], 64, "larger than"),
    (["compare", "--synthetic", "gaussian:n=8,d=2", "--method", f"lowrank:k=1..{NINES}"], 64, "larger than"),
    (["compare", "--synthetic", "gaussian:n=8,d=2", "--method", "evict:keep=99999999999999999999"], 64, "beyond"),
    (["compare", "--synthetic", "gaussian:n=8,d=2", "--method", "evict:keep=0-100000000"], 64, "beyond"),
    (["compare", "--synthetic", "gaussian:n=8,d=2,mask=causal", "--method", "evict:sinks=99999999999999999999,window=4"],
     64, "larger than"),
    (["compare", "--synthetic", "gaussian:n=8,d=2", "--method", "window:w=11111111111111111111"], 64, "larger than"),
    (["compare", "--synthetic", "gaussian:n=8,d=2", "--method", "evict:sinks=4,window=8"], 64, "no causal"),
    (["verify", "--time-limit", "1e308", str(CERT)], 64, "outside (0, 1000000000]"),
    (["verify", "--time-limit", "nan", str(CERT)], 64, "--time-limit"),
    (["verify", "-j", "0", str(CERT)], 64, "outside [1, 1024]"),
    (["certify", "--synthetic", "gaussian:n=8,d=2", "--eps", "1e-2000", "--peers", "none"], 64,
     "'1e-2000' is out of range"),                        # 10^2000 has 6644 bits: was "not a number"
    (["compare", "--synthetic", "gaussian:n=8,d=2", "--method", "lowrank:k=1", "--eps", "1e-2000"], 64,
     "'1e-2000' is out of range"),
]


@pytest.mark.parametrize("args, code, words", HOSTILE_ARGS, ids=lambda x: " ".join(x)[:60] if isinstance(x, list) else None)
def test_hostile_arguments_get_a_one_line_error_with_their_sysexits_code(tmp_path, args, code, words):
    r = run(*args, *(["--out", tmp_path / "out"] if args[0] in ("certify", "compare") else []))
    assert r.returncode == code, r.stderr[-2000:]
    last = r.stderr.strip().splitlines()[-1]           # argparse's usage lines may come first
    assert words in last and last.startswith("certkit ") and "Traceback" not in r.stderr, r.stderr
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").rglob("*.json"))


def test_the_api_validates_as_the_command_line_does():
    """certify(peers=), verify(time_limit=, jobs=) and compare(method) raise a UserError naming the
    value (the same parsers as the CLI), never KeyError / OverflowError, and never accept 0 or -1."""
    import numpy as np
    import certkit
    h = certkit.Head.from_arrays(np.eye(3), np.eye(3), beta=1)
    with pytest.raises(certkit.UserError, match="unknown peer 'evil'"):
        certkit.certify(h, "1/4", peers=["evil"])
    assert certkit.certify(h, "1/4", peers="svd").peers["svd"]["k"] >= 1      # one name, as --peers svd
    for bad in (-1, 0, float("nan"), float("inf"), 1e308, "soon"):
        with pytest.raises(certkit.UserError, match="time_limit"):
            certkit.verify(str(CERT), time_limit=bad)
    for bad in (0, -1, 2.5, 10 ** 6):
        with pytest.raises(certkit.UserError, match="jobs"):
            certkit.verify(str(CERT), jobs=bad)
    with pytest.raises(certkit.UserError, match="larger than"):
        certkit.compare(h, "window:w=11111111111111111111")


def test_api_arguments_found_by_the_fuzzer_raise_a_user_error():
    """tests/cli/test_fuzz_inputs.py found: verify(route="x") raised the kernel's ValueError, and
    verify(jobs="\u00b2") passed str.isdigit() then failed int() with a ValueError (exit 4 on the CLI)."""
    import certkit
    with pytest.raises(certkit.UserError, match="route must be one of auto, fast, arb, got 'x'"):
        certkit.verify(str(CERT), route="x")
    for bad in ("\u00b2", "\u2460"):                                  # superscript two, circled one: digits, not decimals
        with pytest.raises(certkit.UserError, match="jobs: expected a positive integer"):
            certkit.verify(str(CERT), jobs=bad)
    r = run("verify", "--jobs", "\u00b2", CERT)
    assert r.returncode == 64 and "Traceback" not in r.stderr, r.stderr


def test_certify_seed_and_attempts_must_be_integers_as_on_the_command_line():
    """Found by tests/cli/test_fuzz_inputs.py: certify(h, "1/4", seed=1.5) (or "x") reached numpy's
    SeedSequence in the random peers and raised TypeError; --seed and --attempts are type=int."""
    import numpy as np
    import certkit
    h = certkit.Head.from_arrays(np.eye(3), np.eye(3), beta=1)
    for name, bad in (("seed", 1.5), ("seed", "x"), ("attempts", 2.5), ("attempts", None)):
        with pytest.raises(certkit.UserError, match=f"certify: {name} must be an integer"):
            certkit.certify(h, "1/4", **{name: bad})
    assert certkit.certify(h, "1/4", peers=["nystrom"], seed=np.int64(3)).upper.verdict.status == "VERIFIED"


@pytest.mark.parametrize("beta", ["1/3", "2/7", "1/sqrt(7)"])
def test_a_non_dyadic_beta_is_enclosed_at_the_working_precision(tmp_path, beta):
    """beta = 1/3 used to be enclosed once at 53 bits, so no Arb precision could resolve a true claim
    near 1e-16 (a head compared with itself, claimed at 1e-20: REJECTED, or INTERNAL-ERROR): the ball
    of beta is now computed at each pass's precision."""
    import numpy as np
    from fractions import Fraction
    from certkit.choices import check
    from certkit.head import Head
    from certkit.search.writer import certificate
    rng = np.random.default_rng(0)
    h = Head.from_arrays(rng.standard_normal((6, 3)), rng.standard_normal((6, 3)), beta=beta)
    path = certificate(str(tmp_path / "same.json"), "attention-distance", 0, Fraction(1, 10 ** 20), h, {}, replacement=h)
    assert check(path, "fast").status == "REJECTED"                     # float64 cannot see below 1e-14
    for route in ("arb", "auto"):
        v = check(path, route)
        assert v.status == "VERIFIED", (route, v.message)


# ---------------------------------------------------------------- GGUF headers that claim more than they hold
def gguf_bytes(*entries):
    """A GGUF v3 file with no tensors and the given metadata (key, value bytes after the key)."""
    out = b"GGUF" + (3).to_bytes(4, "little") + (0).to_bytes(8, "little") + len(entries).to_bytes(8, "little")
    for key, value in entries:
        out += len(key).to_bytes(8, "little") + key.encode() + value
    return out


def gguf_string(s):
    return len(s).to_bytes(8, "little") + s.encode()


@pytest.mark.parametrize("name, entries, words", [
    ("array-2^40", [("general.bomb", (9).to_bytes(4, "little") + (0).to_bytes(4, "little") + (1 << 40).to_bytes(8, "little"))],
     "'general.bomb': an array of 1099511627776 elements"),
    ("tokens-3M", [("tokenizer.ggml.tokens", (9).to_bytes(4, "little") + (8).to_bytes(4, "little")
                    + (3_000_000).to_bytes(8, "little") + gguf_string("a") * 10)], "an array of 3000000 elements"),
    ("architecture-array", [("general.architecture", (9).to_bytes(4, "little") + (8).to_bytes(4, "little")
                             + (1).to_bytes(8, "little") + gguf_string("llama"))], "general.architecture"),
    ("string-beyond-the-file", [("general.name", (8).to_bytes(4, "little") + (1 << 50).to_bytes(8, "little"))],
     "more than the file holds"),
])
def test_a_gguf_header_is_walked_before_anything_is_allocated(tmp_path, name, entries, words):
    """A 100-byte GGUF that claims a 2^40-element array, a 3,000,000-token list or an array as its
    architecture gets a one-line error naming the key, within a 1 GiB address space (it took 4.85 GB)."""
    import resource
    path = tmp_path / f"{name}.gguf"
    path.write_bytes(gguf_bytes(*entries))

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))
    r = subprocess.run([sys.executable, "-m", "certkit", "certify", "--model", str(path), "--eps", "1/4", "--peers",
                        "none", "--out", str(tmp_path / "out")], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, preexec_fn=limits)
    assert r.returncode == 64 and words in r.stderr and "Traceback" not in r.stderr, (r.returncode, r.stderr[-2000:])


def test_a_head_file_is_sized_from_its_headers_and_unused_arrays_are_never_read(tmp_path):
    """A 3 MB .npz of 200000 x 1 queries and keys asked for 298 GiB of attention; a small .npz holding
    an unused 2 GiB array was read whole.  Now the head's n N is checked (at most 2^28), each known
    array's size is read from its .npy header before the array, and other arrays are not read."""
    import numpy as np
    from certkit.head import Head, HeadError
    np.savez(tmp_path / "wide.npz", Q=np.zeros((200000, 1)), K=np.zeros((200000, 1)), beta=np.array(1.0))
    with pytest.raises(HeadError, match="an attention of 40000000000 entries"):
        Head.from_file(tmp_path / "wide.npz")
    r = run("certify", tmp_path / "wide.npz", "--eps", "1/4", "--peers", "none", "--out", tmp_path / "out")
    assert r.returncode == 64 and "40000000000 entries" in r.stderr and "Traceback" not in r.stderr
    import zipfile
    with zipfile.ZipFile(tmp_path / "unused.npz", "w") as z:          # a header claiming 2^31 float64s, no data
        z.writestr("Q.npy", _npy(np.eye(3)))
        z.writestr("K.npy", _npy(np.eye(3)))
        z.writestr("junk.npy", _npy_header((1 << 31,)))
    h = Head.from_file(tmp_path / "unused.npz", beta=1)
    assert (h.n, h.N) == (3, 3)
    with zipfile.ZipFile(tmp_path / "huge.npz", "w") as z:
        z.writestr("Q.npy", _npy_header((1 << 31, 1)))
        z.writestr("K.npy", _npy(np.eye(3)))
    with pytest.raises(HeadError, match="array 'Q' of shape"):
        Head.from_file(tmp_path / "huge.npz", beta=1)


def _npy(a):
    import io
    import numpy as np
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def _npy_header(shape):
    """The bytes of a .npy header of a float64 array of this shape, without its data."""
    import io
    import numpy as np
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": "<f8", "fortran_order": False, "shape": shape})
    assert buf.getvalue().startswith(b"\x93NUMPY")                   # the magic string and the header
    return buf.getvalue()


def test_a_log_line_nested_past_pythons_stack_is_an_ignored_line(tmp_path):
    """--resume with a --log line of 100,000 '[' (json.loads raised RecursionError: exit 4): the line is
    not a record, so it is ignored and its file is checked again."""
    log = tmp_path / "run.jsonl"
    log.write_text("[" * 100000 + "\n")
    r = run("verify", "--log", log, "--resume", CERT)
    assert r.returncode == 0 and "1 incomplete line(s)" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_token_ids_beyond_int64_are_refused_by_name(tmp_path):
    from certkit.errors import UserError
    from certkit.models.extract import read_tokens_file
    f = tmp_path / "toks.txt"
    f.write_text("12 99999999999999999999999 7\n")
    with pytest.raises(UserError, match="'99999999999999999999999' is not an integer token id"):
        read_tokens_file(f)


# ---------------------------------------------------------------- model folders
@pytest.fixture(scope="module")
def bert_folder(tmp_path_factory):
    transformers = pytest.importorskip("transformers")
    import torch
    folder = tmp_path_factory.mktemp("bert") / "bert"
    c = transformers.BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                intermediate_size=32, max_position_embeddings=64)
    torch.manual_seed(0)
    transformers.BertModel(c).save_pretrained(folder)
    return folder


def copy_with(src, dst, **config):
    import json
    import shutil
    shutil.copytree(src, dst)
    doc = json.loads((dst / "config.json").read_text())
    doc.update(config)
    (dst / "config.json").write_text(json.dumps(doc))
    return dst


@pytest.mark.parametrize("edit, words", [
    ({"model_type": ["bert"]}, "model_type ['bert'] is not supported"),
    ({"model_type": {"a": 1}}, "model_type {'a': 1} is not supported"),
    ({"type_vocab_size": 1 << 24}, "type_vocab_size = 16777216: the token types must be an integer in 1..1024"),
])
def test_config_values_of_the_wrong_type_or_size_are_refused_by_name(bert_folder, tmp_path, edit, words):
    from certkit.models.files import ModelError, check_config
    with pytest.raises(ModelError, match=re.escape(words)):
        check_config(str(copy_with(bert_folder, tmp_path / "m", **edit)))


def test_a_config_nested_past_pythons_stack_is_refused(bert_folder, tmp_path):
    from certkit.models.files import ModelError, check_config
    m = copy_with(bert_folder, tmp_path / "m")
    (m / "config.json").write_text("[" * 200000 + "]" * 200000)
    with pytest.raises(ModelError, match="nested deeper"):
        check_config(str(m))


def test_model_files_that_link_out_of_the_folder_are_refused_but_a_hf_cache_snapshot_loads(bert_folder, tmp_path):
    """As a certificate's sidecar: a config.json or model.safetensors that resolves outside the model
    folder is refused; Hugging Face's cache layout (snapshots/<rev>/ linking to ../../blobs/) is not 'out'."""
    from certkit.models.files import ModelError, check_config, check_weights
    linked = tmp_path / "linked"
    linked.mkdir()
    for f in ("config.json", "model.safetensors"):
        (linked / f).symlink_to(bert_folder / f)
    with pytest.raises(ModelError, match="a link out of the model folder"):
        check_config(str(linked))
    (linked / "config.json").unlink()
    (linked / "config.json").write_text((bert_folder / "config.json").read_text())
    with pytest.raises(ModelError, match="a link out of the model folder"):
        check_weights(str(linked))
    snap, blobs = tmp_path / "models--x" / "snapshots" / "abc", tmp_path / "models--x" / "blobs"
    snap.mkdir(parents=True)
    blobs.mkdir()
    for f, blob in (("config.json", "c1"), ("model.safetensors", "w1")):
        (blobs / blob).write_bytes((bert_folder / f).read_bytes())
        (snap / f).symlink_to(pathlib.Path("..") / ".." / "blobs" / blob)
    assert check_config(str(snap))["model_type"] == "bert" and len(check_weights(str(snap))) == 1


def test_a_config_above_the_reading_limit_is_called_too_large_not_bad_json(bert_folder, tmp_path):
    """A config.json of more than CONFIG_LIMIT bytes (valid JSON, padded) was reported as "not valid JSON"."""
    from certkit.models.files import CONFIG_LIMIT, ModelError, check_config
    m = copy_with(bert_folder, tmp_path / "m")
    (m / "config.json").write_text((m / "config.json").read_text() + " " * CONFIG_LIMIT)
    with pytest.raises(ModelError, match=f"more than the {CONFIG_LIMIT} a config.json may have") as e:
        check_config(str(m))
    assert "not valid JSON" not in str(e.value)


WORDLEVEL = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
             "pre_tokenizer": {"type": "Whitespace"}, "post_processor": None, "decoder": None,
             "model": {"type": "WordLevel", "vocab": {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3}, "unk_token": "[UNK]"}}


def certify_model_in_process(folder, tmp_path, capsys, *extra):
    from certkit.cli import main
    code = main(["certify", "--model", str(folder), "--length", "8", "--eps", "1/4", "--peers", "none",
                 "--out", str(tmp_path / "out"), *extra])
    return code, capsys.readouterr().err.strip().splitlines()[-1]


def test_a_tokenizer_whose_vocabulary_lacks_its_unk_token_is_a_one_line_error(bert_folder, tmp_path, capsys):
    """A WordLevel tokenizer.json without its unk token loads, then fails on the first unknown word
    (tokenizers' "WordLevel error: Missing [UNK] token"): exit 64 naming tokenizer.json, not exit 4."""
    import json
    m = copy_with(bert_folder, tmp_path / "m")
    (m / "tokenizer.json").write_text(json.dumps(WORDLEVEL))
    (m / "tokenizer_config.json").write_text(json.dumps({"tokenizer_class": "PreTrainedTokenizerFast"}))
    code, last = certify_model_in_process(m, tmp_path, capsys)
    assert code == 64, last
    assert f"{m / 'tokenizer.json'}: the tokenizer fails on" in last and "Missing [UNK] token" in last
    assert "internal error" not in last and not (tmp_path / "out").exists()


@pytest.mark.parametrize("how", ["link-out", "unreadable"])
def test_refused_tokenizer_files_are_not_called_missing(bert_folder, tmp_path, capsys, how):
    """Tokenizer files that exist but were refused (a tokenizer.json linking out of the model folder,
    as config.json and the weights may not; one transformers cannot read) used to be reported as "no
    tokenizer files": the error says they exist and why they were refused."""
    import json
    m = copy_with(bert_folder, tmp_path / "m")
    good = dict(WORDLEVEL, model=dict(WORDLEVEL["model"], vocab={**WORDLEVEL["model"]["vocab"], "[UNK]": 4}))
    if how == "link-out":
        (tmp_path / "elsewhere.json").write_text(json.dumps(good))
        (m / "tokenizer.json").symlink_to(tmp_path / "elsewhere.json")
        why = "a link out of the model folder"
    else:
        (m / "tokenizer.json").write_text("{ not json")
        why = "transformers cannot read them"
    code, last = certify_model_in_process(m, tmp_path, capsys)
    assert code == 64, last
    assert "has tokenizer files, but certkit refused them" in last and why in last and "tokenizer.json" in last
    assert "no tokenizer files" not in last


def test_a_full_disk_under_compare_names_the_file_it_could_not_write(tmp_path, monkeypatch, capsys):
    """On a full disk the lock file's pid is the first write of a run: its ENOSPC was "cannot write
    output" (no file named).  Simulated here: the lock file's writes fail with ENOSPC."""
    import errno
    from certkit import outputs
    from certkit.cli import main

    class Full:
        def __init__(self, f):
            self._f = f

        def __getattr__(self, name):
            return getattr(self._f, name)

        def write(self, data):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        flush = write

    real_open = open
    monkeypatch.setattr(outputs, "open", lambda *a, **k: Full(real_open(*a, **k)), raising=False)
    code = main(["compare", "--synthetic", "gaussian:n=8,d=2", "--method", "lowrank:k=1", "--out", str(tmp_path / "out")])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 73, last
    assert str(tmp_path / "out" / ".certkit.lock") in last and "the disk is full" in last, last


@pytest.fixture(scope="module")
def llama_folder(tmp_path_factory):
    """A tiny random Llama (2 layers x 4 heads, no tokenizer) and a token file for it."""
    transformers = pytest.importorskip("transformers")
    import numpy as np
    import torch
    folder = tmp_path_factory.mktemp("llama") / "llama"
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=64)).save_pretrained(folder)
    (folder.parent / "tokens.txt").write_text(" ".join(map(str, np.random.default_rng(0).integers(3, 96, 64))))
    return folder


def test_kill_9_of_a_model_run_with_workers_leaves_nothing_in_tmpdir(llama_folder, tmp_path):
    """kill -9 of `certify --model --workers 2` left the workers' /tmp/certkit-* folders behind: the
    searches' temporary certificates now live under --out (.certkit-work-*, cleared by the next run
    into that folder), so TMPDIR stays empty.  torch's own cache folder is pointed elsewhere."""
    import time
    tmp, out = tmp_path / "tmp", tmp_path / "out"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONPATH=str(ROOT), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "torch"))
    p = subprocess.Popen([sys.executable, "-m", "certkit", "certify", "--model", str(llama_folder), "--tokens",
                          str(llama_folder.parent / "tokens.txt"), "--length", "48", "--workers", "2", "--peers", "none",
                          "--out", str(out)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)

    def working():                      # a worker is inside a sandwich: its temporary folder exists
        return any(f.name.startswith("certkit-") for f in tmp.iterdir()) or \
            (out.is_dir() and any(f.name.startswith(".certkit-work-") for f in out.iterdir()))
    t0 = time.time()
    while not working() and p.poll() is None and time.time() - t0 < 120:
        time.sleep(0.02)
    assert p.poll() is None, "the run ended before a worker was caught working"
    p.kill()
    p.wait(timeout=30)
    time.sleep(2.0)                     # the workers die with their parent (PR_SET_PDEATHSIG)
    assert list(tmp.iterdir()) == []
    from certkit.search.sandwich import WORK_PREFIX, remove_stale_work     # what the next run into --out clears
    remove_stale_work(str(out))
    assert not [f for f in out.iterdir() if f.name.startswith(WORK_PREFIX)]


def test_a_weight_index_nested_past_pythons_stack_is_refused(bert_folder, tmp_path):
    from certkit.models.files import ModelError, check_weights
    m = copy_with(bert_folder, tmp_path / "m")
    (m / "model.safetensors.index.json").write_text("[" * 200000 + "]" * 200000)
    with pytest.raises(ModelError, match="nested deeper|index"):
        check_weights(str(m))


@pytest.mark.parametrize("option, value", [("--layers", "0-100000000"), ("--heads", "0-99999999999999999999")])
def test_huge_layer_or_head_ranges_are_refused_before_they_are_expanded(bert_folder, tmp_path, option, value):
    """They took 38 s and 4.75 GB before failing: ranges are checked against the model's shape first."""
    import time
    (tmp_path / "t.txt").write_text("a b c d e f g h i j k l")
    t = time.perf_counter()
    r = run("certify", "--model", bert_folder, "--tokens", tmp_path / "t.txt", "--length", "8", option, value,
            "--eps", "1/4", "--peers", "none", "--out", tmp_path / "out")
    assert r.returncode == 64 and "Traceback" not in r.stderr, r.stderr[-2000:]
    assert option in r.stderr.strip().splitlines()[-1] and time.perf_counter() - t < 60


def test_the_api_takes_a_beta_of_any_size_and_refuses_a_head_too_large_to_hold(tmp_path):
    """beta = 1/sqrt(<1500 nines>) raised OverflowError in float(); a 200000 x 1 head asked for 298 GiB."""
    import numpy as np
    import certkit
    h = certkit.Head.from_arrays(np.eye(3), np.eye(3), beta="1/sqrt(" + "9" * 1500 + ")")
    assert h.beta_float == 0.0 and certkit.certify(h, "1/4", peers=()).upper.bound == 1      # A is uniform
    with pytest.raises(certkit.UserError, match="2\\^28"):
        certkit.certify(certkit.Head.from_arrays(np.zeros((200000, 1)), np.zeros((200000, 1)), beta=1), "1/4",
                        peers=())
    r = run("certify", "--synthetic", "gaussian:n=8,d=2", "--beta", "1/sqrt(" + "9" * 1500 + ")", "--eps", "1/4",
            "--peers", "none", "--out", tmp_path / "out")
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-2000:]
