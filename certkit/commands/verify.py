"""certkit verify: the kernel's verdict on each certificate, in input order.

    VERIFIED 0 / REJECTED 1 / MALFORMED 2 / UNSUPPORTED 3 / INTERNAL-ERROR 4;  the exit status is the largest.

Files are checked as given, a folder recursively (every certkit certificate under it, sorted),
"-" is one certificate read from stdin, held in memory and checked from there (its arrays inline:
this command creates nothing but --log and --summary).  The checks run here or in --jobs worker processes, and a
--log makes a run resumable (certkit.batch).  Only the core install is needed (numpy,
python-flint): this module imports the kernel and certkit.batch, no producer.
"""
import argparse
import json
import os
import sys
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass

from ..batch import Log, Progress, Task, WorkerDied, certificates_under, file_sha256, records, write_summary
from ..errors import INTERRUPTED, InputError, OutputError, UserError
from ..kernel import DEFAULT_ROUTE, EXIT, ROUTES
from ..kernel.numerics import FORMAT, MAX_FILE
from ..numbers import parse_jobs, parse_time_limit
from ..outputs import refuse_unless_regular


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


@dataclass
class Item:
    label: str           # what the user sees: the path (or "-")
    path: str            # the file the kernel checks ("<stdin>" for "-")
    short: str           # the name at the end of a text line
    doc: object = None   # the parsed JSON when already read (a directory scan), else None
    data: bytes | None = None   # "-": the bytes read from stdin (never written anywhere)


def collect(args):
    """The certificates to check, in order: files as given, DIR scanned recursively (sorted; *.json
    whose JSON has "format": "certkit-certificate"; unreadable JSON is kept and will be MALFORMED),
    "-" = one certificate from stdin (its bytes in memory: at most the kernel's limit + 1 are read)."""
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
            items.append(Item("-", "<stdin>", "<stdin>", data=sys.stdin.buffer.read(MAX_FILE + 1)))
        elif os.path.isdir(p):
            certs, other = certificates_under(p)
            n0 = len(items)
            for f in other:
                skipped += 1
                if not args.quiet:
                    print(f"certkit verify: note: skipping {f} (not a certkit certificate: "
                          f"no \"format\": \"{FORMAT}\")", file=sys.stderr)
            for f in certs:
                items.append(Item(f, f, os.path.relpath(f, p)))
            if len(items) == n0:
                raise InputError(f"{p}: no certkit certificate (*.json with \"format\": \"{FORMAT}\") in this folder")
        else:
            if not os.access(p, os.R_OK):
                raise InputError(f"{p}: cannot read (permission denied)")
            items.append(Item(p, p, os.path.basename(p)))
    return items, skipped


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


def run(args):
    """certkit verify: the results in input order (checked here or in --jobs worker processes, or
    taken from the --log by --resume), the --log and --summary files; returns the exit status."""
    if args.resume and not args.log:
        raise UserError("--resume needs --log FILE: the log of the run to resume")
    recheck = getattr(args, "recheck", False)
    if recheck and not args.resume:
        raise UserError("--recheck needs --resume (it checks again the files taken from the --log)")
    if args.summary:
        folder = os.path.dirname(os.path.abspath(args.summary))
        if os.path.isdir(args.summary) or not os.path.isdir(folder) or not os.access(folder, os.W_OK):
            raise OutputError(f"--summary {args.summary}: cannot write there")
        refuse_unless_regular(args.summary, f"--summary {args.summary}")   # a link or device: never replaced
    if args.log:
        refuse_unless_regular(args.log, f"--log {args.log}")
    code, counts, resumed, first = 0, Counter(), 0, True
    disagreements = 0
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
        items, skipped = collect(args)
        if args.manifest:
            for line in check_manifest(args.manifest):
                code = EXIT["MALFORMED"]
                if args.json:
                    print(json_item({"file": args.manifest, "status": "MALFORMED", "exit_code": EXIT["MALFORMED"],
                                      "kind": None, "relation": None, "bound": None, "eps": None,
                                      "message": line, "sha256": None, "seconds": 0.0, "details": {}}, first), end="")
                    first = False
                else:
                    print(f"MALFORMED   {line}", file=sys.stderr if args.quiet else sys.stdout)
        # (item, byte offset of its record in the log: taken from there, or None: checked now)
        plan = [(it, log.find(it.label, it.path) if args.resume and it.data is None else None) for it in items]
        t0 = time.perf_counter()
        tasks = (Task(it.label, it.path, it.data) for it, offset in plan
                 if offset is None or recheck)
        to_check = sum(offset is None or recheck for _, offset in plan)
        jobs = min(args.jobs, to_check)
        bar = Progress(len(plan), to_check) if sys.stderr.isatty() and len(plan) > 1 and not args.quiet else None
        lines_on_tty = not args.quiet and not args.json and sys.stdout.isatty()
        checked = records(tasks, args.route, args.time_limit, jobs, full=args.json or log is not None,
                          done=log.write if log is not None else None)
        with closing(checked):
            for i, (it, offset) in enumerate(plan):
                if bar:
                    bar.draw(i, i - resumed, it.short[-50:])
                rec = next(checked) if offset is None or recheck else log.read(offset)
                logged = offset is not None and not recheck
                resumed += logged
                if offset is not None and recheck:
                    old = log.read(offset)
                    if (old["status"], old["exit_code"]) != (rec["status"], rec["exit_code"]):
                        disagreements += 1
                        if bar:
                            bar.clear()
                        print(f"certkit verify: DISAGREEMENT: {it.label}: the log {args.log} says "
                              f"{old['status']}, the checker says {rec['status']} ({rec['message'][:200]})",
                              file=sys.stderr)
                if bar and (lines_on_tty or rec["status"] != "VERIFIED"):
                    bar.clear()
                print_result(args, it, rec, first, logged=logged)
                first = first and not args.json
                counts[rec["status"]] += 1
                code = max(code, rec["exit_code"])
            if bar:
                bar.clear()
    except (KeyboardInterrupt, WorkerDied) as e:
        stop = INTERRUPTED if isinstance(e, KeyboardInterrupt) else EXIT["INTERNAL-ERROR"]
        if args.summary:
            write_summary(args.summary, summary_record(counts, len(items), resumed, t0, stop, disagreements))
        kept = f"; {log.written} files finished by this run are logged in {args.log} (rerun with --resume)" \
            if log is not None else ""
        print("\ncertkit verify: interrupted" if stop == INTERRUPTED else f"certkit verify: error: {e}",
              kept, sep="", file=sys.stderr)
        return stop
    except OutputError:                     # the --log cannot be written (a full disk): --summary still is
        if args.summary:
            write_summary(args.summary, summary_record(counts, len(items), resumed, t0, OutputError.exit_code,
                                                       disagreements))
        raise
    finally:
        if log is not None:
            try:
                log.close()
            except OSError:
                pass
    if args.json:
        print("[]" if first else "\n]")
    n = len(items)
    if resumed and not args.quiet:
        print(f"certkit verify: {resumed} of {n} results taken from {args.log} without checking again (the log "
              f"is trusted like the checker; --recheck verifies them again)", file=sys.stderr)
    if recheck:
        rechecked = sum(offset is not None for _, offset in plan)
        if not args.quiet or disagreements:
            print(f"certkit verify: --recheck: {rechecked} logged results checked again, {disagreements} "
                  f"disagreement(s) with {args.log}", file=sys.stderr)
        if disagreements:
            code = max(code, 1)
    if (n > 1 or skipped) and not args.quiet:
        summary = ", ".join(f"{counts[s]} {s}" for s in EXIT if counts[s])
        print(f"{n} certificates checked in {time.perf_counter() - t0:.2f} s: {summary}"
              + (f" ({resumed} taken from {args.log})" if resumed else "")
              + (f" ({skipped} other .json files skipped)" if skipped else ""), file=sys.stderr)
    if args.summary:
        write_summary(args.summary, summary_record(counts, n, resumed, t0, code, disagreements))
    return code


def summary_record(counts, files, resumed, t0, exit_code, disagreements=0):
    """The --summary object (schema: certkit/format/verify-summary.schema.json)."""
    return {"counts": {s: counts[s] for s in EXIT}, "files": files, "resumed": resumed,
            "disagreements": disagreements, "seconds": round(time.perf_counter() - t0, 3), "exit_code": exit_code}


def check_manifest(path):
    """Lines 'sha256  name' (sha256sum format), names relative to the manifest."""
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
