"""Rule upper-factorization — proofs/factor-rank.md (docs/mathematics.md §9.1).

Statement: if B = U V^T exactly (U: n x k, V: N x k, the exact product of the stored binary64
factors) and max_i ||A_i - B_i||_1 <= eps, then r_eps(A) <= k.

Enclosure: ||A_i - B_i||_1 <= ||m_i - B_i||_1 + rho_i (row enclosure), and with B^ = fl(U V^T),
|B^ - B| <= gamma_k |U||V|^T + k eta, whose row sums are gamma_k (|U| (|V|^T 1))_i + N k eta;
sum_j |m_ij - B^_ij| <= (1 + u) fl-sum, bounded by sum_up.  Route arb (and auto on the rows fast leaves
open): sum_j |A_ij - B_ij| in Arb from A's balls and B = U V^T an Arb product of the floats.
Witness: U, V.
"""

import flint
import numpy as np

from .common import finite, max_row_bound, row_error_within
from .fp import U as u, ETA, gamma, inflate, sum_up
from .load import array, obj, Fraction, Instance
from .rows import arb_l1
from .verdict import Rejected


def max_row_error(inst: Instance, Uf: np.ndarray, V: np.ndarray, route: str = "fast", eps: Fraction | None = None) -> tuple:
    """(e, i, route used): a proven upper bound e of max_i ||A_i - (U V^T)_i||_1, the row attaining it
    (common.max_row_bound; eps: the claim, where route auto and arb stop)."""
    k = Uf.shape[1]
    Vt, vt = np.ascontiguousarray(V.T), [None]
    W, gk = inflate(sum_up(np.abs(Uf) * sum_up(np.abs(V), axis=0), axis=1), 2), gamma(max(k, 1))  # W >= (|U||V|^T 1)_i

    def fast_bound(idx, m, rho):
        B = Uf[idx] @ Vt
        np.abs(np.subtract(m, B, out=B), out=B)
        return finite(inflate(sum_up(B, axis=1) * (1 + u) + gk * W[idx] + inst.N * k * ETA + rho, 8),
                      "upper-factorization/row-error")

    def arb_bound(idx, A):          # B exact in Arb (products of floats), no gamma_k |U||V| term
        vt[0] = flint.arb_mat(k, inst.N, Vt.ravel().tolist()) if vt[0] is None else vt[0]     # once
        return arb_l1(A(idx), (flint.arb_mat(len(idx), k, Uf[idx].ravel().tolist()) * vt[0]).table())
    return max_row_bound(inst, route, fast_bound, arb_bound, eps)


def check(inst, claim, witness, base_dir, route, choices):
    w = obj(witness, "$.witness", ["U", "V"])
    Uf = array(w["U"], "$.witness.U", base_dir, (inst.n, None))
    k = Uf.shape[1]
    V = array(w["V"], "$.witness.V", base_dir, (inst.N, k))
    if k > claim.bound:
        raise Rejected("upper-factorization/width", f"factors have k = {k} columns vs claimed bound {claim.bound}")
    worst, used = row_error_within(max_row_error(inst, Uf, V, route, claim.eps), claim.eps,
                                   "upper-factorization/row-error", "B_i")
    return {"certified_max_row_error": worst, "rank_of_factors_at_most": k, "route": used}
