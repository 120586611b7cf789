"""Head geometry: visible interaction dimension, radii and the SVD bridge (docs/mathematics.md §4–§6).

UNTRUSTED.  Everything here is float64 numpy/scipy and only *chooses* things (subspaces,
centres, ranks) that a certificate later declares; the trusted kernel re-evaluates whatever it
relies on.  The single rigorous quantity is ``visible_dimension(...)["r_exact_lower"]``, a
certified lower bound on r_exact (docs/mathematics.md §4.4, "lower bounds are certifiable").

Notation (docs/mathematics.md §4.1).  Queries q_1..q_n and keys k_1..k_N are rows of Q (n x d) and K (N x d);
logits l_ij = log w_j + beta <q_i, k_j>.

* U = span{q_i - q_1}, the query-difference space; numerically the span B_U of the right
  singular vectors of Q_c = Q - 1 q-bar^T above tol_U (docs/mathematics.md §4.4 step 1).
* S = (K - 1 e0^T) B_U (e0 = mean key), the centred visible key matrix in U-coordinates; it has
  the singular values of Z = (K - 1 e0^T) P_U (docs/mathematics.md §4.4 step 2, §6.1).
* r_num = #{k : sigma_k(S) > tol} (docs/mathematics.md §4.4 step 3), V = W_{r_num}.
* W_r = span{v_1..v_r}, the top right singular vectors of Z (docs/mathematics.md §6.1), nested in r.
* W_r^perp = E_1 ⊕ E_2, E_1 = U ⊖ W_r, E_2 = U^perp (two blocks, docs/mathematics.md §5.2).

Deviations from the letter of docs/mathematics.md (all documented where they happen):

* tol_U and the default tol are floored by a bound on the float formation error of Q_c and S.
  The purely relative docs/mathematics.md tolerance 10 max(n, d) u sigma_1(Q_c) fails when all queries are
  equal but not dyadic-friendly: fl(mean) != q, Q_c is pure round-off (sigma_1 ~ 1e-15) and
  the relative rule keeps that noise direction, giving dim U = 1 and r_num = 1 for a key-only
  head.  With the floor, dim U = 0 and r_num = 0.
* tau_spec uses the spectral width 2 sigma_{r+1}(Z) only on the block E_1 = U ⊖ W_r (where
  Lemma 6.1 applies) and keeps the exact width omega_K^(2) on E_2 = U^perp:
      tau_spec(r) = 2 tanh( beta (2 delta_Q^(1) sigma_{r+1} + delta_Q^(2) omega_K^(2)) / 4 ).
  When U is exact (delta_Q^(2) = 0) this is docs/mathematics.md §6.2's 2 tanh(beta delta_Q sigma_{r+1} / 2).
  With a numerical U the literal formula 2 tanh(beta (delta^(1) + delta^(2)) sigma_{r+1} / 2)
  is not an upper bound of tau_exact (keys outside U are not controlled by sigma(Z)).
* The residual query centre c' changes osc_j h_ij (h_ij contains -beta <c', P_{W^perp} k_j>,
  a function of j).  We take c' = (Chebyshev centre of P_{E_1} q_i, Chebyshev centre of
  P_{E_2} q_i), the centres delta_Q^(l) are measured about, so tau_exact <= tau_width holds.
"""
from __future__ import annotations

import math
from fractions import Fraction
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np
import scipy.optimize

from .choices import LAPACK
from .head import softmax_rows
from .numbers import parse_beta
from .kernel.numerics import U as _u, ETA, gamma, inflate, singular_value_bounds, sum_up

__all__ = [
    "frame", "visible_dimension", "visible_pairs", "chebyshev_centre", "diameter", "profile_geometry",
    "ProfileGeometry",
    "residual_profile", "ResidualRow", "centred_bias", "absorb_bias", "biased_rank_lower", "LazyProfile",
    "ResidualProfile", "r_svd_int", "r_opt", "gibbs_form",
]

_BLOCK = 1 << 22            # entries per block in blocked n x N computations


# ----------------------------------------------------------------------------- helpers

def _fro_up(A):
    """An upper bound of the Frobenius norm of the float array A (as the kernel's fro_up)."""
    A = np.asarray(A, dtype=np.float64)
    if A.size == 0:
        return 0.0
    return inflate(float(np.sqrt(sum_up(A * A))), 2)


def _fro(A):
    return float(np.linalg.norm(A)) if A.size else 0.0


def _as_float(beta):
    """A float near beta (any exact form of certkit.numbers.parse_beta, or a float)."""
    return float(parse_beta(beta))


def _log_weights(weights, N):
    if weights is None:
        return np.zeros(N)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (N,) or np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be a finite non-negative vector of length N")
    with np.errstate(divide="ignore"):
        return np.log(w)


def _kept(Q, K, weights, log_offset=None):
    """(Q, K, log w + log_offset, keep) as float64 arrays; keep marks the columns of positive weight."""
    logw = _log_weights(weights, np.shape(K)[0])
    if log_offset is not None:
        logw = logw + np.asarray(log_offset, dtype=np.float64)
    return np.asarray(Q, dtype=np.float64), np.asarray(K, dtype=np.float64), logw, np.isfinite(logw)


def _two_tanh_quarter(s):
    """2 tanh(s/4) for s >= 0 (docs/mathematics.md §2.2)."""
    return 2.0 * math.tanh(s / 4.0)


# ----------------------------------------------------------------------------- §4.4 frame

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
    F_U = math.sqrt(n) * float(np.linalg.norm(dq)) + _u * _fro(Qc)
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
    F_S = (math.sqrt(N) * float(np.linalg.norm(de)) + (gamma(max(d, 2)) + _u) * _fro(D)) \
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
    a, b, t, c = _fro_up(Dk), _fro_up(Dq), _fro_up(T), _fro_up(Bp)
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
    step = max(1, _BLOCK // max(N, 1))
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
    F_S = (gamma(max(d, 2)) + _u) * _fro(D) * math.sqrt(max(m, 1))   # |fl(D) - D| <= u |D|, then the product
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


# ----------------------------------------------------------------------------- radii

def chebyshev_centre(X, bc_iters=200, max_rounds=12):
    """A near-minimal enclosing ball of the rows of X: (c, radius), radius = max_i |x_i - c|.

    rad(X) = min_c max_i |x_i - c| (docs/mathematics.md notation).  Any c gives the valid radius
    rad_c(X) >= rad(X); the checker never needs optimality (docs/mathematics.md §4.2, §11).  Method:
    Bădoiu–Clarkson iterations c <- c + (x_far - c)/(t + 1) (radius within (1 + 1/sqrt t) of
    optimal), then the convex program  min_{c, s} s  s.t.  |x_i - c|^2 <= s  by SLSQP on an
    active set of far points, enlarged by violators until every point is inside.  The best of
    {mean, Bădoiu–Clarkson, SLSQP} by the recomputed max distance is returned.
    """
    X = np.asarray(X, dtype=np.float64)
    if X.ndim != 2 or X.shape[0] == 0:
        raise ValueError("X must be a non-empty p x k array")
    p, k = X.shape
    if k == 0:
        return np.zeros(0), 0.0

    def rad_of(c):
        return float(np.sqrt(np.max(np.sum((X - c) ** 2, axis=1))))

    cands = [X.mean(axis=0)]
    if p == 1:
        return X[0].copy(), 0.0
    c = X[0].copy()
    for t in range(1, bc_iters + 1):
        far = int(np.argmax(np.sum((X - c) ** 2, axis=1)))
        c = c + (X[far] - c) / (t + 1)
    cands.append(c.copy())
    R0 = rad_of(c)
    if R0 > 0 and np.isfinite(R0):
        Y = (X - c) / R0                                 # well scaled: radius 1 about 0
        dist = np.sqrt(np.sum(Y * Y, axis=1))
        take = min(p, max(2 * (k + 2), 32))
        active = set(np.argsort(-dist)[:take].tolist()) | set(np.nonzero(dist >= 0.7)[0].tolist())
        z = np.concatenate([np.zeros(k), [1.0]])
        for _ in range(max_rounds):
            idx = np.array(sorted(active))
            Ya = Y[idx]

            def cons(v, Ya=Ya):
                return v[-1] - np.sum((Ya - v[:-1]) ** 2, axis=1)

            def cons_jac(v, Ya=Ya):
                J = np.empty((len(Ya), k + 1))
                J[:, :k] = 2.0 * (Ya - v[:-1])
                J[:, k] = 1.0
                return J

            res = scipy.optimize.minimize(
                lambda v: v[-1], z, jac=lambda v: np.concatenate([np.zeros(k), [1.0]]),
                method="SLSQP", constraints=[dict(type="ineq", fun=cons, jac=cons_jac)],
                options=dict(maxiter=200, ftol=1e-15))
            z = res.x
            z[-1] = max(z[-1], float(np.max(np.sum((Ya - z[:-1]) ** 2, axis=1))))
            d2 = np.sum((Y - z[:-1]) ** 2, axis=1)
            viol = np.nonzero(d2 > z[-1] * (1 + 1e-12))[0]
            if viol.size == 0:
                break
            active |= set(viol[np.argsort(-d2[viol])][: max(k + 2, 16)].tolist())
        cands.append(c + R0 * z[:-1])
    radii = [rad_of(cc) for cc in cands]
    best = int(np.argmin(radii))
    return cands[best], radii[best]


def diameter(X):
    """diam{x_i} = max_{i,i'} |x_i - x_i'| in float, blocked (docs/mathematics.md §5.2 omega_K).

    The rows are first centred at their mean (which lies in their convex hull, so every |x|
    is <= diam afterwards); blocked Gram distances |x|^2 + |y|^2 - 2<x, y> then have absolute
    error O(k u diam^2), i.e. relative error O(k u) at the maximising pair.  The maximising
    pair is recomputed by direct subtraction.
    """
    X = np.asarray(X, dtype=np.float64)
    p = X.shape[0]
    if p < 2 or X.shape[1] == 0:
        return 0.0
    Y = X - X.mean(axis=0)
    nrm = np.sum(Y * Y, axis=1)
    best, bi, bj = -1.0, 0, 0
    step = max(1, _BLOCK // max(p, 1))
    for i0 in range(0, p, step):
        blk = Y[i0:i0 + step]
        D2 = nrm[i0:i0 + step, None] + nrm[None, :] - 2.0 * (blk @ Y.T)
        a = int(np.argmax(D2))
        v = float(D2.flat[a])
        if v > best:
            best, bi, bj = v, i0 + a // p, a % p
    return float(np.linalg.norm(X[bi] - X[bj]))


# ----------------------------------------------------------------------------- §5, §6 profile

@dataclass(frozen=True)
class ResidualRow:
    """One r of the SVD-bridge profile (docs/mathematics.md §5.1–§6.2).  Blocks: (U ⊖ W_r, U^perp)."""
    r: int
    rho_Q: float                    # rad P_W q_i about its Chebyshev centre
    rho_K: float                    # rad P_W k_j about its Chebyshev centre
    Gamma_W: float                  # beta rho_Q rho_K
    delta_Q: tuple                  # (rad P_{U⊖W} q_i, rad P_{U^perp} q_i), about c'_1, c'_2
    omega_K: tuple                  # (diam P_{U⊖W} k_j, diam P_{U^perp} k_j)
    sigma_next: float               # sigma_{r+1}(Z) (0 beyond min(N, dim U))
    kappa: float                    # max_j |(I - P_W) z_j|
    tau_exact: float                # max_i 2 tanh(osc_j h_ij / 4) at the declared c'
    tau_width: float                # 2 tanh(beta sum_l delta^(l) omega^(l) / 4)
    tau_spec: float                 # 2 tanh(beta (2 delta^(1) sigma_{r+1} + delta^(2) omega^(2)) / 4)
    actual: float                   # max_i ||A_i - At_i||_1 (float64)


@dataclass
class ResidualProfile:
    """rows[r] for r = 0..r_max; basis columns 0..r-1 span W_r, columns r..dim_U-1 span U ⊖ W_r,
    the rest span U^perp (d x d orthonormal, float)."""
    rows: list
    r_max: int
    dim_U: int
    beta: float
    sigma: np.ndarray
    basis: np.ndarray
    tol: float
    extra: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, r):
        return self.rows[r]

    def __iter__(self) -> Iterator[ResidualRow]:
        return iter(self.rows)


def _blocked_osc_and_errors(Qt, Kt, r, m, c1, c2, beta, logw):
    """max_i osc_j h_ij and max_i ||A_i - At_i||_1 (docs/mathematics.md §5.1), in row blocks."""
    n, N = Qt.shape[0], Kt.shape[0]
    cprime = np.concatenate([c1, c2])
    Kres = Kt[:, r:]
    log_pi = logw + beta * (Kres @ cprime)               # log pi'_j
    Qw, Kw = Qt[:, :r], Kt[:, :r]
    osc_max, err_max = 0.0, 0.0
    step = max(1, _BLOCK // max(N, 1))
    for i0 in range(0, n, step):
        sl = slice(i0, i0 + step)
        H = beta * ((Qt[sl, r:] - cprime) @ Kres.T)
        osc_max = max(osc_max, float(np.max(H.max(axis=1) - H.min(axis=1))))
        Lt = log_pi + beta * (Qw[sl] @ Kw.T)
        L = logw + beta * (Qt[sl] @ Kt.T)                # exact logits, rotated frame
        err_max = max(err_max, float(np.max(np.abs(softmax_rows(L) - softmax_rows(Lt)).sum(axis=1))))
    return osc_max, err_max


@dataclass
class ProfileGeometry:
    """The beta-independent part of the profile of (Q, K, weights): the frame (as frame()), the
    rotated Qt = Q Omega, Kt = K_kept Omega, and for r = 0..r_max the Chebyshev centres and radii
    of Qt[:, :r] (cQ, rho_Q), Kt[:, :r] (cK, rho_K), Qt[:, r:m] (c1, d1), the diameter w1 of
    Kt[:, r:m] and kappa_r; c2, d2 (queries) and w2 (keys) of the U^perp block Qt[:, m:]."""
    frame: dict
    Qt: np.ndarray
    Kt: np.ndarray
    logw: np.ndarray
    keep: np.ndarray
    per_r: list
    c2: np.ndarray
    d2: float
    w2: float


def profile_geometry(Q, K, weights=None, *, tol=None, tau_rel=None, log_offset=None):
    """ProfileGeometry of the head (zero-weight columns dropped); shared by every beta (docs/mathematics.md §5.2:
    radii, diameters and kappa do not involve beta) and by the chain witnesses of search/chain.
    log_offset: an N-vector added to log w (the column term of a logit bias, absorb_bias)."""
    Q, K, logw, keep = _kept(Q, K, weights, log_offset)
    if not keep.any():
        raise ValueError("all column weights are zero")
    K, logw = K[keep], logw[keep]
    f = frame(Q, K, tol, tau_rel)
    m, d = f["m"], f["d"]
    Om = f["Omega"]
    Qt, Kt = Q @ Om, K @ Om
    St = f["S"] @ f["V_S"] if m else np.zeros((K.shape[0], 0))    # z_j in W-ordered U coords
    c2, d2 = chebyshev_centre(Qt[:, m:]) if d - m else (np.zeros(0), 0.0)
    w2 = diameter(Kt[:, m:])
    per_r = []
    for r in range(f["r_num"] + 1):
        cQ, rho_Q = chebyshev_centre(Qt[:, :r])
        cK, rho_K = chebyshev_centre(Kt[:, :r])
        c1, d1 = chebyshev_centre(Qt[:, r:m])
        zr = St[:, r:m]
        per_r.append(dict(cQ=cQ, rho_Q=rho_Q, cK=cK, rho_K=rho_K, c1=c1, d1=d1, w1=diameter(Kt[:, r:m]),
                          kappa=float(np.sqrt(np.max(np.sum(zr * zr, axis=1)))) if zr.size else 0.0))
    return ProfileGeometry(frame=f, Qt=Qt, Kt=Kt, logw=logw, keep=keep, per_r=per_r, c2=c2, d2=d2, w2=w2)


def residual_profile(Q, K, beta, weights=None, *, tol=None, tau_rel=None, geo=None):
    """The SVD-bridge profile r = 0..r_max (docs/mathematics.md §5, §6), float64, untrusted.

    For W_r = span{v_1..v_r} (top right singular vectors of Z, docs/mathematics.md §6.1) the logits split as
        l_ij = log pi'_j + beta <P_W q_i, P_W k_j> + h_ij,
        log pi'_j = log w_j + beta <c', P_{W^perp} k_j>,  h_ij = beta <P_{W^perp} q_i - c', P_{W^perp} k_j>
    (docs/mathematics.md §5.1), At_i = softmax_{pi'}(beta <P_W q_i, P_W k_j>) is an r-dimensional Gibbs matrix
    and, by Cor. 2.2 and the block bounds of docs/mathematics.md §5.2 / Lemma 6.1,
        actual := max_i ||A_i - At_i||_1 <= tau_exact <= tau_width <= tau_spec.
    Zero-weight (padding) columns are dropped.  r_max = r_num (docs/mathematics.md §6.3).  Key-only heads give
    dim U = 0, r_max = 0 and a single row with every tau = 0.  geo: profile_geometry(Q, K,
    weights, tol=, tau_rel=) computed once for several beta (it must be of the same head).
    """
    b = _as_float(beta)
    g = geo if geo is not None else profile_geometry(Q, K, weights, tol=tol, tau_rel=tau_rel)
    f, Qt, Kt = g.frame, g.Qt, g.Kt
    m, r_max, s = f["m"], f["r_num"], f["sigma"]
    rows = []
    for r, x in enumerate(g.per_r):
        d1, w1, d2, w2 = x["d1"], x["w1"], g.d2, g.w2
        sig = float(s[r]) if r < s.size else 0.0
        osc, act = _blocked_osc_and_errors(Qt, Kt, r, m, x["c1"], g.c2, b, g.logw)
        rows.append(ResidualRow(
            r=r, rho_Q=x["rho_Q"], rho_K=x["rho_K"], Gamma_W=b * x["rho_Q"] * x["rho_K"],
            delta_Q=(d1, d2), omega_K=(w1, w2), sigma_next=sig, kappa=x["kappa"],
            tau_exact=_two_tanh_quarter(osc),
            tau_width=_two_tanh_quarter(b * (d1 * w1 + d2 * w2)),
            tau_spec=_two_tanh_quarter(b * (2.0 * d1 * sig + d2 * w2)),
            actual=act))
    return ResidualProfile(rows=rows, r_max=r_max, dim_U=m, beta=b, sigma=s, basis=f["Omega"],
                           tol=f["tol"], extra=dict(tol_U=f["tol_U"], kept=g.keep))


def r_svd_int(profile, tau=None, *, eps=None):
    """r_SVD_int(tau) = min{ r in 0..r_max : tau_r^width <= tau } (docs/mathematics.md §6.3); tau = eps/3 by default.

    Non-increasing in tau.  Returns None when even tau_{r_max}^width > tau, which happens
    only when U is numerical and the U^perp block contributes delta^(2) omega^(2) > 0
    (docs/mathematics.md §6.3 assumes tau_{r_max} = 0, true for exact U).
    """
    if tau is None:
        if eps is None:
            raise ValueError("give tau or eps (tau = eps/3)")
        tau = eps / 3.0
    for row in profile:
        if row.tau_width <= tau:
            return row.r
    return None


def r_opt(profile, eps, log_size: Callable[[int, float, float], float]):
    """argmin_r log_size(r, Gamma_W(r), eps - tau_r^width) over r with tau_r^width < eps
    (docs/mathematics.md §6.3; log_size is the caller's covering bound, e.g. log S_r of docs/mathematics.md §5.3)."""
    best = None
    for row in profile:
        if row.tau_width < eps:
            v = log_size(row.r, row.Gamma_W, eps - row.tau_width)
            if best is None or v < best[1]:
                best = (row.r, v)
    return None if best is None else best[0]


# ----------------------------------------------------------------------------- §6.4 logit bias

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
    b = _as_float(beta)
    if not b > 0:
        raise ValueError("absorbing a logit bias needs beta > 0")
    keep = np.isfinite(_log_weights(weights, K.shape[0]))
    Bc, col = centred_bias(bias, keep)
    Ub, s, Vbt = np.linalg.svd(Bc, full_matrices=False)
    k = int(np.sum(s > 4 * max(Bc.shape) * _u * _fro(np.asarray(bias)[:, keep])))   # above the centring's noise
    root = np.sqrt(s[:k] / b)
    Ka_extra = np.zeros((K.shape[0], k))
    Ka_extra[keep] = Vbt[:k].T * root
    return np.hstack([Q, Ub[:, :k] * root]), np.hstack([K, Ka_extra]), col


class LazyProfile:
    """The SVD-bridge profile of a head computed only at the r asked for (row(r), cached), for heads
    whose r_max is too large for every r (a logit bias absorbed by absorb_bias gives r_max up to
    n - 1).  The radii are taken about Bădoiu–Clarkson centres (chebyshev_centre without the SLSQP
    polish: any centre gives a valid radius, within a factor 1 + 1/sqrt(200) of the least), so each
    tau here is the same upper bound as in residual_profile, slightly looser.  tau_r^width is
    non-increasing in r (nested projections shrink radii and diameters), so r_svd_int(tau) is found
    by bisection with O(log r_max) rows."""

    def __init__(self, Q, K, beta, weights=None, log_offset=None):
        Q, K, logw, keep = _kept(Q, K, weights, log_offset)
        K, self.logw = K[keep], logw[keep]
        f = self.frame = frame(Q, K)
        self.beta = _as_float(beta)
        self.m, self.r_max, self.sigma = f["m"], f["r_num"], f["sigma"]
        self.Qt, self.Kt = Q @ f["Omega"], K @ f["Omega"]
        self.c2, self.d2 = _fast_centre(self.Qt[:, self.m:])
        self.w2 = diameter(self.Kt[:, self.m:])
        self.cache = {}

    def row(self, r):
        """The ResidualRow at r (0 <= r <= r_max)."""
        if r not in self.cache:
            m, b, Qt, Kt = self.m, self.beta, self.Qt, self.Kt
            _, rho_Q = _fast_centre(Qt[:, :r])
            _, rho_K = _fast_centre(Kt[:, :r])
            c1, d1 = _fast_centre(Qt[:, r:m])
            w1 = diameter(Kt[:, r:m])
            sig = float(self.sigma[r]) if r < self.sigma.size else 0.0
            osc, act = _blocked_osc_and_errors(Qt, Kt, r, m, c1, self.c2, b, self.logw)
            d2, w2 = self.d2, self.w2
            self.cache[r] = ResidualRow(
                r=r, rho_Q=rho_Q, rho_K=rho_K, Gamma_W=b * rho_Q * rho_K, delta_Q=(d1, d2), omega_K=(w1, w2),
                sigma_next=sig, kappa=float("nan"), tau_exact=_two_tanh_quarter(osc),
                tau_width=_two_tanh_quarter(b * (d1 * w1 + d2 * w2)),
                tau_spec=_two_tanh_quarter(b * (2.0 * d1 * sig + d2 * w2)), actual=act)
        return self.cache[r]

    def r_svd_int(self, tau):
        """min{r : tau_r^width <= tau} by bisection (None when even r_max misses tau)."""
        if self.row(self.r_max).tau_width > tau:
            return None
        lo, hi = -1, self.r_max                 # tau_lo > tau (lo = -1: none), tau_hi <= tau
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.row(mid).tau_width <= tau:
                hi = mid
            else:
                lo = mid
        return hi

    def curve(self, points=24, tail=8):
        """Rows at `points` evenly spaced r from 0 to r_max and at the last `tail` r (where the
        width of a full-rank bias drops to 0), in increasing r."""
        rs = {int(round(v)) for v in np.linspace(0, self.r_max, points)} | set(range(max(self.r_max - tail, 0), self.r_max + 1))
        return [self.row(r) for r in sorted(rs)]


def _fast_centre(X):
    """(c, radius about c): chebyshev_centre's Bădoiu–Clarkson centre, no SLSQP polish."""
    if X.shape[1] == 0 or X.shape[0] == 0:
        return np.zeros(X.shape[1]), 0.0
    return chebyshev_centre(X, max_rounds=0)


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
    from .kernel.numerics import arb_of, arb_up
    from .numbers import OverSqrt
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    keep = np.isfinite(_log_weights(weights, K.shape[0]))
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
    F = inflate(_fro_up(Q) * _fro_up(K), 2)
    gd = gamma(max(d, 2))
    e = ((1 + _u) ** 2 * (db * ((1 + gd) * F + math.sqrt(n * N) * d * ETA) + bu * (gd * F + math.sqrt(n * N) * d * ETA))
         + ((1 + _u) ** 2 - 1) * bu * F + _u * _fro_up(B) + math.sqrt(n * N) * ETA)
    C = M
    for axis, p in ((0, n), (1, N)):
        mu = C.mean(axis=axis, keepdims=True)
        dmu = gamma(max(p, 2)) * np.abs(C).mean(axis=axis, keepdims=True)
        C = C - mu
        e += math.sqrt(p) * _fro_up(dmu) + _u * _fro_up(C)
    E = inflate(e * (1 + 1e-12), 64)
    try:
        lo, _ = singular_value_bounds(C, *LAPACK.svd(C))
    except ArithmeticError:
        return 0, E
    return int(np.sum(lo > E)), E


# ----------------------------------------------------------------------------- Lemma 4.1

def gibbs_form(Q, K, beta, weights=None, basis=None):
    """(x, y, log_pi) with A_i = softmax_j(log_pi_j + beta <x_i, y_j>) (docs/mathematics.md Lemma 4.1).

    <q_i - q_1, k_j - k_1> = <P_V(q_i - q_1), P_V(k_j - k_1)>, so with V-coordinates
    (orthonormal basis B_V, d x r) x_i = B_V^T q_i - c, y_j = B_V^T k_j - e (c, e Chebyshev
    centres) and
        log pi_j = log w_j + beta <q_1, k_j> - beta <B_V^T q_1 - c, B_V^T k_j>,
    the logits l_ij equal log pi_j + beta <x_i, y_j> up to row-only terms.  log_pi is shifted
    so that its finite maximum is 0 (it is defined up to a constant); zero weights give -inf.
    basis: a declared d x r orthonormal basis of V; default V = W_{r_num} from
    visible_dimension (float, untrusted).  r = 0 gives x, y with 0 columns (rank-one A).
    """
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    b = _as_float(beta)
    logw = _log_weights(weights, K.shape[0])
    if basis is None:
        keep = np.isfinite(logw)
        f = frame(Q, K[keep])
        basis = f["Omega"][:, :f["r_num"]]
    Bv = np.asarray(basis, dtype=np.float64).reshape(Q.shape[1], -1)
    Qv, Kv = Q @ Bv, K @ Bv
    c, _ = chebyshev_centre(Qv)
    e, _ = chebyshev_centre(Kv[np.isfinite(logw)])
    x, y = Qv - c, Kv - e
    log_pi = logw + b * (K @ Q[0]) - b * (Kv @ x[0])
    fin = np.isfinite(log_pi)
    log_pi = log_pi - (log_pi[fin].max() if fin.any() else 0.0)
    return x, y, log_pi
