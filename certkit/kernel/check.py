"""The one door into the kernel: check(path) -> Verdict.  Reads a format-1.x certificate, recomputes
every deciding number with rigorous enclosures; any other failure is an internal error, never REJECTED.
KINDS: one row per certificate kind, the lemmas its VERIFIED rests on (its "assumptions"; CONTRIBUTING.md)."""
import os
from collections import namedtuple

import numpy as np

from . import rule_chain, rule_lattice, rule_lower, rule_upper
from .fp import check_environment, FPEnvironmentError
from .load import read_json, header, claim as read_claim, instance as read_instance, Claim
from .load import Verdict, Malformed, Unsupported, Rejected, VERSION
from .rows import AUTO_ARB

# rule(inst, claim, witness, base_dir, route, choices) -> details (shape "matrix"; "pair": vs a replacement; "output":
# output distance) or rule(instance, claim, witness) -> (details, beta) ("parametric"); since: the format 1.since that
# added the kind (older: MALFORMED $.version); enclosure None: the route's
Kind = namedtuple("Kind", "name since relation lemmas rule shape enclosure", defaults=(None,))

FAST = "softmax-enclosure(fast: cohen-fausti, fp-rounding, ieee-exp"
ROUTE_ENCLOSURES = {"auto": FAST + "; arb balls where fast is open)", "fast": FAST + ")",
                    "arb": "softmax-enclosure(arb balls)"}
KINDS = {k.name: k for k in (
    Kind("upper-factorization", 0, "<=", ("factor-rank",), rule_upper.check_factorization, "matrix"),
    Kind("upper-covering", 0, "<=", ("cover-rank",), rule_upper.check_covering, "matrix"),
    Kind("lower-decoding-margin", 0, ">=", ("decode-margin",), rule_lower.check_margin, "matrix"),
    Kind("lower-decoding-inverse-norm", 0, ">=", ("decode-inverse-norm",), rule_lower.check_inverse_norm, "matrix"),
    Kind("lower-frobenius-tail", 0, ">=", ("frobenius-tail", "verified-svd"), rule_lower.check_frobenius, "matrix"),
    Kind("upper-chain", 0, "<=", ("chain-rule", "cited-covering-densities"), rule_chain.check, "matrix",
         "chain-rule(fp-rounding upper bounds, arb chain)"),
    Kind("attention-distance", 2, "<=", ("attention-distance",), rule_upper.check_distance, "pair"),
    Kind("attention-output-distance", 3, "<=", ("attention-output-distance",), rule_upper.check_output, "output"),
    Kind("lower-lattice", 0, ">=", ("lattice-construction",), rule_lattice.check, "parametric",
         "lattice-construction(arb theta bounds, exact counts)"),
)}
CHECKER = "certkit-kernel %d.%d" % VERSION
DEFAULT_ROUTE = "auto"      # the route of check(), `certkit verify`, the API and batch unless one is asked for
ROUTES = tuple(ROUTE_ENCLOSURES)


def kind_and_claim(doc: dict) -> tuple[Kind, Claim]:
    """(kinds-table row, claim) of a parsed certificate: the version gate, the kind, the claim, the kind's version."""
    kind = KINDS[header(doc, KINDS)]
    c = read_claim(doc, kind)
    if int(doc["version"].split(".")[1]) < kind.since:
        raise Malformed("$.version", f"kind {kind.name} needs format 1.{kind.since}, got {doc['version']}")
    return kind, c


class TimeLimit(BaseException):
    """A caller's interruption of check() (e.g. from a timer): UNSUPPORTED "resource limit: <message>"."""


def check(path: str | os.PathLike[str], route: str = DEFAULT_ROUTE, choices: object = None,
          data: bytes | None = None) -> Verdict:
    """Verdict for the certificate file at path (data: its bytes, from stdin: no sidecar).  route auto: upper bounds
    fast, then Arb on the rows it leaves open; lower bounds and output distances fast, then Arb on all if fast rejects
    n N <= AUTO_ARB entries.  choices (formats 1.0-1.2; 1.3 carries them): the untrusted oracle, e.g. choices.LAPACK,
    of the X ~ T^-1 and (U, s, Vt) two lower rules bound but never make (any is sound); None: UNSUPPORTED there."""
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
            inst = read_instance(doc, base, kind.shape)
            lower = route == "auto" and (kind.relation == ">=" or kind.shape == "output")   # fast, then Arb on all
            with np.errstate(all="ignore"):
                try:
                    details = kind.rule(inst, c, doc["witness"], base, "fast" if lower else route, choices)
                except Rejected:
                    if not lower or inst.n * inst.N * len(inst.layer or [inst]) > AUTO_ARB:
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
