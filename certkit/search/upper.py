"""Untrusted upper search (SPEC §9): factorisations B = C G of rank k with max_i ||A_i - B_i||_1 <= eps.

Every candidate is judged by the kernel (a `judge(U, V) -> certified max row error` callable);
a rank is claimed only when the kernel's certified error is <= eps.  Floats choose, the kernel
decides.  Stages, each started from the best so far:

1. truncated SVD (Eckart–Young in Frobenius; the baseline every peer is compared with);
2. LP best-row fits (SPEC §9.3): for a basis G (k x N) every row is fitted by
   min_c ||A_i - c^T G||_1, solved by HiGHS in the dual form
   max_y <A_i, y>  s.t.  G y = 0, -1 <= y <= 1  (c = minus the equality marginals);
   bases: top right singular vectors, greedy rows (column-pivoted QR order), their union;
   k by doubling then bisection with IRLS fits (an upper estimate of the LP optimum: any c
   is feasible), the LP only at the chosen k;
3. alternating refinement: L-BFGS on (C, G) jointly for the smoothed p-norm of the row
   errors, (sum_i e_i^p)^(1/p) with e_i = sum_j sqrt(R_ij^2 + delta^2) -> max_i ||R_i||_1,
   warm-started at rank k - s from the SVD of the current B, s halving on failure.
"""
import time

import numpy as np
import scipy.linalg
from scipy.optimize import linprog

from .basic import row_errors

SAFETY = 1e-7          # float target eps (1 - SAFETY): the certified error adds ~1e-13


# ---------------------------------------------------------------- row fits on a basis

def fit_rows_irls(A, G, iters=8, delta=1e-9):
    """Approximate l1 row fits C (n x k) of A on the rows of G by iteratively reweighted least
    squares, weights 1/max(|r_ij|, delta); any C is feasible, so errors are >= the LP optimum."""
    k = G.shape[0]
    C = np.linalg.lstsq(G.T, A.T, rcond=None)[0].T
    reg = 1e-13 * np.eye(k)
    for _ in range(iters):
        W = 1.0 / np.maximum(np.abs(A - C @ G), delta)
        M = np.matmul(G[None] * W[:, None, :], G.T) + reg
        b = (W * A) @ G.T
        try:
            C = np.linalg.solve(M, b[..., None])[..., 0]
        except np.linalg.LinAlgError:
            break
    return C


def fit_rows_lp(A, G):
    """Exact l1 row fits by HiGHS (dual simplex) on the dual LP: (C, errors)."""
    k = G.shape[0]
    C = np.zeros((A.shape[0], k))
    for i, a in enumerate(A):
        r = linprog(-a, A_eq=G, b_eq=np.zeros(k), bounds=(-1, 1), method="highs-ds")
        if r.status == 0:
            C[i] = -r.eqlin.marginals
    return C, row_errors(A, C @ G)


def svd_basis(A):
    return np.linalg.svd(A, full_matrices=False)[2]


def greedy_row_basis(A):
    """Rows of A in greedy order: the most peaked row first, then column-pivoted QR of A^T
    (each next row has the largest residual off the span of those chosen)."""
    _, _, piv = scipy.linalg.qr(A.T, mode="economic", pivoting=True)
    first = int(np.argmax(A.max(axis=1)))
    order = [first] + [int(p) for p in piv if p != first]
    return A[order]


def orthonormal_union(B1, B2):
    """An orthonormal basis (rows) of span(B1) + span(B2), B1's directions first."""
    Qm, _ = np.linalg.qr(np.vstack([B1, B2]).T)
    return Qm.T


def smallest_basis_rank(A, eps, basis_of_k, lo, hi):
    """Smallest k in (lo, hi] with IRLS row fits on basis_of_k(k) reaching eps, by doubling
    from lo+1 then bisection: (k, C, G) or None."""
    target = eps * (1 - SAFETY)
    ok = {}

    def good(k):
        G = basis_of_k(k)
        C = fit_rows_irls(A, G)
        if row_errors(A, C @ G).max() <= target:
            ok[k] = (C, G)
            return True
        return False

    step, last_bad, k = 1, lo, lo + 1
    while k <= hi and not good(k):
        last_bad, step = k, step * 2
        k = lo + step
    if k > hi:
        if hi <= last_bad or not good(hi):
            return None
        k = hi
    a, b = last_bad, k                       # a fails (or is lo), b succeeds
    while b - a > 1:
        m = (a + b) // 2
        if good(m):
            b = m
        else:
            a = m
    return (b,) + ok[b]


# ---------------------------------------------------------------- joint refinement

class _Stop(Exception):
    def __init__(self, x):
        self.x = x


def refine(A, C, G, eps=None, p=16, delta=1e-4, iters=400, check_at=120, hopeless=1.2):
    """L-BFGS on (C, G) for the smoothed p-norm of the row l1 errors; stops as soon as the
    exact float max row error is <= eps (1 - SAFETY) when eps is given, and gives up after
    check_at evaluations if it is still above hopeless * eps.  Returns (C, G)."""
    n, k = C.shape
    N = G.shape[1]
    target = None if eps is None else eps * (1 - SAFETY)
    scale = max(float(np.abs(A).max()), 1e-300)
    calls = [0]

    def f(x):
        Cx, Gx = x[:n * k].reshape(n, k), x[n * k:].reshape(k, N)
        R = Cx @ Gx - A
        calls[0] += 1
        if target is not None:
            worst = np.abs(R).sum(axis=1).max()
            if worst <= target or (calls[0] == check_at and worst > hopeless * target):
                raise _Stop(x.copy())
        S = np.sqrt(R * R + (delta * scale) ** 2)
        e = S.sum(axis=1)
        m = e.max()
        w = (e / m) ** p
        sw = w.sum()
        F = m * sw ** (1 / p)
        ge = (e / m) ** (p - 1) / sw ** (1 - 1 / p)
        Gr = ge[:, None] * R / S
        return F, np.concatenate([(Gr @ Gx.T).ravel(), (Cx.T @ Gr).ravel()])

    x0 = np.concatenate([C.ravel(), G.ravel()])
    try:
        x = lbfgs(f, x0, iters)
    except _Stop as r:
        x = r.x
    return x[:n * k].reshape(n, k), x[n * k:].reshape(k, N)


def lbfgs(f, x, iters, m=10):
    """Unconstrained L-BFGS (two-loop recursion, Nocedal & Wright Alg. 7.4) with Armijo
    backtracking; f(x) -> (value, gradient).  Plain numpy: scipy's L-BFGS-B driver costs more
    per step than our objective at these sizes."""
    F, g = f(x)
    S, Y = [], []
    for _ in range(iters):
        q = g.copy()
        alphas = []
        for s_, y_ in reversed(list(zip(S, Y))):
            a = s_ @ q / (y_ @ s_)
            alphas.append(a)
            q -= a * y_
        if S:
            q *= (S[-1] @ Y[-1]) / (Y[-1] @ Y[-1])
        for (s_, y_), a in zip(zip(S, Y), reversed(alphas)):
            q += (a - y_ @ q / (y_ @ s_)) * s_
        d = -q
        slope = g @ d
        if slope >= 0:                                  # not a descent direction: restart
            S, Y, d, slope = [], [], -g, -(g @ g)
        t = 1.0 if S else min(1.0, 1.0 / max(np.sqrt(g @ g), 1e-300))
        for _ in range(30):
            F1, g1 = f(x + t * d)
            if F1 <= F + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            return x
        s_, y_ = t * d, g1 - g
        x, F, g = x + s_, F1, g1
        if y_ @ s_ > 1e-12 * (s_ @ s_):
            S.append(s_)
            Y.append(y_)
            if len(S) > m:
                S.pop(0)
                Y.pop(0)
    return x


def truncate(C, G, k):
    """Best rank-k (Frobenius) factors of B = C G, as a warm start."""
    Ub, s, Vbt = np.linalg.svd(C @ G, full_matrices=False)
    return Ub[:, :k] * s[:k], Vbt[:k]


def descend(A, eps, C, G, floor=1, attempts=24, iters=400):
    """From a rank-k solution, try ranks k - s (s = k // 8, halving on failure; never below
    floor) with refine, at most `attempts` times; yields every (k', C', G') whose float max row
    error is <= eps (1 - SAFETY)."""
    target = eps * (1 - SAFETY)
    k = C.shape[1]
    step = max(1, k // 8)
    while k > floor and attempts > 0:
        attempts -= 1
        k1 = max(floor, k - step)
        C1, G1 = refine(A, *truncate(C, G, k1), eps=eps, iters=iters)
        if row_errors(A, C1 @ G1).max() <= target:
            C, G, k = C1, G1, k1
            yield k, C, G
        elif step > 1:
            step //= 2
        else:
            return


# ---------------------------------------------------------------- the search

def search(A, eps, judge, floor=1, attempts=24, lp_max_rank=48):
    """Smallest certified rank found: dict(k, U, V, method, certified_error, svd_rank, tried).

    judge(U, V) -> the kernel's certified max_i ||A_i - (U V^T)_i||_1 (the only arbiter).
    floor: a certified lower bound (the search stops there).  attempts: refinement steps;
    lp_max_rank: the greedy-row and union LP bases are tried only below this rank (cost
    n N k^2 per IRLS sweep).  Deterministic: no clocks, no randomness."""
    t0 = time.perf_counter()
    n, N = A.shape
    tried = []
    best = None

    def offer(method, C, G):
        nonlocal best
        k = C.shape[1]
        if best is not None and k >= best["k"]:
            return False
        U, V = np.ascontiguousarray(C), np.ascontiguousarray(G.T)
        e = judge(U, V)
        tried.append({"method": method, "k": int(k), "certified_error": float(e)})
        if e <= eps:
            best = {"k": int(k), "U": U, "V": V, "method": method, "certified_error": float(e)}
            return True
        return False

    # 1. truncated SVD: smallest k with float error <= target, then up until certified
    Uf, s, Vt = np.linalg.svd(A, full_matrices=False)
    target = eps * (1 - SAFETY)
    k_svd = next((k for k in range(1, len(s) + 1)
                  if row_errors(A, (Uf[:, :k] * s[:k]) @ Vt[:k]).max() <= target), len(s))
    for k in range(k_svd, len(s) + 1):
        if offer("svd", Uf[:, :k] * s[:k], Vt[:k]):
            break
    if best is None:                  # rank min(n, N): B = A's float SVD at full rank, or A itself
        offer("identity", np.eye(n) if n <= N else Uf * s, A if n <= N else Vt)
    if best is None:
        return {"k": None, "tried": tried}
    svd_rank = best["k"]

    # 2. LP row fits on SVD / greedy-row / union bases
    if best["k"] > floor:
        Vs, Gr = Vt, greedy_row_basis(A)
        bases = {"lp-svd": lambda k: Vs[:k], "lp-rows": lambda k: Gr[:k],
                 "lp-union": lambda k: orthonormal_union(Vs[:(k + 1) // 2], Gr[:k // 2])[:k]}
        for name, basis in bases.items():
            if best["k"] <= floor or best["k"] > lp_max_rank:
                continue
            found = smallest_basis_rank(A, eps, basis, floor - 1, best["k"] - 1)
            if found is None:
                continue
            k, C, G = found
            C_lp, e_lp = fit_rows_lp(A, G)
            if e_lp.max() <= target and offer(name, C_lp, G):
                continue
            offer(name, C, G)

    # 3. joint refinement, warm-started from the best
    if best["k"] > floor:
        C0, G0 = best["U"], best["V"].T
        for k, C, G in descend(A, eps, C0, G0, floor, attempts):
            if not offer("refined", C, G):
                break
        if best["method"] == "refined" and best["k"] > 1:      # LP polish can only lower errors
            G = best["V"].T
            C_lp, e_lp = fit_rows_lp(A, G)
            if e_lp.max() <= target:
                C_lp = np.ascontiguousarray(C_lp)
                e = judge(C_lp, best["V"])
                if e <= min(eps, best["certified_error"]):
                    best.update(U=C_lp, certified_error=float(e), method="refined+lp")
    best.update(tried=tried, svd_rank=svd_rank, seconds=time.perf_counter() - t0)
    return best
