"""What the audit audits, and its in-memory entry points.

A target is (source, subject, eps, witness, base_dir): a head (routes.Subject), a tolerance and an
upper-chain witness (W, c, e, E, c1, c') — a certificate's own witness for kind upper-chain,
otherwise the SVD-bridge witness of search/chain.py at the r with the smallest certified R_sym
(rs="auto"), at every r up to r_num (rs="all") or at the given r.  audit_one() evaluates every
route (routes.py) and attaches the disagreements (compare.py) to one record:

    {"source", "n", "N", "d", "beta", "eps", "r", "torch",
     "rows": [{"quantity", "numpy_f64", "torch_f32", "torch_f64", "kernel", "arb", "mpmath"}, ...],
     "checks": {"witness_actual_row_error"}, "ordering": [{"r", "actual", "tau_exact", "tau_width",
     "tau_spec", "ok"}, ...], "flags": [...], "seconds"}
"""
import os
import time
from fractions import Fraction
from typing import NamedTuple

from ..errors import InputError, UserError
from ..head import Head
from ..kernel import Malformed, Unsupported
from ..kernel.numerics import chain_witness as read_witness, instance, kind_and_claim, parse_numeral, read_json
from ..numbers import BetaInterval, OverSqrt, parse_eps_list
from ..results import AuditResult
from . import compare, routes


class AuditError(UserError):
    """Bad input to the audit: the message names the argument, the file or the value."""


class NotAuditable(AuditError):
    """A certificate without an explicit head (kind lower-lattice is parametric)."""

    def __init__(self, path, reason):
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = path, reason


class Target(NamedTuple):
    source: str
    subject: routes.Subject
    eps: Fraction
    witness: dict
    base_dir: str


# ----------------------------------------------------------------------------- inputs

def parse_rs(rs, what="r"):
    """'auto' (or None), 'all', an int, a list of ints >= 0 or their comma list as text."""
    if rs is None or rs in ("auto", "all"):
        return rs or "auto"
    try:
        if isinstance(rs, str):
            out = [int(x) for x in rs.split(",")]
        elif isinstance(rs, int) and not isinstance(rs, bool):
            out = [rs]
        else:
            out = [int(x) for x in rs]
            if any(isinstance(x, bool) or int(x) != x for x in rs):
                raise ValueError
        if not out or any(r < 0 for r in out):
            raise ValueError
        return out
    except (TypeError, ValueError):
        raise AuditError(f"{what} {rs!r}: expected 'auto', 'all', or integers >= 0 (a comma list)") from None


def _beta(x):
    """The exact beta of a certificate's instance (already checked by the kernel's reader)."""
    at = "$.instance.beta"
    if isinstance(x, str):
        return parse_numeral(x, at)
    if "interval" in x:
        return BetaInterval(*(parse_numeral(v, at) for v in x["interval"]))
    return OverSqrt(*(parse_numeral(v, at) for v in x["over_sqrt"]))


def chain_witnesses(s, eps, rs):
    """Witness documents for subject s at eps: the best r (the smallest certified R_sym, else r = 0)
    for rs == "auto", every r in 0..r_num for "all", else the given r."""
    from .. import geometry
    from ..search.chain import best_chain, chain_witness, kept_keys, witness_json
    h = s.head
    if rs == "all":
        rs = list(range(geometry.frame(h.queries, kept_keys(h))["r_num"] + 1))
    if rs == "auto":
        found = best_chain(h, eps, inst=s.inst)
        if found is not None:
            return [witness_json(found[2])]
        rs = [0]
    return [witness_json(chain_witness(h, r)) for r in rs]


def certificate_targets(path, rs="auto"):
    """The targets of a certificate file: its own witness for kind upper-chain with rs "auto",
    else chain witnesses of its head at its eps.  AuditError for an unreadable or MALFORMED /
    UNSUPPORTED certificate, NotAuditable for a parametric one."""
    path = os.fspath(path)
    rs = parse_rs(rs)
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such file" if not os.path.exists(path) else f"{path}: not a regular file")
    try:
        doc, _ = read_json(path)
        kind, c = kind_and_claim(doc)
        if kind.shape == "parametric":
            raise NotAuditable(path, f"skipped ({kind.name} certificates are parametric; certkit scale "
                                     f"cross-checks them against explicit matrices)")
        if kind.shape == "pair":
            raise NotAuditable(path, f"skipped ({kind.name} certificates compare two attentions and have no chain "
                                     f"quantities; certkit verify checks them)")
        base = os.path.dirname(os.path.abspath(path))
        inst = instance(doc, base)
        if kind.name == "upper-chain" and rs == "auto":
            read_witness(doc["witness"], inst.Q.shape[1], base)       # MALFORMED now, not mid-audit
    except Malformed as e:
        raise AuditError(f"{path}: MALFORMED {e.path}: {e.what}") from None
    except Unsupported as e:
        raise AuditError(f"{path}: UNSUPPORTED {e}") from None
    head = Head(inst.Q, inst.K, _beta(doc["instance"]["beta"]), inst.weights, inst.bias,
                name=os.path.splitext(os.path.basename(path))[0], provenance=doc.get("provenance") or {})
    s = routes.subject(head, inst)
    if kind.name == "upper-chain" and rs == "auto":
        return [Target(path, s, c.eps, doc["witness"], base)]
    return [Target(path, s, c.eps, w, ".") for w in chain_witnesses(s, c.eps, rs)]


def head_targets(head, eps_list, rs="auto", source=None):
    """The targets of a Head at each eps (source: the label of the records, default head.name)."""
    if not isinstance(head, Head):
        raise AuditError(f"expected a certkit.Head, got {type(head).__name__} (use Head.from_arrays or Head.from_file)")
    rs = parse_rs(rs)
    eps_list = parse_eps_list(eps_list, "eps")
    label = head.name if source is None else source
    try:
        s = routes.subject(head)
    except (Malformed, Unsupported) as e:                  # e.g. d > 512, entries beyond 2^64
        raise AuditError(f"{label}: the kernel cannot take this head: {e}") from None
    return [Target(f"{label} (eps = {eps})", s, eps, w, ".") for eps in eps_list for w in chain_witnesses(s, eps, rs)]


# ----------------------------------------------------------------------------- one audit

def audit_one(t, backends, with_torch):
    """The audit record of one target (see the module docstring)."""
    t0 = time.perf_counter()
    s, eps = t.subject, Fraction(t.eps)
    inst = s.inst
    d = s.head.d
    wit = read_witness(t.witness, d, t.base_dir)          # the kernel's reader: exact float arrays
    r = wit[0].shape[1]
    N = int(len(s.kept))
    rows = {q: dict.fromkeys(routes.COLUMNS) for q in routes.QUANTITIES}
    routes.float_columns(rows, backends, s, wit, eps, r, min(inst.n, N))
    k = routes.kernel_column(rows, inst, eps, t.witness, t.base_dir, wit[3].shape[1] > 0)
    ca, cm = routes.exact_columns(rows, s, wit, eps, r, N)
    actual = routes.witness_residual(s, wit, s.head.beta_float)
    levels = routes.profile_levels(s)
    flags = (compare.outside(rows) + compare.unsound(rows) + compare.routes(rows, ca, cm)
             + compare.witness(actual, k["tau"]) + compare.ordering(levels))
    return {"source": t.source, "n": inst.n, "N": N, "d": d, "beta": s.beta_text, "eps": str(eps), "r": r,
            "torch": with_torch, "rows": [dict(quantity=q, **rows[q]) for q in routes.QUANTITIES],
            "checks": {"witness_actual_row_error": actual}, "ordering": levels, "flags": flags,
            "seconds": round(time.perf_counter() - t0, 3)}


def audit_targets(targets, with_torch=True, progress=None):
    """Records of the targets, one at a time (a generator: a caller can show each as it comes);
    progress(i, n, target) is called before the i-th of n targets is audited."""
    backends, torch_used = routes.backends(with_torch)
    for i, t in enumerate(targets, 1):
        if progress is not None:
            progress(i, len(targets), t)
        yield audit_one(t, backends, torch_used)


def audit_head(head, eps_list, rs="auto", with_torch=True, *, source=None):
    """Audit records of a certkit.Head at each eps (a list, or one eps; exact: 0.1 means 1/10) and
    each r of rs: "auto" (the r with the smallest certified R_sym), "all" (0..r_num), or ints.
    with_torch: also the torch float32/float64 columns when torch is installed (record "torch")."""
    return list(audit_targets(head_targets(head, eps_list, rs, source), with_torch))


def audit_certificate(path, rs="auto", with_torch=True):
    """Audit records of a certificate file: its own witness for an upper-chain certificate (rs
    "auto"), else chain witnesses of its head at its eps.  Raises NotAuditable (a UserError) for a
    parametric lower-lattice certificate."""
    return list(audit_targets(certificate_targets(path, rs), with_torch))


def audit_files(certificates, heads, eps_list, rs="auto", beta=None, skipped=None, progress=None):
    """Records of certificate files and head files (each head at every eps of eps_list; beta: None
    or the beta of every head file), one at a time (a generator, as audit_targets).  Every file is
    read before the first audit, so a bad one is an error before any work; skipped(error) is
    called for a certificate that cannot be audited (NotAuditable), which is raised without it."""
    targets = []
    for p in certificates:
        try:
            targets += certificate_targets(p, rs)
        except NotAuditable as e:
            if skipped is None:
                raise
            skipped(e)
    for p in heads:
        targets += head_targets(Head.from_file(p, beta), eps_list, rs, source=p)
    yield from audit_targets(targets, progress=progress)


ENCLOSED = ("kernel", "arb")       # the audit's columns holding an enclosure [lo, hi]


def split(column, value):
    """An audit column's (names, values) in the rows: an enclosure [lo, hi] as column_lo, column_hi
    (an exact value, such as R_sym, in both); any other column as it is."""
    if column not in ENCLOSED:
        return (column,), (value,)
    return (column + "_lo", column + "_hi"), tuple(value) if isinstance(value, list) else (value, value)


def audit_result(records):
    """The AuditResult of audit records: one row per (source, eps, r, quantity), every enclosure
    split into its two ends (split), the records and their flags."""
    columns = [x for c in routes.COLUMNS for x in ((c + "_lo", c + "_hi") if c in ENCLOSED else (c,))]
    rows = [{"source": rec["source"], "eps": rec["eps"], "r": rec["r"], "quantity": q["quantity"],
             **{x: v for c in routes.COLUMNS for x, v in zip(*split(c, q[c]))}} for rec in records for q in rec["rows"]]
    return AuditResult(rows=rows, columns=("source", "eps", "r", "quantity", *columns), records=records,
                       flags=compare.flags(records))
