"""The causal growth law on real decoder heads (certkit scale --families causal-real): the two
laws are fitted as stated (an exact logarithm and an exact power are recovered, each judged closer
on its own data), and the command certifies, writes and resumes its points."""
import json
import math

import numpy as np
import pytest

pytest.importorskip("scipy")

from certkit.scaling import growth  # noqa: E402
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


@pytest.fixture(scope="module")
def decoder(tmp_path_factory):
    """A tiny random Llama as a GGUF file (its byte tokenizer reads the built-in text)."""
    torch = pytest.importorskip("torch")
    transformers = pytest.importorskip("transformers")
    pytest.importorskip("gguf")
    from gguf_files import H, LAYERS, NH, NKV, F, P, V, write_gguf
    torch.manual_seed(4)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=V, hidden_size=H, num_hidden_layers=LAYERS, num_attention_heads=NH, num_key_value_heads=NKV,
        intermediate_size=F, max_position_embeddings=P, initializer_range=0.2, tie_word_embeddings=False))
    return str(write_gguf(tmp_path_factory.mktemp("dec") / "t.gguf", {k: v.numpy() for k, v in model.state_dict().items()}))


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    """A tiny random BERT folder (2 layers x 4 heads) with MiniLM's tokenizer and 20 positions, so
    of the lengths 12, 16, 24 only 12 and 16 fit it."""
    torch = pytest.importorskip("torch")
    t = pytest.importorskip("transformers")
    ex = pytest.importorskip("certkit.models.extract")
    tok = t.AutoTokenizer.from_pretrained(ex.model_folder("minilm"), local_files_only=True)
    folder = tmp_path_factory.mktemp("enc") / "bert-tiny"
    torch.manual_seed(5)
    t.BertModel(t.BertConfig(vocab_size=tok.vocab_size, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                             intermediate_size=64, initializer_range=0.2, max_position_embeddings=20)
                ).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


def scale_args(model, out, *more, heads="l0-h1,l1-h3", lengths="12,16,24", eps="1/4"):
    return ["scale", "--families", "causal-real", "--model", model, "--growth-heads", heads, "--growth-lengths",
            lengths, "--eps", eps, "--out", str(out), "--no-plots", *more]


def read_csv(path):
    import csv
    with open(path) as f:
        return list(csv.DictReader(f))


def test_scale_causal_real_on_a_small_decoder(tmp_path, capsys, monkeypatch, decoder):
    """Every point certified, the csv and the summary written, and a rerun certifies nothing again."""
    args = scale_args(decoder, tmp_path / "o")
    assert main(args) == 0, capsys.readouterr().err
    lines = (tmp_path / "o" / "causal-real.csv").read_text().splitlines()
    assert lines[0].startswith("model,head,layer,head_index,n,") and len(lines) == 1 + 2 * 3
    assert all(r["model"] == "t" and r["budget"] == "" and r["stopped_on_budget"] == ""
               for r in read_csv(tmp_path / "o" / "causal-real.csv"))
    md = (tmp_path / "o" / "causal-real.md").read_text()
    assert "| l1-h3 | 24 |" in md and "closer:" in md and "What the data support" in md
    assert "budget" not in md and "--growth-budget" not in md and "Encoder" not in md
    calls = []
    monkeypatch.setattr(growth, "task", lambda t: calls.append(t) or [])
    assert main(args) == 0 and calls == []                 # every point read back
    assert (tmp_path / "o" / "causal-real.csv").read_text().splitlines() == lines
    other = [a if a != "1/4" else "1/2" for a in args]         # another eps: nothing is read back
    assert main(other) == 0 and len(calls) == 2 * 3
    assert main(args[:2] + ["causal-real,causal"] + args[3:]) == 64
    assert "runs alone" in capsys.readouterr().err


def test_the_growth_budget_reaches_the_sandwich_and_is_recorded(tmp_path, capsys, monkeypatch, decoder):
    """--growth-budget 0 gets to every point's sandwich, which then stops at once (r >= 1, no upper
    certificate): the rows, the csv and the summary say so, and the command in the summary has it.
    A stopped point is read back only under the same budget; a point no budget stopped, under any."""
    from certkit.search import sandwich as engine
    real, seen = engine.sandwich, []

    def spy(*a, **kw):
        seen.append(kw.get("budget"))
        return real(*a, **kw)
    monkeypatch.setattr(engine, "sandwich", spy)
    out = tmp_path / "b"
    args = scale_args(decoder, out, heads="l1-h3")
    assert main(args + ["--growth-budget", "0"]) == 1          # no upper certificate: not every point complete
    assert seen == [0.0, 0.0, 0.0]
    rows = read_csv(out / "causal-real.csv")
    assert [(r["n"], r["lower"], r["upper"], r["budget"], r["stopped_on_budget"]) for r in rows] == \
        [(n, "1", "", "0.0", "True") for n in ("12", "16", "24")]
    md = (out / "causal-real.md").read_text()
    assert "**3 of 3 budgeted points stopped on it**" in md and "| l1-h3 | 24 | 4.58496 | 1 | 24 (trivial) |" in md
    assert "stopped on the budget |" in md and md.count("| yes |") == 3 and "--growth-budget 0 " in md
    assert "(stopped on the budget)" in capsys.readouterr().out
    assert main(args + ["--growth-budget", "0"]) == 1 and len(seen) == 3      # the same budget: read back
    assert main(args) == 0 and len(seen) == 6 and seen[3:] == [None] * 3      # no budget: certified again
    rows = read_csv(out / "causal-real.csv")
    assert all(r["stopped_on_budget"] == "" and int(r["upper"]) >= int(r["lower"]) > 1 for r in rows)
    assert main(args + ["--growth-budget", "600"]) == 0 and len(seen) == 6    # not stopped: serves any budget
    assert "--growth-budget 600 " in (out / "causal-real.md").read_text()


def test_an_encoder_series_beside_the_decoder(tmp_path, capsys, monkeypatch, decoder, encoder):
    """The encoder's heads certified with no mask at the lengths within its 20 positions, its rows
    marked by model in the csv, named apart in the summary and the plot; the decoder's points of an
    earlier run into the same folder are read back, not certified again."""
    from certkit.certificate import Certificate
    out = tmp_path / "e"
    base = scale_args(decoder, out)
    assert main(base) == 0, capsys.readouterr().err
    decoder_rows = read_csv(out / "causal-real.csv")
    ran = []
    real = growth.task
    monkeypatch.setattr(growth, "task", lambda t: ran.append(t["head"].name) or real(t))
    args = [a for a in base if a != "--no-plots"] + ["--encoder-model", encoder, "--encoder-heads", "l1-h0,l0-h2"]
    assert main(args) == 0, capsys.readouterr().err
    assert sorted(ran) == ["l0-h2", "l0-h2", "l1-h0", "l1-h0"]            # 2 heads x n = 12, 16; no decoder point
    rows = read_csv(out / "causal-real.csv")
    assert rows[:6] == [dict(r) for r in decoder_rows]
    enc = rows[6:]
    assert [(r["model"], r["head"], r["n"]) for r in enc] == \
        [("bert-tiny", h, n) for h in ("l1-h0", "l0-h2") for n in ("12", "16")]
    for r in enc:
        c = Certificate.read(out / r["lower_file"])
        inst = c.doc["instance"]                                  # the kernel checked it on reading
        assert "row_mask" not in inst and len(inst["queries"]) == int(r["n"]) and c.verdict.status == "VERIFIED"
        assert r["lower_file"].startswith("certificates/causal-real/bert-tiny/" + r["head"] + "/n")
    dec = Certificate.read(out / rows[0]["upper_file"])
    assert dec.doc["instance"]["row_mask"] and dec.verdict.status == "VERIFIED"   # the decoder's: causal
    md = (out / "causal-real.md").read_text()
    assert "beside encoder heads (bert-tiny)" in md and "| bert-tiny l0-h2 | 16 |" in md
    assert "Encoder heads: over n = 12..16 (2 lengths)" not in md and "bert-tiny heads: fewer than 3 lengths" in md
    assert "--encoder-model " + encoder in md and (out / "causal-real.png").stat().st_size > 0
    ran.clear()
    assert main(args) == 0 and ran == []                                    # all read back
    (out / enc[1]["upper_file"]).unlink()                  # a point whose certificate is gone is certified again
    assert main(args) == 0 and ran == ["l1-h0"] and (out / enc[1]["upper_file"]).exists()


@pytest.mark.parametrize("extra, needle", [
    (["--encoder-heads", "l0-h1"], "--encoder-heads needs --encoder-model"),
    (["--encoder-model", "ENC", "--encoder-heads", "l0h1"], "--encoder-heads: 'l0h1' is not l<layer>-h<head>"),
    (["--encoder-model", "ENC", "--encoder-heads", "l0-h1,l0-h1"], "--encoder-heads: l0-h1 is given twice"),
    (["--encoder-model", "ENC", "--encoder-heads", "l2-h0"], "--encoder-heads: l2-h0 is not a head of bert-tiny"),
    (["--encoder-model", "DEC"], "--encoder-model DEC: llama is a decoder"),
    (["--encoder-model", "ENC", "--encoder-heads", "l0-h1", "--growth-lengths", "24,32,48"], "no --growth-lengths within its 20 positions"),
    (["--growth-budget", "-5"], "--growth-budget: -5 seconds is outside"),
    (["--growth-budget", "soon"], "--growth-budget"),
    (["--model", "ENC"], "is an encoder; the causal growth law needs a decoder"),
])
def test_bad_growth_options(tmp_path, capsys, decoder, encoder, extra, needle):
    """Exit 64 with a message naming the option, before any point is certified."""
    extra = [encoder if a == "ENC" else decoder if a == "DEC" else a for a in extra]
    needle = needle.replace("DEC", decoder)
    args = scale_args(decoder, tmp_path / "x") + extra
    if "--model" in extra:
        args = scale_args(extra[1], tmp_path / "x")
    assert main(args) == 64
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err, err
    assert not (tmp_path / "x" / "certificates").exists()


@pytest.mark.parametrize("extra, flag", [(["--growth-budget", "10"], "--growth-budget"),
                                         (["--encoder-model", "minilm"], "--encoder-model")])
def test_growth_options_need_causal_real(tmp_path, capsys, extra, flag):
    assert main(["scale", "--families", "causal", "--out", str(tmp_path / "s")] + extra) == 64
    assert f"{flag} needs --families causal-real" in capsys.readouterr().err


def test_a_decoder_as_encoder_exits_cleanly_from_the_shell(tmp_path, decoder):
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "certkit"] + scale_args(decoder, tmp_path / "s", "--encoder-model", decoder),
                       capture_output=True, text=True)
    assert r.returncode == 64 and "is a decoder" in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_what_the_data_support_never_rounds_a_lower_share_up():
    """A head whose certified lower bound is 749 at n = 1000 is at least 0.74 n there, not 0.75 n;
    heads below n/2 somewhere are not called linear, and the sentence says so when none is."""
    rows = [dict(r, label="lin", head="lin", log2_n=math.log2(r["n"])) for r in
            [{"n": 1000, "lower": 749, "upper": 900}, {"n": 2000, "lower": 1600, "upper": 1900},
             {"n": 4000, "lower": 3200, "upper": 3900}]]
    rows += [dict(r, label="half", head="half", log2_n=math.log2(r["n"])) for r in
             [{"n": 1000, "lower": 600, "upper": 900}, {"n": 2000, "lower": 999, "upper": 1900},
              {"n": 4000, "lower": 3200, "upper": 3900}]]
    text = growth.support(rows, growth.laws(rows))
    assert "1 of 2 heads grow like n itself" in text and "lin: c = 0.74" in text and "half" not in text.split(";")[0]
    assert "1 have a certified lower bound that grows more slowly than n" in text and "0.80 n at n = 4000" in text
    assert "none of the 1 heads grows like n itself" in growth.support(rows[3:], growth.laws(rows[3:]))


def test_a_serial_run_on_a_terminal_shows_each_points_search_stages(tmp_path, monkeypatch, decoder):
    """With progress (a terminal) and one process, every point gets a status callback and its search
    reports its stages through it, so a long point is not silent; with workers, no callback crosses
    to the worker processes."""
    from fractions import Fraction
    real, said = growth.task, {}

    def spy(t, say=None):
        texts = said.setdefault(t["head"].n, [])
        return real(t, None if say is None else (lambda text: texts.append(text) or say(text)))
    monkeypatch.setattr(growth, "task", spy)
    rows, _ = growth.points(decoder, [(1, 3)], [12, 16], Fraction(1, 4), str(tmp_path / "s"), progress=True)
    assert sorted(said) == [12, 16] and len(rows) == 2
    for texts in said.values():
        assert texts and all(t.startswith("eps 1/4: ") for t in texts), texts
    said.clear()
    growth.points(decoder, [(1, 3)], [12, 16], Fraction(1, 4), str(tmp_path / "q"), progress=False)
    assert said == {12: [], 16: []}                      # no callback: nothing reported


def test_the_scratch_a_killed_run_left_in_a_point_folder_is_cleared(tmp_path, capsys, decoder):
    """certify's searches keep their scratch under the point's folder (.certkit-work-*); a run killed with kill -9
    leaves it there, and the next run into that --out (holding its lock) removes it."""
    args = scale_args(decoder, tmp_path / "o", heads="l0-h1", lengths="8,12,16")
    assert main(args) == 0, capsys.readouterr().err
    points = [p for p in (tmp_path / "o").rglob("n12") if p.is_dir()]
    assert len(points) == 1
    for f in points[0].iterdir():                   # the point is certified again
        f.unlink() if f.is_file() else None
    stale = points[0] / ".certkit-work-abc123"
    stale.mkdir()
    (stale / "upper.json").write_text("{}")
    assert main(args) == 0, capsys.readouterr().err
    assert not stale.exists()
