"""certkit audit: every number of the chain certificate computed five ways, disagreements flagged
(proofs/chain-rule.md; docs/mathematics.md §5-§7), and tables of certified constants.

    routes.py   numpy / torch floats, the kernel's proven bounds, Arb enclosures fed to the sympy
                chain, mpmath at 50 digits
    compare.py  the flags: outside, unsound, routes, ordering
    core.py     targets (a certificate's witness, the best r, given r) and the entry points below
    report.py   the text table and the command line (add_arguments, run)
    tables.py   certkit tables: certified constants as CSV / Markdown / LaTeX

In memory (plain Python records, nothing printed or written):

    audit_head(head, eps_list, rs="auto", with_torch=True) -> list[dict]   one record per (eps, r)
    audit_certificate(path, rs="auto", with_torch=True) -> list[dict]
    flags(records) -> list[dict]                                          the disagreements

The names are imported on first use: `import certkit.auditing` loads neither sympy nor torch.
certkit.audit (the public API) calls audit_head / audit_certificate.
"""
from ..lazy import exports

_HOMES = {"audit_head": "core", "audit_certificate": "core", "AuditError": "core", "NotAuditable": "core",
          "flags": "compare", "add_arguments": "report", "run": "report", "render": "report"}
__all__ = sorted(_HOMES)


__getattr__, __dir__ = exports(__name__, _HOMES)
