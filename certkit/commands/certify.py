"""certkit certify: certified sandwiches  lower <= r_eps(A) <= upper  for head files, synthetic
heads or the heads of a model, on the command line: the arguments, one call of the run driver
(certkit.driver: certify_heads, or certify_model with --model) and the lines printed.
"""
import json
import sys
import time

from .. import synthetic
from ..driver import (ATTEMPTS, PEER_LEGEND, SEED, CertifyError, budget_note, certify_heads, certify_model,
                      methods_text, parse_synthetic, sandwich_text)
from ..head import Head
from ..models.families import labels
from ..numbers import PEER_NAMES, brief, exact, parse_beta, parse_budget, parse_eps_list, parse_peers

EPS_DEFAULT = "1/10,1/4,1/2"


def add_arguments(p):
    p.add_argument("heads", nargs="*", metavar="HEAD", help=".npz or .safetensors head files (arrays Q, K; "
                   "optional beta, weights, bias; see certkit/head.py)")
    p.add_argument("--synthetic", action="append", default=[], metavar="SPEC",
                   help="a synthetic head FAMILY[:n=..,N=..,d=..,beta=..,seed=..], FAMILY one of "
                        + ", ".join(synthetic.SYNTHETIC_FAMILIES) + " (repeatable)")
    p.add_argument("--beta", help="temperature for head files without one (e.g. 1/8 or 1/sqrt(64))")
    p.add_argument("--eps", default=EPS_DEFAULT, help=f"comma-separated tolerances, exact (default {EPS_DEFAULT})")
    p.add_argument("--out", default=None, metavar="DIR",
                   help="output folder (default data/certify; with --model data/certify/<model>)")
    p.add_argument("--peers", default=",".join(PEER_NAMES),
                   help="comma-separated peers to compare (svd, nystrom, performer, linformer) or 'none'")
    p.add_argument("--seed", type=int, default=SEED, help=f"seed of the random peers (default {SEED})")
    p.add_argument("--attempts", type=int, default=ATTEMPTS,
                   help=f"refinement steps of the upper search (default {ATTEMPTS})")
    p.add_argument("--budget", metavar="SECONDS", default=None,
                   help="time for each head at each eps, its peers included (anytime certification): a valid "
                        "sandwich first (r >= 1, the trivial r <= min(n, N)), then a fast lower bound and the "
                        "truncated SVD's upper bound, then the full searches, each VERIFIED improvement replacing an "
                        "end; when "
                        "the time is spent the searches stop at their next safe point (usually within 10 %%) and the "
                        "best sandwich so far is kept, marked stopped_on_budget in the summary; the time the "
                        "searches leave goes to deeper descents of the upper search (method 'deepened') "
                        "(default: no budget)")
    p.add_argument("--no-deepen", dest="deepen", action="store_false",
                   help="with --budget: no deeper descents in the time the searches leave, so that a budget they "
                        "do not reach gives the certificates of a run without one, byte for byte")
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON on stdout")
    p.add_argument("--wait", action="store_true", help="if another certkit run is writing into --out, wait for it "
                   "to end (default: refuse, exit 73; a folder never mixes two runs)")
    g = p.add_argument_group("the heads of a model (instead of HEAD files): docs/models.md")
    g.add_argument("--model", metavar="DIR|FILE.gguf", help=f"a local Hugging Face folder ({labels()}; weights "
                   f"from *.safetensors only), a GGUF file ({labels(gguf=True)}; dequantised, tokenizer from the "
                   "file), or minilm / mpnet (the built-in real weights)")
    g.add_argument("--text", metavar="FILE", help="UTF-8 text, tokenised by the model's tokenizer (default: "
                   "certkit's built-in text, the Python reference topics)")
    g.add_argument("--tokens", metavar="FILE", help="token ids instead of a text: integers separated by "
                   "whitespace or commas, or a .npy integer array (used as given, no special tokens added)")
    g.add_argument("--length", type=int, default=128, metavar="N", help="tokens per window, special tokens included (default 128)")
    g.add_argument("--window", type=int, default=0, metavar="K", help="which window of the text to use, 0 = the first (default 0)")
    g.add_argument("--layers", dest="model_layers", default="all", metavar="LIST", help="layers: all, 0-3 or 0,5 (default all)")
    g.add_argument("--heads", dest="model_heads", default="all", metavar="LIST", help="heads: all, 0-3 or 0,5 (default all)")
    g.add_argument("--multipliers", default="1", metavar="M,...", help="beta = m x the model's own scale, exact (default 1: the model)")
    g.add_argument("--workers", type=int, default=1, metavar="N", help="heads certified in N parallel processes (default 1)")
    g.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="certify the heads on Dask distributed: local, local:N or a scheduler address such as "
                        "tcp://host:8786 (needs the 'dask' extra; results identical to a serial run)")


MODEL_OPTIONS = (("text", None, "--text"), ("tokens", None, "--tokens"), ("length", 128, "--length"),
                 ("window", 0, "--window"), ("model_layers", "all", "--layers"), ("model_heads", "all", "--heads"),
                 ("multipliers", "1", "--multipliers"), ("workers", 1, "--workers"), ("scheduler", None, "--scheduler"))


def run(args):
    """certkit certify: exit 0 if every (head, eps) got both certificates, 1 if some bound is
    missing; bad input raises a UserError (the CLI's exit 64/66)."""
    eps_list = parse_eps_list(args.eps)
    args.budget = parse_budget(getattr(args, "budget", None), "--budget")
    if not getattr(args, "deepen", True) and args.budget is None:
        raise CertifyError("--no-deepen needs --budget (only a budgeted run deepens its upper search)")
    peers = list(parse_peers(args.peers, "--peers"))
    if getattr(args, "model", None) is not None:
        return run_model(args, eps_list, peers)
    for attr, default, flag in MODEL_OPTIONS:
        if getattr(args, attr, default) != default:
            raise CertifyError(f"{flag} needs --model (the heads of a model)")
    args.out = args.out or "data/certify"
    beta = parse_beta(args.beta, "--beta") if args.beta else None
    heads = [Head.from_file(f, beta) for f in args.heads] + [parse_synthetic(s) for s in args.synthetic]
    if not heads:
        raise CertifyError("no heads: give HEAD files or --synthetic SPEC (see certkit certify --help)")
    names = [h.name for h in heads]
    if len(set(names)) != len(names):
        raise CertifyError(f"two heads share the name {next(n for n in names if names.count(n) > 1)!r}")
    return run_files(args, heads, eps_list, peers)


def run_files(args, heads, eps_list, peers):
    """certkit certify over head files and --synthetic heads: a status line per head on a terminal,
    then its rows."""
    tty = sys.stderr.isatty()

    def status(i, h):
        if not tty:
            return None
        say = lambda text: print(f"\r[{i}/{len(heads)}] {h.name[:24]}: {text[:44]:<44}", end="", file=sys.stderr,
                                 flush=True)
        say("")
        return say

    def finished(new):
        if tty:
            print("\r" + " " * 80 + "\r", end="", file=sys.stderr)
        if not args.json:
            for r in new:
                peer_txt = "  ".join(f"{p}={r['peers'][p]['k'] or '-'}" for p in peers)
                print(f"{r['head']}  eps={brief(r['eps'])}:  {sandwich_text(r)}   ({methods_text(r)})"
                      f"{'   peers: ' + peer_txt if peers else ''}  [{r['seconds']:.2f} s]{budget_note(r)}")
    t0 = time.perf_counter()
    rows = certify_heads(heads, eps_list, args.out, peers, args.seed, args.attempts, args.budget,
                         getattr(args, "wait", False), status, finished, deepen=getattr(args, "deepen", True))
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    elif peers:
        print(f"({PEER_LEGEND})")
    print(f"{len(rows)} sandwiches in {time.perf_counter() - t0:.1f} s; certificates and summary.md/json/csv "
          f"under {args.out}", file=sys.stderr)
    return 0 if all(r["lower"] is not None and r["upper"] is not None for r in rows) else 1


def run_model(args, eps_list, peers):
    """certkit certify --model: every requested head of the model at each multiplier and eps, a
    progress bar on a terminal and a line per finished head."""
    if args.heads or args.synthetic or args.beta:
        raise CertifyError("--model certifies a model's heads: give no HEAD files, --synthetic or --beta with it")
    mults = []
    for v in [x for x in args.multipliers.split(",") if x.strip()] or [""]:
        m = exact(v, "--multipliers")
        if m <= 0:
            raise CertifyError(f"--multipliers: {m} is not > 0 (beta = m x the model's own scale)")
        mults.append(m)
    if args.workers < 1:
        raise CertifyError(f"--workers: {args.workers} must be >= 1")
    shown = {"bar": None, "say": print}

    def started(info, hs, done):
        if done:
            print(f"{info['name']}: {len(done)} of {len(hs)} heads already certified in {args.out} (resuming)",
                  file=sys.stderr)
        if sys.stderr.isatty():
            from tqdm import tqdm
            shown["bar"] = tqdm(total=len(hs), initial=len(done), desc=f"certkit certify {info['name']}", unit="head",
                                file=sys.stderr)
            shown["say"] = shown["bar"].write
        shown["t0"] = time.perf_counter()

    def finished(new):
        if shown["bar"] is not None:
            shown["bar"].update(1)
        if not args.json:
            for r in new:
                peer_txt = "  ".join(f"{p}={r['peers'][p]['k'] or '-'}" for p in peers)
                shown["say"](f"{r['head']}  eps={r['eps']}:  {sandwich_text(r)}   ({methods_text(r)})"
                             f"{'   peers: ' + peer_txt if peers else ''}   visible dim {r['visible_dimension']}"
                             f"   recon {r['reconstruction_max_abs_diff']:.1e}  [{r['seconds']:.2f} s]{budget_note(r)}")
    try:
        info, hs, meta, rows = certify_model(args, eps_list, peers, mults, started, finished)
    finally:
        if shown["bar"] is not None:
            shown["bar"].close()
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    elif peers:
        print(f"({PEER_LEGEND})")
    print(f"{info['name']}: {len(rows)} sandwiches ({len(hs)} heads) in {time.perf_counter() - shown['t0']:.1f} s; "
          f"reconstruction max |diff| {meta['reconstruction_max_abs_diff']:.2g}; certificates and summary.md/json/csv "
          f"under {args.out}", file=sys.stderr)
    return 0 if all(r["lower"] is not None and r["upper"] is not None for r in rows) else 1
