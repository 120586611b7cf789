"""The certificate chain of SPEC §7 as sympy expressions (chain.py) and two evaluators of those
expressions (arb_eval.py): a whitelisted sympy -> Arb walker (rigorous enclosures) and an
mpmath.mp walker (non-rigorous, high precision; audit cross-checks only, NUMERICS §1).

Nothing here is part of the trusted kernel (certkit/kernel); it feeds reports and audit tables.
The function chain() is not re-exported here, so that `certkit.symbolic.chain` stays the module:
use `from certkit.symbolic.chain import chain`.
"""
from .chain import P, P_pos, V, theta_Astar, rogers, theta, logN_net  # noqa: F401
from .arb_eval import (evaluate_arb, evaluate_mpmath, chain_arb, chain_mpmath,  # noqa: F401
                       arb_upper_int)
