"""certkit compare: the certified error of a compressed head.

For each head and each compression setting (certkit.compress: quantised queries and keys,
low-rank keys or logits, an evicted KV cache, sliding-window or top-k attention), a certificate of

    max_i ||A_i - A'_i||_1 <= eps          (kind attention-distance, format 1.2)

that the kernel VERIFIES, eps the smallest the search states (the kernel's bound rounded up to 4
significant digits).  By the operator identity this is the worst error of the attention output
over every value matrix with entries in [-1, 1].  With --eps, the summary names per head and
method the cheapest setting whose certified error is <= eps: the compression engineer's table.
The heads: head files, --synthetic specs, or a model's heads on a text (as certkit certify).  Here: the
arguments, one call of the run (certkit.comparison.run.compare_heads) and the lines printed.
"""
import json
import os
import sys
import time
from fractions import Fraction

from ..comparison.run import CompareError, compare_heads, layers_of
from ..comparison.summary import cheapest, quantity, short
from ..compress import methods_help, parse_methods
from ..driver import parse_synthetic, read_model_heads
from ..head import Head
from ..numbers import decimal, parse_beta, parse_distance, parse_output_eps
from ..outputs import ensure_folder
from ..provenance import portable_path, producer


def add_arguments(p):
    p.add_argument("heads", nargs="*", metavar="HEAD", help=".npz or .safetensors head files (arrays Q, K; "
                   "optional beta, weights, bias)")
    p.add_argument("--synthetic", action="append", default=[], metavar="SPEC",
                   help="a synthetic head FAMILY[:n=..,N=..,d=..,beta=..,seed=..] as for certkit certify (repeatable)")
    p.add_argument("--beta", help="temperature for head files without one (e.g. 1/8 or 1/sqrt(64))")
    p.add_argument("--method", action="append", required=True, metavar="SPEC",
                   help=f"a compression setting, repeatable or ';'-separated: {methods_help()}. A list "
                        "quant:int8,int4 gives several settings; a range a..b doubles from a to b: lowrank:k=4..64, "
                        "evict:sinks=4,window=16..512")
    p.add_argument("--eps", default=None, help="a tolerance (exact, e.g. 1/4): the summary names per head and method "
                   "the cheapest setting whose certified error is <= eps")
    p.add_argument("--lower", action="store_true", help="with --eps: also certify r_eps(A) >= m (the lower search), "
                   "shown beside the low-rank rows: no attention matrix of rank below m is within eps")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default data/compare; with --model "
                   "data/compare/<model>)")
    p.add_argument("--norm", choices=("inf", "2"), default=None,
                   help="instead of the worst case over all values, the error of each head's output on its own "
                        "values through its slice of W_O: max_i ||(A V W - A' V' W)_i|| in this row norm "
                        "(attention-output-distance certificates, format 1.3; heads with values: --model, or head "
                        "files with a 'values' array and optionally 'projection')")
    p.add_argument("--relative", action="store_true",
                   help="with --norm: the output error relative to the output, max_i ||D_i|| / ||(A V W)_i||")
    p.add_argument("--level", choices=("head", "layer"), default="head",
                   help="layer (with --model): certify the attention block of each layer, max_i ||(sum_h (A_h V_h - "
                        "A'_h V'_h) W_O^h)_i|| in the --norm (default 2), one certificate per layer and setting; the "
                        "summary gives per layer the certified max, mean and p99 over tokens, absolute and relative "
                        "to the layer's output, each beside its float64 value")
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON on stdout")
    p.add_argument("--wait", action="store_true", help="if another certkit run is writing into --out, wait for it")
    g = p.add_argument_group("the heads of a model (instead of HEAD files): docs/models.md")
    g.add_argument("--model", metavar="DIR|FILE.gguf", help="a local Hugging Face folder, a GGUF file, or minilm / "
                   "mpnet / smollm2 (the built-in real weights), read as for certkit certify")
    g.add_argument("--text", metavar="FILE", help="UTF-8 text for the model (default: certkit's built-in text)")
    g.add_argument("--tokens", metavar="FILE", help="token ids instead of a text")
    g.add_argument("--length", type=int, default=128, metavar="N", help="tokens per window (default 128)")
    g.add_argument("--window", type=int, default=0, metavar="K", help="which window of the text (default 0)")
    g.add_argument("--layers", dest="model_layers", default="all", metavar="LIST", help="layers: all, 0-3 or 0,5")
    g.add_argument("--heads", dest="model_heads", default="all", metavar="LIST", help="heads: all, 0-3 or 0,5")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="heads compared in N parallel processes "
                   "(default 1; certificates identical to a serial run)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="compare the heads on Dask distributed: local, local:N or a scheduler address such as "
                        "tcp://host:8786 (needs the 'dask' extra; certificates identical to a serial run)")


def run(args):
    """certkit compare: exit 0 if every setting of every head got a certified distance, 1 otherwise."""
    methods = [m for spec in args.method for m in parse_methods(spec)]
    layer = getattr(args, "level", "head") == "layer"
    if layer:
        if args.model is None or args.lower:
            raise CompareError("--level layer compares the attention block of a model's layers: it needs --model "
                               "(and takes no --lower)")
        args.norm = args.norm or "2"
    if args.relative and not args.norm:
        raise CompareError("--relative needs --norm inf or --norm 2 (the row norm of the output error)")
    parse_eps = parse_output_eps if args.norm else parse_distance
    eps = None if args.eps is None else parse_eps(args.eps, "--eps")
    if args.lower and (eps is None or eps >= 1):
        raise CompareError("--lower needs --eps below 1 (the tolerance of the rank lower bound r_eps(A))")
    if args.workers < 1:
        raise CompareError(f"--workers: {args.workers} must be >= 1")
    from ..parallel import parse_scheduler
    parse_scheduler(args.scheduler)
    meta = {"methods": [m.spec for m in methods], "eps": None if eps is None else str(eps), "lower": args.lower,
            "norm": args.norm, "relative": bool(args.relative), "level": "layer" if layer else "head"}
    if args.model is not None:
        if args.heads or args.synthetic or args.beta:
            raise CompareError("--model compares a model's heads: give no HEAD files, --synthetic or --beta with it")
        args.multipliers = "1"
        _, heads, model_meta = read_model_heads(args, [Fraction(1)], os.path.join("data", "compare"))
        meta = {**model_meta, **meta}
        heads = layers_of(heads) if layer else heads
    else:
        if args.text or args.tokens or args.length != 128 or args.window or args.model_layers != "all" \
                or args.model_heads != "all":
            raise CompareError("--text, --tokens, --length, --window, --layers and --heads need --model")
        beta = parse_beta(args.beta, "--beta") if args.beta else None
        heads = [Head.from_file(f, beta) for f in args.heads] + [parse_synthetic(s) for s in args.synthetic]
        if not heads:
            raise CompareError("no heads: give HEAD files, --synthetic SPEC or --model (see certkit compare --help)")
        if args.norm and any(h.values is None for h in heads):
            raise CompareError(f"--norm needs heads with values: head {next(h.name for h in heads if h.values is None)!r} "
                               f"has none (--model reads V and W_O from the model; a head file needs a 'values' array)")
        args.out = args.out or os.path.join("data", "compare")
        ensure_folder(args.out, "--out")
    meta["command"] = command_line(args)
    meta["producer"] = producer()
    return compare(args, heads, methods, eps, meta)


def command_line(args):
    import shlex
    parts = ["certkit", "compare"] + list(args.heads)
    for s in args.synthetic:
        parts += ["--synthetic", s]
    for flag, value, default in (("--model", args.model, None), ("--text", args.text, None),
                                 ("--tokens", args.tokens, None), ("--length", args.length, 128),
                                 ("--window", args.window, 0), ("--layers", args.model_layers, "all"),
                                 ("--heads", args.model_heads, "all"), ("--beta", args.beta, None),
                                 ("--eps", args.eps, None), ("--norm", args.norm, None),
                                 ("--level", getattr(args, "level", "head"), "head")):
        if value != default:
            parts += [flag, str(value)]
    for m in args.method:
        parts += ["--method", m]
    return " ".join(map(shlex.quote, parts + (["--relative"] if args.relative else []) + (["--lower"] if args.lower else [])
                        + ["--out", portable_path(args.out)]))


def compare(args, heads, methods, eps, meta):
    """The run (certkit.comparison.run.compare_heads), a line per certified setting as each head ends
    (a progress bar on a terminal), then the cheapest settings within --eps or --json's rows."""
    layer = meta.get("level") == "layer"
    shown = {"bar": None, "say": print}

    def started(done):
        if sys.stderr.isatty():
            from tqdm import tqdm
            shown["bar"] = tqdm(total=len(heads), initial=len(done), desc="certkit compare", unit="head",
                                file=sys.stderr)
            shown["say"] = shown["bar"].write

    def finished(new):
        if shown["bar"] is not None:
            shown["bar"].update(1)
        if not args.json:
            for r in new:
                who = f"layer {r['layer']}" if layer else r["head"]
                shown["say"](f"{who}  {r['method']}:  {quantity(meta)} <= {short(r['certified'])}"
                             f"  (float {r['estimate']:.4g})  [{r['seconds']:.2f} s]")
    t0 = time.perf_counter()
    try:
        rows = compare_heads(heads, methods, eps, meta, args.out, lower=args.lower, norm=args.norm,
                             relative=args.relative, workers=args.workers, scheduler=args.scheduler,
                             wait=args.wait, started=started, finished=finished)
    finally:
        if shown["bar"] is not None:
            shown["bar"].close()
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    elif eps is not None:
        for c in cheapest(rows, eps):
            print(f"{c['head']}  {c['family']}: cheapest with certified error <= {decimal(eps)}: "
                  f"{c['cheapest'] or 'none'}" + (f" ({short(c['certified'])})" if c["cheapest"] else ""))
    print(f"{len(rows)} certified distances ({len(heads)} heads) in {time.perf_counter() - t0:.1f} s; certificates "
          f"and summary.md/json/csv under {args.out}", file=sys.stderr)
    return 0 if all(r["certified"] is not None for r in rows) else 1
