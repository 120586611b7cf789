"""The one-row registries of the extension points and the lists generated from or checked against them:
model families (certkit/models/families.py FAMILIES: help texts, docs lists, GGUF architectures, the
scale, window and position limit each row states) and compression methods (certkit/compress.py METHODS:
the --method help, docs/api.md's table of spellings)."""
import os
import re
from fractions import Fraction
from types import SimpleNamespace as Config

from certkit import compress
from certkit.kvcache import FORMATS as KV_FORMATS
from certkit.models import families as fam
from certkit.numbers import OverSqrt

import paths

ROOT = str(paths.ROOT)


def text(rel):
    with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
        return " ".join(f.read().split())          # one line: a list may wrap anywhere


# ---------------------------------------------------------------- model families
def test_every_family_is_one_row_of_the_docs_table():
    """docs/models.md, "Families": every row names its families as `Label `model_type``, and names only those."""
    with open(os.path.join(ROOT, "docs", "models.md"), encoding="utf-8") as f:
        section = f.read().split("## Families", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| ") and not r.startswith("| family")]
    named = [m for r in rows for m in re.findall(r"`([a-z_0-9]+)`", r.split(" | ")[0])]
    assert sorted(named) == sorted(fam.FAMILIES), named
    for f in fam.FAMILIES.values():
        assert f"{f.label} `{f.name}`" in section, f.name


def test_the_gguf_architectures_are_the_rows_with_a_gguf_name():
    assert fam.GGUF == {"gpt2": "gpt2", "llama": "llama", "mistral": "mistral", "qwen2": "qwen2", "bloom": "bloom"}
    assert all(fam.FAMILIES[t].decoder for t in fam.GGUF.values())
    assert f"`general.architecture` ({', '.join(fam.GGUF)}: the families with a `gguf` name)" in text("docs/models.md")
    assert f"a llama.cpp GGUF file of an architecture {fam.labels(gguf=True)} (" in text("docs/guide/model-runs.md")


def help_of(command, capsys):
    """`certkit <command> --help` on one line."""
    from certkit.cli import main
    try:
        main([command, "--help"])
    except SystemExit:
        pass
    return " ".join(capsys.readouterr().out.split())


def test_help_texts_and_docs_lists_are_the_registry(capsys):
    guide = text("docs/guide/model-runs.md")
    assert f"encoders {fam.labels(decoder=False)} (MiniLM is a BERT), decoders {fam.labels(decoder=True)} (" in guide
    assert fam.SUPPORTED == f"encoders: {fam.labels(decoder=False)}; decoders: {fam.labels(decoder=True)}"
    helps = {name: help_of(name, capsys) for name in ("certify", "calibrate")}
    assert f"a local Hugging Face folder ({fam.labels()}; weights" in helps["certify"]
    assert f"a GGUF file ({fam.labels(gguf=True)}; dequantised" in helps["certify"]
    assert f"(encoders {fam.labels(decoder=False)}; decoders {fam.labels(decoder=True)})" in helps["calibrate"]


def test_every_family_has_a_test_model():
    """tests/models/test_models.py::configs builds one small random model per row (read as text: no torch here)."""
    with open(os.path.join(ROOT, "tests", "models", "test_models.py"), encoding="utf-8") as f:
        body = f.read().split("def configs():", 1)[1].split("\n\n\n", 1)[0]
    assert re.findall(r'^        "([a-z_0-9]+)": \(', body, re.M) == list(fam.FAMILIES)


def test_rows_state_the_scale_window_and_position_limit():
    """The fields that replaced the per-name branches give what those branches gave."""
    F = fam.FAMILIES
    assert fam.scale(F["bert"], Config(), 3, 64) == OverSqrt(Fraction(1), Fraction(64))
    assert fam.scale(F["llama"], Config(scale_attn_weights=False), 3, 64) == OverSqrt(Fraction(1), Fraction(64))
    gpt2 = Config(scale_attn_weights=False, scale_attn_by_inverse_layer_idx=True)
    assert fam.scale(F["gpt2"], gpt2, 3, 64) == Fraction(1, 4)
    assert fam.scale(F["gpt2"], Config(scale_attn_by_inverse_layer_idx=True), 1, 16) == OverSqrt(Fraction(1, 2), 16)
    qwen = Config(sliding_window=12, layer_types=["full_attention", "sliding_attention"])
    assert [fam.window(F["qwen2"], qwen, l) for l in range(3)] == [None, 12, None]
    assert [fam.window(F["mistral"], qwen, l) for l in range(3)] == [12, 12, 12]
    assert [fam.window(F[n], qwen, 1) for n in ("llama", "gpt2", "bert", "bloom")] == [None] * 4
    assert fam.max_length(F["bert"], Config(max_position_embeddings=512)) == 512
    assert fam.max_length(F["roberta"], Config(max_position_embeddings=514, pad_token_id=1)) == 512
    assert fam.max_length(F["roberta"], Config(max_position_embeddings=514, pad_token_id=None)) == 513
    assert fam.max_length(F["roberta"], Config(max_position_embeddings=514)) == 512
    assert fam.max_length(F["mpnet"], Config(max_position_embeddings=514, pad_token_id=7)) == 512
    assert fam.max_length(F["bloom"], Config(max_position_embeddings=2048)) is None
    assert fam.max_length(F["llama"], Config()) is None
    assert [n for n, f in F.items() if f.interleaved_keys] == ["llama", "mistral"]


# ---------------------------------------------------------------- compression methods
def api_table():
    """docs/api.md's table of method spellings: [(spellings, the rest of the row)]."""
    with open(os.path.join(ROOT, "docs", "api.md"), encoding="utf-8") as f:
        section = f.read().split("| spelling | producer |", 1)[1].split("\n\n", 1)[0]
    rows = [r for r in section.splitlines() if r.startswith("| `")]
    return [(re.findall(r"`([a-z0-9_]+:[^`]*)`", r.split(" | ")[0]), r) for r in rows]


def test_docs_api_table_has_a_row_for_every_method_and_kv_format():
    table = api_table()
    assert {s.split(":")[0] for spellings, _ in table for s in spellings} == set(compress.METHODS)
    kv = {s.split(":")[1] for spellings, _ in table for s in spellings if s.startswith("kv:") and "=" not in s}
    assert kv == set(KV_FORMATS)


def test_every_example_spelling_parses_and_every_row_is_complete(capsys):
    for name, row in compress.METHODS.items():
        assert row.parse is not None or row.cost is not None, name
        assert set(row.required) <= set(row.params) and set(row.defaults) <= set(row.params), name
        assert set(row.params.values()) <= {"int", "text", "indices"}, name
        for example in row.example.split(" | "):
            spelled = re.sub(r" \[(,[^]]*)\]", r"\1", example)          # lowrank:k=16 [,of=logits] -> both
            for spec in (re.sub(r" \[[^]]*\]", "", example), spelled):
                ms = compress.parse_methods(spec)
                assert ms and all(m.family == name for m in ms), spec
    assert compress.methods_help() in help_of("compare", capsys)


def test_the_registry_spells_and_applies_as_before():
    """Settings, costs and parameters of the spellings the tests and the published data use."""
    got = [(m.spec, m.cost, dict(m.params)) for m in compress.parse_methods(
        "kivi:bits=4;evict:window=128,heavy=128;evict:keep=0-3,7;lowrank:k=4..8,of=logits;kv:k=q8_0,v=q4_0;quant")]
    assert got == [("kivi:bits=4,group=32,residual=32", 4, {"bits": 4, "group": 32, "residual": 32}),
                   ("evict:window=128,heavy=128", 256, {"window": 128, "heavy": 128}),
                   ("evict:keep=0-3,7", 5, {"keep": (0, 1, 2, 3, 7)}),
                   ("lowrank:of=logits,k=4", 4, {"k": 4, "of": "logits"}),
                   ("lowrank:of=logits,k=8", 8, {"k": 8, "of": "logits"}),
                   ("kv:k=q8_0,v=q4_0", 6.5, {"k": "q8_0", "v": "q4_0"}),
                   ("quant:int8", 8, {"scheme": "int8"})]
