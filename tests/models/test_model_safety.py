"""A model folder is data, never code: certkit never runs a folder's Python (even when stdin
answers "y"), reads weights only from safetensors files, checks config sizes before anything is
allocated, turns a broken weight file into a one-line error (exit 64, the file named), exits 66
for a missing folder before torch is imported, and creates no --out folder for a run that fails on
its input."""
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from certkit.cli import main  # noqa: E402

from paths import ROOT

TOKENS = " ".join(map(str, np.random.default_rng(0).integers(3, 96, 64)))
EVIL = """import pathlib
pathlib.Path({marker!r}).write_text("the folder's code ran")
"""


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """A tiny random Llama folder saved by transformers itself."""
    folder = tmp_path_factory.mktemp("safe") / "llama"
    torch.manual_seed(0)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=96, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=64)).save_pretrained(folder)
    return folder


def copy_of(llama, tmp_path, name="m"):
    dest = tmp_path / name
    shutil.copytree(llama, dest)
    return dest


def edit_config(folder, **changes):
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(changes)
    (folder / "config.json").write_text(json.dumps(cfg))


def certify(folder, tmp_path, *extra):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(TOKENS)
    return main(["certify", "--model", str(folder), "--tokens", str(tokens), "--length", "12", "--layers", "0",
                 "--heads", "0", "--eps", "1/2", "--peers", "none", "--out", str(tmp_path / "out"), *extra])


def run_cli(args, stdin="y\ny\ny\n", cwd=None):
    """certkit in a fresh process, stdin answering "y" to any question."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "certkit", *map(str, args)], input=stdin, capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=300)


# ---------------------------------------------------------------- never run the folder's code

def plant_code(folder, marker):
    (folder / "evil.py").write_text(EVIL.format(marker=str(marker)))
    (folder / "__init__.py").write_text(EVIL.format(marker=str(marker)))


def test_custom_architecture_is_refused_without_running_its_code(llama, tmp_path):
    folder, marker = copy_of(llama, tmp_path), tmp_path / "MARKER"
    plant_code(folder, marker)
    edit_config(folder, model_type="evil", architectures=["EvilModel"],
                auto_map={"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel"})
    (tmp_path / "t.txt").write_text(TOKENS)
    p = run_cli(["certify", "--model", folder, "--tokens", tmp_path / "t.txt", "--length", 12, "--out", tmp_path / "o"])
    assert p.returncode == 64, p.stderr
    assert "model_type 'evil' is not supported" in p.stderr and "auto_map" in p.stderr
    assert "Traceback" not in p.stderr and not marker.exists() and not (tmp_path / "o").exists()


def test_known_architecture_with_auto_map_loads_the_builtin_class_only(llama, tmp_path):
    """config.json and tokenizer_config.json name custom code for a supported model_type: the
    built-in Llama class is used, the folder's code never imported, stdin's "y" never read."""
    folder, marker = copy_of(llama, tmp_path), tmp_path / "MARKER"
    plant_code(folder, marker)
    edit_config(folder, auto_map={"AutoConfig": "evil.EvilConfig", "AutoModel": "evil.EvilModel",
                                  "AutoModelForCausalLM": "evil.EvilModel"})
    (folder / "tokenizer_config.json").write_text(json.dumps({"auto_map": {"AutoTokenizer": ["evil.EvilTok", None]},
                                                              "tokenizer_class": "EvilTok"}))
    (tmp_path / "t.txt").write_text(TOKENS)
    p = run_cli(["certify", "--model", folder, "--tokens", tmp_path / "t.txt", "--length", 12, "--layers", 0,
                 "--heads", 0, "--eps", "1/2", "--peers", "none", "--out", tmp_path / "o"])
    assert p.returncode == 0, p.stderr
    assert not marker.exists()
    assert json.loads((tmp_path / "o" / "summary.json").read_text())["meta"]["family"] == "llama"


def test_every_transformers_load_passes_trust_remote_code_false():
    """Each from_pretrained and from_config call in certkit says trust_remote_code=False (never left to a prompt)."""
    calls = []
    for path in (ROOT / "certkit").rglob("*.py"):
        text = path.read_text()
        for m in re.finditer(r"\.(?:from_pretrained|from_config)\(", text):
            depth, i = 1, m.end()
            while depth:
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            calls.append((path.name, text[m.end():i]))
    assert calls, "no from_pretrained call found: the scan is broken"
    missing = [name for name, args in calls if "trust_remote_code=False" not in args]
    assert not missing, f"from_pretrained without trust_remote_code=False in {missing}"


# ---------------------------------------------------------------- weights: safetensors only, validated

def test_an_index_naming_a_pickle_file_is_refused(llama, tmp_path, capsys):
    folder = copy_of(llama, tmp_path)
    (folder / "model.safetensors").rename(folder / "model-00001-of-00001.safetensors")
    (folder / "pytorch_model.bin").write_bytes(b"not to be unpickled")
    weight_map = {"model.embed_tokens.weight": "pytorch_model.bin", "lm_head.weight": "model-00001-of-00001.safetensors"}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"metadata": {}, "weight_map": weight_map}))
    assert certify(folder, tmp_path) == 64
    err = capsys.readouterr().err
    assert "'pytorch_model.bin'" in err and "*.safetensors" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_an_index_naming_a_file_outside_the_folder_is_refused(llama, tmp_path, capsys):
    folder = copy_of(llama, tmp_path)
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": {"x": "../model.safetensors"}}))
    assert certify(folder, tmp_path) == 64
    assert "'../model.safetensors'" in capsys.readouterr().err


def test_pickle_weights_only_are_refused(llama, tmp_path, capsys):
    folder = copy_of(llama, tmp_path)
    (folder / "model.safetensors").rename(folder / "pytorch_model.bin")
    assert certify(folder, tmp_path) == 64
    assert "pytorch_model.bin: pickle-based weights, which certkit never loads" in capsys.readouterr().err


@pytest.mark.parametrize("damage", ["truncated", "garbage", "empty", "huge header"])
def test_a_broken_weight_file_is_a_clear_error(llama, tmp_path, capsys, damage):
    folder = copy_of(llama, tmp_path)
    w = folder / "model.safetensors"
    raw = w.read_bytes()
    w.write_bytes({"truncated": raw[:len(raw) // 2], "garbage": bytes(range(256)) * 40, "empty": b"",
                   "huge header": (10 ** 15).to_bytes(8, "little") + raw[8:]}[damage])
    assert certify(folder, tmp_path) == 64
    err = capsys.readouterr().err
    assert f"{w}: not a valid safetensors file" in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_weights_that_do_not_match_the_config_are_a_clear_error(llama, tmp_path, capsys):
    folder = copy_of(llama, tmp_path)
    edit_config(folder, intermediate_size=48)
    assert certify(folder, tmp_path) == 64
    err = capsys.readouterr().err
    assert "cannot load the weights" in err and "Traceback" not in err


# ---------------------------------------------------------------- config sizes before allocation

@pytest.mark.parametrize("field, value, needle", [
    ("num_attention_heads", 0, "num_attention_heads = 0: the heads must be an integer in 1..1024"),
    ("hidden_size", 10 ** 9, "hidden_size = 1000000000: the width must be an integer in 1..65536"),
    ("vocab_size", 10 ** 12, "vocab_size = 1000000000000: the vocabulary must be an integer in 1..4194304"),
    ("num_hidden_layers", 10 ** 6, "num_hidden_layers = 1000000: the layers must be an integer in 1..1024"),
    ("max_position_embeddings", -5, "max_position_embeddings = -5: the positions"),
    ("num_key_value_heads", 3, "num_attention_heads = 4 query heads do not share num_key_value_heads = 3"),
    ("num_attention_heads", "4", "num_attention_heads = '4': the heads must be an integer"),
    ("hidden_size", 30, "hidden_size = 30 is not a multiple of num_attention_heads = 4"),
    ("intermediate_size", 1 << 18, "GiB of float32 parameters, more than this machine's"),
])
def test_config_sizes_are_checked_before_anything_is_allocated(llama, tmp_path, capsys, field, value, needle):
    folder = copy_of(llama, tmp_path)
    more = {"intermediate_size": {"vocab_size": 1 << 22, "num_hidden_layers": 1024},
            "hidden_size": {"head_dim": None}}.get(field, {})
    edit_config(folder, **{field: value}, **more)
    assert certify(folder, tmp_path) == 64
    err = capsys.readouterr().err
    assert needle in err and "config.json" in err and "Traceback" not in err, err
    assert not (tmp_path / "out").exists()


def test_gpt2_style_field_names_are_checked_too(tmp_path, capsys):
    folder = tmp_path / "g"
    transformers.GPT2Model(transformers.GPT2Config(vocab_size=96, n_embd=32, n_layer=1, n_head=4,
                                                   n_positions=64)).save_pretrained(folder)
    edit_config(folder, n_head=0)
    assert certify(folder, tmp_path) == 64
    assert "n_head = 0: the heads must be an integer in 1..1024" in capsys.readouterr().err


def test_a_config_that_is_not_json_is_a_clear_error(llama, tmp_path, capsys):
    folder = copy_of(llama, tmp_path)
    (folder / "config.json").write_text("{not json")
    assert certify(folder, tmp_path) == 64
    assert "config.json: not valid JSON" in capsys.readouterr().err


# ---------------------------------------------------------------- input failures create nothing

def test_a_missing_model_folder_exits_66_before_torch_is_imported(tmp_path):
    code = ("import sys; from certkit.cli import main; "
            f"c = main(['certify', '--model', {str(tmp_path / 'nope')!r}, '--out', {str(tmp_path / 'o')!r}]); "
            "print(c, 'torch' in sys.modules, 'transformers' in sys.modules)")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                       env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert p.stdout.split() == ["66", "False", "False"], (p.stdout, p.stderr)
    assert "no such file or folder" in p.stderr and not (tmp_path / "o").exists()


def test_a_run_that_fails_on_its_input_creates_no_out_folder(llama, tmp_path, capsys):
    tokens = tmp_path / "short.txt"
    tokens.write_text("5 6 7")
    code = main(["certify", "--model", str(llama), "--tokens", str(tokens), "--length", "12",
                 "--out", str(tmp_path / "out" / "deeper")])
    assert code == 64 and "too short" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def test_an_out_path_that_cannot_be_a_folder_is_refused_before_loading(llama, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    assert main(["certify", "--model", str(llama), "--out", str(tmp_path / "file" / "sub")]) == 73
    assert "is not a writable folder" in capsys.readouterr().err


def test_calibrate_on_a_broken_folder_creates_no_out_folder(llama, tmp_path, capsys):
    folder = copy_of(llama, tmp_path)
    edit_config(folder, model_type="bert", num_attention_heads=0)
    assert main(["calibrate", "--model", str(folder), "--lengths", "16", "--out", str(tmp_path / "cal")]) == 64
    assert "num_attention_heads = 0" in capsys.readouterr().err and not (tmp_path / "cal").exists()
