"""What certkit knows about each supported transformer family (docs/models.md, "Families").

For one family: where its attention modules are, how they reach the scores (the route by which
certkit captures Q and K), the exact temperature of layer l at multiplier 1, the row mask of a
decoder layer, and the longest input the model accepts.  Everything here is read from the
attention code of transformers 5.24 (transformers/models/<family>/modeling_<family>.py):

    family      scores of head h (eager)                                      route
    bert        Q K^T * d^-1/2 + padding mask                                 interface
    roberta     same (positions start at pad_token_id + 1)                    interface
    distilbert  same                                                          interface
    mpnet       Q K^T / sqrt(d) + relative-position bias + padding mask       mpnet
    gpt2        Q K^T * scaling + causal mask; scaling = d^-1/2 if
                scale_attn_weights else 1, divided by (l + 1) if
                scale_attn_by_inverse_layer_idx                               interface
    gpt_neox    RoPE(Q) RoPE(K)^T * d^-1/2 + causal mask                      interface
    llama       RoPE(Q) RoPE(K_g)^T * d^-1/2 + causal mask (GQA: K_g shared)  interface
    mistral     as llama, sliding-window mask (config.sliding_window)         interface
    qwen2       as llama, sliding window on the layers whose
                layer_types[l] is "sliding_attention" (use_sliding_window)    interface
    bloom       Q K^T * d^-1/2 + ALiBi (slope_h * key position) + causal mask bloom

"interface": the family's attention module calls its module-level eager_attention_forward with
the query and key exactly as they enter the scores (after RoPE, before GQA's repeat_kv) and the
scaling; certkit wraps that function during the forward pass.  "mpnet", "bloom": the attention
is inline; certkit hooks the projections and reads the bias from the module's arguments.
"""
from dataclasses import dataclass
from fractions import Fraction

from ..numbers import OverSqrt


@dataclass(frozen=True)
class Family:
    """One supported family, one row of FAMILIES: everything certkit's capture, help texts, docs lists and GGUF
    reader know about it (adding a family: CONTRIBUTING.md)."""
    name: str                       # config.model_type
    label: str                      # its name in help texts and docs
    decoder: bool                   # causal: every query sees the keys up to its own position
    route: str                      # "interface" | "mpnet" | "bloom": how Q and K are captured
    positions: str                  # how positions enter the scores (documentation and provenance)
    layers: object                  # base model -> its attention modules, in layer order
    output: object                  # base model -> its output projections W_O, in layer order (output_projection)
    gguf: str | None = None         # general.architecture of its llama.cpp GGUF files; None: no GGUF
    window: str | None = None       # sliding window: "every layer" (config.sliding_window), "layer_types" (on
                                    # the layers config.layer_types marks "sliding_attention"), None
    scale_options: bool = False     # config.scale_attn_weights and scale_attn_by_inverse_layer_idx (GPT-2) apply
    position_limit: bool = True     # config.max_position_embeddings bounds the length (ALiBi: no limit)
    padding_idx: int | str | None = None   # positions numbered from padding_idx + 1 (a number or a config key)
    interleaved_keys: bool = False  # llama.cpp keeps its keys in the rotary layout (gguf dim 2i = HF dim i, 2i + 1
                                    # = HF dim i + d/2: its converter permutes the q and k projections)

    def attention_modules(self, base):
        return list(self.layers(base))


# The output projection W_O (H d_v x d_model, out = concat_h(O_h) W_O + bias) is a torch Linear (weight
# d_model x H d_v, so W_O = weight^T) or GPT-2's Conv1D (weight H d_v x d_model, W_O = weight).
FAMILIES = {f.name: f for f in (
    Family("bert", "BERT", False, "interface", "absolute embeddings",
           lambda b: (l.attention.self for l in b.encoder.layer),
           lambda b: (l.attention.output.dense for l in b.encoder.layer)),
    Family("roberta", "RoBERTa", False, "interface", "absolute embeddings",
           lambda b: (l.attention.self for l in b.encoder.layer),
           lambda b: (l.attention.output.dense for l in b.encoder.layer), padding_idx="pad_token_id"),
    Family("distilbert", "DistilBERT", False, "interface", "absolute embeddings",
           lambda b: (l.attention for l in b.transformer.layer),
           lambda b: (l.attention.out_lin for l in b.transformer.layer)),
    Family("mpnet", "MPNet", False, "mpnet", "relative-position bias (logit bias)",
           lambda b: (l.attention.attn for l in b.encoder.layer),
           lambda b: (l.attention.attn.o for l in b.encoder.layer), padding_idx=1),   # MPNetEmbeddings.padding_idx
    Family("gpt2", "GPT-2", True, "interface", "absolute embeddings", lambda b: (l.attn for l in b.h),
           lambda b: (l.attn.c_proj for l in b.h), gguf="gpt2", scale_options=True),
    Family("gpt_neox", "GPT-NeoX", True, "interface", "rotary (partial)", lambda b: (l.attention for l in b.layers),
           lambda b: (l.attention.dense for l in b.layers)),
    Family("llama", "Llama", True, "interface", "rotary", lambda b: (l.self_attn for l in b.layers),
           lambda b: (l.self_attn.o_proj for l in b.layers), gguf="llama", interleaved_keys=True),
    Family("mistral", "Mistral", True, "interface", "rotary", lambda b: (l.self_attn for l in b.layers),
           lambda b: (l.self_attn.o_proj for l in b.layers), gguf="mistral", window="every layer",
           interleaved_keys=True),
    Family("qwen2", "Qwen2", True, "interface", "rotary", lambda b: (l.self_attn for l in b.layers),
           lambda b: (l.self_attn.o_proj for l in b.layers), gguf="qwen2", window="layer_types"),
    Family("bloom", "BLOOM", True, "bloom", "ALiBi (logit bias)", lambda b: (l.self_attention for l in b.h),
           lambda b: (l.self_attention.dense for l in b.h), gguf="bloom", position_limit=False),
)}
GGUF = {f.gguf: f.name for f in FAMILIES.values() if f.gguf}     # general.architecture -> model_type


def labels(decoder=None, gguf=False):
    """"A, B, C": the families' labels in table order (only the decoders or encoders; only those with GGUF files)."""
    return ", ".join(f.label for f in FAMILIES.values() if decoder in (None, f.decoder) and (f.gguf or not gguf))


SUPPORTED = f"encoders: {labels(decoder=False)}; decoders: {labels(decoder=True)}"


def output_projection(family, base, layers):
    """[W_O of each layer in `layers`] as float64 arrays (H d_v x d_model): out = concat_h(O_h) W_O (+ bias);
    only the layers asked for are copied (a 7B model's W_O is 4 GiB of float64 in all)."""
    import numpy as np
    mods = list(family.output(base))
    out = []
    for l in layers:
        w = mods[l].weight.detach().to("cpu").double().numpy()
        out.append(np.ascontiguousarray(w if type(mods[l]).__name__ == "Conv1D" else w.T))
    return out


def family_of(config):
    """The Family of a transformers config (by config.model_type), or None."""
    return FAMILIES.get(getattr(config, "model_type", None))


def counts(config):
    """(layers, query heads, key/value heads, d_head) of a supported config."""
    layers = config.num_hidden_layers
    heads = config.num_attention_heads
    kv = getattr(config, "num_key_value_heads", None) or heads
    d = getattr(config, "head_dim", None) or config.hidden_size // heads
    return int(layers), int(heads), int(kv), int(d)


def scale(family, config, layer, d_head):
    """The model's own score scale of layer `layer`, exactly: OverSqrt(c, d_head) (c/sqrt(d_head))
    or a Fraction.  Every family multiplies Q K^T by d_head^-1/2 except, where family.scale_options,
    with scale_attn_weights=False (1) and scale_attn_by_inverse_layer_idx=True (an extra 1/(layer+1))."""
    if family.scale_options:
        c = Fraction(1, layer + 1) if getattr(config, "scale_attn_by_inverse_layer_idx", False) else Fraction(1)
        return OverSqrt(c, Fraction(d_head)) if getattr(config, "scale_attn_weights", True) else c
    return OverSqrt(Fraction(1), Fraction(d_head))


def times(beta, m):
    """beta scaled by the exact multiplier m (an OverSqrt stays an OverSqrt)."""
    m = Fraction(m)
    return OverSqrt(beta.c * m, beta.D) if isinstance(beta, OverSqrt) else Fraction(beta) * m


def window(family, config, layer):
    """The sliding window of a decoder layer (keys i - w < j <= i visible to query i), or None."""
    types = getattr(config, "layer_types", None) or []
    if family.window == "every layer" or (family.window == "layer_types" and layer < len(types)
                                          and types[layer] == "sliding_attention"):
        return getattr(config, "sliding_window", None)
    return None


def max_length(family, config):
    """The longest sequence the model's position embeddings allow, or None (ALiBi has no limit).
    A family that numbers positions from padding_idx + 1 (RoBERTa, MPNet) cannot use the first padding_idx + 1."""
    mpe = getattr(config, "max_position_embeddings", None)
    if not family.position_limit or mpe is None:
        return None
    p = family.padding_idx
    p = (getattr(config, p, 1) or 0) if isinstance(p, str) else p
    return int(mpe) - (0 if p is None else int(p) + 1)
