"""KV-cache formats as inference engines store them: the keys (and values) a compressed cache hands
back to attention, dequantised exactly in binary64.

One registry, FORMATS, name -> KVFormat.  Each format maps a (tokens x head_dim) float64 array to
the float64 numbers the engine computes with after dequantisation (exact: every dequantised number
of these formats is a binary64 number), applied to keys and values separately (llama.cpp's
-ctk / -ctv).  Queries are never cached and never change.

    q8_0, q4_0, q4_1, q5_0, q5_1   llama.cpp's block formats: blocks of 32 numbers along the head
                                    dimension of one token, an fp16 scale (and fp16 minimum for
                                    _1) per block; gguf.quants is the reference and the
                                    implementation (dequantize(quantize(x)) on float32 input).
    fp8_e4m3, fp8_e5m2              float8 with one float32 scale per head, s = fl32(max|x| / fp8 max)
                                    (a per-tensor scale over one head), cast with torch's
                                    float8_e4m3fn / float8_e5m2 (round to nearest even).
    int8                            symmetric int8 per token: s_t = fl32(max_c |x_tc| / 127),
                                    round(x / s_t) clipped to [-127, 127].

Layout: llama.cpp stores the keys of Llama and Mistral models in its rotary layout (its converter
permutes the q and k projections so that rotated pairs sit side by side: engine dim 2i = HF dim i,
2i + 1 = HF dim i + d/2), so a block of 32 key numbers holds HF dims {0..15, 32..47} of a 64-dim
head, not {0..31}.  dequantised(x, name, layout="llama.cpp-rope") quantises in that layout and
hands the numbers back in HF's (the attention is the same in either: both Q and K are permuted
alike); values are never permuted.  The models' heads say which layout their keys have
(provenance key_layout).

Every format here is per token or per head with a fixed scale, so a token's stored numbers never
depend on a later token (the streaming question does not arise); the fp8 per-head scale is computed
over the whole sequence, as a calibrated scale would be (engines calibrate it offline).
What is not modelled: the engine's own f16/bf16 rounding of the unquantised cache, its online
softmax, RoPE re-indexing, and errors compounding across layers (docs/api.md).
"""
from dataclasses import dataclass
from typing import Callable

import numpy as np

from .errors import UserError

BLOCK = 32                   # llama.cpp's block size along the head dimension (QK8_0, QK4_0, ...)


class FormatError(UserError):
    """A KV format that cannot be applied (unknown name, a head dimension not a multiple of 32)."""


@dataclass(frozen=True)
class KVFormat:
    name: str
    bits: float                                  # stored bits per number, scales included (head_dim 64)
    what: str                                    # one line: the format as the engine stores it
    dequantised: Callable[[np.ndarray], np.ndarray]


def _gguf(kind: str) -> Callable[[np.ndarray], np.ndarray]:
    def apply(x: np.ndarray) -> np.ndarray:
        from gguf import GGMLQuantizationType
        from gguf.quants import dequantize, quantize
        if x.shape[-1] % BLOCK:
            raise FormatError(f"{kind}: the head dimension {x.shape[-1]} is not a multiple of {BLOCK} "
                              f"(llama.cpp quantises blocks of {BLOCK} numbers)")
        t = getattr(GGMLQuantizationType, kind.upper())
        y = dequantize(quantize(np.ascontiguousarray(x, dtype=np.float32), t), t)
        return np.asarray(y, dtype=np.float64).reshape(x.shape)
    return apply


def _fp8(kind: str) -> Callable[[np.ndarray], np.ndarray]:
    def apply(x: np.ndarray) -> np.ndarray:
        import torch
        dtype = {"e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}[kind]
        top = float(torch.finfo(dtype).max)
        amax = float(np.max(np.abs(x)))
        s = float(np.float32(amax / top)) if amax > 0 else 1.0
        z = np.clip(x.astype(np.float32) / np.float32(s), -top, top)   # float32, as the engine; saturating
        q = torch.from_numpy(z).to(dtype).to(torch.float64).numpy()
        return q * s                                     # fp8 (<= 4 significant bits) x float32: exact
    return apply


def _int8_per_token(x: np.ndarray) -> np.ndarray:
    amax = np.max(np.abs(x), axis=1, keepdims=True)
    s = np.where(amax > 0, amax / 127, 1.0).astype(np.float32).astype(np.float64)
    return np.clip(np.rint(x / s), -127, 127) * s


FORMATS = {f.name: f for f in (
    KVFormat("q8_0", 8.5, "llama.cpp q8_0: blocks of 32 along the head dimension, int8 and one fp16 scale", _gguf("q8_0")),
    KVFormat("q5_1", 6.0, "llama.cpp q5_1: blocks of 32, 5-bit unsigned, fp16 scale and minimum", _gguf("q5_1")),
    KVFormat("q5_0", 5.5, "llama.cpp q5_0: blocks of 32, 5-bit signed, one fp16 scale", _gguf("q5_0")),
    KVFormat("q4_1", 5.0, "llama.cpp q4_1: blocks of 32, 4-bit unsigned, fp16 scale and minimum", _gguf("q4_1")),
    KVFormat("q4_0", 4.5, "llama.cpp q4_0: blocks of 32, 4-bit signed, one fp16 scale", _gguf("q4_0")),
    KVFormat("fp8_e4m3", 8.0, "float8 e4m3 (torch float8_e4m3fn) with one float32 scale per head", _fp8("e4m3")),
    KVFormat("fp8_e5m2", 8.0, "float8 e5m2 (torch float8_e5m2) with one float32 scale per head", _fp8("e5m2")),
    KVFormat("int8", 8.5, "int8 per token: symmetric, one float32 scale per token", _int8_per_token),
)}


LAYOUTS = ("hf", "llama.cpp-rope")


def rope_order(d: int) -> np.ndarray:
    """The HF dim at each engine dim of llama.cpp's rotary layout: [0, d/2, 1, d/2 + 1, ...]."""
    if d % 2:
        raise FormatError(f"the rotary layout needs an even head dimension, got {d}")
    return np.stack([np.arange(d // 2), np.arange(d // 2) + d // 2], axis=1).reshape(-1)


def dequantised(x: np.ndarray, name: str, layout: str = "hf") -> np.ndarray:
    """The float64 numbers a cache in format `name` hands back for x (tokens x head_dim), the cache
    in `layout` ("hf", or "llama.cpp-rope" for the keys of Llama-family models in llama.cpp)."""
    if name not in FORMATS:
        raise FormatError(f"unknown KV format {name!r} (use {', '.join(FORMATS)})")
    if layout not in LAYOUTS:
        raise FormatError(f"unknown layout {layout!r} (use {', '.join(LAYOUTS)})")
    x = np.asarray(x, dtype=np.float64)
    if layout == "hf":
        return FORMATS[name].dequantised(x)
    order = rope_order(x.shape[-1])
    out = np.empty_like(x)
    out[..., order] = FORMATS[name].dequantised(np.ascontiguousarray(x[..., order]))
    return out
