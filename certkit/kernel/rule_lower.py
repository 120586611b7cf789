"""Lower-bound rules (docs/mathematics.md §8), each reading a contraction of A through the row enclosures.

Setting: message rows i_1..i_M, a decoder G (N x M, sum_b |G_jb| <= 1 per column j; cells are indicator columns),
T_A = (A_{i_a} G)_{a,b}; any B with max_i ||A_i - B_i||_1 <= eps has rows of T_B - T_A of l1 norm <= eps.
Enclosure: T^ = fl(m_msg G), ||T_A[a] - T^[a]||_1 <= e_a := rho_{i_a} + (rounding of the product).
Final comparisons are exact; any float X or SVD a rule bounds is sound (1.3: in the witness; before, an oracle's).

* lower-decoding-margin (Lemma 8.1, proofs/decode-margin.md): margin_a = T_A[a,a] - sum_{b != a} |T_A[a,b]| > eps
  for every a gives r_eps(A) >= M; margin_a(T_A) >= margin_a(T^) - e_a.  Witness: messages, cells or decoder.
* lower-decoding-inverse-norm (Lemma 8.2, proofs/decode-inverse-norm.md): eps ||T_A^{-1}||_inf < 1 gives
  r_eps(A) >= M; with any X (~ T^^-1), alpha = ||I - X T_A||_inf <= ||I - X T^|| + ||X|| max_a e_a < 1 gives
  ||T_A^{-1}||_inf <= ||X||_inf / (1 - alpha).  Witness: as above, and X as "inverse" (1.3).
* lower-frobenius-tail (Lemma 8.3, proofs/frobenius-tail.md): C = S A G (S selects n' rows; default all rows, G = I);
  tail_M(C) := sum_{l >= M} sigma_l(C)^2 > n' eps^2 gives r_eps(A) >= M.  With D := sqrt(sum_a e_a^2) >=
  ||C - C^||_F, sqrt(tail_M(C)) >= sqrt(||C^||_F^2 (lower) - sum_{l<M} sigma_l^up(C^)^2) - D, the singular values
  verified from a float thin SVD (singular_value_bounds, proofs/verified-svd.md).  Witness: rows, cells or
  decoder, all optional; the SVD as svd_u, svd_s, svd_vt (1.3).
"""
from fractions import Fraction

import flint
import numpy as np

from .fp import U as u, ETA, gamma, inflate, sum_up, fro_up, arb_of, arb_up, arb_down
from .load import array, obj, Rejected
from .rows import Decoder, choose, enclose_all, indices, finite

SVD = ["svd_u", "svd_s", "svd_vt"]      # format 1.3: lower-frobenius-tail's thin SVD of C in the witness


def _contraction(inst, claim, witness, base_dir, route, name, hint=()):
    w = obj(witness, "$.witness", ["messages", *hint], ["cells", "decoder"])
    msg = indices(w["messages"], "$.witness.messages", base_dir, inst.n)
    dec = Decoder(w, "$.witness", base_dir, inst.N, len(msg))
    if claim.bound > len(msg):
        raise Rejected(f"{name}/size", f"{len(msg)} messages vs claimed bound {claim.bound}")
    _, T, e = enclose_all(inst, msg, route, dec)
    return T, e, msg, w


def check_margin(inst, claim, witness, base_dir, route, choices):
    T, e, msg, _ = _contraction(inst, claim, witness, base_dir, route, "lower-decoding-margin")
    diag, rowabs = np.diag(T), sum_up(np.abs(T), axis=1)
    lbs = [Fraction(t) + abs(Fraction(t)) - Fraction(r) - Fraction(x) for t, r, x in zip(diag, rowabs, e)]
    a = min(range(len(lbs)), key=lbs.__getitem__, default=None)
    if a is not None and not lbs[a] > claim.eps:
        raise Rejected("lower-decoding-margin/margin", f"certified margin of message {a} (row {int(msg[a])}) >= "
                                                       f"{float(lbs[a]):.6g} is not > eps = {claim.eps}")
    return {"messages": len(lbs), "certified_min_margin": None if a is None else float(lbs[a])}


def check_inverse_norm(inst, claim, witness, base_dir, route, choices):
    T, e, msg, w = _contraction(inst, claim, witness, base_dir, route, "lower-decoding-inverse-norm",
                                ("inverse",) * (inst.minor >= 3))    # 1.3: X in the witness, else the oracle's
    M = T.shape[0]
    X = array(w["inverse"], "$.witness.inverse", base_dir, (M, M)) if "inverse" in w else \
        choose(choices, "inverse", "lower-decoding-inverse-norm/invert", T)[0] if M else T    # any X: it chooses
    if X.shape != (M, M):
        raise Rejected("lower-decoding-inverse-norm/invert", f"the chosen inverse is {X.shape}, not {M} x {M}")
    R, absX, Tabs = np.eye(M) - X @ T, np.abs(X), sum_up(np.abs(T), axis=1)
    prod_err = inflate(gamma(M) * sum_up(absX * Tabs, axis=1) + M * M * ETA, 3)
    res = inflate(sum_up(np.abs(R), axis=1) * (1 + u) + prod_err, 2)     # rows of |I - X T^|
    finite(res, "lower-decoding-inverse-norm/residual")
    Xn = float(finite(np.max(sum_up(absX, axis=1), initial=0.0), "lower-decoding-inverse-norm/norm"))
    alpha = Fraction(float(np.max(res, initial=0.0))) + Fraction(Xn) * Fraction(float(np.max(e, initial=0.0)))
    if not alpha < 1:
        raise Rejected("lower-decoding-inverse-norm/alpha",
                       f"certified ||I - X T_A||_inf <= {float(alpha):.6g} is not < 1")
    inv_norm = Fraction(Xn) / (1 - alpha)
    if not claim.eps * inv_norm < 1:
        raise Rejected("lower-decoding-inverse-norm/norm",
                       f"certified eps * ||T_A^-1||_inf <= {float(claim.eps * inv_norm):.6g} is not < 1")
    return {"messages": M, "certified_inverse_norm": float(inv_norm)}


def singular_value_bounds(X: np.ndarray, Uf: np.ndarray, s: np.ndarray, Vt: np.ndarray) -> tuple:
    """Arrays (lo, hi) of floats with lo_i <= sigma_i(X) <= hi_i, i = 1..min(m, n), sorted, from any
    float thin SVD X ~ Uf diag(s) Vt (an untrusted choice, e.g. LAPACK's: it only chooses);
    ArithmeticError if it has the wrong shapes, s is not non-increasing and >= 0, or it is too poor.  With alpha_U,
    alpha_V >= the orthogonality defects (< 1/2), rho >= ||X V - U diag(s)||_2 (rounding gamma_k |A||B| + k eta per
    product): (sqrt(1-a_U) s_i - rho)/sqrt(1+a_V) <= sigma_i(X) <= (sqrt(1+a_U) s_i + rho)/sqrt(1-a_V)."""
    if X.shape[0] < X.shape[1]:
        X, Uf, Vt = X.T, Vt.T, Uf.T
    m, n = X.shape
    V, I = Vt.T, np.eye(n)
    if Uf.shape != (m, n) or s.shape != (n,) or V.shape != (n, n) or np.any(s[1:] > s[:-1]) or np.any(s < 0):
        raise ArithmeticError(f"float SVD of shapes {Uf.shape}, {s.shape}, {Vt.shape} for a {m} x {n} matrix, or "
                              f"singular values not non-increasing and >= 0")

    aU, aV = (inflate(fro_up(W.T @ W - I) * (1 + u) + gamma(k) * fro_up(W) ** 2 + n * k * ETA, 4)
              for W, k in ((Uf, m), (V, n)))         # orthogonality defects
    Us = Uf * s
    rho = inflate(fro_up(X @ V - Us) * (1 + u) + gamma(n) * fro_up(X) * fro_up(V)
                  + np.sqrt(m * n) * n * ETA + u * fro_up(Us) + np.sqrt(m * n) * ETA, 6)
    if not (aU < 0.5 and aV < 0.5 and rho < np.inf):
        raise ArithmeticError("float SVD too inaccurate to verify (orthogonality defect >= 1/2 or residual not finite)")
    with flint.ctx.workprec(80):
        AU, AV, R_ = flint.arb(aU), flint.arb(aV), flint.arb(rho)
        up_f = (1 + AU).sqrt() / (1 - AV).sqrt()
        lo_f = (1 - AU).sqrt() / (1 + AV).sqrt()
        S = [flint.arb(si) for si in s.tolist()]
        hi = np.array([arb_up(up_f * x + R_ / (1 - AV).sqrt()) for x in S])
        lo = np.array([max(0.0, arb_down(lo_f * x - R_ / (1 + AV).sqrt())) for x in S])
    return lo, hi


def check_frobenius(inst, claim, witness, base_dir, route, choices):
    w = obj(witness, "$.witness", SVD * (inst.minor >= 3), ["rows", "cells", "decoder"])     # 1.3: the SVD in it
    rows = indices(w["rows"], "$.witness.rows", base_dir, inst.n) if "rows" in w else np.arange(inst.n)
    dec = Decoder(w, "$.witness", base_dir, inst.N) if "cells" in w or "decoder" in w else None
    _, C, e = enclose_all(inst, rows, route, dec)          # C = fl(m G) row block by row block
    n1, M = C.shape[0], claim.bound
    if M > min(C.shape):
        raise Rejected("lower-frobenius-tail/size", f"bound {M} exceeds the contraction's size {C.shape}")
    svd = [array(w[k], f"$.witness.{k}", base_dir, (None,) * (k != "svd_s") + (None,)) for k in SVD] if SVD[0] in w \
        else choose(choices, "svd", "lower-frobenius-tail/svd", C, 3) if M > 1 else None
    try:
        sig_hi = singular_value_bounds(C, *svd)[1][:M - 1] if M > 1 else np.zeros(0)
    except ArithmeticError as ex:
        raise Rejected("lower-frobenius-tail/svd", str(ex)) from None
    fro2 = finite(np.sum(C * C), "lower-frobenius-tail/norm")
    finite(sig_hi, "lower-frobenius-tail/svd")
    # squares that underflow lose at most eta/2 each
    fro2_lo = Fraction(float(fro2)) * (1 - 2 * Fraction(gamma(C.size + 2))) - C.size * Fraction(ETA)
    with flint.ctx.workprec(100):
        top = sum((arb_of(Fraction(s)) ** 2 for s in sig_hi.tolist()), flint.arb(0))
        tail = arb_of(fro2_lo) - top
        need = arb_of(Fraction(fro_up(e))) + flint.arb(n1).sqrt() * arb_of(claim.eps)     # D + sqrt(n') eps
        ok = tail > 0 and tail.sqrt() > need
        shown = (float(tail.mid()), float(need.mid()))
    if not ok:
        raise Rejected("lower-frobenius-tail/tail",
                       f"certified sqrt(tail_{M}) >= sqrt({shown[0]:.6g}) is not > D + sqrt(n') eps = {shown[1]:.6g}")
    return {"rows": int(n1), "certified_tail_lower": shown[0]}
