"""Compressed heads: the replacements an efficiency engineer ships, each a certkit.Head A' whose
distance to the original,  max_i ||A_i - A'_i||_1,  certkit.compare certifies.  By the operator
identity (docs/mathematics.md §1) that distance is exactly the worst error of the attention output
A V against A' V over all value matrices V with entries in [-1, 1].

Every producer returns a new Head holding exactly the numbers the compressed model computes
with (dequantised values are exact binary64 numbers, so the certificate states them exactly);
nothing here is trusted: the kernel recomputes both attentions from the certificate.

Methods: METHODS, one row each (its name and parameters, an example spelling, what it models, its
producer and the cost of a setting); `certkit compare --help` prints them, docs/api.md's table says
what each models and what it does not.  Adding one: CONTRIBUTING.md.

A sweep spells a range: lowrank:k=4..64 doubles k from 4 to 64; quant:int8,int4 lists schemes.
"""
import re
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .errors import UserError
from .head import Head, RowMask
from . import streaming
from .kvcache import FORMATS as KV_FORMATS, dequantised
from .numbers import parse_indices

QUANT_LEVELS = {"int8": 127, "int4": 7}      # symmetric round-to-nearest: integers in [-L, L]
DROP = -4096.0       # the logit bias that removes a key from one query's softmax (see drop_keys)
DROP_SPREAD = 3300.0  # drop_keys refuses a row whose dropped keys' logits reach this far above its kept ones'

FP8_MAX = 448.0                              # the largest finite float8 e4m3 ("fn") number


class MethodError(UserError):
    """A compression method spelled wrongly: the message names the method and what is wrong."""


# ------------------------------------------------------------------ quantisation
def quantize_int(x: np.ndarray, levels: int) -> np.ndarray:
    """Symmetric per-channel round-to-nearest: column c of x becomes s_c round(x_c / s_c), clipped to
    [-levels, levels] s_c, with the float32 scale s_c = fl32(max_i |x_ic| / levels) (a zero column
    stays zero).  The products of an integer below 2^7 and a float32 are exact in binary64."""
    amax = np.max(np.abs(x), axis=0)
    s = np.where(amax > 0, amax / levels, 1.0).astype(np.float32).astype(np.float64)
    return np.clip(np.rint(x / s), -levels, levels) * s


def fp8_e4m3(x: np.ndarray) -> np.ndarray:
    """Round to nearest-even float8 e4m3 ("fn": 3 significand bits, exponents -6..8, subnormals
    down to 2^-9, largest 448, no infinities; overflow saturates to +-448), as float64."""
    _, e = np.frexp(x)                                   # |x| in [2^(e-1), 2^e)
    quantum = np.ldexp(1.0, np.maximum(e - 1, -6) - 3)   # spacing of e4m3 numbers near x
    return np.clip(np.rint(x / quantum) * quantum, -FP8_MAX, FP8_MAX)


def quantize_fp8(x: np.ndarray) -> np.ndarray:
    """Per-tensor scaled float8 e4m3: s fp8(x / s) with the float32 scale s = fl32(max |x| / 448)."""
    amax = float(np.max(np.abs(x)))
    s = float(np.float32(amax / FP8_MAX)) if amax > 0 else 1.0
    return fp8_e4m3(x / s) * s


def quantize(head: Head, scheme: str = "int8") -> Head:
    """Queries and keys quantised as a low-precision attention kernel stores them: "int8" / "int4"
    (symmetric per-channel, one float32 scale per head dimension, round to nearest) or "fp8"
    (e4m3, one float32 scale per tensor); beta, weights, bias and mask unchanged."""
    if scheme == "fp8":
        q = quantize_fp8
    elif scheme in QUANT_LEVELS:
        q = lambda x: quantize_int(x, QUANT_LEVELS[scheme])      # noqa: E731
    else:
        raise MethodError(f"quant:{scheme}: unknown scheme (use int8, int4 or fp8)")
    return _replacement(head, f"quant:{scheme}", queries=q(head.queries), keys=q(head.keys))


def kv_spec(keys: str | None, values: str | None) -> str:
    """The spelling of a KV cache setting: kv:q4_0 (keys and values alike), else kv:k=..,v=.. (a None left out)."""
    return f"kv:{keys}" if keys == values else "kv:" + ",".join(f"{n}={f}" for n, f in (("k", keys), ("v", values)) if f)


def kv(head: Head, keys: str | None, values: str | None) -> Head:
    """A KV cache in an engine's format (certkit.kvcache): the keys the cache hands back in format
    `keys` (in the engine's layout: provenance key_layout, llama.cpp's rotary layout for Llama-family
    model heads) and, for a head with values, the values in format `values` (None: kept as they
    are); queries, beta, weights, bias and mask unchanged."""
    spec = kv_spec(keys, values)
    changes: dict[str, Any] = {}
    if keys is not None:
        changes["keys"] = dequantised(head.keys, keys, head.provenance.get("key_layout", "hf"))
    if values is not None and head.values is not None:
        changes["values"] = dequantised(head.values, values)
    return _replacement(head, spec, **changes)


# ------------------------------------------------------------------ low rank
def lowrank(head: Head, k: int, of: str = "keys") -> Head:
    """Rank-k replacement by a truncated SVD: of="keys" replaces K by K V_k V_k^T (V_k the top k
    right singular vectors of K: keys projected on their best k-dimensional subspace); of="logits"
    replaces Q K^T by its best rank-k approximation U_k S_k V_k^T, stated as queries U_k S_k and
    keys V_k of dimension k (beta unchanged)."""
    if k < 1:
        raise MethodError(f"lowrank:k={k}: k must be >= 1")
    if of == "keys":
        _, _, Vt = np.linalg.svd(head.keys, full_matrices=False)
        P = Vt[:k].T
        return _replacement(head, f"lowrank:k={k}", keys=(head.keys @ P) @ P.T)
    if of == "logits":
        U, s, Vt = np.linalg.svd(head.queries @ head.keys.T, full_matrices=False)
        k = min(k, len(s))
        return _replacement(head, f"lowrank:k={k},of=logits", queries=U[:, :k] * s[:k], keys=Vt[:k].T)
    raise MethodError(f"lowrank: of={of!r} (use keys or logits)")


# ------------------------------------------------------------------ which keys a row sees
def _positions(head: Head) -> np.ndarray:
    """The position of each query among the keys: i + offset of its row mask (i without one)."""
    return np.arange(head.n) + (0 if head.mask is None else head.mask.offset)


def evict(head: Head, sinks: int = 4, window: int = 64, heavy: int = 0) -> Head:
    """An evicted KV cache as it streams (certkit.streaming): query i attends only to the first `sinks`
    keys, the `window` most recent keys up to its position (window >= 1: its own key is always there)
    and, with heavy > 0, at most `heavy` heavy hitters chosen online from past queries' attention (H2O);
    every other key is evicted for good (A'_ij = 0, softmax over the kept keys).  Only for a head with
    a causal or sliding-window mask: an encoder has no "recent" keys (MethodError; use window: or
    evict:keep=).  Stated exactly: a row mask where one says it (a causal head, or a window head without
    sinks), else per-key row intervals (format 1.3)."""
    if sinks < 0 or window < 1 or heavy < 0:
        raise MethodError(f"evict:sinks={sinks},window={window},heavy={heavy}: need sinks, heavy >= 0 and "
                          "window >= 1 (the query's own key)")
    spec = f"evict:sinks={sinks},window={window}" + (f",heavy={heavy}" if heavy else "")
    m = head.mask
    if not isinstance(m, RowMask):
        raise MethodError(f"{spec}: head {head.name!r} has no causal or sliding-window mask (an encoder: every "
                          f"query sees every key, so a cache of recent keys is not defined); use window:w= for a "
                          f"window centred on each query or evict:keep= for a fixed set of keys")
    if heavy:
        return streaming.h2o(head, heavy, window, sinks)
    if not m.sinks and (m.window is None or not sinks):   # the kept keys are a row mask
        return _replacement(head, spec, mask=RowMask(m.offset, window if m.window is None else min(window, m.window),
                                                     sinks))
    return streaming.evict_recent(head, sinks, window)


def keep(head: Head, keys: Any) -> Head:
    """A KV cache holding only the listed keys (for every query): weight 0 for every other key."""
    kept = np.zeros(head.N, dtype=bool)
    idx = np.asarray(keys, dtype=np.int64)
    if idx.size == 0 or idx.min() < 0 or idx.max() >= head.N:
        raise MethodError(f"evict:keep: keys must be a non-empty list of indices in [0, {head.N})")
    kept[idx] = True
    w = kept * (1.0 if head.weights is None else head.weights)
    return _replacement(head, f"evict:keep={_ranges(np.flatnonzero(kept))}", weights=w)


def window(head: Head, w: int) -> Head:
    """Sliding-window attention, a row mask (exact): query i sees the w keys up to its position (i +
    offset - w < j <= i + offset); a head without a row mask (an encoder) the w keys centred on i,
    i - w + w // 2 < j <= i + w // 2 (fewer at the ends of the sequence)."""
    if w < 1:
        raise MethodError(f"window:w={w}: w must be >= 1")
    offset = w // 2 if head.mask is None else head.mask.offset
    return _replacement(head, f"window:w={w}", mask=RowMask(offset, w))


def topk(head: Head, k: int) -> Head:
    """Top-k attention: query i attends only to its k largest logits (ties by index; among the
    keys it sees), softmax over those (stated as a logit bias: drop_keys)."""
    if k < 1:
        raise MethodError(f"topk:k={k}: k must be >= 1")
    k = min(k, head.N)
    rows = []
    for s in range(0, head.n, 1024):
        L = head.logits(rows=slice(s, s + 1024))
        rows.append(np.sort(np.argsort(-L, axis=1, kind="stable")[:, :k], axis=1))
    return drop_keys(head, f"topk:k={k}", np.concatenate(rows))


def drop_keys(head: Head, spec: str, keys: np.ndarray) -> Head:
    """Query i keeps only the keys listed in row i of keys (n x k indices): every other key gets the
    logit bias DROP = -4096 on top of the head's own.  With Delta_i = (largest logit of a dropped key)
    - (largest logit of a kept key) in row i (logits with log w_j and the head's bias, over the keys
    the row sees), the biased row differs from dropping those keys exactly by 2 Z_D' / (Z_S + Z_D') <=
    2 N e^(Delta_i - 4096) in l1 (docs/mathematics.md §10.3).  This is checked here for every row,
    Delta_i <= DROP_SPREAD (so the difference is below 2^-1000, under any certified number's last
    digit), with a margin for the float logits; a row beyond it is a MethodError naming it: the
    certificate states this bias, and it stands for the eviction only where the check holds."""
    kept = np.zeros((head.n, head.N), dtype=bool)
    np.put_along_axis(kept, keys, True, axis=1)
    for s in range(0, head.n, 1024):
        L = head.logits(rows=slice(s, s + 1024))
        k = kept[s:s + 1024]
        top_kept = np.max(np.where(k, L, -np.inf), axis=1)
        top_drop = np.max(np.where(k, -np.inf, L), axis=1)
        margin = 1.0 + 1e-12 * np.max(np.abs(np.where(np.isfinite(L), L, 0.0)), axis=1)
        bad = np.flatnonzero(~(top_kept > -np.inf) | (top_drop - top_kept + margin > DROP_SPREAD))
        if bad.size:
            i = s + int(bad[0])
            raise MethodError(f"{spec}: row {i} keeps no key it sees, or its dropped keys' logits reach "
                              f"{float(top_drop[bad[0]] - top_kept[bad[0]]):.4g} above its kept ones' (> "
                              f"{DROP_SPREAD:g}): a logit bias of {DROP:g} would not stand for dropping them")
    return _replacement(head, spec, bias=(0.0 if head.bias is None else head.bias) + np.where(kept, 0.0, DROP))


def _replacement(head: Head, spec: str, **changes: Any) -> Head:
    return head.replace(name=f"{head.name} [{spec}]", provenance={**head.provenance, "compression": spec}, **changes)


def _ranges(idx: np.ndarray) -> str:
    """0,1,2,3,7 -> "0-3,7"."""
    out, start = [], None
    for a, b in zip(idx, list(idx[1:]) + [None]):
        start = a if start is None else start
        if b != a + 1:
            out.append(str(start) if start == a else f"{start}-{a}")
            start = None
    return ",".join(out)


# ------------------------------------------------------------------ the command-line spelling
@dataclass(frozen=True)
class Method:
    """One compression setting: its spelling, its cost (bits per number, kept keys per query, rank:
    smaller is cheaper, comparable within a family) and the producer."""
    spec: str
    family: str
    cost: float
    params: tuple

    def apply(self, head: Head) -> Head:
        row = METHODS[self.family]
        return row.producer(head, {**row.defaults, **dict(self.params)})


BITS = {"int8": 8, "int4": 4, "fp8": 8}


def parse_methods(text: str) -> list[Method]:
    """The settings a --method spells, in order; ranges a..b double from a to b ("k=4..64": 4, 8, ..., 64).
    Several methods: separated by ';' or given as several --method options."""
    out: list[Method] = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        fam, _, rest = part.partition(":")
        row = METHODS.get(fam)
        if row is None:
            raise MethodError(f"--method {part!r}: unknown method {fam!r} (use {', '.join(METHODS)})")
        if row.parse is not None:
            out += row.parse(part, rest)
            continue
        fixed, ranged = {}, None
        for item in _items(rest):
            key, eq, val = item.partition("=")
            if not eq or key not in row.params:
                raise MethodError(f"--method {part!r}: expected key=value with key among {', '.join(row.params)}")
            if row.params[key] == "text":
                fixed[key] = val
            elif row.params[key] == "indices":
                kept = parse_indices(val, f"--method {part!r}: {key}")
                if kept == "all":
                    raise MethodError(f"--method {part!r}: {key}=all keeps every key (nothing is evicted)")
                fixed[key] = tuple(kept)
            elif ".." in val:
                if ranged:
                    raise MethodError(f"--method {part!r}: only one range per method")
                ranged = (key, _doubling(val, part))
            else:
                fixed[key] = _int(val, part)
        for v in ranged[1] if ranged else [None]:
            p = dict(fixed, **({ranged[0]: v} if ranged else {}))
            missing = [k for k in row.required if k not in p]
            if missing:
                raise MethodError(f"--method {part!r}: missing {missing[0]}=")
            p = row.defaults | p                     # kivi: every parameter spelled out
            spec = f"{fam}:" + ",".join(f"{k}={_ranges(np.array(v)) if row.params[k] == 'indices' else v}"
                                        for k, v in p.items())
            out.append(Method(spec, fam, row.cost(p), tuple(sorted(p.items()))))
    if not out:
        raise MethodError("--method: no method given")
    return out


def _kv_methods(part: str, rest: str) -> list[Method]:
    """kv:q4_0 (keys and values), kv:q8_0,q4_0 (two settings), kv:k=q8_0,v=q4_0 (keys and values apart)."""
    def fmt(name: str) -> str:
        if name not in KV_FORMATS:
            raise MethodError(f"--method {part!r}: unknown KV format {name!r} (use {', '.join(KV_FORMATS)})")
        return name
    items = [s.strip() for s in rest.split(",") if s.strip()]
    if not items:
        raise MethodError(f"--method {part!r}: name a KV format (kv:q4_0, kv:k=q8_0,v=q4_0; {', '.join(KV_FORMATS)})")
    if any("=" in s for s in items):
        p = {}
        for s in items:
            key, _, val = s.partition("=")
            if key not in ("k", "v") or key in p:
                raise MethodError(f"--method {part!r}: expected k=FORMAT and/or v=FORMAT, once each")
            p[key] = fmt(val)
        bits = [KV_FORMATS[f].bits for f in p.values()]
        return [Method(kv_spec(p.get("k"), p.get("v")), "kv", sum(bits) / len(bits), tuple(sorted(p.items())))]
    return [Method(f"kv:{fmt(s)}", "kv", KV_FORMATS[s].bits, (("k", s), ("v", s))) for s in items]


def _quant_methods(part: str, rest: str) -> list[Method]:
    """quant:int8 (the default scheme), quant:int8,int4 (two settings)."""
    out = []
    for s in [s.strip() for s in rest.split(",") if s.strip()] or ["int8"]:
        if s not in BITS:
            raise MethodError(f"--method {part!r}: unknown scheme {s!r} (use int8, int4 or fp8)")
        out.append(Method(f"quant:{s}", "quant", BITS[s], (("scheme", s),)))
    return out


def _items(rest: str) -> list[str]:
    """Split "sinks=4,window=64" at the commas that start a new key (keep=0-3,7 keeps its commas)."""
    return [m.strip(",") for m in re.findall(r"[a-z]+=[^=]*?(?=,[a-z]+=|$)", rest)] if rest else []


MAX_PARAMETER = 1 << 24     # k, w, sinks, window, heavy: larger is a typo (and would overflow int64 arithmetic)


def _int(val: str, part: str) -> int:
    if not re.fullmatch(r"\d+", val.strip()):
        raise MethodError(f"--method {part[:60]!r}: {val[:40]!r} is not a non-negative integer")
    if len(val.strip()) > 9 or int(val) > MAX_PARAMETER:
        raise MethodError(f"--method {part[:60]!r}: {val[:20]!r}{'...' * (len(val) > 20)} is larger than {MAX_PARAMETER}")
    return int(val)


def _doubling(val: str, part: str) -> list[int]:
    a, _, b = val.partition("..")
    lo, hi = _int(a, part), _int(b, part)
    if lo < 1 or hi < lo:
        raise MethodError(f"--method {part!r}: range {val!r} must be a..b with 1 <= a <= b")
    out = [lo]
    while out[-1] * 2 <= hi:
        out.append(out[-1] * 2)
    return out if out[-1] == hi else out + [hi]


# ------------------------------------------------------------------ the registry: one row per method
@dataclass(frozen=True)
class Compressor:
    """One compression method, one row of METHODS (adding one: CONTRIBUTING.md)."""
    name: str                          # the spelling's prefix: name:key=value,...
    example: str                       # spellings shown in the --method help
    models: str                        # what it models, one line (the --method help; docs/api.md says more)
    producer: Callable[[Head, dict], Head]      # (head, parameters) -> the replacement A'
    cost: Callable[[dict], float] | None = None  # a setting's cost, comparable within the method: smaller is cheaper
    params: dict = field(default_factory=dict)   # parameter -> "int" (a range a..b doubles), "text" or "indices"
    required: tuple = ()               # parameters a spelling must give
    defaults: dict = field(default_factory=dict)  # parameters filled in (and spelled out in the setting's name)
    parse: Callable[[str, str], list] | None = None  # (spelling, what follows "name:") -> [Method]: its own syntax


def _evict_or_keep(head: Head, p: dict) -> Head:
    if "keep" in p:
        return keep(head, p["keep"])
    return evict(head, p.get("sinks", 0), p.get("window", 0), p.get("heavy", 0))


METHODS = {m.name: m for m in (
    Compressor("kv", "kv:q4_0 | kv:k=q8_0,v=q4_0",
               f"a KV cache as an engine stores it, keys and values in a format of certkit.kvcache "
               f"({', '.join(KV_FORMATS)}), queries never cached",
               lambda h, p: kv(h, p.get("k"), p.get("v")), parse=_kv_methods),
    Compressor("quant", "quant:int8 | quant:int4 | quant:fp8",
               "queries and keys quantised together, one scale per channel (fp8: per tensor) over the whole sequence, "
               "not an engine's cache format", lambda h, p: quantize(h, p["scheme"]), parse=_quant_methods),
    Compressor("lowrank", "lowrank:k=16 [,of=logits]", "rank-k keys (their best k-dimensional subspace) or logits",
               lambda h, p: lowrank(h, p["k"], p.get("of", "keys")), lambda p: p["k"], {"k": "int", "of": "text"},
               ("k",)),
    Compressor("evict", "evict:sinks=4,window=64 [,heavy=8] | evict:keep=0-15,40",
               "an evicted KV cache of a causal or sliding-window head as it streams, StreamingLLM or with heavy= "
               "H2O online, or with keep= a fixed list of keys (any head)", _evict_or_keep,
               lambda p: len(p["keep"]) if "keep" in p else p.get("sinks", 0) + p.get("window", 0) + p.get("heavy", 0),
               {"sinks": "int", "window": "int", "heavy": "int", "keep": "indices"}),
    Compressor("window", "window:w=128", "sliding-window attention (an encoder: the w keys centred on each query)",
               lambda h, p: window(h, p["w"]), lambda p: p["w"], {"w": "int"}, ("w",)),
    Compressor("topk", "topk:k=32", "top-k attention per row", lambda h, p: topk(h, p["k"]), lambda p: p["k"],
               {"k": "int"}, ("k",)),
    Compressor("kivi", "kivi:bits=2,group=32,residual=32",
               "KIVI, keys per channel and values per token in b-bit groups with a zero point, a full-precision "
               "residual (output level: needs values)",
               lambda h, p: streaming.kivi(h, p["bits"], p["group"], p["residual"]), lambda p: p["bits"],
               {"bits": "int", "group": "int", "residual": "int"}, defaults={"bits": 2, "group": 32, "residual": 32}),
)}


def methods_help() -> str:
    """The methods as `certkit compare --method` lists them: "example: what it models; ..."."""
    return "; ".join(f"{m.example}: {m.models}" for m in METHODS.values())
