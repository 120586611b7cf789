"""A logit bias on the SVD bridge (docs/mathematics.md §6.4; proofs/bias-rank.md).

Logits beta <q_i, k_j> + log w_j + B_ij: B = B_c + (row term) + 1 col^T with B_c = J_n B J_N doubly
centred; the column term joins the weights, the row term leaves softmax unchanged, and B_c = U
diag(s) V^T is absorbed into the queries and keys (qa_i = (q_i, U_i s^(1/2) / sqrt(beta)), ka_j =
(k_j, V_j s^(1/2) / sqrt(beta))).  The rank of the biased logits, rank J_n (beta Q K^T + B) J_N,
gets a certified lower bound of its own (biased_rank_lower: Weyl with a rigorous formation error).
"""
import math
from fractions import Fraction

import numpy as np

from ..choices import LAPACK
from ..kernel.numerics import U as _u, ETA, gamma, inflate, singular_value_bounds
from ..numbers import parse_beta
from .floats import as_float, fro, fro_up, log_weights


def centred_bias(bias, keep):
    """(B_c, col) for a logit bias B on the kept columns (docs/mathematics.md §6.4):
    B = B_c + (row term) + 1 col^T with B_c = J_n B J_N doubly centred (J = I - 11^T / size) and
    col_j = mean_i B_ij (the column term, absorbed into the weights; 0 on dropped columns)."""
    B = np.asarray(bias, dtype=np.float64)
    Bk = B[:, keep]
    col = np.zeros(B.shape[1])
    col[keep] = Bk.mean(axis=0)
    Bc = Bk - Bk.mean(axis=0) - Bk.mean(axis=1, keepdims=True) + Bk.mean()
    return Bc, col


def absorb_bias(Q, K, beta, bias, weights=None):
    """(Qa, Ka, log_offset): a bias-free head with the same attention as the head with logit bias B
    (docs/mathematics.md §6.4).  With B_c = U diag(s) V^T (centred_bias, singular values above
    max(n, N) u s_1 kept):
        qa_i = (q_i, U_i s^(1/2) / sqrt(beta)),  ka_j = (k_j, V_j s^(1/2) / sqrt(beta)),
    so beta <qa_i, ka_j> = beta <q_i, k_j> + (B_c)_ij and the logits of (Qa, Ka, w e^col) differ
    from beta <q_i, k_j> + log w_j + B_ij by a row term only: softmax, r_exact, the profile and
    r_SVD_int of the logits with their bias are those of (Qa, Ka).  Float, untrusted; the rank of
    the biased logits is certified separately (biased_rank_lower).  bias None: (Q, K, None)."""
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    if bias is None:
        return Q, K, None
    b = as_float(beta)
    if not b > 0:
        raise ValueError("absorbing a logit bias needs beta > 0")
    keep = np.isfinite(log_weights(weights, K.shape[0]))
    Bc, col = centred_bias(bias, keep)
    Ub, s, Vbt = np.linalg.svd(Bc, full_matrices=False)
    k = int(np.sum(s > 4 * max(Bc.shape) * _u * fro(np.asarray(bias)[:, keep])))   # above the centring's noise
    root = np.sqrt(s[:k] / b)
    Ka_extra = np.zeros((K.shape[0], k))
    Ka_extra[keep] = Vbt[:k].T * root
    return np.hstack([Q, Ub[:, :k] * root]), np.hstack([K, Ka_extra]), col


def biased_rank_lower(Q, K, beta, bias, weights=None):
    """A certified lower bound on r_exact of the biased logits, rank J_n (beta Q K^T + B) J_N on the
    kept columns (docs/mathematics.md §6.4; proofs/bias-rank.md): (bound, E).

    M^ = fl(fl(b^ fl(Q K^T)) + B) with b^ = float(beta); C^ = fl(J M^ J) by a column then a row
    centring.  With P = Q K^T, |b^ - beta| <= db (Arb) and F = ||Q||_F ||K||_F >= ||P||_F:
        ||M^ - M||_F <= (1 + u)^2 (db ((1 + g_d) F + sqrt(nN) d eta) + beta (g_d F + sqrt(nN) d eta))
                        + ((1 + u)^2 - 1) beta F + u ||B||_F + sqrt(nN) eta,
    ||J (M^ - M) J||_F <= ||M^ - M||_F (||J||_2 = 1), and each centring X -> X - 1 fl(mean)^T adds
    at most sqrt(p) ||g_p mean|X| || + u ||fl result||_F.  Weyl: sigma_k(C) >= lo_k(C^) - E, so the
    rank is >= #{k : lo_k > E}.  beta must be an exact Fraction or OverSqrt."""
    import flint
    from ..kernel.numerics import arb_of, arb_up
    from ..numbers import OverSqrt
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    keep = np.isfinite(log_weights(weights, K.shape[0]))
    K, B = K[keep], np.asarray(bias, dtype=np.float64)[:, keep]
    n, d = Q.shape
    N = K.shape[0]
    if n < 2 or N < 2:
        return 0, 0.0
    beta = parse_beta(beta)
    with flint.ctx.workprec(80):
        if isinstance(beta, OverSqrt):
            exact_b = arb_of(beta.c) / arb_of(beta.D).sqrt()
        elif isinstance(beta, Fraction):
            exact_b = arb_of(beta)
        else:
            raise ValueError("biased_rank_lower needs a point beta (a Fraction or c/sqrt(D))")
        bh = float(beta)
        db = arb_up(abs(exact_b - flint.arb(bh)))
        bu = arb_up(exact_b)
    M = bh * (Q @ K.T) + B
    F = inflate(fro_up(Q) * fro_up(K), 2)
    gd = gamma(max(d, 2))
    e = ((1 + _u) ** 2 * (db * ((1 + gd) * F + math.sqrt(n * N) * d * ETA) + bu * (gd * F + math.sqrt(n * N) * d * ETA))
         + ((1 + _u) ** 2 - 1) * bu * F + _u * fro_up(B) + math.sqrt(n * N) * ETA)
    C = M
    for axis, p in ((0, n), (1, N)):
        mu = C.mean(axis=axis, keepdims=True)
        dmu = gamma(max(p, 2)) * np.abs(C).mean(axis=axis, keepdims=True)
        C = C - mu
        e += math.sqrt(p) * fro_up(dmu) + _u * fro_up(C)
    E = inflate(e * (1 + 1e-12), 64)
    try:
        lo, _ = singular_value_bounds(C, *LAPACK.svd(C))
    except ArithmeticError:
        return 0, E
    return int(np.sum(lo > E)), E
