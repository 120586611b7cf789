"""Pruning a start until its argmax cells pass (docs/mathematics.md §8.1, Lemmas 8.1 and 8.2).

From a start (messages i_1..i_m, every column in the cell of the message that weighs it most),
drop the message with the worst margin T[a,a] - sum_{b != a} |T[a,b]| and re-assign its columns,
until the margin test (Lemma 8.1) or the inverse-norm test eps ||T^{-1}||_inf < 1 (Lemma 8.2)
passes.  The messages dropped do not depend on the test, so one pass serves both (prune_both):
the contraction is updated in place and a float inverse of T is carried along (InverseTracker:
Schur downdates, Woodbury updates).
"""
import numpy as np

from ..budget import tick
from .decoding import (SAFETY, argmax_cells, contraction, inverse_norm, inverse_norm_lower, inverse_or_none,
                       margins, passes)


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
        self.X = inverse_or_none(T)

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
            X = self.X = inverse_or_none(T)
        return None if X is None else float(np.abs(X).sum(axis=1).max())


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
