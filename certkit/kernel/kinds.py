"""The kinds table: per certificate kind its relation, the lemmas a VERIFIED rests on (the
certificate's "assumptions", exactly), its rule, instance shape and enclosure text.  Loader, check(),
writers, CLI, audit and corpus read it; adding a kind: CONTRIBUTING.md."""
from dataclasses import dataclass
from typing import Callable

from . import rule_chain, rule_covering, rule_decoding, rule_factorization, rule_frobenius, rule_lattice


@dataclass(frozen=True)
class Kind:
    name: str
    relation: str            # "<=" (upper bound) or ">=" (lower bound)
    lemmas: tuple            # the certificate's assumptions, exactly (proofs/<lemma>.md)
    rule: Callable           # matrix: rule(inst, claim, witness, base_dir, route) -> details
    shape: str               # "matrix" or "parametric" (rule(instance, claim, witness) -> (details, beta text))
    enclosure: str | None    # verdict's enclosure text; None = the route's (ROUTE_ENCLOSURES)


ROUTE_ENCLOSURES = {"fast": "softmax-enclosure(fast: cohen-fausti, fp-rounding, ieee-exp)",
                    "arb": "softmax-enclosure(arb balls)"}
KINDS = {k.name: k for k in (
    Kind("upper-factorization", "<=", ("factor-rank",), rule_factorization.check, "matrix", None),
    Kind("upper-covering", "<=", ("cover-rank",), rule_covering.check, "matrix", None),
    Kind("lower-decoding-margin", ">=", ("decode-margin",), rule_decoding.check_margin, "matrix", None),
    Kind("lower-decoding-inverse-norm", ">=", ("decode-inverse-norm",), rule_decoding.check_inverse_norm,
         "matrix", None),
    Kind("lower-frobenius-tail", ">=", ("frobenius-tail", "verified-svd"), rule_frobenius.check, "matrix", None),
    Kind("upper-chain", "<=", ("chain-rule", "cited-covering-densities"), rule_chain.check, "matrix",
         "chain-rule(fp-rounding upper bounds, arb chain)"),
    Kind("lower-lattice", ">=", ("lattice-construction",), rule_lattice.check, "parametric",
         "lattice-construction(arb theta bounds, exact counts)"),
)}
