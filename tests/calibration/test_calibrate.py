"""Real-model calibration: extraction of pretrained heads, the reconstruction check, a
reduced grid end to end through the CLI (one layer, one length), resumption, the in-memory
calibrate(), bad input (a UserError naming the argument: exit 64), and the summary statistics on
rows with known answers."""
import csv
import importlib
import json
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from certkit.calibration import configs, grid
from certkit.calibration import statistics as calstats
from certkit.errors import UserError
from certkit.head import Head
from certkit.choices import check
from certkit.numbers import OverSqrt
from certkit.symbolic.float_chain import log_size

calibrate = importlib.import_module("certkit.calibration")   # the package (certkit.calibrate is the API function)

pytest.importorskip("transformers")
ex = pytest.importorskip("certkit.models.extract")


@pytest.fixture(scope="module")
def minilm():
    return ex.load("minilm")


def test_minilm_loads_offline_and_reconstructs(minilm):
    model, tok, info = minilm
    assert (info["layers"], info["heads"], info["d_head"], info["kind"]) == (6, 12, 32, "bert")
    c = ex.capture(model, info, ex.token_window(tok, info["kind"], 64))
    assert c["Q"].shape == (6, 12, 64, 32) and c["bias"] is None
    err = ex.reconstruction_error(c)
    assert 0 < err <= 2e-6                      # the float32 floor (paper: 1.57e-6)
    assert grid.float64_check(model, info, ex.token_window(tok, info["kind"], 64)) < 1e-12


def test_padding_is_dropped_columns(minilm, tmp_path):
    model, tok, info = minilm
    ids = ex.token_window(tok, info["kind"], 32)
    c = ex.capture(model, info, ids, pad=8)
    assert c["K"].shape[2] == 40 and c["keep"].sum() == 32
    assert ex.reconstruction_error(c) <= 2e-6     # the model puts ~0 mass on padded keys
    h = ex.head(c, 2, 3)
    assert h.weights.tolist() == [1.0] * 32 + [0.0] * 8
    assert isinstance(h, Head) and h.name == "l2-h3" and h.beta == OverSqrt(1, 32)
    assert h.provenance == {"model": "minilm", "layer": 2, "head": 3, "length": 32, "key_layout": "hf"}
    # the Head's attention is the rebuild on the kept columns (one float softmax), zero on the padding
    A = h.attention()
    assert np.max(np.abs(A[:, :32] - ex.rebuild(c, 2, 3))) < 1e-14 and not A[:, 32:].any()
    h2 = ex.head(c, 2, 3, multiplier=Fraction(1, 2))
    assert h2.beta == OverSqrt(Fraction(1, 2), 32) and h2.beta_float == pytest.approx(0.5 / np.sqrt(32), rel=1e-15)
    plain = ex.capture(model, info, ids)
    # the kept rows are the unpadded head's rows (the mask removes the padded keys exactly)
    assert np.max(np.abs(ex.rebuild(c, 2, 3) - ex.rebuild(plain, 2, 3))) < 1e-5


def test_text_is_deterministic():
    t1, s1 = ex.text()
    t2, s2 = ex.text()
    assert s1 == s2 and len(t1) > 100000


def _cal(*args):
    return subprocess.run([sys.executable, "-m", "certkit", "calibrate", *args], capture_output=True, text=True)


def test_reduced_grid_end_to_end_and_resume(tmp_path):
    out = tmp_path / "cal"
    args = ["--layers", "0", "--heads", "0,5", "--lengths", "64", "--multipliers", "1,4", "--eps", "1/4,7/20",
            "--out", str(out), "--no-plots"]
    r = _cal(*args)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "4 groups computed, 0 already done" in r.stdout
    with open(out / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 8
    for row in rows:
        n, lo, up = int(row["n"]), int(row["lower"]), int(row["R_con"])
        assert 1 <= lo <= up <= n and int(row["r_exact"]) == 32
        assert row["R_sym"] == "" or int(row["R_sym"]) >= lo       # both are proved, so they are ordered
        stem = str(out / row["certificates"].replace(".{lower,upper,chain}.json", ""))
        assert f"m{row['multiplier']}-eps-{row['eps'].replace('/', '_')}" in stem
        v = check(stem + ".upper.json")
        assert v.status == "VERIFIED" and f"<= {up} " in v.message
        v = check(stem + ".lower.json")
        assert v.status == "VERIFIED" and f">= {lo} " in v.message
    # the queries and keys of a head are stored once for all its multipliers, eps and kinds
    for h in ("0", "5"):
        docs = [json.loads(p.read_text()) for p in (out / "certificates" / f"L64-l0-h{h}").glob("*.json")]
        assert len(docs) >= 8 and len({d["instance"]["queries"]["file"] for d in docs}) == 1
    meta = json.loads((out / "meta.json").read_text())
    assert meta["reconstruction"][0]["max_abs_diff_float32_model"] <= 2e-6
    assert "Spearman" in (out / "SUMMARY.md").read_text()
    # resume: nothing is recomputed; a removed group is recomputed alone
    os.remove(configs.group_path(str(out), 64, 0, 5, Fraction(4)))
    r = _cal(*args)
    assert r.returncode == 0 and "1 groups computed, 3 already done" in r.stdout
    with open(out / "results.csv") as f:
        again = list(csv.DictReader(f))
    strip = lambda rs: [{k: v for k, v in x.items() if k != "seconds"} for x in rs]
    assert strip(again) == strip(rows)          # deterministic


def test_in_memory_calibrate_equals_the_command_line(tmp_path):
    """calibrate() returns the rows of results.json (and reuses a folder's finished groups)."""
    out = tmp_path / "cal"
    r = _cal("--layers", "0", "--heads", "1", "--lengths", "64", "--multipliers", "2", "--eps", "1/4",
             "--out", str(out), "--no-plots")
    assert r.returncode == 0, r.stdout + r.stderr
    cli = json.loads((out / "results.json").read_text())
    res = calibrate.calibrate(layers=[0], heads="1", lengths=[64], multipliers=[2], eps=0.25, out=str(out / "again"))
    strip = lambda rs: [{k: v for k, v in x.items() if k != "seconds"} for x in rs]
    assert strip(res.rows) == strip(cli["rows"]) and res.summary["configurations"] == 1
    assert res.out == str(out / "again") and res.computed == 1 and res.skipped == 0
    assert res.to_csv() == (out / "again" / "results.csv").read_text()
    assert (out / "again" / "SUMMARY.md").exists() and not (out / "again" / "bridge_vs_con_by_m.png").exists()
    res = calibrate.calibrate(layers=[0], heads=[1], lengths=[64], multipliers=["2"], eps=["1/4"], out=str(out))
    assert res.computed == 0 and res.skipped == 1 and strip(res.rows) == strip(cli["rows"])


def test_a_missing_model_folder_is_a_missing_input(tmp_path):
    r = _cal("--model", "/nonexistent", "--out", str(tmp_path / "o"))
    assert r.returncode == 66 and "no such file or folder; give 'minilm', 'mpnet'" in r.stderr
    assert "Traceback" not in r.stderr and not (tmp_path / "o").exists()


@pytest.mark.parametrize("args,msg", [(["--layers", "9"], "layers: 9 is out of range 0..5"),
                                      (["--layers", "x"], "--layers: cannot read 'x'"),
                                      (["--eps", "2"], "--eps: 2 is outside (0, 1)"),
                                      (["--lengths", "4"], "8..512"),
                                      (["--multipliers", "0"], "--multipliers: 0 is not > 0"),
                                      (["--workers", "0"], "--workers")])
def test_bad_input_is_a_user_error(args, msg, tmp_path):
    import argparse
    from certkit.commands import calibrate as command
    p = argparse.ArgumentParser()
    command.add_arguments(p)
    with pytest.raises(UserError) as e:
        command.run(p.parse_args([*args, "--out", str(tmp_path)]))
    assert e.value.exit_code == 64 and msg in str(e.value)
    r = _cal(*args, "--out", str(tmp_path))
    assert r.returncode == 64 and msg in r.stderr and "Traceback" not in r.stderr


def test_bad_keyword_arguments_name_the_argument():
    for kw, msg in [({"lengths": [64.5]}, "lengths: 64.5"), ({"eps": [1.5]}, "eps: 3/2 is outside"),
                    ({"workers": 0}, "workers"), ({"heads": [-1]}, "heads: -1 is negative")]:
        with pytest.raises(UserError, match=msg):
            calibrate.calibrate(**kw)


def test_output_folder_that_is_a_file_exits_73(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    r = _cal("--layers", "0", "--heads", "0", "--lengths", "64", "--out", str(f))
    assert r.returncode == 73 and "--out" in r.stderr and "Traceback" not in r.stderr


def _row(**kw):
    base = dict(eps="1/4", n=64, d_head=32, r_exact=32, R_sym=None, seconds=0.1)
    base.update(kw)
    return base


def test_statistics_known_answers():
    rows = [_row(r_svd_int=k, R_con=3 * k + 1, lower=k) for k in range(10, 30)]
    rows += [_row(r_svd_int=32, R_con=100, lower=100)]
    s = calstats.statistics(rows)
    assert s["spearman"] == pytest.approx(1.0) and s["spearman_ci95"][1] == pytest.approx(1.0)
    assert s["share_svd_below_exact"] == pytest.approx(20 / 21) and s["full_dimensional"] == 21
    assert s["share_svd_below_exact_old"] == pytest.approx(20 / 21)      # d_head < n - 1: the definitions agree
    assert s["R_sym_computed"] == 0 and s["bridges"] == ["r_svd_int"]
    assert s["tight"] == 1 and s["median_upper_over_lower"] == pytest.approx(np.median([(3 * k + 1) / k for k in range(10, 30)] + [1.0]))
    anti = calstats.statistics([_row(r_svd_int=k, R_con=50 - k, lower=1) for k in range(10, 30)])
    assert anti["spearman"] == pytest.approx(-1.0)


def test_log_size_matches_the_chain_shape():
    # r = 0 or a tiny Gamma: one row suffices; otherwise log S grows like r/2 log(Gamma) (docs/mathematics.md F13)
    assert log_size(0, 10.0, 0.2) == 0.0 and log_size(3, 1e-6, 0.2) == 0.0
    a, b = log_size(4, 1e4, 0.2), log_size(4, 1e6, 0.2)
    assert (b - a) / np.log(100) == pytest.approx(2.0, rel=0.02)


@pytest.mark.heavy
def test_mpnet_position_bias_reconstruction():
    model, tok, info = ex.load("mpnet")
    c = ex.capture(model, info, ex.token_window(tok, info["kind"], 64))
    assert c["bias"].shape == (12, 64, 64) and ex.reconstruction_error(c) <= 2.5e-6
