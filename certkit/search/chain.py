"""Untrusted producer of upper-chain witnesses (SPEC §5–§7; the kernel rule is
certkit/kernel/rule_chain.py, proofs/chain-rule.md).

For a head and r, the witness is the SVD-bridge subspace W_r = span{v_1..v_r} of the centred
visible key matrix Z (SPEC §6.1), near-Chebyshev centres c, e of the r-dimensional queries and
keys, and (blocks = 2) the block E_1 = U ⊖ W_r with its query centre; the complement
U^perp gets the Chebyshev centre c' of the projected queries.  Any values are *valid* (the
kernel recomputes every radius from the instance); good ones make the chain bound small.
"""
from fractions import Fraction

import numpy as np

from .. import geometry
from .writer import numeral


def chain_witness(Q, K, beta, weights=None, r=0, blocks=2):
    """Witness arrays {field: ndarray} for the upper-chain rule at dimension r (beta: float)."""
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    if weights is not None:
        K = K[np.asarray(weights) > 0]
    f = geometry._frame(Q, K)
    m, d = f["m"], f["d"]
    r = int(min(r, m))
    Om = f["Omega"]
    Qt, Kt = Q @ Om, K @ Om
    out = {}
    if r:
        out["basis"] = np.ascontiguousarray(Om[:, :r])
        out["query_centre"] = geometry.chebyshev_centre(Qt[:, :r])[0]
        out["key_centre"] = geometry.chebyshev_centre(Kt[:, :r])[0]
    split = m if blocks == 2 else r
    if blocks == 2 and m > r:
        out["residual_basis"] = np.ascontiguousarray(Om[:, r:m])
        out["residual_query_centre"] = geometry.chebyshev_centre(Qt[:, r:m])[0]
    if split < d:
        if np.all(Q == Q[0]):
            out["complement_query_centre"] = Q[0].copy()    # key-only: residual exactly 0
        else:
            c = geometry.chebyshev_centre(Qt[:, split:])[0]
            out["complement_query_centre"] = Om[:, split:] @ c
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def witness_json(arrays):
    """The witness object with inline exact numerals (as the kernel reads it)."""
    def nest(a):
        return [nest(x) for x in a] if a.ndim > 1 else [numeral(v) for v in a.tolist()]
    return {k: nest(np.asarray(v)) for k, v in arrays.items()}


def best_chain(inst, Q, K, beta, eps, weights=None, rs=None, blocks=2):
    """(R_sym, r, arrays, enclosures) minimising the kernel's certified R_sym over r in rs
    (default 0..r_num).  inst: the kernel Instance of the head (the kernel decides)."""
    from ..kernel.rule_chain import enclosures
    if rs is None:
        Kk = K if weights is None else np.asarray(K)[np.asarray(weights) > 0]
        rs = range(geometry._frame(np.asarray(Q, float), np.asarray(Kk, float))["r_num"] + 1)
    best = None
    for r in rs:
        arrays = chain_witness(Q, K, beta, weights, r, blocks)
        enc = enclosures(inst, Fraction(eps), witness_json(arrays), ".")
        R = enc["R_sym"]
        if R is not None and (best is None or R < best[0]):
            best = (R, int(enc["r"]), arrays, enc)
    return best
