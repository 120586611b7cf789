"""exp on y <= 0 from IEEE +, -, *, rint and ldexp only, with a proven error bound.

For every binary64 y <= 0 the routine returns E(y) with

    |E(y) - e^y| <= EXP_REL * e^y + EXP_ABS            (proofs/ieee-exp.md)

Reduction: k = rint(y / ln2), r = (y - k C1) - k C2 with C1 = ln2 cut to 32 bits (k C1 exact for
|k| <= 2^21), C2 = fl(ln2 - C1); Horner on the degree-D Taylor polynomial with rounded
coefficients; ldexp(p, k), exact unless the result is subnormal.  Inputs below -746 are clamped
(e^y < 2^-1076 there, inside EXP_ABS).  np.exp is never used.  The constants are evaluated in
Arb once, at import.
"""
from fractions import Fraction
from math import factorial

import flint
import numpy as np

from .fp import U, ETA, arb_up, arb_of

DEGREE = 11
CLAMP = -746.0
K_MAX = 1077                         # |rint(y/ln2)| for -746 <= y <= 0

with flint.ctx.workprec(200):
    _ln2 = flint.arb(2).log()
    INV_LN2 = float(flint.arb(1) / _ln2)
    _c1 = Fraction(int((_ln2 * 2 ** 32).floor().unique_fmpz()), 2 ** 32)
    C1 = float(_c1)
    C2 = float((_ln2 - arb_of(_c1)).mid())
    _tail = abs(_ln2 - arb_of(_c1) - flint.arb(C2))
    COEFFS = [float(Fraction(1, factorial(i))) for i in range(DEGREE + 1)]
    # |r| <= ln2 (1/2 + |y| |fl(1/ln2) - 1/ln2| + rounding of y*INV_LN2) < 0.3466
    # proofs/ieee-exp.md, "FORMULA USED BY THE KERNEL" (with e^{R + R'} >= e^{2R} for safety)
    _R = flint.arb("0.3466")
    _u = flint.arb(U)
    _g = lambda j: j * _u / (1 - j * _u)
    _tau_k = K_MAX * _tail
    _eps_r = _g(2) * (_R + 2 * K_MAX * abs(flint.arb(C2)) + _tau_k) + _tau_k
    _Rp = _R + _eps_r
    _trunc = _Rp ** (DEGREE + 1) / factorial(DEGREE + 1)
    _rel = ((_R + _Rp).exp() * (_g(2 * DEGREE) * (1 + _u) + _u + _trunc)
            + DEGREE * flint.arb(ETA) * _Rp.exp() + (_eps_r.exp() - 1))
    EXP_REL = arb_up(_rel)
    EXP_ABS = ETA
assert Fraction(C1) == _c1 and EXP_REL < 1e-13


def exp_nonpos(y, out=None):
    """Enclosing exp of an array y <= 0 (see module doc).  Writes into `out` (may be y)."""
    r = np.maximum(y, CLAMP, out=out)
    k = np.rint(r * INV_LN2)
    r -= k * C1
    r -= k * C2
    p = np.full_like(r, COEFFS[DEGREE])
    for c in COEFFS[DEGREE - 1::-1]:
        p *= r
        p += c
    return np.ldexp(p, k.astype(np.int32), out=r)
