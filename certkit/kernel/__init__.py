"""TRUSTED kernel: stdlib + numpy + python-flint only.  One entry point: check()."""
from .check import check, CHECKER, ROUTES
from .verdict import Verdict, EXIT

__all__ = ["check", "Verdict", "EXIT", "CHECKER", "ROUTES"]
