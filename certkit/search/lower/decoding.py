"""The decoding contraction and its float tests (docs/mathematics.md §8.1, Lemmas 8.1 and 8.2).

For message rows i_1..i_M and a decoder, disjoint column cells C_1..C_M (an int vector, -1: in no
cell) or an N x M matrix G with row l1 norms <= 1, T_A = A[msgs] G, so T_A[a, b] = A_{i_a}(C_b):
* margin (Lemma 8.1): T_A[a,a] - sum_{b != a} |T_A[a,b]| > eps for all a  =>  r_eps >= M;
* inverse norm (Lemma 8.2): eps ||T_A^{-1}||_inf < 1  =>  r_eps >= M.
The argmax cells give column j to the message that weighs it most.  The tests here are float with
a safety margin (SAFETY, passes); the kernel decides every candidate.
"""
import numpy as np
from scipy.linalg import lapack

SAFETY = 1e-6


def contraction(A, msgs, cells, M=None, block_entries=1 << 22):
    """T[a, b] = sum_{j in cell b} A[msgs[a], j] (cells[j] = -1: in no cell); summed in column
    order (one bincount over (row, cell) pairs), as np.add.at would; in blocks of messages of
    about block_entries entries (the same sums row by row)."""
    M = len(msgs) if M is None else M
    m = len(msgs)
    sel = np.flatnonzero(cells >= 0)
    if not (m and M and sel.size):
        return np.zeros((m, M))
    step = max(1, block_entries // sel.size)
    if m > step:
        return np.concatenate([contraction(A, msgs[s:s + step], cells, M) for s in range(0, m, step)])
    idx = (np.arange(m)[:, None] * M + cells[sel][None, :]).ravel()
    return np.bincount(idx, weights=A[np.ix_(msgs, sel)].ravel(), minlength=m * M).reshape(m, M)


def decoded(A, msgs, dec):
    """T = A[msgs] G for a decoder given as cells (an int vector, -1 = no cell) or as an
    explicit N x M float matrix G."""
    dec = np.asarray(dec)
    if dec.ndim == 2:
        return A[msgs] @ dec
    return contraction(A, msgs, dec, len(msgs))


def argmax_cells(A, msgs):
    """Column j goes to the message with the largest A[i_a, j]."""
    if len(msgs) == 0:
        return np.full(A.shape[1], -1, dtype=np.int64)
    return np.argmax(A[msgs], axis=0).astype(np.int64)


def margins(T):
    d = np.diag(T)
    return 2 * d - np.abs(T).sum(axis=1) if T.size else np.zeros(0)


def passes(v, eps):
    """The searches' float acceptance of an inverse norm v: eps v (1 + 1e-3) < 1 - 1e-9 (a safety
    margin; the kernel decides)."""
    return eps * v * (1 + 1e-3) < 1 - 1e-9


def inverse_ok(T, eps):
    """eps ||T^{-1}||_inf (1 + 1e-3) < 1 - 1e-9 in floats.  Large T that fail by a margin are
    rejected from an LU factorisation and Hager's lower bound of ||T^{-1}||_inf = ||T^{-T}||_1
    (a third of the inverse's cost); anything else is decided by inverse_norm as before."""
    if T.shape[0] == 0:
        return True
    if T.shape[0] >= 32:
        est = inverse_norm_lower(T)[0]
        if est is None or not passes(est * (1 - 1e-9), eps):    # (1 - 1e-9): rounding of est
            return False
    return passes(inverse_norm(T), eps)


def inverse_norm_lower(T, steps=4):
    """(lb, x): a lower bound lb of ||T^{-1}||_inf (Hager 1984 on B = T^{-T}: ||B x||_1 for unit
    ||x||_1, and ||T^{-1} s||_inf for sign vectors s) and the best such x = T^{-1} s seen (so
    ||x||_inf / ||T x||_inf is also a lower bound; None if none); (None, None) if the LU
    factorisation meets an exactly zero pivot (T singular: inverse_norm is inf)."""
    lu, piv, info = lapack.dgetrf(np.asarray(T, dtype=np.float64))
    if info != 0:
        return (None, None) if info > 0 else (np.inf, None)
    m = T.shape[0]
    x = np.full(m, 1.0 / m)
    best, arg = 0.0, None
    for _ in range(steps):
        y, _ = lapack.dgetrs(lu, piv, x, trans=1)            # B x = T^{-T} x
        if not np.all(np.isfinite(y)):
            return np.inf, None
        z, _ = lapack.dgetrs(lu, piv, np.where(y >= 0, 1.0, -1.0), trans=0)   # T^{-1} sign(y)
        if not np.all(np.isfinite(z)):
            return np.inf, None
        for v, vec in ((float(np.abs(y).sum()), None), (float(np.abs(z).max()), z)):
            if v > best:
                best, arg = v, (vec if vec is not None else arg)
        j = int(np.argmax(np.abs(z)))
        if abs(z[j]) <= z @ x:
            break
        x = np.zeros(m)
        x[j] = 1.0
    return best, arg


def inverse_norm(T):
    """||T^{-1}||_inf in floats (inf if singular)."""
    try:
        X = np.linalg.inv(T)
    except np.linalg.LinAlgError:
        return np.inf
    v = np.abs(X).sum(axis=1).max()
    return float(v) if np.isfinite(v) else np.inf


def inverse_or_none(T):
    try:
        X = np.linalg.inv(T)
    except np.linalg.LinAlgError:
        return None
    return X if np.all(np.isfinite(X)) else None
