"""Benchmark: per-configuration time of `certkit calibrate` on MiniLM, and the full-grid time.

    python benchmarks/bench_calibrate.py [--sample 6] [--workers 2] [--full]

Runs a sample of heads (spread over layers) at every length and multiplier in one process and
prints the median and max seconds per configuration (one eps) at each length, and the projected
wall time of the full MiniLM grid (72 heads x 3 lengths x 5 multipliers x 3 eps = 3,240
configurations) on --workers processes (goal <= 15 minutes on 2 cores).  --full runs the real
full grid with `certkit calibrate --workers W` into a temporary folder and prints its wall time.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from certkit.calibration import EPS, LENGTHS, MULTIPLIERS  # noqa: E402
from certkit.calibration.grid import head_task  # noqa: E402
from certkit.models import extract as ex  # noqa: E402

GOAL = 15 * 60


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sample", type=int, default=6, help="heads in the sample (default 6)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--full", action="store_true")
    args = ap.parse_args()
    model, tok, info = ex.load("minilm")
    heads = [(i % info["layers"], (5 * i + 3) % info["heads"]) for i in range(args.sample)]
    tmp = tempfile.mkdtemp(prefix="bench-cal-")
    per_L, groups = {}, 0
    for L in LENGTHS:
        c = ex.capture(model, info, ex.token_window(tok, info["kind"], L))
        for l, h in heads:
            done = head_task({"head": ex.head(c, l, h), "multipliers": [str(m) for m in MULTIPLIERS],
                              "eps": [str(e) for e in EPS], "cert_dir": tmp, "out": tmp})
            for g in done:
                per_L.setdefault(L, []).append(g["seconds"] / len(EPS))
                groups += 1
    total_core = 0.0
    n_heads = info["layers"] * info["heads"]
    for L, ts in per_L.items():
        proj = statistics.mean(ts) * len(EPS) * len(MULTIPLIERS) * n_heads
        total_core += proj
        print(f"L = {L:>3}: median {statistics.median(ts):6.2f} s, max {max(ts):6.2f} s per configuration "
              f"({len(ts)} configurations); full-grid share {proj / 60:6.1f} core-minutes")
    wall = total_core / args.workers
    print(f"projected full MiniLM grid (3,240 configurations) on {args.workers} workers: {wall / 60:.1f} min; "
          f"ratio to the 15-minute goal {wall / GOAL:.2f}")
    if args.full:
        out = tempfile.mkdtemp(prefix="bench-cal-full-")
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "certkit", "calibrate", "--workers", str(args.workers), "--out", out,
                            "--no-plots"], capture_output=True, text=True)
        wall = time.perf_counter() - t
        print(r.stdout.strip())
        print(f"full grid measured: {wall / 60:.1f} min (exit {r.returncode}); ratio to goal {wall / GOAL:.2f}")


if __name__ == "__main__":
    main()
