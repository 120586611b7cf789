"""exp on y <= 0 from IEEE +, -, *, rint, integer and/shift, a table lookup and ldexp, proven:

    |E(y) - e^y| <= EXP_REL * e^y + EXP_ABS            (proofs/ieee-exp.md)

lam = ln2/2^S, k = rint(y fl(1/lam)) = 2^S e + j (0 <= j < 2^S), r = (y - k C1) - k C2 with C1 = lam cut to
32 bits (k C1 exact: |k| < 2^21), C2 = fl(lam - C1); E = ldexp(fl(P T_j), e), P = Horner on the degree-D
Taylor polynomial (rounded coefficients), T_j ~ 2^(j/2^S).  Inputs below -746 are clamped (e^y < 2^-1076
there, inside EXP_ABS).  np.exp is never used.  Constants, table and its error: Arb, once, at import.
"""
from fractions import Fraction
from math import factorial

import flint
import numpy as np

from .fp import U, ETA, arb_up, arb_of

S, DEGREE, CLAMP = 10, 3, -746.0
K_MAX = 1077 << S                    # >= |k| for -746 <= y <= 0; < 2^21

with flint.ctx.workprec(200):
    _lam = flint.arb(2).log() / 2 ** S
    INV_LAM = float(1 / _lam)
    _c1 = Fraction(int((_lam * 2 ** (32 + S)).floor().unique_fmpz()), 2 ** (32 + S))
    C1, C2 = float(_c1), float((_lam - arb_of(_c1)).mid())
    _tail = abs(_lam - arb_of(_c1) - flint.arb(C2))
    COEFFS = [float(Fraction(1, factorial(i))) for i in range(DEGREE + 1)]
    _exact = [(j * _lam).exp() for j in range(1 << S)]
    TABLE = np.array([float(x.mid()) for x in _exact])
    _tab = max(arb_up(abs(flint.arb(t) / x - 1)) for t, x in zip(TABLE.tolist(), _exact))
    # proofs/ieee-exp.md, "FORMULA USED BY THE KERNEL": |r*| <= R, |r| <= Rp, REL_P, REL
    _u = flint.arb(U)
    _g = lambda j: j * _u / (1 - j * _u)
    _d = (1 + abs(flint.arb(INV_LAM) * _lam - 1)) * (1 + _u) - 1     # |fl(y fl(1/lam)) lam/y - 1| <= _d
    _R = _lam / 2 + 746 * _d + ETA
    _tau_k = K_MAX * _tail
    _eps_r = _g(2) * (_R + 2 * K_MAX * abs(flint.arb(C2)) + _tau_k) + _tau_k
    _Rp = _R + _eps_r
    _trunc = _Rp ** (DEGREE + 1) / factorial(DEGREE + 1)
    _rel_p = ((_R + _Rp).exp() * (_g(2 * DEGREE) * (1 + _u) + _u + _trunc)
              + DEGREE * flint.arb(ETA) * _Rp.exp() + (_eps_r.exp() - 1))
    EXP_REL, EXP_ABS = arb_up((1 + _rel_p) * (1 + flint.arb(_tab)) * (1 + _u) - 1), ETA
    assert Fraction(C1) == _c1 and 746 / _lam * (1 + _d) + 1 < K_MAX < 2 ** 21 and EXP_REL < 1e-13
_k = np.arange(-K_MAX, 1, dtype=np.int32)           # the integer split k = 2^S e + j, for every k
assert np.array_equal(np.divmod(_k, 1 << S), (_k >> S, np.bitwise_and(_k, (1 << S) - 1, dtype=np.int64)))


def exp_nonpos(y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Enclosing exp of an array y <= 0 (see module doc).  Writes into `out` (may be y)."""
    r = np.maximum(y, CLAMP, out=out)
    t = np.rint(np.multiply(r, INV_LAM))             # k, integer-valued
    p = np.multiply(t, C1)
    r -= p
    r -= np.multiply(t, C2, out=p)
    e = t.astype(np.int32)
    j = np.bitwise_and(e, (1 << S) - 1, dtype=np.int64)
    e >>= S                                          # k = 2^S e + j
    np.multiply(r, COEFFS[DEGREE], out=p)
    p += COEFFS[DEGREE - 1]
    for c in COEFFS[DEGREE - 2::-1]:
        p *= r
        p += c
    p *= np.take(TABLE, j, out=t, mode="clip")        # 0 <= j < 2^S: clip never acts
    return np.ldexp(p, e, out=r)
