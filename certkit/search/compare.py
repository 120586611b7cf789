"""The certified distance between a head A and a replacement A' (certkit.compress):

    max_i ||A_i - A'_i||_1 <= eps,

proved by an attention-distance certificate (format 1.2) that the kernel VERIFIES; by the
operator identity the worst error of the attention output over value matrices in [-1, 1]
(docs/mathematics.md §10).  Untrusted like every producer: it predicts the kernel's bound with
the kernel's own numerics, rounds it up to a short decimal and lets the kernel judge the claim.
"""
import math
import os
import tempfile
import time
from fractions import Fraction

import numpy as np

from ..certificate import Certificate, Comparison, OutputComparison
from ..head import Head, HeadError, softmax_rows
from ..choices import check
from ..kernel import DEFAULT_ROUTE
from ..kernel.numerics import max_row_distance
from .writer import certificate, remove

KIND, OUTPUT_KIND = "attention-distance", "attention-output-distance"
NORMS = ("inf", "2")
PROBE = Fraction(2) ** 62    # the eps of the first check of an output distance: any bound is below it
DIGITS = 4               # the claimed eps: the kernel's bound rounded up to this many significant digits (more near 2)
ROWS = 1024              # rows per block of the float estimate


def float_distance(head: Head, other: Head) -> float:
    """max_i ||A_i - A'_i||_1 in float64, in row blocks (not rigorous: the estimate beside the proof)."""
    worst = 0.0
    for s in range(0, head.n, ROWS):
        rows = slice(s, s + ROWS)
        A, B = (softmax_rows(h.logits(rows=rows)) for h in (head, other))
        worst = max(worst, float(np.max(np.sum(np.abs(A - B), axis=1))))
    return worst


def round_up(x: float, digits: int = DIGITS) -> Fraction:
    """The smallest decimal with `digits` significant digits that is >= x (x > 0), exactly."""
    f = Fraction(x)
    scale = Fraction(10) ** (digits - 1 - math.floor(math.log10(x)))
    return Fraction(math.ceil(f * scale)) / scale


def certify_distance(head: Head, replacement: Head, eps: Fraction | None = None, path: str | None = None,
                     provenance: dict | None = None, shared: bool = True) -> Comparison:
    """Certify max_i ||A_i - A'_i||_1 <= eps for the replacement, writing the certificate at path
    (a temporary file when None; the Comparison holds its bytes either way).  eps None: the
    smallest eps this search states (the kernel's bound rounded up to DIGITS significant digits, or
    as many more as keep it below 2),
    checked on the fast route; a given eps is checked on the default route (fast, then Arb on the
    rows it leaves open).  A claim the kernel does not VERIFY leaves no file; distance is then None."""
    t0 = time.perf_counter()
    if (replacement.n, replacement.N) != (head.n, head.N):
        raise HeadError(f"replacement {replacement.name!r} is {replacement.n} x {replacement.N}, "
                        f"the head {head.n} x {head.N}")
    estimate = float_distance(head, replacement)
    bound = max_row_distance(head.instance(), replacement.instance(), "fast")[0]
    claim = Fraction(eps) if eps is not None else next(
        (c for c in (round_up(bound, k) for k in range(DIGITS, 18)) if c < 2), Fraction(2))   # more digits near 2
    if claim >= 2:                      # every row-l1 distance is <= 2: nothing to prove
        from ..kernel import Verdict
        v = Verdict("REJECTED", f"the certified bound {bound:.4g} is not below 2, the trivial bound")
        return Comparison(head, replacement, None, estimate, bound, None, v, time.perf_counter() - t0)
    with tempfile.TemporaryDirectory(prefix="certkit-") as tmp:
        target = path or os.path.join(tmp, "distance.json")
        certificate(target, KIND, 0, claim, head, {}, provenance, shared=shared, replacement=replacement)
        v = check(target, "fast" if eps is None else DEFAULT_ROUTE)
        cert = Certificate.read(target, verdict=v) if v.status == "VERIFIED" else None
        if cert is None and path:
            remove(target)
    return Comparison(head, replacement, claim if cert else None, estimate, bound, cert, v,
                      time.perf_counter() - t0)


def output_rows(head: Head, other: Head, norm: str = "inf") -> tuple[np.ndarray, np.ndarray]:
    """(||D_i||, ||(A V W)_i||) per row in float64, D = A V W - A' V' W, in row blocks (not rigorous:
    the estimate beside the proof)."""
    norm_of = (lambda X: np.max(np.abs(X), axis=1)) if norm == "inf" else (lambda X: np.linalg.norm(X, axis=1))
    W = head.projection
    P, P2 = ((h.values if W is None else h.values @ W) for h in (head, other))
    d, o = [], []
    for s in range(0, head.n, ROWS):
        rows = slice(s, s + ROWS)
        O, O2 = (softmax_rows(h.logits(rows=rows)) @ M for h, M in ((head, P), (other, P2)))
        d.append(norm_of(O - O2))
        o.append(norm_of(O))
    return np.concatenate(d), np.concatenate(o)


def certify_output_distance(head: Head, replacement: Head, norm: str = "inf", relative: bool = False,
                            eps: Fraction | None = None, path: str | None = None, provenance: dict | None = None,
                            shared: bool = True) -> OutputComparison:
    """Certify max_i ||(A V W - A' V' W)_i|| <= eps (relative: max_i ||D_i|| / ||(A V W)_i|| <= eps)
    for a head with values V (and projection W, or none) and a replacement with values V' (kind
    attention-output-distance, format 1.3).  eps None: the kernel's proven bound (from a first check
    of a claim at 2^62, which any finite bound meets) rounded up to DIGITS significant digits and
    checked on the fast route; a given eps is checked on the default route.  The certificate is
    written at path (a temporary file when None); a claim the kernel does not VERIFY leaves no file."""
    t0 = time.perf_counter()
    if norm not in NORMS:
        raise HeadError(f"output distance: norm must be one of {', '.join(NORMS)}, got {norm!r}")
    if head.values is None or replacement.values is None:
        raise HeadError(f"output distance: head {head.name!r} and its replacement need values V (N x d_v); "
                        f"give values= to Head.from_arrays")
    if replacement.n != head.n or replacement.values.shape[1] != head.values.shape[1]:
        raise HeadError(f"replacement {replacement.name!r} has {replacement.n} queries and d_v = "
                        f"{replacement.values.shape[1]}, the head {head.n} and {head.values.shape[1]}")
    d, o = output_rows(head, replacement, norm)
    with np.errstate(divide="ignore", invalid="ignore"):
        estimate = float(np.max(np.where(o > 0, d / o, np.inf) if relative else d))
    output = {"values": head.values, "replacement_values": replacement.values, "projection": head.projection,
              "norm": norm, "relative": relative}
    with tempfile.TemporaryDirectory(prefix="certkit-") as tmp:
        probe = os.path.join(tmp, "probe.json")
        certificate(probe, OUTPUT_KIND, 0, PROBE, head, {}, shared=False, replacement=replacement, output=output)
        first = check(probe, "fast")
        bound = first.details.get("certified_max_row_output_distance") if first.status == "VERIFIED" else None
        claim = Fraction(eps) if eps is not None else None if bound is None else (
            round_up(bound) if bound > 0 else Fraction(2) ** -1074)
        if claim is None:
            return OutputComparison(head, replacement, None, estimate, None, None, first, time.perf_counter() - t0,
                                    norm, relative)
        target = path or os.path.join(tmp, "output-distance.json")
        certificate(target, OUTPUT_KIND, 0, claim, head, {}, provenance, shared=shared, replacement=replacement,
                    output=output)
        v = check(target, "fast" if eps is None else DEFAULT_ROUTE)
        cert = Certificate.read(target, verdict=v) if v.status == "VERIFIED" else None
        if cert is None and path:
            remove(target)
    return OutputComparison(head, replacement, claim if cert else None, estimate, bound, cert, v,
                            time.perf_counter() - t0, norm, relative)

