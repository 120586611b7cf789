"""The kinds table: per certificate kind its relation, the lemmas a VERIFIED rests on (the
certificate's "assumptions", exactly), its rule, instance shape and enclosure text.  Loader, check(),
writers, CLI, audit and corpus read it; adding a kind: CONTRIBUTING.md."""
from collections import namedtuple

from . import rule_chain, rule_lattice, rule_lower, rule_upper

# rule(inst, claim, witness, base_dir, route, choices) -> details ("matrix"; "pair": with a replacement, the claim a
# distance) or rule(instance, claim, witness) -> (details, beta text) ("parametric"); enclosure None: the route's
Kind = namedtuple("Kind", "name relation lemmas rule shape enclosure")

ROUTE_ENCLOSURES = {"auto": "softmax-enclosure(fast: cohen-fausti, fp-rounding, ieee-exp; arb balls where fast is open)",
                    "fast": "softmax-enclosure(fast: cohen-fausti, fp-rounding, ieee-exp)",
                    "arb": "softmax-enclosure(arb balls)"}
KINDS = {k.name: k for k in (
    Kind("upper-factorization", "<=", ("factor-rank",), rule_upper.check_factorization, "matrix", None),
    Kind("upper-covering", "<=", ("cover-rank",), rule_upper.check_covering, "matrix", None),
    Kind("lower-decoding-margin", ">=", ("decode-margin",), rule_lower.check_margin, "matrix", None),
    Kind("lower-decoding-inverse-norm", ">=", ("decode-inverse-norm",), rule_lower.check_inverse_norm,
         "matrix", None),
    Kind("lower-frobenius-tail", ">=", ("frobenius-tail", "verified-svd"), rule_lower.check_frobenius, "matrix", None),
    Kind("upper-chain", "<=", ("chain-rule", "cited-covering-densities"), rule_chain.check, "matrix",
         "chain-rule(fp-rounding upper bounds, arb chain)"),
    Kind("attention-distance", "<=", ("attention-distance",), rule_upper.check_distance, "pair", None),
    Kind("lower-lattice", ">=", ("lattice-construction",), rule_lattice.check, "parametric",
         "lattice-construction(arb theta bounds, exact counts)"),
)}
