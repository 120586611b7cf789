"""Rules bounding max_i ||A_i - B_i||_1 <= eps from the row enclosures ||A_i - m_i||_1 <= rho_i, fast (float sums,
row_distance) or in Arb from the rows' balls (route arb, and auto on the rows fast leaves open; max_row_bound):

* upper-factorization (proofs/factor-rank.md, docs/mathematics.md §9.1): B = U V^T exactly (witness U: n x k,
  V: N x k) gives r_eps(A) <= k; fast: ||m_i - B^_i||_1 + rho_i, B^ = fl(U V^T), |B^ - B| <= gamma_k |U||V|^T + k eta;
  arb: B an Arb product of the floats.
* upper-covering (proofs/cover-rank.md, §9.2): representatives R and an assignment sigma(i) in R with
  ||A_i - A_sigma(i)||_1 <= eps for all i give r_eps(A) <= |R| (B_i := A_sigma(i)).
* attention-distance (proofs/attention-distance.md, §10): max_i ||A_i - A'_i||_1 <= eps itself (A' the replacement's).
* attention-output-distance (format 1.3, proofs/attention-output-distance.md, §10.6): max_i ||D_i|| <= eps in the
  row norm inf or 2 (or relative to ||(A V W)_i||), D = A V W - A' V' W summed over a layer's heads (output_rows).
"""
import math

import flint
import numpy as np

from .fp import U as u, ETA, gamma, inflate, norms_up, prod_up, sum_up
from .load import array, obj, Fraction, Instance, Malformed, Rejected
from .rows import Decoder, arb_l1, enclose, enclose_all, finite, indices, max_row_bound, row_distance, row_error_within


def max_row_error(inst: Instance, Uf: np.ndarray, V: np.ndarray, route: str = "fast",
                  eps: Fraction | None = None) -> tuple:
    """(e, i, route used): a proven upper bound e of max_i ||A_i - (U V^T)_i||_1, the row attaining it
    (max_row_bound; eps: the claim, where route auto and arb stop)."""
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


def check_factorization(inst, claim, witness, base_dir, route, choices):
    w = obj(witness, "$.witness", ["U", "V"])
    Uf = array(w["U"], "$.witness.U", base_dir, (inst.n, None))
    k = Uf.shape[1]
    V = array(w["V"], "$.witness.V", base_dir, (inst.N, k))
    if k > claim.bound:
        raise Rejected("upper-factorization/width", f"factors have k = {k} columns vs claimed bound {claim.bound}")
    worst, used = row_error_within(max_row_error(inst, Uf, V, route, claim.eps), claim.eps,
                                   "upper-factorization/row-error", "B_i")
    return {"certified_max_row_error": worst, "rank_of_factors_at_most": k, "route": used}


def check_covering(inst, claim, witness, base_dir, route, choices):
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
        d = row_distance(m, rm[t], inflate(rho + rrho[t], 1), "upper-covering/row-distance")
        return np.where(sig[idx] == idx, 0.0, d)
    worst_row = max_row_bound(inst, route, fast_bound, lambda idx, A: arb_l1(A(idx), A(sig[idx])), claim.eps)
    worst, used = row_error_within(worst_row, claim.eps, "upper-covering/row-distance", "A_sigma(i)")
    return {"certified_max_row_error": worst, "representatives": int(len(R)), "route": used}


def max_row_distance(inst: Instance, other: Instance, route: str = "fast", eps: Fraction | None = None) -> tuple:
    """(e, i, route used): a proven upper bound e of max_i ||A_i - A'_i||_1 (A' from other) and the row
    attaining it (max_row_bound; eps: the claim, where route auto and arb stop)."""
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


def _row_norms(X, norm, down=False):
    """Upper bounds of the row norms of the exact matrix fl(X) rounds (one rounding), or down: lower bounds of X's."""
    if norm == "inf":
        return np.max(np.abs(X), axis=1) * (1 if down else 1 + 2 * u)
    return np.sqrt(np.sum(X * X, axis=1)) * (1 - 3 * gamma(X.shape[1] + 2)) - 2.0 ** -490 if down else norms_up(X)


def output_rows(inst: Instance, norm: str, route: str = "fast") -> tuple:
    """(up, rel) per row: up_i >= ||D_i||, rel_i >= ||D_i|| / ||(A V W)_i|| (inf where its lower bound is <= 0) over
    inst.layer.  G = V / k (k a power of 2 > 2 max_j ||V_j||_1) is a decoder: Y = fl(k fl(m G) W) is within
    k (e_i + d_v eta) w + ||E_i|| of (A V W)_i, w >= max_a ||W_a||; float head sums add gamma_{H-1} ||Y_i||."""
    H, S, err = len(inst.layer), [0.0, 0.0], [0.0, 0.0]
    for h in inst.layer:
        W = h.projection
        w = 1.0 if W is None else float(np.max(_row_norms(W, norm)))
        for s, x in enumerate((h, h.replacement)):
            k = 2.0 ** (1 + math.frexp(float(np.max(sum_up(np.abs(x.values), axis=1))))[1])
            _, T, e = enclose_all(x, None, route, Decoder({"decoder": x.values / k}, "$.values", None, x.N))
            Y, E = (T * k, np.zeros_like(T)) if W is None else prod_up(T * k, W)
            S[s] += Y
            err[s] += k * (e + x.values.shape[1] * ETA) * w + _row_norms(E, norm) + gamma(H - 1) * _row_norms(Y, norm)
    err = [inflate(e, 8 * H) for e in err]                                      # H <= 256 heads
    lo = (_row_norms(S[0], norm, down=True) - err[0]) * (1 - 4 * u)                # rounded down
    up = inflate(_row_norms(S[0] - S[1], norm) + err[0] + err[1], 2)
    return up, np.where(lo > 0, inflate(up / np.where(lo > 0, lo, 1.0), 1), np.inf)


def check_output(inst, claim, witness, base_dir, route, choices):
    obj(witness, "$.witness", [])
    up = output_rows(inst, claim.norm, route)[claim.relative]
    worst, _ = row_error_within((float(np.max(up)), int(np.argmax(up)), route), claim.eps,
                                "attention-output-distance/row-norm", "A'_i V' W")
    return {"certified_max_row_output_distance": worst, "norm": claim.norm, "relative": claim.relative}
