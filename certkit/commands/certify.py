"""certkit certify: certified sandwiches  lower <= r_eps(A) <= upper  for concrete heads.

For each head and eps: the untrusted searches (certkit/search/lower.py, upper.py) propose
certificates; each is written in format 1.0 and decided by the kernel (certkit.kernel.check);
only VERIFIED certificates are kept and reported.  The lower search runs first so that the
upper search can stop when it meets it.  The peers (certkit/search/peers.py) report the
smallest k at which each practitioner's approximation has kernel-certified row-l1 error <= eps.
"""
import json
import os
import re
import tempfile
import time
from fractions import Fraction

from .. import synthetic
from ..errors import UserError
from ..head import Head
from ..kernel import max_row_error
from ..numbers import exact, parse_beta, parse_eps_list, tag
from ..search import lower, upper, writer

EPS_DEFAULT = "1/10,1/4,1/2"
PEERS_DEFAULT = "svd,nystrom,performer,linformer"
LAYOUT = {"shared": True}    # content-named sidecars: a certificate's bytes do not depend on its file name


class CertifyError(UserError):
    """Bad input to certify (a message naming the argument/file/value)."""


# ---------------------------------------------------------------- inputs

SYNTH = re.compile(r"^(?P<family>[a-z-]+)(?::(?P<params>.*))?$")


def parse_synthetic(spec):
    """'gaussian:n=64,d=8,beta=2,seed=0' -> the synthetic Head (named by its parameters)."""
    m = SYNTH.match(spec.strip())
    if not m or m["family"] not in synthetic.FAMILIES:
        raise CertifyError(f"--synthetic {spec!r}: family must be one of {', '.join(synthetic.FAMILIES)} "
                           f"(e.g. gaussian:n=64,d=8,beta=2,seed=0)")
    p = {"n": "64", "d": "8", "beta": "1", "seed": "0"}
    for kv in filter(None, (m["params"] or "").split(",")):
        if "=" not in kv or kv.split("=")[0].strip() not in ("n", "N", "d", "beta", "seed"):
            raise CertifyError(f"--synthetic {spec!r}: {kv!r} is not one of n=, N=, d=, beta=, seed=")
        k, v = kv.split("=", 1)
        p[k.strip()] = v.strip()
    try:
        n, d, seed = int(p["n"]), int(p["d"]), int(p["seed"])
        N = int(p["N"]) if "N" in p else None
    except ValueError:
        raise CertifyError(f"--synthetic {spec!r}: n, N, d, seed must be integers") from None
    beta = exact(p["beta"], f"--synthetic {spec!r}: beta")
    if min(n, d, N or 1) < 1 or n > 4096 or (N or 0) > 4096 or beta < 0:
        raise CertifyError(f"--synthetic {spec!r}: need 1 <= n, N <= 4096, d >= 1, beta >= 0")
    name = f"{m['family']}-n{n}" + (f"-N{N}" if N else "") + f"-d{d}-beta{tag(beta)}-seed{seed}"
    return synthetic.head(m["family"], n, d, beta=beta, N=N, seed=seed, name=name)


# ---------------------------------------------------------------- one head, one eps

def certify_lower(A, eps, h, path, prov, layout=None, growth=None):
    """Best kernel-VERIFIED lower certificate among the candidates: dict or None.
    A: h.attention(); growth: a list kept by the caller across the eps of one A (lower.grow_inverse)."""
    e = float(eps)
    cands = [(M, kind, {"messages": (msgs, "int"), "cells": (cells, "int")})
             for kind, M, msgs, cells in lower.decoding_candidates(A, e, growth=growth)]
    for M, rows, cells in lower.frobenius_candidates(A, e):
        wit = {}
        if rows is not None:
            wit["rows"] = (rows, "int")
        if cells is not None:
            wit["cells"] = (cells, "int")
        cands.append((M, "lower-frobenius-tail", wit))
    cands.sort(key=lambda c: -c[0])
    tried = []
    for M, kind, wit in cands:
        v = writer.write_checked(path, kind, M, eps, h, wit, dict(prov, search=kind), **(layout or {}))
        tried.append({"kind": kind, "bound": M, "verdict": v.status})
        if v.status == "VERIFIED":
            return {"bound": M, "kind": kind, "file": path, "verdict": v.line(), "tried": tried}
    return None


def certify_upper(A, eps, h, inst, path, prov, floor=1, attempts=24, layout=None, **search_kw):
    """Smallest kernel-VERIFIED factorisation certificate found: dict or None.
    search_kw: passed to upper.search (e.g. refine's early give-up points)."""
    judge = lambda U, V: max_row_error(inst, U, V, "fast")[0]
    r = upper.search(A, float(eps), judge, floor=floor, attempts=attempts, **search_kw)
    if r["k"] is None:
        return None
    wit = {"U": (r["U"], "float"), "V": (r["V"], "float")}
    v = writer.write_checked(path, "upper-factorization", r["k"], eps, h, wit, dict(prov, search=r["method"]),
                             **(layout or {}))
    if v.status != "VERIFIED":       # the judge and check agree by construction; never claim otherwise
        return None
    return {"bound": r["k"], "kind": "upper-factorization", "method": r["method"], "file": path,
            "svd_rank": r["svd_rank"], "certified_error": r["certified_error"], "verdict": v.line(),
            "tried": r["tried"]}


def sandwich(head, eps, peers=(), seed=0, attempts=24, A=None, inst=None):
    """The certified Sandwich lower <= r_eps(A) <= upper of head at eps (both ends kernel-VERIFIED
    certificates held in memory; None where the search found none), with the peers' smallest k.
    A, inst: head.attention() and head.instance() when the caller shares them between eps."""
    from ..api import Certificate, Sandwich
    t0 = time.perf_counter()
    A = head.attention() if A is None else A
    inst = head.instance() if inst is None else inst
    prov = {"producer": "certkit certify", "head": head.name, "n": head.n, "N": head.N, "d": head.d}
    with tempfile.TemporaryDirectory(prefix="certkit-") as tmp:
        lo = certify_lower(A, eps, head, os.path.join(tmp, "lower.json"), prov, LAYOUT)
        up = certify_upper(A, eps, head, inst, os.path.join(tmp, "upper.json"), prov,
                           floor=lo["bound"] if lo else 1, attempts=attempts, layout=LAYOUT)
        lower_c = Certificate.read(lo["file"], search=lo) if lo else None
        upper_c = Certificate.read(up["file"], search=up) if up else None
    seconds = time.perf_counter() - t0
    found = {}
    for p in peers:
        from ..search import peers as peer_mod
        try:
            res = peer_mod.smallest_rank(p, A, head, inst, float(eps), seed=seed)
        except ValueError as e:                 # the peer does not apply to this head
            found[p] = {"k": None, "certified_error": None, "seconds": 0.0, "note": str(e)}
            continue
        found[p] = {"k": res["k"], "certified_error": res["certified_error"], "seconds": round(res["seconds"], 3)}
    return Sandwich(head, Fraction(eps), lower_c, upper_c, found, round(seconds, 3))


def certify_head(head, eps_list, out_dir, peers=(), seed=0, attempts=24):
    """Summary rows of one head (one per eps); certificates under out_dir/<head name>/eps-<eps>.*."""
    A, inst = head.attention(), head.instance()
    rows = []
    for eps in eps_list:
        s = sandwich(head, eps, peers, seed, attempts, A=A, inst=inst)
        files = s.save(os.path.join(out_dir, head.name), prefix=f"eps-{tag(eps)}.")
        rows.append(s.row({k: os.path.relpath(v, out_dir) for k, v in files.items()}))
    return rows


# ---------------------------------------------------------------- summary

def sandwich_text(row):
    lo = row["lower"] if row["lower"] is not None else 0
    up = row["upper"] if row["upper"] is not None else "?"
    return f"{lo} <= r_eps(A) <= {up}"


def summary_markdown(rows, peers):
    head = ["head", "n", "N", "d", "beta", "eps", "lower", "upper", "sandwich", "lower by", "upper by"] + \
           [f"{p} k" for p in peers] + ["seconds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["head"], r["n"], r["N"], r["d"], r["beta"], r["eps"], r["lower"], r["upper"], sandwich_text(r),
                 r["lower_kind"], r["upper_method"]] + \
                [r["peers"].get(p, {}).get("k") for p in peers] + [r["seconds"]]
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def write_summary(rows, out_dir, peers):
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(rows, f, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write("# certkit certify: certified sandwiches lower <= r_eps(A) <= upper\n\n"
                "Every bound is a kernel-VERIFIED certificate (files relative to this directory); "
                "peer columns: the smallest k at which that approximation's certified max row "
                "l1 error is <= eps.\n\n")
        f.write(summary_markdown(rows, peers))


# ---------------------------------------------------------------- command line

def add_arguments(p):
    p.add_argument("heads", nargs="*", metavar="HEAD", help=".npz or .safetensors head files (arrays Q, K; "
                   "optional beta, weights, bias; see certkit/head.py)")
    p.add_argument("--synthetic", action="append", default=[], metavar="SPEC",
                   help="a synthetic head FAMILY[:n=..,N=..,d=..,beta=..,seed=..], FAMILY one of "
                        + ", ".join(synthetic.FAMILIES) + " (repeatable)")
    p.add_argument("--beta", help="temperature for head files without one (e.g. 1/8 or 1/sqrt(64))")
    p.add_argument("--eps", default=EPS_DEFAULT, help=f"comma-separated tolerances, exact (default {EPS_DEFAULT})")
    p.add_argument("--out", default="data/certify", metavar="DIR", help="output folder (default data/certify)")
    p.add_argument("--peers", default=PEERS_DEFAULT,
                   help="comma-separated peers to compare (svd, nystrom, performer, linformer) or 'none'")
    p.add_argument("--seed", type=int, default=0, help="seed of the random peers (default 0)")
    p.add_argument("--attempts", type=int, default=24, help="refinement steps of the upper search (default 24)")
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON on stdout")


def run(args):
    """certkit certify: exit 0 if every (head, eps) got both certificates, 1 if some bound is
    missing; bad input raises a UserError (the CLI's exit 64/66)."""
    import sys
    eps_list = parse_eps_list(args.eps)
    peers = [] if args.peers.strip() == "none" else [p.strip() for p in args.peers.split(",") if p.strip()]
    if peers:
        from ..search.peers import PEERS
    for p in peers:
        if p not in PEERS:
            raise CertifyError(f"--peers: unknown peer {p!r} (choose from {', '.join(PEERS)} or none)")
    beta = parse_beta(args.beta, "--beta") if args.beta else None
    heads = [Head.from_file(f, beta) for f in args.heads] + [parse_synthetic(s) for s in args.synthetic]
    if not heads:
        raise CertifyError("no heads: give HEAD files or --synthetic SPEC (see certkit certify --help)")
    names = [h.name for h in heads]
    if len(set(names)) != len(names):
        raise CertifyError(f"two heads share the name {next(n for n in names if names.count(n) > 1)!r}")
    writer.ensure_folder(args.out, "--out")
    tty = sys.stderr.isatty()
    rows, t0 = [], time.perf_counter()
    for i, h in enumerate(heads, 1):
        if tty:
            print(f"\r[{i}/{len(heads)}] {h.name[:60]:<60}", end="", file=sys.stderr, flush=True)
        new = certify_head(h, eps_list, args.out, peers, args.seed, args.attempts)
        rows.extend(new)
        write_summary(rows, args.out, peers)          # nothing lost on interruption
        if tty:
            print("\r" + " " * 70 + "\r", end="", file=sys.stderr)
        if not args.json:
            for r in new:
                peer_txt = "  ".join(f"{p}={r['peers'][p]['k'] or '-'}" for p in peers)
                print(f"{r['head']}  eps={r['eps']}:  {sandwich_text(r)}   ({r['lower_kind']}; {r['upper_method']})"
                      f"{'   peers: ' + peer_txt if peers else ''}  [{r['seconds']:.2f} s]")
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    print(f"{len(rows)} sandwiches in {time.perf_counter() - t0:.1f} s; certificates and summary.md/json "
          f"under {args.out}", file=sys.stderr)
    return 0 if all(r["lower"] is not None and r["upper"] is not None for r in rows) else 1
