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
    name: str
    decoder: bool
    route: str            # "interface" | "mpnet" | "bloom"
    positions: str        # how positions enter the scores (documentation and provenance)
    layers: object        # base model -> its attention modules, in layer order

    def attention_modules(self, base):
        return list(self.layers(base))


FAMILIES = {
    "bert": Family("bert", False, "interface", "absolute embeddings",
                   lambda b: (l.attention.self for l in b.encoder.layer)),
    "roberta": Family("roberta", False, "interface", "absolute embeddings",
                      lambda b: (l.attention.self for l in b.encoder.layer)),
    "distilbert": Family("distilbert", False, "interface", "absolute embeddings",
                         lambda b: (l.attention for l in b.transformer.layer)),
    "mpnet": Family("mpnet", False, "mpnet", "relative-position bias (logit bias)",
                    lambda b: (l.attention.attn for l in b.encoder.layer)),
    "gpt2": Family("gpt2", True, "interface", "absolute embeddings", lambda b: (l.attn for l in b.h)),
    "gpt_neox": Family("gpt_neox", True, "interface", "rotary (partial)", lambda b: (l.attention for l in b.layers)),
    "llama": Family("llama", True, "interface", "rotary", lambda b: (l.self_attn for l in b.layers)),
    "mistral": Family("mistral", True, "interface", "rotary", lambda b: (l.self_attn for l in b.layers)),
    "qwen2": Family("qwen2", True, "interface", "rotary", lambda b: (l.self_attn for l in b.layers)),
    "bloom": Family("bloom", True, "bloom", "ALiBi (logit bias)", lambda b: (l.self_attention for l in b.h)),
}

SUPPORTED = ("encoders: BERT (MiniLM), RoBERTa, DistilBERT, MPNet; decoders: GPT-2, GPT-NeoX, Llama, Mistral, "
             "Qwen2, BLOOM (ALiBi)")


# The output projection of layer l as one matrix W_O (H d_v x d_model, out = concat_h(O_h) W_O + bias):
# where each family keeps it relative to its layer, and whether it is a torch Linear (weight d_model x
# H d_v, so W_O = weight^T) or GPT-2's Conv1D (weight H d_v x d_model, W_O = weight).
OUTPUT_PROJECTION = {
    "bert": lambda b: (l.attention.output.dense for l in b.encoder.layer),
    "roberta": lambda b: (l.attention.output.dense for l in b.encoder.layer),
    "distilbert": lambda b: (l.attention.out_lin for l in b.transformer.layer),
    "mpnet": lambda b: (l.attention.attn.o for l in b.encoder.layer),
    "gpt2": lambda b: (l.attn.c_proj for l in b.h),
    "gpt_neox": lambda b: (l.attention.dense for l in b.layers),
    "llama": lambda b: (l.self_attn.o_proj for l in b.layers),
    "mistral": lambda b: (l.self_attn.o_proj for l in b.layers),
    "qwen2": lambda b: (l.self_attn.o_proj for l in b.layers),
    "bloom": lambda b: (l.self_attention.dense for l in b.h),
}
# llama.cpp keeps the keys of these families in its rotary layout (its converter permutes the q and k
# projections so that rotated pairs are adjacent: gguf dim 2i = HF dim i, 2i + 1 = HF dim i + d/2), so a
# cache block of 32 key dims holds HF dims {0..15, 32..47}, ... (the other families use NeoX rotary or none)
INTERLEAVED_KEYS = ("llama", "mistral")


def output_projection(family, base, layers):
    """[W_O of each layer in `layers`] as float64 arrays (H d_v x d_model): out = concat_h(O_h) W_O (+ bias);
    only the layers asked for are copied (a 7B model's W_O is 4 GiB of float64 in all)."""
    import numpy as np
    mods = list(OUTPUT_PROJECTION[family.name](base))
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
    or a Fraction.  Every family multiplies Q K^T by d_head^-1/2 except GPT-2 with
    scale_attn_weights=False (1) and scale_attn_by_inverse_layer_idx=True (an extra 1/(layer+1))."""
    if family.name == "gpt2":
        c = Fraction(1, layer + 1) if getattr(config, "scale_attn_by_inverse_layer_idx", False) else Fraction(1)
        return OverSqrt(c, Fraction(d_head)) if getattr(config, "scale_attn_weights", True) else c
    return OverSqrt(Fraction(1), Fraction(d_head))


def times(beta, m):
    """beta scaled by the exact multiplier m (an OverSqrt stays an OverSqrt)."""
    m = Fraction(m)
    return OverSqrt(beta.c * m, beta.D) if isinstance(beta, OverSqrt) else Fraction(beta) * m


def window(family, config, layer):
    """The sliding window of a decoder layer (keys i - w < j <= i visible to query i), or None."""
    if family.name == "mistral":
        return getattr(config, "sliding_window", None)
    if family.name == "qwen2":
        types = getattr(config, "layer_types", None) or []
        if layer < len(types) and types[layer] == "sliding_attention":
            return getattr(config, "sliding_window", None)
    return None


def max_length(family, config):
    """The longest sequence the model's position embeddings allow, or None (ALiBi has no limit).
    RoBERTa and MPNet number positions from padding_idx + 1, so two of their slots are unusable."""
    if family.name == "bloom":
        return None
    mpe = getattr(config, "max_position_embeddings", None)
    if mpe is None:
        return None
    if family.name == "roberta":
        return int(mpe) - int(getattr(config, "pad_token_id", 1) or 0) - 1
    if family.name == "mpnet":
        return int(mpe) - 2                    # MPNetEmbeddings.padding_idx = 1
    return int(mpe)
