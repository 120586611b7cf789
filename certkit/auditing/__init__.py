"""The chain audit: every number of the chain certificate computed five ways, disagreements flagged
(proofs/chain-rule.md; docs/mathematics.md §5-§7).

    routes.py   numpy / torch floats, the kernel's proven bounds, Arb enclosures fed to the sympy
                chain, mpmath at 50 digits
    compare.py  the flags: outside, unsound, routes, ordering
    core.py     targets (a certificate's witness, the best r, given r) and the entry points below

In memory (plain Python records, nothing printed or written):

    audit_head(head, eps_list, rs="auto", with_torch=True) -> list[dict]   one record per (eps, r)
    audit_certificate(path, rs="auto", with_torch=True) -> list[dict]
    audit_files(certificates, heads, eps_list, rs, beta) -> records, one at a time
    audit_result(records) -> certkit.results.AuditResult                 the rows of certkit.audit
    flags(records) -> list[dict]                                          the disagreements

The names are imported on first use: `import certkit.auditing` loads neither sympy nor torch.
certkit.audit (the public API) calls audit_head / audit_certificate and audit_result; `certkit audit`
(certkit/commands/audit.py: the text table) calls audit_files.
"""
from ..lazy import exports

_HOMES = {"audit_head": "core", "audit_certificate": "core", "audit_files": "core", "audit_result": "core",
          "AuditError": "core", "NotAuditable": "core", "flags": "compare"}
__all__ = sorted(_HOMES)


__getattr__, __dir__ = exports(__name__, _HOMES)
