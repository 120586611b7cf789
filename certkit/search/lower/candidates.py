"""The decoding candidates of the lower search, best-first (docs/mathematics.md §8.1, Lemmas 8.1, 8.2).

r_eps(A) >= M when the contraction T_A of M messages and their decoder passes the margin test
(Lemma 8.1) or eps ||T_A^{-1}||_inf < 1 (Lemma 8.2).  The candidates: one message whose cell holds
every column (M = 1, margin 1 > eps); the peaked rows and prefixes of the farthest rows, pruned
(late_candidates, which the sandwich tries in its upper search's interlude: on heads with
N > 512 soft decoders on the sets the best pruning passed on the way, then the greedy growth
with shortlists where the bound to beat is at most GROWTH_MAX); on small heads the greedy growth, extended by
soft decoders and retried from other starts where it ends early; on causal and sliding-window
heads the staircase.  Float tests; the kernel decides each candidate.
"""
import numpy as np

from ..budget import tick
from .decoding import contraction, inverse_ok
from .growth import SHORTLIST, grow_inverse
from .messages import far_count, farthest_rows, peaked_rows
from .pruning import pruned
from .soft import soft_extend, soft_prune
from .staircase import THETAS, staircase


def decoding_candidates(A, eps, hi=None, growth=None, far=None, soft=True, records=None, pruning=None):
    """[(kind, M, messages, decoder)] best-first per kind (float tests; the kernel decides); the
    decoder is cells (an int vector) or, from soft_extend, an explicit N x M matrix (decoded).
    growth: see grow_inverse (shared by the calls for several eps on one A); far: the
    farthest-row traversal farthest_rows(A, far_count(n, N)) when the caller shares it; soft:
    extend the growth with soft decoders (soft_extend) and, where it ends at few messages, try
    other starts (other_starts; records: their growth records, shared across eps); False: the
    search before them, for benchmarks/bench_sandwich.py.  pruning: None or a dict (kept by the
    caller for this A) where the best pruning, (M, start, dropped), is recorded under float(eps),
    for late_candidates.

    Starts: the peaked rows and prefixes of the farthest rows, each at most CAP messages, so a
    start costs O(CAP N) to contract and O(CAP^3) to prune, whatever n."""
    n, N = A.shape
    out = one_message(A, eps)
    far = farthest_rows(A, far_count(n, N)) if far is None else far
    sizes = sorted({min(m, len(far)) for m in (hi, 2 * (hi or 0), min(n, N), 64) if m})
    starts = [peaked_rows(A)] + [far[:m] for m in sizes]
    best_prune = None                                  # (M, start, dropped) of the best inverse-norm set
    for msgs0 in starts:
        tick()
        dropped = []
        found, M = pruned(A, eps, msgs0, dropped)      # M: the inverse-norm set's size
        out += found
        if best_prune is None or M > best_prune[0]:
            best_prune = (M, msgs0, dropped)
    if pruning is not None and best_prune is not None:
        pruning[float(eps)] = best_prune
    if A.shape[1] <= 512 and max((c[1] for c in out), default=0) < min(n, N):
        growth = [] if growth is None else growth
        msgs, cells = grow_inverse(A, eps, growth=growth)
        if len(msgs) > 1:
            out.append(("lower-decoding-inverse-norm", len(msgs), msgs, cells))
        if soft and len(msgs) < min(n, N):
            msgs, G = soft_extend(A, eps, msgs, growth)
            if G is not None:
                out.append(("lower-decoding-inverse-norm", len(msgs), msgs, G))
        if soft and len(msgs) <= FEW:
            other = other_starts(A, eps, far[1:1 + STARTS], {} if records is None else records)
            if other is not None and other[1] > len(msgs):
                out.append(other)
    for theta in THETAS:
        stair = staircase(A, eps, theta)
        if stair is None:
            break
        msgs, cells = stair
        if len(msgs) > 1 and inverse_ok(contraction(A, msgs, cells), eps):
            out.append(("lower-decoding-inverse-norm", len(msgs), msgs, cells))
    out.sort(key=lambda c: -c[1])
    return out


LATE_STAGES = ("pruning", "growth")
GROWTH_MAX = 320   # no late growth above a lower bound this large (SmolLM2 l29-h3 at L = 1024: 244 s to grow 448 < 454)


def late_candidates(A, eps, pruning, growth=None, soft=True, stages=LATE_STAGES, above=0):
    """Yields (kind, M, messages, decoder) on heads with N > 512, where decoding_candidates runs no
    greedy growth, each found after the one before was yielded (a budget that stops the search
    keeps what its caller checked), stage by stage in the order given:
    "pruning": the soft decoders of the sets the best pruning passed on the way (soft_prune;
    pruning: the record decoding_candidates kept);
    "growth": the greedy growth from the most peaked row with shortlists (grow_inverse(limit=
    SHORTLIST)), then extended by soft decoders (soft_extend), where the lower bound to beat,
    above, is at most GROWTH_MAX (the growth's cost grows steeply with the size of the set it
    must pass); growth: the growth record, kept by the caller for this A
    (a growth cut by a budget resumes from it).
    The sandwich runs them in the upper search's interlude (after its first failed rank;
    docs/design.md, "Anytime certification"; under a budget the growth stage for at most a share
    of it): at L = 1024 on SmolLM2 they cost as much as the rest of the lower search or more
    (soft_prune 4-16 s, the growth 0.5-20 s, soft_extend 6-46 s), while the upper search's first
    seconds lower its end by factors (l3-h2: 351 -> 136 in 7.5 s)."""
    if not soft or A.shape[1] <= 512:
        return
    for stage in stages:
        if stage == "pruning":
            best = (pruning or {}).get(float(eps))
            if best is not None and best[0] > 1:
                found = soft_prune(A, eps, best[1], best[2], best[0])
                if found is not None:
                    yield ("lower-decoding-inverse-norm", len(found[0]), found[0], found[1])
        elif above <= GROWTH_MAX:
            growth = [] if growth is None else growth
            msgs, cells = grow_inverse(A, eps, max_local=0, growth=growth, limit=SHORTLIST)
            if len(msgs) > 1:
                yield ("lower-decoding-inverse-norm", len(msgs), msgs, cells)
            if len(msgs) < min(A.shape):
                more, G = soft_extend(A, eps, msgs, growth, limit=SHORTLIST)
                if G is not None:
                    yield ("lower-decoding-inverse-norm", len(more), more, G)


def one_message(A, eps):
    """[the candidate M = 1] for eps < 1 (else []): the most peaked row as the one message, one
    cell holding every column (its margin is 1 > eps)."""
    if eps >= 1:
        return []
    peaked = np.array([int(np.argmax(A.max(axis=1)))])
    return [("lower-decoding-margin", 1, peaked, np.zeros(A.shape[1], dtype=np.int64))]


FEW = 4        # a growth that ends at <= FEW messages is retried from other starts
STARTS = 4     # ... the next STARTS rows of the farthest-row traversal


def other_starts(A, eps, starts, records):
    """The best of the greedy growths (grow_inverse, then soft_extend) from each row in starts:
    (kind, M, messages, decoder).  On small heads the first row decides a lot: at n = 16, growth
    from every start reaches the exhaustive decoding bound in 23 of the 32 configurations where
    the default start falls short (benchmarks/bench_reference.py).  records: start -> growth
    record, kept by the caller across eps (the growths are eps-free, as in grow_inverse)."""
    best = None
    for s in starts:
        tick()
        rec = records.setdefault(int(s), [])
        msgs, dec = grow_inverse(A, eps, growth=rec, start=int(s))
        if len(msgs) < min(A.shape):
            more, G = soft_extend(A, eps, msgs, rec)
            if G is not None:
                msgs, dec = more, G
        if best is None or len(msgs) > best[1]:
            best = ("lower-decoding-inverse-norm", len(msgs), msgs, dec)
    return best
