"""Rule lower-frobenius-tail — proofs/frobenius-tail.md (docs/mathematics.md Lemma 8.3).

Statement: C = S A G (S selects n' rows, G a decoder, default all rows and G = I).  If
rank B <= M - 1 then tail_M(C) := sum_{l >= M} sigma_l(C)^2 <= n' eps^2: tail_M(C) > n' eps^2 => r_eps(A) >= M.

Enclosure: C^ = fl(m_S G) with ||C - C^||_F <= D := sqrt(sum_a e_a^2) (row l2 <= row l1);
sqrt(tail_M(C)) >= sqrt(tail_M(C^)) - D; tail_M(C^) >= ||C^||_F^2 (lower bound) - sum_{l<M}
sigma_l^up(C^)^2 with verified singular values (proofs/verified-svd.md) from the oracle's float
SVD of C^ (check()'s choices: any SVD is sound).  Decided in Arb.
Witness: optional rows, optional cells/decoder.
"""
from fractions import Fraction

import flint
import numpy as np

from .common import Decoder, choose, indices, finite
from .fp import ETA, gamma, inflate, sum_up, arb_of
from .load import obj
from .rows import enclose_all
from .svd import singular_value_bounds
from .verdict import Rejected


def check(inst, claim, witness, base_dir, route, choices):
    w = obj(witness, "$.witness", [], ["rows", "cells", "decoder"])
    rows = indices(w["rows"], "$.witness.rows", base_dir, inst.n) if "rows" in w else np.arange(inst.n)
    dec = Decoder(w, "$.witness", base_dir, inst.N) if "cells" in w or "decoder" in w else None
    _, C, e = enclose_all(inst, rows, route, dec)          # C = fl(m G) row block by row block
    n1 = C.shape[0]
    M = claim.bound
    if M > min(C.shape):
        raise Rejected("lower-frobenius-tail/size", f"bound {M} exceeds the contraction's size {C.shape}")
    svd = choose(choices, "svd", "lower-frobenius-tail/svd", C, [2, 1, 2]) if M > 1 else None
    try:
        sig_hi = singular_value_bounds(C, *svd)[1][:M - 1] if M > 1 else np.zeros(0)
    except ArithmeticError as ex:
        raise Rejected("lower-frobenius-tail/svd", str(ex)) from None
    fro2 = finite(np.sum(C * C), "lower-frobenius-tail/norm")
    finite(sig_hi, "lower-frobenius-tail/svd")
    # squares that underflow lose at most eta/2 each
    fro2_lo = Fraction(float(fro2)) * (1 - 2 * Fraction(gamma(C.size + 2))) - C.size * Fraction(ETA)
    D = inflate(float(np.sqrt(sum_up(e * e))), 2)
    with flint.ctx.workprec(100):
        top = sum((arb_of(Fraction(s)) ** 2 for s in sig_hi.tolist()), flint.arb(0))
        tail = arb_of(fro2_lo) - top
        need = arb_of(Fraction(D)) + flint.arb(n1).sqrt() * arb_of(claim.eps)
        ok = tail > 0 and tail.sqrt() > need
        shown = (float(tail.mid()), float(need.mid()))
    if not ok:
        raise Rejected("lower-frobenius-tail/tail",
                       f"certified sqrt(tail_{M}) >= sqrt({shown[0]:.6g}) is not > D + sqrt(n') eps = {shown[1]:.6g}")
    return {"rows": int(n1), "certified_tail_lower": shown[0]}
