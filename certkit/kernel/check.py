"""The one door into the kernel: check(path) -> Verdict.

Reads a format-1.0 certificate, recomputes every deciding number with rigorous enclosures and
answers VERIFIED / REJECTED / MALFORMED / UNSUPPORTED; any other failure is an internal error
(exit 4), never REJECTED.
"""
import os

import numpy as np

from . import rule_chain, rule_covering, rule_decoding, rule_factorization, rule_frobenius, rule_lattice
from .fp import check_environment, FPEnvironmentError
from .load import read_json, header, claim as read_claim, instance as read_instance
from .verdict import Verdict, Malformed, Unsupported, Rejected

CHECKER = "certkit-kernel 1.0"
ROUTES = ("fast", "arb")
RULES = {
    "upper-factorization": rule_factorization.check,
    "upper-covering": rule_covering.check,
    "lower-decoding-margin": rule_decoding.check_margin,
    "lower-decoding-inverse-norm": rule_decoding.check_inverse_norm,
    "lower-frobenius-tail": rule_frobenius.check,
    "upper-chain": rule_chain.check,
}
ROUTE_LEMMAS = {"fast": "softmax-enclosure(fast: cohen-fausti, fp-rounding, ieee-exp)",
                "arb": "softmax-enclosure(arb balls)"}
CHAIN_ENCLOSURE = "chain-rule(fp-rounding upper bounds, arb chain)"   # route-independent
LATTICE_ENCLOSURE = "lattice-construction(arb theta bounds, exact counts)"


def check(path, route="fast"):
    """Verdict for the certificate file at path."""
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}")
    sha = None
    try:
        check_environment()
        doc, sha = read_json(path)
        kind = header(doc)
        c = read_claim(doc, kind)
        base = os.path.dirname(os.path.abspath(path))
        if kind == "lower-lattice":      # parametric: no token is enumerated, the route is unused
            details, beta_text = rule_lattice.check(doc["instance"], c, doc["witness"])
            enclosure = LATTICE_ENCLOSURE
        else:
            inst = read_instance(doc, base)
            with np.errstate(all="ignore"):
                details = RULES[kind](inst, c, doc["witness"], base, route)
            beta_text = inst.beta.text
            enclosure = CHAIN_ENCLOSURE if kind == "upper-chain" else ROUTE_LEMMAS[route]
        details.update(kind=kind, sha256=sha, route=route)
        tail = (f"[kind={kind}, sha256={sha[:16]}, assumptions={','.join(sorted(doc['assumptions']))}, "
                f"enclosure={enclosure}, beta={beta_text}, checker={CHECKER}]")
        return Verdict("VERIFIED", f"{c.text()}  {tail}", details)
    except Malformed as e:
        return Verdict("MALFORMED", f"{e.path}: {e.what}", {"sha256": sha})
    except Unsupported as e:
        return Verdict("UNSUPPORTED", str(e), {"sha256": sha})
    except Rejected as e:
        return Verdict("REJECTED", f"{e.step}: {e.detail}", {"sha256": sha})
    except FPEnvironmentError as e:
        return Verdict("INTERNAL-ERROR", f"floating-point environment: {e}", {"sha256": sha})
    except Exception as e:   # a kernel bug: never REJECTED
        return Verdict("INTERNAL-ERROR", f"{type(e).__name__}: {e}", {"sha256": sha})
