"""The certified sandwich  lower <= r_eps(A) <= upper  of one head at one eps: the engine that
certkit.certify, `certkit certify`, calibrate and scale share.

    r_eps(A) = min { rank B : max_i ||A_i - B_i||_1 <= eps }     (docs/mathematics.md §1)

The lower search (certkit.search.lower: decoding contractions, Frobenius tail; §8.1) runs first,
so that the upper search (certkit.search.upper: truncated SVD, LP row fits, joint l1 refinement)
can stop where it meets it.  Every candidate is written as a certificate and decided by the
kernel (certkit.search.writer.write_checked); only VERIFIED ones are kept, each with the one
Verdict the kernel gave it.  The peers (certkit.search.peers) report the smallest k at which
each practitioner's approximation has kernel-certified row-l1 error <= eps.
"""
import os
import tempfile
import time
from fractions import Fraction

from ..certificate import Certificate, Sandwich
from ..kernel.numerics import max_row_error
from ..threads import limited
from . import lower, upper, writer

LAYOUT = {"shared": True}    # content-named sidecars: a certificate's bytes do not depend on its file name


def certify_lower(A, eps, h, path, prov, layout=None, shared=None, soft=True):
    """Largest M with a kernel-VERIFIED certificate of  r_eps(A) >= M  among the candidates:
    {"bound", "kind", "file", "verdict" (the kernel's Verdict), "tried"} or None.
    A: h.attention(); shared: a dict kept by the caller across the eps of one A, holding the
    search's eps-free work (the farthest-row traversal, lower.grow_inverse's growth); soft:
    passed to lower.decoding_candidates."""
    e = float(eps)
    shared = {} if shared is None else shared
    if "far" not in shared:
        shared["far"] = lower.farthest_rows(A, lower.far_count(*A.shape))
    growth = shared.setdefault("growth", [])
    cands = [(M, kind, {"messages": (msgs, "int"),
                        **({"decoder": (dec, "float")} if dec.ndim == 2 else {"cells": (dec, "int")})})
             for kind, M, msgs, dec in lower.decoding_candidates(A, e, growth=growth, far=shared["far"], soft=soft,
                                                                records=shared.setdefault("records", {}))]
    for M, rows, cells in lower.frobenius_candidates(A, e, far=shared["far"]):
        wit = {}
        if rows is not None:
            wit["rows"] = (rows, "int")
        if cells is not None:
            wit["cells"] = (cells, "int")
        cands.append((M, "lower-frobenius-tail", wit))
    cands.sort(key=lambda c: -c[0])
    tried = []
    for M, kind, wit in cands:
        v = writer.write_checked(path, kind, M, eps, h, wit, dict(prov, search=kind), **(layout or {}))
        tried.append({"kind": kind, "bound": M, "verdict": v.status})
        if v.status == "VERIFIED":
            return {"bound": M, "kind": kind, "file": path, "verdict": v, "tried": tried}
    return None


def certify_upper(A, eps, h, inst, path, prov, floor=1, attempts=24, layout=None, **search_kw):
    """Smallest k with a kernel-VERIFIED factorisation certificate of  r_eps(A) <= k  found (A = U V^T
    within eps in every row): {"bound", "kind", "method", "file", "svd_rank", "certified_error",
    "verdict" (the kernel's Verdict), "tried"} or None.  search_kw: passed to upper.search (e.g.
    refine's early give-up points)."""
    judge = lambda U, V: max_row_error(inst, U, V, "fast")[0]
    r = upper.search(A, float(eps), judge, floor=floor, attempts=attempts, **search_kw)
    if r["k"] is None:
        return None
    wit = {"U": (r["U"], "float"), "V": (r["V"], "float")}
    v = writer.write_checked(path, "upper-factorization", r["k"], eps, h, wit, dict(prov, search=r["method"]),
                             **(layout or {}))
    if v.status != "VERIFIED":       # the judge and check agree by construction; never claim otherwise
        return None
    return {"bound": r["k"], "kind": "upper-factorization", "method": r["method"], "file": path,
            "svd_rank": r["svd_rank"], "certified_error": r["certified_error"], "verdict": v,
            "tried": r["tried"]}


@limited()
def sandwich(head, eps, peers=(), seed=0, attempts=24, A=None, inst=None, provenance=None, shared=None,
             progress=None):
    """The certified Sandwich lower <= r_eps(A) <= upper of head at eps (both ends kernel-VERIFIED
    certificates held in memory, each checked once; None where the search found none), with the
    peers' smallest k.  A, inst: head.attention() and head.instance() when the caller shares them
    between eps.  provenance: extra string/integer fields for the certificates' provenance (a model
    head's model, layer, head, ...); shared: see certify_lower; progress: None or a callable taking
    a short text at each stage (a terminal's status line: certkit certify passes one when stderr is
    a terminal; never part of a certificate)."""
    t0 = time.perf_counter()
    inst = head.instance() if inst is None else inst      # first: a head no certificate states is a HeadError
    A = head.attention() if A is None else A
    prov = {"producer": "certkit certify", "head": head.name, "n": head.n, "N": head.N, "d": head.d}
    prov.update({k: v for k, v in (provenance or {}).items()
                 if isinstance(v, (str, int)) and not isinstance(v, bool) and k not in prov})
    with tempfile.TemporaryDirectory(prefix="certkit-") as tmp:
        say = progress or (lambda text: None)
        say("lower search")
        lo = certify_lower(A, eps, head, os.path.join(tmp, "lower.json"), prov, LAYOUT, shared)
        say(f"lower >= {lo['bound'] if lo else '-'}; upper search")
        up = certify_upper(A, eps, head, inst, os.path.join(tmp, "upper.json"), prov,
                           floor=lo["bound"] if lo else 1, attempts=attempts, layout=LAYOUT, progress=progress)
        lower_c = Certificate.read(lo["file"], search=lo, verdict=lo["verdict"]) if lo else None
        upper_c = Certificate.read(up["file"], search=up, verdict=up["verdict"]) if up else None
    seconds = time.perf_counter() - t0
    found = {}
    if peers:
        say(f"{lo['bound'] if lo else '-'} <= r <= {up['bound'] if up else '-'}; peers")
    for p in peers:
        from . import peers as peer_mod
        try:
            res = peer_mod.smallest_rank(p, A, head, inst, float(eps), seed=seed)
        except ValueError as e:                 # the peer does not apply to this head
            found[p] = {"k": None, "certified_error": None, "seconds": 0.0, "note": str(e)}
            continue
        found[p] = {"k": res["k"], "certified_error": res["certified_error"], "seconds": round(res["seconds"], 3)}
    return Sandwich(head, Fraction(eps), lower_c, upper_c, found, round(seconds, 3))
