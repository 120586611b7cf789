"""Peers' smallest certified rank with the k-independent work done once per head (an SVD, the
pivoted QRs) against redoing it at every k of the doubling/bisection, side by side in one run.

    python benchmarks/bench_peers.py [--n 256,512,1024] [--repeats 3]

Synthetic gaussian heads (d = 32, beta = 2), eps = 1/4; prints the median seconds of each route,
the ratio, and that both find the same k with the same certified error.
"""
import argparse
import os
import statistics
import sys
import time
from fractions import Fraction

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from certkit import synthetic  # noqa: E402
from certkit.search.peers import smallest_rank  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", default="256,512,1024")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"{'n':>6} {'peer':<8} {'once s':>8} {'every k s':>10} {'ratio':>6}  same k")
    for n in map(int, args.n.split(",")):
        h = synthetic.head("gaussian", n, 32, beta=Fraction(2), seed=0)
        A, inst = h.attention(), h.instance()
        for peer in ("svd", "nystrom"):
            t = {True: [], False: []}
            res = {}
            for _ in range(args.repeats):
                for reuse in (True, False):        # interleaved: machine noise hits both alike
                    t0 = time.perf_counter()
                    res[reuse] = smallest_rank(peer, A, h, inst, 0.25, reuse=reuse)
                    t[reuse].append(time.perf_counter() - t0)
            once, every = statistics.median(t[True]), statistics.median(t[False])
            same = (res[True]["k"], res[True]["certified_error"]) == (res[False]["k"], res[False]["certified_error"])
            print(f"{n:>6} {peer:<8} {once:8.2f} {every:10.2f} {every / once:6.2f}  {same}")


if __name__ == "__main__":
    main()
