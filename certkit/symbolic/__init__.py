"""The certificate chain of docs/mathematics.md §7: as sympy expressions (chain.py), with two
evaluators of those expressions (arb_eval.py: a whitelisted sympy -> Arb walker giving rigorous
enclosures, and an mpmath.mp walker, non-rigorous, for audit cross-checks only, docs/numerics.md §1),
and the same chain in plain floating point (float_chain.py: calibrate's r_opt, the audit's float
columns); tables.py: the tables of certified constants (`certkit tables`, certkit.tables).

Nothing here is part of the trusted kernel (certkit/kernel); it feeds reports and audit tables.
The names below are imported on first use, so `import certkit.symbolic.float_chain` does not load
sympy.  chain() is not re-exported, so that `certkit.symbolic.chain` stays the module: use
`from certkit.symbolic.chain import chain`.
"""
from ..lazy import exports

FORMATS = ("csv", "md", "tex")      # the file formats of the tables of certified constants (tables.py)

_HOMES = {**dict.fromkeys(("P", "P_pos", "V", "theta_Astar", "rogers", "theta", "logN_net"), "chain"),
          **dict.fromkeys(("evaluate_arb", "evaluate_mpmath", "chain_arb", "chain_mpmath", "arb_upper_int",
                           "certainly"), "arb_eval"),
          **dict.fromkeys(("log_theta", "log_size"), "float_chain")}
__all__ = sorted(_HOMES)


__getattr__, __dir__ = exports(__name__, _HOMES)
