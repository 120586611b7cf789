"""How many BLAS and OpenMP threads certkit's numeric work uses, in every process it runs in.

certkit runs its numeric work (numpy/scipy BLAS and LAPACK, torch's intra-op pool) with
``threads()`` threads per process: 1, unless the environment variable CERTKIT_THREADS names
another count.  Two reasons:

* **Speed on a shared machine.**  An OpenBLAS pool of one thread per core spins on every core; with
  other processes busy beside it, each call waits for the slowest core and a single-process run
  was measured 2x to 100x slower than the same run with one thread.  certkit parallelises across
  heads and tasks instead (--workers, --scheduler), one BLAS thread each.
* **The same certificate bytes.**  A multi-threaded BLAS may split a product or an SVD differently
  with the thread count, and the untrusted searches' floats (which end up in witnesses) change in
  their last bits.  With one thread everywhere, the bytes of a certificate do not depend on the
  machine's core count, the environment's OMP/OPENBLAS/MKL_NUM_THREADS, --workers or --scheduler.
  CERTKIT_THREADS=N (N > 1) is the user's explicit choice of speed over that guarantee: verdicts are
  unchanged (the kernel checks whatever it is given), witness floats may differ.

Applied through threadpoolctl (the libraries already loaded) and the OMP/OPENBLAS/MKL/
VECLIB/NUMEXPR_NUM_THREADS variables (the libraries loaded later in the process, and its child
processes): by the CLI around each command, by every worker process certkit starts (the
environment it inherits, and ``apply()`` again in the task wrapper of certkit.parallel for
workers started by hand), and around each numeric call of the Python API (``limited()``).
"""
import contextlib
import os
import sys

ENV = "CERTKIT_THREADS"
LIBRARY_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
               "NUMEXPR_NUM_THREADS")


def threads():
    """The number of BLAS/OpenMP threads certkit uses: CERTKIT_THREADS (an integer >= 1) or 1."""
    from .errors import UserError
    text = os.environ.get(ENV, "").strip()
    if not text:
        return 1
    if not text.isdigit() or int(text) < 1:
        raise UserError(f"{ENV}={text!r}: expected an integer >= 1 (the BLAS threads per process)")
    return int(text)


@contextlib.contextmanager
def limited(preload=("scipy.linalg",)):
    """threads() BLAS/OpenMP threads for the duration, the caller's settings restored afterwards:
    threadpoolctl on the libraries loaded now, torch.set_num_threads if torch is loaded, and the
    *_NUM_THREADS variables for libraries loaded meanwhile and for the processes started meanwhile.
    preload: modules imported first when installed, so that the BLAS they load is limited at once."""
    for name in preload:
        with contextlib.suppress(ImportError):
            __import__(name)
    n = threads()
    from threadpoolctl import threadpool_limits
    saved = {v: os.environ.get(v) for v in LIBRARY_ENV}
    os.environ.update({v: str(n) for v in LIBRARY_ENV})
    before = _set_torch(n)
    try:
        with threadpool_limits(limits=n):
            yield n
    finally:
        if before is not None:
            _set_torch(before)
        for v, old in saved.items():
            if old is None:
                os.environ.pop(v, None)
            else:
                os.environ[v] = old


def call_limited(fn, task):
    """fn(task) under limited(): the task wrapper of every worker process (certkit.parallel), so a
    worker started by hand (a Dask worker on another machine) computes as certkit's own do."""
    with limited():
        return fn(task)


def _set_torch(n):
    """torch's intra-op threads set to n if torch is loaded; the previous count (None: no torch)."""
    torch = sys.modules.get("torch")
    if torch is None or not hasattr(torch, "get_num_threads"):
        return None
    before = torch.get_num_threads()
    if before != n:
        torch.set_num_threads(n)
    return before
