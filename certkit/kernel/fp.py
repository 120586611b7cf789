"""The binary64 model of the fast route (proofs/fp-rounding.md) and exact scalar helpers.

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
