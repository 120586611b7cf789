"""Batch verification for `certkit verify`: certificate files checked in input order, in this process
or in worker processes; the JSON Lines log that makes a run resumable; the progress line.

    records(tasks, route, time_limit, jobs, full, done) -> result records, in the order of tasks
    ordered(function, items, args, jobs, done)          -> function(item, *args), in the order of items

A result record has exactly the fields of one `certkit verify --json` object ($defs/result of
certkit/format/verify-output.schema.json); a `--log` line is one record.  Outside the trusted kernel:
a record repeats the kernel's Verdict (status, exit code, message, details) and adds the
certificate's header (kind, relation, bound, eps, read without checking), its sha256 and the time.

Worker processes are started with "spawn", import the kernel once, run one BLAS thread each and
ignore SIGINT and end with their parent (certkit.parallel.die_with_parent); each check runs in a worker's main thread, so the kernel's time limit (SIGALRM)
works there.  At most `WINDOW` tasks per worker are in flight, so memory stays bounded over any
number of files; done(result) sees each result as soon as it arrives (the --log is written in the
order the checks finish).  If the consumer stops (Ctrl-C in the parent, a closed pipe: the iterator
is closed) or a worker dies, the worker processes are terminated, not waited for.
"""
import collections
import hashlib
import itertools
import json
import os
import shutil
import signal
import stat
import sys
import threading
import time
from dataclasses import dataclass

from .kernel import DEFAULT_ROUTE

WINDOW = 4          # tasks in flight per worker process
FIELDS = frozenset(("file", "status", "exit_code", "kind", "relation", "bound", "eps", "message", "sha256",
                    "seconds", "details"))


class WorkerDied(RuntimeError):
    """A worker process ended without an answer (killed by a signal, the system out of memory)."""


@dataclass(frozen=True)
class Task:
    label: str           # the "file" of the record: the path as given or found, "-" for stdin
    path: str            # the file the kernel checks ("<stdin>" when data is given)
    data: bytes | None = None    # the certificate's bytes when it has no file (stdin: nothing is written)


def file_sha256(path):
    """sha256 of a regular file's bytes, None if it cannot be read or is not a regular file (a FIFO
    is opened without blocking and refused, as the kernel's loader does)."""
    h = hashlib.sha256()
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
    except OSError:
        return None
    return h.hexdigest()


def certificates_under(folder):
    """(certificates, skipped): the *.json files below folder, recursively and sorted, whose JSON
    says "format": "certkit-certificate" (a file that is not JSON at all counts: it is a broken
    certificate, MALFORMED), and the other JSON files."""
    from .errors import InputError
    from .kernel import Malformed
    from .kernel.numerics import FORMAT, read_json

    def refuse(e):
        raise InputError(f"{e.filename}: cannot read the folder ({e.strerror})")
    found = []
    for root, dirs, files in os.walk(folder, onerror=refuse):
        found += [os.path.join(root, f) for f in files if f.endswith(".json")]
    certs, skipped = [], []
    for f in sorted(found, key=lambda f: os.path.relpath(f, folder).split(os.sep)):
        try:
            doc, _ = read_json(f)
        except Malformed:
            doc = {"format": FORMAT}
        (certs if isinstance(doc, dict) and doc.get("format") == FORMAT else skipped).append(f)
    return certs, skipped


def header(path, data=None):
    """(kind, relation, bound, eps) from a certificate's header (data: its bytes, when it has no file),
    None each when it cannot be read."""
    from .kernel.numerics import kind_and_claim, read_json
    try:
        kind, c = kind_and_claim(read_json(path, data)[0])
        return kind.name, c.relation, int(c.bound), str(c.eps)
    except Exception:                 # MALFORMED / UNSUPPORTED header: the verdict says why
        return None, None, None, None


def plain(x):
    """x as plain JSON values (Fractions and other exact numbers as strings)."""
    return json.loads(json.dumps(x, default=str))


def check_record(task, route=DEFAULT_ROUTE, time_limit=None, full=True):
    """The result record of the kernel's check of one file.  full=False leaves out what only --json
    and --log show (the header and, when the kernel did not read the file, its sha256)."""
    from .choices import check
    t = time.perf_counter()
    v = check(task.path, route=route, time_limit=time_limit, data=task.data)
    dt = time.perf_counter() - t
    message = v.message
    kind, relation, bound, eps = header(task.path, task.data) if full else (None, None, None, None)
    sha = v.details.get("sha256") or (file_sha256(task.path) if full and task.data is None else None)
    return {"file": task.label, "status": v.status, "exit_code": v.exit_code, "kind": kind,
            "relation": relation, "bound": bound, "eps": eps, "message": message, "sha256": sha,
            "seconds": round(dt, 4), "details": plain(v.details)}


def check_verdict(path, route=DEFAULT_ROUTE, time_limit=None):
    """The kernel's Verdict on one file (the task of certkit.verify(folder, jobs=N))."""
    from .choices import check
    return check(path, route=route, time_limit=time_limit)


def _init_worker(parent):
    """Worker start: the worker ends with its parent (certkit.parallel.init_worker), Ctrl-C is the
    parent's to handle; the kernel is imported once, here."""
    from .parallel import init_worker
    init_worker(parent, ignore_sigint=True)
    from . import kernel  # noqa: F401


def records(tasks, route=DEFAULT_ROUTE, time_limit=None, jobs=1, full=True, done=None):
    """check_record(task) for every task, yielded in the order of tasks; done(record) is called with
    each record as soon as it is known, in the order the checks finish (see ordered)."""
    return ordered(check_record, tasks, (route, time_limit, full), jobs, done)


def ordered(function, items, args=(), jobs=1, done=None):
    """function(item, *args) for every item, yielded in the order of items: here when jobs <= 1, else
    in `jobs` worker processes (function must then be a module-level function, found by name).
    done(result), if given, is called in this process as soon as a result arrives, before the ones
    ahead of it are yielded: what it records (the --log) is never held back by a slower file."""
    done = done or (lambda result: None)
    if jobs <= 1:
        for item in items:
            result = function(item, *args)
            done(result)
            yield result
        return
    import concurrent.futures as cf
    import multiprocessing as mp
    from concurrent.futures.process import BrokenProcessPool
    from .threads import limited
    before = set(mp.active_children())
    items = iter(items)
    pending = collections.deque()     # [item, future, arrived, result], oldest first: at most WINDOW * jobs
    finished = False
    # Ctrl-C only sets a flag, acted on between pool operations: a KeyboardInterrupt raised inside the
    # executor's own locking (submit, wait) could leave it unable to shut down, and the process hanging
    interrupted = []
    main = threading.current_thread() is threading.main_thread()
    old_handler = signal.signal(signal.SIGINT, lambda *_: interrupted.append(True)) if main else None
    with limited(preload=()):
        pool = cf.ProcessPoolExecutor(jobs, mp_context=mp.get_context("spawn"), initializer=_init_worker,
                                      initargs=(os.getpid(),))

        def submit(n):
            for item in itertools.islice(items, n):
                pending.append([item, pool.submit(function, item, *args), False, None])
        try:
            submit(WINDOW * jobs)
            while pending:
                if interrupted:
                    raise KeyboardInterrupt
                if not pending[0][1].done():
                    cf.wait([e[1] for e in pending if not e[2]], timeout=0.2, return_when=cf.FIRST_COMPLETED)
                for entry in pending:
                    if not entry[2] and entry[1].done():
                        try:
                            entry[3] = entry[1].result()
                        except BrokenProcessPool:
                            names = ", ".join(str(getattr(e[0], "label", e[0])) for e in pending if not e[2])
                            raise WorkerDied(f"a worker process died (killed, or the system ran out of memory) "
                                             f"while checking one of: {names}") from None
                        entry[2] = True
                        done(entry[3])
                while pending and pending[0][2] and not interrupted:
                    result = pending.popleft()[3]
                    submit(1)
                    yield result
            if interrupted:
                raise KeyboardInterrupt
            finished = True
        finally:
            if main:
                signal.signal(signal.SIGINT, old_handler)
            if finished:
                pool.shutdown(wait=True)
            else:                             # interrupted, closed or broken: stop now, not after the queue
                workers = set(mp.active_children()) - before
                for p in workers:
                    p.terminate()
                for p in workers:
                    p.join(5)
                    if p.is_alive():
                        p.kill()
                        p.join()
                # the workers are gone, so this only waits for the executor's own thread, which reaps
                # them too: after it nothing is left running (or reaping) behind the caller's back
                pool.shutdown(wait=True, cancel_futures=True)


# ---------------------------------------------------------------- the log (--log, --resume)

def _key(label):
    return os.path.normpath(label)


class Log:
    """The JSON Lines log of a run: one result record per checked file, appended and flushed as each
    verdict lands.  index() reads the records already there (--resume); a line that is not a
    complete record (the last line of a run killed mid-write) is ignored, so its file is re-checked."""

    def __init__(self, path):
        self.path = path
        self.ignored = 0            # lines of the log that are not a complete record
        self.written = 0            # records appended by this run
        self.records = {}           # {file path: {sha256: byte offset of its latest record}}
        self._out = None

    def index(self):
        """Read the records already in the log (a missing log has none); returns their count."""
        found = self.records = {}
        try:
            f = open(self.path, "rb")
        except FileNotFoundError:
            return 0
        except OSError as e:
            from .errors import InputError
            raise InputError(f"--log {self.path}: cannot read ({e.strerror})") from None
        with f:
            offset = 0
            for line in f:
                rec = self._parse(line)
                if rec is None:
                    self.ignored += bool(line.strip())
                elif isinstance(rec["sha256"], str):      # null: the file could not be read, re-check it
                    found.setdefault(_key(rec["file"]), {})[rec["sha256"]] = offset
                offset += len(line)
        return sum(map(len, found.values()))

    def find(self, label, path):
        """Byte offset of the record of this file (its path and the sha256 of its current bytes), or None."""
        shas = self.records.get(_key(label))
        return shas.get(file_sha256(path)) if shas else None

    @staticmethod
    def _parse(line):
        """The record on a line, or None when the line is not one complete record."""
        if not line.endswith(b"\n"):
            return None
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):          # not JSON, or nested deeper than Python's stack
            return None
        ok = (isinstance(rec, dict) and set(rec) == FIELDS and isinstance(rec["file"], str)
              and isinstance(rec["status"], str) and isinstance(rec["exit_code"], int))
        return rec if ok else None

    def read(self, offset):
        """The record at a byte offset found by index()."""
        with open(self.path, "rb") as f:
            f.seek(offset)
            return json.loads(f.readline())

    def open(self):
        """Open for appending (created if missing); a last line cut short is closed with a newline first."""
        from .errors import OutputError
        from .outputs import open_regular
        fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND, f"--log {self.path}")
        try:
            self._out = open(fd, "ab")
            if self._out.tell() > 0:
                with open(self.path, "rb") as f:
                    f.seek(-1, os.SEEK_END)
                    if f.read(1) != b"\n":
                        self._out.write(b"\n")
                        self._out.flush()
        except OSError as e:
            raise OutputError(f"--log {self.path}: cannot write ({e.strerror})") from None
        return self

    def write(self, record):
        """Append one record; an OSError (a full disk) is an OutputError naming the log."""
        try:
            self._out.write(json.dumps(record, separators=(",", ":")).encode() + b"\n")
            self._out.flush()
        except OSError as e:
            from .outputs import cannot_write
            raise cannot_write(f"--log {self.path}", e) from None
        self.written += 1

    def close(self):
        if self._out is not None:
            self._out.close()
            self._out = None


def write_summary(path, summary):
    """Write the --summary JSON object atomically (a reader never sees half of it; certkit.outputs)."""
    from .outputs import write_json
    write_json(path, summary)


# ---------------------------------------------------------------- progress line (a terminal only)

def _clock(seconds):
    s = int(seconds + 0.5)
    return f"{s // 3600}:{s // 60 % 60:02d}:{s % 60:02d}" if s >= 3600 else f"{s // 60}:{s % 60:02d}"


class Progress:
    """`[i/n] pct rate ETA name` on one stderr line, redrawn at most 10 times a second unless it was
    cleared (to print a line).  The rate and the ETA count only the files checked in this run (those
    taken from a log are instant)."""

    def __init__(self, total, to_check=None, stream=None):
        self.total, self.stream = total, stream or sys.stderr
        self.to_check = total if to_check is None else to_check
        self.last = 0.0
        self.width = 0
        self.first = None           # (time, checked) when the first result arrived: the rate starts there

    def draw(self, done, checked, name=""):
        """Show that `done` files of total are decided, `checked` of them by this run; name: the next."""
        now = time.perf_counter()
        if self.width and now - self.last < 0.1:
            return
        self.last = now
        if checked and self.first is None:
            self.first = (now, checked)
        text = f"[{done}/{self.total}] {100 * done / self.total:3.0f} %"
        if self.first and checked > self.first[1] and now > self.first[0]:
            rate = (checked - self.first[1]) / (now - self.first[0])
            text += f"  {rate:.1f} files/s" if rate >= 1 else f"  {1 / rate:.1f} s/file"
            text += f"  ETA {_clock((self.to_check - checked) / rate)}"
        columns = shutil.get_terminal_size((80, 24)).columns - 1
        text = f"{text}  {name}"[:columns]
        print("\r" + text.ljust(self.width), end="", file=self.stream, flush=True)
        self.width = max(self.width, len(text))

    def clear(self):
        """Erase the line (before a line is printed on the terminal)."""
        if self.width:
            print("\r" + " " * self.width + "\r", end="", file=self.stream, flush=True)
            self.width = 0
