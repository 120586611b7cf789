"""Rules bounding row distances between two attentions: ||A_i - B_i||_1 <= ||m_i - m'_i||_1 + rho_i + rho'_i
(fast enclosures, the float sum by common.row_distance), or sum_j |A_ij - B_ij| in Arb from the two rows'
balls (route arb, and auto on the rows fast leaves open; common.max_row_bound):

* upper-covering (proofs/cover-rank.md, docs/mathematics.md §9.2): representatives R and an assignment
  sigma(i) in R with ||A_i - A_sigma(i)||_1 <= eps for all i give r_eps(A) <= |R| (B_i := A_sigma(i)).
* attention-distance (proofs/attention-distance.md, §10): max_i ||A_i - A'_i||_1 <= eps itself, A' the
  replacement's attention (the same n x N); witness {}."""
import numpy as np

from .common import enclose_all, indices, max_row_bound, row_distance, row_error_within
from .fp import inflate
from .load import obj, Fraction, Instance
from .rows import arb_l1, enclose
from .verdict import Malformed, Rejected


def check(inst, claim, witness, base_dir, route, choices):
    w = obj(witness, "$.witness", ["representatives", "assignment"])
    R = indices(w["representatives"], "$.witness.representatives", base_dir, inst.n)
    sig = indices(w["assignment"], "$.witness.assignment", base_dir, inst.n, inst.n)
    Rset = np.unique(R)
    if len(Rset) != len(R):
        raise Malformed("$.witness.representatives", "duplicate representative")
    bad = ~np.isin(sig, Rset)
    if bad.any():
        i = int(np.argmax(bad))
        raise Malformed(f"$.witness.assignment[{i}]", f"row {int(sig[i])} is not a representative")
    if len(R) > claim.bound:
        raise Rejected("upper-covering/size", f"{len(R)} representatives vs claimed bound {claim.bound}")
    ridx, rm, rrho = enclose_all(inst, Rset, "fast") if route != "arb" else (None,) * 3    # ridx = Rset, sorted

    def fast_bound(idx, m, rho):    # a row that represents itself: exactly 0
        t = np.searchsorted(ridx, sig[idx])
        return np.where(sig[idx] == idx, 0.0, row_distance(m, rm[t], inflate(rho + rrho[t], 1), "upper-covering/row-distance"))
    worst, used = row_error_within(max_row_bound(inst, route, fast_bound, lambda idx, A: arb_l1(A(idx), A(sig[idx])), claim.eps),
                                   claim.eps, "upper-covering/row-distance", "A_sigma(i)")
    return {"certified_max_row_error": worst, "representatives": int(len(R)), "route": used}


def max_row_distance(inst: Instance, other: Instance, route: str = "fast", eps: Fraction | None = None) -> tuple:
    """(e, i, route used): a proven upper bound e of max_i ||A_i - A'_i||_1 (A' from other) and the row
    attaining it (common.max_row_bound; eps: the claim, where route auto and arb stop)."""
    blocks = enclose(other, None, "fast")               # the same rows in the same blocks as inst's

    def fast_bound(idx, m, rho):
        _, m2, rho2 = next(blocks)
        return row_distance(m, m2, inflate(rho + rho2, 1), "attention-distance/row-distance")
    return max_row_bound(inst, route, fast_bound, lambda idx, A, A2: arb_l1(A(idx), A2(idx)), eps, other)


def check_distance(inst, claim, witness, base_dir, route, choices):
    obj(witness, "$.witness", [])
    worst, used = row_error_within(max_row_distance(inst, inst.replacement, route, claim.eps), claim.eps,
                                   "attention-distance/row-distance", "A'_i")
    return {"certified_max_row_distance": worst, "route": used}
