"""A fuzzer of the command line: hypothesis draws arguments from the CLI's grammar (numbers of every
size and spelling, method strings, index ranges, synthetic specs, paths) and runs each command in its
own process under a memory limit (RLIMIT_AS) and a time limit.  Whatever it draws, certkit must
answer as a careful tool does: an exit code of the documented set (never 4, never killed), no
traceback, and nothing written outside the output folder and the temporary folder it is given.

A short budget runs with the suite; `pytest -m heavy tests/cli/test_fuzz_cli.py` goes deeper (what it
finds is fixed, not skipped: tests/cli/test_hostile_inputs.py keeps the cases)."""
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from paths import ROOT

CERT = ROOT / "data" / "certificates" / "perm-n40-margin.json"
ALLOWED = {0, 1, 2, 3, 64, 65, 66, 69, 73}        # verdicts 0-3 and sysexits; 4 is a bug, < 0 a kill
MEMORY = 3 << 30                                  # bytes of address space per process
SECONDS = 120

argv_text = lambda n: st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),  # noqa: E731
                              max_size=n)                 # what a command line can carry: no NUL, no lone surrogate
numbers = st.one_of(
    st.integers(-10 ** 30, 10 ** 30).map(str),
    st.sampled_from(["0", "-0", "1/0", "0/0", "nan", "inf", "-inf", "1e308", "1e-2000", "1e2000", "0x1p-1074",
                     "9" * 400, "1/" + "9" * 300, "", " ", "1_000", "١", "1/sqrt(0)", "1/sqrt(-4)", "1/sqrt(" + "9" * 200 + ")"]),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    argv_text(12))
small = st.integers(0, 64).map(str)
params = st.one_of(small, numbers)
methods = st.one_of(
    st.builds(lambda k: f"lowrank:k={k}", params),
    st.builds(lambda a, b: f"lowrank:k={a}..{b}", params, params),
    st.builds(lambda s, w, h: f"evict:sinks={s},window={w},heavy={h}", params, params, params),
    st.builds(lambda a, b: f"evict:keep={a}-{b}", params, params),
    st.builds(lambda w: f"window:w={w}", params),
    st.builds(lambda k: f"topk:k={k}", params),
    st.builds(lambda f: f"kv:{f}", st.sampled_from(["q8_0", "q4_0", "int8", "fp8_e5m2", "q3_k", "", "k=q4_0,v=int8",
                                                    "k=q4_0,k=q8_0", "v=fp8_e4m3"])),
    st.sampled_from(["quant:int8", "quant:int2", "zip", "", ";;", "lowrank", "evict:keep=all"]),
    argv_text(20))
synthetic = st.builds(lambda fam, n, d, beta, seed, mask: f"{fam}:n={n},d={d},beta={beta},seed={seed}" + mask,
                      st.sampled_from(["gaussian", "clustered", "key-only", "bogus"]), params, params, numbers,
                      params, st.sampled_from(["", ",mask=causal", ",mask=window"]))


def run(args, tmp):
    """Run certkit in its own process, its cwd, HOME and TMPDIR inside tmp, under the limits."""
    import resource

    def limits():
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY, MEMORY))
    env = dict(os.environ, HOME=str(tmp / "home"), TMPDIR=str(tmp / "tmp"), PYTHONPATH=str(ROOT))
    for d in ("home", "tmp", "cwd"):
        (tmp / d).mkdir(exist_ok=True)
    try:
        return subprocess.run([sys.executable, "-m", "certkit", *args], capture_output=True, text=True, env=env,
                              cwd=tmp / "cwd", timeout=SECONDS, preexec_fn=limits, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"certkit {' '.join(args)[:300]}: still running after {SECONDS} s")


def judged(args, r, tmp):
    """The promises, for one run: an allowed exit code, no traceback, no file outside out/ and tmp/."""
    assert r.returncode in ALLOWED, (args, r.returncode, r.stderr[-3000:])
    assert "Traceback" not in r.stderr, (args, r.stderr[-3000:])
    stray = [p for p in (tmp / "cwd").rglob("*") if "out" not in p.relative_to(tmp / "cwd").parts[:1]]
    assert not stray, (args, stray[:5])


def fresh(tmp_path_factory):
    return tmp_path_factory.mktemp("fuzz")


@settings(max_examples=8, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(spec=synthetic, method=methods)
def test_compare_arguments(tmp_path_factory, spec, method):
    tmp = fresh(tmp_path_factory)
    args = ["compare", "--synthetic", spec, "--method", method, "--out", "out"]
    judged(args, run(args, tmp), tmp)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(spec=synthetic, eps=numbers, budget=st.one_of(st.none(), numbers), layers=st.one_of(st.none(), numbers))
def test_certify_arguments(tmp_path_factory, spec, eps, budget, layers):
    tmp = fresh(tmp_path_factory)
    args = ["certify", "--synthetic", spec, "--eps", eps, "--peers", "none", "--out", "out"] \
        + ([] if budget is None else ["--budget", budget]) + ([] if layers is None else ["--layers", layers])
    judged(args, run(args, tmp), tmp)


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(limit=st.one_of(st.none(), numbers), jobs=st.one_of(st.none(), numbers), route=st.sampled_from(["auto", "arb", "x"]))
def test_verify_arguments(tmp_path_factory, limit, jobs, route):
    tmp = fresh(tmp_path_factory)
    args = ["verify", str(CERT), "--route", route, "--summary", "out/s.json"] \
        + ([] if limit is None else ["--time-limit", limit]) + ([] if jobs is None else ["--jobs", jobs])
    (tmp / "cwd" / "out").mkdir(parents=True, exist_ok=True)
    judged(args, run(args, tmp), tmp)


@pytest.mark.heavy
@settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
@given(spec=synthetic, method=methods, eps=numbers)
def test_deep_compare_and_certify(tmp_path_factory, spec, method, eps):
    tmp = fresh(tmp_path_factory)
    for args in (["compare", "--synthetic", spec, "--method", method, "--eps", eps, "--out", "out"],
                 ["certify", "--synthetic", spec, "--eps", eps, "--peers", "none", "--out", "out"]):
        judged(args, run(args, tmp), tmp)
