"""Heads from a capture (certkit.models.capturing): head (l, h) as a certkit Head — the float64 Q of
head h, K and V of its key head, the model's exact scale times a multiplier, padded keys at weight 0,
the position bias, the decoder's row mask, its slice of W_O — and the reconstruction check's result.

    A = row-softmax(beta Q_h K_g(h)^T + log w + bias_h)   on the keys the row mask shows
"""
from fractions import Fraction

import numpy as np

from ..errors import UserError
from ..head import Head
from . import families as fam

def _index(c, layer):
    try:
        return c["layers"].index(layer)
    except ValueError:
        raise UserError(f"layer {layer} was not captured (captured: {c['layers']})") from None


def head(c, layer, h, multiplier=Fraction(1)):
    """The Head of layer `layer`, query head h of a capture c at beta = multiplier x the model's
    scale (exact; multiplier 1 is the model): Q of head h, K and V of its key head c["kv_map"][h],
    weight 0 on padded keys, the position bias (MPNet, ALiBi) as the logit bias, the decoder's
    RowMask, and the head's slice of the output projection (d_v x d_model).  Named l<layer>-h<h>;
    provenance model, layer, head, length, key_layout (heads() adds the rest)."""
    i = _index(c, layer)
    g = c["kv_map"][h]
    V = c["V"][i][g] if "V" in c else None
    W = None if V is None else c["WO"][i][h * V.shape[1]:(h + 1) * V.shape[1]]
    return Head(c["Q"][i][h], c["K"][i][g], fam.times(c["betas"][i], multiplier),
                weights=None if c["keep"].all() else c["keep"].astype(np.float64),
                bias=None if c["bias"] is None else c["bias"][h], name=f"l{layer}-h{h}",
                provenance={"model": c.get("model"), "layer": int(layer), "head": int(h),
                            "length": int(c.get("length", len(c["Q"][i][h]))),
                            "key_layout": c.get("key_layout", "hf")},
                mask=c["masks"][i], values=V, projection=W)


def rebuild(c, layer, h):
    """The float64 attention of the rebuilt head at multiplier 1 on the kept columns."""
    return head(c, layer, h).attention()[:, c["keep"]]


def reconstruction(c):
    """max |A - P| per captured layer and head ([layers, heads] float64): A the Head's float64
    attention (0 on masked entries and padded keys), P the model's own probabilities.  Computed by
    capture() while the model ran."""
    return c["errors"]


def reconstruction_error(c):
    """max |rebuild - model probabilities| over all captured layers, heads and entries."""
    return float(reconstruction(c).max())


def model_heads(c, layers=None, heads=None, multipliers=(1,), text_sha256=None, errors=None):
    """Heads of capture c for the given layers and heads (None: all) and each multiplier, named
    l<l>-h<h> (multiplier 1) or l<l>-h<h>-m<m>, with provenance model, family, layer, head,
    kv_head, length, multiplier, text_sha256 and reconstruction_max_abs_diff (errors: reconstruction(c))."""
    from ..numbers import tag
    errors = reconstruction(c) if errors is None else errors
    ls = c["layers"] if layers is None else list(layers)
    hs = range(c["Q"].shape[1]) if heads is None else list(heads)
    out = []
    for l in ls:
        for h in hs:
            for m in multipliers:
                m = Fraction(m)
                x = head(c, l, h, m)
                prov = dict(x.provenance, family=c["family"], kv_head=int(c["kv_map"][h]), multiplier=str(m),
                            text_sha256=text_sha256,
                            reconstruction_max_abs_diff=float(errors[_index(c, l), h]))
                out.append(x.replace(name=x.name + ("" if m == 1 else f"-m{tag(m)}"), provenance=prov))
    return out
