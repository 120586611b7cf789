"""Arb references for tests and benchmarks, written independently of the kernel: the attention
matrix of (Q, K, beta) and the exact row errors ||A_i - (U V^T)_i||_1 of a factorisation, as balls
at 256 bits; and claims placed a relative distance from the true value."""
from fractions import Fraction

import flint
import numpy as np

PREC = 256


def attention_rows(Q, K, beta, weights=None, bias=None):
    """Rows of A = softmax(beta Q K^T + bias) as lists of Arb balls (beta a Fraction, bias exact floats); with
    column weights w, A_ij = w_j e^(l_ij) / sum_l w_l e^(l_il) (w_j = 0: the entry is exactly 0)."""
    with flint.ctx.workprec(PREC):
        S = (flint.arb_mat(Q.tolist()) * flint.arb_mat(K.T.tolist())).table()
        b = flint.arb(beta.numerator) / beta.denominator
        w = [1.0] * K.shape[0] if weights is None else weights.tolist()
        rows = []
        for i, s in enumerate(S):
            c = [0.0] * len(s) if bias is None else bias[i].tolist()
            e = [wj * (b * (x - s[0]) + (cj - c[0])).exp() for x, wj, cj in zip(s, w, c)]
            Z = sum(e, flint.arb(0))
            rows.append([x / Z for x in e])
    return rows


def row_distances(rows, sigma):
    """Balls containing ||A_i - A_sigma(i)||_1 for every row i (the errors of a covering)."""
    with flint.ctx.workprec(PREC):
        return [sum((abs(a - b) for a, b in zip(rows[i], rows[t])), flint.arb(0)) for i, t in enumerate(sigma)]


def factor_row_errors(rows, U, V):
    """Balls containing ||A_i - (U V^T)_i||_1 for every row i."""
    with flint.ctx.workprec(PREC):
        B = (flint.arb_mat(U.tolist()) * flint.arb_mat(V.T.tolist())).table()
        return [sum((abs(a - b) for a, b in zip(r, br)), flint.arb(0)) for r, br in zip(rows, B)]


def bounds(ball):
    """(lo, hi): exact rationals with lo <= every point of the ball <= hi."""
    lo, hi = (Fraction(int(m)) * Fraction(2) ** int(e) for m, e in (ball.lower().man_exp(), ball.upper().man_exp()))
    return lo, hi


def eps_near(errors, rel):
    """eps = max error * (1 + rel): a true claim (rel > 0) or a false one (rel < 0) at relative
    distance |rel| from the true max_i ||A_i - B_i||_1, exactly (a dyadic rational)."""
    lo = max(bounds(e)[0] for e in errors)
    hi = max(bounds(e)[1] for e in errors)
    assert hi - lo < abs(rel) * lo / 1000, "the reference is not precise enough"
    v = (hi if rel > 0 else lo) * (1 + Fraction(rel))
    return Fraction(round(v * 2 ** 80) + (1 if rel > 0 else -1), 2 ** 80)


def truncated_svd(A, k):
    """U (n x k), V (N x k) with U V^T the rank-k truncated SVD of the float matrix A."""
    u, s, vt = np.linalg.svd(A)
    return u[:, :k] * s[:k], vt[:k].T
