"""The binary64 model of the fast route (proofs/fp-rounding.md), exact scalar helpers and the IEEE-only exp.

u = 2^-53, eta = 2^-1074, gamma_k = k u / (1 - k u).  Every basic operation rounded to nearest
satisfies fl(a op b) = (a op b)(1 + delta) + e with |delta| <= u, |e| <= eta/2.
check_environment() tests at run time that this model is the one in force (round to nearest
even, gradual underflow in numpy ufuncs and in BLAS).
"""
import math
import struct
from fractions import Fraction

import numpy as np
import flint

U = 2.0 ** -53
ETA = struct.unpack("<d", struct.pack("<Q", 1))[0]   # 2^-1074, exact whatever the FP mode
INFLATE = 1.0 + 2.0 ** -40          # proofs/fp-rounding.md (e): m <= 2^10 rounded ops
TINY = 2.0 ** -800                   # per-op absolute slack for underflow (proofs/fp-rounding.md (e))


def gamma(k: int) -> float:
    """An upper bound (as a float) of gamma_k = k u / (1 - k u), valid for k u < 1/2."""
    return float_up(Fraction(k) * Fraction(U) / (1 - Fraction(k) * Fraction(U)))


def inflate(x: np.ndarray | float, ops: int = 64) -> np.ndarray | float:
    """A true upper bound of a non-negative quantity computed in float from non-negative
    inputs with at most `ops` (<= 2^11) rounded operations in sequence, + - * / sqrt, each
    rounded to nearest (proofs/fp-rounding.md (e)).  Long sums: use sum_up."""
    assert ops <= 2048
    return x * INFLATE + ops * TINY


def sum_up(x: np.ndarray, axis: int | None = None) -> np.ndarray | float:
    """Upper bound of the exact sum of a non-negative float array along axis (any summation
    order: |fl(sum) - sum| <= gamma_{n-1} sum)."""
    n = x.size if axis is None else x.shape[axis]
    return inflate(np.sum(x, axis=axis) * (1 + 2 * gamma(max(n, 1))), 3)


def fro_up(A):
    """Upper bound of the Frobenius norm of a float array."""
    return inflate(float(np.sqrt(sum_up(A * A))), 2)


def prod_up(X: np.ndarray, A: np.ndarray) -> tuple:
    """(Y, E): Y = fl(X A) and E >= |Y - X A| entrywise, X and A exact (TRUST.md assumption 2)."""
    k = X.shape[1]
    S = inflate(np.abs(X) @ np.abs(A), 2 * k)
    return X @ A, inflate(gamma(k) * S + k * ETA, 3)


def norms_up(D: np.ndarray, ops: int = 1) -> np.ndarray | float:
    """Upper bounds of the exact row norms of D's rows, D = fl(exact) with <= ops roundings."""
    s = D.shape[1]
    return inflate(np.sqrt(inflate(np.einsum("ij,ij->i", D, D), 2 * s + ops)), 2)


def float_up(v):
    """The smallest binary64 >= v (+inf above the largest finite one), for a Fraction or an exact int."""
    v = Fraction(v)
    f = float(min(max(v, -np.finfo(float).max), np.finfo(float).max))     # clamped first: float() overflows
    while f < math.inf and Fraction(f) < v:
        f = math.nextafter(f, math.inf)
    return f


def arb_to_fraction_upper(x: flint.arb) -> Fraction:
    """An exact rational >= every point of the Arb ball x."""
    man, exp = x.upper().man_exp()
    return Fraction(int(man)) * Fraction(2) ** int(exp)


def arb_to_fraction_lower(x: flint.arb) -> Fraction:
    return -arb_to_fraction_upper(-x)              # Arb negation is exact


def arb_up(x: flint.arb) -> float:
    """A binary64 >= every point of the Arb ball x."""
    return float_up(arb_to_fraction_upper(x))


def arb_down(x: flint.arb) -> float:
    return -arb_up(-x) + 0.0                       # Arb negation is exact; + 0.0: never -0.0


def arb_of(v: Fraction | int) -> flint.arb:
    """Exact Arb ball of a Fraction (a point when the denominator is a power of two)."""
    v = Fraction(v)
    return flint.arb(v.numerator) / v.denominator


class FPEnvironmentError(RuntimeError):
    pass


def _bits(x):
    """The IEEE bit pattern of a binary64 (comparisons on subnormals are unreliable under DAZ)."""
    return struct.unpack("<Q", struct.pack("<d", float(x)))[0]


def check_environment():
    """FPEnvironmentError unless binary64 rounds to nearest-even with gradual underflow in Python, numpy
    ufuncs and BLAS (subnormals compared by bit pattern: under DAZ a comparison sees 0 == 2^-1074)."""
    a = np.array([1.0, 1.0, -1.0, 2.0 ** -537, 2.0 ** -1022])
    b = np.array([2.0 ** -53, 2.0 ** -53 + 2.0 ** -105, -(2.0 ** -53 + 2.0 ** -105), 2.0 ** -537, 0.5])
    s = a + b
    prod = a[3:] * b[3:]
    m = np.array([[2 * ETA, 0.0], [0.0, 1.0]]) @ np.array([[0.5], [0.0]])
    ok = (s[0] == 1.0 and s[1] == 1.0 + 2.0 ** -52 and s[2] == -1.0 - 2.0 ** -52
          and 1.0 + 2.0 ** -53 == 1.0 and 1.0 + (2.0 ** -53 + 2.0 ** -105) == 1.0 + 2.0 ** -52
          and _bits(prod[0]) == 1 and _bits(prod[1]) == 1 << 51
          and _bits(2.0 ** -537 * 2.0 ** -537) == 1 and _bits(m[0, 0]) == 1
          and _bits(ETA) == 1 and np.finfo(np.float64).eps == 2.0 ** -52)
    if not ok:
        raise FPEnvironmentError("floating-point environment is not IEEE round-to-nearest with "
                                 "gradual underflow (flush-to-zero or a changed rounding mode?)")


# ---------------------------------------------------------------- exp_nonpos: exp on y <= 0 (proofs/ieee-exp.md)
# exp on y <= 0 from IEEE +, -, *, rint, integer and/shift, a table lookup and ldexp, proven:
#     |E(y) - e^y| <= EXP_REL * e^y + EXP_ABS            (proofs/ieee-exp.md)
# lam = ln2/2^S, k = rint(y fl(1/lam)) = 2^S e + j (0 <= j < 2^S), r = (y - k C1) - k C2 with C1 = lam cut to
# 32 bits (k C1 exact: |k| < 2^21), C2 = fl(lam - C1); E = ldexp(fl(P T_j), e), P = Horner on the degree-D
# Taylor polynomial (rounded coefficients), T_j ~ 2^(j/2^S).  Inputs below -746 are clamped (e^y < 2^-1076
# there, inside EXP_ABS).  np.exp is never used.  Constants, table and its error: Arb, once, at import.
S, DEGREE, CLAMP = 10, 3, -746.0
K_MAX = 1077 << S                    # >= |k| for -746 <= y <= 0; < 2^21

with flint.ctx.workprec(200):
    _lam = flint.arb(2).log() / 2 ** S
    INV_LAM = float(1 / _lam)
    _c1 = Fraction(int((_lam * 2 ** (32 + S)).floor().unique_fmpz()), 2 ** (32 + S))
    C1, C2 = float(_c1), float((_lam - arb_of(_c1)).mid())
    _tail = abs(_lam - arb_of(_c1) - flint.arb(C2))
    COEFFS = [float(Fraction(1, math.factorial(i))) for i in range(DEGREE + 1)]
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
    _trunc = _Rp ** (DEGREE + 1) / math.factorial(DEGREE + 1)
    _rel_p = ((_R + _Rp).exp() * (_g(2 * DEGREE) * (1 + _u) + _u + _trunc)
              + DEGREE * flint.arb(ETA) * _Rp.exp() + (_eps_r.exp() - 1))
    EXP_REL, EXP_ABS = arb_up((1 + _rel_p) * (1 + flint.arb(_tab)) * (1 + _u) - 1), ETA
    assert Fraction(C1) == _c1 and 746 / _lam * (1 + _d) + 1 < K_MAX < 2 ** 21 and EXP_REL < 1e-13
_k = np.arange(-K_MAX, 1, dtype=np.int32)           # the integer split k = 2^S e + j, for every k
assert np.array_equal(np.divmod(_k, 1 << S), (_k >> S, np.bitwise_and(_k, (1 << S) - 1, dtype=np.int64)))


def exp_nonpos(y: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """Enclosing exp of an array y <= 0 (see the comment above).  Writes into `out` (may be y)."""
    r = np.maximum(y, CLAMP, out=out)
    t = np.rint(np.multiply(r, INV_LAM))             # k, integer-valued
    p = np.multiply(t, C1)
    r -= p
    r -= np.multiply(t, C2, out=p)
    e = t.astype(np.int32)
    j = np.bitwise_and(e, (1 << S) - 1, dtype=np.int64)
    e >>= S                                          # k = 2^S e + j
    p.fill(COEFFS[DEGREE])                           # Horner, from c_DEGREE down to c_0
    for c in COEFFS[DEGREE - 1::-1]:
        p *= r
        p += c
    p *= np.take(TABLE, j, out=t, mode="clip")        # 0 <= j < 2^S: clip never acts
    return np.ldexp(p, e, out=r)
