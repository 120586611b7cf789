"""The verdicts (VERIFIED / REJECTED / MALFORMED / UNSUPPORTED, exit codes 0/1/2/3; 4: an internal error, a kernel bug,
never REJECTED; only kernel.check() builds a VERIFIED) and the strict reading of formats 1.0, 1.1 (row masks), 1.2
(sinks, replacement), 1.3 (values, output distances, the lower rules' float choices): JSON, version gate, numerals,
arrays, .npy sidecars pinned by sha256 (never pickle; safetensors: Unsupported).  Anything not exactly as the format
says is Malformed(JSON path, what); a version or kind this checker does not read is Unsupported."""
import hashlib
import io
import re
import json
import os
import stat
from dataclasses import dataclass, field
from fractions import Fraction

import flint
import numpy as np

from .fp import arb_of, arb_to_fraction_lower, arb_to_fraction_upper, float_up

FORMAT = "certkit-certificate"
VERSION = (1, 3)
MAX_FILE = 1 << 26            # 64 MiB of JSON
MAX_SIDECAR = 1 << 32         # 4 GiB per array
MAX_INLINE = 1 << 20          # inline array entries
DTYPES = {"float64": np.float64, "float32": np.float32, "int64": np.int64, "int32": np.int32}


# ---------------------------------------------------------------- verdicts
EXIT = {"VERIFIED": 0, "REJECTED": 1, "MALFORMED": 2, "UNSUPPORTED": 3, "INTERNAL-ERROR": 4}


class Malformed(Exception):
    """The certificate is not a well-formed certificate document: JSON path + what is wrong."""
    status = "MALFORMED"

    def __init__(self, path: str, what: str) -> None:
        super().__init__(f"{path}: {what}")
        self.path, self.what = path, what


class Unsupported(Exception):
    """A well-formed document this checker does not read (version, kind) or, with a message starting
    "resource limit", cannot decide within its limits (memory, time)."""
    status = "UNSUPPORTED"


class Rejected(Exception):
    """A recomputed enclosure does not certainly support the claim: step/rule + both numbers."""
    status = "REJECTED"

    def __init__(self, step: str, detail: str) -> None:
        super().__init__(f"{step}: {detail}")


@dataclass(frozen=True)
class Verdict:
    status: str            # one of EXIT's keys
    message: str           # canonical claim (VERIFIED) or the located reason
    details: dict = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT[self.status]

    def line(self) -> str:
        return f"{self.status:<11} {self.message}"


# ---------------------------------------------------------------- JSON
def _no_dupes(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        raise ValueError(f"duplicate key {next(k for i, k in enumerate(keys) if k in keys[:i])!r}")
    return dict(pairs)


def _reject_constant(name):
    raise ValueError(f"non-standard JSON constant {name}")


def read_regular(path: str | os.PathLike[str], limit: int, where: str, what: object) -> bytes:
    """The bytes of the regular file at path (named what), at most limit of them, else Malformed(where): opened
    without blocking (a FIFO cannot hang), its type checked on the open descriptor (no FIFO, device
    or folder), never more than its checked size + 1 bytes read."""
    try:
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode):
                raise Malformed(where, f"{what} is not a regular file (a folder, FIFO, socket or device)")
            if st.st_size > limit:
                raise Malformed(where, f"{what} is {st.st_size} bytes (limit {limit})")
            raw = f.read(st.st_size + 1)
    except OSError as e:
        raise Malformed(where, f"cannot read {what}: {e.strerror}") from None
    if len(raw) != st.st_size:
        raise Malformed(where, f"{what} changed while it was read")
    return raw


def read_json(path: str | os.PathLike[str], data: bytes | None = None) -> tuple[dict, str]:
    raw = read_regular(path, MAX_FILE, "$", path) if data is None else data
    if len(raw) > MAX_FILE:
        raise Malformed("$", f"{path} is more than {MAX_FILE} bytes")
    try:
        doc = json.loads(raw.decode("utf-8"), object_pairs_hook=_no_dupes, parse_constant=_reject_constant)
    except UnicodeDecodeError as e:
        raise Malformed("$", f"not UTF-8 ({e.reason} at byte {e.start})") from None
    except (ValueError, RecursionError) as e:
        raise Malformed("$", f"not valid JSON: {e}") from None
    return doc, hashlib.sha256(raw).hexdigest()


def obj(x, path, required, optional=()):
    if not isinstance(x, dict):
        raise Malformed(path, f"expected an object, got {type(x).__name__}")
    missing = [k for k in required if k not in x]
    if missing:
        raise Malformed(f"{path}.{missing[0]}", "required key is missing")
    extra = sorted(set(x) - set(required) - set(optional))
    if extra:
        raise Malformed(f"{path}.{extra[0]}", "unknown key")
    return x


def string(x, path):
    if not isinstance(x, str):
        raise Malformed(path, f"expected a string, got {type(x).__name__} {x!r:.60}")
    return x


def header(doc, kinds):
    """The version gate: same major, minor <= ours; then the kind's name (a key of kinds)."""
    if not isinstance(doc, dict):
        raise Malformed("$", f"expected a JSON object at top level, got {type(doc).__name__}")
    if doc.get("format") != FORMAT:
        raise Malformed("$.format", f"expected {FORMAT!r}, got {doc.get('format')!r:.60}")
    v = doc.get("version")
    if not isinstance(v, str) or not re.fullmatch(r"(0|[1-9][0-9]{0,5})\.(0|[1-9][0-9]{0,5})", v):
        raise Malformed("$.version", f"expected canonical \"MAJOR.MINOR\" (no leading zeros), got {v!r:.60}")
    major, minor = (int(p) for p in v.split("."))
    if major != VERSION[0] or minor > VERSION[1]:
        raise Unsupported(f"format version {v} (this checker reads {VERSION[0]}.0 to {VERSION[0]}.{VERSION[1]})")
    kind = string(doc.get("kind"), "$.kind")
    if kind not in kinds:
        raise Unsupported(f"certificate kind {kind!r} (this checker reads {', '.join(kinds)})")
    obj(doc, "$", ["format", "version", "kind", "claim", "instance", "witness", "assumptions"], ["provenance"])
    if "provenance" in doc and not isinstance(doc["provenance"], dict):
        raise Malformed("$.provenance", f"expected an object, got {type(doc['provenance']).__name__}")
    return kind


@dataclass
class Claim:
    relation: str
    bound: int              # 0 for a distance claim
    eps: Fraction
    text: str               # the canonical claim
    norm: str = "1"         # a distance's row norm: "1" (attention-distance), "inf" or "2" (an output distance)
    relative: bool = False  # an output distance relative to ||(A V W)_i||


OUTPUT = [f"max_row_{r}output_distance_{p}" for r in ("", "relative_") for p in ("inf", "2")]


def claim(doc, kind):
    """The claim of a document of kind (a kinds-table row): r_eps; for a "pair" kind the max row-l1 distance; for an
    "output" kind (1.3) the max row norm (_inf or _2) of A V W - A' V' W, or (relative_) that over ||(A V W)_i||."""
    qs = {"pair": ["max_row_l1_distance"], "output": OUTPUT}.get(kind.shape, ["r_eps"])
    c = obj(doc["claim"], "$.claim", ["quantity", "relation"] + ["bound"] * (qs == ["r_eps"]) + ["eps"])
    if c["quantity"] not in qs:
        raise Malformed("$.claim.quantity", f"expected {' or '.join(map(repr, qs))}, got {c['quantity']!r:.60}")
    if c["relation"] != kind.relation:
        raise Malformed("$.claim.relation", f"kind {kind.name} proves {kind.relation!r}, got {c['relation']!r:.60}")
    q = c["quantity"]
    bound = parse_int(c["bound"], "$.claim.bound", lo=0) if q == "r_eps" else 0
    eps, top = parse_numeral(c["eps"], "$.claim.eps"), {"r_eps": 1, "max_row_l1_distance": 2}.get(q, 2 ** 64)
    if not 0 < eps < top:
        raise Malformed("$.claim.eps", f"eps must lie in (0, {top}), got {eps}")
    a = doc["assumptions"]
    if not isinstance(a, list) or not all(isinstance(x, str) for x in a) or sorted(a) != sorted(kind.lemmas):
        raise Malformed("$.assumptions", f"kind {kind.name} relies on exactly {list(kind.lemmas)}, got {a!r:.120}")
    if q in OUTPUT:
        p, rel = q.rsplit("_", 1)[1], "relative" in q
        text = f"max_i ||(A V W - A' V' W)_i||_{p}{f' / ||(A V W)_i||_{p}' * rel} <= {eps}"
        return Claim("<=", 0, eps, text, p, rel)
    return Claim(kind.relation, bound, eps, f"r_eps(A) {kind.relation} {bound} at eps = {eps}" if q == "r_eps"
                 else f"max_i ||A_i - A'_i||_1 <= {eps}")


# ---------------------------------------------------------------- numerals
MAX_LEN, MAX_DEC_EXP, MAX_BIN_EXP = 2000, 2000, 5000       # characters, |decimal exponent|, |binary exponent|

_RAT = re.compile(r"([+-]?[0-9]+)/([0-9]+)\Z")
_DEC = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?\Z")
_HEX = re.compile(r"([+-]?)0[xX]([0-9a-fA-F]*)(?:\.([0-9a-fA-F]*))?[pP]([+-]?[0-9]+)\Z")


def parse_numeral(s: object, path: str) -> Fraction:
    """The exact rational value of numeral string s (integer, p/q, exact decimal or C99 hex float: JSON
    floats never reach here), within size limits against hostile input; Malformed(path) otherwise."""
    if isinstance(s, bool) or not isinstance(s, str):
        kind = "a JSON float" if isinstance(s, float) else f"a JSON {type(s).__name__}"
        raise Malformed(path, f"expected an exact numeral string, got {kind} {s!r}")
    if len(s) > MAX_LEN:
        raise Malformed(path, f"numeral longer than {MAX_LEN} characters")
    m = _RAT.match(s)
    if m:
        if int(m.group(2)) == 0:
            raise Malformed(path, f"zero denominator in {s!r}")
        return Fraction(int(m.group(1)), int(m.group(2)))
    m = _HEX.match(s)
    if m:
        sign, ip, fp, e = m.group(1), m.group(2), m.group(3) or "", int(m.group(4))
        if not (ip or fp) or abs(e) > MAX_BIN_EXP:
            raise Malformed(path, f"bad or out-of-range hex float {s!r}")
        v = Fraction(int(ip + fp, 16)) * Fraction(2) ** (e - 4 * len(fp))
        return -v if sign == "-" else v
    m = _DEC.match(s)
    if m and (m.group(2) or m.group(3)):
        sign, ip, fp, e = m.group(1), m.group(2), m.group(3) or "", int(m.group(4) or 0)
        if abs(e) > MAX_DEC_EXP:
            raise Malformed(path, f"decimal exponent out of range in {s!r} (|e| <= {MAX_DEC_EXP})")
        v = Fraction(int((ip or "0") + fp)) * Fraction(10) ** (e - len(fp))
        return -v if sign == "-" else v
    raise Malformed(path, f"not an exact numeral (integer, p/q, decimal or hex float): {s!r}")


def parse_int(s, path, lo=None, hi=None):
    v = parse_numeral(s, path)
    if v.denominator != 1:
        raise Malformed(path, f"expected an integer, got {s!r}")
    v = int(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise Malformed(path, f"integer {v} out of range [{lo}, {hi}]")
    return v


def exact_float(v: Fraction, path: str) -> float:
    """The binary64 number equal to the rational v; Malformed if v is not exactly representable."""
    try:
        f = float(v)
    except OverflowError:
        raise Malformed(path, f"{str(v)[:40]}... overflows binary64") from None
    if Fraction(f) != v:
        raise Malformed(path, f"{v} is not exactly representable in binary64 (write it as a hex float)")
    return f


def array(x: object, path: str, base_dir: str | None, shape: tuple, kind: str = "float") -> np.ndarray:
    """An array given inline (nested lists of numeral strings) or as a sidecar
    {"file", "sha256", "dtype", "shape"}.  shape entries None = free (returned).
    kind "float": float64 exact, finite.  kind "int": int64."""
    if isinstance(x, list):
        a = _inline(x, path, kind)
    elif isinstance(x, dict):
        a = _sidecar(x, path, base_dir, kind)
    else:
        raise Malformed(path, f"expected an array (nested list of numerals or a sidecar object), got "
                              f"{type(x).__name__}")
    if a.ndim != len(shape) or any(s is not None and s != t for s, t in zip(shape, a.shape)):
        want = "×".join("?" if s is None else str(s) for s in shape)
        raise Malformed(path, f"shape {'×'.join(map(str, a.shape)) or 'scalar'} where {want} is required")
    return a


def _leaves(v):
    return sum(map(_leaves, v)) if isinstance(v, list) else 1


def _inline(x, path, kind):
    if _leaves(x) > MAX_INLINE:           # counted before any numeral is parsed
        raise Malformed(path, f"inline array of more than {MAX_INLINE} entries (use a sidecar)")

    def walk(v, p, depth):
        if isinstance(v, list):
            if depth > 3:
                raise Malformed(p, "array nested deeper than 3")
            return [walk(e, f"{p}[{i}]", depth + 1) for i, e in enumerate(v)]
        q = parse_numeral(v, p)
        if kind == "int":
            if q.denominator != 1 or abs(q) >= 2 ** 62:
                raise Malformed(p, f"expected an integer index, got {v!r}")
            return int(q)
        return exact_float(q, p)
    try:
        return np.array(walk(x, path, 1), dtype=np.int64 if kind == "int" else np.float64)
    except ValueError:
        raise Malformed(path, "ragged inline array (rows of different lengths)") from None


def _sidecar(x, path, base_dir, kind):
    obj(x, path, ["file", "sha256", "dtype", "shape"], ["tensor"])
    name = string(x["file"], f"{path}.file")
    if (os.path.isabs(name) or ".." in name.replace("\\", "/").split("/") or not name
            or any(ord(ch) < 32 for ch in name)):
        raise Malformed(f"{path}.file", f"sidecar path must be relative, below the certificate's folder, "
                                        f"without control characters: {name!r:.80}")
    if name.endswith(".safetensors"):
        raise Unsupported(f"{path}.file: safetensors sidecars (this checker reads .npy sidecars only)")
    if not name.endswith(".npy"):
        raise Malformed(f"{path}.file", f"sidecar must be .npy: {name!r}")
    if "tensor" in x:
        raise Malformed(f"{path}.tensor", "only safetensors sidecars name a tensor")
    sha = string(x["sha256"], f"{path}.sha256")
    if len(sha) != 64 or any(c not in "0123456789abcdef" for c in sha):
        raise Malformed(f"{path}.sha256", f"expected 64 lowercase hex digits, got {sha!r:.80}")
    dt = string(x["dtype"], f"{path}.dtype")
    if dt not in DTYPES or (kind == "int") != dt.startswith("int"):
        raise Malformed(f"{path}.dtype", f"dtype {dt!r} not allowed here")
    if not isinstance(x["shape"], list) or not all(type(s) is int and s >= 0 for s in x["shape"]):
        raise Malformed(f"{path}.shape", f"expected a list of non-negative integers, got {x['shape']!r:.80}")
    if base_dir is None:
        raise Malformed(f"{path}.file", f"sidecar {name!r}: a certificate read from stdin has no folder "
                                        "(arrays inline)")
    root = os.path.realpath(base_dir)
    full = os.path.realpath(os.path.join(root, name))
    if os.path.commonpath([root, full]) != root:
        raise Malformed(f"{path}.file", f"sidecar {name!r} resolves outside the certificate's folder (a symlink)")
    raw = read_regular(full, MAX_SIDECAR, f"{path}.file", f"sidecar {name!r}")
    got = hashlib.sha256(raw).hexdigest()
    if got != sha:
        raise Malformed(f"{path}.sha256", f"sidecar {name!r} has sha256 {got}, certificate pins {sha}")
    try:
        a = np.load(io.BytesIO(raw), allow_pickle=False)
    except Exception as e:   # object arrays (pickle), truncated or garbage header
        msg = "needs pickle (object array), which is never loaded" if "pickle" in str(e) else str(e)
        raise Malformed(f"{path}.file", f"unreadable .npy: {msg}") from None
    if not isinstance(a, np.ndarray) or a.dtype.kind not in "fi":
        raise Malformed(f"{path}.file", "not a numeric .npy array")
    want = np.dtype(DTYPES[dt])
    if (a.dtype.kind, a.dtype.itemsize) != (want.kind, want.itemsize):
        raise Malformed(f"{path}.dtype", f"sidecar holds {a.dtype}, certificate says {dt}")
    if list(a.shape) != x["shape"]:
        raise Malformed(f"{path}.shape", f"sidecar has shape {list(a.shape)}, certificate says {x['shape']}")
    a = a.astype(np.int64 if kind == "int" else np.float64)   # exact widening
    if kind == "float" and not np.all(np.isfinite(a)):
        bad = np.argwhere(~np.isfinite(a))[0]
        raise Malformed(f"{path}{list(map(int, bad))}", f"non-finite value {a[tuple(bad)]}")
    return a


# ---------------------------------------------------------------- instance
@dataclass
class Beta:
    """beta as a set [lo, hi] of exact rationals (a point when exact).  The claim is proved for
    every beta in the set.  mid/rad: float64 with |beta - mid| <= rad on the whole set."""
    lo: Fraction
    hi: Fraction
    ball: object        # () -> a flint.arb containing [lo, hi] at the caller's working precision (1/3 too)
    mid: float
    rad: float
    text: str


def _pair(x, key, path, hint):
    p = obj(x, path, [key])[key]
    if not isinstance(p, list) or len(p) != 2:
        raise Malformed(f"{path}.{key}", hint)
    return [parse_numeral(s, f"{path}.{key}[{i}]") for i, s in enumerate(p)]


def beta(x, path):
    if isinstance(x, str):
        lo = hi = parse_numeral(x, path)
        ball, text = (lambda: arb_of(lo)), str(lo)
    elif isinstance(x, dict) and "interval" in x:
        lo, hi = _pair(x, "interval", path, "expected [lo, hi]")
        if lo > hi:
            raise Malformed(f"{path}.interval", f"lo {lo} > hi {hi}")
        ball = lambda: arb_of(lo).union(arb_of(hi))
        text = f"any in [{lo}, {hi}]"
    elif isinstance(x, dict) and "over_sqrt" in x:
        c, D = _pair(x, "over_sqrt", path, "expected [c, D] meaning beta = c / sqrt(D)")
        if D <= 0:
            raise Malformed(f"{path}.over_sqrt[1]", f"D must be positive, got {D}")
        ball = lambda: arb_of(c) / arb_of(D).sqrt()
        with flint.ctx.workprec(256):
            lo, hi = arb_to_fraction_lower(ball()), arb_to_fraction_upper(ball())
        text = f"{c}/sqrt({D})"
    else:
        raise Malformed(path, "expected a numeral, {\"interval\": [lo, hi]} or {\"over_sqrt\": [c, D]}")
    if lo < 0:
        raise Malformed(path, f"beta must be >= 0, got {lo}")
    if hi > 10 ** 12:
        raise Malformed(path, f"beta {hi} out of range (<= 1e12)")
    mid = float((lo + hi) / 2)
    rad = float_up(max(abs(lo - Fraction(mid)), abs(hi - Fraction(mid))))      # exact: every beta is in [lo, hi]
    return Beta(lo, hi, ball, mid, rad, text)


@dataclass
class Instance:
    """A = softmax over kept columns of beta <q_i, k_j> + log w_j + bias_ij (w_j = 0: dropped);
    mask (lo, hi): key j is seen by the rows lo_j <= i < hi_j only, elsewhere A_ij = 0.  replacement: the second
    attention A' of a "pair" kind; layer: the heads of an "output" kind (this one first), summed."""
    beta: Beta
    Q: np.ndarray
    K: np.ndarray
    weights: np.ndarray | None
    bias: np.ndarray | None
    mask: tuple | None = None
    replacement: "Instance | None" = None
    values: np.ndarray | None = None        # V (N x d_v), output kinds (1.3)
    projection: np.ndarray | None = None    # W (d_v x d_out), optional, output kinds
    layer: list = field(default_factory=list)  # output kinds: [self] or the heads of {"heads": [...]} (1.3)
    minor: int = 0                          # the format's minor version (1.3: the float choices in the witness)

    def __post_init__(self):
        """n queries, N keys; kept: the indices of the kept columns (None: all, no weights)."""
        self.n, self.N = self.Q.shape[0], self.K.shape[0]
        self.kept = None if self.weights is None else np.flatnonzero(self.weights > 0)


def instance(doc: dict, base_dir: str | None, shape: str = "matrix") -> "Instance":
    """The certificate's instance; a "pair" kind (1.2) with its replacement, of the same n x N; an "output" kind (1.3)
    with values V (N x d_v), an optional projection W (d_v x d_out) and its replacement with values V' (N' x d_v), or
    {"heads": [such heads]}: a layer, every head's W with d_out columns and its n queries."""
    minor, out = int(doc["version"].split(".")[1]), shape == "output"
    x, many = doc["instance"], out and isinstance(doc["instance"], dict) and "heads" in doc["instance"]
    hs = obj(x, "$.instance", ["heads"])["heads"] if many else [x]
    if not isinstance(hs, list) or not 0 < len(hs) <= 256:
        raise Malformed("$.instance.heads", "expected a list of 1 to 256 heads")
    layer = [read_head(h, f"$.instance.heads[{i}]" if many else "$.instance", base_dir, minor,
                       ["replacement"] * (shape != "matrix"), (None,) if out else None, out) for i, h in enumerate(hs)]
    for i, h in enumerate(layer if many else []):
        if h.projection is None or (h.n, h.projection.shape[1]) != (layer[0].n, layer[0].projection.shape[1]):
            raise Malformed(f"$.instance.heads[{i}]", "a layer's heads need projections W of one width, one n")
    layer[0].layer = layer if out else []
    return layer[0]


def read_head(x, path, base_dir, minor, required=(), values=None, projection=False):
    """One head object: beta, queries, keys; column weights, logit bias; row mask (1.1); values (N x values) and
    a projection (1.3, output kinds), entries at most 2^64; with "replacement" required, the replacement head (the
    same n; the same N unless it carries values, of the head's width)."""
    x = obj(x, path, ["beta", "queries", "keys", *required] + ["values"] * (values is not None),
            ["column_weights", "logit_bias"] + ["row_mask"] * (minor >= 1) + ["projection"] * projection)
    get = lambda k, shape: array(x[k], f"{path}.{k}", base_dir, shape) if k in x else None
    Q = array(x["queries"], f"{path}.queries", base_dir, (None, None))
    K = array(x["keys"], f"{path}.keys", base_dir, (None, Q.shape[1]))
    inst = make_instance(x["beta"], Q, K, get("column_weights", (K.shape[0],)),
                         get("logit_bias", (Q.shape[0], K.shape[0])), x.get("row_mask"), path, minor, base_dir)
    if values is not None:
        inst.values = get("values", (K.shape[0], *values))
        inst.projection = get("projection", (inst.values.shape[1], None))
        if any(np.max(np.abs(a)) > 2.0 ** 64 for a in (inst.values, inst.projection) if a is not None):
            raise Malformed(path, "value or projection entries larger than 2^64")
    if required:
        p = f"{path}.replacement"
        r = inst.replacement = read_head(x["replacement"], p, base_dir, minor, (), values and inst.values.shape[1:])
        if r.n != inst.n or (r.N != inst.N and values is None):
            raise Malformed(p, f"{r.n} queries x {r.N} keys where the head has {inst.n} x {inst.N}")
    return inst


def make_instance(beta_doc: object, Q: np.ndarray, K: np.ndarray, weights: np.ndarray | None = None,
                  bias: np.ndarray | None = None, mask_doc: dict | None = None, path: str = "$.instance",
                  minor: int = 2, base_dir: str | None = None) -> "Instance":
    """The Instance of a head given in memory (float64 arrays; beta and the row mask in their
    certificate forms), with every check a certificate's instance gets."""
    b = beta(beta_doc, f"{path}.beta")
    (n, d), N = Q.shape, K.shape[0]
    if n == 0 or N == 0 or d == 0:
        raise Malformed(path, f"empty instance (n={n}, N={N}, d={d})")
    if d > 512:
        raise Unsupported(f"head dimension d = {d} (this checker reads d <= 512)")
    if np.max(np.abs(Q), initial=0) > 2.0 ** 64 or np.max(np.abs(K), initial=0) > 2.0 ** 64:
        raise Malformed(path, "query/key entries larger than 2^64")
    w = weights
    if w is not None:
        if np.any(w < 0):
            raise Malformed(f"{path}.column_weights[{int(np.argmax(w < 0))}]", "negative weight")
        if not np.any(w > 0):
            raise Malformed(f"{path}.column_weights", "every column is dropped (all weights 0)")
        w = None if np.all(w == 1.0) else w
    if bias is not None and np.max(np.abs(bias)) > 2.0 ** 40:
        raise Malformed(f"{path}.logit_bias", "bias entries larger than 2^40")
    mask = None if mask_doc is None else row_mask(mask_doc, n, N, w, f"{path}.row_mask", minor, base_dir)
    return Instance(b, Q, K, w, bias, mask, minor=minor)


def row_mask(x, n, N, w, path, minor, base_dir=None):
    """(lo, hi) of a "row_mask": key j is seen by the rows lo_j <= i < hi_j.  From offset o, window w (optional), sinks
    s (1.2): row i sees j <= i + o with i + o - w < j or j < s, so lo_j = j - o, hi_j = j - o + w (no window or j < s:
    unbounded); or (1.3) the arrays "from" and "until" themselves.  Malformed unless every row sees a kept key."""
    if minor >= 3 and isinstance(x, dict) and "from" in x:
        obj(x, path, ["from", "until"])
        lo, hi = (array(x[k], f"{path}.{k}", base_dir, (N,), kind="int") for k in ("from", "until"))
    else:
        obj(x, path, ["offset"], ["window"] + ["sinks"] * (minor >= 2))
        o = parse_int(x["offset"], f"{path}.offset", -2 ** 40, 2 ** 40)
        win = parse_int(x["window"], f"{path}.window", 1, 2 ** 40) if "window" in x else 2 ** 42    # > n - lo_j
        j = np.arange(N)
        lo = j - o
        hi = np.where(j < parse_int(x.get("sinks", "0"), f"{path}.sinks", 0, 2 ** 40), n, lo + win)
    a = np.clip(lo if w is None else lo[w > 0], 0, n)          # kept keys: rows a_j <= i < b_j see key j
    b = np.maximum(a, np.clip(hi if w is None else hi[w > 0], 0, n))
    empty = np.cumsum(np.bincount(a, minlength=n + 1) - np.bincount(b, minlength=n + 1))[:n] == 0
    if np.any(empty):
        raise Malformed(path, f"query {int(np.argmax(empty))} sees no key (none kept in its rows)")
    return lo, hi
