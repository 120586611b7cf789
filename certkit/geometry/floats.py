"""The float helpers the geometry modules share: Frobenius norms, log weights, beta as a float.

||A||_F in floats (fro) and an upper bound of it (fro_up: the kernel's sum_up of the squares, then
inflate), log w_j for the head's column weights (-inf on a dropped key), a float near beta, and
BLOCK, the entries per block of the blocked n x N computations.  Untrusted, like the rest of
certkit.geometry: the rigorous bounds that use fro_up say so where they do.
"""
import numpy as np

from ..kernel.numerics import inflate, sum_up
from ..numbers import parse_beta

BLOCK = 1 << 22            # entries per block in blocked n x N computations


def fro_up(A):
    """An upper bound of the Frobenius norm of the float array A (as the kernel's fro_up)."""
    A = np.asarray(A, dtype=np.float64)
    if A.size == 0:
        return 0.0
    return inflate(float(np.sqrt(sum_up(A * A))), 2)


def fro(A):
    """||A||_F in floats (0 for an empty array)."""
    return float(np.linalg.norm(A)) if A.size else 0.0


def as_float(beta):
    """A float near beta (any exact form of certkit.numbers.parse_beta, or a float)."""
    return float(parse_beta(beta))


def log_weights(weights, N):
    """log w_j of the N column weights (0 for None, -inf on a zero weight)."""
    if weights is None:
        return np.zeros(N)
    w = np.asarray(weights, dtype=np.float64)
    if w.shape != (N,) or np.any(w < 0) or not np.all(np.isfinite(w)):
        raise ValueError("weights must be a finite non-negative vector of length N")
    with np.errstate(divide="ignore"):
        return np.log(w)
