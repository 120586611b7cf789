"""The causal growth law on real decoder heads (certkit scale --families causal-real): the two
laws are fitted as stated (an exact logarithm and an exact power are recovered, each judged closer
on its own data), and the command certifies, writes and resumes its points."""
import json
import math

import numpy as np
import pytest

pytest.importorskip("scipy")

from certkit.commands import growth  # noqa: E402
from certkit.cli import main  # noqa: E402


def rows_of(ns, f, head="l0-h0"):
    return [{"head": head, "n": n, "lower": f(n), "upper": f(n) + 1} for n in ns]


def test_an_exact_logarithm_and_an_exact_power_are_recovered():
    ns = [64, 128, 256, 512, 1024]
    log = growth.fit(rows_of(ns, lambda n: 2 + 3 * math.log(n)), "lower")
    assert abs(log["log"]["b"] - 3) < 1e-9 and abs(log["log"]["a"] - 2) < 1e-9 and log["log"]["rss"] < 1e-18
    assert log["log"]["rss"] < log["power"]["rss"]
    pw = growth.fit(rows_of(ns, lambda n: 5 * n ** 0.5), "lower")
    assert abs(pw["power"]["p"] - 0.5) < 1e-9 and abs(math.exp(pw["power"]["ln_c"]) - 5) < 1e-9
    assert pw["power"]["rss"] < pw["log"]["rss"] and "closer: power" in growth.verdict(pw)
    assert growth.fit(rows_of(ns[:2], lambda n: n), "lower") is None


def test_the_interval_contains_the_slope_of_noisy_points():
    rng = np.random.default_rng(0)
    ns = [2 ** k for k in range(5, 13)]
    f = growth.fit(rows_of(ns, lambda n: 4 + 2 * math.log(n) + rng.normal(0, 0.3)), "lower")
    lo, hi = f["log"]["ci95"]
    assert lo < 2 < hi and hi - lo < 1


def test_parse_heads():
    assert growth.parse_heads("l7-h1, l18-h8") == [(7, 1), (18, 8)]
    for bad in ("7-1", "l7h1", "", "lx-h1"):
        with pytest.raises(Exception, match="--growth-heads"):
            growth.parse_heads(bad)


def test_scale_causal_real_on_a_small_decoder(tmp_path, capsys, monkeypatch):
    """A tiny random Llama as a GGUF file (its byte tokenizer reads the built-in text): every point
    certified, the csv and the summary written, and a rerun certifies nothing again."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from test_gguf import H, LAYERS, NH, NKV, F, P, V, write_gguf
    torch.manual_seed(4)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=V, hidden_size=H, num_hidden_layers=LAYERS, num_attention_heads=NH, num_key_value_heads=NKV,
        intermediate_size=F, max_position_embeddings=P, initializer_range=0.2, tie_word_embeddings=False))
    path = write_gguf(tmp_path / "t.gguf", {k: v.numpy() for k, v in model.state_dict().items()})
    args = ["scale", "--families", "causal-real", "--model", str(path), "--growth-heads", "l0-h1,l1-h3",
            "--growth-lengths", "12,16,24", "--eps", "1/4", "--out", str(tmp_path / "o"), "--no-plots"]
    assert main(args) == 0, capsys.readouterr().err
    lines = (tmp_path / "o" / "causal-real.csv").read_text().splitlines()
    assert lines[0].startswith("head,layer,head_index,n,") and len(lines) == 1 + 2 * 3
    md = (tmp_path / "o" / "causal-real.md").read_text()
    assert "| l1-h3 | 24 |" in md and "closer:" in md and "What the data support" in md
    calls = []
    monkeypatch.setattr(growth, "task", lambda t: calls.append(t) or [])
    assert main(args) == 0 and calls == []                 # every point read back
    assert (tmp_path / "o" / "causal-real.csv").read_text().splitlines() == lines
    other = [a if a != "1/4" else "1/2" for a in args]         # another eps: nothing is read back
    assert main(other) == 0 and len(calls) == 2 * 3
    assert main(args[:2] + ["causal-real,causal"] + args[3:]) == 64
    assert "runs alone" in capsys.readouterr().err
