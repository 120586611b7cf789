"""Numeric input through certify and the API.  Every case is a one-line user
error (certkit.errors.UserError; exit 64 on the command line) or a sound result, within seconds:
no kernel Malformed/Unsupported escaping, no OverflowError, no hang, no crash in the search."""
import os
import re
import subprocess
import sys
import time
from fractions import Fraction

import numpy as np
import pytest

import certkit
from certkit.errors import UserError

import paths

ROOT = str(paths.ROOT)
SECONDS = 20          # generous on a loaded 2-core machine; each case takes well under a second alone

rng = np.random.default_rng(0)
Q8, K8 = rng.standard_normal((8, 2)), rng.standard_normal((8, 2))


def head(Q=Q8, K=K8, beta="1/2", bias=None):
    return certkit.Head.from_arrays(Q, K, beta, bias=bias, name="h")


def complex_torch():
    torch = pytest.importorskip("torch")
    return head(Q=torch.tensor(Q8 + 1j * Q8))


ERROR, RESULT = "error", "result"
CASES = {   # name: (what to certify, eps, expected outcome, a fragment of the message)
    "Q 1e300": (lambda: head(Q=Q8 * 1e300), "1/4", ERROR, "2^64"),
    "Q 2^70": (lambda: head(Q=Q8 * 2.0 ** 70), "1/4", ERROR, "2^64"),
    "d 600": (lambda: head(np.random.default_rng(1).standard_normal((4, 600)),
                           np.random.default_rng(2).standard_normal((4, 600))), "1/4", ERROR, "d = 600"),
    "beta 10^13": (lambda: head(beta=10 ** 13), "1/4", ERROR, "10^12"),
    "beta 1e308": (lambda: head(beta=1e308), "1/4", ERROR, "10^12"),
    "bias 1e13": (lambda: head(bias=np.full((8, 8), 1e13)), "1/4", ERROR, "2^40"),
    "beta 10**400 int": (lambda: head(beta=10 ** 400), "1/4", ERROR, "10^12"),
    "beta '1e400'": (lambda: head(beta="1e400"), "1/4", ERROR, "10^12"),
    "beta '1e999999'": (lambda: head(beta="1e999999"), "1/4", ERROR, "exponent out of range"),
    "beta '1e99999999'": (lambda: head(beta="1e99999999"), "1/4", ERROR, "exponent out of range"),
    "eps '1e-99999999'": (head, "1e-99999999", ERROR, "exponent out of range"),
    "eps 1/10000": (head, "1/10000", RESULT, None),
    "eps 1/100000": (head, "1/100000", RESULT, None),
    "eps 1e-400": (head, "1e-400", RESULT, None),
    "eps Fraction(1, 10**5000)": (head, Fraction(1, 10 ** 5000), ERROR, "out of range"),
    "complex numpy": (lambda: head(Q=Q8 + 1j * Q8), "1/4", ERROR, "complex"),
    "complex torch": (complex_torch, "1/4", ERROR, "complex"),
}


@pytest.mark.parametrize("name", list(CASES))
def test_api_numeric_input(name):
    make, eps, outcome, fragment = CASES[name]
    t0 = time.perf_counter()
    try:
        s = certkit.certify(make(), eps)
    except UserError as e:
        msg = str(e)
        assert outcome == ERROR, f"{name}: unexpected user error {msg}"
        assert fragment in msg and "\n" not in msg and not re.search(r"\d{30}", msg), msg
    else:
        assert outcome == RESULT, f"{name}: expected a user error, got {s}"
        for c in (s.lower, s.upper):          # sound: whatever is returned, the kernel verified
            assert c is None or c.verdict.status == "VERIFIED"
        if s.lower is not None and s.upper is not None:
            assert s.lower.bound <= s.upper.bound
    assert time.perf_counter() - t0 < SECONDS


CLI_CASES = {
    "--beta 1e400": (["--beta", "1e400"], "10^12"),
    "--beta 1e308": (["--beta", "1e308"], "10^12"),
    "--beta 1e99999999": (["--beta", "1e99999999"], "exponent out of range"),
    "--eps 1e-99999999": (["--beta", "1/2", "--eps", "1e-99999999"], "exponent out of range"),
    "--eps 1/4,,1/2": (["--beta", "1/2", "--eps", "1/4,,1/2"], "is empty"),
    "--eps 1/4,": (["--beta", "1/2", "--eps", "1/4,"], "is empty"),
    "--beta 10^13 in Q": (["--beta", "10000000000000"], "10^12"),
}


@pytest.mark.parametrize("name", list(CLI_CASES))
def test_cli_numeric_input(name, tmp_path):
    args, fragment = CLI_CASES[name]
    f = tmp_path / "h.npz"
    np.savez(f, Q=Q8, K=K8)
    t0 = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "certkit", "certify", str(f), "--out", str(tmp_path / "o"),
                        "--peers", "none"] + args, capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=ROOT))
    assert time.perf_counter() - t0 < SECONDS
    assert r.returncode == 64, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and fragment in lines[0] and "Traceback" not in r.stderr, r.stderr
    assert not re.search(r"\d{30}", r.stderr)


def test_tiny_eps_file_names(tmp_path):
    """eps = 1e-400 gets a short, distinct file name (no 'File name too long')."""
    from certkit.numbers import exact, tag
    a, b = exact("1e-400"), exact("2e-400")
    assert len(tag(a)) < 60 and tag(a) != tag(b) and tag(Fraction(1, 4)) == "1_4"
