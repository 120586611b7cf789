"""The certified sandwich  lower <= r_eps(A) <= upper  of one head at one eps: the engine that
certkit.certify, `certkit certify`, calibrate and scale share.

    r_eps(A) = min { rank B : max_i ||A_i - B_i||_1 <= eps }     (docs/mathematics.md §1)

The lower search (certkit.search.lower: decoding contractions, Frobenius tail; §8.1) runs first,
so that the upper search (certkit.search.upper: truncated SVD, LP row fits, joint l1 refinement)
can stop where it meets it; the late lower candidates (on heads with N > 512: soft decoders on the
best pruning's sets, the greedy growth with shortlists and its soft decoders; slow) wait for the
upper search's fast first steps (its interlude: after the first rank it fails to reach, under a
budget at LATE_AT of it at the latest, the growth then cut at INTERLUDE_SHARE of the budget and
resumed after the search).  Every candidate is written as a certificate and decided by the
kernel (certkit.search.writer.write_checked); only VERIFIED ones are kept, each with the one
Verdict the kernel gave it.  The peers (certkit.search.peers) report the smallest k at which
each practitioner's approximation has kernel-certified row-l1 error <= eps.

Anytime certification (budget=B seconds, certkit.search.budget): the engine holds a valid
sandwich from the start and replaces an end each time a better one is VERIFIED, in this order:
the one-message lower bound r >= 1 (with the trivial upper bound r <= min(n, N), which needs no
certificate: A itself has that rank); a fast lower bound (the pruning of the peaked rows, the
Frobenius tail of A); the truncated SVD's upper bound; then the full lower search and the full
upper search (each of its improvements), which pauses for the late lower candidates after its
first failed rank or once LATE_AT x B has passed, whichever comes first.  Once B seconds have
passed, the searches stop at their next safe point and the engine returns the best sandwich so
far, marked stopped_on_budget.  The candidates of the fast stage are candidates of the full lower
search too, and the full searches replace what the first stages found: a budget the searches do
not reach gives exactly the certificates of a run without one, unless (deepen, the default) the
time the searches and the peers leave goes to deeper descents of the upper search (ROUNDS of
upper.search's rounds from its best: refinements with 4, 16, 64 times the iterations), which only
lower the upper end and which the budget ends without marking the sandwich stopped.
"""
import dataclasses
import os
import tempfile
import time
from fractions import Fraction

import numpy as np

from ..certificate import Certificate, Sandwich
from ..kernel.numerics import max_row_error
from ..threads import limited
from . import upper, writer
from .basic import frobenius_bound
from .budget import Budget, BudgetSpent, active, step, tick
from .lower.candidates import LATE_STAGES, decoding_candidates, late_candidates, one_message
from .lower.decoding import SAFETY
from .lower.frobenius import FULL_SVD, frobenius_candidates
from .lower.messages import far_count, farthest_rows, peaked_rows
from .lower.pruning import pruned

LAYOUT = {"shared": True}    # content-named sidecars: a certificate's bytes do not depend on its file name
WORK_PREFIX = ".certkit-work-"   # the searches' temporary folder under a run's --out (sandwich's workdir)


def lower_candidates(A, e, shared, soft=True, late=True):
    """[(M, kind, witness)] of the full lower search at the float eps e: decoding contractions and
    Frobenius tails (shared: see certify_lower); late: with the late candidates (late_candidates),
    which the sandwich tries in its upper search's interlude instead (late_lower)."""
    n, N = A.shape
    if "far" not in shared:
        shared["far"] = farthest_rows(A, far_count(*A.shape))
    growth = shared.setdefault("growth", [])
    pruning, records = shared.setdefault("pruning", {}), shared.setdefault("records", {})
    cands = [decoding_witness(c) for c in decoding_candidates(A, e, growth=growth, far=shared["far"], soft=soft,
                                                              records=records, pruning=pruning)]
    tails = []
    for M, rows, cells in frobenius_candidates(A, e, far=shared["far"], svals=singular_values(A, shared)):
        wit = {}
        if rows is not None:
            wit["rows"] = (rows, "int")
        if cells is not None:
            wit["cells"] = (cells, "int")
        tails.append((M, "lower-frobenius-tail", wit))
    if late:                          # the bound to beat: the largest other candidate (GROWTH_MAX)
        above = max((c[0] for c in cands + tails), default=0)
        found = late_candidates(A, e, pruning, shared.setdefault("late_growth", []), soft, above=above)
        cands += [decoding_witness(c) for c in found]
    return cands + tails


def fast_lower_candidates(A, e, shared):
    """[(M, kind, witness)]: the first candidates of the full lower search, cheap to find (the
    pruning of the peaked rows; the Frobenius tail of A itself up to FULL_SVD entries), for
    the anytime sandwich before the full search."""
    n, N = A.shape
    cands = [decoding_witness(c) for c in pruned(A, e, peaked_rows(A))[0]]
    if n * N <= FULL_SVD:
        M = frobenius_bound(A, e, SAFETY, singular_values(A, shared))
        if M > 0:
            cands.append((M, "lower-frobenius-tail", {}))
    return cands


def singular_values(A, shared):
    """A's singular values (eps-free, kept in shared) where the Frobenius tail of A is tried, else None."""
    if A.shape[0] * A.shape[1] > FULL_SVD:
        return None
    if "svals" not in shared:
        with step("singular values"):
            shared["svals"] = np.linalg.svd(A, compute_uv=False)
    return shared["svals"]


def decoding_witness(candidate):
    """(M, kind, witness) of a decoding_candidates entry (kind, M, messages, decoder)."""
    kind, M, msgs, dec = candidate
    return (M, kind, {"messages": (msgs, "int"),
                      **({"decoder": (dec, "float")} if dec.ndim == 2 else {"cells": (dec, "int")})})


def first_verified(cands, eps, h, path, prov, layout=None):
    """The largest M among the candidates [(M, kind, witness)] whose certificate the kernel
    VERIFIES (tried best-first; equal M in the given order): {"bound", "kind", "file", "verdict",
    "tried"} or None."""
    tried = []
    for M, kind, wit in sorted(cands, key=lambda c: -c[0]):
        with step("check " + kind):
            v = writer.write_checked(path, kind, M, eps, h, wit, dict(prov, search=kind), **(layout or {}))
        tried.append({"kind": kind, "bound": M, "verdict": v.status})
        if v.status == "VERIFIED":
            return {"bound": M, "kind": kind, "file": path, "verdict": v, "tried": tried}
    return None


def certify_lower(A, eps, h, path, prov, layout=None, shared=None, soft=True, late=True):
    """Largest M with a kernel-VERIFIED certificate of  r_eps(A) >= M  among the candidates:
    {"bound", "kind", "file", "verdict" (the kernel's Verdict), "tried"} or None.
    A: h.attention(); shared: a dict kept by the caller across the eps of one A, holding the
    search's eps-free work (the farthest-row traversal, grow_inverse's growth, A's singular
    values, the best pruning per eps); soft: passed to decoding_candidates; late: with the late
    candidates (False: the sandwich's first lower search; late_lower during the upper search)."""
    shared = {} if shared is None else shared
    return first_verified(lower_candidates(A, float(eps), shared, soft, late), eps, h, path, prov, layout)


def late_lower(A, eps, h, path, prov, above, shared, keep=None, stages=LATE_STAGES):
    """The late lower candidates of the given stages (late_candidates: soft decoders on the best
    pruning's sets; the greedy growth with shortlists and soft decoders, from the records kept in
    shared) larger than the best so far (at first the bound `above`), each checked by the kernel
    as soon as it is found, in its own file (path with -k before .json); keep(res) is called with
    each VERIFIED one.  Returns certify_lower's dict for the largest VERIFIED one, or None."""
    best = None
    found = late_candidates(A, float(eps), shared.get("pruning"), shared.setdefault("late_growth", []),
                            stages=stages, above=above)
    for k, cand in enumerate(found):
        M, kind, wit = decoding_witness(cand)
        if M <= above:
            continue
        res = first_verified([(M, kind, wit)], eps, h, f"{os.path.splitext(path)[0]}-{k}.json", prov, LAYOUT)
        if res is not None:
            best, above = res, M
            if keep is not None:
                keep(res)
    return best


def once(fn):
    """fn, run at most once (the upper search's interlude, then the sandwich's own call after it)."""
    done = []

    def run():
        if not done:
            done.append(True)
            fn()
    return run


def judge_of(inst):
    """The upper search's judge: the kernel's certified max row error of U V^T (a step that cannot be cut)."""
    def judge(U, V):
        with step("judge"):
            return max_row_error(inst, U, V, "fast")[0]
    return judge


def upper_certificate(best, eps, h, path, prov, layout=None):
    """Write the upper search's best (k, U, V, method, ...) as a certificate: {"bound", "kind",
    "method", "file", "svd_rank", "certified_error", "verdict", "tried"}, or None unless VERIFIED."""
    wit = {"U": (best["U"], "float"), "V": (best["V"], "float")}
    with step("check upper-factorization", like="judge"):     # the check recomputes the judge's bound
        v = writer.write_checked(path, "upper-factorization", best["k"], eps, h, wit, dict(prov, search=best["method"]),
                                 **(layout or {}))
    if v.status != "VERIFIED":       # the judge and check agree by construction; never claim otherwise
        return None
    return {"bound": best["k"], "kind": "upper-factorization", "method": best["method"], "file": path,
            "svd_rank": best["svd_rank"], "certified_error": best["certified_error"], "verdict": v,
            "tried": best["tried"]}


def certify_upper(A, eps, h, inst, path, prov, floor=1, attempts=24, layout=None, **search_kw):
    """Smallest k with a kernel-VERIFIED factorisation certificate of  r_eps(A) <= k  found (A = U V^T
    within eps in every row): {"bound", "kind", "method", "file", "svd_rank", "certified_error",
    "verdict" (the kernel's Verdict), "tried"} or None.  search_kw: passed to upper.search (e.g.
    refine's early give-up points, a cache of A's SVD)."""
    r = upper.search(A, float(eps), judge_of(inst), floor=floor, attempts=attempts, **search_kw)
    if r["k"] is None:
        return None
    return upper_certificate(r, eps, h, path, prov, layout)


def trivial_lower(A, eps, h, path, prov, layout=None):
    """r_eps(A) >= 1 (eps < 1): the full lower search's one-message candidate, checked by the kernel."""
    return first_verified([decoding_witness(c) for c in one_message(A, float(eps))], eps, h, path, prov, layout)


@limited()
def sandwich(head, eps, peers=(), seed=0, attempts=24, A=None, inst=None, provenance=None, shared=None,
             progress=None, budget=None, workdir=None, deepen=True):
    """The certified Sandwich lower <= r_eps(A) <= upper of head at eps (both ends kernel-VERIFIED
    certificates held in memory, each checked once; None where the search found none), with the
    peers' smallest k.  A, inst: head.attention() and head.instance() when the caller shares them
    between eps.  provenance: extra string/integer fields for the certificates' provenance (a model
    head's model, layer, head, ...); shared: a dict kept by the caller across the eps of one head
    (the searches' eps-free work: see certify_lower, and A's SVD for the upper search); progress:
    None or a callable taking a short text at each stage (a terminal's status line: certkit certify
    passes one when stderr is a terminal; never part of a certificate).

    budget: None, or seconds (>= 0) for this head at this eps, the peers included: the anytime
    sandwich of the module docstring; Sandwich.stopped_on_budget says whether the budget ended the
    searches (then the peers not finished have k None and the note "stopped on the budget").
    deepen: with a budget, the time the searches and the peers leave goes to deeper descents of
    the upper search (ROUNDS of upper.search's rounds, from its best; method "deepened"), which
    the budget ends without marking the sandwich stopped; False: the searches of a run without a
    budget only (a budget they do not reach then gives that run's certificates byte for byte).

    workdir: None, or an existing folder to hold the searches' temporary certificates (a WORK_PREFIX
    folder, removed when the sandwich is done); certkit certify passes its --out, so that a run
    killed with kill -9 leaves nothing outside the folder the user chose (remove_stale_work clears
    what such a run left).  None: the system's temporary folder."""
    t0 = time.perf_counter()
    clock = None if budget is None else Budget(budget)       # starts now
    inst = head.instance() if inst is None else inst      # first: a head no certificate states is a HeadError
    A = head.attention() if A is None else A
    prov = {"producer": "certkit certify", "head": head.name, "n": head.n, "N": head.N, "d": head.d}
    prov.update({k: v for k, v in (provenance or {}).items()
                 if isinstance(v, (str, int)) and not isinstance(v, bool) and k not in prov})
    shared = {} if shared is None else shared
    say = progress or (lambda text: None)
    with tempfile.TemporaryDirectory(prefix=WORK_PREFIX if workdir else "certkit-", dir=workdir) as tmp:
        paths = {side: os.path.join(tmp, f"{side}.json") for side in ("lower", "upper", "late", "pruning", "growth")}
        if clock is None:
            say("lower search")
            lo = certify_lower(A, eps, head, paths["lower"], prov, LAYOUT, shared, late=False)
            say(f"lower >= {lo['bound'] if lo else '-'}; upper search")
            found = {}
            above = lo["bound"] if lo else 0

            def late_search():
                say("late lower search")
                found.update(late=late_lower(A, eps, head, paths["late"], prov, above, shared))
            late = once(late_search)
            up = certify_upper(A, eps, head, inst, paths["upper"], prov, floor=lo["bound"] if lo else 1,
                               attempts=attempts, layout=LAYOUT, progress=progress,
                               cache=shared.setdefault("upper", {}), interlude=lambda failed: failed and late())
            late()
            lo = found["late"] or lo
            lower_c = Certificate.read(lo["file"], search=lo, verdict=lo["verdict"]) if lo else None
            upper_c = Certificate.read(up["file"], search=up, verdict=up["verdict"]) if up else None
            stopped = False
        else:
            lower_c, upper_c, stopped, deeper = anytime(head, eps, A, inst, paths, prov, shared, attempts, clock, say)
        seconds = time.perf_counter() - t0
        found = {}
        if peers:
            up_text = upper_c.bound if upper_c else min(head.n, head.N) if clock is not None else "-"
            say(f"{lower_c.bound if lower_c else '-'} <= r <= {up_text}; peers")
        cut = stopped
        with active(clock):
            for p in peers:
                found[p] = peer(p, A, head, inst, eps, seed, shared.get("upper", {}), cut)
                cut = cut or found[p].get("note") == STOPPED
        if clock is not None and deepen and not cut:
            t1 = time.perf_counter()
            upper_c = deeper()
            seconds += time.perf_counter() - t1
    return Sandwich(head, Fraction(eps), lower_c, upper_c, found, round(seconds, 3),
                    budget=None if clock is None else clock.seconds, stopped_on_budget=stopped)


STOPPED = "stopped on the budget"
LATE_AT = 0.6      # a budgeted upper search pauses for the late lower candidates once this share of the budget is spent
INTERLUDE_SHARE = 0.2    # ... for at most this share of the budget; what the pause did not reach runs after the descent
ROUNDS = 3         # the deeper descents of the time a budget leaves (upper.search's rounds: 4, 16, 64 times the iterations)


def remove_stale_work(folder):
    """Remove the WORK_PREFIX folders a run killed with kill -9 left in its --out folder.  Only while
    the folder's lock is held (certkit.outputs.FolderLock): no other run is writing there then."""
    import shutil
    try:
        names = [f for f in os.listdir(folder) if f.startswith(WORK_PREFIX)]
    except OSError:
        return
    for f in names:
        path = os.path.join(folder, f)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)


def peer(name, A, head, inst, eps, seed, cache, cut):
    """The peer's row {"k", "certified_error", "seconds"(, "note")}: its smallest certified k
    (peers.smallest_rank; the SVD peer reuses A's SVD from the upper search's cache), with the note
    STOPPED if the active budget ended it or had already ended (cut)."""
    from . import peers as peer_mod
    t = time.perf_counter()
    if cut:
        return {"k": None, "certified_error": None, "seconds": 0.0, "note": STOPPED}
    try:
        tick()
        res = peer_mod.smallest_rank(name, A, head, inst, float(eps), seed=seed,
                                     prep=cache.get("svd") if name == "svd" else None)
    except ValueError as e:                 # the peer does not apply to this head
        return {"k": None, "certified_error": None, "seconds": 0.0, "note": str(e)}
    except BudgetSpent:
        return {"k": None, "certified_error": None, "seconds": round(time.perf_counter() - t, 3), "note": STOPPED}
    return {"k": res["k"], "certified_error": res["certified_error"], "seconds": round(res["seconds"], 3)}


def anytime(head, eps, A, inst, paths, prov, shared, attempts, clock, say):
    """The budgeted searches (the module docstring): (lower Certificate, upper Certificate or None,
    stopped_on_budget).  Every end kept was VERIFIED by the kernel and read into memory before the
    next safe point, so a stop anywhere leaves the best sandwich so far."""
    best = {"lower": None, "upper": None}

    def keep(side, res):
        best[side] = Certificate.read(res["file"], search=res, verdict=res["verdict"])
        lo, up = best["lower"], best["upper"]
        say(f"{lo.bound if lo else '-'} <= r <= {up.bound if up else min(head.n, head.N)} "
            f"({side}: {res.get('method') or res['kind']})")

    def upper_improved(b):            # each new best of the upper search, written when it improves the kept one
        cur = best["upper"]
        if cur is not None and (b["k"] > cur.bound or (b["k"], b["method"]) == (cur.bound, cur.search["method"])):
            return
        res = upper_certificate(b, eps, head, paths["upper"], prov, LAYOUT)
        if res is not None:
            keep("upper", res)

    cache = shared.setdefault("upper", {})
    judge = judge_of(inst)
    lo = trivial_lower(A, eps, head, paths["lower"], prov, LAYOUT)        # whatever the budget
    if lo is not None:
        keep("lower", lo)
    try:
        with active(clock):
            tick()
            say("fast lower")
            fast = first_verified(fast_lower_candidates(A, float(eps), shared), eps, head, paths["lower"], prov, LAYOUT)
            if fast is not None and (best["lower"] is None or fast["bound"] > best["lower"].bound):
                keep("lower", fast)
            say("SVD upper")
            upper.search(A, float(eps), judge, svd_only=True, cache=cache, improved=upper_improved)
            say("lower search")
            lo = certify_lower(A, eps, head, paths["lower"], prov, LAYOUT, shared, late=False)
            if lo is not None:                 # the full search's answer, as without a budget
                keep("lower", lo)
            say(f"lower >= {lo['bound'] if lo else '-'}; upper search")

            def late_keep(stage):
                above = best["lower"].bound if best["lower"] else 0
                late_lower(A, eps, head, paths[stage], prov, above, shared, keep=lambda res: keep("lower", res),
                           stages=(stage,))

            def interlude_search():          # the pruning's soft decoders, then the growth for INTERLUDE_SHARE of the budget
                say("late lower search (interlude)")
                late_keep("pruning")
                try:
                    with active(clock.part(INTERLUDE_SHARE)):
                        late_keep("growth")
                except BudgetSpent:          # the share is spent: the descent goes on, unless the budget is
                    if clock.spent():
                        raise

            def after_descent():             # the growth, resumed from its record
                say("late lower search")
                late_keep("growth")
            first, rest = once(interlude_search), once(after_descent)
            r = upper.search(A, float(eps), judge, floor=lo["bound"] if lo else 1, attempts=attempts,
                             improved=upper_improved, cache=cache,
                             interlude=lambda failed: (failed or clock.share_spent(LATE_AT)) and first())
            if r["k"] is not None and best["upper"] is not None and best["upper"].bound == r["k"]:
                best["upper"] = dataclasses.replace(best["upper"], search=dict(best["upper"].search, tried=r["tried"]))
            first()
            rest()
    except BudgetSpent:
        return best["lower"], best["upper"], True, None

    def deeper():                    # the time left: deeper descents from the search's best, until the budget ends
        if r["k"] is not None and (best["lower"] is None or r["k"] > best["lower"].bound):
            say("deeper upper search")
            try:
                with active(clock):
                    upper.search(A, float(eps), judge, floor=best["lower"].bound if best["lower"] else 1,
                                 attempts=attempts, improved=upper_improved, cache=cache, start=r, rounds=ROUNDS)
            except BudgetSpent:
                pass
        return best["upper"]
    return best["lower"], best["upper"], False, deeper
