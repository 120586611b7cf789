"""certkit command line: a thin layer over the kernel and the producers.

  certkit verify CERT.json...   VERIFIED / REJECTED / MALFORMED / UNSUPPORTED (exit 0/1/2/3; 4 internal)
  certkit show CERT.json        the canonical claim, without checking
  certkit audit CERT.json...    chain quantities by five routes, disagreements flagged (exit 1)
  certkit tables [--out DIR]    certified constants as CSV / Markdown / LaTeX
  certkit certify HEAD...       certified sandwiches lower <= r_eps <= upper, peers compared
  certkit scale                 the sphere / ball / interaction scaling laws, every point a VERIFIED lower bound
  certkit calibrate             the real-model calibration grid (pretrained heads, offline)
"""
import argparse
import hashlib
import json
import os
import sys
import time

from . import __version__

DESCRIPTION = """certkit: machine-checkable certificates for the approximation rank of softmax attention,
r_eps(A) = min{ rank B : max_i ||A_i - B_i||_1 <= eps },  A = row-softmax(beta Q K^T)."""


def _verify(args):
    from .kernel import check, EXIT
    paths = list(args.certificates)
    code = 0
    if args.manifest:
        bad = _check_manifest(args.manifest)
        if bad:
            for line in bad:
                print(f"MALFORMED   {line}")
            code = EXIT["MALFORMED"]
    results, statuses = [], []
    tty = sys.stderr.isatty() and len(paths) > 1
    t0 = time.perf_counter()
    for i, p in enumerate(paths, 1):
        if tty:
            print(f"\r[{i}/{len(paths)}] {os.path.basename(p)[:50]:<50}", end="", file=sys.stderr, flush=True)
        t = time.perf_counter()
        v = check(p, route=args.route)
        dt = time.perf_counter() - t
        if tty:
            print("\r" + " " * 60 + "\r", end="", file=sys.stderr)
        if args.json:
            results.append({"file": p, "verdict": v.status, "message": v.message, "seconds": round(dt, 4),
                            "details": v.details})
        else:
            if v.status != "VERIFIED":
                print(f"{p}: {v.status.lower()} ({dt:.2f} s)", file=sys.stderr)
            print(f"{v.line()}  ({os.path.basename(p)})")
        statuses.append(v.status)
        code = max(code, v.exit_code)
    if args.json:
        json.dump(results, sys.stdout, indent=1, default=str)
        print()
    if len(paths) > 1:
        summary = ", ".join(f"{statuses.count(s)} {s}" for s in EXIT if statuses.count(s))
        print(f"{len(paths)} certificates checked in {time.perf_counter() - t0:.2f} s: {summary}", file=sys.stderr)
    return code


def _check_manifest(path):
    """Lines 'sha256  name' (sha256sum format), names relative to the manifest."""
    bad = []
    base = os.path.dirname(os.path.abspath(path))
    try:
        lines = open(path).read().splitlines()
    except OSError as e:
        return [f"{path}: cannot read manifest: {e.strerror}"]
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split(None, 1)
        if len(parts) != 2 or len(parts[0]) != 64:
            bad.append(f"{path}:{n}: not a 'sha256  file' line")
            continue
        sha, name = parts[0], parts[1].strip().lstrip("*")
        try:
            got = hashlib.sha256(open(os.path.join(base, name), "rb").read()).hexdigest()
        except OSError as e:
            bad.append(f"{path}:{n}: {name}: {e.strerror}")
            continue
        if got != sha:
            bad.append(f"{path}:{n}: {name}: sha256 {got} does not match the manifest's {sha}")
    return bad


def _show(args):
    from .kernel.load import read_json, header, claim
    from .kernel.verdict import Malformed, Unsupported
    try:
        doc, sha = read_json(args.certificate)
        kind = header(doc)
        c = claim(doc, kind)
    except Malformed as e:
        print(f"MALFORMED   {e.path}: {e.what}")
        return 2
    except Unsupported as e:
        print(f"UNSUPPORTED {e}")
        return 3
    inst = doc["instance"]

    def shape(x):
        if isinstance(x, dict):
            return "×".join(map(str, x.get("shape", []))) + f" ({x.get('file')})"
        if isinstance(x, list):
            return f"{len(x)}×{len(x[0]) if x and isinstance(x[0], list) else 1} (inline)"
        return "?"
    print(f"claim       {c.text()}")
    print(f"kind        {kind}")
    print(f"assumptions {', '.join(doc['assumptions'])}")
    if kind == "lower-lattice" and isinstance(inst, dict):     # parametric: no arrays
        print(f"instance    {', '.join(f'{k}={v}' for k, v in inst.items())}")
    else:
        print(f"beta        {json.dumps(inst.get('beta'))}")
        print(f"queries     {shape(inst.get('queries'))}")
        print(f"keys        {shape(inst.get('keys'))}")
        for k in ("column_weights", "logit_bias"):
            if k in inst:
                print(f"{k:<11} {shape(inst[k])}")
    print(f"witness     {', '.join(sorted(doc['witness'])) if isinstance(doc['witness'], dict) else '?'}")
    if "provenance" in doc:
        print(f"provenance  {json.dumps(doc['provenance'])}")
    print(f"sha256      {sha}")
    print("(not checked: run certkit verify)")
    return 0


def _tables(args):
    from .audit.tables import build_tables, FORMATS
    formats = FORMATS if args.format == "all" else (args.format,)
    for p in build_tables(args.out, formats):
        print(p)
    return 0


def _audit(args):
    from .audit.audit import run
    return run(args)


def _certify(args):
    from .certify import run
    return run(args)


def _scale(args):
    from .scale import run
    return run(args)


def _calibrate(args):
    from .calibrate import run
    return run(args)


def build_parser():
    p = argparse.ArgumentParser(prog="certkit", description=DESCRIPTION,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"certkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    v = sub.add_parser("verify", help="check certificates with the trusted kernel",
                       description="Check rank certificates. One stdout line per file: VERIFIED <claim> [...], "
                                   "REJECTED <step>: <recomputed> vs <claimed>, MALFORMED <JSON path>: <problem>, "
                                   "or UNSUPPORTED <what>. Exit status: 0 all VERIFIED, 1 some REJECTED, "
                                   "2 some MALFORMED, 3 some UNSUPPORTED, 4 internal error (the largest wins).")
    v.add_argument("certificates", nargs="+", metavar="CERT.json")
    v.add_argument("--route", choices=("fast", "arb"), default="fast",
                   help="fast: float64 mid-rad with proven error bounds (default); "
                        "arb: Arb ball arithmetic row by row (reference; slow for large heads)")
    v.add_argument("--manifest", metavar="FILE", help="also check a sha256sum-style manifest of the files")
    v.add_argument("--json", action="store_true", help="machine-readable results on stdout")
    v.set_defaults(func=_verify)
    s = sub.add_parser("show", help="print a certificate's canonical claim without checking it")
    s.add_argument("certificate", metavar="CERT.json")
    s.set_defaults(func=_show)
    a = sub.add_parser("audit", help="chain quantities by numpy, torch, the kernel, Arb and mpmath; flags disagreements",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="Audit the chain certificate of a head (SPEC §5-§7, proofs/chain-rule.md): one row per "
                                   "quantity (rho_Q ... osc, tau, eps', Gamma, eta, log10 S, R_sym) with the numpy float64, "
                                   "torch float32/float64 values, the kernel's proven bound, the exact Arb enclosure fed "
                                   "to the sympy chain, and mpmath at 50 digits.",
                       epilog="Flags: outside (a float value outside the Arb enclosure beyond its precision), unsound "
                              "(a kernel bound on the wrong side of the exact value), routes (Arb walker vs mpmath "
                              "disagree), ordering (actual <= tau_exact <= tau_width <= tau_spec violated).\n"
                              "Exit status: 0 no flags, 1 flags, 2 bad input, 4 internal error.\n"
                              "Examples:\n  certkit audit data/certificates/*.json\n"
                              "  certkit audit --head data/heads/example.npz --eps 1/4 --eps 1/2 --r all")
    from .audit.audit import add_arguments as _audit_args
    _audit_args(a)
    a.set_defaults(func=_audit)
    c = sub.add_parser("certify", help="certified sandwiches lower <= r_eps(A) <= upper for heads, with peers",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       description="For each head and eps: search lower (decoding, Frobenius tail) and upper "
                                   "(SVD, LP row fits, joint l1 refinement) certificates, keep only those the "
                                   "kernel VERIFIES, and compare the peers (truncated SVD, Nystrom/CUR, Performer, "
                                   "Linformer) at the smallest k with certified row-l1 error <= eps. Writes "
                                   "DIR/<head>/eps-<eps>.{lower,upper}.json and DIR/summary.{md,json}.",
                       epilog="Exit status: 0 every sandwich complete, 1 some bound missing, 2 bad input.\n"
                              "Examples:\n  certkit certify data/heads/*.safetensors data/heads/*.npz --eps 1/10,1/4\n"
                              "  certkit certify --synthetic gaussian:n=64,d=8,beta=2 --eps 0.25 --out /tmp/c")
    from .certify import add_arguments as _certify_args
    _certify_args(c)
    c.set_defaults(func=_certify)
    sc = sub.add_parser("scale", help="certified scaling laws: sphere beta^((d-1)/2), ball beta^(d/2), interaction Gamma^(r/2)",
                        formatter_class=argparse.RawDescriptionHelpFormatter,
                        description="Reproduce the scaling laws of r_eps with certificates (SPEC §8.2-8.4): for each "
                                    "family and dimension, parametric lattice certificates over three decades of beta, "
                                    "each checked by the kernel (kind lower-lattice, no token enumerated); "
                                    "least-squares slopes of log M with 95 % intervals against the theory exponent; the "
                                    "covering upper bound where informative; the 65^4 ball point at beta = 640^2 with "
                                    "its token count; and a cross-check of small instances against the explicit matrix. "
                                    "Writes DIR/points.csv, slopes.csv, scaling.md, summary.json, <family>.png and "
                                    "DIR/certificates/.",
                        epilog="Exit status: 0 all points VERIFIED and all slopes within tolerance, 1 otherwise, "
                               "2 bad input.\nExamples:\n  certkit scale\n"
                               "  certkit scale --families ball --points 7 --eps 1/4 --out /tmp/scale")
    from .scale import add_arguments as _scale_args
    _scale_args(sc)
    sc.set_defaults(func=_scale)
    cal = sub.add_parser("calibrate", help="real-model calibration: visible dimension, SVD bridge, chain and certified sandwiches per head",
                         formatter_class=argparse.RawDescriptionHelpFormatter,
                         description="The paper's real-model study on pretrained encoders loaded offline: per head, "
                                     "sequence length, temperature multiplier and eps, the visible dimension r_exact, "
                                     "r_SVD_int(eps/3), r_opt, the symbolic chain bound R_sym, and kernel-VERIFIED "
                                     "constructive upper (R_con) and lower bounds; then the summary statistics "
                                     "(Spearman with a bootstrap interval, the share of full-dimensional heads whose "
                                     "r_SVD_int < r_exact, sandwiches) beside the paper's numbers, with plots. "
                                     "Resumable: finished configurations are kept under DIR/configs and skipped on a rerun.",
                         epilog="Exit status: 0 done, 2 bad input or model not installed, 130 interrupted.\n"
                                "Examples:\n  certkit calibrate --workers 2\n"
                                "  certkit calibrate --model mpnet --layers 0-6 --workers 2\n"
                                "  certkit calibrate --layers 0 --lengths 64 --out /tmp/cal")
    from .calibrate import add_arguments as _cal_args
    _cal_args(cal)
    cal.set_defaults(func=_calibrate)
    t = sub.add_parser("tables", help="write tables of certified constants (CSV, Markdown, LaTeX)",
                       description="Tables of the constants the theorems use: theta_m (A_m* and Rogers), "
                                   "N_net(m, eta), C_m^pack and C_m^Rogers, lattice margins 2(S_h/theta)^d - 1, "
                                   "typical log10 S_r. Each value is an Arb enclosure [lo, hi] rounded outward, "
                                   "next to a non-rigorous mpmath approximation. Deterministic: reruns are byte-identical.")
    t.add_argument("--out", default="data/tables", metavar="DIR", help="output folder (default data/tables)")
    t.add_argument("--format", choices=("csv", "md", "tex", "all"), default="all")
    t.set_defaults(func=_tables)
    return p


def main(argv=None):
    args = build_parser().parse_args(argv)
    if not getattr(args, "func", None):
        build_parser().print_help()
        return 2
    try:
        return args.func(args)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
