"""certkit's public Python API: results are objects in memory first; writing files is explicit.

    r_eps(A) = min { rank B : max_i ||A_i - B_i||_1 <= eps },   A = row-softmax(beta Q K^T + log w + bias),

the smallest rank of an approximation whose attention output is within eps for every value
matrix bounded by 1 (docs/mathematics.md §1).  certify() searches for a lower and an upper bound,
writes each as a certificate and keeps it only if the trusted kernel VERIFIES it; verify() asks
the kernel about any certificate.  Every eps is exact (certkit.numbers: 0.1 means 1/10).
"""
import json
import os
import tempfile
from dataclasses import dataclass, field
from functools import cached_property
from fractions import Fraction

from .head import Head
from .kernel import DEFAULT_ROUTE, Verdict, check, read_json, read_regular
from .numbers import parse_eps, parse_eps_list

__all__ = ["Certificate", "Sandwich", "certify", "verify", "audit", "scale", "calibrate", "tables"]


def _command(name, attr, extra="search"):
    """certkit.commands.<name>.<attr>; a missing optional dependency names the extra to install."""
    import importlib
    try:
        return getattr(importlib.import_module(f"certkit.commands.{name}"), attr)
    except ModuleNotFoundError as e:
        raise ModuleNotFoundError(f"certkit.{name} needs the {extra!r} extra: pip install 'certkit[{extra}]' "
                                  f"(module {e.name} is not installed)", name=e.name) from None


def _sidecar_names(node):
    """File names of the sidecars a certificate document refers to."""
    if isinstance(node, dict):
        if isinstance(node.get("file"), str) and "sha256" in node:
            return [node["file"]]
        return [f for v in node.values() for f in _sidecar_names(v)]
    if isinstance(node, list):
        return [f for v in node for f in _sidecar_names(v)]
    return []


@dataclass(frozen=True, eq=False)
class Certificate:
    """A certificate in memory: the exact bytes of its JSON file and of its sidecars, and the
    kernel's verdict on exactly those bytes.  `search` holds what the untrusted search reported
    (not part of the certificate).  save() writes the same bytes anywhere: sidecars are named by
    content, so the bytes do not depend on the file name."""
    document: bytes
    sidecars: dict
    verdict: Verdict
    search: dict = field(default_factory=dict)

    @classmethod
    def read(cls, path, route=DEFAULT_ROUTE, search=None):
        """The certificate at path, with its sidecars, checked by the kernel."""
        doc, _ = read_json(path)
        base = os.path.dirname(os.path.abspath(path))
        sidecars = {}
        for name in _sidecar_names(doc.get("witness", {})) + _sidecar_names(doc.get("instance", {})):
            sidecars[name] = read_regular(os.path.join(base, name), 1 << 32, "$", f"sidecar {name!r}")
        with open(path, "rb") as f:
            raw = f.read()
        return cls(raw, sidecars, check(path, route), dict(search or {}))

    @cached_property
    def doc(self):
        """The certificate's JSON document, parsed once."""
        return json.loads(self.document)

    @property
    def kind(self):
        return self.doc["kind"]

    @property
    def relation(self):
        return self.doc["claim"]["relation"]

    @property
    def bound(self):
        """The certified bound: r_eps(A) <= bound (upper) or >= bound (lower)."""
        return int(self.doc["claim"]["bound"])

    @property
    def eps(self):
        return Fraction(self.doc["claim"]["eps"])

    @property
    def claim(self):
        return f"r_eps(A) {self.relation} {self.bound} at eps = {self.eps}"

    def save(self, path):
        """Write the certificate to path (a .json file) and its sidecars beside it; returns path."""
        folder = os.path.dirname(os.path.abspath(path))
        os.makedirs(folder, exist_ok=True)
        for name, raw in self.sidecars.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(raw)
        with open(path, "wb") as f:
            f.write(self.document)
        return path

    def __repr__(self):
        return f"Certificate({self.kind}: {self.claim}; {self.verdict.status})"


@dataclass(frozen=True, eq=False)
class Sandwich:
    """lower <= r_eps(A) <= upper for one head and eps: each end a kernel-VERIFIED Certificate
    (None where the search found none: then 0 and min(n, N) are the trivial bounds), with the
    peers' smallest certified k (peers: {name: {"k", "certified_error", "seconds"}})."""
    head: Head
    eps: Fraction
    lower: Certificate | None
    upper: Certificate | None
    peers: dict = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def bounds(self):
        """(lower, upper) as integers, the trivial bounds where a side has no certificate."""
        return (self.lower.bound if self.lower else 0,
                self.upper.bound if self.upper else min(self.head.n, self.head.N))

    def save(self, folder, prefix=""):
        """Write folder/<prefix>lower.json and <prefix>upper.json (those that exist) with their
        sidecars; returns {"lower": path, "upper": path}."""
        out = {}
        for side in ("lower", "upper"):
            c = getattr(self, side)
            if c is not None:
                out[side] = c.save(os.path.join(folder, f"{prefix}{side}.json"))
        return out

    def row(self, files=None):
        """The summary row of `certkit certify` (files: {"lower": path, "upper": path})."""
        h, lo, up, files = self.head, self.lower, self.upper, files or {}
        return {"head": h.name, "n": h.n, "N": h.N, "d": h.d, "beta": str(h.beta), "eps": str(self.eps),
                "lower": lo.bound if lo else None, "lower_kind": lo.kind if lo else None,
                "upper": up.bound if up else None, "upper_method": up.search.get("method") if up else None,
                "svd_rank": up.search.get("svd_rank") if up else None,
                "lower_file": files.get("lower"), "upper_file": files.get("upper"),
                "seconds": self.seconds, "peers": self.peers}

    def __repr__(self):
        lo, up = self.bounds
        return f"Sandwich({self.head.name}: {lo} <= r_eps(A) <= {up} at eps = {self.eps})"


def certify(head, eps, *, peers=(), seed=0, attempts=24):
    """Certified sandwich lower <= r_eps(A) <= upper for a Head at one eps (a list of eps gives
    a list of Sandwiches).  The lower search (decoding contractions, Frobenius tail) runs first,
    then the upper search (truncated SVD, LP row fits, joint l1 refinement) stops where it meets
    it; the kernel judges every candidate and only VERIFIED certificates are returned.  peers:
    names among "svd", "nystrom", "performer", "linformer" (seeded by seed).

    >>> import numpy as np, certkit
    >>> Q = np.array([[4.0, 0.0], [0.0, 4.0], [-4.0, 0.0]])
    >>> s = certkit.certify(certkit.Head.from_arrays(Q, Q, beta=2), eps="1/4")
    >>> s.lower.bound <= s.upper.bound, s.upper.verdict.status
    (True, 'VERIFIED')
    """
    sandwich = _command("certify", "sandwich")
    if not isinstance(head, Head):
        raise TypeError(f"certify: expected a certkit.Head, got {type(head).__name__} (use Head.from_arrays)")
    if isinstance(eps, (list, tuple)):
        A, inst = head.attention(), head.instance()
        return [sandwich(head, e, peers, seed, attempts, A=A, inst=inst) for e in parse_eps_list(eps)]
    return sandwich(head, parse_eps(eps), tuple(peers), seed, attempts)


def verify(target, route=DEFAULT_ROUTE, *, time_limit=None, jobs=1):
    """The kernel's Verdict (.status VERIFIED / REJECTED / MALFORMED / UNSUPPORTED / INTERNAL-ERROR,
    .exit_code 0-4, .message) on a certificate: a path, a Certificate in memory (written to a
    temporary folder and checked there), a folder (a list: every certificate under it, sorted) or
    a list of any of these.  route "auto": fast, then Arb where fast rejects (n N <= 2^20); "fast"
    only; "arb" Arb ball arithmetic throughout (slow).  time_limit:
    seconds per certificate, beyond which it is UNSUPPORTED "resource limit" (SIGALRM: call from the
    main thread).  jobs: a folder's certificates are checked in that many worker processes (the
    list keeps the sorted order; a script then needs the `if __name__ == "__main__":` guard of
    Python's "spawn" start method)."""
    if isinstance(target, Certificate):
        with tempfile.TemporaryDirectory(prefix="certkit-") as tmp:
            return check(target.save(os.path.join(tmp, "certificate.json")), route, time_limit)
    if isinstance(target, (list, tuple)):
        return [verify(t, route, time_limit=time_limit, jobs=jobs) for t in target]
    path = os.fspath(target)
    if os.path.isdir(path):
        from .batch import check_verdict, ordered
        return list(ordered(check_verdict, certificates_under(path)[0], (route, time_limit), jobs))
    return check(path, route, time_limit)


def certificates_under(folder):
    """(certificates, skipped): the *.json files below folder, recursively and sorted, whose JSON
    says "format": "certkit-certificate" (a file that is not JSON at all counts: it is a broken
    certificate, MALFORMED), and the other JSON files."""
    from .errors import InputError
    from .kernel import FORMAT, Malformed

    def refuse(e):
        raise InputError(f"{e.filename}: cannot read the folder ({e.strerror})")
    found = []
    for root, dirs, files in os.walk(folder, onerror=refuse):
        found += [os.path.join(root, f) for f in files if f.endswith(".json")]
    certs, skipped = [], []
    for f in sorted(found, key=lambda f: os.path.relpath(f, folder).split(os.sep)):
        try:
            doc, _ = read_json(f)
        except Malformed:
            doc = {"format": FORMAT}
        (certs if isinstance(doc, dict) and doc.get("format") == FORMAT else skipped).append(f)
    return certs, skipped


def audit(target, eps=None, r="auto", with_torch=True):
    """Audit the symbolic chain (docs/mathematics.md §7): for a Head at each eps, or for an
    upper-chain certificate file, one record per (eps, r) with every chain quantity by numpy,
    torch, the kernel's proven bound, the exact Arb enclosure and mpmath; records with flags
    mark disagreements (certkit.commands.audit.flags)."""
    if isinstance(target, Head):
        if eps is None:
            raise TypeError("audit: give eps for a Head")
        return _command("audit", "audit_head")(target, parse_eps_list(eps, "eps"), rs=r, with_torch=with_torch)
    return _command("audit", "audit_certificate")(os.fspath(target), rs=r, with_torch=with_torch)


def scale(families=("sphere", "ball", "interaction"), eps="7/20", points=13, tolerance=0.01,
          out=None, crosscheck=False, causal_lengths=None):
    """The certified scaling laws (docs/mathematics.md §8.2-8.5): per family and dimension,
    parametric lattice certificates over three decades of beta, each VERIFIED by the kernel, and
    the least-squares slope of log M against the theory exponent ((d-1)/2 sphere, d/2 ball, r/2
    interaction); with causal_lengths (e.g. (64, 256, 1024)), certified sandwiches for causal
    attention at beta = 0 against the context length.  Returns {"points", "slopes", "headline",
    "crosscheck", "causal"}; certificates go under out/certificates (a temporary folder, removed,
    when out is None)."""
    e = parse_eps(eps)
    families = [families] if isinstance(families, str) else list(families)
    point, FAMILIES, grid, slopes, headline, crosscheck_, causal_law = (
        _command("scale", a) for a in ("point", "FAMILIES", "grid", "slopes", "headline", "crosscheck", "causal_law"))
    with tempfile.TemporaryDirectory(prefix="certkit-") as tmp:
        base = out or tmp
        cert_dir = os.path.join(base, "certificates")
        os.makedirs(cert_dir, exist_ok=True)
        rows = [point(f, d, x, e, cert_dir) for f in families for d in FAMILIES[f]["dims"] for x in grid(f, points)]
        return {"points": rows, "slopes": slopes(rows, tolerance), "headline": headline(e, cert_dir),
                "crosscheck": crosscheck_(e, base) if crosscheck else [],
                "causal": causal_law(e, cert_dir, tuple(causal_lengths)) if causal_lengths else None}


def calibrate(model="minilm", **grid):
    """The real-model calibration grid (docs/mathematics.md §4-§7 on pretrained heads): per
    (layer, head, length, multiplier, eps) r_exact, r_SVD_int, r_opt, R_sym and the certified
    sandwich.  Keyword arguments as certkit.commands.calibrate.calibrate; returns {"rows", "summary", "out"}."""
    return _command("calibrate", "calibrate", "models")(model=model, **grid)


def tables(names=None, out=None, formats=("csv", "md", "tex")):
    """Tables of certified constants (theta_m, N_net, C_m, lattice margins, typical log10 S_r):
    {name: {"title", "columns", "rows"}} with every value an Arb enclosure [lo, hi] rounded
    outward beside an mpmath approximation; with out, also written as CSV / Markdown / LaTeX."""
    result = {}
    for name, title, fn in _command("tables", "TABLES"):
        if names is None or name in names:
            columns, rows = fn()
            result[name] = {"title": title, "columns": columns, "rows": rows}
    if out is not None:
        _command("tables", "build_tables")(out, tuple(formats), names)
    return result
