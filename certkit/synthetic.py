"""Deterministic synthetic heads (untrusted inputs for certificates, tests and benchmarks).

Entries are rounded to multiples of 2^-30 so that the hex numerals stay short; the head is then
exactly what the certificate states.
"""
from fractions import Fraction

import numpy as np

from .errors import UserError
from .head import Head

SYNTHETIC_FAMILIES = ("gaussian", "clustered", "near-permutation", "key-only")


def _round(a):
    return np.round(np.asarray(a, dtype=np.float64) * 2.0 ** 30) / 2.0 ** 30


def head(family, n, d, beta=Fraction(1), N=None, seed=0, name=None):
    """The synthetic Head of a family (gaussian, clustered, near-permutation, key-only); beta exact
    (certkit.numbers.parse_beta), provenance {"family", "seed"}; name defaults to <family>-n<n>-d<d>."""
    rng = np.random.default_rng(seed)
    N = n if N is None else N
    if family == "gaussian":
        Q, K = rng.standard_normal((n, d)), rng.standard_normal((N, d))
        Q /= np.sqrt(d)
        K /= np.sqrt(d)
    elif family == "clustered":
        c = rng.standard_normal((4, d))
        c /= np.linalg.norm(c, axis=1, keepdims=True)
        Q = c[rng.integers(0, 4, n)] + 0.2 * rng.standard_normal((n, d)) / np.sqrt(d)
        K = c[rng.integers(0, 4, N)] + 0.2 * rng.standard_normal((N, d)) / np.sqrt(d)
    elif family == "near-permutation":
        X = rng.standard_normal((max(n, N), d))
        X /= np.linalg.norm(X, axis=1, keepdims=True)
        Q, K = X[:n].copy(), X[:N].copy()
    elif family == "key-only":
        q = rng.standard_normal(d)
        Q = np.tile(q, (n, 1))
        K = rng.standard_normal((N, d))
    else:
        raise UserError(f"unknown family {family!r}; choose from {', '.join(SYNTHETIC_FAMILIES)}")
    return Head(_round(Q), _round(K), beta, name=name or f"{family}-n{n}-d{d}",
                provenance={"family": family, "seed": seed})
