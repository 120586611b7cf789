"""certkit audit on the command line: arguments, the text table of a record, --json; the audit
itself is certkit.auditing's.

Exit status: 0 no flags, 1 some flag; bad input raises a UserError (the CLI prints it and exits
64, or 66 for a missing file).  Importing this module loads neither sympy nor torch.
"""
import json
import os
import sys

COLUMNS = ["numpy_f64", "torch_f32", "torch_f64", "kernel", "arb", "mpmath"]     # = auditing.routes.COLUMNS


def fmt(v):
    """A cell: a float to 10 digits, an int, [lo, hi], a one-sided bound, or — for none."""
    if v is None:
        return "—"
    if isinstance(v, list):
        lo, hi = v
        if lo is None:
            return f"<= {hi:.10g}"
        if hi is None:
            return f">= {lo:.10g}"
        return f"[{lo:.10g}, {hi:.10g}]"
    if isinstance(v, int):
        return str(v)
    return f"{v:.10g}"


def render(rec):
    """The text table of one audit record, with its checks and flags."""
    lines = [f"audit {rec['source']}: n = {rec['n']}, N = {rec['N']}, d = {rec['d']}, beta = {rec['beta']}, "
             f"eps = {rec['eps']}, r = {rec['r']}  ({rec['seconds']} s)"]
    head = ["quantity"] + COLUMNS
    table = [[r["quantity"]] + [fmt(r[c]) for c in COLUMNS] for r in rec["rows"]]
    if not rec["torch"]:
        for row in table:
            row[2] = row[3] = "n/a"
    widths = [max(len(x[i]) for x in [head] + table) for i in range(len(head))]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in table]
    lines.append(f"witness residual max_i ||A_i - At_i||_1 = {rec['checks']['witness_actual_row_error']:.6g}")
    bad = [o for o in rec["ordering"] if not o["ok"]]
    lines.append(f"ordering actual <= tau_exact <= tau_width <= tau_spec: {len(rec['ordering']) - len(bad)}/"
                 f"{len(rec['ordering'])} r values ok")
    if rec["flags"]:
        lines += [f"FLAG {f}" for f in rec["flags"]]
    else:
        lines.append("no flags")
    return "\n".join(lines)


def add_arguments(p):
    p.add_argument("certificates", nargs="*", metavar="CERT.json", help="certificates whose instance is audited")
    p.add_argument("--head", action="append", default=[], metavar="FILE",
                   help="a head as .npz/.safetensors with arrays Q, K (beta, weights, bias optional); repeatable")
    p.add_argument("--beta", metavar="B", help="beta for --head files: 2, 1/8, 1/sqrt(64) (overrides the file's)")
    p.add_argument("--eps", action="append", metavar="E",
                   help="tolerance(s) for --head files, exact (default 1/4); repeatable, or a comma list")
    p.add_argument("--r", metavar="R", help="audit at these r (comma list, or 'all'); default: the certificate's "
                                            "witness, else the r with the smallest certified bound")
    p.add_argument("--json", action="store_true", help="machine-readable records on stdout")


def run(args):
    """The command: print a table per record (or --json), a summary on stderr; 1 if any flag."""
    from ..auditing.core import AuditError, audit_files, parse_rs
    from ..auditing.routes import backends
    from ..numbers import parse_beta, parse_eps_list
    rs = parse_rs(args.r if args.r is not None else "auto", "--r")
    eps_list = [e for text in (args.eps or ["1/4"]) for e in parse_eps_list(text, "--eps")]
    beta = parse_beta(args.beta, "--beta") if args.beta is not None else None
    if not args.certificates and not args.head:
        raise AuditError("nothing to audit: give certificates and/or --head FILE")
    records = []
    targets = {"n": 0}                  # how many: a status line on a terminal when more than one

    def progress(i, n, t):
        targets["n"] = n
        if sys.stderr.isatty() and n > 1:
            print(f"\r[{i}/{n}] {os.path.basename(t.source)[:50]:<50}", end="", file=sys.stderr, flush=True)

    def skipped(e):
        print(f"certkit audit: {e}", file=sys.stderr)
    for rec in audit_files(args.certificates, args.head, eps_list, rs, beta, skipped, progress):
        records.append(rec)
        if not args.json:
            if sys.stderr.isatty() and targets["n"] > 1:
                print("\r" + " " * 60 + "\r", end="", file=sys.stderr)
            print(render(rec))
            print()
    nflag = sum(len(r["flags"]) for r in records)
    if args.json:
        json.dump(records, sys.stdout, indent=1, default=str, allow_nan=False)
        print()
    torch_used = backends()[1]
    print(f"{len(records)} audits, {nflag} flags" + ("" if torch_used else " (torch not installed: torch columns n/a)"),
          file=sys.stderr)
    return 1 if nflag else 0
