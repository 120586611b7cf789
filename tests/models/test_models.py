"""Your own model: heads of every supported family captured from a local folder (or a
model object in memory) exactly as the model's eager attention uses them, checked against the
model's own attention probabilities (<= 2e-6 in float32, <= 1e-12 in float64), with the row masks,
grouped-query key heads, position biases and scales each family's code implies; the input paths
(--text, --tokens) and their errors; and `certkit certify --model` end to end.

The models are SMALL and randomly initialised with transformers' own config classes, saved with
save_pretrained into a temporary folder and loaded through the same local-folder path a user
takes.  They have no tokenizer (none can be fetched offline), so they are fed token ids; the text
path is tested on MiniLM's real folder and on a random BERT folder given MiniLM's tokenizer."""
import json
from fractions import Fraction

import numpy as np
import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
ex = pytest.importorskip("certkit.models.extract")

from certkit.cli import main  # noqa: E402
from certkit.errors import UserError  # noqa: E402
from certkit.head import Head, RowMask  # noqa: E402
from certkit.choices import check  # noqa: E402
from certkit.models import capturing, families, heads_from_model  # noqa: E402
from certkit.numbers import OverSqrt  # noqa: E402

V, HIDDEN, LAYERS, HEADS, D = 96, 32, 2, 4, 8
COMMON = dict(vocab_size=V, hidden_size=HIDDEN, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
              intermediate_size=64, initializer_range=0.2)      # 0.2: attention far from uniform


def configs():
    """(family, config, model class): one small random model per family, GQA where the family has
    it, a sliding window shorter than the length for Mistral (every layer) and Qwen2 (layer 1)."""
    t = transformers
    return {
        "bert": (t.BertConfig(**COMMON, max_position_embeddings=64), t.BertModel),
        "roberta": (t.RobertaConfig(**COMMON, max_position_embeddings=66), t.RobertaModel),
        "distilbert": (t.DistilBertConfig(vocab_size=V, dim=HIDDEN, n_layers=LAYERS, n_heads=HEADS, hidden_dim=64,
                                          max_position_embeddings=64, initializer_range=0.2), t.DistilBertModel),
        "mpnet": (t.MPNetConfig(**COMMON, max_position_embeddings=66), t.MPNetModel),
        "gpt2": (t.GPT2Config(vocab_size=V, n_embd=HIDDEN, n_layer=LAYERS, n_head=HEADS, n_positions=64,
                              initializer_range=0.2, scale_attn_by_inverse_layer_idx=True), t.GPT2LMHeadModel),
        "gpt_neox": (t.GPTNeoXConfig(**COMMON, max_position_embeddings=64), t.GPTNeoXForCausalLM),
        "llama": (t.LlamaConfig(**COMMON, num_key_value_heads=2, max_position_embeddings=64), t.LlamaForCausalLM),
        "mistral": (t.MistralConfig(**COMMON, num_key_value_heads=2, max_position_embeddings=64, sliding_window=12),
                    t.MistralForCausalLM),
        "qwen2": (t.Qwen2Config(**COMMON, num_key_value_heads=1, max_position_embeddings=64, use_sliding_window=True,
                                sliding_window=12, max_window_layers=1), t.Qwen2ForCausalLM),
        "bloom": (t.BloomConfig(vocab_size=V, hidden_size=HIDDEN, n_layer=LAYERS, n_head=HEADS, initializer_range=0.2),
                  t.BloomForCausalLM),
    }


FAMILIES = list(configs())
KV = {"llama": 2, "mistral": 2, "qwen2": 1}
WINDOW = {("mistral", 0): 12, ("mistral", 1): 12, ("qwen2", 1): 12}


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("models")
    out = {}
    for name, (config, cls) in configs().items():
        torch.manual_seed(0)
        cls(config).save_pretrained(root / name)
        out[name] = str(root / name)
    return out


TOKENS = np.random.default_rng(0).integers(3, V, 200)


@pytest.mark.parametrize("name", FAMILIES)
def test_every_family_reconstructs_from_its_folder(folders, name):
    """The Head rebuilt from the captured Q, K (after RoPE: any other Q, K would miss the model's
    probabilities by far more than 1e-12), scale, bias and mask matches the model's own attention."""
    hs = heads_from_model(folders[name], tokens=TOKENS, length=40)
    assert len(hs) == LAYERS * HEADS and all(isinstance(h, Head) for h in hs)
    assert max(h.provenance["reconstruction_max_abs_diff"] for h in hs) <= 2e-6
    hs64 = heads_from_model(folders[name], tokens=TOKENS, length=40, dtype="float64")
    assert max(h.provenance["reconstruction_max_abs_diff"] for h in hs64) <= 1e-12
    decoder = families.FAMILIES[name].decoder
    for h in hs:
        p = h.provenance
        l, i = p["layer"], p["head"]
        assert h.name == f"l{l}-h{i}" and (h.n, h.N, h.d) == (40, 40, D)
        assert set(p) == {"model", "family", "layer", "head", "kv_head", "length", "multiplier", "text_sha256",
                          "reconstruction_max_abs_diff", "key_layout"}
        assert p["key_layout"] == ("llama.cpp-rope" if name in ("llama", "mistral") else "hf")
        assert p["family"] == name and p["length"] == 40 and p["multiplier"] == "1" and p["model"] == name
        assert p["kv_head"] == i // (HEADS // KV.get(name, HEADS))
        c = Fraction(1, l + 1) if name == "gpt2" else Fraction(1)          # GPT-2: scale_attn_by_inverse_layer_idx
        assert h.beta == OverSqrt(c, Fraction(D))
        assert (h.bias is not None) == (name in ("mpnet", "bloom"))
        if not decoder:
            assert h.mask is None
        else:
            w = WINDOW.get((name, l))
            assert h.mask == (RowMask(0, w) if w else RowMask(0))
            A = h.attention()
            assert not A[np.triu_indices(40, 1)].any()                      # masked entries exactly 0
            if w:
                assert A[20, 20 - w] == 0 and A[20, 20 - w + 1] > 0


@pytest.mark.parametrize("name", FAMILIES)
def test_values_and_output_projection_rebuild_the_attention_block(folders, name):
    """Each head carries its values V and its slice W of the output projection: concatenated over the
    heads, A_h V_h is what the model feeds its output projection, and sum_h A_h V_h W_h (+ the bias) is
    what that projection returns, for every family (float64 models; to 1e-5 relative, since the decoders'
    eager code takes the softmax in float32 outside certkit's capture: a wrong head order, value head or
    orientation of W would be off by O(1))."""
    from certkit.models.extract import prepare
    model, _, _ = prepare(folders[name], dtype="float64")      # one model for the heads and for the hooks
    hs = heads_from_model(model, tokens=TOKENS, length=40, dtype="float64")
    seen = {}
    proj = list(families.FAMILIES[name].output(model.base_model))
    hooks = [m.register_forward_hook(lambda m_, a, o, l=l: seen.__setitem__(l, (a[0][0].double().numpy(),
                                                                                 o[0].double().numpy())))
             for l, m in enumerate(proj)]
    with torch.no_grad():
        model(input_ids=torch.tensor([list(TOKENS[:40])]), **({"use_cache": False} if families.FAMILIES[name].decoder else {}))
    for hk in hooks:
        hk.remove()
    for l in range(LAYERS):
        heads = sorted((h for h in hs if h.provenance["layer"] == l), key=lambda h: h.provenance["head"])
        assert all(h.values is not None and h.projection is not None for h in heads)
        x, y = seen[l]
        ctx = np.concatenate([h.attention() @ h.values for h in heads], axis=1)
        assert np.max(np.abs(ctx - x)) <= 1e-5 * max(1.0, np.max(np.abs(x)))
        bias = getattr(proj[l], "bias", None)
        out = sum(h.attention() @ h.values @ h.projection for h in heads) + (0 if bias is None else bias.detach().double().numpy())
        assert np.max(np.abs(out - y)) <= 1e-5 * max(1.0, np.max(np.abs(y)))


def test_reconstruction_is_checked_layer_by_layer_in_row_blocks(folders, monkeypatch):
    """capture() checks each head against the model's probabilities while the model runs, in row
    blocks; the result equals max |head.attention() - P| with P the attentions transformers itself
    returns (output_attentions=True), for every layer and head, blocks of 3 rows and a last short one."""
    import certkit.head
    monkeypatch.setattr(certkit.head, "BLOCKED", 4 * 3 * 40)            # 3 rows per block, 40 = 3 x 13 + 1
    model, _, info = ex.load(folders["llama"])
    ids = [int(t) for t in TOKENS[:40]]
    c = ex.capture(model, info, ids)
    assert "probs" not in c and c["errors"].shape == (LAYERS, HEADS)
    with torch.no_grad():
        P = model(input_ids=torch.tensor([ids]), use_cache=False, output_attentions=True).attentions
    for i, l in enumerate(c["layers"]):
        for h in range(HEADS):
            expected = np.max(np.abs(ex.head(c, l, h).attention() - P[l][0, h].numpy()))
            assert c["errors"][i, h] == expected and 0 < expected <= 2e-6


def test_reconstruction_sees_a_difference_in_the_last_row():
    rng = np.random.default_rng(2)
    h = Head.from_arrays(rng.normal(size=(7, 3)), rng.normal(size=(5, 3)), 1)
    P = torch.tensor(h.attention())
    assert ex.reconstruction_diff(h, P) == 0.0
    P[6, 4] += 0.25
    assert ex.reconstruction_diff(h, P) == pytest.approx(0.25, abs=1e-15)


@pytest.mark.parametrize("name", ["llama", "mpnet", "bloom"])
def test_capture_keeps_no_probabilities(folders, monkeypatch, name):
    """When a block of probabilities arrives, the blocks before it are already free: certkit keeps
    no reference to them (the memory of a capture is one block of probabilities plus Q and K)."""
    import weakref
    seen, recording = [], capturing.recording

    def watching(model, info, want, on_layer, on_probs):
        def on(l, rows, P):
            assert all(ref() is None for ref in seen), f"layer {l}: earlier probabilities are still held"
            seen.append(weakref.ref(P))
            on_probs(l, rows, P)
        return recording(model, info, want, on_layer, on)
    monkeypatch.setattr(capturing, "recording", watching)
    hs = heads_from_model(folders[name], tokens=TOKENS, length=24)
    assert len(seen) == LAYERS and len(hs) == LAYERS * HEADS


@pytest.mark.parametrize("name", ["gpt2", "llama", "mistral"])
def test_attention_runs_in_row_blocks(folders, monkeypatch, name):
    """With ROW_BLOCK below H x n x n, each layer's eager attention runs on blocks of query rows
    (the additive mask sliced with them): the same heads as one call per layer, every row checked
    against the model's probabilities (float64: <= 1e-12, so the causal and sliding-window masks
    were sliced with their rows), and the model's own eager function called once per block."""
    import importlib
    module = importlib.import_module(f"transformers.models.{name}.modeling_{name}")
    calls = []
    orig = module.eager_attention_forward

    def counting(mod, query, *args, **kwargs):
        calls.append(query.shape[2])
        return orig(mod, query, *args, **kwargs)
    monkeypatch.setattr(module, "eager_attention_forward", counting)
    one = heads_from_model(folders[name], tokens=TOKENS, length=40, dtype="float64")
    assert calls == [40] * LAYERS
    calls.clear()
    monkeypatch.setattr(capturing, "ROW_BLOCK", HEADS * 7 * 40)            # 7 rows a call: 40 = 5 x 7 + 5
    blocks = heads_from_model(folders[name], tokens=TOKENS, length=40, dtype="float64")
    assert calls == [7, 7, 7, 7, 7, 5] * LAYERS
    assert max(h.provenance["reconstruction_max_abs_diff"] for h in blocks) <= 1e-12
    for a, b in zip(one, blocks):
        assert a.name == b.name and a.mask == b.mask and a.beta == b.beta
        assert np.allclose(a.queries, b.queries, rtol=0, atol=1e-12) and np.allclose(a.keys, b.keys, rtol=0, atol=1e-12)


def test_capture_reports_each_layer_once_when_all_its_rows_are_checked(folders, monkeypatch):
    monkeypatch.setattr(capturing, "ROW_BLOCK", HEADS * 7 * 40)
    model, _, info = ex.load(folders["qwen2"])
    done = []
    c = ex.capture(model, info, [int(t) for t in TOKENS[:40]], layers=[1, 0], progress=done.append)
    assert done == [0, 1] and c["layers"] == [0, 1]


def test_grouped_query_heads_share_their_key_head(folders):
    hs = heads_from_model(folders["llama"], tokens=TOKENS, length=24, layers=[1])
    K = {h.provenance["head"]: h.keys for h in hs}
    assert np.array_equal(K[0], K[1]) and np.array_equal(K[2], K[3]) and not np.array_equal(K[0], K[2])


def test_alibi_is_the_logit_bias(folders):
    """BLOOM's ALiBi: slope_h x key position, the same on every row (a key-only bias)."""
    (h,) = heads_from_model(folders["bloom"], tokens=TOKENS, length=16, layers=[0], heads=[1])
    slope = 2.0 ** -4                                   # 4 heads: slopes 2^-2, 2^-4, 2^-6, 2^-8
    assert np.array_equal(h.bias, np.tile(slope * np.arange(16.0), (16, 1)))


def test_in_memory_model_equals_its_folder_and_is_left_unchanged(folders):
    model = transformers.AutoModelForCausalLM.from_pretrained(folders["qwen2"], attn_implementation="sdpa")
    model.train()
    a = heads_from_model(model, tokens=TOKENS, length=24, layers=[1], heads=[0, 3])
    b = heads_from_model(folders["qwen2"], tokens=TOKENS, length=24, layers=[1], heads=[0, 3])
    assert [h.name for h in a] == ["l1-h0", "l1-h3"]
    for x, y in zip(a, b):
        assert np.array_equal(x.queries, y.queries) and np.array_equal(x.keys, y.keys) and x.mask == y.mask
    c = heads_from_model(model, tokens=TOKENS, length=24, layers=[1], heads=[0], dtype="float64")
    assert c[0].provenance["reconstruction_max_abs_diff"] <= 1e-12
    assert model.training and model.config._attn_implementation == "sdpa" and model.dtype == torch.float32


def test_multiplier_and_gpt2_scale_without_sqrt(tmp_path):
    t = transformers
    torch.manual_seed(1)
    t.GPT2Model(t.GPT2Config(vocab_size=V, n_embd=HIDDEN, n_layer=2, n_head=HEADS, n_positions=64,
                             scale_attn_weights=False, initializer_range=0.05)).save_pretrained(tmp_path / "g")
    hs = heads_from_model(str(tmp_path / "g"), tokens=TOKENS, length=20, heads=[0], multiplier="1/2")
    assert [h.beta for h in hs] == [Fraction(1, 2), Fraction(1, 2)]          # scale 1, times m = 1/2
    assert [h.name for h in hs] == ["l0-h0-m1_2", "l1-h0-m1_2"] and hs[0].provenance["multiplier"] == "1/2"
    assert max(h.provenance["reconstruction_max_abs_diff"] for h in hs) <= 2e-6   # measured at m = 1


def test_a_mask_other_than_the_familys_is_refused(folders, monkeypatch):
    monkeypatch.setattr(families, "window", lambda f, config, layer: None)
    with pytest.raises(ex.ModelError, match="attention mask lets query"):
        heads_from_model(folders["mistral"], tokens=TOKENS, length=20)


def test_unsupported_architecture_names_the_families(tmp_path):
    t = transformers
    t.T5Config(vocab_size=V, d_model=32, num_layers=1, num_heads=2, d_kv=8, d_ff=32).save_pretrained(tmp_path / "t5")
    with pytest.raises(ex.ModelError) as e:
        heads_from_model(str(tmp_path / "t5"), tokens=TOKENS)
    assert "'t5' is not supported" in str(e.value) and "Llama" in str(e.value) and "BLOOM" in str(e.value)
    assert isinstance(e.value, UserError)


def test_bad_inputs_name_the_value(folders):
    f = folders["llama"]
    for kw, msg in [({"tokens": TOKENS[:10], "length": 20}, "too short: 10 token ids"),
                    ({"tokens": [], "length": 20}, "no token ids"),
                    ({"tokens": [5, V + 3] * 20, "length": 20}, f"token id {V + 3} at position 1"),
                    ({"tokens": TOKENS, "length": 65}, "above the maximum of llama, 64 positions"),
                    ({"tokens": TOKENS, "layers": [2]}, "layers: 2 is out of range 0..1"),
                    ({"text": "some text"}, "no tokenizer"),
                    ({"tokens": TOKENS, "dtype": "float16"}, "dtype")]:
        with pytest.raises(UserError, match=msg):
            heads_from_model(f, **kw)


@pytest.fixture(scope="module")
def minilm_tokenizer():
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(ex.model_folder("minilm"), local_files_only=True)


def test_text_through_a_saved_tokenizer(tmp_path, minilm_tokenizer):
    """A random BERT folder given MiniLM's tokenizer (vocab_size must match it): windows of the
    text framed by the tokenizer's own special tokens."""
    t = transformers
    torch.manual_seed(2)
    folder = tmp_path / "bert-tok"
    t.BertModel(t.BertConfig(**dict(COMMON, vocab_size=minilm_tokenizer.vocab_size), max_position_embeddings=64)
                ).save_pretrained(folder)
    minilm_tokenizer.save_pretrained(folder)
    txt = ex.builtin_text()[0][:5000]
    a = heads_from_model(str(folder), text=txt, length=32, layers=[0], heads=[0])
    b = heads_from_model(str(folder), text=txt, length=32, layers=[0], heads=[0], window=1)
    assert a[0].provenance["text_sha256"] == ex.sha256_of(txt) and not np.array_equal(a[0].queries, b[0].queries)
    _, tok, info = ex.load(str(folder))
    ids, _, off = ex.inputs(tok, info, txt, None, 32, 1)
    assert ids[0] == tok.cls_token_id and ids[-1] == tok.sep_token_id and off == 30
    with pytest.raises(UserError, match="too short"):
        heads_from_model(str(folder), text="two words", length=32)


def test_token_files(tmp_path):
    (tmp_path / "t.txt").write_text("1, 2 3\n4,5")
    np.save(tmp_path / "t.npy", np.arange(7, dtype=np.int32))
    assert ex.read_tokens_file(tmp_path / "t.txt").tolist() == [1, 2, 3, 4, 5]
    assert ex.read_tokens_file(str(tmp_path / "t.npy")).tolist() == list(range(7))
    (tmp_path / "bad.txt").write_text("1 2 three")
    with pytest.raises(UserError, match="'three' is not an integer"):
        ex.read_tokens_file(tmp_path / "bad.txt")


# ---------------------------------------------------------------- certkit certify --model

def cli(*args):
    return main(["certify", *map(str, args)])


def test_cli_certify_model_end_to_end(folders, tmp_path, capsys):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(" ".join(map(str, TOKENS)))
    out = tmp_path / "out"
    code = cli("--model", folders["bert"], "--tokens", tokens, "--length", 24, "--layers", "1", "--heads", "0,3",
               "--eps", "1/4,1/2", "--peers", "svd", "--out", out)
    err = capsys.readouterr().err
    assert code == 0, err
    s = json.loads((out / "summary.json").read_text())
    assert s["meta"]["family"] == "bert" and s["meta"]["length"] == 24 and s["meta"]["reconstruction_max_abs_diff"] <= 2e-6
    assert [(r["layer"], r["head_index"], r["eps"]) for r in s["rows"]] == \
        [(1, 0, "1/4"), (1, 0, "1/2"), (1, 3, "1/4"), (1, 3, "1/2")]
    for r in s["rows"]:
        assert 1 <= r["lower"] <= r["upper"] <= 24 and r["visible_dimension"] <= D and r["peers"]["svd"]["k"] >= r["upper"]
        for key in ("lower_file", "upper_file"):
            v = check(str(out / r[key]))
            assert v.status == "VERIFIED", v.line()
        doc = json.loads((out / r["upper_file"]).read_text())
        assert doc["provenance"]["model"] == "bert" and doc["provenance"]["layer"] == 1
    assert "| 1 | 3 | 3 | 1 | 1/sqrt(8) |" in (out / "summary.md").read_text()


def test_cli_certify_minilm_on_a_text_file(tmp_path, capsys):
    txt = tmp_path / "mine.txt"
    txt.write_text(ex.builtin_text()[0][20000:24000])
    code = cli("--model", "minilm", "--text", txt, "--length", 32, "--layers", 0, "--heads", 2, "--eps", "1/4",
               "--peers", "none", "--out", tmp_path / "o")
    assert code == 0, capsys.readouterr().err
    s = json.loads((tmp_path / "o" / "summary.json").read_text())
    (row,) = s["rows"]
    assert s["meta"]["input"] == "--text mine.txt" and row["beta"] == "1/sqrt(32)" and row["mask"] is None
    assert row["reconstruction_max_abs_diff"] <= 2e-6 and row["lower"] <= row["upper"]


def test_cli_certify_decoder(folders, tmp_path, capsys):
    """A decoder head's certificates state its row mask (format 1.1), never the unmasked matrix."""
    tokens = tmp_path / "t.npy"
    np.save(tokens, TOKENS)
    out = tmp_path / "out"
    code = cli("--model", folders["mistral"], "--tokens", tokens, "--length", 20, "--layers", 1, "--heads", 0,
               "--eps", "1/4", "--peers", "none", "--out", out)
    err = capsys.readouterr().err
    assert code == 0, err
    (row,) = json.loads((out / "summary.json").read_text())["rows"]
    assert row["mask"] == "window(i, 12)"
    for key in ("lower_file", "upper_file"):
        assert check(str(out / row[key])).status == "VERIFIED"
        assert "row_mask" in (out / row[key]).read_text()


@pytest.mark.parametrize("args, needle, code", [
    (["--tokens", "/nonexistent/t.txt"], "--tokens /nonexistent/t.txt: no such file", 66),
    (["--text", "EMPTY"], "the file is empty", 64),
    (["--text", "TEXT"], "no tokenizer", 64),
    (["--tokens", "TOKENS", "--length", "65"], "--length 65: above the maximum", 64),
    (["--tokens", "TOKENS", "--length", "60"], "too short: 50 token ids", 64),
    (["--tokens", "TOKENS", "--text", "TEXT"], "not both", 64),
    (["--tokens", "TOKENS", "--heads", "7"], "--heads: 7 is out of range 0..3", 64),
    (["--tokens", "TOKENS", "--multipliers", "0"], "--multipliers: 0 is not > 0", 64),
    (["--tokens", "TOKENS", "--synthetic", "gaussian"], "give no HEAD files", 64),
])
def test_cli_certify_model_bad_input(folders, tmp_path, capsys, args, needle, code):
    (tmp_path / "empty.txt").write_text("  \n")
    (tmp_path / "text.txt").write_text("a text")
    (tmp_path / "tokens.txt").write_text(" ".join(map(str, TOKENS[:50])))
    subst = {"EMPTY": tmp_path / "empty.txt", "TEXT": tmp_path / "text.txt", "TOKENS": tmp_path / "tokens.txt"}
    got = cli("--model", folders["gpt2"], *[subst.get(a, a) for a in args], "--out", tmp_path / "o")
    err = capsys.readouterr().err
    assert got == code and needle in err and "Traceback" not in err, (got, err)


def test_cli_unsupported_folder_and_options_without_model(tmp_path, capsys):
    assert cli("--model", tmp_path, "--out", tmp_path / "o") == 64
    assert "not 'minilm', 'mpnet', 'smollm2', a local model folder" in capsys.readouterr().err
    assert cli("--synthetic", "gaussian", "--length", 64, "--out", tmp_path / "o") == 64
    assert "--length needs --model" in capsys.readouterr().err


def test_calibrate_a_decoder_folder(folders, tmp_path, capsys):
    """calibrate --model on a decoder folder, as a user runs it: the heads keep their causal mask,
    r_exact is the masked visible dimension (docs/mathematics.md §4.5: at L = 8 with d_head = 8 only
    rows 1..7 see two keys, so r_M <= 6 where the unmasked r is 7), R_sym is not applicable (a dash
    with its legend, no chain certificate attempted), and every certificate is VERIFIED."""
    from certkit import geometry
    np.save(tmp_path / "t.npy", TOKENS)
    out = tmp_path / "cal"
    code = main(["calibrate", "--model", folders["llama"], "--tokens", str(tmp_path / "t.npy"), "--layers", "1",
                 "--heads", "0,3", "--lengths", "8,16", "--multipliers", "1,2", "--eps", "1/4", "--out", str(out)])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "R_sym: - (not applicable) in 8 configurations: row-masked heads" in printed.out
    rows = json.loads((out / "results.json").read_text())["rows"]
    assert len(rows) == 8 and {r["mask"] for r in rows} == {"causal(i)"}
    for L in (8, 16):
        for h in heads_from_model(folders["llama"], tokens=TOKENS, length=L, layers=[1], heads=[0, 3]):
            masked = geometry.visible_dimension(h.queries, h.keys, mask=h.mask)
            sel = [r for r in rows if r["L"] == L and r["head"] == h.provenance["head"]]
            assert len(sel) == 2 and all(r["r_exact"] == masked["r_num"] for r in sel)
            assert all(r["r_exact_certified_lower"] == masked["r_exact_lower"] for r in sel)
            if L == 8:
                assert masked["r_num"] == 6 == sel[0]["r_exact_max"] and geometry.visible_dimension(h.queries, h.keys)["r_num"] == 7
    assert all(r["R_sym"] is None and r["R_sym_applicable"] is False and r["lower"] <= r["R_con"] for r in rows)
    summary = (out / "SUMMARY.md").read_text()
    assert "Row mask: causal(i) in 8 configurations" in summary and "R_sym: — (not applicable) in 8" in summary
    files = sorted((out / "certificates").rglob("*.json"))
    assert len(files) == 16 and not any(f.name.endswith(".chain.json") for f in files)
    assert all(check(str(f)).status == "VERIFIED" and "row_mask" in f.read_text() for f in files)
    assert main(["report", str(out)]) == 0
    assert "R_sym —: not applicable, the head has a row mask" in (out / "report.html").read_text()


def test_calibrate_a_sliding_window_decoder_in_memory(folders, tmp_path):
    """The same grid from Python: Mistral's sliding window (12 keys) is recorded, and rows whose
    key sets are windows give the masked visible dimension."""
    from certkit.calibration import calibrate
    res = calibrate(model=folders["mistral"], tokens=TOKENS, layers="1", heads="0", lengths="20",
                    multipliers="1", eps="1/4", out=tmp_path / "cal")
    (row,) = res.rows
    assert row["mask"] == "window(i, 12)" and row["R_sym"] is None and row["R_sym_applicable"] is False
    assert res.summary["R_sym_not_applicable"] == 1 and res.summary["masked"] == 1
