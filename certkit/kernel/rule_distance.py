"""Rule attention-distance — proofs/attention-distance.md (docs/mathematics.md §10).

Statement: for the head's attention A and its replacement's A' (the same n x N),
max_i ||A_i - A'_i||_1 <= eps.  By the operator identity (proofs/op-identity.md) this is the
worst error of the attention output, max over value matrices with entries in [-1, 1] of
max_i ||(A V)_i - (A' V)_i||_inf.

Enclosure: ||A_i - A'_i||_1 <= ||m_i - m'_i||_1 + rho_i + rho'_i (the two row enclosures of the
same rows).  fl(m_ij - m'_ij) = (m_ij - m'_ij)(1 + d) with |d| <= u (a difference of floats
never underflows inexactly), so |m_ij - m'_ij| <= (1 + 2u) |fl(m_ij - m'_ij)|; sum_up bounds the
row sum.  Route arb: both enclosures in Arb, the same float bound.  Witness: {} (nothing to choose).
"""
import numpy as np

from .common import finite, max_row_bound, row_error_within
from .fp import U as u, inflate, sum_up
from .load import obj, Instance
from .rows import enclose


def max_row_distance(inst: Instance, other: Instance, route: str = "fast") -> tuple[float, int]:
    """(e, i): a proven upper bound e of max_i ||A_i - A'_i||_1 (A' from other) and the row attaining it."""
    other_blocks = enclose(other, None, route)         # the same rows in the same blocks as inst's

    def row_bound(idx, m, rho):
        _, m2, rho2 = next(other_blocks)
        np.subtract(m, m2, out=m)
        np.abs(m, out=m)
        return finite(inflate(sum_up(m, axis=1) * (1 + 2 * u) + rho + rho2, 4), "attention-distance/row")
    return max_row_bound(inst, route, row_bound)


def check(inst, claim, witness, base_dir, route, choices):
    obj(witness, "$.witness", [])
    worst_row = max_row_distance(inst, inst.replacement, route)
    worst = row_error_within(worst_row, claim.eps, "attention-distance/row-distance", "A'_i")
    return {"certified_max_row_distance": worst, "worst_row": worst_row[1]}
