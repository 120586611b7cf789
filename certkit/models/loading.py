"""A model loaded offline (certkit.models): a local folder's safetensors weights or a GGUF file's
dequantised tensors, in eager attention, in float32 or float64, with its tokenizer files (refused
when they point out of the folder) and its description (describe: family, layers, heads, key
heads, d_head, maximum length); or a transformers model object in memory (prepare), never changed."""
import contextlib
import io
import os
import sys

from ..batch import file_sha256
from ..errors import UserError
from . import families as fam
from .files import ModelError, check_gguf, inside, is_gguf, preflight
from .sources import model_folder, model_name

DTYPES = ("float32", "float64")


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
