"""Reference on small heads: how much of the sandwich gap is search, how much the rules.

    python benchmarks/bench_reference.py [--length 16] [--heads 0-11] [--layers 0-5]
                                         [--multipliers 1/2,1,2,4] [--eps 3/20,1/4,7/20]

For MiniLM heads at a small length n (default 16) and every multiplier and eps:
* certkit's sandwich (`certkit.certify`, both ends kernel-VERIFIED);
* the exhaustive decoding bound: the largest M such that some M message rows pass the
  inverse-norm rule with the best decoder, over every message set.  For fixed messages S the
  best decoder is an LP (docs/mathematics.md §8.1): eps t*(S) < 1 with
  t*(S) = min { max_j ||X_j||_1 : A_S X = I } (best_decoder_lp, HiGHS).  t* only grows when rows are added, so
  the sets are enumerated level by level, each from a passing set and only when all its
  subsets one smaller pass (the search is exhaustive; a float LP decides, so this is a
  reference, not a certificate);
* a hard upper search: from certkit's factorisation, every smaller rank with long refinements
  and restarts (random and noisy-SVD starts); the smallest rank whose float error is <= eps.
Printed per configuration and in total: how often certkit's sandwich is tight; how often the
exhaustive lower or the hard upper moves an end (gap that is search); how often a gap remains
between the two references (gap that the decoding rule or the upper search cannot close).
"""
import argparse
import itertools
import os
import sys
import time
from fractions import Fraction

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from certkit.api import certify  # noqa: E402
from certkit.numbers import OverSqrt, parse_eps_list  # noqa: E402
from certkit.search import upper  # noqa: E402
from certkit.search.lower.soft import best_decoder_lp  # noqa: E402


def exhaustive_lower(A, eps, limit=200000):
    """(M, LPs): the largest passing message set size (levelwise, apriori pruning); M is None
    if more than `limit` LPs would be needed."""
    n = A.shape[0]
    level = [(i,) for i in range(n)] if eps < 1 else []
    best, lps = (1 if level else 0), 0
    while level:
        passing = set(level)
        nxt = []
        for S in level:
            for j in range(S[-1] + 1, n):
                T = S + (j,)
                if all(T[:k] + T[k + 1:] in passing for k in range(len(T) - 1)):
                    lps += 1
                    if lps > limit:
                        return None, lps
                    if eps * best_decoder_lp(A[list(T)])[0] < 1:
                        nxt.append(T)
        if nxt:
            best = len(nxt[0])
        level = nxt
    return best, lps


def hard_upper(A, eps, k0, C, G, restarts=6, iters=3000):
    """The smallest k <= k0 reached by long refinements from C G truncated and from restarts."""
    best = k0
    for k in range(k0 - 1, 0, -1):
        found = None
        for trial in range(restarts):
            if trial == 0:
                C0, G0 = upper.truncate(C, G, k)
            else:
                rng = np.random.default_rng(trial)
                Uf, s, Vt = np.linalg.svd(A + 0.02 * trial * rng.standard_normal(A.shape), full_matrices=False)
                C0, G0 = Uf[:, :k] * s[:k], Vt[:k]
            C1, G1 = upper.refine(A, C0, G0, eps=eps, iters=iters)
            if upper.factor_row_errors(A, C1, G1).max() <= eps:
                found = (C1, G1)
                break
            C2 = upper.row_rescue(A, C1, G1, eps)
            if C2 is not None:
                found = (C2, G1)
                break
        if found is None:
            break
        best, (C, G) = k, found
    return best


def spans(text):
    """'a-b' or 'a' -> [a, ..., b]."""
    a, _, b = text.partition("-")
    return list(range(int(a), int(b or a) + 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--length", type=int, default=16)
    ap.add_argument("--layers", default="0-5")
    ap.add_argument("--heads", default="0-11")
    ap.add_argument("--multipliers", default="1/2,1,2,4")
    ap.add_argument("--eps", default="3/20,1/4,7/20")
    args = ap.parse_args()
    from certkit.models import extract as ex
    eps_list = parse_eps_list(args.eps, "--eps")
    model, tok, info = ex.load("minilm")
    c = ex.capture(model, info, ex.token_window(tok, info["kind"], args.length))
    counts = dict.fromkeys(["configs", "tight", "lower moved", "upper moved", "gap remains", "lower unknown"], 0)
    t0 = time.perf_counter()
    for layer, head in itertools.product(spans(args.layers), spans(args.heads)):
        h0 = ex.head(c, layer, head)
        for m in args.multipliers.split(","):
            h = h0.replace(beta=OverSqrt(Fraction(m), Fraction(h0.d)))
            A = h.attention()
            for s in certify(h, eps=[str(e) for e in eps_list]):
                e = float(s.eps)
                lo, up = s.bounds
                counts["configs"] += 1
                if lo == up:
                    counts["tight"] += 1
                    continue
                ex_lo, lps = exhaustive_lower(A, e)
                judge = lambda U, V: float(np.abs(A - U @ V.T).sum(axis=1).max())
                r = upper.search(A, e, judge, floor=lo)
                hu = hard_upper(A, e, min(up, r["k"]), r["U"], r["V"].T) if r["k"] is not None else up
                counts["lower unknown"] += ex_lo is None
                counts["lower moved"] += ex_lo is not None and ex_lo > lo
                counts["upper moved"] += hu < up
                counts["gap remains"] += (ex_lo or lo) < hu
                print(f"l{layer} h{head} m{m} eps {e:.2f}: certkit {lo} <= r <= {up}; exhaustive decoding "
                      f"{ex_lo} ({lps} LPs), hard upper {hu}", flush=True)
    print(f"\nMiniLM n = {args.length}: {counts['configs']} configurations, {counts['tight']} tight as certified; "
          f"of the others: exhaustive decoding raises the lower bound in {counts['lower moved']}, the hard upper "
          f"search lowers the upper in {counts['upper moved']}, a gap remains between the two references in "
          f"{counts['gap remains']} (exhaustive search out of budget: {counts['lower unknown']}); "
          f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
