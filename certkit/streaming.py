"""KV caches whose contents change while a decoder streams: which keys (and values) query i sees is the
cache as it stands when token i is decoded, never a set chosen with later queries.

Each cache is stated exactly as per-key row intervals (certkit.KeyRows, certificate format 1.3): key
j is visible to the rows start_j <= i < stop_j, intersected with the head's own causal or
sliding-window mask.  Query i sits at position p_i = i + offset of the head's RowMask; key j enters
the cache at the row whose position reaches j.

    evict_recent   StreamingLLM: the first `sinks` keys for good, plus the `window` most recent keys
                   (j > p_i - window); a key that leaves the window never comes back.
    h2o            H2O (Zhang et al., 2023), online: `sinks`, the `window` most recent keys and at most
                   `heavy` heavy hitters, by the attention each key has received from past queries in
                   the evicted cache itself (accumulated over rows <= i, the row's own included); when the
                   cache holds more than sinks + heavy + window keys, the one with the least accumulated
                   attention outside the sinks and the window is evicted (ties: the oldest), for good.
                   Per head, as H2O does (a grouped-query cache is evicted per query head here).
    kivi           KIVI (Liu et al., 2024): keys quantised per channel over groups of G tokens, values
                   per token over groups of G channels, b bits, asymmetric with a zero point (float32
                   scale s = fl32((max - min) / (2^b - 1)) and minimum m, dequantised as fl32(q s + m)),
                   and a full-precision residual: a key stays full until its block of R tokens is
                   complete (R a multiple of G, so every key group is complete, from past tokens only,
                   when it is quantised); a value stays full while it is among the R most recent.  So
                   each token is up to three cache entries (K, V), (K~, V), (K~, V~), each a key of the
                   replacement with its interval.

Not modelled: the engine's own f16/bf16 rounding of the full-precision part, RoPE re-indexing
inside a StreamingLLM cache (positions are the original ones), prefill computed in full precision
(every query here reads the cache, as in token-by-token decoding).
"""
from typing import Any

import numpy as np

from .errors import UserError
from .head import Head, KeyRows, RowMask, UNBOUNDED, softmax_rows


class CacheError(UserError):
    """A streaming cache that cannot be applied to this head (no causal mask, bad parameters)."""


def _positions(head: Head, spec: str) -> tuple[np.ndarray, np.ndarray, int]:
    """(lo, hi, offset): the head's own per-key rows and its RowMask's offset; CacheError without one."""
    if not isinstance(head.mask, RowMask):
        raise CacheError(f"{spec}: head {head.name!r} has no causal or sliding-window mask (an encoder: every "
                         f"query sees every key, so a cache that streams is not defined); use window:w= or "
                         f"evict:keep= on an encoder")
    lo, hi = head.mask.key_rows(head.N)
    return lo, hi, head.mask.offset


def _replacement(head: Head, spec: str, start: np.ndarray, stop: np.ndarray, **changes: Any) -> Head:
    return head.replace(name=f"{head.name} [{spec}]", provenance={**head.provenance, "compression": spec},
                        mask=KeyRows(start, stop, spec), **changes)


def evict_recent(head: Head, sinks: int, window: int) -> Head:
    """StreamingLLM's cache (sinks + recent window) as exact per-key rows: key j >= sinks leaves at the
    row whose position passes j + window - 1."""
    spec = f"evict:sinks={sinks},window={window}"
    lo, hi, o = _positions(head, spec)
    j = np.arange(head.N)
    stop = np.where(j < sinks, UNBOUNDED, j - o + window)
    return _replacement(head, spec, lo, np.minimum(hi, stop))


def h2o(head: Head, heavy: int, window: int, sinks: int = 0) -> Head:
    """H2O's online heavy-hitter cache (see the module docstring): per-key rows [enter, evicted)."""
    spec = f"evict:sinks={sinks},window={window},heavy={heavy}" if sinks else f"evict:window={window},heavy={heavy}"
    lo, hi, o = _positions(head, spec)
    n, N, budget = head.n, head.N, sinks + heavy + window
    j = np.arange(N)
    stop = np.full(N, UNBOUNDED, dtype=np.int64)
    acc, present = np.zeros(N), np.zeros(N, dtype=bool)
    order = np.argsort(lo, kind="stable")            # keys by the row they enter at
    entered = 0
    for s in range(0, n, 256):
        L = head.logits(rows=slice(s, s + 256))
        for i in range(s, min(s + 256, n)):
            while entered < N and lo[order[entered]] <= i:
                present[order[entered]] = True
                entered += 1
            vis = present & (L[i - s] > -np.inf)
            if vis.any():
                acc[vis] += softmax_rows(L[i - s][vis][None, :])[0]
            extra = int(present.sum()) - budget
            if extra > 0:
                cand = np.flatnonzero(present & (j >= sinks) & (j <= i + o - window))
                out = cand[np.argsort(acc[cand], kind="stable")[:extra]]
                present[out], stop[out] = False, i + 1
    return _replacement(head, spec, lo, np.minimum(hi, stop))


def quantise_groups(x: np.ndarray, bits: int) -> np.ndarray:
    """Asymmetric b-bit quantisation of each row of x (a group per row): float32 minimum m and scale
    s = fl32((max - m) / (2^b - 1)), q = round((x - m) / s) in [0, 2^b - 1], dequantised fl32(q s + m)."""
    x32 = x.astype(np.float32)
    m = np.min(x32, axis=1, keepdims=True)
    s = ((np.max(x32, axis=1, keepdims=True) - m) / np.float32(2 ** bits - 1)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s > 0, np.clip(np.rint((x32 - m) / s), 0, 2 ** bits - 1), 0).astype(np.float32)
    return (q * s + m).astype(np.float32).astype(np.float64)


def kivi_keys(K: np.ndarray, bits: int, group: int) -> np.ndarray:
    """Keys quantised per channel over groups of `group` consecutive tokens (a last partial group alone)."""
    out = np.empty_like(K)
    for g in range(0, K.shape[0], group):
        out[g:g + group] = quantise_groups(K[g:g + group].T, bits).T
    return out


def kivi_values(V: np.ndarray, bits: int, group: int) -> np.ndarray:
    """Values quantised per token over groups of `group` consecutive channels."""
    n, d = V.shape
    return quantise_groups(V.reshape(n * (d // group), group), bits).reshape(n, d)


KIVI_BITS = (2, 4, 8)


def kivi(head: Head, bits: int = 2, group: int = 32, residual: int = 32) -> Head:
    """KIVI's cache (see the module docstring): up to three entries per token, each a replacement key
    (and value) with the rows it is seen by.  Needs the head's values (an output-level comparison)."""
    spec = f"kivi:bits={bits},group={group},residual={residual}"
    if bits not in KIVI_BITS or group < 1 or residual < group or residual % group:
        raise CacheError(f"{spec}: need bits in {KIVI_BITS}, group >= 1 and residual a positive multiple of group")
    if head.values is None:
        raise CacheError(f"{spec}: head {head.name!r} has no values; KIVI quantises keys and values together, "
                         f"so it is compared at the output (compare --norm, a model head or values=)")
    dv = head.values.shape[1]
    if dv % min(group, dv):
        raise CacheError(f"{spec}: the value dimension {dv} is not a multiple of the group size {group}")
    lo, hi, o = _positions(head, spec)
    j = np.arange(head.N)
    t_key = residual * (j // residual + 1) - 1 - o           # the row at which key j's block is quantised
    t_value = j + residual - o                               # the row at which value j leaves the residual
    Kq, Vq = kivi_keys(head.keys, bits, group), kivi_values(head.values, bits, min(group, dv))
    parts = [(head.keys, head.values, lo, np.minimum(hi, t_key)),
             (Kq, head.values, np.maximum(lo, t_key), np.minimum(hi, t_value)),
             (Kq, Vq, np.maximum(lo, t_value), hi)]
    keep = [(a < np.minimum(b, head.n)) & (b > 0) for _, _, a, b in parts]       # entries some row sees
    cols = np.concatenate([j[k] for k in keep])
    order = np.argsort(cols, kind="stable")                  # by token, then full before quantised
    cat = lambda f: np.concatenate([f(p)[k] for p, k in zip(parts, keep)])[order]     # noqa: E731
    changes: dict[str, Any] = {"keys": cat(lambda p: p[0]), "values": cat(lambda p: p[1])}
    if head.weights is not None:
        changes["weights"] = head.weights[cols[order]]
    if head.bias is not None:
        changes["bias"] = head.bias[:, cols[order]]
    return _replacement(head, spec, cat(lambda p: p[2]), cat(lambda p: p[3]), **changes)
