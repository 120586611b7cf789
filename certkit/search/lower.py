"""Untrusted lower search (SPEC §8.1): decoding contractions and Frobenius tails.

For message rows i_1..i_M and disjoint column cells C_1..C_M, T_A[a, b] = A_{i_a}(C_b).
* margin (Lemma 8.1): T_A[a,a] - sum_{b != a} |T_A[a,b]| > eps for all a  =>  r_eps >= M;
* inverse norm (Lemma 8.2): eps ||T_A^{-1}||_inf < 1  =>  r_eps >= M (weaker hypothesis);
* Frobenius tail (Lemma 8.3) on C = S A G: sum_{l >= M} sigma_l(C)^2 > |S| eps^2  =>  r_eps >= M.

Candidates come from: one cell holding every column (M = 1 whenever eps < 1); argmax cells of
peaked rows; "farthest-point" messages (l1 farthest-point traversal of the rows) with every
column assigned to the message that weighs it most, pruned until the test passes.  All tests
here are float with a safety margin; each returned candidate is decided by the kernel.
"""
import numpy as np

from .basic import frobenius_bound

SAFETY = 1e-6


def contraction(A, msgs, cells, M=None):
    """T[a, b] = sum_{j in cell b} A[msgs[a], j] (cells[j] = -1: in no cell)."""
    M = len(msgs) if M is None else M
    T = np.zeros((len(msgs), M))
    sel = cells >= 0
    np.add.at(T.T, cells[sel], A[np.ix_(msgs, np.flatnonzero(sel))].T)
    return T


def margins(T):
    d = np.diag(T)
    return 2 * d - np.abs(T).sum(axis=1) if T.size else np.zeros(0)


def inverse_ok(T, eps):
    return T.shape[0] == 0 or eps * inverse_norm(T) * (1 + 1e-3) < 1 - 1e-9


def farthest_rows(A, m):
    """l1 farthest-point traversal of the rows, starting at the most peaked row."""
    n = A.shape[0]
    order = [int(np.argmax(A.max(axis=1)))]
    dist = np.abs(A - A[order[0]]).sum(axis=1)
    while len(order) < min(m, n):
        i = int(np.argmax(dist))
        if dist[i] <= 0:
            break
        order.append(i)
        dist = np.minimum(dist, np.abs(A - A[i]).sum(axis=1))
    return np.array(order, dtype=np.int64)


def argmax_cells(A, msgs):
    """Column j goes to the message with the largest A[i_a, j]."""
    if len(msgs) == 0:
        return np.full(A.shape[1], -1, dtype=np.int64)
    return np.argmax(A[msgs], axis=0).astype(np.int64)


def prune(A, msgs, eps, test):
    """Drop the message with the worst margin (and re-assign cells) until test(T) passes."""
    msgs = np.array(msgs, dtype=np.int64)
    while len(msgs):
        cells = argmax_cells(A, msgs)
        T = contraction(A, msgs, cells)
        if test(T):
            return msgs, cells
        msgs = np.delete(msgs, int(np.argmin(margins(T))))
    return msgs, argmax_cells(A, msgs)


def inverse_norm(T):
    """||T^{-1}||_inf in floats (inf if singular)."""
    try:
        X = np.linalg.inv(T)
    except np.linalg.LinAlgError:
        return np.inf
    v = np.abs(X).sum(axis=1).max()
    return float(v) if np.isfinite(v) else np.inf


def local_cells(A, msgs, cells, sweeps=2):
    """Coordinate descent on the cell of each column (or none, -1) for ||T^{-1}||_inf."""
    M = len(msgs)
    cells = cells.copy()
    T = contraction(A, msgs, cells, M)
    cur = inverse_norm(T)
    for _ in range(sweeps):
        improved = False
        for j in range(A.shape[1]):
            col, old = A[msgs, j], int(cells[j])
            base = T.copy()
            if old >= 0:
                base[:, old] -= col
            best_v, best_b = cur, old
            for b in range(-1, M):
                if b != old:
                    T2 = base.copy()
                    if b >= 0:
                        T2[:, b] += col
                    v = inverse_norm(T2)
                    if v < best_v * (1 - 1e-12):
                        best_v, best_b = v, b
            if best_b != old:
                cells[j], T, cur, improved = best_b, base, best_v, True
                if best_b >= 0:
                    T[:, best_b] += col
        if not improved:
            break
    return cells, cur


def grow_inverse(A, eps, max_local=64):
    """Greedy growth for Lemma 8.2: add the row whose argmax-cell contraction has the smallest
    ||T^{-1}||_inf while eps ||T^{-1}|| < 1; when that stops, one more row with coordinate
    descent on the cells (if M <= max_local).  Returns (messages, cells)."""
    n = A.shape[0]
    ok = lambda v: eps * v * (1 + 1e-3) < 1 - 1e-9
    S = [int(np.argmax(A.max(axis=1)))]
    cells = argmax_cells(A, np.array(S))
    while len(S) < min(n, A.shape[1]):
        best = None
        for i in range(n):
            if i not in S:
                msgs = np.array(S + [i])
                v = inverse_norm(contraction(A, msgs, argmax_cells(A, msgs)))
                if best is None or v < best[0]:
                    best = (v, i)
        msgs = np.array(S + [best[1]])
        c = argmax_cells(A, msgs)
        if not ok(best[0]):
            if len(msgs) > max_local:
                break
            c, v = local_cells(A, msgs, c)
            if not ok(v):
                break
        S, cells = list(msgs), c
    return np.array(S, dtype=np.int64), cells


def decoding_candidates(A, eps, hi=None):
    """[(kind, M, messages, cells)] best-first per kind (float tests; the kernel decides)."""
    n, N = A.shape
    thr = eps * (1 + SAFETY) + 1e-12
    margin_ok = lambda T: bool(np.all(margins(T) > thr))
    inv_ok = lambda T: inverse_ok(T, eps)
    out = []
    if eps < 1:
        out.append(("lower-decoding-margin", 1, np.array([int(np.argmax(A.max(axis=1)))]),
                    np.zeros(N, dtype=np.int64)))
    # peaked rows, singleton argmax cells (distinct argmax columns)
    arg = A.argmax(axis=1)
    order = np.argsort(-A[np.arange(n), arg], kind="stable")
    seen, peaked = set(), []
    for i in order:
        if int(arg[i]) not in seen:
            seen.add(int(arg[i]))
            peaked.append(int(i))
    sizes = sorted({m for m in (hi, 2 * (hi or 0), min(n, N)) if m} | {min(n, N, 64)})
    starts = [np.array(peaked)] + [farthest_rows(A, m) for m in sizes]
    for msgs0 in starts:
        for kind, test in (("lower-decoding-margin", margin_ok), ("lower-decoding-inverse-norm", inv_ok)):
            msgs, cells = prune(A, msgs0, eps, test)
            if len(msgs) > 1:
                out.append((kind, len(msgs), msgs, cells))
    if A.shape[1] <= 512 and max((c[1] for c in out), default=0) < min(n, N):
        msgs, cells = grow_inverse(A, eps)
        if len(msgs) > 1:
            out.append(("lower-decoding-inverse-norm", len(msgs), msgs, cells))
    out.sort(key=lambda c: -c[1])
    return out


def frobenius_candidates(A, eps, cell_counts=(2, 4, 8, 16, 32, 64)):
    """[(M, rows or None, cells or None)]: the tail test on A, on cell contractions A G with
    farthest-point cells, and on the rows that lie far from the contraction's top subspace."""
    n, N = A.shape
    out = [(frobenius_bound(A, eps, SAFETY), None, None)]
    for m in cell_counts:
        if m >= N:
            break
        cells = argmax_cells(A, farthest_rows(A, m))
        C = contraction(A, np.arange(n), cells, int(cells.max()) + 1)
        out.append((frobenius_bound(C, eps, SAFETY), None, cells))
        M = out[-1][0]
        # rows with a large residual off the top (M) right singular vectors of C
        _, _, Vt = np.linalg.svd(C, full_matrices=False)
        P = Vt[:max(M, 1)]
        res = ((C - (C @ P.T) @ P) ** 2).sum(axis=1)
        for q in (0.5, 0.25):
            rows = np.sort(np.argsort(-res, kind="stable")[:max(2, int(q * n))])
            out.append((frobenius_bound(C[rows], eps, SAFETY), rows, cells))
    out.sort(key=lambda c: -c[0])
    return [c for c in out if c[0] > 0]
