"""Benchmark: certified sandwiches and the peers on the committed heads (data/heads), side by side.

    python benchmarks/bench_certify.py [--eps 1/10,1/4,1/2] [--heads data/heads/*] [--out DIR]

Per head and eps: our lower bound, our upper rank, each peer's smallest k with kernel-certified
row-l1 error <= eps (svd, nystrom, performer, linformer), our time.  Every certificate is
re-checked by `certkit verify`'s kernel before it counts.  Printed: the median and maximum of
ours / truncated-SVD (goals: median <= 0.8, never > 1), the median upper / lower (goal <= 2),
and the median time per (head, eps) and per head over all eps at n = 128 (goal <= 5 s, 2 cores).
"""
import argparse
import glob
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from certkit.driver import certify_head  # noqa: E402
from certkit.head import Head  # noqa: E402
from certkit.choices import check  # noqa: E402
from certkit.numbers import parse_eps_list  # noqa: E402

PEERS = ("svd", "nystrom", "performer", "linformer")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eps", default="1/10,1/4,1/2")
    here = os.path.join(os.path.dirname(__file__), "..", "data", "heads")
    ap.add_argument("--heads", nargs="*", default=sorted(glob.glob(os.path.join(here, "*"))))
    ap.add_argument("--out", default=None, help="keep the certificates here (default: a temporary folder)")
    args = ap.parse_args()
    eps_list = parse_eps_list(args.eps, "--eps")
    out = args.out or tempfile.mkdtemp(prefix="bench-certify-")
    rows, per_head = [], {}
    cols = ["head", "eps", "lower", "ours", *PEERS, "ours/svd", "up/low", "seconds"]
    print(" ".join(f"{c:>10}" if i else f"{c:<26}" for i, c in enumerate(cols)))
    for path in args.heads:
        h = Head.from_file(path)
        t0 = time.perf_counter()
        new = certify_head(h, eps_list, out, peers=PEERS)
        per_head[h.name] = (h.n, sum(r["seconds"] for r in new), time.perf_counter() - t0)
        for r in new:
            for key in ("lower_file", "upper_file"):
                v = check(os.path.join(out, r[key]))
                assert v.status == "VERIFIED", (r[key], v.line())
            r["ratio_svd"] = r["upper"] / r["peers"]["svd"]["k"]
            r["ratio_sandwich"] = r["upper"] / r["lower"]
            rows.append(r)
            vals = [r["head"][:26], r["eps"], r["lower"], r["upper"], *(r["peers"][p]["k"] for p in PEERS),
                    f"{r['ratio_svd']:.3f}", f"{r['ratio_sandwich']:.3f}", f"{r['seconds']:.2f}"]
            print(" ".join(f"{'-' if v is None else v!s:>10}" if i else f"{v:<26}" for i, v in enumerate(vals)),
                  flush=True)
    rs = [r["ratio_svd"] for r in rows]
    sw = [r["ratio_sandwich"] for r in rows]
    t128 = [r["seconds"] for r in rows if r["n"] == 128]
    h128 = [v[1] for v in per_head.values() if v[0] == 128]
    print()
    print(f"{len(rows)} (head, eps) pairs, {2 * len(rows)} certificates, all VERIFIED by the kernel ({out})")
    print(f"ours / truncated SVD:  median {statistics.median(rs):.3f}   max {max(rs):.3f}   "
          f"(goal: median <= 0.8, never > 1)")
    loose = [x for r, x in zip(rows, rs) if r["lower"] < r["peers"]["svd"]["k"]]
    if loose:
        print(f"   on the {len(loose)} pairs where SVD is not already proven optimal (lower < svd): "
              f"median {statistics.median(loose):.3f}")
    print(f"upper / lower:         median {statistics.median(sw):.3f}   max {max(sw):.3f}   "
          f"tight (upper = lower) {sum(x == 1 for x in sw)}/{len(sw)}   (goal: median <= 2)")
    for p in PEERS[1:]:
        ks = [r["peers"][p]["k"] for r in rows]
        miss = sum(k is None for k in ks)
        rat = [r["upper"] / k for r, k in zip(rows, ks) if k]
        med = f"median {statistics.median(rat):.3f}" if rat else "median -"
        print(f"ours / {p:<10}     {med} over {len(rat)} pairs" + (f"; {p} never certified on {miss}" if miss else ""))
    if t128:
        print(f"time at n = 128:       median {statistics.median(t128):.2f} s per (head, eps), max {max(t128):.2f} s; "
              f"median {statistics.median(h128):.2f} s per head over {len(eps_list)} eps (ours, without peers; "
              f"goal <= 5 s on 2 cores)")


if __name__ == "__main__":
    main()
