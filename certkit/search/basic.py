"""Baseline untrusted searches: truncated SVD factors, greedy covering, peaked-row decoding,
Frobenius tail.  Each returns witness arrays for search.writer.certificate; the kernel decides.
"""
import numpy as np


def row_errors(A, B):
    return np.abs(A - B).sum(axis=1)


def svd_factor(A, eps, safety=1e-9):
    """Smallest k whose truncated SVD has float row-l1 error <= eps (1 - safety): (k, U, V)."""
    Uf, s, Vt = np.linalg.svd(A, full_matrices=False)
    for k in range(1, len(s) + 1):
        U, V = Uf[:, :k] * s[:k], Vt[:k].T
        if row_errors(A, U @ V.T).max() <= eps * (1 - safety):
            return k, U, V
    return len(s), Uf * s, Vt.T


def greedy_cover(A, eps, safety=1e-9):
    """Greedy set cover of the rows by eps-balls of rows: (representatives, assignment)."""
    n = A.shape[0]
    D = np.abs(A[:, None, :] - A[None, :, :]).sum(axis=2) if n <= 512 else None
    close = D <= eps * (1 - safety)
    uncovered = np.ones(n, dtype=bool)
    reps, assign = [], np.full(n, -1)
    while uncovered.any():
        gain = (close & uncovered[None, :]).sum(axis=1)
        r = int(np.argmax(gain))
        reps.append(r)
        newly = close[r] & uncovered
        assign[newly] = r
        uncovered &= ~newly
    return np.array(sorted(reps)), assign


def peaked_decoding(A, eps, safety=1e-6):
    """Message rows with distinct argmax columns, singleton cells, pruned until every
    margin > eps (1 + safety): (messages, cells)."""
    n, N = A.shape
    arg = A.argmax(axis=1)
    order = np.argsort(-A[np.arange(n), arg], kind="stable")
    msgs, used = [], set()
    for i in order:
        if int(arg[i]) not in used:
            msgs.append(int(i))
            used.add(int(arg[i]))
    msgs = np.array(msgs)
    while len(msgs):
        cols = arg[msgs]
        T = A[np.ix_(msgs, cols)]
        margin = 2 * np.diag(T) - np.abs(T).sum(axis=1)
        worst = int(np.argmin(margin))
        if margin[worst] > eps * (1 + safety) + 1e-12:
            break
        msgs = np.delete(msgs, worst)
    cells = np.full(N, -1)
    cells[arg[msgs]] = np.arange(len(msgs))
    return msgs, cells


def frobenius_bound(A, eps, safety=1e-6, s=None):
    """Largest M with sum_{l >= M} sigma_l^2 > n eps^2 (1 + safety); s: A's singular values, if known."""
    s = np.linalg.svd(A, compute_uv=False) if s is None else s
    tails = np.cumsum((s ** 2)[::-1])[::-1]          # tails[l] = sum_{j >= l} (0-based)
    need = A.shape[0] * eps * eps * (1 + safety)
    ok = np.flatnonzero(tails > need)
    return int(ok[-1]) + 1 if ok.size else 0
