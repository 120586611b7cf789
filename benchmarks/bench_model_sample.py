"""Benchmark: the time a whole-model run would take, from a random sample of heads.

    python benchmarks/bench_model_sample.py [--model smollm2] [--length 1024] [--count 8]
        [--seed 20261206] [--eps 1/4] [--workers-of-the-run 2]

Extracts every head at --length on the built-in text (certkit.heads_from_model, window 0, the
model run once), draws --count (layer, head) pairs uniformly without replacement
(random.Random(seed)) and runs `certkit.certify(head, eps)` in this process (certkit keeps BLAS at one thread).  Prints each
head's sandwich and seconds, then the mean and median, and the whole model's estimated wall time
on --workers-of-the-run workers: mean x heads / workers (no budget; the sample's spread is wide,
so this is an estimate, not a measurement of the whole run).
"""
import argparse
import random
import statistics
import time


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="smollm2")
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--count", type=int, default=8)
    p.add_argument("--seed", type=int, default=20261206)
    p.add_argument("--eps", default="1/4")
    p.add_argument("--workers-of-the-run", type=int, default=2)
    a = p.parse_args()
    import certkit
    heads = {(h.provenance["layer"], h.provenance["head"]): h     # the model loaded and run once
             for h in certkit.heads_from_model(a.model, length=a.length)}
    every = sorted(heads)
    pairs = sorted(random.Random(a.seed).sample(every, a.count))
    print(f"{a.model}, L = {a.length}, eps = {a.eps}: {a.count} of {len(every)} heads (seed {a.seed})")
    print(f"{'head':>8} {'lower':>6} {'upper':>6} {'up/lo':>6} {'seconds':>8}")
    secs, ratios = [], []
    for l, h in pairs:
        t = time.perf_counter()
        s = certkit.certify(heads[l, h], eps=a.eps)
        secs.append(time.perf_counter() - t)
        lo, up = (s.lower.bound if s.lower else None), (s.upper.bound if s.upper else None)
        ratios.append(up / lo if lo and up else float("nan"))
        print(f"{f'l{l}-h{h}':>8} {lo!s:>6} {up!s:>6} {ratios[-1]:>6.2f} {secs[-1]:>8.1f}", flush=True)
    mean = statistics.mean(secs)
    print(f"mean {mean:.1f} s, median {statistics.median(secs):.1f} s per head; median upper/lower "
          f"{statistics.median(ratios):.2f}; whole model ({len(every)} heads) on {a.workers_of_the_run} workers: "
          f"about {mean * len(every) / a.workers_of_the_run / 3600:.1f} h")


if __name__ == "__main__":
    main()
