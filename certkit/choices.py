"""The float choices the kernel checks but never makes, and the one call of the kernel's door.

Two rules need a float matrix that only *chooses*: lower-decoding-inverse-norm an approximate inverse
X of the contraction T (it bounds ||I - X T||, proofs/decode-inverse-norm.md) and lower-frobenius-tail
an approximate thin SVD of the contraction C (it bounds the orthogonality defects and the residual,
proofs/verified-svd.md).  Whatever X or (U, s, Vt) the kernel is given, its enclosures hold, so a
wrong or poor choice can only lead to REJECTED (TRUST.md, "The hints").  They come from here, LAPACK
through numpy: written into format-1.3 certificates as hints (certkit.search.writer.add_hints), and
handed to certkit.kernel.check as the oracle that 1.0-1.2 certificates need; every certkit caller of
the kernel goes through check() below.
"""
import os
import signal

import numpy as np

from . import kernel


class Lapack:
    """numpy's LAPACK as the kernel's oracle: inverse(T) -> X and svd(X) -> (U, s, Vt)."""

    def inverse(self, T: np.ndarray) -> np.ndarray:
        """The Moore-Penrose pseudo-inverse of the square float matrix T."""
        return np.linalg.pinv(T)

    def svd(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The thin SVD X ~ U diag(s) Vt, s non-increasing, computed on the tall orientation of X."""
        if X.shape[0] < X.shape[1]:
            U, s, Vt = np.linalg.svd(X.T, full_matrices=False)
            return Vt.T, s, U.T
        return np.linalg.svd(X, full_matrices=False)


LAPACK = Lapack()


def check(path: str | os.PathLike[str], route: str = kernel.DEFAULT_ROUTE,
          time_limit: float | None = None, data: bytes | None = None) -> kernel.Verdict:
    """The kernel's Verdict on the certificate at path, with LAPACK's choices (certkit.kernel.check);
    data: the certificate's bytes when it has no file (read from stdin; its arrays inline).
    time_limit: seconds after which a timer (SIGALRM: call from the main thread) interrupts the check
    with kernel.TimeLimit, which the kernel answers UNSUPPORTED "resource limit"."""
    if not time_limit:
        return kernel.check(path, route, LAPACK, data)

    def alarm(signum, frame):
        raise kernel.TimeLimit(f"not decided within the time limit of {time_limit} s")
    old = signal.signal(signal.SIGALRM, alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, time_limit)
        return kernel.check(path, route, LAPACK, data)
    except kernel.TimeLimit as e:            # the timer fired just before the check began (a tiny limit)
        return kernel.Verdict("UNSUPPORTED", f"resource limit: {e}")
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
