"""Benchmark: certified max row-l1 error max_i ||A_i - (U V^T)_i||_1 (the factorization rule's
work, `max_row_error(inst, U, V, "fast")`) against plain float64 numpy computing the same quantity
the same way: in row blocks of BLOCK rows (the kernel's block size), with np.exp.  Side by side in
one run; neither side ever holds more than one BLOCK x N block (Q, K, U, V are n x 64).

    python benchmarks/bench_kernel.py [--sizes 512 1024 4096 16384] [--repeats 5]

n = N in sizes, d = 64, k = 64, one BLAS thread (set before numpy is imported), warm-up first,
medians reported.  Also the Arb reference route at n = 512.
Goal: fast route <= 2x blocked float64 at n = 4096 and n = 16384.
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
from certkit.kernel.numerics import make_instance, max_row_error  # noqa: E402

BLOCK = 256                                  # rows per block, as certkit/kernel/rows.py


def blocked_float64(Q, K, beta, U, V, block=BLOCK):
    """max_i ||softmax(beta q_i K^T) - (U V^T)_i||_1 in plain float64, BLOCK rows at a time."""
    Kt, Vt = np.ascontiguousarray(K.T), np.ascontiguousarray(V.T)
    worst = 0.0
    for s in range(0, Q.shape[0], block):
        L = Q[s:s + block] @ Kt
        L *= beta
        L -= L.max(axis=1, keepdims=True)
        np.exp(L, out=L)
        L /= L.sum(axis=1, keepdims=True)
        L -= U[s:s + block] @ Vt
        np.abs(L, out=L)
        worst = max(worst, float(L.sum(axis=1).max()))
    return worst


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


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
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 4096, 16384])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--arb-size", type=int, default=512)
    args = ap.parse_args()
    d = k = 64
    print(f"d = k = {d}, block = {BLOCK} rows, OPENBLAS_NUM_THREADS={os.environ['OPENBLAS_NUM_THREADS']}, "
          f"medians of {args.repeats}")
    print(f"{'n':>6} {'blocked s':>10} {'fast s':>9} {'fast/blocked':>12} {'arb s':>8} {'arb/blocked':>11} "
          f"{'float err':>10} {'certified':>10}")
    for n in args.sizes:
        rng = np.random.default_rng(n)
        Q = rng.standard_normal((n, d))
        K = rng.standard_normal((n, d))
        U = rng.standard_normal((n, k)) / (n * 8)
        V = rng.standard_normal((n, k))
        beta = 1 / 8                        # 1/sqrt(64), exact in binary64
        inst = make_instance("1/8", Q, K)
        # interleave the two sides so machine noise hits both alike
        tf, tc = [], []
        ef = blocked_float64(Q, K, beta, U, V)          # warm-up of both
        ec = max_row_error(inst, U, V, "fast")[0]
        for _ in range(args.repeats):
            tf.append(timed(lambda: blocked_float64(Q, K, beta, U, V)))
            tc.append(timed(lambda: max_row_error(inst, U, V, "fast")))
        tf, tc = statistics.median(tf), statistics.median(tc)
        line = f"{n:>6} {tf:>10.4f} {tc:>9.4f} {tc / tf:>12.2f}"
        if n == args.arb_size:
            ta, (ea, *_) = median_time(lambda: max_row_error(inst, U, V, "arb"), 1)
            line += f" {ta:>8.2f} {ta / tf:>11.0f}"
        else:
            line += f" {'-':>8} {'-':>11}"
        print(line + f" {ef:>10.6f} {ec:>10.6f}", flush=True)
        assert ec >= ef * (1 - 1e-9), "certified bound below the float value"


if __name__ == "__main__":
    main()
