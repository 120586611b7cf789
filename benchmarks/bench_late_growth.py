"""Benchmark: the late growth's lower bounds on every SmolLM2 head at L = 1024, against the lower search before it.

    .venv/bin/python benchmarks/bench_late_growth.py --shard 0/2 --jsonl part0.jsonl [--cache FILE.npz] [--length 1024]
    .venv/bin/python benchmarks/bench_late_growth.py --table part0.jsonl part1.jsonl [--out benchmarks/results/late_growth.md]

Per head (built-in text, window 0, eps = 1/4, one BLAS thread): the lower search the sandwich runs
first (certify_lower(late=False): prunings, staircases, Frobenius tails), then the late growth the
budgeted sandwich runs first in its upper search's interlude (the first of late_candidates: the
greedy growth with shortlists, grow_inverse(limit=SHORTLIST), without the soft decoders after it);
both kernel-VERIFIED certificates, each with its seconds.  Heads are split into shards (--shard k/m: the heads i with i % m == k) so
that m processes share the cores; --table merges the shards.  The table sets both lower bounds
against the upper bounds of the committed whole-model run (data/models/smollm2-L1024-eps1_4,
--budget 60): how much the growth alone would narrow the whole model's sandwiches, and what it
costs.  The budgeted pipeline itself is measured by bench_budget_sample.py.
"""
import argparse
import csv
import json
import os
import statistics
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(__file__))
SUMMARY = os.path.join(ROOT, "data", "models", "smollm2-L1024-eps1_4", "summary.csv")


def measure(name, Q, K, beta):
    """{head, lower, lower_s, growth, growth_s}: the two lower searches of one head, kernel-checked."""
    from fractions import Fraction
    import certkit
    from certkit.head import RowMask
    from certkit.search.lower.candidates import late_candidates
    from certkit.search.sandwich import LAYOUT, certify_lower, decoding_witness, first_verified
    head = certkit.Head.from_arrays(Q, K, beta, mask=RowMask(), name=name)
    A, eps, shared = head.attention(), Fraction(1, 4), {}
    prov = {"producer": "benchmarks/bench_late_growth.py", "head": name}
    with tempfile.TemporaryDirectory() as tmp:
        t = time.perf_counter()
        lo = certify_lower(A, eps, head, os.path.join(tmp, "lower.json"), prov, LAYOUT, shared, late=False)
        t1 = time.perf_counter()
        above = lo["bound"] if lo else 0
        grown = next(late_candidates(A, float(eps), shared.get("pruning"), [], every=False), None)
        if grown is not None and grown[1] > above:
            grown = first_verified([decoding_witness(grown)], eps, head, os.path.join(tmp, "growth.json"), prov, LAYOUT)
        else:
            grown = None
        t2 = time.perf_counter()
    return {"head": name, "lower": above, "lower_s": round(t1 - t, 2),
            "growth": grown["bound"] if grown else above, "growth_s": round(t2 - t1, 2)}


def run(a):
    from threadpoolctl import threadpool_limits
    from bench_budget_sample import heads
    k, m = (int(x) for x in a.shard.split("/"))
    every = heads(a.length, a.cache)
    with threadpool_limits(1), open(a.jsonl, "a") as out:
        for i, (name, Q, K, beta) in enumerate(every):
            if i % m == k:
                row = measure(name, Q, K, beta)
                out.write(json.dumps(row) + "\n")
                out.flush()
                print(row, flush=True)


def table(a):
    rows = {}
    for f in a.table:
        with open(f) as fh:
            for line in fh:
                r = json.loads(line)
                rows[r["head"]] = r
    with open(SUMMARY) as fh:
        upper = {r["head"]: int(r["upper"]) for r in csv.DictReader(fh)}
    names = [h for h in upper if h in rows]
    before = [upper[h] / rows[h]["lower"] for h in names]
    after = [upper[h] / max(rows[h]["lower"], rows[h]["growth"]) for h in names]
    raised = [h for h in names if rows[h]["growth"] > rows[h]["lower"]]
    gain = [rows[h]["growth"] / rows[h]["lower"] for h in raised]
    gs = [rows[h]["growth_s"] for h in names]
    ls = [rows[h]["lower_s"] for h in names]
    q = lambda xs, p: sorted(xs)[min(len(xs) - 1, int(p * len(xs)))]
    lines = [f"# The late growth on every SmolLM2 head at L = 1024 (eps = 1/4)", "",
             f"Made by `.venv/bin/python benchmarks/bench_late_growth.py` (two shards, one core each; --table), "
             f"{time.strftime('%Y-%m-%d')}; {len(names)} of {len(upper)} heads.  Upper bounds: the committed "
             "whole-model run with `--budget 60` (data/models/smollm2-L1024-eps1_4/summary.csv); lower bounds: "
             "today's lower search, then the late growth above it, every bound a kernel-VERIFIED certificate.", "",
             "| | median | 90th percentile | max |", "|---|---|---|---|",
             f"| committed upper / today's lower | {statistics.median(before):.2f} | {q(before, 0.9):.2f} | {max(before):.2f} |",
             f"| committed upper / max(lower, growth) | {statistics.median(after):.2f} | {q(after, 0.9):.2f} | {max(after):.2f} |",
             f"| seconds, lower search | {statistics.median(ls):.1f} | {q(ls, 0.9):.1f} | {max(ls):.1f} |",
             f"| seconds, late growth | {statistics.median(gs):.1f} | {q(gs, 0.9):.1f} | {max(gs):.1f} |", "",
             f"The growth raised the lower bound on {len(raised)} of {len(names)} heads "
             f"(median factor {statistics.median(gain) if gain else 1:.3f}, max {max(gain) if gain else 1:.3f}); "
             f"total seconds: lower search {sum(ls):.0f}, growth {sum(gs):.0f}.", "",
             "| head | lower | growth | committed upper | upper / lower | upper / best | lower s | growth s |",
             "|---|---|---|---|---|---|---|---|"]
    for h, b, c in zip(names, before, after):
        r = rows[h]
        lines.append(f"| {h} | {r['lower']} | {r['growth']} | {upper[h]} | {b:.2f} | {c:.2f} | {r['lower_s']} | "
                     f"{r['growth_s']} |")
    text = "\n".join(lines) + "\n"
    print("\n".join(lines[:12]))
    if a.out:
        with open(a.out, "w") as fh:
            fh.write(text)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--shard", default="0/1", help="k/m: measure the heads i with i %% m == k (default: all)")
    p.add_argument("--jsonl", default=None, help="append one JSON line per head to this file")
    p.add_argument("--cache", default=None, help="keep the extracted heads in this .npz")
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--table", nargs="*", default=None, help="merge these JSON-lines files into the table")
    p.add_argument("--out", default=None, help="also write the table to this markdown file")
    a = p.parse_args()
    if a.table:
        table(a)
    else:
        if not a.jsonl:
            p.error("--jsonl FILE is needed to measure")
        run(a)


if __name__ == "__main__":
    main()
