"""Untrusted lower search (docs/mathematics.md §8.1): decoding contractions and Frobenius tails.

For message rows i_1..i_M and disjoint column cells C_1..C_M, T_A[a, b] = A_{i_a}(C_b).
* margin (Lemma 8.1): T_A[a,a] - sum_{b != a} |T_A[a,b]| > eps for all a  =>  r_eps >= M;
* inverse norm (Lemma 8.2): eps ||T_A^{-1}||_inf < 1  =>  r_eps >= M (weaker hypothesis);
* Frobenius tail (Lemma 8.3) on C = S A G: sum_{l >= M} sigma_l(C)^2 > |S| eps^2  =>  r_eps >= M.

Candidates come from: one cell holding every column (M = 1 whenever eps < 1); argmax cells of
peaked rows; "farthest-point" messages (l1 farthest-point traversal of the rows) with every
column assigned to the message that weighs it most, pruned until the test passes; on a causal or
sliding-window head, the staircase (messages in order, each cell inside the prefix its message adds:
T lower triangular, docs/mathematics.md §8.5).  All tests
here are float with a safety margin; each returned candidate is decided by the kernel.
"""
import numpy as np
from scipy.linalg import lapack

from .basic import frobenius_bound
from .budget import tick
from .upper import lbfgs

SAFETY = 1e-6
CAP = 1024            # messages in a pruning start (at most)
WORK = 1 << 30        # budget of the farthest-row traversal, in entries visited
FULL_SVD = 1 << 22    # the Frobenius tail on A itself only up to this many entries (an n x N SVD)


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


def farthest_rows(A, m):
    """l1 farthest-point traversal of the rows, starting at the most peaked row (distances in
    row blocks: no n x N temporary)."""
    n = A.shape[0]
    order = [int(np.argmax(A.max(axis=1)))]
    dist = l1_distances(A, A[order[0]])
    while len(order) < min(m, n):
        tick()
        i = int(np.argmax(dist))
        if dist[i] <= 0:
            break
        order.append(i)
        dist = np.minimum(dist, l1_distances(A, A[i]))
    return np.array(order, dtype=np.int64)


def l1_distances(A, x, block_entries=1 << 20):
    """||A_i - x||_1 for every row i, computed in row blocks of about block_entries entries."""
    step = max(1, block_entries // max(A.shape[1], 1))
    return np.concatenate([np.abs(A[s:s + step] - x).sum(axis=1) for s in range(0, A.shape[0], step)])


def far_count(n, N):
    """How many farthest rows the lower search traverses: min(n, N) up to CAP rows, fewer on
    large heads so that the traversal (rows x n x N) stays within WORK."""
    return int(min(n, N, CAP, max(16, WORK // (n * N))))


def argmax_cells(A, msgs):
    """Column j goes to the message with the largest A[i_a, j]."""
    if len(msgs) == 0:
        return np.full(A.shape[1], -1, dtype=np.int64)
    return np.argmax(A[msgs], axis=0).astype(np.int64)


def prune(A, msgs, eps, test):
    """Drop the message with the worst margin (and re-assign cells) until test(T) passes."""
    return prune_many(A, msgs, [test])[0]


def prune_many(A, msgs, tests):
    """prune for several tests at once: the messages dropped do not depend on the test, so one
    pass gives, for each test, the first (largest) set that passes: [(messages, cells)]."""
    msgs = np.array(msgs, dtype=np.int64)
    found = [None] * len(tests)
    while len(msgs) and any(f is None for f in found):
        tick()
        cells = argmax_cells(A, msgs)
        T = contraction(A, msgs, cells)
        for t, test in enumerate(tests):
            if found[t] is None and test(T):
                found[t] = (msgs, cells)
        msgs = np.delete(msgs, int(np.argmin(margins(T))))
    return [f if f is not None else (msgs, argmax_cells(A, msgs)) for f in found]


def prune_both(A, msgs, eps, thr, dropped=None):
    """prune_many(A, msgs, [margin test, inverse test]) with the same results, faster: the
    contraction is updated in place (dropping a message only re-assigns the columns of its
    cell, and only the cells receiving them are re-summed, in the same order), and a float
    inverse X of T is carried along (InverseTracker: a Schur downdate for the dropped message,
    a Woodbury update for the re-summed cells, O(m^2 q) per step instead of a fresh O(m^3)
    factorisation); a set is rejected on X only when it fails by 10 %, so drift cannot decide;
    anything closer is decided by inverse_norm as before.  dropped: None or a list that receives
    the messages dropped, in order (the set of size m is msgs without the first len(msgs) - m)."""
    msgs = np.array(msgs, dtype=np.int64)
    found = [None, None]
    if len(msgs) == 0:
        return [(msgs, argmax_cells(A, msgs))] * 2
    Am = A[msgs]                                         # rows of the original messages
    pos = np.arange(len(msgs))                           # the remaining messages' rows of Am
    cells = np.argmax(Am, axis=0).astype(np.int64)
    T = contraction(A, msgs, cells)
    inv = InverseTracker(T) if len(msgs) >= 32 else None
    while len(msgs) and (found[0] is None or found[1] is None):
        tick()
        m = len(msgs)
        mg = margins(T)
        if found[0] is None and bool(np.all(mg > thr)):
            found[0] = (msgs, cells.copy())
        if found[1] is None:
            passed = None
            if np.bincount(cells[cells >= 0], minlength=m).min() == 0:
                passed = False                                   # an empty cell: T is singular
            elif inv is not None and m >= 32:
                v = inv.norm(T)
                if v is None:                                    # no trusted inverse: Hager on an LU
                    est = inverse_norm_lower(T)[0]
                    if est is None or not passes(est * (1 - 1e-9), eps):
                        passed = False
                elif not passes(0.9 * v, eps):
                    passed = False
            if passed is None:
                passed = passes(inverse_norm(T), eps)
            if passed:
                found[1] = (msgs, cells.copy())
                inv = None
        a = int(np.argmin(mg))
        if dropped is not None:
            dropped.append(int(msgs[a]))
        msgs = np.delete(msgs, a)
        pos = np.delete(pos, a)
        moved = cells == a
        cells[cells > a] -= 1
        T = without(T, a)
        if inv is not None:
            inv.drop(a)
        if len(msgs) and moved.any():
            cells[moved] = np.argmax(Am[np.ix_(pos, np.flatnonzero(moved))], axis=0)
            got = np.unique(cells[moved])
            part = np.where(np.isin(cells, got), cells, -1)
            new = contraction(A, msgs, part, len(msgs))[:, got]
            if inv is not None:
                inv.replace_columns(got, new - T[:, got])
            T[:, got] = new
        elif not len(msgs):
            cells = np.full(A.shape[1], -1, dtype=np.int64)
    return [f if f is not None else (msgs, argmax_cells(A, msgs)) for f in found]


def without(T, a):
    """T without row a and column a (four block copies)."""
    m = T.shape[0]
    out = np.empty((m - 1, m - 1))
    out[:a, :a], out[:a, a:] = T[:a, :a], T[:a, a + 1:]
    out[a:, :a], out[a:, a:] = T[a + 1:, :a], T[a + 1:, a + 1:]
    return out


class InverseTracker:
    """A float inverse X of a matrix T that loses one row and column (drop) and has some
    columns changed (replace_columns) at a time.

    Dropping index a: the inverse of T without row and column a is the Schur complement
    X[-a,-a] - X[-a,a] X[a,-a] / X[a,a].  Changing columns g by D (T + D E_g^T): Woodbury,
    X - X D (I + X[g] D)^{-1} X[g].  Before X is used (norm), its residual ||T X v - v||_inf
    on a fixed sign vector v is checked, and X is recomputed from T when the residual exceeds
    1e-8 or an update met a near-singular pivot or core (X is None until then)."""

    def __init__(self, T):
        self.X = _inv_or_none(T)

    def drop(self, a):
        X = self.X
        if X is None:
            return
        p = X[a, a]
        if not abs(p) > 1e-8 * np.abs(X[a]).sum():
            self.X = None
            return
        col, row = np.delete(X[:, a], a), np.delete(X[a], a) / p
        self.X = without(X, a)
        self.X -= np.outer(col, row)

    def replace_columns(self, g, D):
        X = self.X
        if X is None:
            return
        try:
            W = np.linalg.solve(np.eye(len(g)) + X[g] @ D, X[g])
        except np.linalg.LinAlgError:
            self.X = None
            return
        self.X = X - (X @ D) @ W

    def norm(self, T):
        """||X||_inf for a checked X close to T^{-1}; None if T is numerically singular."""
        v = np.where(np.arange(T.shape[0]) % 3 == 1, -1.0, 1.0)
        X = self.X
        if X is None or not np.all(np.isfinite(X)) or np.abs(T @ (X @ v) - v).max() > 1e-8:
            X = self.X = _inv_or_none(T)
        return None if X is None else float(np.abs(X).sum(axis=1).max())


def inverse_norm(T):
    """||T^{-1}||_inf in floats (inf if singular)."""
    try:
        X = np.linalg.inv(T)
    except np.linalg.LinAlgError:
        return np.inf
    v = np.abs(X).sum(axis=1).max()
    return float(v) if np.isfinite(v) else np.inf


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
    X = _inv_or_none(T)
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
            bs = np.array([b for b in range(-1, M) if b != old], dtype=np.int64)

            def exact(b):
                T2 = base.copy()
                if b >= 0:
                    T2[:, b] += col
                Xb = _inv_or_none(T2)
                inverses[b] = Xb
                return np.inf if Xb is None else float(np.abs(Xb).sum(axis=1).max())

            inverses = {}

            best_v, best_b = cur, old
            if X is not None and np.isfinite(cur):
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
            else:
                for b in bs.tolist():
                    v = exact(b)
                    if v < best_v * (1 - 1e-12):
                        best_v, best_b = v, b
            if best_b != old:
                cells[j - 1], T, cur, improved = best_b, base, best_v, True
                if best_b >= 0:
                    T[:, best_b] += col
                    size[best_b] += 1
                if old >= 0:
                    size[old] -= 1
                X, todo, block = inverses[best_b], None, 8      # = inv(T): T is built as T2 was
        if not improved:
            break
    return cells, cur


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


def _inv_or_none(T):
    try:
        X = np.linalg.inv(T)
    except np.linalg.LinAlgError:
        return None
    return X if np.all(np.isfinite(X)) else None


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
    X = _inv_or_none(contraction(A, np.asarray(S), cellS, s))
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


def grow_inverse(A, eps, max_local=64, growth=None, start=None):
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
    of the steps not yet taken); one record per start."""
    n = A.shape[0]
    growth = [] if growth is None else growth
    S = [int(np.argmax(A.max(axis=1))) if start is None else int(start)]
    cells = argmax_cells(A, np.array(S))
    t = 0
    while len(S) < min(n, A.shape[1]):
        tick()
        if t == len(growth):
            growth.append(_grow_step(A, S) + [None])
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


def _grow_step(A, S):
    """[messages S + [i], their argmax cells, ||T^{-1}||_inf] for the best next row i."""
    n = A.shape[0]
    inS = np.zeros(n, dtype=bool)
    inS[S] = True
    cand = np.flatnonzero(~inS)
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


def decoding_candidates(A, eps, hi=None, growth=None, far=None, soft=True, records=None):
    """[(kind, M, messages, decoder)] best-first per kind (float tests; the kernel decides); the
    decoder is cells (an int vector) or, from soft_extend, an explicit N x M matrix (decoded).
    growth: see grow_inverse (shared by the calls for several eps on one A); far: the
    farthest-row traversal farthest_rows(A, far_count(n, N)) when the caller shares it; soft:
    extend the growth with soft decoders (soft_extend) and, where it ends at few messages, try
    other starts (other_starts; records: their growth records, shared across eps); False: the
    search before them, for benchmarks/bench_sandwich.py.

    Starts: the peaked rows and prefixes of the farthest rows, each at most CAP messages, so a
    start costs O(CAP N) to contract and O(CAP^3) to prune, whatever n."""
    n, N = A.shape
    out = one_message(A, eps)
    far = farthest_rows(A, far_count(n, N)) if far is None else far
    sizes = sorted({min(m, len(far)) for m in (hi, 2 * (hi or 0), min(n, N), 64) if m})
    starts = [peaked_rows(A)] + [far[:m] for m in sizes]
    best_prune = None                                  # (M, start, dropped) of the best inverse-norm set
    for msgs0 in starts:
        tick()
        dropped = []
        found, M = pruned(A, eps, msgs0, dropped)      # M: the inverse-norm set's size
        out += found
        if best_prune is None or M > best_prune[0]:
            best_prune = (M, msgs0, dropped)
    if soft and A.shape[1] > 512 and best_prune is not None and best_prune[0] > 1:
        found = soft_prune(A, eps, best_prune[1], best_prune[2], best_prune[0])
        if found is not None:
            out.append(("lower-decoding-inverse-norm", len(found[0]), found[0], found[1]))
    if A.shape[1] <= 512 and max((c[1] for c in out), default=0) < min(n, N):
        growth = [] if growth is None else growth
        msgs, cells = grow_inverse(A, eps, growth=growth)
        if len(msgs) > 1:
            out.append(("lower-decoding-inverse-norm", len(msgs), msgs, cells))
        if soft and len(msgs) < min(n, N):
            msgs, G = soft_extend(A, eps, msgs, growth)
            if G is not None:
                out.append(("lower-decoding-inverse-norm", len(msgs), msgs, G))
        if soft and len(msgs) <= FEW:
            other = other_starts(A, eps, far[1:1 + STARTS], {} if records is None else records)
            if other is not None and other[1] > len(msgs):
                out.append(other)
    for theta in THETAS:
        stair = staircase(A, eps, theta)
        if stair is None:
            break
        msgs, cells = stair
        if len(msgs) > 1 and inverse_ok(contraction(A, msgs, cells), eps):
            out.append(("lower-decoding-inverse-norm", len(msgs), msgs, cells))
    out.sort(key=lambda c: -c[1])
    return out


THETAS = (0.0, 0.1, 0.2)    # staircase cells: the columns of the interval at >= theta times the message row's peak there


def staircase(A, eps, theta=0.0):
    """(messages, cells) of the greedy staircase, for A whose rows see prefixes that never shrink (a
    causal or sliding-window mask: e_i, the last column of row i with A_ij != 0, non-decreasing in i);
    None otherwise.  Messages i_0 < i_1 < ... with cells C_a, the columns j of (e_{i_{a-1}}, e_{i_a}]
    where A[i_a, j] >= theta max of row i_a there.  Row i_a is 0 on every later cell, so the
    contraction T[a, b] = A_{i_a}(C_b) is lower triangular, and adding a message keeps the rows of
    X = T^{-1} found so far: the new row of X is [-r X / d, 1 / d] (r: the row's masses on the old
    cells, d: on its own), so each row i in turn joins when eps (||r X||_1 + 1) / d passes (Lemma 8.2
    on the rows of T^{-1}).  O(n M^2) for M messages; on SmolLM2 heads at n = 1024 it finds up to 456
    messages where the other starts found 291 (benchmarks/results/real_heads.txt)."""
    n, N = A.shape
    nz = A != 0
    last = np.where(nz.any(axis=1), N - 1 - np.argmax(nz[:, ::-1], axis=1), -1)
    del nz
    if np.any(np.diff(last) < 0):
        return None
    cells = np.full(N, -1, dtype=np.int64)
    msgs, X, end = [], np.zeros((64, 64)), -1        # X[:M, :M] = T^-1 (capacity doubled as needed); end: the last column of the last cell
    for i in range(n):
        if i % 256 == 0:
            tick()
        seg = A[i, end + 1:last[i] + 1]
        if not seg.size:
            continue
        keep = seg >= theta * seg.max()
        d = float(seg[keep].sum())
        M = len(msgs)
        r = np.bincount(cells[:end + 1] + 1, weights=A[i, :end + 1], minlength=M + 1)[1:]   # masses on the cells
        rX = r @ X[:M, :M]
        if d > 0 and passes((np.abs(rX).sum() + 1) / d, eps):
            if M == len(X):
                X = np.pad(X, (0, M))
            X[M, :M], X[M, M] = -rX / d, 1 / d
            cells[end + 1 + np.flatnonzero(keep)] = M
            msgs.append(i)
            end = int(last[i])
    return np.array(msgs, dtype=np.int64), cells


def one_message(A, eps):
    """[the candidate M = 1] for eps < 1 (else []): the most peaked row as the one message, one
    cell holding every column (its margin is 1 > eps)."""
    if eps >= 1:
        return []
    peaked = np.array([int(np.argmax(A.max(axis=1)))])
    return [("lower-decoding-margin", 1, peaked, np.zeros(A.shape[1], dtype=np.int64))]


def peaked_rows(A):
    """The pruning's first start: rows in decreasing order of their largest entry, one per argmax
    column (singleton argmax cells), at most CAP."""
    n = A.shape[0]
    arg = A.argmax(axis=1)
    order = np.argsort(-A[np.arange(n), arg], kind="stable")
    seen, peaked = set(), []
    for i in order:
        if int(arg[i]) not in seen:
            seen.add(int(arg[i]))
            peaked.append(int(i))
            if len(peaked) == CAP:
                break
    return np.array(peaked)


def pruned(A, eps, start, dropped=None):
    """([(kind, M, messages, cells)] of prune_both from start for both tests, sets of M > 1 only;
    the inverse-norm set's size).  dropped: see prune_both."""
    thr = eps * (1 + SAFETY) + 1e-12
    out = []
    for kind, (msgs, cells) in zip(("lower-decoding-margin", "lower-decoding-inverse-norm"),
                                   prune_both(A, start, eps, thr, dropped)):
        if len(msgs) > 1:
            out.append((kind, len(msgs), msgs, cells))
    return out, len(msgs)


def prune_both_last(start, dropped):
    """The messages prune_both left: start without the dropped ones (in start's order)."""
    return np.asarray(start, dtype=np.int64)[~np.isin(start, dropped)]


def soft_prune(A, eps, start, dropped, M0, probes=3, reach=1.3):
    """Larger message sets than the pruning's, with soft decoders: (messages, G) or None.

    The pruning drops messages one at a time (dropped, in order; at least len(start) - M0) until
    the argmax cells pass the inverse-norm test at M0 messages; the sets it passed on the
    way (start without the first len(start) - M dropped, M > M0) may still pass with a better
    decoder (Lemma 8.2 holds for any decoder G with row l1 norms <= 1; soft_decoder comes within
    a few per cent of the LP-optimal one, docs/mathematics.md §8.1).  Bisection on M in
    (M0, min(len(start), reach M0)] with at most `probes` soft decoders (each O(N^2 M) per
    L-BFGS step), as if passing were monotone in M (it nearly is: a subset's optimal decoder
    value is no larger); only sets that pass in floats are returned, and the kernel decides.
    For heads with N > 512, where the greedy growth (grow_inverse) is not run: at L = 1024 on
    SmolLM2 heads, 249 -> 282 messages (benchmarks/bench_real_heads.py)."""
    start = np.asarray(start, dtype=np.int64)
    lo, hi, best = M0, min(len(start), int(reach * M0)), None
    for _ in range(probes):
        tick()
        if hi <= lo:
            break
        M = (lo + hi + 1) // 2
        msgs = prune_both_last(start, dropped[:len(start) - M])
        Am = A[msgs]
        ok = passes(M / Am.max(axis=0).sum(), eps)          # t* >= M / sum_j max_a Am[a, j] (soft_extend)
        if ok:
            v, G = soft_decoder(Am)
            ok = G is not None and passes(v, eps)
        if ok:
            lo, best = M, (msgs, G)
        else:
            hi = M - 1
    return best


FEW = 4        # a growth that ends at <= FEW messages is retried from other starts
STARTS = 4     # ... the next STARTS rows of the farthest-row traversal


def other_starts(A, eps, starts, records):
    """The best of the greedy growths (grow_inverse, then soft_extend) from each row in starts:
    (kind, M, messages, decoder).  On small heads the first row decides a lot: at n = 16, growth
    from every start reaches the exhaustive decoding bound in 23 of the 32 configurations where
    the default start falls short (benchmarks/bench_reference.py).  records: start -> growth
    record, kept by the caller across eps (the growths are eps-free, as in grow_inverse)."""
    best = None
    for s in starts:
        tick()
        rec = records.setdefault(int(s), [])
        msgs, dec = grow_inverse(A, eps, growth=rec, start=int(s))
        if len(msgs) < min(A.shape):
            more, G = soft_extend(A, eps, msgs, rec)
            if G is not None:
                msgs, dec = more, G
        if best is None or len(msgs) > best[1]:
            best = ("lower-decoding-inverse-norm", len(msgs), msgs, dec)
    return best


def decoded(A, msgs, dec):
    """T = A[msgs] G for a decoder given as cells (an int vector, -1 = no cell) or as an
    explicit N x M float matrix G."""
    dec = np.asarray(dec)
    if dec.ndim == 2:
        return A[msgs] @ dec
    return contraction(A, msgs, dec, len(msgs))


def soft_decoder(Am, iters=200, p=32, delta=1e-3):
    """(t, G): a decoder G (N x M, every row l1 norm <= 1) for the message rows Am (M x N) with
    t ~ ||(Am G)^{-1}||_inf close to the best any decoder reaches (inf if none is found).

    The best decoder solves an LP: min_G ||(Am G)^{-1}||_inf over G with row l1 norms <= 1 equals
    t* = min { max_j ||X_j||_1 : Am X = I } (given G, X = G (Am G)^{-1} is feasible with row norms
    <= ||(Am G)^{-1}||_inf; given X, G = X / t* gives Am G = I / t*; docs/mathematics.md §8.1).
    Exact LPs cost seconds at M ~ 20, N = 256, so X = X0 + Z C (Z an orthonormal basis of
    ker Am) is found by L-BFGS on the smoothed p-norm (sum_j s_j^p)^(1/p) of the row norms
    s_j = sum_b sqrt(X_jb^2 + delta'^2): within a few per cent of t* on real heads, 3-30 times
    faster than HiGHS.  The kernel decides on the returned G (T = fl(Am G) is then near I / t)."""
    M, N = Am.shape
    if M == 0 or M > N:
        return np.inf, None
    Q, _ = np.linalg.qr(Am.T, mode="complete")
    Z = Q[:, M:]
    try:
        X0 = np.linalg.solve(Am @ Am.T, Am).T                # the least-norm solution, N x M
    except np.linalg.LinAlgError:
        return np.inf, None
    if not np.all(np.isfinite(X0)):
        return np.inf, None
    scale = np.abs(X0).sum(axis=1).max()
    d2 = (delta * scale / M) ** 2

    def f(c):
        X = X0 + Z @ c.reshape(N - M, M)
        r = np.sqrt(X * X + d2)
        s = r.sum(axis=1)
        z = s / s.max()
        zp = z ** p
        tot = zp.sum()
        gs = (zp / z) * tot ** (1 / p - 1)
        return s.max() * tot ** (1 / p), (Z.T @ (gs[:, None] * X / r)).ravel()

    X = X0 + Z @ lbfgs(f, np.zeros((N - M) * M), iters).reshape(N - M, M) if N > M else X0   # M = N: X = Am^-1
    t = float(np.abs(X).sum(axis=1).max())
    if not (np.isfinite(t) and t > 0):
        return np.inf, None
    G = X / (t * (1 + 1e-12))                                    # row norms < 1 after rounding
    return inverse_norm(Am @ G), G


def best_decoder_lp(Am):
    """(t*, X): t* = min { max_j ||X_j||_1 : Am X = I } by HiGHS (X = P - Q, P, Q >= 0), the
    smallest ||(Am G)^{-1}||_inf over all decoders G (soft_decoder's docstring); (inf, None) if the
    LP fails.  Seconds at M ~ 20: the reference for benchmarks and tests, not used by the search."""
    import scipy.sparse as sp
    from scipy.optimize import linprog
    M, N = Am.shape
    E = sp.kron(sp.csr_matrix(Am), sp.identity(M))          # row a*M + b, column j*M + b
    A_eq = sp.hstack([E, -E, sp.csr_matrix((M * M, 1))]).tocsr()
    R = sp.kron(sp.identity(N), np.ones((1, M)))
    A_ub = sp.hstack([R, R, -np.ones((N, 1))]).tocsr()
    c = np.zeros(2 * N * M + 1)
    c[-1] = 1
    r = linprog(c, A_ub=A_ub, b_ub=np.zeros(N), A_eq=A_eq, b_eq=np.eye(M).ravel(), bounds=(0, None), method="highs")
    if r.status != 0:
        return np.inf, None
    return float(r.fun), (r.x[:N * M] - r.x[N * M:2 * N * M]).reshape(N, M)


def soft_extend(A, eps, msgs, growth, steps=8):
    """Messages beyond the greedy growth's, with soft decoders: the next rows of the growth
    order (the growth record, extended by _grow_step), each prefix kept while its soft
    decoder passes the inverse-norm test; (messages, G) of the longest passing prefix, or
    (msgs, None).  A cheap necessary test stops first: Y = I in the LP's dual gives
    t* >= M / sum_j max_a Am[a, j].  The decoders are eps-free and kept in the growth record."""
    S, best = np.asarray(msgs, dtype=np.int64), None
    for _ in range(steps):
        tick()
        if len(S) >= min(A.shape):                          # every row (or column) is a message already
            break
        t = len(S) - 1                                      # growth[t] holds S + [next row]
        if t > len(growth) or (t < len(growth) and not np.array_equal(growth[t][0][:-1], S)):
            break                                           # S is not a growth prefix
        if t == len(growth):
            growth.append(_grow_step(A, list(S)) + [None])
        step = growth[t]
        nxt = step[0]
        Am = A[nxt]
        if not passes(len(nxt) / Am.max(axis=0).sum(), eps):
            break
        if len(step) < 5:
            step.append(soft_decoder(Am))
        v, G = step[4]
        if G is None or not passes(v, eps):
            break
        S, best = nxt, G
    return S, best


def frobenius_candidates(A, eps, cell_counts=(2, 4, 8, 16, 32, 64), far=None, svals=None):
    """[(M, rows or None, cells or None)]: the tail test on A (up to FULL_SVD entries), on cell
    contractions A G with farthest-point cells (far: as in decoding_candidates), and on the rows
    that lie far from the contraction's top subspace.  svals: A's singular values
    (np.linalg.svd(A, compute_uv=False)) when the caller shares them between eps."""
    n, N = A.shape
    out = [(frobenius_bound(A, eps, SAFETY, svals), None, None)] if n * N <= FULL_SVD else []
    far = farthest_rows(A, far_count(n, N)) if far is None else far
    for m in cell_counts:
        tick()
        if m >= N or (m > len(far) and far_count(n, N) < min(n, N)):    # beyond the traversal's cap
            break
        cells = argmax_cells(A, far[:m])
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
