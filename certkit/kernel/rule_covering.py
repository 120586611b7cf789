"""Rule upper-covering — proofs/cover-rank.md (docs/mathematics.md §9.2).

Statement: with representatives R (row indices) and an assignment sigma(i) in R, if
||A_i - A_sigma(i)||_1 <= eps for all i then r_eps(A) <= |R| (B_i := A_sigma(i)).

Enclosure: ||A_i - A_s||_1 <= ||m_i - m_s||_1 + rho_i + rho_s; the float sum bounded by sum_up (route
arb: the sum in Arb).
Witness: representatives, assignment.
"""
import flint
import numpy as np

from .common import arb_row_l1, enclose_all, indices, finite, max_row_bound, row_error_within
from .fp import U as u, inflate, sum_up
from .load import obj
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
    ridx, rm, rrho = enclose_all(inst, Rset, route)             # ridx = Rset, sorted

    def row_bound(idx, m, rho):
        t = np.searchsorted(ridx, sig[idx])
        if route == "arb":
            with flint.ctx.workprec(192):
                return arb_row_l1(flint.arb_mat(m.tolist()) - flint.arb_mat(rm[t].tolist()), inflate(rho + rrho[t], 1))
        return finite(inflate(sum_up(np.abs(m - rm[t]), axis=1) * (1 + u) + rho + rrho[t], 4),
                      "upper-covering/row-distance")
    worst = row_error_within(max_row_bound(inst, route, row_bound), claim.eps, "upper-covering/row-distance", "A_sigma(i)")
    return {"certified_max_row_error": worst, "representatives": int(len(R))}
