"""A `certkit verify` run, below the command (certkit/commands/verify.py: the arguments and what is
printed) and above the checks (certkit.batch: records in input order, the log, the progress line):

    collect(certificates, manifest, note)   -> (items, skipped): files as given, folders scanned, stdin
    check_manifest(path)                     -> the lines of a sha256sum manifest that do not match
    open_log(path, resume)                   -> the --log, read first for --resume, open for appending
    plan(items, log, resume)                 -> (item, offset of its record in the log, or None)
    results(plan, route, time_limit, jobs, ...) -> one Result per item, in input order
    Tally                                    -> the counts, the exit status and the --summary record

A result is checked now, taken from the --log (--resume: the log is trusted like the checker), or
checked again and compared with the log (--recheck).  Only the core install is needed: this module
imports the kernel's door and certkit.batch, no producer.
"""
import os
import sys
import time
from collections import Counter
from contextlib import closing
from dataclasses import dataclass, field

from .batch import Log, Task, certificates_under, file_sha256, records
from .errors import InputError, UserError
from .kernel import EXIT
from .kernel.numerics import FORMAT, MAX_FILE


@dataclass
class Item:
    label: str           # what the user sees: the path (or "-")
    path: str            # the file the kernel checks ("<stdin>" for "-")
    short: str           # the name at the end of a text line
    doc: object = None   # the parsed JSON when already read (a directory scan), else None
    data: bytes | None = None   # "-": the bytes read from stdin (never written anywhere)


def collect(certificates, manifest=None, note=None):
    """The certificates to check, in order: files as given, DIR scanned recursively (sorted; *.json
    whose JSON has "format": "certkit-certificate"; unreadable JSON is kept and will be MALFORMED),
    "-" = one certificate from stdin (its bytes in memory: at most the kernel's limit + 1 are read).
    note(text): told of each other .json file a folder holds (skipped).  Returns (items, skipped)."""
    if certificates.count("-") > 1:
        raise UserError("'-' (stdin) may be given only once")
    missing = [p for p in certificates if p != "-" and not os.path.exists(p)]
    if missing:
        raise InputError(f"{missing[0]}: no such file or folder")
    if manifest and not os.path.isfile(manifest):
        raise InputError(f"--manifest {manifest}: no such file")
    items, skipped = [], 0
    for p in certificates:
        if p == "-":
            items.append(Item("-", "<stdin>", "<stdin>", data=sys.stdin.buffer.read(MAX_FILE + 1)))
        elif os.path.isdir(p):
            certs, other = certificates_under(p)
            n0 = len(items)
            for f in other:
                skipped += 1
                if note is not None:
                    note(f"skipping {f} (not a certkit certificate: no \"format\": \"{FORMAT}\")")
            for f in certs:
                items.append(Item(f, f, os.path.relpath(f, p)))
            if len(items) == n0:
                raise InputError(f"{p}: no certkit certificate (*.json with \"format\": \"{FORMAT}\") in this folder")
        else:
            if not os.access(p, os.R_OK):
                raise InputError(f"{p}: cannot read (permission denied)")
            items.append(Item(p, p, os.path.basename(p)))
    return items, skipped


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


def open_log(path, resume=False):
    """The --log at path, its records indexed first for --resume (log.ignored: the incomplete lines a
    killed run left), open for appending."""
    log = Log(path)
    if resume:
        log.index()
    log.open()
    return log


def plan(items, log=None, resume=False):
    """[(item, offset)]: offset the byte offset of the item's record in the log when --resume takes it
    from there (its path and current sha256 have a record), else None (checked now)."""
    return [(it, log.find(it.label, it.path) if resume and it.data is None else None) for it in items]


@dataclass
class Result:
    item: Item
    record: dict                   # the fields of one --json object
    logged: bool = False           # taken from the --log by --resume, not checked again
    previous: dict | None = None   # --recheck: the log's record of a file checked again

    @property
    def disagrees(self):
        """Checked again (--recheck), the verdict differs from the log's."""
        return self.previous is not None and \
            (self.previous["status"], self.previous["exit_code"]) != (self.record["status"], self.record["exit_code"])


def results(planned, route, time_limit=None, jobs=1, *, log=None, recheck=False, full=True, waiting=None):
    """A Result per (item, offset) of planned, in order: checked here or in jobs worker processes
    (certkit.batch.records; each record written to the log as it lands), taken from the log, or with
    recheck checked again beside the log's record.  waiting(i, item): called before the i-th result
    is awaited.  Closing the iterator stops the workers."""
    tasks = (Task(it.label, it.path, it.data) for it, offset in planned if offset is None or recheck)
    to_check = sum(offset is None or recheck for _, offset in planned)
    checked = records(tasks, route, time_limit, min(jobs, to_check), full=full,
                      done=log.write if log is not None else None)
    with closing(checked):
        for i, (it, offset) in enumerate(planned):
            if waiting is not None:
                waiting(i, it)
            if offset is None:
                yield Result(it, next(checked))
            elif recheck:
                rec = next(checked)
                yield Result(it, rec, previous=log.read(offset))
            else:
                yield Result(it, log.read(offset), logged=True)


def summary_record(counts, files, resumed, t0, exit_code, disagreements=0):
    """The --summary object (schema: certkit/format/verify-summary.schema.json)."""
    return {"counts": {s: counts[s] for s in EXIT}, "files": files, "resumed": resumed,
            "disagreements": disagreements, "seconds": round(time.perf_counter() - t0, 3), "exit_code": exit_code}


@dataclass
class Tally:
    """What a run has decided so far: counts by status, the exit status (the largest), the results
    taken from the log and the disagreements --recheck found."""
    counts: Counter = field(default_factory=Counter)
    code: int = 0
    resumed: int = 0
    disagreements: int = 0

    def summary(self, files, t0, exit_code):
        """The --summary object of this tally (files: how many the run was given)."""
        return summary_record(self.counts, files, self.resumed, t0, exit_code, self.disagreements)
