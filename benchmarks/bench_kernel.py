"""Benchmark: certified max row-l1 error max_i ||A_i - (U V^T)_i||_1 (the factorization rule's
work) against plain float64 numpy of the same quantity, side by side in one run.

    python benchmarks/bench_kernel.py [--sizes 512 1024 4096] [--repeats 5]

n = N in sizes, d = 64, k = 64, one BLAS thread (set before numpy is imported), warm-up first,
medians reported.  Also the Arb reference route at n = 512.  Target (issue 2): fast route
<= 4x float64 at n = 4096.
"""
import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from certkit.kernel import make_instance, max_row_error  # noqa: E402


def plain_float64(Q, K, beta, U, V):
    L = (Q @ K.T) * beta
    L -= L.max(axis=1, keepdims=True)
    np.exp(L, out=L)
    L /= L.sum(axis=1, keepdims=True)
    L -= U @ V.T
    np.abs(L, out=L)
    return float(L.sum(axis=1).max())


def median_time(f, repeats):
    f()                                      # warm-up
    ts = []
    for _ in range(repeats):
        t = time.perf_counter()
        out = f()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 4096])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--arb-size", type=int, default=512)
    args = ap.parse_args()
    d = k = 64
    print(f"d = k = {d}, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, medians of {args.repeats}")
    print(f"{'n':>6} {'float64 s':>10} {'fast s':>9} {'fast/float':>10} {'arb s':>8} {'arb/float':>9} {'float err':>10} {'certified':>10}")
    for n in args.sizes:
        rng = np.random.default_rng(n)
        Q = rng.standard_normal((n, d))
        K = rng.standard_normal((n, d))
        U = rng.standard_normal((n, k)) / (n * 8)
        V = rng.standard_normal((n, k))
        beta = 1 / 8                        # 1/sqrt(64), exact in binary64
        inst = make_instance("1/8", Q, K)
        tf, ef = median_time(lambda: plain_float64(Q, K, beta, U, V), args.repeats)
        tc, (ec, _) = median_time(lambda: max_row_error(inst, U, V, "fast"), args.repeats)
        line = f"{n:>6} {tf:>10.4f} {tc:>9.4f} {tc / tf:>10.2f}"
        if n == args.arb_size:
            ta, (ea, _) = median_time(lambda: max_row_error(inst, U, V, "arb"), 1)
            line += f" {ta:>8.2f} {ta / tf:>9.0f}"
        else:
            line += f" {'-':>8} {'-':>9}"
        print(line + f" {ef:>10.6f} {ec:>10.6f}")
        assert ec >= ef * (1 - 1e-9), "certified bound below the float value"


if __name__ == "__main__":
    main()
