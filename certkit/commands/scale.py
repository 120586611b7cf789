"""certkit scale: the scaling laws of the approximation rank on the command line (arguments, the
files and lines written); the laws are certkit.scaling's (laws.laws, and growth.run for
--families causal-real).
"""
import math
import os
import sys
import time

from ..errors import UserError
from ..numbers import parse_eps
from ..scaling import CAUSAL_NS, DEFAULT_LAWS, EPS, POINTS, TOLERANCE, growth
from ..scaling.laws import LATTICE_FAMILIES, POINT_FIELDS, ScaleError, cell, laws, write, write_csv


GROWTH_ONLY = (("growth_budget", "--growth-budget"), ("encoder_model", "--encoder-model"),
               ("encoder_heads", "--encoder-heads"))


def run_growth(args, fams, eps):
    """scale --families causal-real: the growth law on real decoder heads (certkit.scaling.growth)."""
    import shlex
    from ..driver import seconds_text
    from ..numbers import parse_budget
    if fams != ["causal-real"]:
        raise ScaleError("--families causal-real runs alone (it loads a model): give it without other families")
    heads = growth.parse_heads(args.growth_heads)
    try:
        ns = sorted({int(t) for t in args.growth_lengths.split(",") if t.strip()})
    except ValueError:
        raise ScaleError(f"--growth-lengths: {args.growth_lengths!r} is not a list of integers") from None
    if len(ns) < 3 or ns[0] < 8:
        raise ScaleError(f"--growth-lengths: need at least 3 lengths >= 8 to fit the laws, got {args.growth_lengths!r}")
    if args.workers < 1:
        raise ScaleError(f"--workers: {args.workers} must be >= 1")
    try:
        budget = parse_budget(args.growth_budget, "--growth-budget")
    except UserError as e:
        raise ScaleError(str(e)) from None
    if args.encoder_heads is not None and args.encoder_model is None:
        raise ScaleError("--encoder-heads needs --encoder-model (the encoder whose heads go beside the decoder's)")
    encoder = None
    if args.encoder_model is not None:
        encoder = (args.encoder_model, growth.parse_heads(args.encoder_heads or growth.DEFAULT_ENCODER_HEADS,
                                                          "--encoder-heads"))
    parts = ["certkit", "scale", "--families", "causal-real", "--model", args.model, "--growth-heads",
             args.growth_heads, "--growth-lengths", ",".join(map(str, ns)), "--eps", str(eps)]
    if budget is not None:
        parts += ["--growth-budget", seconds_text(budget)]
    if encoder is not None:
        parts += ["--encoder-model", args.encoder_model,
                  "--encoder-heads", args.encoder_heads or growth.DEFAULT_ENCODER_HEADS]
    command = shlex.join(parts + ["--workers", str(args.workers), "--out", args.out])
    t0 = time.perf_counter()
    rows, _ = growth.run(args.model, heads, ns, eps, args.out, args.workers, None, not args.no_plots, command,
                         budget, encoder)
    for r in rows:
        stop = "  (stopped on the budget)" if r.get("stopped_on_budget") else ""
        print(f"{growth.label(r)}  n={r['n']}:  {r['lower']} <= r_eps(A) <= {growth.upper_text(r)}  "
              f"[{r['seconds']:.1f} s]{stop}")
    print(f"causal growth law: {len(rows)} points in {time.perf_counter() - t0:.1f} s; outputs under {args.out}",
          file=sys.stderr)
    return 0 if all(r["lower"] and r["upper"] for r in rows) else 1


def add_arguments(p):
    p.add_argument("--families", default=",".join(DEFAULT_LAWS),
                   help="comma-separated families: sphere, ball, interaction (lattice lower bounds against beta), "
                        "causal (prefix averaging against the context length) (default all)")
    p.add_argument("--eps", default=str(EPS), help=f"tolerance eps in (0, 1), exact numeral (default {EPS})")
    p.add_argument("--points", type=int, default=POINTS,
                   help=f"points per line, log-spaced over three decades (default {POINTS})")
    p.add_argument("--tolerance", type=float, default=TOLERANCE,
                   help=f"allowed relative slope error (default {TOLERANCE})")
    p.add_argument("--out", default="data/scaling", metavar="DIR", help="output folder (default data/scaling)")
    p.add_argument("--no-plots", action="store_true", help="skip the plots (PNG, with PDF and SVG beside)")
    p.add_argument("--no-crosscheck", action="store_true", help="skip the explicit-matrix cross-check")
    p.add_argument("--causal-lengths", default=",".join(map(str, CAUSAL_NS)), metavar="N,N,...",
                   help="context lengths of the causal family (prefix averaging; default 64..4096, about 3 min)")
    g = p.add_argument_group("causal-real: the causal growth law on real decoder heads (runs alone; "
                             "outputs causal-real.{md,csv,png} under --out)")
    g.add_argument("--model", default="smollm2", help="a decoder: smollm2 (default), a GGUF file or a model folder")
    g.add_argument("--growth-heads", default=growth.DEFAULT_HEADS, metavar="lL-hH,...",
                   help=f"the heads (default {growth.DEFAULT_HEADS}: in each third of SmolLM2's layers the heads "
                        "with the smallest and largest certified upper bound at L = 128)")
    g.add_argument("--growth-lengths", default=growth.DEFAULT_LENGTHS, metavar="N,N,...",
                   help=f"context lengths (default {growth.DEFAULT_LENGTHS}; at least 3)")
    g.add_argument("--growth-budget", metavar="SECONDS", default=None,
                   help="time for each point (one head at one n; anytime certification as certify --budget): the "
                        "searches stop at their next safe point once it is spent and the best VERIFIED sandwich so far "
                        "is kept, marked stopped_on_budget in causal-real.csv and .md (default: no budget)")
    g.add_argument("--encoder-model", metavar="NAME|DIR", default=None,
                   help="an encoder (minilm, mpnet or a BERT-family folder) whose heads are certified beside the "
                        "decoder's, with no mask, at the --growth-lengths within its position limit (MiniLM: 512), "
                        "and drawn in grey in the plot (default: none)")
    g.add_argument("--encoder-heads", metavar="lL-hH,...", default=None,
                   help=f"the encoder's heads (default {growth.DEFAULT_ENCODER_HEADS}: MiniLM's heads with the "
                        "smallest and the largest certified upper bound at L = 128, eps = 1/4)")
    g.add_argument("--workers", type=int, default=1, metavar="N", help="points certified in N processes (default 1)")


def parse_options(args):
    """(families, eps) from the command line; ScaleError (a UserError) naming the argument."""
    fams = [f.strip() for f in args.families.split(",") if f.strip()]
    known = list(LATTICE_FAMILIES) + ["causal", "causal-real"]
    bad = [f for f in fams if f not in known]
    if bad or not fams:
        raise ScaleError(f"--families: unknown family {bad[0] if bad else '(none)'!r} (choose from {', '.join(known)})")
    try:
        eps = parse_eps(args.eps, "--eps")
    except UserError as e:
        raise ScaleError(str(e)) from None
    if args.points < 3:
        raise ScaleError(f"--points must be >= 3 to fit a slope with an interval, got {args.points}")
    if not 0 < args.tolerance < 1:
        raise ScaleError(f"--tolerance must lie in (0, 1), got {args.tolerance}")
    return fams, eps


def parse_lengths(text):
    """--causal-lengths: context lengths 2 <= n <= 16384."""
    try:
        ns = sorted({int(t) for t in text.split(",") if t.strip()})
    except ValueError:
        raise ScaleError(f"--causal-lengths: {text!r} is not a list of integers") from None
    if len(ns) < 3 or ns[0] < 2 or ns[-1] > 16384:
        raise ScaleError(f"--causal-lengths: need at least 3 lengths in 2..16384 to fit the law, got {text!r}")
    return ns


def run(args):
    """Exit 0: every point VERIFIED and every slope within tolerance; 1 otherwise.  Bad input raises
    ScaleError (a UserError: the CLI's exit 64); an --out that cannot be a folder, OutputError (73)."""
    from ..outputs import ensure_folder
    fams, eps = parse_options(args)
    if "causal-real" in fams:
        return run_growth(args, fams, eps)
    for attr, flag in GROWTH_ONLY:
        if getattr(args, attr, None) is not None:
            raise ScaleError(f"{flag} needs --families causal-real (the growth law on real heads)")
    out = ensure_folder(args.out, "--out")
    t0 = time.perf_counter()
    causal_ns = parse_lengths(args.causal_lengths) if "causal" in fams else None
    rows = []
    try:
        res = laws(fams, eps, args.points, args.tolerance, out, not args.no_crosscheck, causal_ns,
                   sys.stderr.isatty(), rows)
    except KeyboardInterrupt:
        write_csv(os.path.join(out, "points.csv"), rows, POINT_FIELDS)
        print(f"\ncertkit scale: interrupted; {len(rows)} points kept in {out}/points.csv", file=sys.stderr)
        return 130
    write(res, out, plots=not args.no_plots)
    sl, head, cc, law = res.slopes, res.headline, res.crosscheck, res.causal
    for s in sl:
        rel = "" if s.get("rel_error") is None else f"{s['rel_error']:+.3%}"
        print(f"{s['family']:<11} {'r' if s['family'] == 'interaction' else 'd'}={s['dim']}  slope "
              f"{cell(s.get('slope'), 5):<8} theory {s['theory']:<4g} {rel:<9} {s['verified']}/{s['points']} VERIFIED"
              f"{'' if s['within_tolerance'] else '   OUTSIDE TOLERANCE'}")
    print(f"65^4 point: {head['line']}")
    print(f"  tokens: 10^{head['log10_tokens'][0]:.4f} .. 10^{head['log10_tokens'][1]:.4f} "
          f"(a {math.floor(head['log10_tokens'][1]) + 1:,}-digit number)")
    if cc:
        print(f"cross-check: {sum(r['agree'] for r in cc)}/{len(cc)} small instances agree (parametric = explicit)")
    if law is not None:
        print("causal (prefix averaging): " + ", ".join(f"n={r['n']}: {r['lower']}..{r['upper']}" for r in law.rows))
    print(f"{len(rows)} lattice points{', the causal law' if law else ''} in {time.perf_counter() - t0:.1f} s; "
          f"outputs under {out}", file=sys.stderr)
    ok = (all(r["verdict"] == "VERIFIED" for r in rows) and all(s["within_tolerance"] for s in sl)
          and head["verdict"] == "VERIFIED" and all(r["agree"] for r in cc)
          and (law is None or all(r["lower"] and r["upper"] for r in law.rows)))
    return 0 if ok else 1
