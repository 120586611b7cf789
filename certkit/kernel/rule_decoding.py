"""Rules lower-decoding-margin and lower-decoding-inverse-norm (docs/mathematics.md §8.1).

Setting: message rows i_1..i_M, a decoder G (N x M, sum_b |G_jb| <= 1 per column j; cells are
indicator columns), T_A = (A_{i_a} G)_{a,b}.  For any B with max_i ||A_i - B_i||_1 <= eps,
T_B - T_A has every row l1 norm <= eps.

* decode-margin (Lemma 8.1, proofs/decode-margin.md): if for every a
  margin_a = T_A[a,a] - sum_{b != a} |T_A[a,b]| > eps, then rank B >= M, so r_eps(A) >= M.
* decode-inverse-norm (Lemma 8.2, proofs/decode-inverse-norm.md): if T_A is invertible and
  eps ||T_A^{-1}||_inf < 1 then r_eps(A) >= M.  With any X: alpha = ||I - X T_A||_inf < 1
  gives ||T_A^{-1}||_inf <= ||X||_inf / (1 - alpha).

Enclosure: T^ = fl(m_msg G), ||T_A[a] - T^[a]||_1 <= e_a := rho_{i_a} + (rounding of the
product); margin_a(T_A) >= margin_a(T^) - e_a; ||I - X T_A|| <= ||I - X T^|| + ||X|| max_a e_a.
Final comparisons are exact (Fractions).  X = the oracle's float inverse of T^ (check()'s choices:
floats choose, any X is sound); witness: messages and cells or decoder.
"""
from fractions import Fraction

import numpy as np

from .common import Decoder, choose, enclose_all, indices, finite
from .fp import U as u, ETA, gamma, inflate, sum_up
from .load import obj
from .verdict import Rejected


def _contraction(inst, claim, witness, base_dir, route, name):
    w = obj(witness, "$.witness", ["messages"], ["cells", "decoder"])
    msg = indices(w["messages"], "$.witness.messages", base_dir, inst.n)
    M = len(msg)
    dec = Decoder(w, "$.witness", base_dir, inst.N, M)
    if claim.bound > M:
        raise Rejected(f"{name}/size", f"{M} messages vs claimed bound {claim.bound}")
    _, T, e = enclose_all(inst, msg, route, dec)
    return T, e, msg


def check_margin(inst, claim, witness, base_dir, route, choices):
    T, e, msg = _contraction(inst, claim, witness, base_dir, route, "lower-decoding-margin")
    diag, rowabs = np.diag(T), sum_up(np.abs(T), axis=1)
    lbs = [Fraction(t) + abs(Fraction(t)) - Fraction(r) - Fraction(x) for t, r, x in zip(diag, rowabs, e)]
    a = min(range(len(lbs)), key=lbs.__getitem__, default=None)
    if a is not None and not lbs[a] > claim.eps:
        raise Rejected("lower-decoding-margin/margin", f"certified margin of message {a} (row {int(msg[a])}) >= "
                                                       f"{float(lbs[a]):.6g} is not > eps = {claim.eps}")
    return {"messages": len(lbs), "certified_min_margin": None if a is None else float(lbs[a])}


def check_inverse_norm(inst, claim, witness, base_dir, route, choices):
    T, e, msg = _contraction(inst, claim, witness, base_dir, route, "lower-decoding-inverse-norm")
    M = T.shape[0]
    if M == 0:
        return {"messages": 0}
    X, = choose(choices, "inverse", "lower-decoding-inverse-norm/invert", T)     # any X: it only chooses
    if X.shape != (M, M):
        raise Rejected("lower-decoding-inverse-norm/invert", f"the chosen inverse is {X.shape}, not {M} x {M}")
    R, absX, Tabs = np.eye(M) - X @ T, np.abs(X), sum_up(np.abs(T), axis=1)
    prod_err = inflate(gamma(M) * sum_up(absX * Tabs, axis=1) + M * M * ETA, 3)
    res = inflate(sum_up(np.abs(R), axis=1) * (1 + u) + prod_err, 2)     # rows of |I - X T^|
    finite(res, "lower-decoding-inverse-norm/residual")
    Xn = float(finite(np.max(sum_up(absX, axis=1)), "lower-decoding-inverse-norm/norm"))
    alpha = Fraction(float(np.max(res))) + Fraction(Xn) * Fraction(float(np.max(e)))
    if not alpha < 1:
        raise Rejected("lower-decoding-inverse-norm/alpha",
                       f"certified ||I - X T_A||_inf <= {float(alpha):.6g} is not < 1")
    inv_norm = Fraction(Xn) / (1 - alpha)
    if not claim.eps * inv_norm < 1:
        raise Rejected("lower-decoding-inverse-norm/norm",
                       f"certified eps * ||T_A^-1||_inf <= {float(claim.eps * inv_norm):.6g} is not < 1")
    return {"messages": M, "certified_inverse_norm": float(inv_norm)}
