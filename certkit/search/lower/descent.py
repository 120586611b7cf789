"""Coordinate descent on the cells of a message set (docs/mathematics.md §8.1, Lemma 8.2).

For fixed messages, moving column j from cell `old` to cell b (or to no cell) is the rank-one
change T + A[msgs, j] (e_b - e_old)^T of the contraction, so by Sherman-Morrison its inverse is
X - u (X[b] - X[old])^T / (1 + u_b - u_old), X = T^{-1}, u = X A[msgs, j].  local_cells takes the
moves that lower ||T^{-1}||_inf, which Lemma 8.2 needs below 1 / eps.
"""
import numpy as np

from ..budget import tick
from .decoding import contraction, inverse_norm, inverse_or_none


def _row_norm_bounds(X, rows, shift, scale, w):
    """max over r in rows of sum_c |X[r, c] - scale_b shift[r] w_b[c]| for every b: lower bounds
    of ||X - scale_b shift w_b^T||_inf (each is one row's exact l1 norm)."""
    R = X[rows][None, :, :] - (scale[:, None] * shift[rows][None, :])[:, :, None] * w[:, None, :]
    return np.abs(R).sum(axis=2).max(axis=1)


def _top_rows(X, u, t=4):
    """Rows of X - u w^T most likely to carry its inf-norm: the t largest rows of |X| and the t
    largest |u_r| (a deterministic, duplicate-free index array)."""
    m = X.shape[0]
    if m <= 2 * t:
        return np.arange(m)
    a = np.argsort(-np.abs(X).sum(axis=1), kind="stable")[:t]
    b = np.argsort(-np.abs(u), kind="stable")[:t]
    return np.unique(np.r_[a, b])


def local_cells(A, msgs, cells, sweeps=2):
    """Coordinate descent on the cell of each column (or none, -1) for ||T^{-1}||_inf.

    Moving column j from cell `old` to cell b is the rank-one change T + A[msgs, j] (e_b -
    e_old)^T, so by Sherman-Morrison the new inverse is X - u (X[b] - X[old])^T / (1 + u_b -
    u_old), X = T^{-1}, u = X A[msgs, j]: a few of its rows bound each move's norm from below
    (most moves are dropped on that), the rest are valued in O(M^2) each and scanned in the
    original order (first strict improvement by a factor 1 - 1e-12 wins); the chosen move is
    re-valued with a fresh inverse before it is taken."""
    M = len(msgs)
    cells = cells.copy()
    T = contraction(A, msgs, cells, M)
    cur = inverse_norm(T)
    X = inverse_or_none(T)
    size = np.bincount(cells[cells >= 0], minlength=M)
    Am = A[msgs]
    N = A.shape[1]
    most = int(max(8, min(64, 200000 // ((M + 1) * M + 1))))
    for _ in range(sweeps):
        improved = False
        j, todo, J, block = 0, None, None, 8
        while j < N:
            tick()
            if X is not None and np.isfinite(cur):       # skip the columns no move can improve
                if todo is None or j > J[-1]:
                    J = np.arange(j, min(N, j + block))
                    todo = _columns_to_try(X, Am[:, J], cells[J], size, cur)
                rest = np.flatnonzero(todo[j - J[0]:])
                if not rest.size:
                    j, todo, block = int(J[-1]) + 1, None, min(2 * block, most)
                    continue
                j += int(rest[0])
            col, old = Am[:, j], int(cells[j])
            j += 1
            if old >= 0 and size[old] == 1 and np.isfinite(cur):
                continue                    # every move empties cell `old`: T singular, no gain
            base = T.copy()
            if old >= 0:
                base[:, old] -= col
            best_v, best_b, Xb = _best_move(X, base, col, old, cur)
            if best_b != old:
                cells[j - 1], T, cur, improved = best_b, base, best_v, True
                if best_b >= 0:
                    T[:, best_b] += col
                    size[best_b] += 1
                if old >= 0:
                    size[old] -= 1
                X, todo, block = Xb, None, 8      # = inv(T): T is built as T2 was
        if not improved:
            break
    return cells, cur


def _best_move(X, base, col, old, cur):
    """(value, cell, inverse) of the best move of one column (values col, in cell `old`) for
    local_cells, T without the column being base: the moves to every other cell b (or to none, -1)
    are bounded and valued from X = T^{-1} (_bounded_moves) when X is known and cur finite, else
    each by a fresh inverse; (cur, old, None) when no move beats cur by a factor 1 - 1e-12, else
    the inverse of the chosen T (a fresh one)."""
    M = base.shape[0]
    bs = np.array([b for b in range(-1, M) if b != old], dtype=np.int64)
    inverses = {}

    def exact(b):
        T2 = base.copy()
        if b >= 0:
            T2[:, b] += col
        Xb = inverse_or_none(T2)
        inverses[b] = Xb
        return np.inf if Xb is None else float(np.abs(Xb).sum(axis=1).max())

    best_v, best_b = cur, old
    if X is not None and np.isfinite(cur):
        best_v, best_b = _bounded_moves(X, col, old, bs, cur, exact)
    else:
        for b in bs.tolist():
            v = exact(b)
            if v < best_v * (1 - 1e-12):
                best_v, best_b = v, b
    return best_v, best_b, (inverses[best_b] if best_b != old else None)


def _bounded_moves(X, col, old, bs, cur, exact):
    """(value, cell) of the best move among bs by Sherman-Morrison from X = T^{-1}: rows of the
    new inverse bound each move from below (_top_rows), the moves left are valued from all rows
    (exact(b), a fresh inverse, where that value is not finite), scanned in order; the chosen move
    is re-valued by exact and kept only if it still beats cur.  (cur, old): no move."""
    M = X.shape[0]
    best_v, best_b = cur, old
    u = X @ col
    Xe = np.vstack([X, np.zeros((1, M))])          # row -1: e_{-1} = 0
    ue = np.r_[u, 0.0]
    w = Xe[bs] - Xe[old]
    den = 1 + ue[bs] - ue[old]
    safe = np.abs(den) > 1e-8 * (1 + np.abs(ue[bs]) + abs(ue[old]))
    scale = np.where(safe, 1 / np.where(safe, den, 1), 0)
    with np.errstate(over="ignore", invalid="ignore"):
        lb = _row_norm_bounds(X, _top_rows(X, u), u, scale, w)
    lb = np.where(safe & np.isfinite(lb), lb, 0.0)
    need = np.flatnonzero(lb < cur * (1 - 1e-12))
    if need.size:
        with np.errstate(over="ignore", invalid="ignore"):
            est = _row_norm_bounds(X, np.arange(M), u, scale[need], w[need])
        est = np.where(safe[need] & np.isfinite(est), est, np.nan)
        for t, b in enumerate(bs[need].tolist()):
            v = est[t] if np.isfinite(est[t]) else exact(b)
            if v < best_v * (1 - 1e-12):
                best_v, best_b = v, b
        if best_b != old:
            best_v = exact(best_b)
            if not best_v < cur * (1 - 1e-12):
                best_v, best_b = cur, old
    return best_v, best_b


def _columns_to_try(X, cols, olds, size, cur):
    """For a block of columns (values cols = A[msgs, J], cells olds): whether some move of the
    column could beat cur by the local_cells test, by the Sherman-Morrison bound from the two
    largest rows of X (a row's l1 norm bounds the inf-norm; slightly conservative); columns
    alone in their cell are never moved."""
    M, B = cols.shape
    U = X @ cols                                             # M x B
    Xe = np.vstack([X, np.zeros((1, M))])                    # index -1: no cell
    ue = np.vstack([U, np.zeros((1, B))])
    bs = np.arange(-1, M)
    w = Xe[bs][:, None, :] - Xe[olds][None, :, :]            # (M+1) x B x M
    uo = ue[olds, np.arange(B)]                              # u_old per column
    ub = ue[bs]                                              # (M+1) x B
    den = 1 + ub - uo[None, :]
    safe = np.abs(den) > 1e-8 * (1 + np.abs(ub) + np.abs(uo)[None, :])
    scale = np.where(safe, 1 / np.where(safe, den, 1), 0)
    rows = np.argsort(-np.abs(X).sum(axis=1), kind="stable")[:2]   # the largest rows of X
    with np.errstate(over="ignore", invalid="ignore"):
        lb = np.zeros((M + 1, B))
        for r in rows:
            lb = np.maximum(lb, np.abs(X[r][None, None, :] - (scale * U[r][None, :])[..., None] * w).sum(axis=2))
    lb = np.where(safe & np.isfinite(lb), lb, 0.0)
    lb[olds + 1, np.arange(B)] = np.inf                      # b = old is no move
    need = (lb < cur * (1 - 1e-12) * (1 + 1e-9)).any(axis=0)
    single = (olds >= 0) & (size[np.maximum(olds, 0)] == 1)
    return need & ~single
