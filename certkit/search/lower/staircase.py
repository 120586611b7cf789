"""The staircase of a causal or sliding-window head (docs/mathematics.md §8.5, Lemma 8.2).

When the rows see prefixes that never shrink, messages i_0 < i_1 < ... whose cells lie inside the
prefix each message adds give a lower-triangular T_A (row i_a is 0 on every later cell), whose
inverse grows a row at a time: the new row of X = T^{-1} is [-r X / d, 1 / d] (r: the row's
masses on the old cells, d: on its own), so eps ||T^{-1}||_inf < 1 is checked row by row.
"""
import numpy as np

from ..budget import tick
from .decoding import passes


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
