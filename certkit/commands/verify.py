"""certkit verify: the kernel's verdict on each certificate, in input order.

    VERIFIED 0 / REJECTED 1 / MALFORMED 2 / UNSUPPORTED 3 / INTERNAL-ERROR 4;  the exit status is the largest.

Files are checked as given, a folder recursively (every certkit certificate under it, sorted),
"-" is one certificate read from stdin, held in memory and checked from there (its arrays inline:
this command creates nothing but --log and --summary).  The checks run here or in --jobs worker processes, and a
--log makes a run resumable (certkit.verify_run over certkit.batch).  Here: the arguments, the run and
what is printed.  Only the core install is needed (numpy, python-flint): this module imports the kernel,
certkit.verify_run and certkit.batch, no producer.
"""
import argparse
import json
import os
import sys
import time
from contextlib import closing

from ..batch import Progress, WorkerDied, write_summary
from ..errors import INTERRUPTED, OutputError, UserError
from ..kernel import DEFAULT_ROUTE, EXIT, ROUTES
from ..numbers import parse_jobs, parse_time_limit
from ..outputs import refuse_unless_regular
from ..verify_run import Tally, check_manifest, collect, open_log, plan, results


def positive(kind):
    """An argparse type: a number of that kind > 0, parsed as the API parses it (certkit.numbers:
    --jobs in [1, 1024], --time-limit in (0, 10^9] seconds); else a usage error, exit 64."""
    def parse(text):
        try:
            return parse_jobs(text, "") if kind is int else parse_time_limit(text, "")
        except UserError as e:
            raise argparse.ArgumentTypeError(str(e).lstrip(": ")) from None
    return parse


def add_arguments(p):
    p.add_argument("certificates", nargs="+", metavar="CERT.json|DIR|-",
                   help="certificate files; a folder (every certkit certificate under it, recursively); "
                        "or - for one certificate's JSON on stdin")
    p.add_argument("--route", choices=ROUTES, default=DEFAULT_ROUTE,
                   help="auto (the default): the fast route, then Arb (128 to 1024 bits) on the rows it leaves "
                        "open (at most 2^20 entries; lower bounds: the whole head of at most 2^20 entries n*N "
                        "where fast rejects); "
                        "fast: float64 mid-rad with proven error bounds only; "
                        "arb: Arb ball arithmetic row by row (reference; slow for large heads)")
    p.add_argument("--manifest", metavar="FILE", help="also check a sha256sum-style manifest of the files")
    p.add_argument("-j", "--jobs", type=positive(int), default=1, metavar="N",
                   help="check the files in N worker processes (default 1: in this process); the output is "
                        "the same, in the same order")
    p.add_argument("--time-limit", type=positive(float), metavar="SECONDS",
                   help="per file: a check not decided within SECONDS is UNSUPPORTED 'resource limit' (exit 3)")
    p.add_argument("--log", metavar="FILE",
                   help="append to FILE (created if missing, never truncated) one JSON line per checked file, "
                        "the fields of a --json object, flushed as each verdict lands: an interrupted run loses "
                        "nothing it decided (schema: certkit/format/verify-log.schema.json)")
    p.add_argument("--resume", action="store_true",
                   help="with --log FILE: first read FILE and take every file whose path and current sha256 "
                        "have a record there from it instead of checking it again (a changed file is checked; "
                        "resume with the same --route and --time-limit). The log is TRUSTED like the checker: "
                        "a resumed verdict is the log's, not the kernel's (a hand-edited log line can turn a "
                        "REJECTED file into VERIFIED); resumed results are counted on stderr and marked "
                        "\"resumed\": true in --json and --summary. Use --recheck to verify them again")
    p.add_argument("--recheck", action="store_true",
                   help="with --resume: check every file taken from the log again, report each verdict that "
                        "differs from the log's on stderr, and exit non-zero (at least 1) on any disagreement; "
                        "the fresh verdict is the one printed and logged")
    p.add_argument("--summary", metavar="FILE",
                   help="at the end (also on Ctrl-C) write a JSON object: counts by status, files, resumed, "
                        "seconds, exit_code (schema: certkit/format/verify-summary.schema.json)")
    out = p.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true",
                     help="machine-readable results on stdout: a JSON array, one object per file "
                          "(schema: certkit/format/verify-output.schema.json)")
    out.add_argument("-q", "--quiet", action="store_true",
                     help="no stdout: only the exit status (errors still go to stderr)")


def json_item(record, first):
    """One object of the --json array as json.dump(list, indent=1) prints it, for streaming."""
    return ("[\n" if first else ",\n") + "\n".join(" " + line for line in json.dumps(record, indent=1).splitlines())


def print_result(args, item, rec, first, logged):
    """A result on stdout (a text line, or an object of the --json array, with "resumed") and,
    unless VERIFIED, a note on stderr with the time of the check ("logged": taken from the --log by
    --resume, not checked again; the text line then ends with [from the log])."""
    if rec["status"] != "VERIFIED":
        when = "logged" if logged else f"{rec['seconds']:.2f} s"
        print(f"{item.label}: {rec['status'].lower()} ({when})", file=sys.stderr)
    if args.json:
        print(json_item(dict(rec, resumed=True) if logged else rec, first), end="")
    elif not args.quiet:
        print(f"{rec['status']:<11} {rec['message']}  ({item.short})" + ("  [from the log]" if logged else ""))


def check_arguments(args):
    """--resume, --recheck, --summary and --log: a usage error (64) or an output that cannot be written (73)
    before anything is checked."""
    if args.resume and not args.log:
        raise UserError("--resume needs --log FILE: the log of the run to resume")
    if getattr(args, "recheck", False) and not args.resume:
        raise UserError("--recheck needs --resume (it checks again the files taken from the --log)")
    if args.summary:
        folder = os.path.dirname(os.path.abspath(args.summary))
        if os.path.isdir(args.summary) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise OutputError(f"--summary {args.summary}: cannot write there")
        refuse_unless_regular(args.summary, f"--summary {args.summary}")   # a link or device: never replaced
    if args.log:
        refuse_unless_regular(args.log, f"--log {args.log}")


def starting_log(args):
    """The --log, read first with --resume (a note on the incomplete lines a killed run left), or None."""
    if not args.log:
        return None
    log = open_log(args.log, args.resume)
    if log.ignored and not args.quiet:
        print(f"certkit verify: note: {log.ignored} incomplete line(s) of {args.log} ignored "
              f"(a run killed while writing); their files are checked again", file=sys.stderr)
    return log


def print_manifest(args, first):
    """The manifest's mismatches, each MALFORMED (an object of the --json array, or a line); returns
    (exit code so far, whether the --json array is still empty)."""
    code = 0
    for line in check_manifest(args.manifest):
        code = EXIT["MALFORMED"]
        if args.json:
            print(json_item({"file": args.manifest, "status": "MALFORMED", "exit_code": EXIT["MALFORMED"],
                              "kind": None, "relation": None, "bound": None, "eps": None,
                              "message": line, "sha256": None, "seconds": 0.0, "details": {}}, first), end="")
            first = False
        else:
            print(f"MALFORMED   {line}", file=sys.stderr if args.quiet else sys.stdout)
    return code, first


def print_results(args, planned, log, tally, first):
    """Every result of the plan, in input order, as it lands (a progress line on a terminal); returns
    whether the --json array is still empty."""
    recheck = getattr(args, "recheck", False)
    to_check = sum(offset is None or recheck for _, offset in planned)
    bar = Progress(len(planned), to_check) if sys.stderr.isatty() and len(planned) > 1 and not args.quiet else None
    lines_on_tty = not args.quiet and not args.json and sys.stdout.isatty()
    waiting = (lambda i, it: bar.draw(i, i - tally.resumed, it.short[-50:])) if bar else None
    outcomes = results(planned, args.route, args.time_limit, args.jobs, log=log, recheck=recheck,
                       full=args.json or log is not None, waiting=waiting)
    with closing(outcomes):
        for r in outcomes:
            tally.resumed += r.logged
            if r.disagrees:
                tally.disagreements += 1
                if bar:
                    bar.clear()
                print(f"certkit verify: DISAGREEMENT: {r.item.label}: the log {args.log} says "
                      f"{r.previous['status']}, the checker says {r.record['status']} ({r.record['message'][:200]})",
                      file=sys.stderr)
            if bar and (lines_on_tty or r.record["status"] != "VERIFIED"):
                bar.clear()
            print_result(args, r.item, r.record, first, logged=r.logged)
            first = first and not args.json
            tally.counts[r.record["status"]] += 1
            tally.code = max(tally.code, r.record["exit_code"])
        if bar:
            bar.clear()
    return first


def stopped(args, e, log, tally, files, t0):
    """Ctrl-C or a worker process that died: the --summary still written, what the log kept named;
    returns the exit status (130, or 4)."""
    stop = INTERRUPTED if isinstance(e, KeyboardInterrupt) else EXIT["INTERNAL-ERROR"]
    if args.summary:
        write_summary(args.summary, tally.summary(files, t0, stop))
    kept = f"; {log.written} files finished by this run are logged in {args.log} (rerun with --resume)" \
        if log is not None else ""
    print("\ncertkit verify: interrupted" if stop == INTERRUPTED else f"certkit verify: error: {e}",
          kept, sep="", file=sys.stderr)
    return stop


def closing_notes(args, planned, tally, skipped, t0):
    """The notes on stderr once every result is printed; returns the exit status (at least 1 on a
    --recheck disagreement)."""
    code, n = tally.code, len(planned)
    if tally.resumed and not args.quiet:
        print(f"certkit verify: {tally.resumed} of {n} results taken from {args.log} without checking again (the log "
              f"is trusted like the checker; --recheck verifies them again)", file=sys.stderr)
    if getattr(args, "recheck", False):
        rechecked = sum(offset is not None for _, offset in planned)
        if not args.quiet or tally.disagreements:
            print(f"certkit verify: --recheck: {rechecked} logged results checked again, {tally.disagreements} "
                  f"disagreement(s) with {args.log}", file=sys.stderr)
        if tally.disagreements:
            code = max(code, 1)
    if (n > 1 or skipped) and not args.quiet:
        summary = ", ".join(f"{tally.counts[s]} {s}" for s in EXIT if tally.counts[s])
        print(f"{n} certificates checked in {time.perf_counter() - t0:.2f} s: {summary}"
              + (f" ({tally.resumed} taken from {args.log})" if tally.resumed else "")
              + (f" ({skipped} other .json files skipped)" if skipped else ""), file=sys.stderr)
    return code


def run(args):
    """certkit verify: the results in input order (checked here or in --jobs worker processes, or
    taken from the --log by --resume), the --log and --summary files; returns the exit status."""
    check_arguments(args)
    tally, first, items, planned = Tally(), True, [], []
    log = starting_log(args)
    t0 = time.perf_counter()
    note = None if args.quiet else (lambda text: print(f"certkit verify: note: {text}", file=sys.stderr))
    try:
        items, skipped = collect(args.certificates, args.manifest, note)
        if args.manifest:
            tally.code, first = print_manifest(args, first)
        planned = plan(items, log, args.resume)
        t0 = time.perf_counter()
        first = print_results(args, planned, log, tally, first)
    except (KeyboardInterrupt, WorkerDied) as e:
        return stopped(args, e, log, tally, len(items), t0)
    except OutputError:                     # the --log cannot be written (a full disk): --summary still is
        if args.summary:
            write_summary(args.summary, tally.summary(len(items), t0, OutputError.exit_code))
        raise
    finally:
        if log is not None:
            try:
                log.close()
            except OSError:
                pass
    if args.json:
        print("[]" if first else "\n]")
    code = closing_notes(args, planned, tally, skipped, t0)
    if args.summary:
        write_summary(args.summary, tally.summary(len(items), t0, code))
    return code
