"""TRUSTED kernel (stdlib, numpy, python-flint), its door: only check(path) decides (borrowed numerics: .numerics)."""
from .check import check, CHECKER, DEFAULT_ROUTE, ROUTES, TimeLimit
from .kinds import KINDS
from .verdict import Verdict, EXIT, Malformed, Unsupported, Rejected
