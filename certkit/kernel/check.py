"""The one door into the kernel: check(path) -> Verdict.  Reads a format-1.x certificate, recomputes
every deciding number with rigorous enclosures; any other failure is an internal error, never REJECTED."""
import os

import numpy as np

from .common import AUTO_ARB
from .fp import check_environment, FPEnvironmentError
from .kinds import KINDS, ROUTE_ENCLOSURES, Kind
from .load import read_json, header, claim as read_claim, instance as read_instance, Claim
from .verdict import Verdict, Malformed, Unsupported, Rejected

CHECKER = "certkit-kernel 1.2"
DEFAULT_ROUTE = "auto"      # the route of check(), `certkit verify`, the API and batch unless one is asked for
ROUTES = tuple(ROUTE_ENCLOSURES)


def kind_and_claim(doc: dict) -> tuple[Kind, Claim]:
    """(kinds-table row, claim) of a parsed certificate: the version gate, the kind, the claim."""
    kind = KINDS[header(doc, KINDS)]
    return kind, read_claim(doc, kind)


class TimeLimit(BaseException):
    """A caller's interruption of check() (e.g. from a timer): UNSUPPORTED "resource limit: <message>"."""


def check(path: str | os.PathLike[str], route: str = DEFAULT_ROUTE, choices: object = None,
          data: bytes | None = None) -> Verdict:
    """Verdict for the certificate file at path (data: its bytes, read from stdin: no folder, no sidecar).  route "auto": upper bounds, fast, then Arb on the rows it leaves
    open (common.max_row_bound); lower bounds, fast, then Arb where it rejects n N <= AUTO_ARB entries (each route
    is sound alone).  Out of memory or a caller's TimeLimit: UNSUPPORTED.  choices: the untrusted oracle of the
    float choices the kernel bounds but never makes (any answer is sound), inverse(T) -> X ~ T^-1 and svd(X) ->
    (U, s, Vt) with s non-increasing, e.g. certkit.choices.LAPACK; None: UNSUPPORTED where a rule needs one."""
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}")
    sha = None
    try:
        check_environment()
        doc, sha = read_json(path, data)
        kind, c = kind_and_claim(doc)
        if kind.shape == "parametric":      # no token is enumerated, the route is unused
            details, beta_text = kind.rule(doc["instance"], c, doc["witness"])
        else:
            base = os.path.dirname(os.path.abspath(path)) if data is None else None
            inst = read_instance(doc, base, kind.shape == "pair")
            lower = route == "auto" and kind.relation == ">="     # lower bounds: fast, then Arb on the whole
            with np.errstate(all="ignore"):
                try:
                    details = kind.rule(inst, c, doc["witness"], base, "fast" if lower else route, choices)
                except Rejected:
                    if not lower or inst.n * inst.N > AUTO_ARB:
                        raise
                    details = {**kind.rule(inst, c, doc["witness"], base, "arb", choices), "route": "arb"}
            route = details.pop("route", "fast" if lower else route)
            beta_text = inst.beta.text
        details.update(kind=kind.name, sha256=sha, route=route)
        tail = (f"[kind={kind.name}, sha256={sha[:16]}, assumptions={','.join(sorted(doc['assumptions']))}, "
                f"enclosure={kind.enclosure or ROUTE_ENCLOSURES[route]}, beta={beta_text}, checker={CHECKER}]")
        return Verdict("VERIFIED", f"{c.text}  {tail}", details)
    except (Malformed, Unsupported, Rejected) as e:         # "path: what", "step: detail" or the reason
        return Verdict(e.status, str(e), {"sha256": sha})
    except (MemoryError, TimeLimit) as e:
        return Verdict("UNSUPPORTED", f"resource limit: {'out of memory' if isinstance(e, MemoryError) else e}",
                       {"sha256": sha})
    except FPEnvironmentError as e:
        return Verdict("INTERNAL-ERROR", f"floating-point environment: {e}", {"sha256": sha})
    except Exception as e:   # a kernel bug: never REJECTED
        return Verdict("INTERNAL-ERROR", f"{type(e).__name__}: {e}", {"sha256": sha})
