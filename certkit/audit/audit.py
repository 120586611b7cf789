"""Transitional alias: the command line's audit module is certkit.audit (report.py); this module
only keeps `certkit.audit.audit` importable for callers not yet moved (certkit/cli.py)."""
from .report import add_arguments, run  # noqa: F401
