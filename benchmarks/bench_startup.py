"""Start-up cost of the command line, side by side in one run (medians of repeated runs).

    python benchmarks/bench_startup.py [--runs 7]

`certkit verify` on the smallest corpus certificate and `certkit --help`, against the honest
baseline: a Python process that imports what any verify needs (numpy and python-flint).  Prints
the medians and the ratios; the commands import only what they use (tests/cli/test_cli.py checks
that verify loads no scipy, sympy, matplotlib or torch).
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CERT = os.path.join(ROOT, "data", "certificates", "gauss-n32-factor.json")
CASES = [("baseline: import numpy, flint", ["-c", "import numpy, flint"]),
         ("certkit --help", ["-m", "certkit", "--help"]),
         ("certkit verify (n = 32)", ["-m", "certkit", "verify", CERT]),
         ("import certkit; certkit.Head", ["-c", "import certkit; certkit.Head"])]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    times = {name: [] for name, _ in CASES}
    for _ in range(args.runs):                   # interleaved: load changes hit every case alike
        for name, argv in CASES:
            t = time.perf_counter()
            subprocess.run([sys.executable, *argv], check=True, capture_output=True, cwd=ROOT)
            times[name].append(time.perf_counter() - t)
    base = statistics.median(times[CASES[0][0]])
    print(f"{'case':<32} {'median s':>9} {'/ baseline':>11}")
    for name, _ in CASES:
        m = statistics.median(times[name])
        print(f"{name:<32} {m:9.3f} {m / base:11.2f}")


if __name__ == "__main__":
    main()
