"""Benchmark: the verify route auto (the default) against the fast route, side by side in one run.

    python benchmarks/bench_auto_route.py [--repeats 5] [--sizes 32 64 128 256 316]

1. Claims that already pass: every committed certificate under data/certificates and
   tests/golden/valid, checked by route fast and route auto in alternating order (ABBA), medians
   per file; the ratio auto/fast (auto takes the fast route first, so it should be 1).
2. Rescued claims: upper-factorization (truncated SVD factors) and upper-covering certificates on
   Gaussian heads with n = N in --sizes (n N <= 10^5), plus a "cancelling" head whose queries and
   keys have entries near 2^30 that cancel in q.k, with eps placed a relative 2^-40, 2^-30, 2^-20
   or 2^-10 above the exact max row error (an independent Arb reference at 256 bits,
   tests/arb_reference.py); how many each route VERIFIES, and auto's time.  The same claims
   placed 2^-40 *below* the exact value must be REJECTED by every route.
3. Held-out families (tests/precision_families.py): the float softmax given
   back as its own approximation and twin rows (true errors near 1e-16), beta 2^20 and 2^30 on
   nearly equal keys, column weights, plain Gaussian heads (n = N in --family-sizes, one set per
   seed in --seeds) and one head of
   n = N = --large (n N > 2^20), and the float softmax of a head of n = N = --large-self (n N > 2^20,
   every row open on the fast route) as its own approximation; factorization and covering claims with eps = truth (1 + 1e-6) (true)
   and truth (1 - 1e-6) (false), truth from the 256-bit Arb reference.  VERIFIED per route, the
   share of true claims auto rejects (goal <= 1 %), false claims VERIFIED by any route (must be 0).
   --before CHECKOUT: the same certificate files checked by route auto of another checkout of
   certkit (e.g. the main branch before this change), in a subprocess, side by side.
"""
import argparse
import glob
import json
import os
import subprocess
import statistics
import sys
import tempfile
import time
from fractions import Fraction

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path[:0] = [ROOT, os.path.join(ROOT, "tests")]

import flint  # noqa: E402

import certkit  # noqa: E402
from certkit.choices import check  # noqa: E402
from certkit.search import basic, writer  # noqa: E402
from arb_reference import attention_rows, factor_row_errors, eps_near, truncated_svd  # noqa: E402
import precision_families  # noqa: E402

RELS = (2.0 ** -40, 2.0 ** -30, 2.0 ** -20, 2.0 ** -10)


def passing(repeats):
    files = sorted(glob.glob(os.path.join(ROOT, "data", "certificates", "*.json"))
                   + glob.glob(os.path.join(ROOT, "tests", "golden", "valid", "*.json")))
    ratios, tf, ta = [], [], []
    for f in files:
        t = {"fast": [], "auto": []}
        for r in range(repeats):
            for route in (("fast", "auto") if r % 2 == 0 else ("auto", "fast")):
                s = time.perf_counter()
                v = check(f, route)
                t[route].append(time.perf_counter() - s)
                assert v.status == "VERIFIED", (f, route, v.line())
        f_med, a_med = statistics.median(t["fast"]), statistics.median(t["auto"])
        tf.append(f_med)
        ta.append(a_med)
        ratios.append(a_med / f_med)
    print(f"1. claims that pass: {len(files)} certificates x {repeats} repeats (ABBA)")
    print(f"   total of medians: fast {sum(tf):.3f} s, auto {sum(ta):.3f} s, ratio {sum(ta) / sum(tf):.3f}")
    print(f"   per-file ratio auto/fast: median {statistics.median(ratios):.3f}, "
          f"min {min(ratios):.3f}, max {max(ratios):.3f}")


def cancelling(n, rng):
    a, b = np.zeros(8), np.zeros(8)
    a[:2], b[:2] = (1, 1), (1, -1)
    return (2.0 ** 30 * a + rng.standard_normal((n, 8)) * 2.0 ** -10,
            2.0 ** 30 * b + rng.standard_normal((n, 8)) * 2.0 ** -10, Fraction(1, 2 ** 20))


def heads(sizes):
    rng = np.random.default_rng(0)
    for n in sizes:
        yield f"gauss-n{n}", rng.standard_normal((n, 16)) * 0.5, rng.standard_normal((n, 16)) * 0.5, Fraction(1)
    yield "cancelling-n64", *cancelling(64, rng)


def claims(Q, K, beta):
    """(kind, bound, witness, exact row-error balls) of an upper-factorization and an upper-covering claim."""
    head = certkit.Head.from_arrays(Q, K, beta)
    A = head.attention()
    rows = attention_rows(Q, K, beta)
    out = []
    s = np.linalg.svd(A, compute_uv=False)
    k = max(1, int(np.searchsorted(-s, -s[0] * 1e-2)))          # a rank with a visible error
    U, V = truncated_svd(A, k)
    out.append(("upper-factorization", k, {"U": (U, "float"), "V": (V, "float")}, factor_row_errors(rows, U, V)))
    reps, sigma = basic.greedy_cover(A, 0.5)
    with flint.ctx.workprec(256):
        err = [sum((abs(a - b) for a, b in zip(rows[i], rows[t])), flint.arb(0)) for i, t in enumerate(sigma)]
    if max(float(e.mid()) for e in err) > 0:
        out.append(("upper-covering", len(reps), {"representatives": (reps, "int"), "assignment": (sigma, "int")}, err))
    return head, out


def rescued(sizes):
    print("2. claims a relative distance above (+) or below (-) the exact max row error")
    print("| head | kind | n N | exact error | " + " | ".join(f"+2^{int(np.log2(r))}: fast / auto" for r in RELS)
          + " | auto s at +2^-40 | -2^-40: fast / arb / auto |")
    print("|---" * (5 + len(RELS) + 1) + "|")
    totals = {r: [0, 0] for r in RELS}
    wrong = 0
    with tempfile.TemporaryDirectory() as tmp:
        for name, Q, K, beta in heads(sizes):
            head, found = claims(Q, K, beta)
            for kind, bound, wit, err in found:
                cells, t_auto = [], None
                exact = max(float(e.mid()) for e in err)
                for rel in RELS:
                    if exact * rel < 2.0 ** -70:          # below the 2^-80 grid of eps_near
                        cells.append("-")
                        continue
                    p = writer.certificate(os.path.join(tmp, "c.json"), kind, bound, eps_near(err, rel), head, wit)
                    vf = check(p, "fast")
                    s = time.perf_counter()
                    va = check(p, "auto")
                    if rel == RELS[0]:
                        t_auto = time.perf_counter() - s
                    ok = (vf.status == "VERIFIED", va.status == "VERIFIED")
                    totals[rel][0] += ok[0]
                    totals[rel][1] += ok[1]
                    cells.append(" / ".join("V" if x else "R" for x in ok))
                p = writer.certificate(os.path.join(tmp, "c.json"), kind, bound, eps_near(err, -RELS[0]), head, wit)
                below = [check(p, r).status for r in ("fast", "arb", "auto")]
                wrong += sum(b != "REJECTED" for b in below)
                print(f"| {name} | {kind} | {head.n * head.N} | {exact:.3g} | " + " | ".join(cells)
                      + f" | {'-' if t_auto is None else f'{t_auto:.2f}'} | {' / '.join(b[0] for b in below)} |")
    print("   verified (fast / auto): " + ", ".join(f"+2^{int(np.log2(r))}: {a} / {b}" for r, (a, b) in totals.items()))
    print(f"   false claims 2^-40 below the exact value accepted by any route: {wrong}")


BEFORE = """import json, sys
from certkit.choices import check
print(json.dumps({p: check(p, "auto").status for p in sys.argv[1:]}))
"""
REL = Fraction(1, 10 ** 6)


def families(sizes, seeds, large, before, large_self=None):
    print(f"3. held-out families: eps = truth (1 + 1e-6) (true) and truth (1 - 1e-6) (false)")
    print("| family | head | kind | n N | exact error | true: fast / arb / auto | auto s | false: fast / arb / auto |"
          + (" before: true / false |" if before else ""))
    print("|---" * (8 + bool(before)) + "|")
    rows, files = [], []
    with tempfile.TemporaryDirectory() as tmp:
        heads = [(seed, h) for seed in seeds
                 for h in precision_families.heads(sizes, seed, *((large, large_self) if seed == seeds[0] else ()))]
        for seed, (family, name, Q, K, beta, w, labels) in heads:
            name = f"{name}-s{seed}"
            head, found = precision_families.claims(Q, K, beta, w, labels)
            for label, kind, bound, wit, err in found:
                exact = max(float(e.mid()) for e in err)
                got, paths = {}, []
                for sign in (1, -1):
                    p = writer.certificate(os.path.join(tmp, f"{name}-{label}-{'true' if sign > 0 else 'false'}.json"),
                                           kind, bound, eps_near(err, sign * REL), head, wit)
                    paths.append(p)
                    for route in ("fast", "arb", "auto"):
                        s = time.perf_counter()
                        got[sign, route] = check(p, route).status
                        got[sign, route, "s"] = time.perf_counter() - s
                rows.append((family, name, label, kind, head.n * head.N, exact, got, paths))
                files += paths
        old = {}
        if before:
            env = dict(os.environ, PYTHONPATH=os.path.abspath(before))
            run = subprocess.run([sys.executable, "-c", BEFORE, *files], capture_output=True, text=True, env=env,
                                 cwd=os.path.abspath(before), check=True)
            old = json.loads(run.stdout)
    letter = lambda st: "V" if st == "VERIFIED" else st[0]
    for family, name, label, kind, nN, exact, got, paths in rows:
        cells = [" / ".join(letter(got[sign, r]) for r in ("fast", "arb", "auto")) for sign in (1, -1)]
        print(f"| {family} | {name}-{label} | {kind} | {nN} | {exact:.3g} | {cells[0]} | {got[1, 'auto', 's']:.2f} | "
              f"{cells[1]} |" + (f" {letter(old[paths[0]])} / {letter(old[paths[1]])} |" if before else ""))
    n = len(rows)
    for route in ("fast", "arb", "auto"):
        v = sum(got[1, route] == "VERIFIED" for *_, got, _ in rows)
        print(f"   {route}: {v} of {n} true claims VERIFIED, {n - v} rejected ({100 * (n - v) / max(n, 1):.1f} %)")
    wrong = sum(got[-1, r] == "VERIFIED" for *_, got, _ in rows for r in ("fast", "arb", "auto"))
    print(f"   false claims (truth (1 - 1e-6)) VERIFIED by any route: {wrong} of {3 * n} checks")
    if before:
        v = sum(old[paths[0]] == "VERIFIED" for *_, paths in rows)
        w = sum(old[paths[1]] == "VERIFIED" for *_, paths in rows)
        print(f"   before (route auto of the other checkout): {v} of {n} true claims VERIFIED, {n - v} rejected "
              f"({100 * (n - v) / max(n, 1):.1f} %); false claims VERIFIED: {w}")
    per = {}
    for family, *_, got, _ in rows:
        per.setdefault(family, []).append(got[1, "auto"] == "VERIFIED")
    print("   auto, true claims VERIFIED per family: " + ", ".join(f"{f} {sum(v)}/{len(v)}" for f, v in per.items()))
    print(f"   auto time on true claims: total {sum(got[1, 'auto', 's'] for *_, got, _ in rows):.1f} s, "
          f"max {max(got[1, 'auto', 's'] for *_, got, _ in rows):.2f} s")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--sizes", type=int, nargs="+", default=[32, 64, 128, 256, 316])
    ap.add_argument("--family-sizes", type=int, nargs="+", default=[16, 32, 64, 128, 256])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2, 3, 4], help="part 3: one set of heads per seed")
    ap.add_argument("--large", type=int, default=1100, help="n = N of the large head (0: none)")
    ap.add_argument("--large-self", type=int, default=1100,
                    help="n = N of the large head whose float softmax is its own approximation (0: none)")
    ap.add_argument("--before", help="another checkout of certkit whose route auto checks the part-3 files too")
    ap.add_argument("--parts", type=int, nargs="+", default=[1, 2, 3])
    a = ap.parse_args()
    if 1 in a.parts:
        passing(a.repeats)
    if 2 in a.parts:
        rescued(a.sizes)
    if 3 in a.parts:
        families(a.family_sizes, a.seeds, a.large, a.before, a.large_self)


if __name__ == "__main__":
    main()
