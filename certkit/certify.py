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
import time
from fractions import Fraction


from . import synthetic
from .headfile import read_head, beta_float, parse_beta, HeadFileError
from .kernel import check
from .kernel.rule_factorization import max_row_error
from .search import lower, upper, writer

EPS_DEFAULT = "1/10,1/4,1/2"


class CertifyError(Exception):
    """Bad input to certify (a message naming the argument/file/value)."""


# ---------------------------------------------------------------- inputs

def parse_eps_list(text):
    """'0.1,1/4' -> [Fraction(1,10), Fraction(1,4)]: exact (decimal strings are read exactly)."""
    out = []
    for part in str(text).split(","):
        part = part.strip()
        try:
            e = Fraction(part)
        except (ValueError, ZeroDivisionError):
            raise CertifyError(f"--eps: {part!r} is not a number (use decimals or p/q)") from None
        if not 0 < e < 1:
            raise CertifyError(f"--eps: {part} is outside (0, 1) (for eps >= 1, B = 0 already gives r_eps = 0)")
        out.append(e)
    if not out:
        raise CertifyError("--eps: empty list")
    return out


SYNTH = re.compile(r"^(?P<family>[a-z-]+)(?::(?P<params>.*))?$")


def parse_synthetic(spec):
    """'gaussian:n=64,d=8,beta=2,seed=0' -> (name, head dict)."""
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
        beta = Fraction(p["beta"])
    except (ValueError, ZeroDivisionError):
        raise CertifyError(f"--synthetic {spec!r}: n, N, d, seed must be integers and beta a number") from None
    if min(n, d, N or 1) < 1 or n > 4096 or (N or 0) > 4096 or beta < 0:
        raise CertifyError(f"--synthetic {spec!r}: need 1 <= n, N <= 4096, d >= 1, beta >= 0")
    h = synthetic.head(m["family"], n, d, beta=beta, N=N, seed=seed)
    name = f"{m['family']}-n{n}" + (f"-N{N}" if N else "") + f"-d{d}-beta{_tag(beta)}-seed{seed}"
    return name, h


def load_head(path, beta=None):
    """(name, head) from a .npz/.safetensors head file (certkit.headfile)."""
    try:
        h = read_head(path, beta=beta)
    except HeadFileError as e:
        raise CertifyError(str(e)) from None
    return os.path.splitext(os.path.basename(path))[0], h


def _tag(x):
    return str(x).replace("/", "_")


# ---------------------------------------------------------------- one head, one eps

def _write_checked(path, kind, bound, eps, h, wit, prov, layout=None):
    """Write and kernel-check one certificate; a rejected file is removed with its own sidecars.
    layout: writer.certificate options (inline_limit, shared)."""
    writer.certificate(path, kind, bound, eps, h, wit, provenance=prov, **(layout or {}))
    v = check(path)
    if v.status != "VERIFIED":
        _remove(path)
    return v


def _remove(path):
    stem = os.path.splitext(path)[0]
    d = os.path.dirname(path) or "."
    for f in os.listdir(d):
        full = os.path.join(d, f)
        if full == path or (full.startswith(stem + ".") and f.endswith(".npy")):
            os.remove(full)


def certify_lower(A, eps, h, path, prov, layout=None, growth=None):
    """Best kernel-VERIFIED lower certificate among the candidates: dict or None.
    growth: a list kept by the caller across the eps of one A (lower.grow_inverse)."""
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
        v = _write_checked(path, kind, M, eps, h, wit, dict(prov, search=kind), layout)
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
    v = _write_checked(path, "upper-factorization", r["k"], eps, h, wit, dict(prov, search=r["method"]), layout)
    if v.status != "VERIFIED":       # the judge and check agree by construction; never claim otherwise
        return None
    return {"bound": r["k"], "kind": "upper-factorization", "method": r["method"], "file": path,
            "svd_rank": r["svd_rank"], "certified_error": r["certified_error"], "verdict": v.line(),
            "tried": r["tried"]}


def certify_head(name, h, eps_list, out_dir, peers=(), seed=0, attempts=24):
    """Rows of the summary for one head (one per eps); certificates under out_dir/name/."""
    hf = dict(h, beta=beta_float(h["beta"]))
    A = synthetic.attention(hf)
    inst = writer.kernel_instance(h)
    n, N, d = int(h["Q"].shape[0]), int(h["K"].shape[0]), int(h["Q"].shape[1])
    rows = []
    for eps in eps_list:
        t0 = time.perf_counter()
        base = os.path.join(out_dir, name, f"eps-{_tag(eps)}")
        os.makedirs(os.path.dirname(base), exist_ok=True)
        prov = {"producer": "certkit certify", "head": name, "n": n, "N": N, "d": d}
        lo = certify_lower(A, eps, h, base + ".lower.json", prov)
        floor = lo["bound"] if lo else 1
        up = certify_upper(A, eps, h, inst, base + ".upper.json", prov, floor=floor, attempts=attempts)
        t_ours = time.perf_counter() - t0
        row = {"head": name, "n": n, "N": N, "d": d, "beta": str(h["beta"]), "eps": str(eps),
               "lower": lo["bound"] if lo else None, "lower_kind": lo["kind"] if lo else None,
               "upper": up["bound"] if up else None, "upper_method": up["method"] if up else None,
               "svd_rank": up["svd_rank"] if up else None,
               "lower_file": os.path.relpath(lo["file"], out_dir) if lo else None,
               "upper_file": os.path.relpath(up["file"], out_dir) if up else None,
               "seconds": round(t_ours, 3), "peers": {}}
        for p in peers:
            from .search import peers as peer_mod
            try:
                res = peer_mod.smallest_rank(p, A, h, inst, float(eps), seed=seed)
            except ValueError as e:                 # the peer does not apply to this head
                row["peers"][p] = {"k": None, "certified_error": None, "seconds": 0.0, "note": str(e)}
                continue
            row["peers"][p] = {"k": res["k"], "certified_error": res["certified_error"],
                               "seconds": round(res["seconds"], 3)}
        rows.append(row)
    return rows


# ---------------------------------------------------------------- summary

def sandwich(row):
    lo = row["lower"] if row["lower"] is not None else 0
    up = row["upper"] if row["upper"] is not None else "?"
    return f"{lo} <= r_eps(A) <= {up}"


def summary_markdown(rows, peers):
    head = ["head", "n", "N", "d", "beta", "eps", "lower", "upper", "sandwich", "lower by", "upper by"] + \
           [f"{p} k" for p in peers] + ["seconds"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["head"], r["n"], r["N"], r["d"], r["beta"], r["eps"], r["lower"], r["upper"], sandwich(r),
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
                   "optional beta, weights, bias; see certkit/headfile.py)")
    p.add_argument("--synthetic", action="append", default=[], metavar="SPEC",
                   help="a synthetic head FAMILY[:n=..,N=..,d=..,beta=..,seed=..], FAMILY one of "
                        + ", ".join(synthetic.FAMILIES) + " (repeatable)")
    p.add_argument("--beta", help="temperature for head files without one (e.g. 1/8 or 1/sqrt(64))")
    p.add_argument("--eps", default=EPS_DEFAULT, help=f"comma-separated tolerances, exact (default {EPS_DEFAULT})")
    p.add_argument("--out", default="data/certify", metavar="DIR", help="output folder (default data/certify)")
    p.add_argument("--peers", default="svd,nystrom,performer,linformer",
                   help="comma-separated peers to compare (svd, nystrom, performer, linformer) or 'none'")
    p.add_argument("--seed", type=int, default=0, help="seed of the random peers (default 0)")
    p.add_argument("--attempts", type=int, default=24, help="refinement steps of the upper search (default 24)")
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON on stdout")


def run(args):
    """certkit certify: exit 0 if every (head, eps) got both certificates, 1 if some bound is
    missing, 2 on bad input."""
    import sys
    try:
        eps_list = parse_eps_list(args.eps)
        peers = [] if args.peers.strip() == "none" else [p.strip() for p in args.peers.split(",") if p.strip()]
        if peers:
            from .search.peers import PEERS
        for p in peers:
            if p not in PEERS:
                raise CertifyError(f"--peers: unknown peer {p!r} (choose from {', '.join(PEERS)} or none)")
        beta = parse_beta(args.beta) if args.beta else None
        heads = [load_head(f, beta) for f in args.heads] + [parse_synthetic(s) for s in args.synthetic]
        if not heads:
            raise CertifyError("no heads: give HEAD files or --synthetic SPEC (see certkit certify --help)")
    except (CertifyError, HeadFileError, ValueError) as e:
        print(f"certkit certify: error: {e}", file=sys.stderr)
        return 2
    names = [n for n, _ in heads]
    if len(set(names)) != len(names):
        print("certkit certify: error: two heads share the name "
              f"{next(n for n in names if names.count(n) > 1)!r}", file=sys.stderr)
        return 2
    tty = sys.stderr.isatty()
    rows, t0 = [], time.perf_counter()
    for i, (name, h) in enumerate(heads, 1):
        if tty:
            print(f"\r[{i}/{len(heads)}] {name[:60]:<60}", end="", file=sys.stderr, flush=True)
        try:
            new = certify_head(name, h, eps_list, args.out, peers, args.seed, args.attempts)
        except Exception as e:                      # a bug: say where, never a traceback
            print(f"\ncertkit certify: internal error on head {name}: {type(e).__name__}: {e}", file=sys.stderr)
            return 4
        rows.extend(new)
        write_summary(rows, args.out, peers)          # nothing lost on interruption
        if tty:
            print("\r" + " " * 70 + "\r", end="", file=sys.stderr)
        if not args.json:
            for r in new:
                peer_txt = "  ".join(f"{p}={r['peers'][p]['k'] or '-'}" for p in peers)
                print(f"{r['head']}  eps={r['eps']}:  {sandwich(r)}   ({r['lower_kind']}; {r['upper_method']})"
                      f"{'   peers: ' + peer_txt if peers else ''}  [{r['seconds']:.2f} s]")
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    print(f"{len(rows)} sandwiches in {time.perf_counter() - t0:.1f} s; certificates and summary.md/json "
          f"under {args.out}", file=sys.stderr)
    return 0 if all(r["lower"] is not None and r["upper"] is not None for r in rows) else 1
