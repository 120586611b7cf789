"""Benchmark: the default `certkit scale` run (all families), and the parametric rule against the
explicit decoding rule on the same small instances, side by side in one run.

    python benchmarks/bench_scale.py [--repeats 3]

Printed: the wall time of the full default run (median of --repeats; goal <= 60 s on 2 cores) and
its ratio to the 60 s budget; per family the median kernel time per point; and for each
cross-check instance the ratio explicit-check time / parametric-check time (the parametric rule
never enumerates tokens, so the ratio grows with the instance).
"""
import argparse
import importlib
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from certkit.choices import check  # noqa: E402

scale = importlib.import_module("certkit.scaling.laws")    # the module (certkit.scale is the API function)

BUDGET = 60.0


def timed(f):
    t = time.perf_counter()
    f()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    eps = scale.EPS
    walls = []
    for i in range(args.repeats):
        out = tempfile.mkdtemp(prefix="bench-scale-")
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "certkit", "scale", "--out", out], capture_output=True, text=True)
        walls.append(time.perf_counter() - t)
        if r.returncode != 0:
            print(r.stdout, r.stderr)
            raise SystemExit(f"certkit scale exited {r.returncode}")
    wall = statistics.median(walls)
    print(f"default certkit scale (all families, 143 points + 65^4 point + 12 cross-checks): median {wall:.1f} s "
          f"over {args.repeats} runs; ratio to the {BUDGET:.0f} s budget {wall / BUDGET:.3f}")
    tmp = tempfile.mkdtemp(prefix="bench-scale-pts-")
    for fam in scale.LATTICE_FAMILIES:
        ts = []
        for d in scale.LATTICE_FAMILIES[fam]["dims"]:
            for x in scale.grid(fam, 13):
                ts.append(timed(lambda: scale.point(fam, d, x, eps, tmp)))
        print(f"  {fam:<12} median {1e3 * statistics.median(ts):7.1f} ms per point (write + kernel check + "
              f"upper bound), max {1e3 * max(ts):7.1f} ms")
    print(f"{'instance':<40} {'columns':>8} {'M':>5} {'explicit s':>11} {'parametric s':>13} {'ratio':>9}")
    for i, (con, p) in enumerate(scale.CROSSCHECK):
        if con not in ("ball", "interaction"):
            continue
        pp, xp, h, _, _ = scale.crosscheck_pair(con, p, eps, os.path.join(tmp, f"{i:02d}"))
        tx = statistics.median(timed(lambda: check(xp)) for _ in range(3))
        tp = statistics.median(timed(lambda: check(pp)) for _ in range(3))
        name = f"{con} " + " ".join(f"{k}={v}" for k, v in p.items())
        print(f"{name:<40} {h.N:>8} {h.n:>5} {tx:>11.4f} {tp:>13.4f} {tx / tp:>9.1f}")

if __name__ == "__main__":
    main()
