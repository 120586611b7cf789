"""Peer low-rank approximations of an attention matrix (UNTRUSTED producers).

A = row-softmax(beta Q K^T + log w_j + bias_ij) is n x N (A = h.attention() for a certkit.Head h).
Each peer maps (A, h, k, seed) to float64 factors U (n x k), V (N x k) with B = U V^T, the
approximations practitioners use in place of a certified search.  A peer's own claim about its
error means nothing here: only the kernel's certified row error (certkit.kernel.numerics.max_row_error)
makes a reported rank honest.
"""
import time

import numpy as np
import scipy.linalg

from ..head import softmax_rows
from ..kernel import Rejected
from ..kernel.numerics import max_row_error
from .budget import step, tick


def _rank_limit(name, k, limit):
    if not 1 <= k <= limit:
        raise ValueError(f"{name}: need 1 <= k <= {limit}, got k = {k}")


def truncated_svd(A, h, k, seed=0, prep=None):
    """Eckart-Young: A = U S V^T, B = U_k S_k V_k^T; U = U_k S_k, V = V_k.  prep: the SVD of A
    (PREPARE["svd"]), computed once per A by smallest_rank."""
    _rank_limit("svd", k, min(A.shape))
    Uf, s, Vt = PREPARE["svd"](A) if prep is None else prep
    return Uf[:, :k] * s[:k], Vt[:k].T.copy()


def nystrom(A, h, k, seed=0, prep=None):
    """Skeleton / CUR (Nystrom) form: B = A[:, J] pinv(A[I, J]) A[I, :].

    The k landmark columns J (rows I) are the first k pivots of a column-pivoted QR of A (of
    A^T): deterministic, seed unused.  U = A[:, J] pinv(A[I, J]), V = A[I, :]^T.  B interpolates
    A exactly when rank(A[I, J]) = rank(A) <= k.  prep: the two full pivot orders (PREPARE["nystrom"]),
    whose first k entries are the pivots at every k."""
    _rank_limit("nystrom", k, min(A.shape))
    cols, rows = PREPARE["nystrom"](A) if prep is None else prep
    J, I = cols[:k], rows[:k]
    return A[:, J] @ np.linalg.pinv(A[np.ix_(I, J)]), A[I, :].T.copy()


def _orthogonal_gaussian(rng, k, d):
    """k x d rows: blocks of d orthonormal directions (QR of a Gaussian d x d), each row rescaled
    to an independent chi_d norm, so every row is marginally N(0, I_d) (Choromanski et al. 2021).
    The QR factor is sign-corrected (diag R > 0) so that it is Haar, not LAPACK-biased."""
    blocks = []
    for _ in range(-(-k // d)):
        Qb, R = np.linalg.qr(rng.standard_normal((d, d)))
        blocks.append((Qb * np.where(np.diag(R) < 0, -1.0, 1.0)).T)
    W = np.vstack(blocks)[:k]
    return W * np.linalg.norm(rng.standard_normal((k, d)), axis=1, keepdims=True)


def performer(A, h, k, seed=0):
    """Performer FAVOR+: positive orthogonal random features for exp(beta <q, x>).

    phi(x)_l = exp(sqrt(beta) <w_l, x> - beta |x|^2 / 2) / sqrt(k), w_l ~ N(0, I_d), so that
    E[phi(q)^T phi(x)] = exp(beta <q, x>).  With column weights, Phi_K rows are scaled by w_j;
    then A ~ D^{-1} Phi_Q Phi_K^T, D_i = sum_j (Phi_Q Phi_K^T)_ij.  U = D^{-1} Phi_Q, V = Phi_K.
    Per-row maxima of the query exponent and a global maximum of the key exponent are
    subtracted (both cancel in D^{-1}).  A row whose D_i underflows to 0 gets U_i = 0.
    A logit bias has no feature map: ValueError."""
    if h.bias is not None:
        raise ValueError("performer: logit bias not supported")
    if k < 1:
        raise ValueError(f"performer: need k >= 1, got k = {k}")
    beta = h.beta_float
    Q, K = h.queries, h.keys
    W = _orthogonal_gaussian(np.random.default_rng(seed), k, Q.shape[1])
    sb = np.sqrt(beta)
    LQ = sb * (Q @ W.T) - beta * (Q * Q).sum(axis=1, keepdims=True) / 2
    LK = sb * (K @ W.T) - beta * (K * K).sum(axis=1, keepdims=True) / 2
    PQ = np.exp(LQ - LQ.max(axis=1, keepdims=True)) / np.sqrt(k)
    PK = np.exp(LK - LK.max()) / np.sqrt(k)
    if h.weights is not None:
        PK = PK * h.weights[:, None]
    D = PQ @ PK.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        U = np.where(D[:, None] > 0, PQ / D[:, None], 0.0)
    return U, PK


def linformer(A, h, k, seed=0):
    """Linformer-style key projection with a fixed E (k x N): mean pooling over k consecutive
    column segments, E[l, j] = 1 / |seg_l| for j in seg_l.

    K' = E K, S = row-softmax(beta Q K'^T + log(E w) + bias E^T) (n x k), B = S E: each pooled
    column's mass is spread evenly over its segment.  U = S, V = E^T.  Linformer learns E;
    mean pooling is the parameter-free standard choice.  At k = N, E = I and B = A."""
    N = A.shape[1]
    _rank_limit("linformer", k, N)
    E = np.zeros((k, N))
    for l, seg in enumerate(np.array_split(np.arange(N), k)):
        E[l, seg] = 1.0 / len(seg)
    L = h.beta_float * (h.queries @ (E @ h.keys).T)
    if h.weights is not None:
        with np.errstate(divide="ignore"):
            L = L + np.log(E @ h.weights)
    if h.bias is not None:
        L = L + h.bias @ E.T
    return softmax_rows(L), E.T.copy()


PEERS = {"svd": truncated_svd, "nystrom": nystrom, "performer": performer, "linformer": linformer}
# k-independent work of a peer, done once per A: the SVD; the column-pivoted QR orders of A and A^T
PREPARE = {"svd": lambda A: np.linalg.svd(A, full_matrices=False),
           "nystrom": lambda A: (scipy.linalg.qr(A, mode="r", pivoting=True)[1],
                                 scipy.linalg.qr(A.T, mode="r", pivoting=True)[1])}


def certified_error(method, A, h, inst, k, seed=0, prep=None):
    """Kernel-proven upper bound of max_i ||A_i - (U V^T)_i||_1 for the peer's rank-k factors
    (inf when the kernel rejects them, e.g. on overflow).  prep: PREPARE[method](A), if any."""
    U, V = PEERS[method](A, h, k, seed) if prep is None else PEERS[method](A, h, k, seed, prep=prep)
    try:
        return float(max_row_error(inst, np.ascontiguousarray(U), np.ascontiguousarray(V), "fast")[0])
    except Rejected:
        return float("inf")


def smallest_rank(method, A, h, inst, eps, seed=0, kmax=None, reuse=True, prep=None):
    """Smallest rank k in 1..kmax (default min(n, N)) at which `method` certifies
    max_i ||A_i - B_i||_1 <= eps, with the kernel's bound (not the peer's float error) deciding.

    Search: doubling k = 1, 2, 4, ... (capped at kmax) until certified, then bisection between
    the last failure and the first success.  Random or structured peers need not be monotone
    in k, so this is the smallest k found by doubling + bisection, and certified_error is the
    kernel bound at that k.  k = None when even kmax fails (certified_error then at kmax).
    The k-independent work (an SVD, pivoted QRs) is done once (reuse=False redoes it at every k,
    the old behaviour, kept for benchmarks/bench_peers.py), or given as prep (PREPARE[method](A),
    when the caller has it).  A safe point of an active budget (certkit.search.budget) before each
    k.  Returns {"method", "k", "certified_error", "seconds"}."""
    t0 = time.perf_counter()
    kmax = min(A.shape) if kmax is None else kmax
    err = {}
    if prep is None and reuse and method in PREPARE:
        with step("prepare " + method):
            prep = PREPARE[method](A)

    def ok(k):
        tick()
        with step("peer " + method):
            err[k] = certified_error(method, A, h, inst, k, seed, prep)
        return err[k] <= eps

    lo, hi = 0, 1
    while not ok(hi):
        if hi >= kmax:
            return {"method": method, "k": None, "certified_error": err[hi],
                    "seconds": time.perf_counter() - t0}
        lo, hi = hi, min(2 * hi, kmax)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if ok(mid) else (mid, hi)
    return {"method": method, "k": hi, "certified_error": err[hi], "seconds": time.perf_counter() - t0}
