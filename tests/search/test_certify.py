"""certkit certify: every certificate it writes verifies, falsified variants are rejected, and on
heads with a known answer the sandwich lower <= r_eps(A) <= upper contains the truth and is
tight where it must be."""
import json
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from scipy.optimize import linprog

from certkit import synthetic
from certkit.driver import certify_head
from certkit.head import Head
from certkit.choices import check
from certkit.search import upper
from certkit.search.lower.candidates import decoding_candidates
from certkit.search.lower.decoding import decoded, margins

from paths import ROOT

HEADS = ROOT / "data" / "heads"


def run(*args):
    return subprocess.run([sys.executable, "-m", "certkit", *args], capture_output=True, text=True, timeout=600)


def sandwich(h, eps, tmp_path, name="h", **kw):
    kw.setdefault("peers", ())                  # the sandwich alone unless a test asks for peers
    (row,) = certify_head(h.replace(name=name), [Fraction(eps)], str(tmp_path), **kw)
    assert row["head"] == name and row["eps"] == str(Fraction(eps))
    for key in ("lower_file", "upper_file"):
        v = check(str(tmp_path / row[key]))
        assert v.status == "VERIFIED", v.line()
    return row


def repeated_rows_head(k, reps, d, beta, seed=0):
    """A Gibbs head whose queries and keys take only k values (unit vectors in R^d): A has at
    most k distinct rows, so rank A <= k and r_eps(A) <= k for every eps."""
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((k, d))
    X /= np.linalg.norm(X, axis=1, keepdims=True)
    X = np.round(X * 2.0 ** 30) / 2.0 ** 30
    idx = np.repeat(np.arange(k), reps)
    return Head.from_arrays(X[idx], X[idx], Fraction(beta), name=f"repeated-k{k}")


# ---------------------------------------------------------------- known answers

def test_key_only_head_has_rank_one(tmp_path):
    h = synthetic.head("key-only", 40, 6, beta=Fraction(3), seed=2)
    row = sandwich(h, "1/10", tmp_path)
    assert row["lower"] == row["upper"] == 1


@pytest.mark.parametrize("k", [3, 6])
def test_repeated_rows_head_is_exactly_rank_k(tmp_path, k):
    h = repeated_rows_head(k, 8, 8, beta=60)
    row = sandwich(h, "1/4", tmp_path)
    assert row["upper"] <= k                       # the truth r_eps <= rank A <= k
    assert row["lower"] == k                       # well separated at beta = 60: exactly k


def test_near_permutation_head_is_full_rank(tmp_path):
    h = synthetic.head("near-permutation", 24, 8, beta=Fraction(40), seed=1)
    row = sandwich(h, "1/4", tmp_path, name="perm")
    assert row["lower"] == row["upper"] == 24


def test_weighted_biased_rectangular_head(tmp_path):
    """Column weights (two columns dropped), a logit bias and n != N go through every stage;
    peers that do not apply (Performer with a bias) are reported as such, not as a crash."""
    w = np.ones(30)
    w[[3, 7]] = 0
    w[5] = 2.5
    bias = np.round(np.random.default_rng(1).standard_normal((20, 30)) * 2 ** 20) / 2 ** 20
    h = synthetic.head("gaussian", 20, 4, beta=Fraction(2), N=30, seed=5).replace(weights=w, bias=bias)
    row = sandwich(h, "1/5", tmp_path, peers=("svd", "performer"))
    assert 1 <= row["lower"] <= row["upper"] <= row["peers"]["svd"]["k"] <= 20
    assert row["peers"]["performer"]["k"] is None and "bias" in row["peers"]["performer"]["note"]


def test_upper_beats_or_matches_svd_and_sandwich_is_ordered(tmp_path):
    h = synthetic.head("gaussian", 32, 8, beta=Fraction(2), seed=0)
    row = sandwich(h, "1/4", tmp_path, peers=("svd",))
    assert row["lower"] <= row["upper"] <= row["peers"]["svd"]["k"]
    assert row["upper"] < row["svd_rank"]          # the LP / refinement stages do better here


# ---------------------------------------------------------------- falsified variants

def _falsify(src, dst, edit):
    doc = json.loads(src.read_text())
    edit(doc)
    dst.write_text(json.dumps(doc))
    return check(str(dst))


def test_falsified_certificates_are_rejected(tmp_path):
    h = synthetic.head("gaussian", 24, 4, beta=Fraction(2), seed=3)
    row = sandwich(h, "1/4", tmp_path)
    up, lo = tmp_path / row["upper_file"], tmp_path / row["lower_file"]
    k, M = row["upper"], row["lower"]

    def tighter_upper(doc):
        doc["claim"]["bound"] = str(k - 1)
    assert _falsify(up, tmp_path / "u1.json", tighter_upper).status == "REJECTED"

    def smaller_eps(doc):
        doc["claim"]["eps"] = "1/100"
    assert _falsify(up, tmp_path / "u2.json", smaller_eps).status == "REJECTED"

    def broken_factor(doc):
        doc["witness"]["U"][0][0] = float.fromhex(doc["witness"]["U"][0][0]).__add__(1.0).hex()
    assert _falsify(up, tmp_path / "u3.json", broken_factor).status == "REJECTED"

    def stronger_lower(doc):
        doc["claim"]["bound"] = str(M + 1)
    assert _falsify(lo, tmp_path / "l1.json", stronger_lower).status == "REJECTED"

    def hotter_head(doc):                          # the same witness for a flatter head fails
        doc["instance"]["beta"] = "1/64"
    assert _falsify(up if k > 1 else lo, tmp_path / "l2.json", hotter_head).status == "REJECTED"
    assert _falsify(up, tmp_path / "u4.json", lambda d: d["witness"].pop("V")).status == "MALFORMED"


@settings(max_examples=6, deadline=None)
@given(family=st.sampled_from(["gaussian", "clustered"]), n=st.integers(4, 16), d=st.integers(1, 6),
       beta=st.sampled_from([Fraction(1, 2), Fraction(2), Fraction(8)]), eps=st.sampled_from(["1/10", "1/3"]),
       seed=st.integers(0, 3))
def test_sandwiches_verify_and_are_ordered(tmp_path_factory, family, n, d, beta, eps, seed):
    tmp = tmp_path_factory.mktemp("s")
    h = synthetic.head(family, n, d, beta=beta, seed=seed)
    row = sandwich(h, eps, tmp)
    assert 1 <= row["lower"] <= row["upper"] <= n


# ---------------------------------------------------------------- the search pieces

def test_lp_row_fit_is_the_l1_optimum():
    rng = np.random.default_rng(0)
    A = rng.dirichlet(np.ones(12), size=5)
    G = rng.standard_normal((3, 12))
    C, err = upper.fit_rows_lp(A, G)
    for i, a in enumerate(A):                      # primal: min 1^T t, -t <= a - G^T c <= t
        k, N = G.shape
        I = np.eye(N)
        r = linprog(np.r_[np.zeros(k), np.ones(N)],
                    A_ub=np.block([[G.T, -I], [-G.T, -I]]), b_ub=np.r_[a, -a],
                    bounds=[(None, None)] * k + [(0, None)] * N, method="highs")
        assert err[i] == pytest.approx(r.fun, abs=1e-9)
    C2 = np.linalg.lstsq(G.T, A.T, rcond=None)[0].T             # least squares: a fit, no better than the LP
    assert np.all(np.abs(A - C2 @ G).sum(axis=1) >= err - 1e-9)


def test_lbfgs_minimises_a_quadratic():
    rng = np.random.default_rng(1)
    M = rng.standard_normal((20, 20))
    H = M @ M.T + np.eye(20)
    b = rng.standard_normal(20)
    x = upper.lbfgs(lambda x: (0.5 * x @ H @ x - b @ x, H @ x - b), np.zeros(20), 500)
    assert np.allclose(x, np.linalg.solve(H, b), atol=1e-6)


def test_upper_search_stops_at_the_floor():
    A = synthetic.head("gaussian", 32, 8, beta=2, seed=0).attention()
    judge = lambda U, V: upper.row_errors(A, U @ V.T).max() + 1e-12
    free = upper.search(A, 0.25, judge)
    floored = upper.search(A, 0.25, judge, floor=free["svd_rank"])
    assert free["k"] < free["svd_rank"] == floored["k"]


def test_decoding_candidates_pass_their_own_tests():
    A = synthetic.head("gaussian", 40, 6, beta=3, seed=4).attention()
    for kind, M, msgs, dec in decoding_candidates(A, 0.2):
        T = decoded(A, msgs, dec)
        assert T.shape == (M, M)
        if dec.ndim == 2:                                   # an explicit decoder: row l1 norms <= 1
            assert np.abs(dec).sum(axis=1).max() <= 1
        if kind == "lower-decoding-margin":
            assert np.all(margins(T) > 0.2)
        else:
            assert 0.2 * np.abs(np.linalg.inv(T)).sum(axis=1).max() < 1


# ---------------------------------------------------------------- command line

def test_cli_certify_synthetic_and_head_file(tmp_path):
    r = run("certify", "--synthetic", "gaussian:n=16,d=4,beta=2,seed=1", str(HEADS / "gauss-n32-d8-beta2.safetensors"),
            "--eps", "1/4,0.5", "--peers", "svd,linformer", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("<= r_eps(A) <=") == 4
    rows = json.loads((tmp_path / "summary.json").read_text())
    assert {row["eps"] for row in rows} == {"1/4", "1/2"}
    assert "| gauss-n32-d8-beta2 |" in (tmp_path / "summary.md").read_text()
    files = [str(tmp_path / row[k]) for row in rows for k in ("lower_file", "upper_file")]
    v = run("verify", *files)
    assert v.returncode == 0 and v.stdout.count("VERIFIED") == 8


def test_cli_certify_is_deterministic(tmp_path):
    outs = []
    for sub in ("a", "b"):
        r = run("certify", "--synthetic", "clustered:n=24,d=4,beta=3", "--eps", "1/5", "--peers", "performer",
                "--out", str(tmp_path / sub))
        assert r.returncode == 0, r.stderr
        outs.append(sorted((p.name, p.read_bytes()) for p in (tmp_path / sub).rglob("*.json") if p.name != "summary.json"))
    assert outs[0] == outs[1]


@pytest.mark.parametrize("args, needle, code", [
    (["--synthetic", "gausian:n=8"], "family must be one of", 64),
    (["--synthetic", "gaussian:n=eight"], "must be integers", 64),
    (["--synthetic", "gaussian", "--eps", "0"], "outside (0, 1)", 64),
    (["--synthetic", "gaussian", "--eps", "abc"], "is not a number", 64),
    (["--synthetic", "gaussian", "--peers", "reformer"], "unknown peer", 64),
    (["/nonexistent/head.npz"], "head.npz", 66),           # EX_NOINPUT: a missing input file
    ([], "no heads", 64),
])
def test_cli_certify_bad_input(tmp_path, args, needle, code):
    """Bad input is a UserError: one message, exit 64 (66 for a missing file), never 2 (= MALFORMED)."""
    r = run("certify", *args, "--out", str(tmp_path))
    assert r.returncode == code and needle in r.stderr and "Traceback" not in r.stderr, (r.returncode, r.stderr)


# ---------------------------------------------------------------- masked heads, provenance

def test_masked_head_certificates_state_the_mask(tmp_path):
    """A decoder-style head (sliding window) is certified with its row mask stated in both
    certificates (format 1.1): never a certificate about the unmasked matrix."""
    from certkit.head import RowMask
    h = synthetic.head("gaussian", 24, 4, beta=Fraction(2), seed=3).replace(mask=RowMask(0, 6))
    row = sandwich(h, "1/4", tmp_path, name="windowed", provenance={"model": "m", "layer": 3, "note": 0.5})
    for key in ("lower_file", "upper_file"):
        doc = json.loads((tmp_path / row[key]).read_text())
        assert doc["instance"]["row_mask"] == {"offset": "0", "window": "6"}
        assert doc["provenance"]["model"] == "m" and doc["provenance"]["layer"] == 3
        assert "note" not in doc["provenance"]                  # only strings and integers go in
    assert 1 <= row["lower"] <= row["upper"] <= 24


def test_sandwich_reports_its_stages_and_the_status_line_changes_no_byte(tmp_path):
    """progress (the status line of `certkit certify` on a terminal): the stages in order — lower search,
    the lower bound, each certified upper rank, the peers — and the same certificates with and
    without it."""
    from certkit.search.sandwich import sandwich
    h = synthetic.head("gaussian", 40, 6, beta=Fraction(2), seed=3, name="g40")
    said = []
    s1 = sandwich(h, Fraction(1, 4), peers=("svd",), progress=said.append)
    s0 = sandwich(h, Fraction(1, 4), peers=("svd",))
    assert said[0] == "lower search" and said[1].startswith(f"lower >= {s1.lower.bound};")
    ups = [t for t in said if t.startswith("upper <= ")]
    assert ups and ups[-1].startswith(f"upper <= {s1.upper.bound} ")
    assert said[-1] == f"{s1.lower.bound} <= r <= {s1.upper.bound}; peers"
    p1, p0 = s1.save(tmp_path / "with"), s0.save(tmp_path / "without")
    for k in ("lower", "upper"):
        assert open(p1[k], "rb").read() == open(p0[k], "rb").read()
