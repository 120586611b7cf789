"""Whole-model certification as a product: `certify --model` resumes (a rerun with the same
settings skips every finished head, a Ctrl-C keeps them), refuses to mix runs with other settings
in one folder, and draws the per layer x head figures."""
import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from certkit.cli import main  # noqa: E402
from certkit import driver  # noqa: E402

TOKENS = " ".join(map(str, np.random.default_rng(5).integers(3, 64, 40)))


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    root = tmp_path_factory.mktemp("runs")
    torch.manual_seed(2)
    transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
        intermediate_size=64, max_position_embeddings=64, initializer_range=0.2)).save_pretrained(root / "llama")
    (root / "ids.txt").write_text(TOKENS)
    return root


def run(root, out, *extra):
    return main(["certify", "--model", str(root / "llama"), "--tokens", str(root / "ids.txt"), "--length", "24",
                 "--eps", "1/4", "--peers", "svd", "--out", str(out), *extra])


def counting(monkeypatch, fail_at=None):
    """certify_head counted (and a Ctrl-C raised at call number fail_at)."""
    calls = []
    real = driver.certify_head

    def certify_head(h, *args, **kwargs):
        calls.append(h.name)
        if fail_at is not None and len(calls) == fail_at:
            raise KeyboardInterrupt
        return real(h, *args, **kwargs)
    monkeypatch.setattr(driver, "certify_head", certify_head)
    return calls


def rows_of(out):
    """The summary rows without their timings (the row's and each peer's seconds)."""
    strip = lambda d: {k: strip(v) if isinstance(v, dict) else v for k, v in d.items() if k != "seconds"}
    return [strip(r) for r in json.loads((out / "summary.json").read_text())["rows"]]


def test_a_rerun_skips_finished_heads_and_recomputes_a_missing_one(llama, tmp_path, monkeypatch, capsys):
    out = tmp_path / "o"
    calls = counting(monkeypatch)
    assert run(llama, out) == 0
    assert len(calls) == 8
    first = rows_of(out)
    assert [r["head"] for r in first] == [f"l{l}-h{h}" for l in range(2) for h in range(4)]
    for stem in ("layers-eps1_4.png", "layers-eps1_4.pdf", "layers-eps1_4.svg"):
        assert (out / stem).stat().st_size > 1000
    md = (out / "summary.md").read_text()
    assert "**8 of 8 sandwiches complete**" in md and "upper / SVD k median" in md
    (out / "l1-h2" / "rows.json").unlink()                  # as if the run had stopped inside this head
    calls.clear()
    capsys.readouterr()
    assert run(llama, out) == 0
    assert calls == ["l1-h2"]
    assert "7 of 8 heads already certified" in capsys.readouterr().err
    assert rows_of(out) == first


def test_ctrl_c_keeps_finished_heads_and_the_rerun_completes(llama, tmp_path, monkeypatch):
    out = tmp_path / "o"
    calls = counting(monkeypatch, fail_at=4)
    assert run(llama, out) == 130
    assert [r["head"] for r in rows_of(out)] == ["l0-h0", "l0-h1", "l0-h2"]
    calls = counting(monkeypatch)
    assert run(llama, out) == 0
    assert calls == ["l0-h3", "l1-h0", "l1-h1", "l1-h2", "l1-h3"]
    assert len(rows_of(out)) == 8


def test_a_folder_holding_a_run_with_other_settings_is_refused(llama, tmp_path, capsys):
    out = tmp_path / "o"
    assert run(llama, out, "--layers", "0", "--heads", "0") == 0
    capsys.readouterr()
    assert main(["certify", "--model", str(llama / "llama"), "--tokens", str(llama / "ids.txt"), "--length", "20",
                 "--layers", "0", "--heads", "0", "--eps", "1/4", "--peers", "svd", "--out", str(out)]) == 64
    assert "holds a run with length = 24, not 20" in capsys.readouterr().err
    assert run(llama, out, "--layers", "0", "--heads", "1") == 0      # other heads, same settings: added
    assert [r["head"] for r in rows_of(out)] == ["l0-h1"]


def test_write_atomic_leaves_no_temporary_file_and_the_usual_mode(tmp_path):
    import os
    from certkit.outputs import write_atomic
    write_atomic(str(tmp_path / "a.json"), "{}\n")
    write_atomic(str(tmp_path / "a.json"), "[]\n")
    assert os.listdir(tmp_path) == ["a.json"] and (tmp_path / "a.json").read_text() == "[]\n"
    umask = os.umask(0)
    os.umask(umask)
    assert (tmp_path / "a.json").stat().st_mode & 0o777 == 0o666 & ~umask


def test_a_budget_is_a_setting_and_the_summary_names_the_heads_it_stopped(llama, tmp_path, monkeypatch, capsys):
    out = tmp_path / "o"
    assert run(llama, out, "--layers", "0", "--heads", "0,1", "--budget", "0") == 1     # trivial uppers: a bound missing
    summary = json.loads((out / "summary.json").read_text())
    assert summary["meta"]["budget"] == 0.0 and "--budget 0 " in summary["meta"]["command"]
    for r in summary["rows"]:
        assert (r["lower"], r["upper"], r["budget"], r["stopped_on_budget"], r["width"]) == (1, None, 0.0, True, 24.0)
        assert json.loads((out / r["head"] / "rows.json").read_text())[0]["stopped_on_budget"] is True
        assert r["peers"]["svd"]["note"] == "stopped on the budget"
    assert "**2 of 2 sandwiches stopped on the budget**" in (out / "summary.md").read_text()
    assert "stopped_on_budget" in (out / "summary.csv").read_text().splitlines()[0]
    assert capsys.readouterr().out.count("<= 24 (trivial)") == 2
    assert run(llama, out, "--layers", "0", "--heads", "0,1", "--budget", "5") == 64
    assert "holds a run with budget = 0.0, not 5.0" in capsys.readouterr().err
    assert run(llama, out, "--layers", "0", "--heads", "0,1") == 64
    assert "holds a run with budget = 0.0, not None" in capsys.readouterr().err
    calls = counting(monkeypatch)
    assert run(llama, out, "--layers", "0", "--heads", "0,1", "--budget", "0") == 1     # the same budget: resumed
    assert calls == []
