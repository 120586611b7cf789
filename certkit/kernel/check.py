"""The one door into the kernel: check(path) -> Verdict.  Reads a format-1.x certificate, recomputes
every deciding number with rigorous enclosures; any other failure is an internal error, never REJECTED."""
import os
import signal

import numpy as np

from .fp import check_environment, FPEnvironmentError
from .kinds import KINDS, ROUTE_ENCLOSURES
from .load import read_json, header, claim as read_claim, instance as read_instance
from .verdict import Verdict, Malformed, Unsupported, Rejected

CHECKER = "certkit-kernel 1.1"
ROUTES = tuple(ROUTE_ENCLOSURES)


def kind_and_claim(doc):
    """(kinds-table row, claim) of a parsed certificate: the version gate, the kind, the claim."""
    kind = KINDS[header(doc, KINDS)]
    return kind, read_claim(doc, kind)


class TimeLimit(BaseException):
    """Raised by the alarm of check(time_limit=...); a BaseException, so no rule's handler catches it."""


def _alarm(signum, frame):
    raise TimeLimit


def check(path, route="fast", time_limit=None):
    """Verdict for the certificate file at path.  Resource exhaustion (memory; time_limit seconds,
    measured by SIGALRM, so only in a main thread) is UNSUPPORTED with a "resource limit" message."""
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}")
    old = time_limit and signal.signal(signal.SIGALRM, _alarm)
    try:
        try:
            if time_limit:
                signal.setitimer(signal.ITIMER_REAL, time_limit)
            return _check(path, route)
        finally:
            if time_limit:
                signal.setitimer(signal.ITIMER_REAL, 0)
                signal.signal(signal.SIGALRM, old)
    except TimeLimit:
        signal.signal(signal.SIGALRM, old)
        return Verdict("UNSUPPORTED", f"resource limit: not decided within the time limit of {time_limit} s")


def _check(path, route):
    sha = None
    try:
        check_environment()
        doc, sha = read_json(path)
        kind, c = kind_and_claim(doc)
        if kind.shape == "parametric":      # no token is enumerated, the route is unused
            details, beta_text = kind.rule(doc["instance"], c, doc["witness"])
        else:
            base = os.path.dirname(os.path.abspath(path))
            inst = read_instance(doc, base)
            with np.errstate(all="ignore"):
                details = kind.rule(inst, c, doc["witness"], base, route)
            beta_text = inst.beta.text
        details.update(kind=kind.name, sha256=sha, route=route)
        tail = (f"[kind={kind.name}, sha256={sha[:16]}, assumptions={','.join(sorted(doc['assumptions']))}, "
                f"enclosure={kind.enclosure or ROUTE_ENCLOSURES[route]}, beta={beta_text}, checker={CHECKER}]")
        return Verdict("VERIFIED", f"{c.text()}  {tail}", details)
    except Malformed as e:
        return Verdict("MALFORMED", f"{e.path}: {e.what}", {"sha256": sha})
    except Unsupported as e:
        return Verdict("UNSUPPORTED", str(e), {"sha256": sha})
    except Rejected as e:
        return Verdict("REJECTED", f"{e.step}: {e.detail}", {"sha256": sha})
    except MemoryError:
        return Verdict("UNSUPPORTED", "resource limit: out of memory", {"sha256": sha})
    except FPEnvironmentError as e:
        return Verdict("INTERNAL-ERROR", f"floating-point environment: {e}", {"sha256": sha})
    except Exception as e:   # a kernel bug: never REJECTED
        return Verdict("INTERNAL-ERROR", f"{type(e).__name__}: {e}", {"sha256": sha})
