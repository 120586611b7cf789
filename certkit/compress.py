"""Compressed heads: the replacements an efficiency engineer ships, each a certkit.Head A' whose
distance to the original,  max_i ||A_i - A'_i||_1,  certkit.compare certifies.  By the operator
identity (docs/mathematics.md §1) that distance is exactly the worst error of the attention output
A V against A' V over all value matrices V with entries in [-1, 1].

Every producer returns a new Head holding exactly the numbers the compressed model computes
with (dequantised values are exact binary64 numbers, so the certificate states them exactly);
nothing here is trusted: the kernel recomputes both attentions from the certificate.

Methods (`method(head, spec)` reads the command-line spelling):

    quant:int8 | quant:int4 | quant:fp8     queries and keys quantised (quantize)
    lowrank:k=16 [,of=keys|logits]          rank-k keys or rank-k logits (lowrank)
    evict:sinks=4,window=64 [,heavy=8]      an evicted KV cache (evict); evict:keep=0-15,40 keeps a list
    window:w=128                            sliding-window attention (window)
    topk:k=32                               top-k attention per row (topk)

A sweep spells a range: lowrank:k=4..64 doubles k from 4 to 64; quant:int8,int4 lists schemes.
"""
import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from .errors import UserError
from .head import Head, RowMask
from .numbers import parse_indices

QUANT_LEVELS = {"int8": 127, "int4": 7}      # symmetric round-to-nearest: integers in [-L, L]
DROP = -4096.0       # the logit bias that removes a key from one query's softmax (see drop_keys)
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
    """An evicted KV cache (attention sinks plus a recent window, optionally heavy hitters): query i
    attends only to the first `sinks` keys, the `window` most recent keys up to its position
    (window >= 1: its own key is always there) and the `heavy` keys with the largest total
    attention mass sum_i A_ij; every other key is evicted (A'_ij = 0, softmax over the kept keys).
    On a causal head (or one without a mask) and without heavy hitters this is a row mask (a few
    numbers in the certificate), else a logit bias (drop_keys)."""
    if sinks < 0 or window < 1 or heavy < 0:
        raise MethodError(f"evict:sinks={sinks},window={window},heavy={heavy}: need sinks, heavy >= 0 and "
                          "window >= 1 (the query's own key)")
    spec = f"evict:sinks={sinks},window={window}" + (f",heavy={heavy}" if heavy else "")
    m = head.mask or RowMask(0)
    if not heavy and m.window is None and not m.sinks:          # a causal (or no) mask: sinks + window is a mask
        return _replacement(head, spec, mask=RowMask(m.offset, window, sinks))
    pos = np.clip(_positions(head), 0, head.N - 1)
    cols = [np.broadcast_to(np.arange(min(sinks, head.N)), (head.n, min(sinks, head.N)))]
    cols.append(np.clip(pos[:, None] - np.arange(window)[None, :], 0, head.N - 1))
    mass = head.attention().sum(axis=0)
    cols.append(np.broadcast_to(np.sort(np.argsort(-mass, kind="stable")[:heavy]), (head.n, min(heavy, head.N))))
    keys = np.minimum(np.concatenate(cols, axis=1), pos[:, None])        # nothing after the query's position
    return drop_keys(head, spec, keys)


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
    """Sliding-window attention: query i sees the w keys up to its position (i + offset - w < j <= i +
    offset); a head without a row mask (an encoder) gets the w keys centred on i instead."""
    if w < 1:
        raise MethodError(f"window:w={w}: w must be >= 1")
    if head.mask is not None:
        return _replacement(head, f"window:w={w}", mask=RowMask(head.mask.offset, w))
    lo = np.clip(np.arange(head.n) - w // 2, 0, max(head.N - w, 0))
    return drop_keys(head, f"window:w={w}", np.minimum(lo[:, None] + np.arange(w), head.N - 1))


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
    logit bias DROP = -4096 on top of the head's own.  Its attention then differs from dropping those
    keys exactly by at most 2 N e^(Delta_i - 4096) in row i (Delta_i the spread of row i's logits),
    below 10^-1700 for any head whose logits span less than 100 (a certificate states exactly this
    bias, so the proof is about this attention)."""
    kept = np.zeros((head.n, head.N), dtype=bool)
    np.put_along_axis(kept, keys, True, axis=1)
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
        f, p = self.family, dict(self.params)
        if f == "quant":
            return quantize(head, p["scheme"])
        if f == "lowrank":
            return lowrank(head, p["k"], p.get("of", "keys"))
        if f == "evict":
            if "keep" in p:
                return keep(head, p["keep"])
            return evict(head, p.get("sinks", 0), p.get("window", 0), p.get("heavy", 0))
        if f == "window":
            return window(head, p["w"])
        return topk(head, p["k"])


FAMILIES = {"quant": (), "lowrank": ("k", "of"), "evict": ("sinks", "window", "heavy", "keep"),
            "window": ("w",), "topk": ("k",)}
BITS = {"int8": 8, "int4": 4, "fp8": 8}


def parse_methods(text: str) -> list[Method]:
    """The settings a --method spells, in order; ranges a..b double from a to b ("k=4..64": 4, 8, ..., 64).
    Several methods: separated by ';' or given as several --method options."""
    out: list[Method] = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        fam, _, rest = part.partition(":")
        if fam not in FAMILIES:
            raise MethodError(f"--method {part!r}: unknown method {fam!r} (use {', '.join(FAMILIES)})")
        if fam == "quant":
            schemes = [s.strip() for s in rest.split(",") if s.strip()] or ["int8"]
            for s in schemes:
                if s not in BITS:
                    raise MethodError(f"--method {part!r}: unknown scheme {s!r} (use int8, int4 or fp8)")
                out.append(Method(f"quant:{s}", fam, BITS[s], (("scheme", s),)))
            continue
        fixed, ranged = {}, None
        for item in _items(rest):
            key, eq, val = item.partition("=")
            if not eq or key not in FAMILIES[fam]:
                raise MethodError(f"--method {part!r}: expected key=value with key among {', '.join(FAMILIES[fam])}")
            if key == "of":
                fixed[key] = val
            elif key == "keep":
                kept = parse_indices(val, f"--method {part!r}: keep")
                if kept == "all":
                    raise MethodError(f"--method {part!r}: keep=all keeps every key (nothing is evicted)")
                fixed[key] = tuple(kept)
            elif ".." in val:
                if ranged:
                    raise MethodError(f"--method {part!r}: only one range per method")
                ranged = (key, _doubling(val, part))
            else:
                fixed[key] = _int(val, part)
        for v in ranged[1] if ranged else [None]:
            p = dict(fixed, **({ranged[0]: v} if ranged else {}))
            if fam in ("lowrank", "topk") and "k" not in p or fam == "window" and "w" not in p:
                raise MethodError(f"--method {part!r}: missing {'w' if fam == 'window' else 'k'}=")
            spec = f"{fam}:" + ",".join(f"{k}={_ranges(np.array(v)) if k == 'keep' else v}" for k, v in p.items())
            cost = (len(p["keep"]) if "keep" in p else p.get("sinks", 0) + p.get("window", 0) + p.get("heavy", 0)) \
                if fam == "evict" else p["w"] if fam == "window" else p["k"]
            out.append(Method(spec, fam, cost, tuple(sorted(p.items()))))
    if not out:
        raise MethodError("--method: no method given")
    return out


def _items(rest: str) -> list[str]:
    """Split "sinks=4,window=64" at the commas that start a new key (keep=0-3,7 keeps its commas)."""
    return [m.strip(",") for m in re.findall(r"[a-z]+=[^=]*?(?=,[a-z]+=|$)", rest)] if rest else []


def _int(val: str, part: str) -> int:
    if not re.fullmatch(r"\d+", val.strip()):
        raise MethodError(f"--method {part!r}: {val!r} is not a non-negative integer")
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
