"""Certificates in memory: a certificate's exact bytes with the kernel's Verdict on them, and the
certified sandwich  lower <= r_eps(A) <= upper  of one head at one eps,

    r_eps(A) = min { rank B : max_i ||A_i - B_i||_1 <= eps }     (docs/mathematics.md §1).

A Certificate is checked by the kernel exactly once: when it is read from a file, or, for one the
searches wrote, by certkit.search.writer.write_checked, whose Verdict it is handed.
"""
import hashlib
import json
import os
from dataclasses import dataclass, field
from functools import cached_property
from fractions import Fraction
from typing import Any

from .choices import check
from .head import Head
from .kernel import DEFAULT_ROUTE, Verdict
from .kernel.numerics import kind_and_claim, read_json, read_regular
from .numbers import decimal
from .outputs import write_atomic


def sidecar_names(node: Any) -> list[str]:
    """File names of the sidecars a certificate document refers to."""
    if isinstance(node, dict):
        if isinstance(node.get("file"), str) and "sha256" in node:
            return [node["file"]]
        return [f for v in node.values() for f in sidecar_names(v)]
    if isinstance(node, list):
        return [f for v in node for f in sidecar_names(v)]
    return []


@dataclass(frozen=True, eq=False)
class Certificate:
    """A certificate in memory: the exact bytes of its JSON file and of its sidecars, and the
    kernel's verdict on exactly those bytes.  `search` holds what the untrusted search reported
    (not part of the certificate).  save() writes the same bytes anywhere: sidecars are named by
    content, so the bytes do not depend on the file name."""
    document: bytes
    sidecars: dict[str, bytes]
    verdict: Verdict
    search: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def read(cls, path: str, route: str = DEFAULT_ROUTE, search: dict[str, Any] | None = None,
             verdict: Verdict | None = None) -> "Certificate":
        """The certificate at path with its sidecars and the kernel's Verdict on them: `verdict`
        when the caller already holds the kernel's Verdict on exactly these bytes (the searches:
        certkit.search.writer.write_checked), else the kernel checks them now on `route`."""
        doc, _ = read_json(path)
        base = os.path.dirname(os.path.abspath(path))
        sidecars = {}
        for name in sidecar_names(doc.get("witness", {})) + sidecar_names(doc.get("instance", {})):
            sidecars[name] = read_regular(os.path.join(base, name), 1 << 32, "$", f"sidecar {name!r}")
        with open(path, "rb") as f:
            raw = f.read()
        if verdict is not None and verdict.details.get("sha256") != hashlib.sha256(raw).hexdigest():
            raise ValueError(f"{path}: the verdict given is not the kernel's on these bytes (sha256 differs)")
        return cls(raw, sidecars, verdict if verdict is not None else check(path, route), dict(search or {}))

    @cached_property
    def doc(self) -> dict[str, Any]:
        """The certificate's JSON document, parsed once."""
        return json.loads(self.document)

    @property
    def kind(self) -> str:
        return self.doc["kind"]

    @property
    def relation(self) -> str:
        return self.doc["claim"]["relation"]

    @property
    def bound(self) -> int:
        """The certified bound: r_eps(A) <= bound (upper) or >= bound (lower); a distance
        certificate (kind attention-distance) has none: its claim is eps."""
        if "bound" not in self.doc["claim"]:
            raise AttributeError(f"a {self.kind} certificate claims a distance (its eps), not a rank bound")
        return int(self.doc["claim"]["bound"])

    @property
    def eps(self) -> Fraction:
        return Fraction(self.doc["claim"]["eps"])

    @property
    def claim(self) -> str:
        """The canonical claim, as the kernel states it ("r_eps(A) <= 12 at eps = 1/4", ...)."""
        return kind_and_claim(self.doc)[1].text

    def save(self, path: str) -> str:
        """Write the certificate to path (a .json file) and its sidecars beside it, each atomically
        (certkit.outputs: an OSError such as a full disk is an OutputError naming the file); returns path."""
        folder = os.path.dirname(os.path.abspath(path))
        for name, raw in self.sidecars.items():
            write_atomic(os.path.join(folder, name), raw)
        write_atomic(path, self.document)
        return path

    def __repr__(self) -> str:
        return f"Certificate({self.kind}: {self.claim}; {self.verdict.status})"


@dataclass(frozen=True, eq=False)
class Sandwich:
    """lower <= r_eps(A) <= upper for one head and eps: each end a kernel-VERIFIED Certificate
    (None where the search found none: then 0 and min(n, N) are the trivial bounds), with the
    peers' smallest certified k (peers: {name: {"k", "certified_error", "seconds"}}).

    budget: the seconds the searches had (None: no budget); stopped_on_budget: True when the
    budget ended the searches, so that the sandwich is the best one VERIFIED by then (a rerun with
    a larger budget may narrow it); width: upper / lower."""
    head: Head
    eps: Fraction
    lower: Certificate | None
    upper: Certificate | None
    peers: dict[str, Any] = field(default_factory=dict)
    seconds: float = 0.0
    budget: float | None = None
    stopped_on_budget: bool = False

    @property
    def bounds(self) -> tuple[int, int]:
        """(lower, upper) as integers, the trivial bounds where a side has no certificate."""
        return (self.lower.bound if self.lower else 0,
                self.upper.bound if self.upper else min(self.head.n, self.head.N))

    @property
    def width(self) -> float | None:
        """upper / lower of bounds (the trivial upper min(n, N) where there is no upper certificate);
        None without a lower bound."""
        lo, up = self.bounds
        return up / lo if lo else None

    def save(self, folder: str, prefix: str = "") -> dict[str, str]:
        """Write folder/<prefix>lower.json and <prefix>upper.json (those that exist) with their
        sidecars; returns {"lower": path, "upper": path}."""
        out: dict[str, str] = {}
        for side in ("lower", "upper"):
            c = getattr(self, side)
            if c is not None:
                out[side] = c.save(os.path.join(folder, f"{prefix}{side}.json"))
        return out

    def row(self, files: dict[str, str] | None = None) -> dict[str, Any]:
        """The summary row of `certkit certify` (files: {"lower": path, "upper": path})."""
        h, lo, up, files = self.head, self.lower, self.upper, files or {}
        row = {"head": h.name, "n": h.n, "N": h.N, "d": h.d, "beta": str(h.beta), "eps": str(self.eps),
               "lower": lo.bound if lo else None, "lower_kind": lo.kind if lo else None,
               "upper": up.bound if up else None, "upper_method": up.search.get("method") if up else None,
               "svd_rank": up.search.get("svd_rank") if up else None,
               "lower_file": files.get("lower"), "upper_file": files.get("upper"),
               "seconds": self.seconds, "peers": self.peers}
        if self.budget is not None:       # a budgeted run's rows say whether it ended the searches
            width = self.width
            row.update(budget=self.budget, stopped_on_budget=self.stopped_on_budget,
                       width=None if width is None else round(width, 4))
        return row

    def __repr__(self) -> str:
        lo, up = self.bounds
        stop = f"; stopped on the budget of {self.budget:g} s" if self.stopped_on_budget else ""
        return f"Sandwich({self.head.name}: {lo} <= r_eps(A) <= {up} at eps = {self.eps}{stop})"


@dataclass(frozen=True, eq=False)
class Comparison:
    """max_i ||A_i - A'_i||_1 <= distance for a head A and a replacement A' (a compressed head):
    by the operator identity, the worst error of the attention output over all value matrices with
    entries in [-1, 1].  distance is the eps of a kernel-VERIFIED attention-distance certificate
    (None where none was proved); estimate is the float64 value (not rigorous), kernel_bound the
    kernel's proven float bound before the claim's rounding up."""
    head: Head
    replacement: Head
    distance: Fraction | None
    estimate: float
    kernel_bound: float | None
    certificate: Certificate | None
    verdict: Verdict
    seconds: float = 0.0

    @property
    def method(self) -> str:
        return str(self.replacement.provenance.get("compression", self.replacement.name))

    def row(self, file: str | None = None) -> dict[str, Any]:
        """The summary row of `certkit compare`."""
        h = self.head
        return {"head": h.name, "method": self.method, "n": h.n, "N": h.N, "d": h.d, "beta": str(h.beta),
                "certified": None if self.distance is None else decimal(self.distance),
                "certified_float": None if self.distance is None else float(self.distance),
                "estimate": self.estimate, "kernel_bound": self.kernel_bound, "verdict": self.verdict.status,
                "file": file, "seconds": self.seconds}

    def __repr__(self) -> str:
        d = "not proved" if self.distance is None else f"<= {float(self.distance):.4g}"   # exact: 4 digits
        return f"Comparison({self.head.name} vs {self.method}: max_i ||A_i - A'_i||_1 {d}, float {self.estimate:.4g})"


@dataclass(frozen=True, eq=False)
class OutputComparison(Comparison):
    """max_i ||(A V W - A' V' W)_i|| <= distance (norm "inf" or "2"; relative: over ||(A V W)_i||) for
    a head with values V (and its slice W of the output projection) and a replacement with values
    V': the error of the head's output on these very values, proved by a kernel-VERIFIED
    attention-output-distance certificate (format 1.3).  The fields of a Comparison (kernel_bound
    None where the kernel proved no bound), the norm, whether the error is relative, and rows: the
    per-token bounds and float measurements (certkit.search.compare.OutputRows; stats())."""
    norm: str = "inf"
    relative: bool = False
    rows: Any = None

    def row(self, file: str | None = None) -> dict[str, Any]:
        """A summary row (as certkit compare's, with the norm, whether the error is relative, and per-token stats)."""
        return {**super().row(file), "norm": self.norm, "relative": self.relative,
                **({} if self.rows is None else self.rows.stats())}

    def __repr__(self) -> str:
        what = f"||(A V W - A' V' W)_i||_{self.norm}" + (f" / ||(A V W)_i||_{self.norm}" if self.relative else "")
        d = "not proved" if self.distance is None else f"<= {float(self.distance):.4g}"
        return f"OutputComparison({self.head.name} vs {self.method}: max_i {what} {d}, float {self.estimate:.4g})"


@dataclass(frozen=True, eq=False)
class LayerComparison:
    """The attention block of a layer: max_i ||(sum_h (A_h V_h - A'_h V'_h) W_O^h)_i|| <= distance (norm "inf"
    or "2"; relative: over ||(sum_h A_h V_h W_O^h)_i||), every head with its values and its slice of the
    output projection, proved by one kernel-VERIFIED attention-output-distance certificate whose instance
    is the layer ({"heads": [...]}, format 1.3).  rows: per token, the certified bound of ||D_i|| and of the
    relative error and their float values (stats(): max / mean / p99 of each)."""
    layer: str
    method: str
    heads: list
    replacements: list
    distance: Fraction | None
    estimate: float
    kernel_bound: float | None
    certificate: "Certificate | None"
    verdict: Verdict
    seconds: float
    norm: str
    relative: bool
    rows: Any

    def row(self, file: str | None = None) -> dict[str, Any]:
        """The summary row of `certkit compare --level layer`."""
        h = self.heads[0]
        return {"head": self.layer, "layer": self.layer, "method": self.method, "heads": len(self.heads), "n": h.n,
                "norm": self.norm, "relative": self.relative,
                "certified": None if self.distance is None else decimal(self.distance),
                "certified_float": None if self.distance is None else float(self.distance),
                "estimate": self.estimate, "kernel_bound": self.kernel_bound, "verdict": self.verdict.status,
                **self.rows.stats(), "file": file, "seconds": self.seconds}

    def __repr__(self) -> str:
        what = f"||D_i||_{self.norm}" + (f" / ||O_i||_{self.norm}" if self.relative else "")
        d = "not proved" if self.distance is None else f"<= {float(self.distance):.4g}"
        return (f"LayerComparison({self.layer}, {len(self.heads)} heads vs {self.method}: max_i {what} {d}, "
                f"float {self.estimate:.4g})")
