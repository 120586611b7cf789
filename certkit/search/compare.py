"""The certified distance between a head A and a replacement A' (certkit.compress):

    max_i ||A_i - A'_i||_1 <= eps,

proved by an attention-distance certificate (format 1.2) that the kernel VERIFIES; by the
operator identity the worst error of the attention output over value matrices in [-1, 1]
(docs/mathematics.md §10).  Untrusted like every producer: it predicts the kernel's bound with
the kernel's own numerics, rounds it up to a short decimal and lets the kernel judge the claim.
"""
import contextlib
import math
import os
import tempfile
import time
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from ..certificate import Certificate, Comparison, LayerComparison, OutputComparison
from ..head import Head, HeadError, softmax_rows
from ..choices import check
from ..kernel import DEFAULT_ROUTE
from ..kernel.numerics import max_row_distance, output_rows
from .writer import certificate, output_certificate, remove

KIND, OUTPUT_KIND = "attention-distance", "attention-output-distance"
NORMS = ("inf", "2")
BELOW_TWO = 2 - Fraction(1, 2 ** 60)   # the claim where no bound below 2 (every row-l1 distance's) is proved
LARGEST = Fraction(2 ** 64 - 1)     # the largest eps of an output-distance claim (format 1.3: eps < 2^64)
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


def scratch(path: str | None):
    """A temporary folder for a certificate held in memory only (path None); nothing when the caller names the
    file (so a run killed with kill -9 leaves nothing outside its --out)."""
    return tempfile.TemporaryDirectory(prefix="certkit-") if path is None else contextlib.nullcontext("")


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
        (c for c in (round_up(bound, k) for k in range(DIGITS, 18)) if c < 2), BELOW_TWO)   # more digits near 2
    with scratch(path) as tmp:
        target = path or os.path.join(tmp, "distance.json")
        certificate(target, KIND, 0, claim, head, {}, provenance, shared=shared, replacement=replacement)
        v = check(target, "fast" if eps is None else DEFAULT_ROUTE)
        cert = Certificate.read(target, verdict=v) if v.status == "VERIFIED" else None
        if cert is None and path:
            remove(target)
    return Comparison(head, replacement, claim if cert else None, estimate, bound, cert, v,
                      time.perf_counter() - t0)


def float_output_rows(pairs: list, norm: str = "inf") -> tuple[np.ndarray, np.ndarray]:
    """(||D_i||, ||O_i||) per row in float64, O = sum over pairs (head, replacement) of (A V) W and D = O - sum
    (A' V') W, in row blocks (not rigorous: the measurement beside the proof)."""
    norm_of = (lambda X: np.max(np.abs(X), axis=1)) if norm == "inf" else (lambda X: np.linalg.norm(X, axis=1))

    def out(h, W, rows):
        AV = softmax_rows(h.logits(rows=rows)) @ h.values
        return AV if W is None else AV @ W
    d, o = [], []
    for s in range(0, pairs[0][0].n, ROWS):
        rows = slice(s, s + ROWS)
        O, O2 = (sum(out(hr[side], hr[0].projection, rows) for hr in pairs) for side in (0, 1))
        d.append(norm_of(O - O2))
        o.append(norm_of(O))
    return np.concatenate(d), np.concatenate(o)


def check_pairs(pairs: list, norm: str) -> None:
    """HeadError unless every head and replacement has values, one n, and the heads' outputs one width."""
    if norm not in NORMS:
        raise HeadError(f"output distance: norm must be one of {', '.join(NORMS)}, got {norm!r}")
    width = lambda h: (h.values if h.projection is None else h.projection).shape[1]     # noqa: E731
    for head, rep in pairs:
        if head.values is None or rep.values is None:
            raise HeadError(f"output distance: head {head.name!r} and its replacement need values V (N x d_v); "
                            f"give values= to Head.from_arrays")
        if rep.n != head.n or rep.values.shape[1] != head.values.shape[1]:
            raise HeadError(f"replacement {rep.name!r} has {rep.n} queries and d_v = {rep.values.shape[1]}, "
                            f"the head {head.n} and {head.values.shape[1]}")
        if len(pairs) > 1 and (head.projection is None or head.n != pairs[0][0].n
                               or width(head) != width(pairs[0][0])):
            raise HeadError(f"a layer's heads need projections W_O of one width and one number of queries: "
                            f"{head.name!r} differs from {pairs[0][0].name!r}")


def layer_instance(pairs: list):
    """The kernel's instance of a layer (its first head, with .layer), built in memory with every check."""
    insts = []
    for head, rep in pairs:
        x, x.replacement = head.instance(), rep.instance()
        x.values, x.projection, x.replacement.values = head.values, head.projection, rep.values
        insts.append(x)
    insts[0].layer = insts
    return insts[0]


@dataclass
class OutputRows:
    """Per token i: bound_i >= ||D_i|| (certified by the kernel's numerics), relative_i >= ||D_i|| / ||O_i||
    (inf where ||O_i|| has no positive certified lower bound), and the float64 measurements of ||D_i||
    and ||O_i||."""
    bound: np.ndarray
    relative: np.ndarray
    estimate: np.ndarray
    output: np.ndarray

    @property
    def relative_estimate(self) -> np.ndarray:
        """The float64 ||D_i|| / ||O_i|| (inf where ||O_i|| = 0)."""
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.where(self.output > 0, self.estimate / self.output, np.inf)

    def stats(self) -> dict:
        """Certified max / mean / p99 over tokens of the absolute and relative bounds, each with its float value."""
        out = {}
        for name, cert, flt in (("abs", self.bound, self.estimate), ("rel", self.relative, self.relative_estimate)):
            for stat, f in (("max", np.max), ("mean", np.mean), ("p99", lambda x: np.quantile(x, 0.99, method="higher"))):
                out[f"{name}_{stat}"], out[f"{name}_{stat}_float"] = float(f(cert)), float(f(flt))
        return out


def certify_output(pairs: list, norm: str = "inf", relative: bool = False, eps: Fraction | None = None,
                   path: str | None = None, provenance: dict | None = None, shared: bool = True) -> tuple:
    """(claim or None, estimate, kernel bound, Certificate or None, Verdict, OutputRows) for
    max_i ||D_i|| <= eps, D = sum over pairs (head, replacement) of A V W - A' V' W (relative: / ||(A V W)_i||)
    (kind attention-output-distance, format 1.3).  The per-token bounds come from the kernel's numerics on
    the fast route (output_rows); eps None: their max rounded up to DIGITS significant digits, checked by
    the kernel on the fast route; a given eps on the default route.  The certificate is written at path (a
    temporary file when None); a claim the kernel does not VERIFY leaves no file."""
    check_pairs(pairs, norm)
    d, o = float_output_rows(pairs, norm)
    rows = OutputRows(*output_rows(layer_instance(pairs), norm, "fast"), d, o)
    estimate = float(np.max(rows.relative_estimate if relative else d))
    bound = float(np.max(rows.relative if relative else rows.bound))
    claim = Fraction(eps) if eps is not None else LARGEST if not bound < LARGEST else (
        round_up(bound) if bound > 0 else Fraction(2) ** -1074)      # no finite bound: the kernel says why
    with scratch(path) as tmp:
        target = path or os.path.join(tmp, "output-distance.json")
        output_certificate(target, pairs, claim, norm, relative, provenance, shared)
        v = check(target, "fast" if eps is None else DEFAULT_ROUTE)
        cert = Certificate.read(target, verdict=v) if v.status == "VERIFIED" else None
        if cert is None and path:
            remove(target)
    return claim if cert else None, estimate, bound if np.isfinite(bound) else None, cert, v, rows


def certify_output_distance(head: Head, replacement: Head, norm: str = "inf", relative: bool = False,
                            eps: Fraction | None = None, path: str | None = None, provenance: dict | None = None,
                            shared: bool = True) -> OutputComparison:
    """Certify max_i ||(A V W - A' V' W)_i|| <= eps (relative: max_i ||D_i|| / ||(A V W)_i|| <= eps)
    for a head with values V (and projection W, or none) and a replacement with values V' (certify_output
    on the one pair)."""
    t0 = time.perf_counter()
    claim, estimate, bound, cert, v, rows = certify_output([(head, replacement)], norm, relative, eps, path,
                                                           provenance, shared)
    return OutputComparison(head, replacement, claim, estimate, bound, cert, v, time.perf_counter() - t0,
                            norm, relative, rows)


def certify_layer_output(layer: str, heads: list, replacements: list, norm: str = "inf", relative: bool = False,
                         eps: Fraction | None = None, path: str | None = None, provenance: dict | None = None,
                         shared: bool = True) -> LayerComparison:
    """Certify the attention block of a layer: max_i ||sum_h (A_h V_h - A'_h V'_h) W_O^h)_i|| <= eps (relative:
    over ||sum_h (A_h V_h W_O^h)_i||), every head with its values and its slice W_O^h of the output
    projection (a grouped-query layer: each query head with its key-value head's keys and values)."""
    t0 = time.perf_counter()
    if not heads or len(heads) != len(replacements):
        raise HeadError(f"layer {layer}: {len(heads)} heads and {len(replacements)} replacements (one each)")
    claim, estimate, bound, cert, v, rows = certify_output(list(zip(heads, replacements)), norm, relative, eps,
                                                           path, provenance, shared)
    method = str(replacements[0].provenance.get("compression", replacements[0].name))
    return LayerComparison(layer, method, heads, replacements, claim, estimate, bound, cert, v,
                           time.perf_counter() - t0, norm, relative, rows)
