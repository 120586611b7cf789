"""Benchmark: certified sandwiches  lower <= r_eps(A) <= upper  on real decoder heads (SmolLM2-135M,
causal row mask, d_head 64) at L = 1024, today's code beside an older revision.

    python benchmarks/bench_real_heads.py [--lengths 1024] [--layers 0,15,29] [--heads 3,7]
        [--eps 1/4] [--baseline REV] [--pairs] [--cache FILE] [--out FILE] [--timeout 3600]

The heads are extracted once (certkit.heads_from_model, the built-in text, window 0) and stored as
Q, K with their exact beta and row mask.  Each (head, revision) then runs in a fresh process,
`certkit.certify(head, eps)` with one BLAS thread, from this checkout ("new") and, with
--baseline REV, from a git worktree of revision REV ("old"); the two runs of a head are
interleaved (old first on even heads, new first on odd ones), or, with --pairs, run at the same
time (one core each: both see the same load).  Printed per head: lower, upper, upper/lower and
seconds (the child's own wall time around certify) for both, the ratio of seconds, and whether
the new sandwich is wider; then the medians and the median of the per-head ratios.  --cache
keeps the old revision's rows (keyed by revision, L, head, eps) so that a rerun measures only
the new code (the table then says so).  --out also writes the table to a file
(benchmarks/results/real_heads.txt is the committed one).

Goals: median <= 60 s per head at L = 1024 on one core, upper/lower <= 1.5, no
sandwich wider than the old revision's.
"""
import argparse
import json
import os
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
import certkit
from certkit.head import RowMask
z = np.load(sys.argv[2])
mask = json.loads(sys.argv[4])
head = certkit.Head.from_arrays(z["Q"], z["K"], beta=sys.argv[3], name=sys.argv[5],
                                mask=None if mask is None else RowMask(*mask))
t = time.perf_counter()
s = certkit.certify(head, eps=sys.argv[6])
seconds = time.perf_counter() - t
print("ROW", json.dumps({"lower": s.lower.bound if s.lower else None, "upper": s.upper.bound if s.upper else None,
                         "seconds": seconds}))
"""


def extract(lengths, layers, heads, folder):
    """[(L, name, file, beta text, mask json)] for the heads, saved as .npz in folder."""
    sys.path.insert(0, ROOT)
    import numpy as np
    import certkit
    out = []
    for L in lengths:
        for h in certkit.heads_from_model("smollm2", length=L, layers=layers, heads=heads):
            path = os.path.join(folder, f"L{L}-{h.name}.npz")
            np.savez(path, Q=h.queries, K=h.keys)
            mask = None if h.mask is None else [h.mask.offset, h.mask.window]
            out.append((L, h.name, path, str(h.beta), json.dumps(mask)))
    return out


def start(root, head, eps):
    L, name, path, beta, mask = head
    return subprocess.Popen([sys.executable, "-c", CHILD, root, path, beta, mask, name, eps], cwd=root,
                            env=dict(os.environ, PYTHONPATH=root), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def finish(p, timeout):
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        return {"lower": None, "upper": None, "seconds": float("nan"), "failed": "timeout"}
    rows = [line[4:] for line in out.splitlines() if line.startswith("ROW ")]
    if p.returncode or not rows:
        return {"lower": None, "upper": None, "seconds": float("nan"), "failed": err.strip()[-500:]}
    return json.loads(rows[-1])


def ratio(r):
    return r["upper"] / r["lower"] if r.get("lower") and r.get("upper") else float("nan")


def median(xs):
    xs = [x for x in xs if x == x]
    return statistics.median(xs) if xs else float("nan")


def table(rows, baseline, cached):
    lines = []
    head = f"{'L':>5} {'head':>7} | {'new lower':>9} {'upper':>6} {'up/lo':>6} {'seconds':>8}"
    if baseline:
        head += f" | {'old lower':>9} {'upper':>6} {'up/lo':>6} {'seconds':>8} | {'new/old s':>9} {'wider':>5}"
    lines.append(head)
    lines.append("-" * len(head))
    for (L, name), new, old in rows:
        s = f"{L:>5} {name:>7} | {new['lower']!s:>9} {new['upper']!s:>6} {ratio(new):>6.2f} {new['seconds']:>8.1f}"
        if baseline:
            wider = (new["upper"] or 10 ** 9) - (new["lower"] or 0) > (old["upper"] or 10 ** 9) - (old["lower"] or 0)
            s += (f" | {old['lower']!s:>9} {old['upper']!s:>6} {ratio(old):>6.2f} {old['seconds']:>8.1f}"
                  f" | {new['seconds'] / old['seconds']:>9.2f} {'YES' if wider else 'no':>5}")
        lines.append(s)
    for L in sorted({k[0] for k, _, _ in rows}):
        sel = [(n, o) for (l, _), n, o in rows if l == L]
        s = (f"{L:>5} {'median':>7} | {'':>9} {'':>6} {median([ratio(n) for n, _ in sel]):>6.2f} "
             f"{median([n['seconds'] for n, _ in sel]):>8.1f}")
        if baseline:
            s += (f" | {'':>9} {'':>6} {median([ratio(o) for _, o in sel]):>6.2f} "
                  f"{median([o['seconds'] for _, o in sel]):>8.1f}"
                  f" | {median([n['seconds'] / o['seconds'] for n, o in sel]):>9.2f}")
        lines.append(s)
    if baseline:
        lines.append(f"old: revision {baseline}" + (" (rows from the cache: measured in an earlier run)" if cached else ""))
    lines.append("seconds: certkit.certify in a fresh process, one BLAS thread; median ratio = median of per-head new/old")
    for (L, name), new, old in rows:
        for which, r in (("new", new), ("old", old)):
            if r and "failed" in r:
                lines.append(f"{which} L={L} {name} failed: {r['failed']}")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--lengths", default="1024")
    p.add_argument("--layers", default="0,15,29")
    p.add_argument("--heads", default="3,7")
    p.add_argument("--eps", default="1/4")
    p.add_argument("--baseline", metavar="REV", help="also run this git revision (e.g. the commit before the change)")
    p.add_argument("--pairs", action="store_true", help="run old and new of a head at the same time (one core each)")
    p.add_argument("--cache", help="JSON file of the old revision's rows (read, and written after each head)")
    p.add_argument("--out", help="also write the table to this file")
    p.add_argument("--timeout", type=float, default=3600)
    a = p.parse_args()
    ints = lambda s: [int(x) for x in s.split(",")]
    cache = {}
    if a.cache and os.path.exists(a.cache):
        with open(a.cache) as f:
            cache = json.load(f)
    base = None
    if a.baseline:
        rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", a.baseline], check=True,
                             capture_output=True, text=True).stdout.strip()
        base = tempfile.mkdtemp(prefix="certkit-bench-real-baseline-")
        subprocess.run(["git", "-C", ROOT, "worktree", "add", "--detach", base, rev], check=True, capture_output=True)
    rows, cached = [], False
    try:
        with tempfile.TemporaryDirectory(prefix="certkit-bench-real-") as folder:
            heads = extract(ints(a.lengths), ints(a.layers), ints(a.heads), folder)
            for i, h in enumerate(heads):
                key = f"{a.baseline and rev}|{h[0]}|{h[1]}|{a.eps}"
                old = cache.get(key) if base else None
                cached |= old is not None
                if base and old is None and a.pairs:
                    po, pn = start(base, h, a.eps), start(ROOT, h, a.eps)
                    old, new = finish(po, a.timeout), finish(pn, a.timeout)
                else:
                    order = ("old", "new") if i % 2 == 0 else ("new", "old")
                    got = {}
                    for which in order:
                        if which == "new":
                            got["new"] = finish(start(ROOT, h, a.eps), a.timeout)
                        elif base and old is None:
                            got["old"] = finish(start(base, h, a.eps), a.timeout)
                    new, old = got["new"], got.get("old", old)
                if base and a.cache and "failed" not in old:
                    cache[key] = old
                    with open(a.cache, "w") as f:
                        json.dump(cache, f, indent=1)
                rows.append(((h[0], h[1]), new, old))
                print(f"L={h[0]} {h[1]}: new {new}" + (f"  old {old}" if base else ""), flush=True)
        text = table(rows, a.baseline and rev, cached)
        print(text)
        if a.out:
            os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
            with open(a.out, "w") as f:
                f.write(f"python benchmarks/bench_real_heads.py {' '.join(sys.argv[1:])}\n\n{text}\n")
    finally:
        if base:
            subprocess.run(["git", "-C", ROOT, "worktree", "remove", "--force", base], capture_output=True)


if __name__ == "__main__":
    main()
