"""certkit calibrate: the real-model calibration grid (the paper's BERT study; docs/models.md).

For every head (layer l, head h) of a pretrained encoder, sequence length L, temperature
multiplier m (beta = m / sqrt(d_head); m = 1 is the model) and eps: r_exact with its certified
lower bound, r_SVD_int(eps/3), r_opt, R_sym as a VERIFIED upper-chain certificate, R_con and the
lower bound as VERIFIED constructive certificates, Gamma and the tau_r curves.

    grid.py     the groups (L, layer, head, m): computing them, the worker processes
    configs.py  the finished groups on disk (atomic, resumable)
    statistics.py  Spearman(r_SVD_int, R_con) with bootstrap intervals, the shares, the sandwiches
    summary.py  results.{csv,json} and SUMMARY.md, rebuilt from the finished groups
    plots.py    the figures

calibrate() is the one entry point: certkit.calibrate (the public API) and `certkit calibrate`
(certkit/commands/calibrate.py) both call it.  Importing this package loads neither torch nor the
searches: they are imported when a grid runs.
"""
import os
import tempfile
from fractions import Fraction

from ..errors import UserError
from ..numbers import exact, parse_eps_list, parse_indices
from ..threads import limited

MODEL = "minilm"          # the model of the grid by default (certkit.models.loading.load)
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
def calibrate(model=MODEL, layers="all", heads="all", lengths=LENGTHS, multipliers=MULTIPLIERS, eps=EPS,
              out=None, workers=1, progress=False, plots=False, scheduler=None, text=None, tokens=None,
              wait=False):
    """Run (or resume) the calibration grid of a pretrained encoder: a certkit.results.CalibrateResult,
    its rows one dict per (length, layer, head, multiplier, eps) as in results.json, with .summary (the
    statistics, certkit.calibration.statistics.statistics), .out (the folder used), .meta (model, grid and reconstruction
    errors), .computed (groups computed now) and .skipped (groups already in out).

    model: 'minilm', 'mpnet', 'smollm2', a local folder of any family certify --model reads or a GGUF
    file (certkit.models.loading.load); a decoder's heads keep their row mask (r_exact is then the
    masked visible dimension, docs/mathematics.md §4.5, and R_sym None with R_sym_applicable False:
    the chain does not apply); layers, heads: 'all', '0-6', '0,3,5' or
    lists; lengths, multipliers (beta = m/sqrt(d_head)), eps: lists or comma-separated text, exact.
    out: the folder for configs, certificates, results.{csv,json} and SUMMARY.md (plots=True adds
    the figures, PNG + PDF + SVG: plots.FIGURES); finished groups found there are not recomputed.  out=None: a new temporary
    folder (tempfile.mkdtemp, not removed, since it holds the certificates the rows name: delete
    it when done).  workers: processes; scheduler: a Dask scheduler instead ("local", "local:N" or an
    address; certkit.parallel), with identical results; progress: a tqdm bar on stderr.  text (a str)
    or tokens (token ids): the input instead of certkit's built-in text, cut into the first window
    of each length with the tokenizer's own special tokens (a folder holding another text's groups
    is refused).  The folder is locked while the run writes there
    (certkit.outputs.FolderLock): another run into it raises OutputError, or with wait=True waits for it."""
    from ..outputs import check_folder
    from .grid import run_grid
    from ..results import CalibrateResult
    from .summary import csv_fields, write_summary
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
