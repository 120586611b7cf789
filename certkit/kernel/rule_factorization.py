"""Rule upper-factorization — proofs/factor-rank.md (docs/mathematics.md §9.1).

Statement: if B = U V^T exactly (U: n x k, V: N x k, the exact product of the stored binary64
factors) and max_i ||A_i - B_i||_1 <= eps, then r_eps(A) <= k.

Enclosure: ||A_i - B_i||_1 <= ||m_i - B_i||_1 + rho_i (row enclosure), and with B^ = fl(U V^T),
|B^ - B| <= gamma_k |U||V|^T + k eta, whose row sums are gamma_k (|U| (|V|^T 1))_i + N k eta;
sum_j |m_ij - B^_ij| <= (1 + u) fl-sum, bounded by sum_up.  Route arb: sum_j |m_ij - B_ij| in Arb.
Witness: U, V.
"""

import flint
import numpy as np

from .common import arb_row_l1, finite, max_row_bound, row_error_within
from .fp import U as u, ETA, gamma, inflate, sum_up
from .load import array, obj, Instance
from .verdict import Rejected


def max_row_error(inst: Instance, Uf: np.ndarray, V: np.ndarray, route: str = "fast") -> tuple[float, int]:
    """(e, i): a proven upper bound e of max_i ||A_i - (U V^T)_i||_1 and the row attaining it."""
    k = Uf.shape[1]
    Vt = np.ascontiguousarray(V.T)
    colabs = sum_up(np.abs(V), axis=0)                          # >= sum_j |V_jl|
    W = inflate(sum_up(np.abs(Uf) * colabs, axis=1), 2)         # >= (|U||V|^T 1)_i
    gk = gamma(max(k, 1))

    def row_bound(idx, m, rho):
        if route == "arb":          # in Arb: no gamma_k |U||V| term (cancellation)
            with flint.ctx.workprec(192):
                B = flint.arb_mat(Uf[idx].tolist()) * flint.arb_mat(Vt.tolist()) if k else flint.arb_mat(*m.shape)
                return arb_row_l1(flint.arb_mat(m.tolist()) - B, rho)
        B = Uf[idx] @ Vt
        np.subtract(m, B, out=B)
        np.abs(B, out=B)
        return finite(inflate(sum_up(B, axis=1) * (1 + u) + gk * W[idx] + inst.N * k * ETA + rho, 8),
                      "upper-factorization/row-error")
    return max_row_bound(inst, route, row_bound)


def check(inst, claim, witness, base_dir, route, choices):
    w = obj(witness, "$.witness", ["U", "V"])
    Uf = array(w["U"], "$.witness.U", base_dir, (inst.n, None))
    k = Uf.shape[1]
    V = array(w["V"], "$.witness.V", base_dir, (inst.N, k))
    if k > claim.bound:
        raise Rejected("upper-factorization/width", f"factors have k = {k} columns vs claimed bound {claim.bound}")
    worst = row_error_within(max_row_error(inst, Uf, V, route), claim.eps, "upper-factorization/row-error", "B_i")
    return {"certified_max_row_error": worst, "rank_of_factors_at_most": k}
