"""Which rows are messages (docs/mathematics.md §8.1): the starts of the lower search.

A decoding bound needs M message rows that weigh different columns (each claims a cell the others
weigh little), so the starts are rows far apart in l1: the l1 farthest-point traversal of the
rows from the most peaked one (farthest_rows; its length far_count keeps rows x n x N within
WORK), and the peaked rows, one per argmax column (peaked_rows).  Each start holds at most CAP
messages.
"""
import numpy as np

from ..budget import tick

CAP = 1024            # messages in a pruning start (at most)
WORK = 1 << 30        # budget of the farthest-row traversal, in entries visited


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
