"""Running independent tasks: serially, on a local process pool (--workers N) or on Dask
distributed (--scheduler).  One function for every sweep (calibrate's groups, model-wide certify).

    run(fn, tasks, workers=1, scheduler=None) -> iterator of fn(task), in completion order

scheduler: None (use workers), "local" or "local:N" (a dask.distributed LocalCluster of N
single-threaded worker processes, default 2), or the address of a running Dask scheduler
("tcp://host:8786"; start one with `dask scheduler` and workers with `dask worker tcp://host:8786
--nthreads 1` on each machine; every worker must see the output folder and have certkit installed;
--scheduler local starts its workers without Dask's statistical profiler and without the nanny's
MALLOC_TRIM_THRESHOLD_ (LOCAL_WORKERS): together they cost certkit's tasks ~20 % of their speed;
docs/guide/cluster.md shows the same settings for workers started by hand).
A task lost with its worker is re-run by the scheduler; fn must therefore be idempotent (certkit's
tasks write their results atomically under a content-independent name).  Every task runs with
certkit's BLAS thread count (certkit.threads: one unless CERTKIT_THREADS says otherwise), in the
process pool and on Dask alike, so results do not depend on the route.

Worker processes never outlive their parent (die_with_parent, the initializer of every local pool,
here and in certkit.batch): when the parent is killed (kill -9, the OOM killer) its workers end
within a second or two instead of running on, reparented, and writing results nobody reads.
"""
import os
import sys
import threading

from .errors import UserError
from .threads import call_limited, limited

# Dask worker settings for --scheduler local (docs/guide/cluster.md): no statistical
# profiler (it samples every thread's stack each 10 ms under the GIL), and glibc's malloc left
# as in a plain process: the nanny's MALLOC_TRIM_THRESHOLD_ = 65536 turns off glibc's dynamic
# mmap threshold, so every large numpy temporary is a fresh mmap and its page faults.
LOCAL_WORKERS = {"distributed.worker.profile.enabled": False,
                 "distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": None}


PARENT_POLL = 0.5          # seconds between two looks at the parent where prctl is not available


def die_with_parent(parent):
    """Worker initializer: end this process when its parent `parent` (a pid) ends.  Linux: the
    kernel sends SIGKILL on the parent's death (prctl PR_SET_PDEATHSIG); elsewhere, or if prctl
    fails, a daemon thread looks at the parent every PARENT_POLL seconds, so a worker also stops
    between tasks.  Either way, a parent already gone by the time this runs ends the worker now."""
    armed = False
    if sys.platform.startswith("linux"):
        try:
            import ctypes
            import signal
            libc = ctypes.CDLL(None, use_errno=True)
            armed = libc.prctl(1, int(signal.SIGKILL), 0, 0, 0) == 0        # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            armed = False
    if not parent_alive(parent):
        os._exit(1)
    if not armed:
        def watch():
            while parent_alive(parent):
                threading.Event().wait(PARENT_POLL)
            os._exit(1)
        threading.Thread(target=watch, name="certkit-parent-watch", daemon=True).start()


def parent_alive(parent):
    """True while `parent` is still this process's parent (a reparented orphan sees another ppid)."""
    return os.getppid() == parent


def init_worker(parent, ignore_sigint=False):
    """The initializer of certkit's local worker pools: die_with_parent, and Ctrl-C left to the
    parent when ignore_sigint (certkit.batch handles it there)."""
    die_with_parent(parent)
    if ignore_sigint:
        import signal
        signal.signal(signal.SIGINT, signal.SIG_IGN)


def parse_scheduler(text, what="--scheduler"):
    """None, ("local", n_workers) or ("address", address)."""
    if text is None:
        return None
    t = str(text).strip()
    if t == "local" or t.startswith("local:"):
        try:
            n = int(t.split(":", 1)[1]) if ":" in t else 2
        except ValueError:
            n = 0
        if n < 1:
            raise UserError(f"{what} {text!r}: expected local or local:N with N >= 1 workers")
        return ("local", n)
    if "://" not in t and ":" not in t:
        raise UserError(f"{what} {text!r}: expected local, local:N or a scheduler address such as tcp://host:8786")
    return ("address", t)


def run(fn, tasks, workers=1, scheduler=None):
    """fn(task) for every task, yielded as each completes (see the module docstring)."""
    tasks = list(tasks)
    sched = parse_scheduler(scheduler) if isinstance(scheduler, str) or scheduler is None else scheduler
    if sched is None and workers <= 1:
        for t in tasks:
            yield fn(t)
        return
    with limited(preload=()):                 # the workers inherit the thread settings
        yield from _pooled(fn, tasks, workers, sched)


def _pooled(fn, tasks, workers, sched):
    if sched is None:
        import concurrent.futures as cf
        import multiprocessing as mp
        with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=init_worker,
                                    initargs=(os.getpid(),)) as pool:
            for f in cf.as_completed([pool.submit(call_limited, fn, t) for t in tasks]):
                yield f.result()
        return
    try:
        from distributed import Client, LocalCluster, as_completed
    except ModuleNotFoundError:
        raise ModuleNotFoundError("--scheduler needs the 'dask' extra: pip install 'certkit[dask]'",
                                  name="distributed") from None
    cluster = None
    try:
        if sched[0] == "local":
            import dask
            with dask.config.set(LOCAL_WORKERS):
                cluster = LocalCluster(n_workers=sched[1], threads_per_worker=1, processes=True,
                                       dashboard_address=None)
            client = Client(cluster)
        else:
            try:
                client = Client(sched[1], timeout="20s")
            except OSError as e:
                raise UserError(f"--scheduler {sched[1]}: cannot reach the Dask scheduler ({e})") from None
        with client:
            futures = [client.submit(call_limited, fn, t, pure=False, priority=len(tasks) - i)   # in the given order
                       for i, t in enumerate(tasks)]
            for f in as_completed(futures):
                yield f.result()
    finally:
        if cluster is not None:
            cluster.close()
