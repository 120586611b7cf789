"""The visible interaction dimension (docs/mathematics.md §4.1, §4.4; under a row mask §4.5).

r_exact = dim P_U span{k_j - k_1} = rank(Q_c K_c^T), the rank of the doubly centred logits, with U
= span{q_i - q_1} the query-difference space.  Numerically: B_U from the SVD of Q_c, S = (K - 1 e0^T)
B_U, r_num = #{k : sigma_k(S) > tol} (frame); a certified lower bound r_exact_lower = #{k : lo_k(S^) >
E} by Weyl, with E a rigorous bound on the formation error of S^.  Under a row mask, r_M = dim
P_{U_M} sum_i D_i over the key pairs each row sees (visible_pairs).  No upper bound is claimed.
"""
import math

import numpy as np

from ..choices import LAPACK
from ..kernel.numerics import U as _u, ETA, gamma, inflate, singular_value_bounds
from .floats import BLOCK, fro, fro_up


def frame(Q, K, tol=None, tau_rel=None):
    """Numerical U, S, its SVD and a full orthonormal frame [W-ordered U basis | U^perp] (docs/mathematics.md §4.4).

    A dict: Q, K (float64), n, N, d; m = dim U, B_U (d x m), B_perp (d x (d - m)), sq (singular
    values of Q_c), tol_U, tol_U_spec; e0 (mean key), S = (K - 1 e0^T) B_U, sigma (its singular
    values), V_S (its right singular vectors), tol, r_num = #{k : sigma_k > tol}; Omega = [B_U V_S |
    B_perp], d x d orthonormal, whose first r columns span W_r.

    tol_U = max(10 max(n, d) u sigma_1(Q_c), F_U) and, by default, tol = max(10 max(N, m) u
    sigma_1(S), F_S), where F_U, F_S are first-order bounds on ||fl(Q_c) - Q_c||_F and
    ||fl(S) - S||_F (rounding of the mean, the subtraction and the product).  A user tol (or
    tau_rel * sigma_1(S)) is used as given.
    """
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    if Q.ndim != 2 or K.ndim != 2 or Q.shape[1] != K.shape[1] or len(Q) == 0 or len(K) == 0:
        raise ValueError("Q (n x d) and K (N x d) with n, N >= 1 and a common d")
    n, d = Q.shape
    N = K.shape[0]
    qbar = Q.mean(axis=0)
    Qc = Q - qbar
    _, sq, Vqt = np.linalg.svd(Qc, full_matrices=n < d)     # Vqt: d x d
    # |fl(mean) - mean| <= gamma_n mean|q| per column; the subtraction adds u |Q_c|.
    dq = gamma(max(n, 2)) * np.abs(Q).mean(axis=0)
    F_U = math.sqrt(n) * float(np.linalg.norm(dq)) + _u * fro(Qc)
    tol_U_spec = 10.0 * max(n, d) * _u * (float(sq[0]) if sq.size else 0.0)
    tol_U = max(tol_U_spec, 2.0 * F_U)
    m = int(np.sum(sq > tol_U))
    B_U = Vqt[:m].T                     # d x m
    B_perp = Vqt[m:].T                  # d x (d - m)

    e0 = K.mean(axis=0)
    D = K - e0
    S = D @ B_U                         # N x m
    if m:
        _, s, Vst = np.linalg.svd(S, full_matrices=N < m)      # Vst: m x m
        V_S = Vst.T                     # m x m
    else:
        s, V_S = np.zeros(0), np.zeros((0, 0))
    sig1 = float(s[0]) if s.size else 0.0
    de = gamma(max(N, 2)) * np.abs(K).mean(axis=0)
    F_S = (math.sqrt(N) * float(np.linalg.norm(de)) + (gamma(max(d, 2)) + _u) * fro(D)) \
        * math.sqrt(max(m, 1))
    if tol is not None:
        tol_used = float(tol)
    elif tau_rel is not None:
        tol_used = float(tau_rel) * sig1
    else:
        tol_used = max(10.0 * max(N, m) * _u * sig1, 2.0 * F_S)
    r_num = int(np.sum(s > tol_used))
    Omega = np.hstack([B_U @ V_S, B_perp]) if d else np.zeros((0, 0))
    return dict(Q=Q, K=K, n=n, N=N, d=d, m=m, B_U=B_U, B_perp=B_perp, sq=sq, tol_U=tol_U,
                tol_U_spec=tol_U_spec, e0=e0, S=S, sigma=s, V_S=V_S, tol=tol_used,
                r_num=r_num, Omega=Omega)


def _certified_rank_lower(Q, K, B_U, pairs=None):
    """A rigorous lower bound on r_exact = rank((Q - 1 q_1^T)(K - 1 k_1^T)^T) (docs/mathematics.md §4.1, §4.4);
    with pairs (a p x 2 integer array of key indices (j', j)), on r_M = rank((Q - 1 q_1^T) D^T), D the
    p x d matrix of the differences k_j - k_j' (the masked visible dimension, docs/mathematics.md §4.5).

    Take any float T (n x m); columns of Q_c^T T lie in U exactly, so G = D Q_c^T T has
    rank G <= rank(D P_U) (D = K_c, or the pair differences).  With Dq = fl(Q - 1 q_1^T), Dk = fl(D)
    (one subtraction per entry either way), B' = fl(Dq^T T) and S^ = fl(Dk B'):
        |Dk - D| <= u |D|,   |B' - Dq^T T| <= g_n |Dq|^T |T| + n eta,
        |S^ - Dk B'| <= g_d |Dk| |B'| + d eta                     (entrywise),
    and, with a = ||Dk||_F, b = ||Dq||_F, t = ||T||_F, c = ||B'||_F, N the rows of Dk,
        ||G - S^||_2 <= E := g_d a c + sqrt(Nm) d eta + a (g_n b t + sqrt(dm) n eta)
                             + 2u a b t + 2u (1 + 2u) a b t.
    Weyl: sigma_k(G) >= lo_k(S^) - E, so the rank is >= #{k : lo_k(S^) > E}.  T solves
    Dq^T T ~ B_U in least squares (any T is valid).
    """
    n, d = Q.shape
    m = B_U.shape[1]
    Dk = K - K[0] if pairs is None else K[pairs[:, 1]] - K[pairs[:, 0]]
    N = Dk.shape[0]
    if m == 0 or N < (2 if pairs is None else 1) or n < 2:
        return 0, 0.0, np.zeros(0)
    Dq = Q - Q[0]
    T = np.linalg.lstsq(Dq.T, B_U, rcond=None)[0]            # n x m
    Bp = Dq.T @ T
    Sh = Dk @ Bp
    a, b, t, c = fro_up(Dk), fro_up(Dq), fro_up(T), fro_up(Bp)
    gn, gd = gamma(max(n, 2)), gamma(max(d, 2))
    E = (gd * a * c + math.sqrt(N * m) * d * ETA
         + a * (gn * b * t + math.sqrt(d * m) * n * ETA)
         + 2 * _u * a * b * t + 2 * _u * (1 + 2 * _u) * a * b * t)
    E = inflate(E * (1 + 1e-12), 64)
    try:
        lo, _ = singular_value_bounds(Sh, *LAPACK.svd(Sh))
    except ArithmeticError:
        return 0, E, np.zeros(0)
    return int(np.sum(lo > E)), E, lo


def visible_pairs(mask, n, N, keep=None):
    """The masked head's key pairs and the rows that see two keys or more (docs/mathematics.md §4.5):
    (pairs, rows).  mask: a certkit.RowMask, or an n x N boolean matrix (True: key j visible to
    query i); keep: the kept columns (N booleans, None: all).  pairs: a p x 2 integer array of the
    distinct (j', j) such that j' < j are consecutive visible keys of some row i; the differences
    k_j - k_j' span sum_i D_i, D_i = span{k_j - k_j' : j, j' in S_i}.  rows: the indices i with
    |S_i| >= 2 (a row that sees one key is e_j whatever its query).  Computed in row blocks (a few
    million entries at a time), so n = N = 16384 needs no n x N matrix."""
    keep = np.ones(N, dtype=bool) if keep is None else np.asarray(keep, dtype=bool)
    dense = isinstance(mask, np.ndarray)
    if dense and mask.shape != (n, N):
        raise ValueError(f"mask: expected an {n} x {N} boolean matrix, got shape {mask.shape}")
    codes, rows = [], []
    step = max(1, BLOCK // max(N, 1))
    col = np.arange(N)
    for i0 in range(0, n, step):
        idx = np.arange(i0, min(n, i0 + step))
        V = (np.asarray(mask[i0:i0 + step], dtype=bool) if dense else mask.visible(idx, N)) & keep
        rows.append(idx[V.sum(axis=1) >= 2])
        last = np.maximum.accumulate(np.where(V, col, -1), axis=1)       # last visible key <= j
        prev = np.concatenate([np.full((len(idx), 1), -1), last[:, :-1]], axis=1)
        sel = V & (prev >= 0)
        codes.append(np.unique(prev[sel].astype(np.int64) * N + np.broadcast_to(col, V.shape)[sel]))
    code = np.unique(np.concatenate(codes)) if codes else np.zeros(0, dtype=np.int64)
    return np.stack([code // N, code % N], axis=1), np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64)


def _masked_visible_dimension(Q, K, mask, keep, tol=None, tau_rel=None):
    """visible_dimension under a row mask (docs/mathematics.md §4.5): r_M = dim P_{U_M} sum_i D_i,
    U_M = span{q_i - q_i0 : |S_i| >= 2}.  Numerically as frame() (§4.4): B_U from the SVD of the
    centred queries of the rows that see two keys, S = D B_U with D the pair differences of
    visible_pairs, r_num = #{k : sigma_k(S) > tol}, tol floored by the formation error of S."""
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    n, d = Q.shape
    pairs, rows = visible_pairs(mask, n, K.shape[0], keep)
    Q2 = Q[rows]
    m, B_U, tol_U = 0, np.zeros((d, 0)), 0.0
    if len(Q2) >= 2:
        f = frame(Q2, K[:1])                                  # the query part of frame(): U_M and its tolerance
        m, B_U, tol_U = f["m"], f["B_U"], f["tol_U"]
    D = K[pairs[:, 1]] - K[pairs[:, 0]]
    S = D @ B_U
    if m and len(D):
        _, s, Vst = np.linalg.svd(S, full_matrices=len(D) < m)
        V_S = Vst.T
    else:
        s, V_S = np.zeros(0), np.zeros((m, m))
    sig1 = float(s[0]) if s.size else 0.0
    F_S = (gamma(max(d, 2)) + _u) * fro(D) * math.sqrt(max(m, 1))   # |fl(D) - D| <= u |D|, then the product
    if tol is not None:
        tol_used = float(tol)
    elif tau_rel is not None:
        tol_used = float(tau_rel) * sig1
    else:
        tol_used = max(10.0 * max(len(D), m) * _u * sig1, 2.0 * F_S)
    r_num = int(np.sum(s > tol_used))
    r_low, E, lo = _certified_rank_lower(Q2, K, B_U, pairs) if len(Q2) >= 2 else (0, 0.0, np.zeros(0))
    return dict(r_num=r_num, tol=tol_used, tol_U=tol_U, dim_U=m, B_U=B_U, sigma=s, S=S,
                V=(B_U @ V_S)[:, :r_num], r_exact_lower=r_low, E=E, sigma_lower=lo, masked=True,
                rows_seeing_two=int(len(rows)), pairs=int(len(pairs)))


def visible_dimension(Q, K, tol=None, tau_rel=None, *, mask=None, weights=None):
    """The visible interaction dimension r (docs/mathematics.md §4.1, §4.4; under a row mask §4.5).

    r_exact = dim P_U span{k_j - k_1} = rank(Q_c K_c^T) = rank of the doubly centred logits.
    Returns a dict:

    * ``r_num``: #{k : sigma_k(S) > tol}, S = (K - 1 e0^T) B_U (untrusted, float);
    * ``tol``: the tolerance used (docs/mathematics.md §4.4 default 10 max(N, dim U) u sigma_1(S), floored by
      the float formation error of S; or ``tol``; or ``tau_rel * sigma_1(S)``);
    * ``tol_U``, ``dim_U``, ``B_U`` (d x dim U orthonormal basis of the numerical U);
    * ``sigma``: singular values of S (descending), ``S``, ``V``: d x r_num basis of
      V = W_{r_num} (top right singular directions of Z);
    * ``r_exact_lower``: a **certified** lower bound on r_exact: #{k : lo_k > E}, lo_k from
      certkit.kernel.numerics.singular_value_bounds on a float matrix S^ whose exact counterpart
      has rank <= r_exact, E a rigorous bound on the formation error (see
      _certified_rank_lower); ``E`` and ``sigma_lower`` (the lo_k) are returned too.

    weights: the head's column weights (zero: a dropped key, left out of K).  mask: a
    certkit.RowMask or an n x N boolean matrix of the keys each query sees; then r is the masked
    visible dimension r_M = dim P_{U_M} sum_i D_i of docs/mathematics.md §4.5 (D_i = span{k_j - k_j'
    : j, j' seen by row i}, U_M the query differences of the rows that see two keys or more), with
    the same fields, S the pair differences in U_M-coordinates, and ``masked`` True,
    ``rows_seeing_two``, ``pairs``; r_exact_lower is then a certified lower bound on r_M.
    r_M <= the unmasked r of the kept keys.

    No upper bound on r_exact is claimed (docs/mathematics.md §4.4: only exact arithmetic can certify one).
    """
    keep = None if weights is None else np.asarray(weights, dtype=np.float64) > 0
    if mask is not None:
        return _masked_visible_dimension(Q, K, mask, keep, tol, tau_rel)
    K = np.asarray(K, dtype=np.float64)
    if keep is not None:
        K = K[keep]
    f = frame(Q, K, tol, tau_rel)
    r_low, E, lo = _certified_rank_lower(f["Q"], f["K"], f["B_U"])
    V = f["Omega"][:, :f["r_num"]]
    return dict(r_num=f["r_num"], tol=f["tol"], tol_U=f["tol_U"], dim_U=f["m"], B_U=f["B_U"],
                sigma=f["sigma"], S=f["S"], V=V, r_exact_lower=r_low, E=E, sigma_lower=lo)
