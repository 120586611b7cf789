"""Untrusted producer of upper-chain witnesses (docs/mathematics.md §5–§7; the kernel rule is
certkit/kernel/rule_chain.py, proofs/chain-rule.md).

For a head and r, the witness is the SVD-bridge subspace W_r = span{v_1..v_r} of the centred
visible key matrix Z (docs/mathematics.md §6.1), near-Chebyshev centres c, e of the r-dimensional queries and
keys, and (blocks = 2) the block E_1 = U ⊖ W_r with its query centre; the complement
U^perp gets the Chebyshev centre c' of the projected queries.  Any values are *valid* (the
kernel recomputes every radius from the instance); good ones make the chain bound small.
The witness does not depend on beta: only the kernel's chain (and so R_sym) does.
"""
import numpy as np

from .. import geometry
from ..kernel.numerics import chain, chain_geometry, chain_witness as read_witness
from ..numbers import numeral, parse_eps


def kept_keys(head):
    """The keys of the columns the head keeps (weight > 0; all of them without weights)."""
    return head.keys if head.weights is None else head.keys[head.weights > 0]


def chain_witness(head, r=0, blocks=2, geo=None):
    """Witness arrays {field: ndarray} for the upper-chain rule at dimension r for a certkit.Head.
    geo: geometry.profile_geometry(head.queries, head.keys, head.weights), whose centres are
    reused (blocks = 2 and r <= r_num)."""
    Q, K = head.queries, kept_keys(head)
    if geo is not None and blocks == 2 and r < len(geo.per_r):
        f, Qt, Kt, x = geo.frame, geo.Qt, geo.Kt, geo.per_r[r]
        centre = lambda X, key: x[key]
        complement = geo.c2
    else:
        f = geometry.frame(Q, K)
        Qt, Kt = Q @ f["Omega"], K @ f["Omega"]
        centre = lambda X, key: geometry.chebyshev_centre(X)[0]
        complement = None
    m, d = f["m"], f["d"]
    r = int(min(r, m))
    Om = f["Omega"]
    out = {}
    if r:
        out["basis"] = np.ascontiguousarray(Om[:, :r])
        out["query_centre"] = centre(Qt[:, :r], "cQ")
        out["key_centre"] = centre(Kt[:, :r], "cK")
    split = m if blocks == 2 else r
    if blocks == 2 and m > r:
        out["residual_basis"] = np.ascontiguousarray(Om[:, r:m])
        out["residual_query_centre"] = centre(Qt[:, r:m], "c1")
    if split < d:
        if np.all(Q == Q[0]):
            out["complement_query_centre"] = Q[0].copy()    # key-only: residual exactly 0
        else:
            c = complement if complement is not None else geometry.chebyshev_centre(Qt[:, split:])[0]
            out["complement_query_centre"] = Om[:, split:] @ c
    return {k: np.asarray(v, dtype=np.float64) for k, v in out.items()}


def witness_json(arrays):
    """The witness object with inline exact numerals (as the kernel reads it)."""
    def nest(a):
        return [nest(x) for x in a] if a.ndim > 1 else [numeral(v) for v in a.tolist()]
    return {k: nest(np.asarray(v)) for k, v in arrays.items()}


def best_chain(head, eps, rs=None, blocks=2, geo=None, cache=None, inst=None):
    """(R_sym, r, arrays, enclosures) minimising the kernel's certified R_sym over r in rs
    (default 0..r_num) for a certkit.Head, or None when no r has tau < eps (exact, as
    certkit.numbers reads it: 0.15 means 3/20, the eps a certificate states).  inst: head.instance()
    when the caller has it (the kernel decides).  geo: see chain_witness.  cache: a dict kept by
    the caller across eps for the same head; it holds, per r, the witness and the kernel's
    eps-independent geometry, so only the chain is redone."""
    eps = parse_eps(eps)
    inst = head.instance() if inst is None else inst
    if rs is None:
        rs = range(geometry.frame(head.queries, kept_keys(head))["r_num"] + 1)
    cache = {} if cache is None else cache
    best = None
    for r in rs:
        if r not in cache:
            arrays = chain_witness(head, r, blocks, geo)
            cache[r] = (arrays, chain_geometry(inst, *read_witness(witness_json(arrays), head.d, ".")))
        arrays, g0 = cache[r]
        g = dict(g0)
        out, R, how = chain(g, eps, inst.n)
        g.update(out, R_sym=R, decided=how)         # as the kernel's chain_enclosures
        if R is not None and (best is None or R < best[0]):
            best = (R, int(g["r"]), arrays, g)
    return best
