"""TRUSTED kernel (stdlib, numpy, python-flint), its door: only check(path) decides (borrowed numerics: .numerics)."""
from .check import check, CHECKER, DEFAULT_ROUTE, KINDS, ROUTES, TimeLimit
from .load import Verdict, EXIT, Malformed, Unsupported, Rejected
