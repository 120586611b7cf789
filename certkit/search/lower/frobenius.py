"""Frobenius-tail candidates (docs/mathematics.md §8.1, Lemma 8.3).

On C = S A G (S selecting rows, G the indicator of column cells or I):
    sum_{l >= M} sigma_l(C)^2 > |S| eps^2  =>  r_eps >= M.
Tried on A itself (up to FULL_SVD entries, an n x N SVD), on the contractions of farthest-point
cells, and on the rows far from such a contraction's top subspace.  Float; the kernel decides.
"""
import numpy as np

from ..basic import frobenius_bound
from ..budget import tick
from .decoding import SAFETY, argmax_cells, contraction
from .messages import far_count, farthest_rows

FULL_SVD = 1 << 22    # the Frobenius tail on A itself only up to this many entries (an n x N SVD)


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
