"""Writing outputs safely when several certkit runs (or a run and a reader) share a folder.

* write_atomic(path, data): the whole file or nothing, through a temporary file with a unique name
  in the same folder (tempfile.NamedTemporaryFile(dir=..., delete=False)) and os.replace, so two
  writers never share a temporary file and a reader never sees half a file;
* FolderLock(folder): the lock of an output folder (fcntl.flock on FOLDER/.certkit.lock), held by a
  certify or calibrate run from the moment it writes there until it ends; a second run into the
  same folder refuses (OutputError, exit 73, naming the folder and the holder's pid) unless it
  was asked to wait (--wait), so a folder never mixes the results of two runs.  The lock is
  released by the kernel when the process ends, however it ends (kill -9 included).  Where fcntl
  does not exist (Windows) there is no lock.

Neither follows a link or replaces what is not a regular file: an output path that exists as a
symbolic link, folder, FIFO or device (a repository can ship `.certkit.lock -> ~/.bashrc`, a user
can type `--summary /dev/full`) is refused with an OutputError (exit 73) naming it, and nothing is
written.  Every OSError while writing (a full disk: ENOSPC) becomes an OutputError naming the file.

An output folder (--out): check_folder(path, what) checks that it is writable or can be created
(before long work), ensure_folder(path, what) creates it (once the inputs are read).
"""
import errno
import json
import os
import stat
import sys
import tempfile
import time

from .errors import OutputError

LOCK_NAME = ".certkit.lock"


def cannot_write(path, e):
    """The OutputError of an OSError e raised while writing path (disk full, read-only, ...)."""
    why = "the disk is full" if getattr(e, "errno", None) in (errno.ENOSPC, errno.EDQUOT) else (e.strerror or str(e))
    return OutputError(f"{path}: cannot write ({why})")


def refuse_unless_regular(path, name=None):
    """OutputError unless path is missing or a regular file itself (lstat: a link is not followed);
    name: how the message calls it (default: the path itself, e.g. "--log FILE")."""
    name = name or path
    try:
        mode = os.lstat(path).st_mode
    except FileNotFoundError:
        return
    except OSError as e:
        raise cannot_write(name, e) from None
    if not stat.S_ISREG(mode):
        what = ("a symbolic link" if stat.S_ISLNK(mode) else "a folder" if stat.S_ISDIR(mode)
                else "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode)
                else "not a regular file")
        raise OutputError(f"{name}: exists and is {what}; certkit writes only regular files and never replaces "
                          f"or writes through anything else (remove it or choose another path)")


def open_regular(path, flags, name=None):
    """A descriptor of the regular file at path, created (0666 & ~umask) if missing, opened with flags
    | O_NOFOLLOW: a symbolic link, FIFO, folder or device there is refused (OutputError), never
    followed, replaced or written through, even if it appears after the first check."""
    name = name or path
    refuse_unless_regular(path, name)
    try:
        extra = sum(getattr(os, f, 0) for f in ("O_NOFOLLOW", "O_NONBLOCK", "O_CLOEXEC"))   # POSIX; 0 elsewhere
        fd = os.open(path, flags | os.O_CREAT | extra, 0o666)
    except OSError as e:
        if e.errno == errno.ELOOP:
            refuse_unless_regular(path, name)
        raise cannot_write(name, e) from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OutputError(f"{name}: not a regular file; certkit never writes through anything else")
    return fd


def write_atomic(path, data):
    """Write data (str: UTF-8 text, or bytes) to path atomically (see the module docstring)."""
    path = os.fspath(path)
    folder = os.path.dirname(path) or "."
    tmp = None
    refuse_unless_regular(path)
    try:
        os.makedirs(folder, exist_ok=True)
        with tempfile.NamedTemporaryFile("wb", dir=folder, prefix=f".{os.path.basename(path)}.", suffix=".tmp",
                                         delete=False) as f:
            tmp = f.name
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)            # as open() would create it (the temporary file is 0600)
        os.replace(tmp, path)
        tmp = None
    except OSError as e:
        raise cannot_write(path, e) from None
    finally:
        if tmp is not None:
            try:
                os.unlink(tmp)
            except OSError:
                pass
    return path


def write_json(path, obj, indent=1):
    """obj as JSON (indent, a final newline) written atomically to path."""
    return write_atomic(path, json.dumps(obj, indent=indent) + "\n")


def write_rows(path, rows, fields):
    """rows (dicts) as CSV at path (write_atomic): a header of fields, then one line per row (keys
    not in fields left out, a missing one an empty cell)."""
    import csv
    import io
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_atomic(path, buf.getvalue())


def check_folder(path, what="--out"):
    """OutputError naming `what` unless the output folder path exists and is writable, or can be
    created (its nearest existing parent is a writable folder).  Creates nothing: a run checks its
    output before long work and creates the folder only once its inputs have been read."""
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise OutputError(f"{what} {path}: exists and is not a folder")
        if not os.access(path, os.W_OK):
            raise OutputError(f"{what} {path}: the folder is not writable")
        return path
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK):
        raise OutputError(f"{what} {path}: cannot create the folder ({parent} is not a writable folder)")
    return path


def ensure_folder(path, what="--out"):
    """Create the output folder path (OutputError naming `what` if it cannot be a folder)."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise OutputError(f"{what} {path}: exists and is not a folder")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{what} {path}: cannot create the folder ({e.strerror})") from None
    if not os.access(path, os.W_OK):
        raise OutputError(f"{what} {path}: the folder is not writable")
    return path


class FolderLock:
    """The lock of an output folder (see the module docstring).  acquire() creates the folder's lock
    file and takes the lock, or raises OutputError naming `what` and the folder when another run
    holds it (wait=False) / waits for it (wait=True, a line on stderr once); release() lets go.
    A context manager too: `with FolderLock(out, "--out", wait): ...`."""

    def __init__(self, folder, what="--out", wait=False):
        self.folder, self.what, self.wait = os.fspath(folder), what, wait
        self._f = None

    def acquire(self):
        try:
            import fcntl
        except ImportError:           # no flock on this platform: no lock
            return self
        path = os.path.join(self.folder, LOCK_NAME)
        f = open(open_regular(path, os.O_RDWR), "a+")
        told = False
        while True:
            try:
                fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except OSError as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    f.close()
                    raise cannot_write(path, e) from None
                f.seek(0)
                holder = f.read().strip() or "?"
                if not self.wait:
                    f.close()
                    raise OutputError(f"{self.what} {self.folder}: another certkit run (pid {holder}) is writing "
                                      f"into this folder; wait for it to end, choose another folder, or give --wait "
                                      f"to wait for it") from None
                if not told:
                    print(f"{self.what} {self.folder}: waiting for the certkit run (pid {holder}) writing there",
                          file=sys.stderr, flush=True)
                    told = True
                time.sleep(0.2)
        try:
            f.seek(0)
            f.truncate()
            f.write(f"{os.getpid()}\n")
            f.flush()
        except OSError as e:          # a full disk: the lock file is the first thing a run writes
            try:
                f.close()             # (flushes again, and fails again)
            except OSError:
                pass
            raise cannot_write(path, e) from None
        self._f = f
        return self

    def release(self):
        if self._f is not None:
            self._f.close()           # closing the descriptor releases the flock
            self._f = None

    def __enter__(self):
        return self.acquire()

    def __exit__(self, *exc):
        self.release()
        return False
