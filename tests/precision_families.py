"""The families of true claims reported as rejected by the old route auto, with their exact
row errors from the independent Arb reference (tests/arb_reference.py, 256 bits): shared by
tests/kernel/test_auto_route_precision.py and benchmarks/bench_auto_route.py.

* self: the float softmax given back as its own approximation, U = float A, V = I (true errors
  near 1e-16), and a covering of "twin" rows whose queries differ in the last bit;
* beta: beta = 2^20 or 2^30 on nearly equal keys (k_j = k_0 + 2^-30 g_j, logits O(1) apart);
* weights: column weights in (0, 2), an eighth of them 0 (dropped);
* bias: a logit bias of dyadic entries of size about 2 (the kernel's bias path, as relative positions give);
* gaussian: plain Gaussian heads;
* large: a Gaussian head with n N > 2^20 whose fast bound is loose on 8 rows only (a query component
  of 2^50 orthogonal to every key: the logits are exact, the Cauchy-Schwarz bound is not); and
  (large_self) the float softmax of a Gaussian head with n N > 2^20 as its own approximation, every
  row left open by the fast route.

Each head gives claims (label, kind, bound, witness, errors): truncated-SVD factors ("svd"), the
float softmax itself ("self"), a greedy covering ("cover"); errors are Arb balls of the per-row
errors whose maximum is the exact value a claim is placed at (arb_reference.eps_near).
"""
from fractions import Fraction

import numpy as np

import certkit
from certkit.search import basic

from arb_reference import attention_rows, bounds, factor_row_errors, row_distances, truncated_svd


def _gauss(rng, n, d=16, scale=0.5):
    return rng.standard_normal((n, d)) * scale, rng.standard_normal((n, d)) * scale


def heads(sizes, seed=0, large=None, large_self=None):
    """(family, name, Q, K, beta, extra, labels) for n = N in sizes (and large heads of n = N = large, large_self)."""
    rng = np.random.default_rng(seed)
    for n in sizes:
        Q, K = _gauss(rng, n)
        yield "self", f"self-n{n}", Q, K, Fraction(1), {}, ("self",)
        half = _gauss(rng, n // 2)[0]
        twins = np.vstack([half, half * (1 + 2.0 ** -52 * rng.choice([-1, 1], half.shape))])
        yield "self", f"twins-n{n}", twins, _gauss(rng, n)[1], Fraction(2), {}, ("twins",)
        for b in (20, 30):
            Q = rng.standard_normal((n, 8))
            K = rng.standard_normal(8) + 2.0 ** -30 * rng.standard_normal((n, 8))
            yield "beta", f"beta2^{b}-n{n}", Q, K, Fraction(2 ** b), {}, ("svd", "self", "cover")
        Q, K = _gauss(rng, n)
        w = rng.uniform(0, 2, n) * (rng.uniform(size=n) > 1 / 8)
        yield "weights", f"weights-n{n}", Q, K, Fraction(2), {"weights": w}, ("svd", "self", "cover")
        Q, K = _gauss(rng, n)
        bias = np.round(rng.standard_normal((n, n)) * 2 ** 21) / 2 ** 20
        yield "bias", f"bias-n{n}", Q, K, Fraction(1), {"bias": bias}, ("svd", "self", "cover")
        for beta in (Fraction(1), Fraction(2)):
            Q, K = _gauss(rng, n)
            yield "gaussian", f"gauss-b{beta}-n{n}", Q, K, beta, {}, ("svd", "cover")
    if large:                   # 8 queries carry 2^50 along a direction no key has: the fast bound of those rows is > 1
        Q, K = _gauss(rng, large)
        K[:, -1] = 0.0
        Q[rng.choice(large, 8, replace=False), -1] = 2.0 ** 50
        yield "large", f"large-n{large}", Q, K, Fraction(1), {}, ("svd",)
    if large_self:              # the float softmax as its own approximation: every row open on the fast route
        Q, K = _gauss(rng, large_self)
        yield "large", f"large-n{large_self}", Q, K, Fraction(1), {}, ("self",)


def claims(Q, K, beta, extra, labels):
    """(head, [(label, kind, bound, witness, errors)]) for the labels asked (a claim whose exact error is 0 is left out);
    extra: {} or the head's column "weights" or logit "bias" (keyword arrays of certkit.Head.from_arrays)."""
    head = certkit.Head.from_arrays(Q, K, beta, **extra)
    A = head.attention()
    rows = attention_rows(Q, K, beta, extra.get("weights"), extra.get("bias"))
    n, N = A.shape
    out = []
    if "svd" in labels:
        s = np.linalg.svd(A, compute_uv=False)
        k = max(1, int(np.searchsorted(-s, -s[0] * 1e-2)))          # a rank with a visible error
        U, V = truncated_svd(A, k)
        out.append(("svd", "upper-factorization", k, {"U": (U, "float"), "V": (V, "float")},
                    factor_row_errors(rows, U, V)))
    if "self" in labels:
        out.append(("self", "upper-factorization", N, {"U": (A, "float"), "V": (np.eye(N), "float")},
                    factor_row_errors(rows, A, np.eye(N))))
    if "cover" in labels or "twins" in labels:
        if "twins" in labels:
            reps, sigma = np.arange(n // 2), np.r_[np.arange(n // 2), np.arange(n // 2)]
        else:
            reps, sigma = basic.greedy_cover(A, 0.5)
        out.append(("cover", "upper-covering", len(reps), {"representatives": (np.asarray(reps), "int"),
                                                           "assignment": (np.asarray(sigma), "int")},
                    row_distances(rows, sigma)))
    return head, [c for c in out if max(bounds(e)[0] for e in c[4]) > 0]
