"""Benchmark: sandwich widths (upper / lower) and time, today's searches against the previous ones
(issue: tighter sandwiches), side by side in one run.

    python benchmarks/bench_sandwich.py [--length 128] [--sample 12] [--multipliers 1/2,1,2]
                                        [--eps 3/20,1/4,7/20] [--heads data/heads/*]

For a sample of MiniLM heads (spread over layers) at one length, and for the committed synthetic
heads, every (head, multiplier) is certified at every eps twice, in alternating order:
"before" = the lower search without soft decoders (lower.decoding_candidates(soft=False)) and
the upper refinement with its former p = 16; "after" = today's defaults (soft decoders, p = 64).
The upper search runs from each lower bound (its floor) with calibrate's settings, as
`certkit calibrate` does.  Every bound is a kernel-VERIFIED certificate.  Printed per side: the
median and max of upper / lower, how many are tight (upper = lower), the median lower, the
median seconds per configuration (lower + upper), and the after / before ratios.
"""
import argparse
import glob
import os
import statistics
import sys
import tempfile
import time
from fractions import Fraction

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from certkit.calibration.grid import UPPER_SEARCH  # noqa: E402
from certkit.search.sandwich import certify_lower, certify_upper  # noqa: E402
from certkit.head import Head  # noqa: E402
from certkit.numbers import OverSqrt, parse_eps_list  # noqa: E402


def one(h, eps_list, out, soft):
    """[(lower, upper, seconds)] per eps for one head, both certificates VERIFIED; the lower
    search's eps-free work is shared between the eps, as in `certkit calibrate`."""
    A = h.attention()
    shared, got = {}, []
    for eps in eps_list:
        t = time.perf_counter()
        lo = certify_lower(A, eps, h, os.path.join(out, "lower.json"), {}, shared=shared, soft=soft)
        up = certify_upper(A, eps, h, h.instance(), os.path.join(out, "upper.json"), {},
                           floor=lo["bound"] if lo else 1, **UPPER_SEARCH, **({} if soft else {"p": 16}))
        got.append((lo["bound"], up["bound"], time.perf_counter() - t))
    return got


def summary(name, res):
    ratios = [u / l for l, u, _ in res]
    tight = sum(u == l for l, u, _ in res)
    return (f"{name:>7}: median upper/lower {statistics.median(ratios):.3f}, max {max(ratios):.2f}, "
            f"tight {tight}/{len(res)}, median lower {statistics.median(l for l, _, _ in res)}, "
            f"median {statistics.median(s for _, _, s in res):.3f} s per configuration")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--length", type=int, default=128)
    ap.add_argument("--sample", type=int, default=12, help="MiniLM heads (0: none)")
    ap.add_argument("--multipliers", default="1/2,1,2")
    ap.add_argument("--eps", default="3/20,1/4,7/20")
    here = os.path.join(os.path.dirname(__file__), "..", "data", "heads")
    ap.add_argument("--heads", nargs="*", default=sorted(glob.glob(os.path.join(here, "*"))))
    args = ap.parse_args()
    eps_list = parse_eps_list(args.eps, "--eps")
    out = tempfile.mkdtemp(prefix="bench-sandwich-")
    heads = []
    if args.sample:
        from certkit.models import extract as ex
        model, tok, info = ex.load("minilm")
        c = ex.capture(model, info, ex.token_window(tok, info["kind"], args.length))
        for i in range(args.sample):
            h = ex.head(c, i % info["layers"], (5 * i + 3) % info["heads"])
            for m in args.multipliers.split(","):
                heads.append((f"minilm L{args.length} l{i % info['layers']} h{(5 * i + 3) % info['heads']} m{m}",
                              h.replace(beta=OverSqrt(Fraction(m), Fraction(h.d))), "minilm"))
    for path in args.heads:
        h = Head.from_file(path)
        heads.append((h.name, h, "synthetic"))
    res = {"before": {}, "after": {}}
    for k, (name, h, group) in enumerate(heads):
        sides = ("before", "after") if k % 2 == 0 else ("after", "before")
        got = {s: one(h, eps_list, out, s == "after") for s in sides}
        for s in sides:
            res[s].setdefault(group, []).extend(got[s])
        for eps, b, a in zip(eps_list, got["before"], got["after"]):
            mark = "  <-" if a[0] != b[0] or a[1] != b[1] else ""
            print(f"{name:<32} eps {str(eps):>5}: before {b[0]:>3} <= r <= {b[1]:>3} ({b[2]:.2f} s)   "
                  f"after {a[0]:>3} <= r <= {a[1]:>3} ({a[2]:.2f} s){mark}", flush=True)
    for group in res["before"]:
        print(f"\n{group}: {len(res['before'][group])} configurations")
        for s in ("before", "after"):
            print(summary(s, res[s][group]))
        tb = statistics.median(x[2] for x in res["before"][group])
        ta = statistics.median(x[2] for x in res["after"][group])
        rb = statistics.median(u / l for l, u, _ in res["before"][group])
        ra = statistics.median(u / l for l, u, _ in res["after"][group])
        print(f"  after / before: median upper/lower {ra / rb:.3f}, median time {ta / tb:.2f}x")


if __name__ == "__main__":
    main()
