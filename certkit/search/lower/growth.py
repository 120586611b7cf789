"""Greedy growth of a message set for Lemma 8.2 (docs/mathematics.md §8.1).

From one row, add the row whose argmax-cell contraction T has the smallest ||T^{-1}||_inf while
eps ||T^{-1}||_inf < 1.  Adding row i moves the columns it weighs most into a new cell, so
T_i = [[T_S - D_i, c_i], [r_i, d_i]]: Woodbury and bordering give lower bounds of ||T_i^{-1}||_inf
from X = T_S^{-1}, and the rows are evaluated exactly in the order of those bounds.  The rows
added do not depend on eps (only where the growth stops does), so the steps are recorded and
replayed at another eps.  On large heads (limit) each step weighs a shortlist of the rows first
(shortlist: a cheaper estimate of the same quantity) and all rows only where the shortlist's best
is much worse than the last step's value.
"""
import numpy as np

from ..budget import tick
from .decoding import argmax_cells, contraction, inverse_norm, inverse_or_none, passes
from .descent import local_cells


def _grow_candidates(A, S, cand):
    """Lower bounds of ||T_i^{-1}||_inf for the argmax-cell contractions T_i of S + [i], i in cand
    (0 where no bound is available; inf where T_i has an empty cell, so is singular).

    Adding row i moves the columns J_i = {j : A[i, j] > max_S A[., j]} into the new cell, so
    T_i = [[T_S - D_i, c_i], [r_i, d_i]] with D_i supported on the q_i cells that lose columns:
    Woodbury gives (T_S - D_i)^{-1} from X = T_S^{-1} in O(s q_i), bordering gives a few rows of
    T_i^{-1} (the new row and the largest rows of X), each row's l1 norm a lower bound."""
    AS = A[S]
    s, N = AS.shape
    curmax = AS.max(axis=0)
    cellS = np.argmax(AS, axis=0)
    order = np.argsort(cellS, kind="stable")
    counts = np.bincount(cellS, minlength=s)
    lb = np.full(len(cand), np.inf)
    if np.any(counts == 0):                                  # an empty cell of S stays empty
        return lb
    starts = np.r_[0, np.cumsum(counts)[:-1]]
    Mk = A[cand] > curmax[None, :]
    stolen = np.add.reduceat(Mk[:, order].astype(np.int64), starts, axis=1)   # per cell
    # no column moves (an empty new cell) or some old cell emptied: T_i is singular
    P = np.flatnonzero(Mk.any(axis=1) & ~(stolen >= counts[None, :]).any(axis=1))
    lb[P] = 0.0
    X = inverse_or_none(contraction(A, np.asarray(S), cellS, s))
    if X is None or P.size == 0:
        return lb
    p = P.size
    Mp = Mk[P].astype(float)
    Ap = A[np.asarray(cand)[P]]
    aff = stolen[P] > 0                                      # cells losing columns, p x s
    # D2[b] (p x s): sum over the columns of cell b that candidate i takes, of A[S, j]
    D2 = np.empty((s, p, s))
    for b in range(s):
        jb = order[starts[b]:starts[b] + counts[b]]
        D2[b] = Mp[:, jb] @ AS[:, jb].T
    ri, ci = np.nonzero(aff)                                 # affected cells, row by row
    qi = aff.sum(axis=1)
    q = int(qi.max())
    first = np.r_[0, np.cumsum(qi)[:-1]]
    Bidx = np.zeros((p, q), dtype=np.int64)                  # padding: cell 0 with U = 0
    real = np.zeros((p, q), dtype=bool)
    pos = np.arange(ri.size) - first[ri]
    Bidx[ri, pos] = ci
    real[ri, pos] = True
    Ut = D2[Bidx, np.arange(p)[:, None]] * real[:, :, None]  # U_i^T = D_i[:, B_i]^T, p x q x s
    ZT = Ut @ X.T                                            # (X U_i)^T, p x q x s
    K = np.eye(q)[None] - np.take_along_axis(ZT, Bidx[:, None, :].repeat(q, axis=1), axis=2).transpose(0, 2, 1)
    try:
        Kinv = np.linalg.inv(K)
        good = np.abs(K).sum(axis=1).max(axis=1) * np.abs(Kinv).sum(axis=1).max(axis=1) < 1e8
    except np.linalg.LinAlgError:
        good = np.linalg.cond(K) < 1e8
        K[~good] = np.eye(q)
        Kinv = np.linalg.inv(K)
    good &= np.all(np.isfinite(Kinv), axis=(1, 2))
    W = Kinv @ X[Bidx]                                       # K^{-1} X[B], p x q x s
    c = Mp @ AS.T                                            # T_i[:s, s]
    d = (Mp * Ap).sum(axis=1)                                # T_i[s, s]
    r = np.add.reduceat((Ap * (1 - Mp))[:, order], starts, axis=1)   # T_i[s, :s]
    # Y = (T_S - D_i)^{-1} = X + Z W (Z = X U);  u = Y c,  w = r Y,  sigma = d - r u
    u = c @ X.T + np.einsum("pts,pt->ps", ZT, np.einsum("pts,ps->pt", W, c))
    w = r @ X + np.einsum("pt,pts->ps", np.einsum("pa,pta->pt", r, ZT), W)
    sigma = d - (r * u).sum(axis=1)
    rows = np.argsort(-np.abs(X).sum(axis=1), kind="stable")[:min(s, 6)]
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        best = (np.abs(w).sum(axis=1) + 1) / np.abs(sigma)   # the new (last) row of T_i^{-1}
        Yr = X[rows][None] + np.einsum("ptr,pts->prs", ZT[:, :, rows], W)     # rows of Y
        ur = u[:, rows] / sigma[:, None]
        best = np.maximum(best, (np.abs(Yr + ur[:, :, None] * w[:, None, :]).sum(axis=2) + np.abs(ur)).max(axis=1))
    lb[P] = np.where(good & np.isfinite(best), best, 0.0)
    return lb


SHORTLIST = 128   # grow_step(limit=SHORTLIST) on heads with N > 512 (late_candidates)
FALLBACK = 1.25   # ... all rows where the shortlist's best is above FALLBACK x the last step's value


def shortlist(A, S, cand, limit):
    """The `limit` rows i of cand with the smallest estimate (||r_i X||_1 + 1) / |d_i - r_i X c_i| of
    the new row's l1 norm in T_i^{-1} (X = T_S^{-1}; the bordering of _grow_candidates with the
    columns that row i takes from the cells of S ignored, D_i = 0): O(p s^2) against the bounds'
    O(p q s^2).  A heuristic order (ties and singular T_S keep cand's order); the choice among
    the shortlist is exact."""
    AS = A[S]
    s = len(S)
    cellS = np.argmax(AS, axis=0)
    X = inverse_or_none(contraction(A, np.asarray(S), cellS, s))
    if X is None:
        return cand[:limit]
    Ac = A[cand]
    take = Ac > AS.max(axis=0)[None, :]                      # the columns row i would take
    d = (Ac * take).sum(axis=1)
    c = take.astype(float) @ AS.T
    cells = np.zeros((A.shape[1], s))
    cells[np.arange(A.shape[1]), cellS] = 1.0
    w = ((Ac * ~take) @ cells) @ X                           # (row i's mass left in each cell of S) X
    with np.errstate(divide="ignore", invalid="ignore"):
        est = (np.abs(w).sum(axis=1) + 1) / np.abs(d - (w * c).sum(axis=1))
    est[~np.isfinite(est)] = np.inf
    return np.sort(cand[np.argsort(est, kind="stable")[:limit]])


def grow_inverse(A, eps, max_local=64, growth=None, start=None, limit=None):
    """Greedy growth for Lemma 8.2: from the row `start` (default: the most peaked row), add the
    row whose argmax-cell contraction has the smallest ||T^{-1}||_inf while eps ||T^{-1}|| < 1;
    when that stops, one more row with coordinate descent on the cells (if M <= max_local).
    Returns (messages, cells).

    Candidates are evaluated exactly (a fresh inverse) in the order of cheap lower bounds
    (_grow_candidates) until the next bound exceeds the best value found: the same choice as
    evaluating every row (smallest value, then smallest index).

    The rows added and their ||T^{-1}|| do not depend on eps (only where the growth stops does),
    nor does local_cells; growth, a list kept by the caller for this A, records the steps
    [messages, cells, value, local_cells result or None (, soft_decoder result: soft_extend)]
    so that the growth at another eps replays them (the same result as a fresh call, at the cost
    of the steps not yet taken); one record per start and limit.  limit: see grow_step."""
    n = A.shape[0]
    growth = [] if growth is None else growth
    S = [int(np.argmax(A.max(axis=1))) if start is None else int(start)]
    cells = argmax_cells(A, np.array(S))
    t = 0
    while len(S) < min(n, A.shape[1]):
        tick()
        if t == len(growth):
            growth.append(grow_step(A, S, limit, growth[t - 1][2] if t else None) + [None])
        msgs, c, v = growth[t][:3]
        if not passes(v, eps):
            if len(msgs) > max_local:
                break
            if growth[t][3] is None:
                growth[t][3] = local_cells(A, msgs, c)
            c, v = growth[t][3]
            if not passes(v, eps):
                break
        S, cells = list(msgs), c
        t += 1
    return np.array(S, dtype=np.int64), cells


def grow_step(A, S, limit=None, last=None):
    """[messages S + [i], their argmax cells, ||T^{-1}||_inf] for the best next row i; with a
    limit, the best of shortlist(limit) rows, unless its value is infinite or above FALLBACK x last
    (the previous step's value): then the best of all rows."""
    n = A.shape[0]
    inS = np.zeros(n, dtype=bool)
    inS[S] = True
    cand = np.flatnonzero(~inS)
    if limit and cand.size > limit:
        step = grow_step_among(A, S, shortlist(A, S, cand, limit))
        if np.isfinite(step[2]) and (last is None or step[2] <= FALLBACK * last):
            return step
    return grow_step_among(A, S, cand)


def grow_step_among(A, S, cand):
    """grow_step's result with the next row chosen among cand (exact: the smallest value, then the
    smallest index)."""
    lb = _grow_candidates(A, S, cand)
    best = None
    for t in np.argsort(lb, kind="stable"):
        if best is not None and lb[t] * (1 - 1e-9) > best[0]:
            break
        tick()
        i = int(cand[t])
        if np.isinf(lb[t]):
            v = np.inf
        else:
            msgs = np.array(S + [i])
            v = inverse_norm(contraction(A, msgs, argmax_cells(A, msgs)))
        if best is None or v < best[0] or (v == best[0] and i < best[1]):
            best = (v, i)
    if best[0] == np.inf:
        best = (np.inf, int(cand[0]))
    msgs = np.array(S + [best[1]])
    return [msgs, argmax_cells(A, msgs), best[0]]
