"""TRUSTED kernel (stdlib, numpy, python-flint).  The door: only check(path) decides a Verdict.  What
producers borrow to choose and judge candidates is the second face, certkit.kernel.numerics."""
from .check import check, CHECKER, DEFAULT_ROUTE, ROUTES
from .kinds import KINDS
from .verdict import Verdict, EXIT, Malformed, Unsupported, Rejected
