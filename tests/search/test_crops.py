"""benchmarks/bench_crops.py on a tiny crop, against an independent brute force.

The crops: 6 rows of SmolLM2's l4-h0 at L = 128 (its Q and K as certify wrote them, committed under
tests/golden/crops/: no model run),
at eps = 1/4.  The brute force shares nothing with the bench's searches or the kernel:
* lower: nu(S) = min_{c != 0} ||A_S^T c||_1 / ||c||_1 by one LP per sign pattern of c, over every
  subset S of the rows; nu(S) > eps means every B with max_i ||A_i - B_i||_1 <= eps keeps the rows S
  independent (if c^T B_S = 0 then ||A_S^T c||_1 = ||(A_S - B_S)^T c||_1 <= eps ||c||_1), so
  r_eps >= |S|;
* upper: every basis of k of the crop's own rows, each row fitted by the l1 LP on it; a basis
  within eps gives r_eps <= k.
The bench's row (kernel-VERIFIED ends) must sit inside what the brute force proves, and equal it
where the brute force closes.
"""
import itertools
import os
import sys

import numpy as np
import pytest

import paths

ROOT = str(paths.ROOT)
FOLDER = os.path.join(ROOT, "tests", "golden", "crops")       # l4-h0's queries and keys (.npy, float64)
CROPS = [np.array([1, 2, 3, 4, 5, 6]), np.array([5, 40, 70, 90, 110, 127])]   # brute force: r_eps = 2 and 6
EPS = 0.25

pytest.importorskip("scipy")


def bench():
    sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
    try:
        import bench_crops
    finally:
        sys.path.pop(0)
    return bench_crops


def committed_head():
    return tuple(np.load(os.path.join(FOLDER, f"smollm2-L128-l4-h0.{x}.npy"), allow_pickle=False)
                 for x in ("queries", "keys"))


def nu(As):
    """min_{c != 0} ||As^T c||_1 / ||c||_1: one LP per sign pattern (the first sign +, by symmetry)."""
    from scipy.optimize import linprog
    M, N = As.shape
    best = np.inf
    for signs in itertools.product((1.0, -1.0), repeat=M - 1):
        s = np.r_[1.0, signs]
        # variables c (M), t (N): min sum t, -t <= As^T c <= t, s.c = 1, s_a c_a >= 0
        cost = np.r_[np.zeros(M), np.ones(N)]
        A_ub = np.block([[As.T, -np.eye(N)], [-As.T, -np.eye(N)]])
        bounds = [(0, None) if x > 0 else (None, 0) for x in s] + [(0, None)] * N
        r = linprog(cost, A_ub=A_ub, b_ub=np.zeros(2 * N), A_eq=np.r_[s, np.zeros(N)][None, :], b_eq=[1.0],
                    bounds=bounds, method="highs")
        best = min(best, r.fun)
    return best


def l1_fit(a, G):
    from scipy.optimize import linprog
    k, N = G.shape
    cost = np.r_[np.zeros(k), np.ones(N)]
    A_ub = np.block([[G.T, -np.eye(N)], [-G.T, -np.eye(N)]])
    r = linprog(cost, A_ub=A_ub, b_ub=np.r_[a, -a], bounds=[(None, None)] * k + [(0, None)] * N, method="highs")
    return r.fun


def brute(A):
    """(lower, upper) proved by the brute force: upper the smallest k with a row basis within eps, lower
    the largest m <= upper with some m rows of nu > eps (no larger m can pass: r_eps <= upper)."""
    n = A.shape[0]
    upper = next(k for k in range(1, n + 1) for S in itertools.combinations(range(n), k)
                 if all(l1_fit(a, A[list(S)]) <= EPS * (1 - 1e-6) for a in A))
    lower = next(m for m in range(upper, 0, -1)
                 if any(nu(A[list(S)]) > EPS * (1 + 1e-6) for S in itertools.combinations(range(n), m)))
    return lower, upper


@pytest.mark.parametrize("rows", CROPS, ids=["first-rows", "spread"])
def test_tiny_crop_matches_brute_force(rows):
    b = bench()
    Q, K = committed_head()
    head = b.crop_head(Q, K, "1/sqrt(64)", True, rows, "l4-h0-tiny")
    A = head.attention()
    full = b.full_head(Q, K, "1/sqrt(64)", True).attention()
    assert np.abs(A - full[rows][:, :head.N]).max() < 1e-12       # the crop is literally rows of the head
    row = b.run_crop("tiny", head, restarts=2, cap=200)
    lo, up = brute(A)
    assert lo == up                                                # these crops were chosen to close
    # soundness both ways: no certified bound crosses what the brute force proves
    assert row["lower"] <= up and lo <= row["upper"]
    assert row["today_lower"] <= row["lower"] <= row["upper"] <= row["today_upper"]
    assert row["lower_off"] == row["lower"] - row["today_lower"]
    assert row["upper_off"] == row["today_upper"] - row["upper"]
    if lo == up:                                                   # the brute force closes: the bench must too
        assert row["exact"] == lo == row["lower"] == row["upper"]
