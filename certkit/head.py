"""One attention head: A = row-softmax(beta Q K^T + log w + bias).

A Head holds the queries Q (n x d) and keys K (N x d) as float64, an exact temperature beta
(a Fraction, an exact irrational c/sqrt(D), or an interval of temperatures), optional column
weights w (N, >= 0; w_j = 0 drops key j, w_j = m counts it m times) and an optional logit bias
(n x N), with a name and a free-form provenance; for the attention output A V W, optional values V
(N x d_v) and the head's slice W of the output projection (d_v x d_out).  Everything certkit certifies is about exactly
these numbers: a certificate states them, the kernel recomputes A from them.

Head files (no pickle anywhere): .npz (numpy, allow_pickle=False) or .safetensors with arrays
Q, K (aliases queries/q, keys/k), optional beta (a scalar, taken at its exact binary value),
weights (column_weights), bias (logit_bias), values (V) and projection (W_O); integer and
float16/32/64 arrays are widened exactly to float64.
"""
import dataclasses
import os
import re
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np

from .errors import InputError, UserError
from .numbers import BetaInterval, OverSqrt, brief, numeral, parse_beta

ALIASES = {"Q": ("Q", "queries", "q"), "K": ("K", "keys", "k"), "beta": ("beta",),
           "weights": ("weights", "column_weights"), "bias": ("bias", "logit_bias"),
           "values": ("values", "V", "v"), "projection": ("projection", "W_O", "W")}


class HeadError(UserError):
    """Bad head input: the message names the file or argument, the field and the problem."""


@dataclass(frozen=True)
class RowMask:
    """Which keys each query sees, stated without an n x N matrix: key j is visible to query i iff
    j <= i + offset and (i + offset - window < j or j < sinks) (window None: causal, every
    j <= i + offset; sinks: the first keys every query keeps, as in a KV cache with attention
    sinks).  A masked entry of A is exactly 0 and the softmax of row i runs over its visible keys
    only (certificate format 1.1, "row_mask"; sinks: format 1.2; docs/mathematics.md §8.5)."""
    offset: int = 0
    window: int | None = None
    sinks: int = 0

    def __post_init__(self) -> None:
        for name, v in (("offset", self.offset), ("window", self.window), ("sinks", self.sinks)):
            if v is not None and (isinstance(v, bool) or int(v) != v):
                raise HeadError(f"mask.{name}: expected an integer, got {v!r}")
        if self.window is not None and self.window < 1:
            raise HeadError(f"mask.window: must be >= 1, got {self.window}")
        if self.sinks < 0:
            raise HeadError(f"mask.sinks: must be >= 0, got {self.sinks}")
        object.__setattr__(self, "offset", int(self.offset))
        object.__setattr__(self, "window", None if self.window is None else int(self.window))
        object.__setattr__(self, "sinks", int(self.sinks))

    def bounds(self, rows: Any) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) per row: the window of row i is lo_i <= j < hi_i (the sinks j < sinks come on top)."""
        rows = np.asarray(rows, dtype=np.int64)
        hi = rows + self.offset + 1
        lo = np.zeros_like(hi) if self.window is None else hi - self.window
        return lo, hi

    def visible(self, rows: Any, N: int) -> np.ndarray:
        """Boolean matrix len(rows) x N: True where key j is visible to row i."""
        lo, hi = self.bounds(rows)
        j = np.arange(N)[None, :]
        return (j < hi[:, None]) & ((j >= lo[:, None]) | (j < self.sinks))

    def key_rows(self, N: int) -> tuple[np.ndarray, np.ndarray]:
        """(lo, hi) per key: key j is visible to the rows lo_j <= i < hi_j (lo_j = j - offset; hi_j = lo_j +
        window, or unbounded for a sink or without a window), the kernel's reading of every mask."""
        lo = np.arange(N, dtype=np.int64) - self.offset
        far = lo + UNBOUNDED
        return lo, np.where(np.arange(N) < self.sinks, far, far if self.window is None else lo + self.window)

    def json(self) -> dict[str, str]:
        """The "row_mask" object (format 1.1; with sinks, 1.2)."""
        return ({"offset": str(self.offset)} | ({} if self.window is None else {"window": str(self.window)})
                | ({"sinks": str(self.sinks)} if self.sinks else {}))

    def __str__(self) -> str:
        o = f"{self.offset:+d}" if self.offset else ""
        text = f"causal(i{o})" if self.window is None else f"window(i{o}, {self.window})"
        return text + (f" + {self.sinks} sinks" if self.sinks else "")


UNBOUNDED = 1 << 42       # a row bound past every row (row and offset limits are far below)


@dataclass(frozen=True, eq=False)
class KeyRows:
    """Which queries see each key when a cache changes over time: key j is visible to query i iff
    start_j <= i < stop_j.  An evicted key (H2O, a recent window) leaves for good at its stop; a key
    stored twice (full precision, then quantised, as KIVI does) is two keys whose intervals meet.  A
    masked entry of A is exactly 0 (certificate format 1.3, "row_mask" {"from", "until"}); `label`
    names the cache in messages."""
    start: np.ndarray
    stop: np.ndarray
    label: str = "key rows"

    def __post_init__(self) -> None:
        a, b = (np.asarray(x) for x in (self.start, self.stop))
        if a.ndim != 1 or a.shape != b.shape or a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
            raise HeadError(f"KeyRows: start and stop must be integer arrays of one length, got {a.shape}, {b.shape}")
        object.__setattr__(self, "start", a.astype(np.int64))
        object.__setattr__(self, "stop", b.astype(np.int64))

    def key_rows(self, N: int) -> tuple[np.ndarray, np.ndarray]:
        if len(self.start) != N:
            raise HeadError(f"mask {self}: {len(self.start)} keys' row intervals for {N} keys")
        return self.start, self.stop

    def visible(self, rows: Any, N: int) -> np.ndarray:
        """Boolean matrix len(rows) x N: True where key j is visible to row i."""
        i = np.asarray(rows, dtype=np.int64)[:, None]
        return (self.start[None, :N] <= i) & (i < self.stop[None, :N])

    def json(self) -> dict[str, list[str]]:
        """The "row_mask" object of format 1.3."""
        return {"from": [str(int(v)) for v in self.start], "until": [str(int(v)) for v in self.stop]}

    def __str__(self) -> str:
        return self.label


def as_float64(x: Any, what: str) -> np.ndarray:
    """x (numpy array, torch tensor on any device and of any float dtype, nested lists) as a
    float64 numpy array, converted once; HeadError naming `what` for non-numeric input."""
    if hasattr(x, "detach") and hasattr(x, "cpu"):             # a torch tensor (no torch import needed)
        if getattr(x, "is_complex", lambda: False)():
            raise HeadError(f"{what}: dtype {x.dtype} is complex, not a real number type")
        x = x.detach().cpu().double().numpy()
    try:
        a = np.asarray(x)
    except Exception as e:
        raise HeadError(f"{what}: cannot read as an array ({type(x).__name__}): {e}") from None
    if a.dtype.kind not in "fiu":
        raise HeadError(f"{what}: dtype {a.dtype} is not a real number type")
    return np.array(a, dtype=np.float64)        # a fresh copy: the head owns its arrays


BETA_MAX = 10 ** 12        # the largest temperature a certificate states (the kernel's limit)


def beta_too_large(b: "Fraction | OverSqrt | BetaInterval") -> bool:
    """True when the exact beta b (Fraction, OverSqrt or BetaInterval) can exceed BETA_MAX."""
    if isinstance(b, OverSqrt):                      # c / sqrt(D) > M  <=>  c^2 > M^2 D  (c >= 0)
        return b.c * b.c > BETA_MAX ** 2 * b.D
    return (b.hi if isinstance(b, BetaInterval) else b) > BETA_MAX


BLOCKED = 1 << 22          # heads with more entries than this get their attention in row blocks
MAX_ENTRIES = 1 << 28      # n N of a head (a 16384-token head): its attention is n N float64s in memory


def softmax_rows(L: np.ndarray) -> np.ndarray:
    """Row-wise softmax of float logits (entries -inf give 0).  Float, not rigorous: for search,
    peers, audits and reconstruction checks; the kernel never uses it."""
    L = L - np.max(L, axis=1, keepdims=True)
    E = np.exp(L)
    return E / np.sum(E, axis=1, keepdims=True)


@dataclass(frozen=True, eq=False)
class Head:
    """A = row-softmax(beta Q K^T + log w + bias).  Build with Head.from_arrays / Head.from_file.

    >>> import numpy as np, certkit
    >>> h = certkit.Head.from_arrays(np.eye(3), np.eye(3), beta="2", name="eye")
    >>> h.n, h.N, h.d, h.beta
    (3, 3, 3, Fraction(2, 1))
    >>> bool(np.allclose(h.attention().sum(axis=1), 1))
    True
    """
    queries: np.ndarray
    keys: np.ndarray
    beta: Any                              # built from any form parse_beta reads; then Fraction | OverSqrt | BetaInterval
    weights: np.ndarray | None = None
    bias: np.ndarray | None = None
    name: str = "head"
    provenance: dict[str, Any] = field(default_factory=dict)
    mask: "RowMask | KeyRows | None" = None  # causal / sliding-window row mask, or per-key rows (None: all visible)
    values: np.ndarray | None = None       # V (N x d_v): the output A V (format 1.3 output distances)
    projection: np.ndarray | None = None   # W (d_v x d_out): the head's slice of the output projection

    def __post_init__(self) -> None:
        Q, K = as_float64(self.queries, "queries"), as_float64(self.keys, "keys")
        if Q.ndim != 2 or K.ndim != 2 or Q.shape[1] != K.shape[1] or 0 in Q.shape or 0 in K.shape:
            raise HeadError(f"queries {Q.shape} and keys {K.shape} must be n x d and N x d with n, N, d >= 1")
        if Q.shape[0] * K.shape[0] > MAX_ENTRIES:
            raise HeadError(f"queries {Q.shape} and keys {K.shape}: an attention of {Q.shape[0] * K.shape[0]} entries "
                            f"(certkit holds at most 2^28 = {MAX_ENTRIES}, a 16384 x 16384 head, in memory)")
        for what, a in (("queries", Q), ("keys", K)):
            if not np.all(np.isfinite(a)):
                raise HeadError(f"{what}: non-finite entry at {tuple(map(int, np.argwhere(~np.isfinite(a))[0]))}")
        w = bias = None
        if self.weights is not None:
            w = as_float64(self.weights, "weights")
            if w.shape != (K.shape[0],) or not np.all(np.isfinite(w)) or (w < 0).any() or not (w > 0).any():
                raise HeadError(f"weights: need shape ({K.shape[0]},), finite entries >= 0, not all 0; "
                                f"got shape {w.shape}")
        if self.bias is not None:
            bias = as_float64(self.bias, "bias")
            if bias.shape != (Q.shape[0], K.shape[0]) or not np.all(np.isfinite(bias)):
                raise HeadError(f"bias: need finite entries and shape {(Q.shape[0], K.shape[0])}, got {bias.shape}")
        if self.mask is not None:
            if not isinstance(self.mask, (RowMask, KeyRows)):
                raise HeadError(f"mask: expected a certkit.RowMask or KeyRows, got {type(self.mask).__name__}")
            lo, hi = (np.clip(b, 0, Q.shape[0]) for b in self.mask.key_rows(K.shape[0]))
            kept = np.ones(K.shape[0], dtype=bool) if w is None else w > 0
            seen = np.zeros(Q.shape[0] + 1, dtype=np.int64)        # kept keys per row, by differences
            np.add.at(seen, lo[kept], 1)
            np.add.at(seen, hi[kept], -1)
            empty = np.flatnonzero(np.cumsum(seen)[:-1] <= 0)
            if empty.size:
                raise HeadError(f"mask {self.mask}: query {int(empty[0])} sees no key (every row needs one)")
        V = W = None
        if self.values is not None:
            V = as_float64(self.values, "values")
            if V.ndim != 2 or V.shape[0] != K.shape[0] or V.shape[1] == 0 or not np.all(np.isfinite(V)):
                raise HeadError(f"values: need finite entries and shape ({K.shape[0]}, d_v), got {V.shape}")
        if self.projection is not None:
            W = as_float64(self.projection, "projection")
            if V is None or W.ndim != 2 or W.shape[0] != V.shape[1] or W.shape[1] == 0 or not np.all(np.isfinite(W)):
                raise HeadError(f"projection: needs values and finite entries of shape "
                                f"({'d_v' if V is None else V.shape[1]}, d_out), got {W.shape}")
        for a in (Q, K, w, bias, V, W):
            if a is not None:
                a.setflags(write=False)
        b = parse_beta(self.beta)
        if beta_too_large(b):
            raise HeadError(f"beta: {brief(b)} is above 10^12, the largest temperature a certificate states")
        for name, v in (("queries", Q), ("keys", K), ("weights", w), ("bias", bias), ("values", V), ("projection", W),
                        ("beta", b), ("name", str(self.name)),
                        ("provenance", dict(self.provenance or {}))):
            object.__setattr__(self, name, v)

    # ------------------------------------------------------------ constructors
    @classmethod
    def from_arrays(cls, queries: Any, keys: Any, beta: Any, *, weights: Any = None, bias: Any = None, name: str = "head",
                    provenance: dict[str, Any] | None = None, mask: RowMask | None = None, values: Any = None,
                    projection: Any = None) -> "Head":
        """A head from arrays: numpy, torch (CPU or GPU, any float dtype) or nested lists, each
        converted once to float64.  beta is exact: 2, "1/8", Fraction(1, 8), "1/sqrt(64)",
        OverSqrt(1, 64); a float is read by its shortest decimal form (0.1 means 1/10).  mask: a
        RowMask (causal or sliding window, optionally with attention sinks) for decoder heads.  values
        V (N x d_v) and projection W (d_v x d_out): the head's output A V W, for output distances."""
        return cls(queries, keys, beta, weights, bias, name, provenance or {}, mask, values, projection)

    @classmethod
    def from_file(cls, path: str | os.PathLike[str], beta: Any = None, name: str | None = None) -> "Head":
        """The head stored in a .npz / .safetensors file (a str or os.PathLike); beta (exact)
        overrides the file's."""
        path = os.fspath(path)
        arrays = _load_arrays(path)
        get = lambda key, required=False: _get(arrays, path, key, required)
        Q, K = get("Q", True), get("K", True)
        if beta is None:
            b = get("beta")
            if b is None:
                raise HeadError(f"{path}: no 'beta' array in the file; give beta (--beta on the command line)")
            if b.size != 1:
                raise HeadError(f"{path}: beta: expected a scalar, got shape {b.shape}")
            beta = Fraction(float(b.reshape(-1)[0]))       # the stored binary64, exactly
        stem = os.path.splitext(os.path.basename(path))[0]
        try:
            return cls(Q, K, beta, get("weights"), get("bias"), name or stem, {"file": os.path.basename(path)},
                       None, get("values"), get("projection"))
        except UserError as e:
            raise HeadError(f"{path}: {e}") from None

    # ------------------------------------------------------------ views
    @property
    def n(self) -> int:
        return self.queries.shape[0]

    @property
    def N(self) -> int:
        return self.keys.shape[0]

    @property
    def d(self) -> int:
        return self.queries.shape[1]

    @property
    def beta_float(self) -> float:
        """A float near beta (search only; certificates state the exact beta)."""
        return float(self.beta)

    def replace(self, **changes: Any) -> "Head":
        """A copy with some fields changed (e.g. head.replace(beta="1/4"))."""
        return dataclasses.replace(self, **changes)

    def logits(self, beta: Any = None, rows: slice | None = None) -> np.ndarray:
        """Float64 logits beta <q_i, k_j> + log w_j + bias_ij (-inf on dropped columns and masked
        entries), for all rows or the rows slice `rows`."""
        rows = slice(0, self.n) if rows is None else rows
        L = (self.beta_float if beta is None else float(beta)) * (self.queries[rows] @ self.keys.T)
        if self.weights is not None:
            with np.errstate(divide="ignore"):
                L = L + np.log(self.weights)
        if self.bias is not None:
            L = L + self.bias[rows]
        if self.mask is not None:
            L[~self.mask.visible(np.arange(self.n)[rows], self.N)] = -np.inf
        return L

    def attention(self, beta: Any = None) -> np.ndarray:
        """The float64 attention matrix A (n x N): the one float softmax certkit's searches,
        peers and audits use.  Not rigorous; the kernel recomputes A with proven enclosures.
        Large heads (n N > BLOCKED entries) are computed in row blocks straight into A, so the
        peak memory is A plus one block."""
        if self.n * self.N <= BLOCKED:
            return softmax_rows(self.logits(beta))
        A = np.empty((self.n, self.N))
        step = max(1, BLOCKED // (4 * self.N))
        for s in range(0, self.n, step):
            A[s:s + step] = softmax_rows(self.logits(beta, slice(s, s + step)))
        return A

    def beta_json(self) -> str | dict[str, list[str]]:
        """beta in certificate format 1.0: an exact numeral, {"over_sqrt": [c, D]} or {"interval": [lo, hi]}."""
        b = self.beta
        if isinstance(b, OverSqrt):
            return {"over_sqrt": [numeral(b.c), numeral(b.D)]}
        if isinstance(b, BetaInterval):
            return {"interval": [numeral(b.lo), numeral(b.hi)]}
        return numeral(b)

    def instance(self) -> Any:
        """The kernel's instance of this head (the exact numbers a certificate states), built in
        memory with the same checks as a certificate's instance.  A head no certificate can state
        (entries above the kernel's limits, d > 512, ...) is a HeadError naming the head."""
        from .kernel import Malformed, Unsupported
        from .kernel.numerics import make_instance
        try:
            return make_instance(self.beta_json(), self.queries, self.keys, self.weights, self.bias,
                                 None if self.mask is None else self.mask.json(), minor=3)
        except (Malformed, Unsupported) as e:
            what = re.sub(r"\$\.instance\.?", "", str(e)).lstrip(": ")
            what = re.sub(r"\d{25,}", lambda m: brief(int(m.group())), what)
            raise HeadError(f"head {self.name!r} cannot be stated in a certificate: {what}") from None

    def save(self, path: str) -> str:
        """Write the head file (.npz or .safetensors; beta stored only if it is a binary64)."""
        arrays: dict[str, Any] = {"Q": self.queries, "K": self.keys}
        if isinstance(self.beta, Fraction) and Fraction(float(self.beta)) == self.beta:
            arrays["beta"] = np.array(float(self.beta))
        for k in ("weights", "bias", "values", "projection"):
            if getattr(self, k) is not None:
                arrays[k] = getattr(self, k)
        if path.endswith(".npz"):
            np.savez(path, **arrays)
        elif path.endswith(".safetensors"):
            from safetensors.numpy import save_file
            save_file({k: np.ascontiguousarray(v) for k, v in arrays.items()}, path)
        else:
            raise HeadError(f"{path}: a head file must be .npz or .safetensors")
        return path

    def __repr__(self) -> str:
        return (f"Head({self.name!r}, n={self.n}, N={self.N}, d={self.d}, beta={self.beta}"
                + (", weights" if self.weights is not None else "") + (", bias" if self.bias is not None else "")
                + (f", mask={self.mask}" if self.mask is not None else "")
                + (f", d_v={self.values.shape[1]}" if self.values is not None else "")
                + (f", d_out={self.projection.shape[1]}" if self.projection is not None else "") + ")")


def _load_arrays(path):
    if not os.path.exists(path):
        raise InputError(f"{path}: no such file")
    if not os.path.isfile(path):
        raise InputError(f"{path}: not a regular file")
    if path.endswith(".npz"):
        try:
            with np.load(path, allow_pickle=False) as z:
                known = {a for names in ALIASES.values() for a in names}
                for k in z.files:            # sizes from the headers, before anything is read
                    if k in known:
                        with z.zip.open(k + ".npy") as f:
                            version = np.lib.format.read_magic(f)
                            read = np.lib.format.read_array_header_1_0 if version == (1, 0) \
                                else np.lib.format.read_array_header_2_0
                            shape, _, dtype = read(f)
                        if int(np.prod(shape, dtype=object)) * dtype.itemsize > MAX_ENTRIES * 8:
                            raise HeadError(f"{path}: array {k!r} of shape {shape} ({dtype}) is larger than "
                                            f"{MAX_ENTRIES * 8 >> 30} GiB: certkit does not read it")
                return {k: z[k] for k in z.files if k in known}       # other arrays are never read
        except HeadError:
            raise
        except ValueError as e:
            raise HeadError(f"{path}: unreadable .npz (object arrays need pickle, refused): {e}") from None
        except Exception as e:  # zipfile.BadZipFile, OSError, ...
            raise HeadError(f"{path}: unreadable .npz: {e}") from None
    if path.endswith(".safetensors"):
        try:
            from safetensors.numpy import load_file
            return load_file(path)
        except Exception as e:
            raise HeadError(f"{path}: unreadable .safetensors: {e}") from None
    raise HeadError(f"{path}: a head file must be .npz or .safetensors")


def _get(arrays, path, key, required=False):
    for a in ALIASES[key]:
        if a in arrays:
            x = np.asarray(arrays[a])
            if x.dtype.kind not in "fiu":
                raise HeadError(f"{path}: {a}: dtype {x.dtype} is not numeric")
            x = x.astype(np.float64)
            if not np.all(np.isfinite(x)):
                raise HeadError(f"{path}: {a}: non-finite entries")
            return x
    if required:
        raise HeadError(f"{path}: missing array {key!r} (keys present: {', '.join(sorted(arrays)) or 'none'})")
    return None
