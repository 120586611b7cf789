"""Benchmark: budgeted whole-model certification, from a sample of heads, against another checkout.

    .venv/bin/python benchmarks/bench_budget_sample.py [--vs fe62cfb] [--new HEAD] [--count 16] [--budget 60]
        [--length 1024] [--seed 20261207] [--heads l0-h1,l1-h1] [--cache FILE.npz] [--out benchmarks/results/budget_sample.md]

What `certkit certify --model smollm2 --length 1024 --eps 1/4 --peers svd --budget 60` does per head,
on a uniform sample of --count of SmolLM2-135M's 270 heads (random.Random(seed); --heads: these
heads instead; built-in text, window 0), with the revisions --new and --vs (git worktrees made in a temporary folder: what is committed, not
the working tree's edits), side by side: for each head the two runs start at the same time, each in its own process with one BLAS
thread, so both see the same machine (2 cores: one each).  Per head: lower, upper, upper / lower and
seconds of each (a budget that ends before the SVD upper bound leaves the trivial
upper bound min(n, N), as the summaries count it); then the median upper / lower of each side, the median per-head ratio new / old of
the widths, and how many heads got narrower, wider or the same.  Timing-dependent by design (a
budget stops the searches on the clock): rerun for the spread.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
from fractions import Fraction
import certkit
from certkit.head import RowMask
from certkit.search.sandwich import sandwich
z = np.load(sys.argv[2])
head = certkit.Head.from_arrays(z["Q"], z["K"], sys.argv[3], mask=RowMask(), name=sys.argv[4])
t = time.perf_counter()
s = sandwich(head, Fraction(1, 4), peers=("svd",), budget=float(sys.argv[5]))
print(json.dumps({"lower": s.lower.bound if s.lower else None, "upper": s.upper.bound if s.upper else min(head.n, head.N),
                  "seconds": round(time.perf_counter() - t, 1), "stopped": s.stopped_on_budget,
                  "certkit": certkit.__file__}))
"""


def heads(length, cache):
    """[(name, Q, K, beta text)] of every SmolLM2 head at this length (cache: a .npz kept between runs)."""
    import numpy as np
    if cache and os.path.exists(cache):
        z = np.load(cache, allow_pickle=False)
        return [(m[0], z[f"Q{i}"], z[f"K{i}"], m[1]) for i, m in enumerate(json.loads(str(z["meta"])))]
    sys.path.insert(0, ROOT)
    import certkit
    out = []
    for h in certkit.heads_from_model("smollm2", length=length):
        b = h.beta_json()
        beta = f"{b['over_sqrt'][0]}/sqrt({b['over_sqrt'][1]})" if isinstance(b, dict) else b
        out.append((f"l{h.provenance['layer']}-h{h.provenance['head']}", np.asarray(h.queries), np.asarray(h.keys), beta))
    if cache:
        arrays = {f"{x}{i}": a for i, h in enumerate(out) for x, a in (("Q", h[1]), ("K", h[2]))}
        np.savez(cache, meta=json.dumps([[h[0], h[3]] for h in out]), **arrays)
    return out


def command_line(a):
    """The options this run was given, as a user would type them (--cache named, not its path: no
    machine's path in a committed result)."""
    chosen = f"--heads {a.heads}" if a.heads else f"--count {a.count} --seed {a.seed}"
    opts = f"--vs {a.vs} --new {a.new} {chosen} --budget {a.budget:g} --length {a.length}"
    return opts + (" --cache FILE.npz" if a.cache else "")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--vs", default="fe62cfb", help="the git revision to compare with (default: %(default)s)")
    p.add_argument("--new", default="HEAD", help="the git revision measured (default: %(default)s)")
    p.add_argument("--count", type=int, default=16)
    p.add_argument("--budget", type=float, default=60.0)
    p.add_argument("--length", type=int, default=1024)
    p.add_argument("--seed", type=int, default=20261207)
    p.add_argument("--heads", default=None, help="comma-separated head names (l0-h1,...) instead of the seeded sample")
    p.add_argument("--cache", default=None, help="keep the extracted heads in this .npz")
    p.add_argument("--out", default=None, help="also write the table to this markdown file")
    a = p.parse_args()
    import numpy as np
    every = heads(a.length, a.cache)
    if a.heads:
        index = {h[0]: i for i, h in enumerate(every)}
        unknown = [h for h in a.heads.split(",") if h not in index]
        if unknown:
            p.error(f"--heads: no such head {', '.join(unknown)} (names like l0-h1, layers 0-{every[-1][0].split('-')[0][1:]})")
        sample = [index[h] for h in a.heads.split(",")]
    else:
        sample = sorted(random.Random(a.seed).sample(range(len(every)), a.count))
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    chosen = f"the heads {a.heads}" if a.heads else f"{a.count} of {len(every)} heads (seed {a.seed})"
    lines = [f"SmolLM2-135M, L = {a.length}, eps = 1/4, --peers svd, --budget {a.budget:g}: {chosen}; "
             f"new = {a.new}, old = {a.vs}, side by side", "",
             "| head | old lower | old upper | old up/lo | old s | new lower | new upper | new up/lo | new s |",
             "|---|---|---|---|---|---|---|---|---|"]
    print("\n".join(lines), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        old, new = os.path.join(tmp, "old"), os.path.join(tmp, "new")
        for path, rev in ((old, a.vs), (new, a.new)):
            subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", path, rev], check=True,
                           capture_output=True)
        try:
            for i in sample:
                name, Q, K, beta = every[i]
                f = os.path.join(tmp, "head.npz")
                np.savez(f, Q=Q, K=K)
                procs = [subprocess.Popen([sys.executable, "-c", CHILD, src, f, beta, name, str(a.budget)], env=env,
                                          stdout=subprocess.PIPE, text=True) for src in (old, new)]
                res = [json.loads(pr.communicate()[0].strip().splitlines()[-1]) for pr in procs]
                rows.append((name, res))
                cells = []
                for r in res:
                    w = r["upper"] / r["lower"] if r["lower"] and r["upper"] else float("nan")
                    cells += [r["lower"], r["upper"], f"{w:.2f}", r["seconds"]]
                line = "| " + " | ".join(str(c) for c in [name] + cells) + " |"
                lines.append(line)
                print(line, flush=True)
        finally:
            for path in (old, new):
                subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", path], capture_output=True)
    width = [[r["upper"] / r["lower"] for _, res in rows for r in [res[side]]] for side in (0, 1)]
    ratio = [n / o for o, n in zip(*width)]
    lines += ["", f"Median upper / lower: old {statistics.median(width[0]):.2f}, new {statistics.median(width[1]):.2f}; "
              f"median per-head new / old {statistics.median(ratio):.3f}; narrower on "
              f"{sum(r < 1 for r in ratio)}, wider on {sum(r > 1 for r in ratio)}, the same on "
              f"{sum(r == 1 for r in ratio)} of {len(ratio)} heads.",
              f"Median seconds: old {statistics.median(r[1][0]['seconds'] for r in rows):.1f}, "
              f"new {statistics.median(r[1][1]['seconds'] for r in rows):.1f}.  Made {time.strftime('%Y-%m-%d')}."]
    print("\n".join(lines[-3:]))
    if a.out:
        with open(a.out, "w") as fh:
            fh.write("# Budgeted certification of SmolLM2 heads, old against new\n\nMade by "
                     f"`.venv/bin/python benchmarks/bench_budget_sample.py {command_line(a)}`.\n\n"
                     + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
