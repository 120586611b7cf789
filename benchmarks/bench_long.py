"""Benchmark: certified sandwiches at long contexts, n = 512 ... 16384, against the goals.

    python benchmarks/bench_long.py [--sizes 512 1024 2048 4096 8192 16384] [--baseline REV]
                                    [--baseline-max 2048] [--timeout 1800]

Each size runs, in its own process, exactly what a user types:

    certkit certify --synthetic gaussian:n=N,d=32,beta=2,seed=0 --eps 1/4 --peers none

and reports its wall time, its peak resident memory (the child's own ru_maxrss) and the
sandwich lower <= r_eps <= upper (both ends kernel-VERIFIED certificates).  With --baseline REV
the same command also runs from a git worktree of revision REV (e.g. the commit before the
long-context work) for the sizes up to --baseline-max, side by side in the same run, with the
ratio of wall times.

Goals: n = 4096 <= 60 s, n = 8192 <= 5 min, n = 16384 <= 20 min, peak memory
<= 4 GiB at 16384, and sandwiches no wider than before at n <= 1024.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
GOAL_SECONDS = {4096: 60, 8192: 300, 16384: 1200}
GOAL_GIB = {16384: 4.0}

CHILD = """
import resource, runpy, sys
sys.argv = ["certkit"] + sys.argv[1:]
try:
    runpy.run_module("certkit", run_name="__main__", alter_sys=True)
finally:
    print("PEAK_KB", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)
"""


def run_once(root, n, timeout):
    """(seconds, peak GiB, lower, upper) of one certify run from the checkout `root`; None on timeout."""
    out = tempfile.mkdtemp(prefix=f"bench-long-{n}-")
    cmd = [sys.executable, "-c", CHILD, "certify", "--synthetic", f"gaussian:n={n},d=32,beta=2,seed=0",
           "--eps", "1/4", "--peers", "none", "--json", "--out", out]
    env = dict(os.environ, PYTHONPATH=root)
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return None
    finally:
        shutil.rmtree(out, ignore_errors=True)          # the certificates are not kept
    seconds = time.perf_counter() - t0
    peak = [int(line.split()[1]) for line in p.stderr.splitlines() if line.startswith("PEAK_KB")]
    try:
        row = json.loads(p.stdout)[0]
    except (ValueError, IndexError):
        raise SystemExit(f"n = {n} ({root}): certify failed (exit {p.returncode}):\n{p.stderr[-2000:]}")
    return seconds, (peak[0] / 2 ** 20 if peak else float("nan")), row["lower"], row["upper"]


def worktree(rev):
    path = tempfile.mkdtemp(prefix="bench-long-baseline-")
    subprocess.run(["git", "-C", HERE, "worktree", "add", "--detach", path, rev], check=True, capture_output=True)
    return path


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[512, 1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--baseline", metavar="REV", help="also run this git revision (side by side)")
    ap.add_argument("--baseline-max", type=int, default=2048, help="largest n for the baseline (default 2048)")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per run before it counts as failed")
    ap.add_argument("--table", default=os.path.join(HERE, "benchmarks", "results", "long.md"), metavar="FILE",
                    help="the markdown table docs/guide/certify.md shows, written as each size lands "
                         "(default benchmarks/results/long.md; tests/docs/test_measured_tables.py compares them)")
    args = ap.parse_args()
    rev = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    table = ["| n | seconds | peak memory | sandwich | goal |", "|---|---|---|---|---|"]
    base = worktree(args.baseline) if args.baseline else None
    cols = f"{'n':>6} {'seconds':>9} {'peak GiB':>9} {'sandwich':>16} {'goal':>14}"
    if base:
        cols += f" {'base s':>9} {'base GiB':>9} {'base sandwich':>16} {'speed-up':>9}"
    print(cols, flush=True)
    try:
        for n in args.sizes:
            r = run_once(HERE, n, args.timeout)
            goal = []
            if n in GOAL_SECONDS:
                goal.append(f"<= {GOAL_SECONDS[n]} s")
            if n in GOAL_GIB:
                goal.append(f"<= {GOAL_GIB[n]:g} GiB")
            if r is None:
                line = f"{n:>6} {'timeout':>9} {'-':>9} {'-':>16} {', '.join(goal):>14}"
                table.append(f"| {n} | timeout after {args.timeout:g} s | — | — | {', '.join(goal) or '—'} |")
            else:
                s, gib, lo, up = r
                met = all([s <= GOAL_SECONDS.get(n, float("inf")), gib <= GOAL_GIB.get(n, float("inf"))])
                line = (f"{n:>6} {s:>9.1f} {gib:>9.2f} {f'{lo} <= r <= {up}':>16} "
                        f"{(', '.join(goal) + (' met' if met else ' MISSED')) if goal else '-':>14}")
                table.append(f"| {n} | {s:.1f} | {gib:.2f} GiB | {lo} ≤ r ≤ {up} | "
                             f"{(', '.join(goal) + (': met' if met else ': MISSED')) if goal else '—'} |")
            with open(args.table, "w") as f:
                f.write(f"<!-- python benchmarks/bench_long.py at {rev}, {os.cpu_count()} cores -->\n"
                        + "\n".join(table) + "\n")
            if base:
                b = run_once(base, n, args.timeout) if n <= args.baseline_max else None
                if b is None:
                    line += f" {'-' if n > args.baseline_max else 'timeout':>9} {'-':>9} {'-':>16} {'-':>9}"
                else:
                    line += (f" {b[0]:>9.1f} {b[1]:>9.2f} {f'{b[2]} <= r <= {b[3]}':>16} "
                             f"{(b[0] / r[0]) if r else float('nan'):>9.2f}")
            print(line, flush=True)
    finally:
        if base:
            subprocess.run(["git", "-C", HERE, "worktree", "remove", "--force", base], capture_output=True)
            shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
