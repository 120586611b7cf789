"""Dask LocalCluster against the process pool, side by side in one run: the MiniLM calibration
grid at L = 64 (a subset by default), `--workers 2` vs `--scheduler local:2`, fresh output folders.

    python benchmarks/bench_parallel.py [--heads 0-5] [--full]

Each side runs --repeat times in ABBA order (the first run of a session pays for cold caches);
prints the median wall times and their ratio (goal: Dask <= 1.1x the pool) and checks that the rows
agree apart from timing fields.  --full runs all 72 heads at L = 64 (the issue's grid).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time


def run(extra, out, heads):
    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "certkit", "calibrate", "--lengths", "64", "--heads", heads,
                    "--out", out, "--no-plots", *extra], check=True, capture_output=True)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--heads", default="0-3", help="heads of every layer (default 0-3: 24 heads)")
    ap.add_argument("--full", action="store_true", help="all 72 heads")
    ap.add_argument("--repeat", type=int, default=2, help="runs per side, in ABBA order (default 2); medians")
    args = ap.parse_args()
    heads = "all" if args.full else args.heads
    tmp = tempfile.mkdtemp(prefix="bench-parallel-")
    args_of = {"pool": ["--workers", "2"], "dask": ["--scheduler", "local:2"]}
    times = {"pool": [], "dask": []}
    for r in range(args.repeat):                 # ABBA order: neither side always runs on a cold cache
        for k in (("pool", "dask") if r % 2 == 0 else ("dask", "pool")):
            out = os.path.join(tmp, k if r == 0 else f"{k}-{r}")
            times[k].append(run(args_of[k], out, heads))
    pool, dask = statistics.median(times["pool"]), statistics.median(times["dask"])
    rows = {k: [{f: v for f, v in r.items() if f != "seconds"}
                for r in json.load(open(os.path.join(tmp, k, "results.json")))["rows"]] for k in ("pool", "dask")}
    print(f"MiniLM L = 64, heads {heads}: {len(rows['pool'])} configurations")
    runs = lambda k: ", ".join(f"{t:.1f}" for t in times[k])
    print(f"--workers 2          {pool:8.1f} s   (runs: {runs('pool')})")
    print(f"--scheduler local:2  {dask:8.1f} s   (runs: {runs('dask')})   ratio {dask / pool:.3f} (goal <= 1.1)")
    print(f"identical rows (timing aside): {rows['pool'] == rows['dask']}")


if __name__ == "__main__":
    main()
