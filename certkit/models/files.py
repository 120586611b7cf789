"""What certkit reads of a model folder, checked before torch or transformers touches it.

A model folder is data, never code.  Before any weight is loaded, certkit reads config.json as
plain JSON and checks

* the architecture: model_type must be one of the supported families (families.py), so no
  custom-code class named by ``auto_map`` is ever resolved (and every transformers call passes
  ``trust_remote_code=False`` as well);
* the sizes: each count that decides an allocation (layers, heads, key/value heads, width,
  head dimension, feed-forward width, vocabulary, positions) is an integer within a fixed range,
  the heads divide the width, and the float32 parameters the config implies fit in this machine's
  memory;
* the weights: ``model.safetensors``, or a ``model.safetensors.index.json`` whose weight map names
  only ``*.safetensors`` files inside the folder; every such file's header is read by the
  safetensors library, which refuses a truncated, oversized or garbage file.  Pickle-based
  weights (``pytorch_model.bin``, ``*.pt``, ``*.ckpt``) are never read.

Every failure is a ModelError (exit 64) naming the file, the field and the value; a folder that
does not exist is an InputError (exit 66).  Nothing here imports torch.
"""
import json
import os

from ..errors import InputError, UserError
from . import families as fam


class ModelError(UserError):
    """A model that cannot be used: not installed (the message gives the pip command), not a model
    folder, weights missing or unsafe, sizes out of range, an unsupported architecture (the message
    names the supported families), or a capture that does not match the model's own attention."""


CONFIG_LIMIT = 1 << 20           # bytes of config.json / index json read at most

# quantity: (the config.json keys that hold it in the supported families, the largest accepted value)
SIZE_FIELDS = {
    "layers": (("num_hidden_layers", "n_layer", "n_layers"), 1024),
    "heads": (("num_attention_heads", "n_head", "n_heads"), 1024),
    "key/value heads": (("num_key_value_heads",), 1024),
    "width": (("hidden_size", "n_embd", "n_embed", "dim"), 1 << 16),
    "head dimension": (("head_dim",), 1024),
    "feed-forward width": (("intermediate_size", "n_inner", "hidden_dim"), 1 << 18),
    "vocabulary": (("vocab_size",), 1 << 22),
    "positions": (("max_position_embeddings", "n_positions", "n_ctx"), 1 << 21),
    "token types": (("type_vocab_size",), 1 << 10),
}
UNSAFE_WEIGHTS = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle", ".h5", ".msgpack")


def locate(spec):
    """The folder of a model path: InputError (66) if it does not exist, ModelError if it is not
    a folder holding config.json."""
    spec = os.fspath(spec)
    if not os.path.exists(spec):
        raise InputError(f"model {spec!r}: no such file or folder; give 'minilm', 'mpnet', 'smollm2', a local model folder or a .gguf file")
    if not os.path.isdir(spec) or not os.path.isfile(os.path.join(spec, "config.json")):
        raise ModelError(f"model {spec!r}: not 'minilm', 'mpnet', 'smollm2', a local model folder with config.json "
                         f"or a .gguf file")
    return spec


def inside(folder, path):
    """path, when its real path (links resolved) stays inside folder; a link out of the model folder
    is refused as a certificate's sidecar is (ModelError naming it).  One layout is known and allowed:
    a Hugging Face cache snapshot (.../models--x/snapshots/<rev>/), whose files link to ../../blobs/."""
    roots = [os.path.realpath(folder)]
    parent = os.path.dirname(os.path.abspath(folder))
    if os.path.basename(parent) == "snapshots":
        roots.append(os.path.realpath(os.path.join(parent, "..", "blobs")))
    real = os.path.realpath(path)
    if not any(os.path.commonpath([r, real]) == r for r in roots):
        raise ModelError(f"{path}: a link out of the model folder (to {os.path.realpath(path)}); certkit reads a "
                         f"model's files only inside its folder")
    return path


def read_json(path, what):
    """A JSON object from a small regular file (ModelError naming the file otherwise)."""
    try:
        size = os.stat(path).st_size
        if not os.path.isfile(path):
            raise ModelError(f"{path}: not a regular file")
        if size > CONFIG_LIMIT:
            raise ModelError(f"{path}: {size} bytes, more than the {CONFIG_LIMIT} a {what} may have")
        with open(path, "rb") as f:
            doc = json.loads(f.read(CONFIG_LIMIT + 1).decode("utf-8"))
    except ModelError:                       # not a regular file, too large: a ValueError, but not bad JSON
        raise
    except OSError as e:
        raise ModelError(f"{path}: cannot read the {what} ({e.strerror})") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise ModelError(f"{path}: not valid JSON ({str(e)[:120]})") from None
    except RecursionError:
        raise ModelError(f"{path}: JSON nested deeper than certkit reads") from None
    if not isinstance(doc, dict):
        raise ModelError(f"{path}: expected a JSON object, got {type(doc).__name__}")
    return doc


def check_config(folder):
    """config.json of a model folder as a dict, its architecture and sizes checked (module docstring)."""
    path = inside(folder, os.path.join(folder, "config.json"))
    config = read_json(path, "config.json")
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in fam.FAMILIES:
        custom = " (it names custom code in auto_map, which certkit never runs)" if "auto_map" in config else ""
        raise ModelError(f"{path}: model_type {model_type!r} is not supported{custom}; certkit reads {fam.SUPPORTED}")
    found = [(quantity, key, config[key]) for quantity, (keys, _) in SIZE_FIELDS.items() for key in keys
             if config.get(key) is not None]
    check_sizes(path, found, {q: " or ".join(keys) for q, (keys, _) in SIZE_FIELDS.items()})
    return config


def check_sizes(path, found, names):
    """{quantity: value} of the sizes found in a model's metadata at path (found: (quantity, field,
    value) for every field present; the first of a quantity counts), once every value is an integer
    in its range (SIZE_FIELDS), layers, heads and width are given (names: the fields looked for), the
    key/value heads divide the heads, the heads divide the width (unless a head dimension is given)
    and the float32 parameters fit in this machine's memory; ModelError naming the field otherwise."""
    sizes = {}
    for quantity, field, value in found:
        top = SIZE_FIELDS[quantity][1]
        if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
            raise ModelError(f"{path}: {field} = {_short(value)}: the {quantity} must be an integer in 1..{top}")
        sizes.setdefault(quantity, (field, value))
    for quantity in ("layers", "heads", "width"):
        if quantity not in sizes:
            raise ModelError(f"{path}: no {quantity} ({names[quantity]}) given")
    (hk, heads), (wk, width) = sizes["heads"], sizes["width"]
    if "key/value heads" in sizes and heads % sizes["key/value heads"][1]:
        kk, kv = sizes["key/value heads"]
        raise ModelError(f"{path}: {hk} = {heads} query heads do not share {kk} = {kv} key/value heads evenly")
    if "head dimension" not in sizes and width % heads:
        raise ModelError(f"{path}: {wk} = {width} is not a multiple of {hk} = {heads} (no head dimension given)")
    values = {q: v for q, (_, v) in sizes.items()}
    need, have = 4 * parameter_estimate(values), physical_memory()
    if have and need > have:
        named = ", ".join(f"{k} = {v}" for k, v in sizes.values())
        raise ModelError(f"{path}: {named} make about {need / 2**30:.1f} GiB of float32 parameters, more than "
                         f"this machine's {have / 2**30:.1f} GiB of memory")
    return values


def parameter_estimate(sizes):
    """About how many parameters a transformer of these sizes holds (embeddings, attention and
    feed-forward weights; biases and norms are negligible): an order of magnitude for the memory check."""
    w = sizes["width"]
    d = sizes.get("head dimension", w // sizes["heads"])
    attention = w * d * (2 * sizes["heads"] + 2 * sizes.get("key/value heads", sizes["heads"]))
    ffn = 3 * w * sizes.get("feed-forward width", 4 * w)
    return sizes.get("vocabulary", 0) * w + sizes.get("positions", 0) * w + sizes["layers"] * (attention + ffn)


def physical_memory():
    """Bytes of physical memory (0 where the system does not say)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def check_weights(folder):
    """The safetensors files a model folder's weights come from (module docstring), each header
    read and validated; ModelError naming the file otherwise."""
    index = os.path.join(folder, "model.safetensors.index.json")
    single = os.path.join(folder, "model.safetensors")
    if os.path.exists(index):
        weight_map = read_json(inside(folder, index), "weight index").get("weight_map")
        if not isinstance(weight_map, dict) or not weight_map:
            raise ModelError(f"{index}: no weight_map object naming the weight files")
        names = sorted(set(weight_map.values()), key=str)
        for name in names:
            if not isinstance(name, str) or not name.endswith(".safetensors") or os.path.basename(name) != name:
                raise ModelError(f"{index}: the weight map names {_short(name)}; certkit reads weights only from "
                                 f"*.safetensors files in the model folder (never pickle files)")
        files = [os.path.join(folder, n) for n in names]
    elif os.path.exists(single):
        files = [single]
    else:
        others = sorted(f for f in os.listdir(folder) if f.endswith(UNSAFE_WEIGHTS))
        hint = f" (found {', '.join(others[:3])}: pickle-based weights, which certkit never loads)" if others else ""
        raise ModelError(f"{folder}: no model.safetensors or model.safetensors.index.json{hint}")
    for path in files:
        check_safetensors(inside(folder, path))
    return files


def check_safetensors(path):
    """The header of one safetensors file, validated by the safetensors library (every tensor's
    dtype, shape and byte range inside the file, the file fully covered)."""
    from safetensors import SafetensorError, safe_open
    if not os.path.isfile(path):
        raise ModelError(f"{path}: missing (named by the weight index) or not a regular file")
    try:
        with safe_open(path, framework="numpy") as f:
            f.keys()
    except (SafetensorError, OSError, ValueError) as e:
        raise ModelError(f"{path}: not a valid safetensors file ({str(e).splitlines()[0][:160]})") from None


def preflight(folder):
    """check_config and check_weights of a model folder: the config dict, once both pass."""
    config = check_config(folder)
    check_weights(folder)
    return config


def _short(value):
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


# ---------------------------------------------------------------- GGUF files

GGUF_LIMIT = 1 << 16             # tensors and metadata entries a GGUF header may declare
GGUF_SIZE_KEYS = {               # quantity -> the key after "<architecture>."
    "layers": "block_count", "heads": "attention.head_count", "key/value heads": "attention.head_count_kv",
    "width": "embedding_length", "head dimension": "attention.key_length",
    "feed-forward width": "feed_forward_length", "positions": "context_length",
}


def is_gguf(spec):
    return isinstance(spec, (str, os.PathLike)) and os.fspath(spec).lower().endswith(".gguf")


GGUF_ARRAY_LIMIT = 1 << 21        # elements of one metadata array (a vocabulary of 2M tokens is beyond any model here)
GGUF_SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}   # type id -> bytes


def scan_gguf_metadata(path, entries):
    """Walk the metadata of a GGUF file (version 2 or 3) before any library reads it: every key and
    string within the file, every array of at most GGUF_ARRAY_LIMIT elements whose bytes the file
    holds, so that a 100 KB file cannot claim an array of 2^40 elements (ModelError naming the key)."""
    size = os.path.getsize(path)
    with open(path, "rb") as f:
        f.seek(24)

        def u(n):
            b = f.read(n)
            if len(b) != n:
                raise ModelError(f"{path}: the GGUF metadata ends early (truncated file)")
            return int.from_bytes(b, "little")

        def string(what):
            n = u(8)
            if n > size - f.tell():
                raise ModelError(f"{path}: {what} claims a string of {n} bytes, more than the file holds")
            return f.read(n)
        for _ in range(entries):
            key = string("a metadata key").decode("utf-8", "replace")[:80]
            kind = u(4)
            kind, count = (u(4), u(8)) if kind == 9 else (kind, 1)          # an array: element type, then count
            if kind == 9 or (kind not in GGUF_SCALAR and kind != 8):
                raise ModelError(f"{path}: metadata {key!r}: value type {kind} is not one certkit reads")
            if count > GGUF_ARRAY_LIMIT or count * GGUF_SCALAR.get(kind, 8) > size - f.tell():
                raise ModelError(f"{path}: metadata {key!r}: an array of {count} elements (certkit reads at most "
                                 f"{GGUF_ARRAY_LIMIT}, and only what the file holds)")
            if kind == 8:
                for _ in range(count):
                    string(f"metadata {key!r}")
            else:
                f.seek(count * GGUF_SCALAR[kind], os.SEEK_CUR)


def check_gguf(path):
    """(architecture, {quantity: value}, {tensor type: count}) of a GGUF file whose header, sizes
    and architecture pass the same checks as a folder's config.json (module docstring); the header
    counts are bounded before the gguf library parses anything."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise InputError(f"model {path!r}: no such file")
    if not os.path.isfile(path):
        raise ModelError(f"{path}: not a regular file")
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:4] != b"GGUF":
        raise ModelError(f"{path}: not a GGUF file (no GGUF magic number)")
    version = int.from_bytes(head[4:8], "little")
    tensors, entries = int.from_bytes(head[8:16], "little"), int.from_bytes(head[16:24], "little")
    if version not in (2, 3) or tensors > GGUF_LIMIT or entries > GGUF_LIMIT:
        raise ModelError(f"{path}: GGUF version {version} with {tensors} tensors and {entries} metadata entries: "
                         f"certkit reads versions 2 and 3 with at most {GGUF_LIMIT} of each")
    scan_gguf_metadata(path, entries)
    from gguf import GGUFReader
    try:
        reader = GGUFReader(path)
        meta = {k: f.contents() for k, f in reader.fields.items() if not k.startswith("tokenizer.ggml.")}
        vocabulary = len(reader.fields["tokenizer.ggml.tokens"].data) if "tokenizer.ggml.tokens" in reader.fields else None
        kinds = {}
        for t in reader.tensors:
            kinds[t.tensor_type.name] = kinds.get(t.tensor_type.name, 0) + 1
    except MemoryError:
        raise ModelError(f"{path}: the GGUF header does not fit in memory") from None
    except Exception as e:                   # the gguf library's own checks: offsets, types, truncation
        raise ModelError(f"{path}: not a valid GGUF file ({str(e).splitlines()[0][:160] if str(e) else type(e).__name__})") from None
    arch = meta.get("general.architecture")
    if not isinstance(arch, str) or arch not in fam.GGUF:
        raise ModelError(f"{path}: general.architecture {_short(arch)} is not supported; certkit reads GGUF files of "
                         f"{', '.join(sorted(fam.GGUF))}")
    found = [(q, f"{arch}.{key}", meta[f"{arch}.{key}"]) for q, key in GGUF_SIZE_KEYS.items()
             if meta.get(f"{arch}.{key}") is not None]
    if vocabulary is not None:
        found.append(("vocabulary", "the count of tokenizer.ggml.tokens", vocabulary))
    sizes = check_sizes(path, found, {q: f"{arch}.{key}" for q, key in GGUF_SIZE_KEYS.items()})
    return arch, sizes, dict(sorted(kinds.items()))

