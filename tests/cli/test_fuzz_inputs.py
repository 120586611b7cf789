"""A fuzzer of the files and the Python API: hypothesis mutates valid inputs (golden certificates and
their .npy sidecars, .npz / .safetensors head files, a tiny GGUF written with gguf.GGUFWriter (tests/gguf_files.py),
tiny random BERT and Llama folders) and draws the API's arguments, then runs each case in its own process
under a memory limit (RLIMIT_AS) and a wall-time limit.  The promises, for every case:

* the exit code is in the documented set (verify: a verdict 0-3, never 4; other commands: 0-3 or a
  sysexits code; the API: a return or a certkit.UserError, never another exception class);
* no "Traceback" on stderr; the process ends within its time limit and its peak RSS is bounded;
* nothing is written outside the output folder: the inputs are unchanged, the working folder,
  HOME and TMPDIR hold nothing new;
* soundness: a certificate whose claim was made false is never VERIFIED.  "False" is kept simple
  and provable (every row of A sums to 1 and rank A <= min(n, N)): a ">=" bound raised above
  min(n, N); a "<=" bound made negative; a "<=" bound lowered to 0 with eps lowered below the
  original (any eps < 1: the zero matrix is 1 away from every row); a ">=" bound >= 1 at eps >= 1.

A short budget runs with the suite (derandomized, so CI is reproducible); `pytest -m heavy
tests/cli/test_fuzz_inputs.py` goes deeper.  Its findings are fixed and kept in tests/cli/test_hostile_inputs.py."""
import hashlib
import json
import os
import shutil
import signal
import struct
import sys
import time
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import HealthCheck, Phase, given, settings, strategies as st

import gguf_files
from paths import ROOT

GOLDEN = ROOT / "tests" / "golden" / "valid"
ALLOWED = {0, 1, 2, 3, 64, 65, 66, 69, 73}        # verdicts 0-3 and sysexits; 4 is a bug, < 0 a kill
VERDICTS = {0, 1, 2, 3}
MEMORY = 3 << 30                                  # bytes of address space per process
RSS = 1536 << 20                                  # peak resident bytes a tiny input may cost (torch included)
SECONDS = 150                                     # wall time per process (2 shared cores, torch imported)
NO_SHRINK = [Phase.explicit, Phase.generate]           # a case costs seconds: report it as drawn
FAST = dict(deadline=None, suppress_health_check=list(HealthCheck), derandomize=True, phases=NO_SHRINK, database=None)
DEEP = dict(deadline=None, suppress_health_check=list(HealthCheck), phases=NO_SHRINK, database=None)
FINDINGS = os.environ.get("CERTKIT_FUZZ_FINDINGS")    # a deep run's log: failures are appended there, not raised
CACHES = ("hf", "mpl", "torch")                        # HOME's caches the libraries may fill (pointed there by run())


# ---------------------------------------------------------------- one process per case
def run(argv, tmp, seconds=SECONDS):
    """python argv in its own process (cwd tmp/cwd, HOME and TMPDIR inside tmp) under RLIMIT_AS and a
    wall-time limit; returns (exit code, stdout, stderr, peak RSS in bytes, seconds)."""
    import resource

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    env = dict(os.environ, HOME=str(tmp / "home"), TMPDIR=str(tmp / "tmp"), PYTHONPATH=str(ROOT),
               HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", HF_HOME=str(tmp / "home" / "hf"),
               MPLCONFIGDIR=str(tmp / "home" / "mpl"), TORCHINDUCTOR_CACHE_DIR=str(tmp / "home" / "torch"))
    for d in ("home", "tmp", "cwd"):
        (tmp / d).mkdir(exist_ok=True)
    import subprocess
    with open(tmp / "stdout", "w+") as out, open(tmp / "stderr", "w+") as err:
        t0 = time.monotonic()
        p = subprocess.Popen([sys.executable, *argv], stdout=out, stderr=err, stdin=subprocess.DEVNULL, env=env,
                             cwd=tmp / "cwd", preexec_fn=limits, start_new_session=True)
        while True:
            pid, status, usage = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            if time.monotonic() - t0 > seconds:
                os.killpg(p.pid, signal.SIGKILL)
                os.wait4(p.pid, 0)
                p.returncode = -9
                pytest.fail(f"{' '.join(map(str, argv))[:300]}: still running after {seconds} s")
            time.sleep(0.02)
        elapsed = time.monotonic() - t0
        p.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return code, out.read(), err.read(), usage.ru_maxrss * 1024, elapsed


def certkit(args, tmp, **kw):
    return run(["-m", "certkit", *map(str, args)], tmp, **kw)


def tree(folder):
    """What a folder holds: {relative path: sha256 or link target}, links not followed."""
    if not folder.exists():
        return {}
    found = {}
    for p in sorted(folder.rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            found[rel] = "-> " + os.readlink(p)
        elif p.is_file():
            found[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
        else:
            found[rel] = "dir"
    return found


def judged(what, result, tmp, inputs_before, allowed=ALLOWED):
    """The promises for one run: allowed exit code, no traceback, bounded RSS, nothing written
    outside cwd/out (the inputs under cwd/in unchanged; TMPDIR, the rest of cwd and HOME but for
    the libraries' caches empty).  With CERTKIT_FUZZ_FINDINGS set, a failure is logged there instead."""
    if FINDINGS:
        try:
            promised(what, result, tmp, inputs_before, allowed)
        except AssertionError as e:
            with open(FINDINGS, "a") as f:
                f.write(json.dumps({"case": repr(what)[:4000], "failure": repr(e)[:4000], "code": result[0],
                                    "rss_mib": result[3] >> 20, "seconds": round(result[4], 1)}) + "\n")
        return
    promised(what, result, tmp, inputs_before, allowed)


def promised(what, result, tmp, inputs_before, allowed):
    code, out, err, rss, _ = result
    assert code in allowed, (what, code, err[-3000:])
    assert "Traceback" not in err and "Traceback" not in out, (what, err[-3000:])
    assert rss <= RSS, (what, f"peak RSS {rss >> 20} MiB")
    cwd = tmp / "cwd"
    stray = [p for p in cwd.iterdir() if p.name not in ("in", "out")]
    assert not stray, (what, stray[:5])
    assert tree(cwd / "in") == inputs_before, (what, "an input changed")
    assert not list((tmp / "tmp").iterdir()), (what, list((tmp / "tmp").iterdir())[:5])
    leftover = [p for p in (tmp / "home").rglob("*") if p.is_file() and p.relative_to(tmp / "home").parts[0] not in CACHES]
    assert not leftover, (what, leftover[:5])


def fresh(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("fuzz")
    (tmp / "cwd" / "in").mkdir(parents=True)
    return tmp


# ---------------------------------------------------------------- values a hostile file carries
NUMERALS = ["0", "-0", "1", "-1", "1/0", "0/0", "nan", "NaN", "inf", "-Infinity", "1e308", "1e-2000", "1e2000",
            "0x1p-1074", "0x1.8p+1", "9" * 400, "1/" + "9" * 300, "", " ", "1_000", "\u0661", "1/sqrt(0)",
            "1/sqrt(-4)", "1/sqrt(" + "9" * 200 + ")", "2/sqrt(8)", "[1, 2]", "1e", "--1", "+1", "0.5", "1/3"]
json_scalars = st.one_of(
    st.none(), st.booleans(),
    st.sampled_from([0, -1, 1, 2, 3, 7, 64, 1 << 16, 1 << 24, 1 << 31, (1 << 31) - 1, 1 << 32, 1 << 40, 1 << 53,
                     1 << 63, (1 << 64) - 1, 1 << 64, -(1 << 63), 10 ** 30, 10 ** 400]),
    st.integers(-(1 << 70), 1 << 70),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from(NUMERALS),
    st.text(max_size=12))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                                 st.dictionaries(st.text(max_size=8), inner, max_size=3)),
                           max_leaves=8)
SPECIAL_JSON = ["NaN", "Infinity", "-Infinity", "1e999", "-1e999", "1" * 5000, "[" * 50000 + "]" * 50000,
                "{\"a\":" * 30000 + "1" + "}" * 30000, "0.0000000000000000000000000000001e-400", "-0.0", "1E+2", "\"\\ud800\""]


def nested(depth):
    return "[" * depth + "]" * depth


# ---------------------------------------------------------------- (a) certificates
VALID = sorted(p for p in GOLDEN.glob("*.json"))
_SIDECAR_TARGETS = ["/dev/zero", "/dev/urandom", "/etc/passwd", "/proc/self/mem", ".", "..", "", "in", "../in",
                    "nonexistent.npy", "../" + "x.npy", "/", "a" * 5000, "x\u0000y.npy"]


def paths_of(doc, prefix=()):
    """Every path (tuple of keys / indices) into a JSON document, the root excluded; long arrays
    contribute their first rows only."""
    found = []
    if isinstance(doc, dict):
        for k, v in doc.items():
            found.append(prefix + (k,))
            found += paths_of(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc[:3]):
            found.append(prefix + (i,))
            found += paths_of(v, prefix + (i,))
    return found


def at(doc, path):
    for k in path:
        doc = doc[k]
    return doc


def sidecars(doc):
    """The {"file": ...} references of a certificate: [(path to the reference, its dict)]."""
    return [(p, at(doc, p)) for p in paths_of(doc) if isinstance(at(doc, p), dict) and "file" in at(doc, p)]


def npy_with_header(raw, header):
    """A .npy file's bytes with its header dict text replaced (version 1.0 framing, data kept)."""
    major = raw[6]
    hlen_size = 2 if major == 1 else 4
    hlen = int.from_bytes(raw[8:8 + hlen_size], "little")
    data = raw[8 + hlen_size + hlen:]
    text = header.encode("latin1")
    text += b" " * ((-(10 + len(text) + 1)) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text + data if len(text) < 65536 else \
        b"\x93NUMPY\x02\x00" + len(text).to_bytes(4, "little") + text + data


NPY_HEADERS = st.one_of(
    st.builds(lambda d, f, s: "{'descr': %r, 'fortran_order': %s, 'shape': %s, }" % (d, f, s),
              st.sampled_from(["<f8", ">f8", "<f4", "<f2", "<i8", "|u1", "|b1", "<c16", "|O", "<U8", "|V8", "<M8[s]",
                               "f8", "<f16", "", "[('a', '<f8')]"]),
              st.sampled_from(["False", "True", "0", "None"]),
              st.one_of(st.lists(st.sampled_from([0, 1, 2, 8, 40, -1, 1 << 20, 1 << 31, 1 << 62, 10 ** 20]),
                                 max_size=4).map(lambda s: repr(tuple(s))),
                        st.sampled_from(["None", "'x'", "(40, 8)", "(8, 40)", "(40,)", "(1, 320)", "()", "[40, 8]"]))),
    st.sampled_from(["", "{", "{}", "{'descr': '<f8'}", "not a dict", "__import__('os').system('true')",
                     "{'descr': '<f8', 'fortran_order': False, 'shape': (40, 8), 'extra': 1}"]))


@st.composite
def certificate_mutations(draw, names=VALID):
    """(name of a golden certificate, list of mutations, is the claim made false)."""
    name = draw(st.sampled_from(names))
    doc = json.loads(name.read_text())
    ops = draw(st.lists(st.sampled_from(["value", "drop", "duplicate", "shape", "sidecar", "npy", "bytes", "truncate",
                                         "special", "nested", "falsify"]), min_size=1, max_size=3))
    if "falsify" in ops:
        ops = ["falsify"] + draw(st.lists(st.sampled_from(["witness-value", "provenance"]), max_size=1))
    muts = []
    for op in ops:
        if op in ("value", "drop", "duplicate", "shape", "special", "nested", "witness-value", "provenance"):
            paths = paths_of(doc)
            if op == "witness-value":
                paths = [p for p in paths if p[0] == "witness"] or paths
            if op == "provenance":
                paths = [p for p in paths if p[0] == "provenance"] or paths
            if op == "shape":
                paths = [p for p in paths if isinstance(at(doc, p), list)] or paths
            path = draw(st.sampled_from(paths))
            if op in ("value", "witness-value", "provenance"):
                muts.append(("set", path, draw(json_values)))
            elif op == "shape":
                muts.append(("shape", path, draw(st.sampled_from(["drop-row", "add-row", "short-row", "transpose",
                                                                  "empty", "flatten", "wrap"]))))
            elif op in ("special", "nested"):
                text = draw(st.sampled_from(SPECIAL_JSON)) if op == "special" else nested(draw(st.sampled_from(
                    [10, 100, 999, 1000, 5000, 200000])))
                muts.append(("raw", path, text))
            else:
                muts.append((op, path, None))
        elif op == "sidecar":
            refs = sidecars(doc)
            if not refs:
                continue
            ref, _ = draw(st.sampled_from(refs))
            field = draw(st.sampled_from(["file", "sha256", "dtype", "shape"]))
            value = {"file": st.one_of(st.sampled_from(_SIDECAR_TARGETS + [str(GOLDEN / p.name) for p in GOLDEN.glob("*.npy")]),
                                       st.sampled_from(["link-to:/dev/zero", "link-to:/etc/passwd", "link-to:sibling",
                                                        "link-to:outside"])),
                     "sha256": st.one_of(st.sampled_from(["", "0" * 64, "g" * 64, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"]),
                                         json_values),
                     "dtype": st.one_of(st.sampled_from(["float32", "int64", "int8", "object", "float128", "<f8", "bool", "str"]),
                                        json_values),
                     "shape": st.one_of(st.lists(st.sampled_from([0, 1, 8, 40, -1, 1 << 31, 1 << 62, 10 ** 20]), max_size=4),
                                        json_values)}[field]
            muts.append(("sidecar", ref + (field,), draw(value)))
        elif op == "npy":
            refs = sidecars(doc)
            if not refs:
                continue
            _, ref = draw(st.sampled_from(refs))
            kind = draw(st.sampled_from(["header", "flip", "truncate"]))
            detail = draw(NPY_HEADERS) if kind == "header" else draw(st.integers(0, 1 << 16))
            muts.append(("npy", ref["file"], (kind, detail, draw(st.booleans()))))     # rehash: the sha256 follows
        elif op in ("bytes", "truncate"):
            muts.append((op, draw(st.integers(0, 1 << 20)), draw(st.integers(0, 255))))
        elif op == "falsify":
            muts.append(("falsify", None, draw(st.tuples(st.integers(1, 10 ** 6), st.integers(1, 200), st.integers(0, 3)))))
    return name, muts


def apply_certificate_mutations(name, muts, folder):
    """Write the mutated certificate (and its sidecars) into folder; returns (path, claim made false)."""
    doc = json.loads(name.read_text())
    for p, ref in sidecars(doc):
        shutil.copy(GOLDEN / ref["file"], folder / ref["file"])
    raws, false = {}, False
    tail = []
    for op, path, arg in muts:
        try:
            apply_one(doc, op, path, arg, name, folder, raws, tail)
        except (KeyError, IndexError, TypeError):             # an earlier edit removed what this one edits
            continue
        false = false or op == "falsify"
    text = json.dumps(doc, indent=1)
    for key, value in raws.items():
        if value == "dup":
            name_ = key[-1]
            if isinstance(name_, str):                     # the key written twice, the second value a string
                text = text.replace(json.dumps(name_) + ":", json.dumps(name_) + ": \"dup\", " + json.dumps(name_) + ":", 1)
        else:
            text = text.replace(json.dumps(key), value, 1)
    raw = text.encode()
    for op, offset, byte in tail:
        i = offset % (len(raw) + (op == "truncate"))
        raw = raw[:i] if op == "truncate" else raw[:i] + bytes([byte]) + raw[i + 1:]
    path = folder / name.name
    path.write_bytes(raw)
    return path, false


def apply_one(doc, op, path, arg, name, folder, raws, tail):
    """One mutation of the certificate doc (raw JSON text and byte edits are queued in raws and tail)."""
    if op == "set":
        at(doc, path[:-1])[path[-1]] = arg
    elif op == "drop":
        parent = at(doc, path[:-1])
        del parent[path[-1]]
    elif op == "duplicate":
        raws[path] = "dup"
    elif op == "raw":
        token = f"@@RAW{len(raws)}@@"
        at(doc, path[:-1])[path[-1]] = token
        raws[token] = arg
    elif op == "shape":
        a = at(doc, path)
        if not isinstance(a, list):
            return
        new = {"drop-row": a[:-1], "add-row": a + a[:1], "empty": [], "wrap": [a],
               "short-row": [r[:-1] if isinstance(r, list) else r for r in a],
               "flatten": [x for r in a for x in (r if isinstance(r, list) else [r])],
               "transpose": [list(c) for c in zip(*a)] if a and all(isinstance(r, list) for r in a) else a}[arg]
        at(doc, path[:-1])[path[-1]] = new
    elif op == "sidecar":
        ref = at(doc, path[:-1])
        if path[-1] == "file" and isinstance(arg, str) and arg.startswith("link-to:"):
            target = arg[len("link-to:"):]
            if target == "sibling":
                target = next((r["file"] for _, r in sidecars(json.loads(name.read_text()))), "x")
            elif target == "outside":
                (folder.parent / "outside.npy").write_bytes((GOLDEN / ref["file"]).read_bytes()
                                                            if (GOLDEN / str(ref["file"])).is_file() else b"")
                target = str(folder.parent / "outside.npy")
            link = folder / ("link-" + str(len(tail)) + ".npy")
            if not os.path.lexists(link):
                link.symlink_to(target)
            ref["file"] = link.name
        else:
            ref[path[-1]] = arg
    elif op == "npy":
        kind, detail, rehash = arg
        f = folder / path
        if not f.is_file():
            return
        raw = f.read_bytes()
        if kind == "header":
            raw = npy_with_header(raw, detail)
        elif kind == "flip":
            i = detail % len(raw)
            raw = raw[:i] + bytes([raw[i] ^ 0xFF]) + raw[i + 1:]
        else:
            raw = raw[:detail % (len(raw) + 1)]
        f.write_bytes(raw)
        if rehash:
            for _, r in sidecars(doc):
                if r.get("file") == path:
                    r["sha256"] = hashlib.sha256(raw).hexdigest()
    elif op in ("bytes", "truncate"):
        tail.append((op, path, arg))
    elif op == "falsify":
        big, shift, which = arg
        claim = doc["claim"]
        n, N = len_of(doc["instance"].get("queries"), folder), len_of(doc["instance"].get("keys"), folder)
        eps = Fraction(claim["eps"])
        if claim["relation"] == ">=":
            if which % 2 == 0:                         # rank A <= min(n, N) < bound
                claim["bound"] = str(min(n, N) + big)
            else:                                      # every row is within 1 of the zero matrix
                claim["bound"] = str(max(1, int(claim["bound"])))
                claim["eps"] = str(1 + Fraction(big, shift))
        else:
            if which % 2 == 0:                         # no rank is negative
                claim["bound"] = str(-big)
            else:                                      # rank 0 means B = 0, 1 away from every row
                claim["bound"] = "0"
                lower = eps / (1 << shift)
                claim["eps"] = f"{lower.numerator}/{lower.denominator}"


def len_of(ref, folder):
    if isinstance(ref, list):
        return len(ref)
    return int(ref["shape"][0])


def check_certificate_case(tmp_path_factory, case):
    name, muts = case
    tmp = fresh(tmp_path_factory)
    path, false = apply_certificate_mutations(name, muts, tmp / "cwd" / "in")
    before = tree(tmp / "cwd" / "in")
    result = certkit(["verify", path.relative_to(tmp / "cwd")], tmp)
    judged((name.name, muts), result, tmp, before, allowed=VERDICTS)
    if false and (result[0] == 0 or result[1].startswith("VERIFIED")):
        message = f"a false claim VERIFIED: {name.name} {muts!r} {result[1][-2000:]}"
        if not FINDINGS:
            pytest.fail(message)
        with open(FINDINGS, "a") as f:
            f.write(json.dumps({"case": message[:4000], "failure": "unsound"}) + "\n")


@settings(max_examples=10, **FAST)
@given(case=certificate_mutations())
def test_mutated_certificates(tmp_path_factory, case):
    check_certificate_case(tmp_path_factory, case)


@pytest.mark.heavy
@settings(max_examples=300, **DEEP)
@given(case=certificate_mutations())
def test_deep_mutated_certificates(tmp_path_factory, case):
    check_certificate_case(tmp_path_factory, case)


# ---------------------------------------------------------------- (b) head files
def npy_bytes(a):
    import io
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=False)
    return buf.getvalue()


def safetensors_bytes(arrays):
    header, data = {}, b""
    for k, a in arrays.items():
        raw = np.ascontiguousarray(a).tobytes()
        header[k] = {"dtype": {"float64": "F64", "float32": "F32", "int64": "I64"}[a.dtype.name], "shape": list(a.shape),
                     "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    return header, data


def safetensors_file(header, data, size=None):
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return (len(text) if size is None else size).to_bytes(8, "little") + text + data


SAFETENSORS_DTYPES = ["F64", "F32", "F16", "BF16", "I64", "I32", "U8", "I8", "BOOL", "F8_E4M3", "F8_E5M2", "U64", "C64", "XX", ""]
dims = st.sampled_from([0, 1, 3, 8, -1, 1 << 16, 1 << 31, 1 << 62, 10 ** 20, "8", None, 2.5])


@st.composite
def head_files(draw):
    """(file name, bytes) of a mutated head file."""
    rng = np.random.default_rng(draw(st.integers(0, 3)))
    n, d = draw(st.sampled_from([(8, 3), (4, 2), (1, 1)]))
    arrays = {"Q": rng.standard_normal((n, d)), "K": rng.standard_normal((n, d)), "beta": np.array(1.0)}
    if draw(st.booleans()):
        arrays["weights"] = rng.random(n)
    if draw(st.booleans()):
        arrays["bias"] = rng.standard_normal((n, n))
    kind = draw(st.sampled_from(["npz", "safetensors"]))
    key = draw(st.sampled_from(sorted(arrays) + ["junk"]))
    op = draw(st.sampled_from(["header", "value", "drop", "flip", "truncate", "rename"] +
                              (["st-header", "st-size", "st-offsets", "st-dtype", "st-shape"] if kind == "safetensors" else [])))
    if op == "value":
        arrays[key] = draw(st.sampled_from([np.array(np.nan), np.array(np.inf), np.array(-1.0), np.array(1e308),
                                            np.zeros((0, d)), np.zeros((n, 0)), np.zeros((n, d + 1)), np.zeros(n),
                                            np.array([[1e308] * d] * n), np.array(0.0), np.zeros((n, d), dtype=np.int64),
                                            np.zeros((n, d), dtype=np.float32), np.zeros((2, 2, 2))]))
    elif op == "drop" and key in arrays:
        del arrays[key]
    elif op == "rename" and key in arrays:
        arrays[draw(st.sampled_from(["queries", "keys", "q", "", "Q.npy", "../Q", "w" * 300]))] = arrays.pop(key)
    if kind == "npz":
        import io
        import zipfile
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for k, a in arrays.items():
                raw = npy_bytes(a)
                if op == "header" and k == key:
                    raw = npy_with_header(raw, draw(NPY_HEADERS))
                z.writestr(k + ".npy", raw)
            if key == "junk" and op == "header":
                z.writestr("junk.npy", npy_with_header(npy_bytes(np.zeros(1)), draw(NPY_HEADERS)))
        raw = buf.getvalue()
    else:
        arrays = {k: a for k, a in arrays.items() if a.dtype.name in ("float64", "float32", "int64")}
        header, data = safetensors_bytes(arrays)
        size = None
        target = header.get(key) or next(iter(header.values()), {})
        if op == "st-header":
            header[draw(st.sampled_from(list(header) + ["__metadata__"]))] = draw(json_values)
        elif op == "st-size":
            size = draw(st.sampled_from([0, 1, 7, 8, 1 << 20, 1 << 32, 1 << 63, (1 << 64) - 1]))
        elif op == "st-offsets":
            target["data_offsets"] = draw(st.one_of(st.lists(st.sampled_from([0, 8, 64, -1, 1 << 40, (1 << 64) - 1, 1 << 64]),
                                                             max_size=3), json_values))
        elif op == "st-dtype":
            target["dtype"] = draw(st.one_of(st.sampled_from(SAFETENSORS_DTYPES), json_values))
        elif op == "st-shape":
            target["shape"] = draw(st.one_of(st.lists(dims, max_size=4), json_values))
        raw = safetensors_file(header, data, size)
    if op == "flip":
        i = draw(st.integers(0, len(raw) - 1))
        raw = raw[:i] + bytes([raw[i] ^ draw(st.integers(1, 255))]) + raw[i + 1:]
    elif op == "truncate":
        raw = raw[:draw(st.integers(0, len(raw)))]
    return f"head.{kind}", raw


def check_head_case(tmp_path_factory, case, command):
    name, raw = case
    tmp = fresh(tmp_path_factory)
    (tmp / "cwd" / "in" / name).write_bytes(raw)
    before = tree(tmp / "cwd" / "in")
    args = {"certify": ["certify", f"in/{name}", "--eps", "1/4", "--peers", "none", "--attempts", "2", "--out", "out"],
            "compare": ["compare", f"in/{name}", "--method", "lowrank:k=1", "--out", "out"]}[command]
    judged((name, raw[:200], command), certkit(args, tmp), tmp, before)


@settings(max_examples=6, **FAST)
@given(case=head_files(), command=st.sampled_from(["certify", "compare"]))
def test_mutated_head_files(tmp_path_factory, case, command):
    check_head_case(tmp_path_factory, case, command)


@pytest.mark.heavy
@settings(max_examples=120, **DEEP)
@given(case=head_files(), command=st.sampled_from(["certify", "compare"]))
def test_deep_mutated_head_files(tmp_path_factory, case, command):
    check_head_case(tmp_path_factory, case, command)


# ---------------------------------------------------------------- (c) GGUF files
GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
V, H, NH, NKV, F, P = 64, 16, 2, 1, 32, 32


@pytest.fixture(scope="module")
def tiny_gguf(tmp_path_factory):
    """A tiny random one-layer Llama as GGUF (float32 tensors, a byte tokenizer), written with GGUFWriter."""
    pytest.importorskip("gguf")
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    rng = np.random.default_rng(0)
    t = lambda *shape: (rng.standard_normal(shape) * 0.2).astype(np.float32)   # noqa: E731
    tensors = {"token_embd.weight": t(V, H)}
    for name, shape in (("attn_norm", (H,)), ("attn_q", (H, H)), ("attn_k", (H // NH * NKV, H)),
                        ("attn_v", (H // NH * NKV, H)), ("attn_output", (H, H)), ("ffn_norm", (H,)),
                        ("ffn_gate", (F, H)), ("ffn_up", (F, H)), ("ffn_down", (H, F))):
        tensors[f"blk.0.{name}.weight"] = t(*shape) + (1.0 if name.endswith("norm") else 0.0)
    tensors["output_norm.weight"] = t(H) + 1.0
    tensors["output.weight"] = t(V, H)
    gguf_files.write_tensors(path, tensors, vocab=V, block_count=1, context_length=P, embedding_length=H,
                             feed_forward_length=F, head_count=NH, head_count_kv=NKV)
    (path.parent / "tokens.txt").write_text(" ".join(map(str, np.random.default_rng(1).integers(3, V, 32))))
    return path


def gguf_fields(raw):
    """Walk a (valid) GGUF header: the integer fields [(offset, width, what)], the strings
    [(offset of the length, what)], the key/values [(key, start, end)] and the header's end."""
    fields, strings, kvs = [], [], []
    pos = 4

    def integer(width, what):
        nonlocal pos
        fields.append((pos, width, what))
        v = int.from_bytes(raw[pos:pos + width], "little")
        pos += width
        return v

    def string(what):
        nonlocal pos
        strings.append((pos, what))
        n = integer(8, what + " length")
        pos += n

    def value(t, what):
        nonlocal pos
        if t == 8:
            string(what)
        elif t == 9:
            et = integer(4, what + " item type")
            count = integer(8, what + " count")
            for i in range(count):
                value(et, f"{what}[{i}]") if i < 4 else skip(et)
        else:
            fields.append((pos, struct.calcsize(GGUF_SCALARS[t]), what))
            pos += struct.calcsize(GGUF_SCALARS[t])

    def skip(t):
        nonlocal pos
        if t == 8:
            pos += 8 + int.from_bytes(raw[pos:pos + 8], "little")
        else:
            pos += struct.calcsize(GGUF_SCALARS[t])

    integer(4, "version")
    n_tensors = integer(8, "tensor count")
    n_kv = integer(8, "kv count")
    for _ in range(n_kv):
        start = pos
        klen = int.from_bytes(raw[pos:pos + 8], "little")
        key = raw[pos + 8:pos + 8 + klen].decode()
        string("key")
        t = integer(4, key + " type")
        value(t, key)
        kvs.append((key, start, pos))
    for _ in range(n_tensors):
        string("tensor name")
        nd = integer(4, "tensor n_dims")
        for _ in range(nd):
            integer(8, "tensor dim")
        integer(4, "tensor type")
        integer(8, "tensor offset")
    return fields, strings, kvs, pos


def gguf_value(t, v):
    """A GGUF value's bytes (type then payload): t one of the type codes, v a Python value."""
    if t == 8:
        b = str(v).encode("utf-8", "surrogatepass")
        return struct.pack("<IQ", 8, len(b)) + b
    if t == 9:
        et, items = v
        return struct.pack("<IIQ", 9, et, len(items)) + b"".join(gguf_value(et, x)[4:] for x in items)
    fmt = GGUF_SCALARS[t]
    lo, hi = {"<B": (0, 255), "<b": (-128, 127), "<H": (0, 65535), "<h": (-32768, 32767), "<I": (0, 2 ** 32 - 1),
              "<i": (-2 ** 31, 2 ** 31 - 1), "<Q": (0, 2 ** 64 - 1), "<q": (-2 ** 63, 2 ** 63 - 1)}.get(fmt, (None, None))
    if lo is not None:
        v = min(max(int(v), lo), hi)
    return struct.pack("<I" + fmt[1:], t, v)


INTS = st.one_of(st.sampled_from([0, 1, 2, 3, 4, 5, 8, 9, 12, 13, 255, 1 << 16, (1 << 31) - 1, 1 << 31, (1 << 32) - 1,
                                  1 << 32, 1 << 40, 1 << 62, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]),
                 st.integers(0, (1 << 64) - 1))
gguf_values = st.one_of(
    st.tuples(st.sampled_from([0, 1, 2, 3, 4, 5, 10, 11]), st.integers(-(1 << 63), (1 << 64) - 1)),
    st.tuples(st.sampled_from([6, 12]), st.floats(width=32)),
    st.tuples(st.just(7), st.booleans()),
    st.tuples(st.just(8), st.one_of(st.sampled_from(["llama", "gpt2", "bert", "qwen2", "", "llama\x00x", "../x",
                                                     "a" * 10000, "\ud800"]), st.text(max_size=12))),
    st.tuples(st.just(9), st.tuples(st.sampled_from([4, 5, 6, 8]), st.lists(st.integers(0, 3), max_size=3))))


@st.composite
def gguf_mutations(draw, raw):
    fields, strings, kvs, end = gguf_fields(raw)
    ops = draw(st.lists(st.sampled_from(["int", "int", "string", "kv", "drop", "duplicate", "flip", "truncate"]),
                        min_size=1, max_size=3))
    muts = []
    for op in ops:
        if op == "int":
            off, width, what = draw(st.sampled_from(fields))
            muts.append(("int", off, width, draw(INTS)))
        elif op == "string":
            off, what = draw(st.sampled_from(strings))
            muts.append(("string", off, draw(st.binary(min_size=1, max_size=6))))
        elif op in ("kv", "drop", "duplicate"):
            key = draw(st.sampled_from([k for k, _, _ in kvs]))
            muts.append((op, key, draw(gguf_values) if op == "kv" else None))
        elif op == "flip":
            muts.append(("flip", draw(st.integers(0, end - 1)), draw(st.integers(1, 255))))
        else:
            muts.append(("truncate", draw(st.integers(0, len(raw))), None))
    return muts


def apply_gguf_mutations(raw, muts):
    """Structured edits (a key/value replaced, dropped or written twice: the kv count follows) first,
    then edits of bytes at the original offsets (an integer field, a string's bytes, a flip, a cut)."""
    _, _, kvs, end = gguf_fields(raw)
    by_key = {k: raw[s:e] for k, s, e in kvs}
    order = [k for k, _, _ in kvs]
    structured = [m for m in muts if m[0] in ("kv", "drop", "duplicate")]
    if structured:
        items = [(k, by_key[k]) for k in order]
        for op, key, value in structured:
            i = next((j for j, (k, _) in enumerate(items) if k == key), None)
            if i is None:
                continue
            if op == "kv":
                kb = key.encode()
                items[i] = (key, struct.pack("<Q", len(kb)) + kb + gguf_value(*value))
            elif op == "drop":
                del items[i]
            else:
                items.insert(i, items[i])
        head = raw[:16] + struct.pack("<Q", len(items)) + b"".join(b for _, b in items)
        tensors_start = kvs[-1][2]
        info = raw[tensors_start:end]
        align = 32
        old_data = (end + align - 1) // align * align
        body = head + info
        raw = body + b"\x00" * ((-len(body)) % align) + raw[old_data:]
        return raw                                            # byte edits refer to the original offsets: skip them
    for m in muts:
        if m[0] == "int":
            _, off, width, v = m
            raw = raw[:off] + (v % (1 << (8 * width))).to_bytes(width, "little") + raw[off + width:]
        elif m[0] == "string":
            _, off, b = m
            n = int.from_bytes(raw[off:off + 8], "little")
            if n < 1 << 20:
                b = (b * n)[:n]
                raw = raw[:off + 8] + b + raw[off + 8 + n:]
        elif m[0] == "flip":
            _, i, x = m
            raw = raw[:i] + bytes([raw[i] ^ x]) + raw[i + 1:]
    for m in muts:
        if m[0] == "truncate":
            raw = raw[:m[1]]
    return raw


def check_gguf_case(tmp_path_factory, tiny_gguf, data):
    raw = tiny_gguf.read_bytes()
    muts = data.draw(gguf_mutations(raw))
    tmp = fresh(tmp_path_factory)
    (tmp / "cwd" / "in" / "m.gguf").write_bytes(apply_gguf_mutations(raw, muts))
    shutil.copy(tiny_gguf.parent / "tokens.txt", tmp / "cwd" / "in" / "tokens.txt")
    before = tree(tmp / "cwd" / "in")
    args = ["certify", "--model", "in/m.gguf", "--tokens", "in/tokens.txt", "--length", "8", "--layers", "0",
            "--heads", "0", "--eps", "1/2", "--peers", "none", "--attempts", "2", "--out", "out"]
    judged(muts, certkit(args, tmp), tmp, before)


@settings(max_examples=2, **FAST)
@given(data=st.data())
def test_mutated_gguf_files(tmp_path_factory, tiny_gguf, data):
    check_gguf_case(tmp_path_factory, tiny_gguf, data)


@pytest.mark.heavy
@settings(max_examples=40, **DEEP)
@given(data=st.data())
def test_deep_mutated_gguf_files(tmp_path_factory, tiny_gguf, data):
    check_gguf_case(tmp_path_factory, tiny_gguf, data)


# ---------------------------------------------------------------- (d) model folders
@pytest.fixture(scope="module")
def tiny_folders(tmp_path_factory):
    """A tiny random BERT and Llama saved by transformers, and a token file for both."""
    transformers = pytest.importorskip("transformers")
    torch = pytest.importorskip("torch")
    root = tmp_path_factory.mktemp("models")
    torch.manual_seed(0)
    transformers.BertModel(transformers.BertConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32)).save_pretrained(root / "bert")
    transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
        intermediate_size=32, max_position_embeddings=32)).save_pretrained(root / "llama")
    (root / "tokens.txt").write_text(" ".join(map(str, np.random.default_rng(0).integers(3, 50, 32))))
    return root


CONFIG_KEYS = ["model_type", "architectures", "hidden_size", "num_attention_heads", "num_hidden_layers", "vocab_size",
               "max_position_embeddings", "num_key_value_heads", "head_dim", "intermediate_size", "type_vocab_size",
               "rope_theta", "rope_scaling", "layer_norm_eps", "rms_norm_eps", "hidden_act", "torch_dtype",
               "position_embedding_type", "sliding_window", "attention_bias", "tie_word_embeddings", "pad_token_id",
               "auto_map", "partial_rotary_factor", "attn_implementation", "_attn_implementation"]
config_values = st.one_of(json_values, st.sampled_from([0, -1, 1, 3, 1 << 20, 1 << 24, 1 << 31, 1 << 62, 10 ** 30, 1.5,
                                                         "16", "llama", "bert", "gpt2", ["llama"], {"type": "linear", "factor": 1e308},
                                                         {"rope_type": "yarn", "factor": -1}, "float64", "int8"]))


@st.composite
def folder_mutations(draw):
    kind = draw(st.sampled_from(["bert", "llama"]))
    ops = draw(st.lists(st.sampled_from(["config", "config", "drop", "config-raw", "st-dtype", "st-shape",
                                         "st-offsets", "st-size", "st-drop", "st-rename", "st-flip", "st-truncate"]),
                        min_size=1, max_size=2))
    muts = []
    for op in ops:
        if op == "config":
            muts.append((op, draw(st.sampled_from(CONFIG_KEYS)), draw(config_values)))
        elif op == "drop":
            muts.append((op, draw(st.sampled_from(CONFIG_KEYS)), None))
        elif op == "config-raw":
            muts.append((op, None, draw(st.sampled_from(SPECIAL_JSON + ["", "null", "[]", "1", "{\"model_type\": "]))))
        elif op == "st-dtype":
            muts.append((op, draw(st.integers(0, 100)), draw(st.one_of(st.sampled_from(SAFETENSORS_DTYPES), json_values))))
        elif op == "st-shape":
            muts.append((op, draw(st.integers(0, 100)), draw(st.one_of(st.lists(dims, max_size=4), json_values))))
        elif op == "st-offsets":
            muts.append((op, draw(st.integers(0, 100)), draw(st.lists(st.sampled_from(
                [0, 4, 64, 1 << 20, 1 << 40, (1 << 64) - 1, -1]), max_size=3))))
        elif op == "st-size":
            muts.append((op, None, draw(st.sampled_from([0, 1, 8, 1 << 20, 1 << 32, 1 << 63, (1 << 64) - 1]))))
        elif op in ("st-drop", "st-rename"):
            muts.append((op, draw(st.integers(0, 100)), draw(st.sampled_from(["x", "", "embeddings.word_embeddings.weight",
                                                                              "model.embed_tokens.weight", "__metadata__"]))))
        else:
            muts.append((op, draw(st.integers(0, 1 << 20)), draw(st.integers(1, 255))))
    command = draw(st.sampled_from(["certify", "certify", "compare"]))
    return kind, muts, command


def apply_folder_mutations(src, dst, muts):
    shutil.copytree(src, dst)
    cfg_path, st_path = dst / "config.json", dst / "model.safetensors"
    cfg = json.loads(cfg_path.read_text())
    raw = st_path.read_bytes()
    hlen = int.from_bytes(raw[:8], "little")
    header, data = json.loads(raw[8:8 + hlen]), raw[8 + hlen:]
    names = sorted(k for k in header if k != "__metadata__")
    cfg_text, size, byte_edits = None, None, []
    for op, key, value in muts:
        if op == "config":
            cfg[key] = value
        elif op == "drop":
            cfg.pop(key, None)
        elif op == "config-raw":
            cfg_text = value
        elif op in ("st-dtype", "st-shape", "st-offsets") and names:
            header[names[key % len(names)]][{"st-dtype": "dtype", "st-shape": "shape", "st-offsets": "data_offsets"}[op]] = value
        elif op == "st-size":
            size = value
        elif op == "st-drop" and names:
            header.pop(names[key % len(names)], None)
        elif op == "st-rename" and names:
            header[value] = header.pop(names[key % len(names)], None)
        elif op in ("st-flip", "st-truncate"):
            byte_edits.append((op, key, value))
    cfg_path.write_text(json.dumps(cfg) if cfg_text is None else cfg_text)
    raw = safetensors_file(header, data, size)
    for op, i, x in byte_edits:
        i %= len(raw)
        raw = raw[:i] if op == "st-truncate" else raw[:i] + bytes([raw[i] ^ x]) + raw[i + 1:]
    st_path.write_bytes(raw)


def check_folder_case(tmp_path_factory, tiny_folders, case):
    kind, muts, command = case
    tmp = fresh(tmp_path_factory)
    apply_folder_mutations(tiny_folders / kind, tmp / "cwd" / "in" / "m", muts)
    shutil.copy(tiny_folders / "tokens.txt", tmp / "cwd" / "in" / "tokens.txt")
    before = tree(tmp / "cwd" / "in")
    common = ["--model", "in/m", "--tokens", "in/tokens.txt", "--length", "8", "--layers", "0", "--heads", "0", "--out", "out"]
    args = ["certify", *common, "--eps", "1/2", "--peers", "none", "--attempts", "2"] if command == "certify" else \
        ["compare", *common, "--method", "lowrank:k=1"]
    judged((kind, muts, command), certkit(args, tmp), tmp, before)


@settings(max_examples=2, **FAST)
@given(case=folder_mutations())
def test_mutated_model_folders(tmp_path_factory, tiny_folders, case):
    check_folder_case(tmp_path_factory, tiny_folders, case)


@pytest.mark.heavy
@settings(max_examples=40, **DEEP)
@given(case=folder_mutations())
def test_deep_mutated_model_folders(tmp_path_factory, tiny_folders, case):
    check_folder_case(tmp_path_factory, tiny_folders, case)


# ---------------------------------------------------------------- (e) the Python API
API_SCRIPT = r"""
import math, sys
from fractions import Fraction
import numpy as np
import certkit
case = eval(open(sys.argv[1]).read(), {"nan": math.nan, "inf": math.inf, "Fraction": Fraction})
what, kwargs = case
try:
    if what == "from_arrays":
        certkit.Head.from_arrays(**kwargs)
    else:
        rng = np.random.default_rng(0)
        h = certkit.Head.from_arrays(rng.standard_normal((6, 2)), rng.standard_normal((6, 2)), beta=1)
        if what == "certify":
            certkit.certify(h, **kwargs)
        elif what == "compare":
            certkit.compare(h, **kwargs)
        else:
            certkit.verify(**kwargs)
except certkit.UserError as e:
    print("UserError:", str(e)[:300])
"""
api_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(1 << 70), 1 << 70),
                        st.sampled_from([0, -1, 1, 2, 10 ** 20, 10 ** 400]),
                        st.floats(), st.sampled_from(NUMERALS), st.text(max_size=8),
                        st.builds(Fraction, st.integers(-100, 100), st.integers(1, 100)))
api_values = st.one_of(api_scalars, st.lists(api_scalars, max_size=3))
VALID_EPS = st.sampled_from(["1/4", "1/2", 0.25, Fraction(1, 3), ["1/4", "1/2"]])   # past parsing, into the searches
matrices = st.one_of(
    st.integers(0, 4).flatmap(lambda r: st.integers(0, 3).flatmap(lambda c: st.lists(
        st.lists(st.one_of(st.floats(), st.integers(-(1 << 70), 1 << 70)), min_size=c, max_size=c), min_size=r, max_size=r))),
    api_values)


def optional(**strategies):
    """Keyword arguments: each present or not."""
    return st.fixed_dictionaries({}, optional=strategies)


api_cases = st.one_of(
    st.tuples(st.just("from_arrays"), st.fixed_dictionaries(
        {"queries": matrices, "keys": matrices, "beta": api_values},
        optional={"weights": st.one_of(api_values, matrices), "bias": matrices, "name": api_values})),
    st.tuples(st.just("certify"), st.fixed_dictionaries(
        {"eps": st.one_of(VALID_EPS, api_values)},
        optional={"peers": st.one_of(api_values, st.lists(st.sampled_from(["svd", "nystrom", "evil", "", "none"]), max_size=3)),
                  "seed": api_scalars, "attempts": st.one_of(st.integers(-2, 4), api_scalars), "budget": api_scalars})),
    st.tuples(st.just("compare"), st.fixed_dictionaries(
        {"replacement": st.sampled_from(["lowrank:k=1", "lowrank:k=0", "quant:int8", "quant:int0", "evict:keep=0-3",
                                         "topk:k=2", "window:w=2", "kv:q4_0", "bogus", "", "lowrank:k=1,2"])},
        optional={"eps": st.one_of(VALID_EPS, api_values), "norm": st.one_of(st.sampled_from(["2", "inf"]), api_values),
                  "relative": api_values})),
    st.tuples(st.just("verify"), st.fixed_dictionaries(
        {"target": st.sampled_from([str(GOLDEN / "perm-n32-margin.json"), str(GOLDEN / "gauss-n40-sidecar-factor.json"),
                                    "in", "nonexistent.json", "", str(GOLDEN / "gauss-n40-sidecar-factor.U.npy")])},
        optional={"route": st.sampled_from(["auto", "fast", "arb", "", "x"]), "time_limit": api_scalars,
                  "jobs": api_scalars})))


def check_api_case(tmp_path_factory, case):
    tmp = fresh(tmp_path_factory)
    (tmp / "case.py").write_text(repr(case))
    (tmp / "api.py").write_text(API_SCRIPT)
    before = tree(tmp / "cwd" / "in")
    judged(case, run([str(tmp / "api.py"), str(tmp / "case.py")], tmp, seconds=120), tmp, before, allowed={0})


@settings(max_examples=6, **FAST)
@given(case=api_cases)
def test_api_arguments(tmp_path_factory, case):
    check_api_case(tmp_path_factory, case)


@pytest.mark.heavy
@settings(max_examples=150, **DEEP)
@given(case=api_cases)
def test_deep_api_arguments(tmp_path_factory, case):
    check_api_case(tmp_path_factory, case)
