"""Benchmark: certified sandwiches  lower <= r_eps(A) <= upper  on every head of MPNet at L = 512
(144 encoder heads, relative-position bias, no mask), today's search beside the committed
calibration (data/calibration/mpnet-L512, computed before the real-heads work; the same heads,
text, window and eps).

    python benchmarks/bench_mpnet_L512.py [--eps 1/4] [--workers 2] [--out DIR] [--no-run]
        [--results FILE]

Runs `certkit certify --model mpnet --length 512 --eps EPS --peers none --workers W --out DIR`
(resumable: finished heads are read back; default DIR data/models/mpnet-L512-eps<eps>), then
prints per head the calibration's sandwich and today's, the median upper/lower of each, how many
heads are narrower / wider today, and today's median seconds per head.  Both sides are kernel-
VERIFIED certificates; the search has no clock and no randomness, so the sandwiches do not depend
on the machine's load (the seconds do).  --results also writes the table to FILE
(benchmarks/results/mpnet_L512.txt is the committed one).

Goal (issue: real heads at real lengths): median upper/lower <= 2.0, no sandwich wider.
"""
import argparse
import csv
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
OLD = os.path.join(ROOT, "data", "calibration", "mpnet-L512", "results.csv")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--eps", default="1/4")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--out", default=None)
    p.add_argument("--no-run", action="store_true", help="only compare an existing --out")
    p.add_argument("--results", default=None)
    a = p.parse_args()
    out = a.out or os.path.join(ROOT, "data", "models", f"mpnet-L512-eps{a.eps.replace('/', '_')}")
    wall = None
    if not a.no_run:
        t = time.perf_counter()
        cmd = [sys.executable, "-m", "certkit", "certify", "--model", "mpnet", "--length", "512", "--eps", a.eps,
               "--peers", "none", "--workers", str(a.workers), "--out", out]
        code = subprocess.run(cmd, stdout=subprocess.DEVNULL).returncode
        if code not in (0, 1):                 # 1: some bound missing, still a summary to compare
            sys.exit(f"{' '.join(cmd[1:])} exited {code} (its message is above)")
        wall = time.perf_counter() - t
    with open(OLD) as f:
        old = {(int(r["layer"]), int(r["head"])): r for r in csv.DictReader(f)
               if r["eps"] == a.eps and r["multiplier"] == "1"}
    with open(os.path.join(out, "summary.csv")) as f:
        new = {(int(r["layer"]), int(r["head_index"])): r for r in csv.DictReader(f) if r["eps"] == a.eps}
    keys = sorted(set(old) & set(new))
    lines = [f"mpnet, L = 512, eps = {a.eps}: {len(keys)} heads; old = data/calibration/mpnet-L512 (committed "
             f"calibration), new = {os.path.relpath(out, ROOT)}",
             f"{'head':>7} {'old lo':>6} {'old up':>6} {'old u/l':>7} {'new lo':>6} {'new up':>6} {'new u/l':>7} "
             f"{'seconds':>7}"]
    olds, news, secs, narrower, wider = [], [], [], 0, []
    for l, h in keys:
        o, n = old[l, h], new[l, h]
        olo, oup = int(o["lower"]), int(o["R_con"])
        nlo, nup = int(n["lower"] or 1), int(n["upper"] or n["n"])
        olds.append(oup / olo)
        news.append(nup / nlo)
        secs.append(float(n["seconds"]))
        narrower += nlo > olo or nup < oup
        if nlo < olo or nup > oup:
            wider.append(f"l{l}-h{h}")
        lines.append(f"{f'l{l}-h{h}':>7} {olo:>6} {oup:>6} {oup / olo:>7.2f} {nlo:>6} {nup:>6} {nup / nlo:>7.2f} "
                     f"{float(n['seconds']):>7.1f}")
    lines.append(f"median upper/lower: old {statistics.median(olds):.2f}, new {statistics.median(news):.2f} "
                 f"(90th percentile old {sorted(olds)[int(0.9 * len(olds))]:.2f}, new "
                 f"{sorted(news)[int(0.9 * len(news))]:.2f}; max old {max(olds):.2f}, new {max(news):.2f})")
    lines.append(f"heads with a narrower end today: {narrower} of {len(keys)}; with a wider end: {len(wider)} "
                 f"{' '.join(wider)}".rstrip())
    lines.append(f"today: median {statistics.median(secs):.1f} s per head, {sum(secs):.0f} s of certification"
                 + ("" if wall is None else f", {wall:.0f} s wall on {a.workers} workers"))
    text = "\n".join(lines)
    print(text)
    if a.results:
        with open(a.results, "w") as f:
            f.write(f"python benchmarks/bench_mpnet_L512.py --eps {a.eps} --workers {a.workers}\n\n{text}\n")


if __name__ == "__main__":
    main()
