"""certkit report and the calibration statistics: Spearman breakdowns with cluster-bootstrap
intervals checked against scipy on expanded data, the full-dimensional definitions on hand-built
rows, the SUMMARY defects (no "(of 0)", no R_sym claim without R_sym), the figures (PNG + PDF +
SVG, byte-stable, the old names gone) and report.html for calibrate, certify and scale folders built
in tmp_path (self-contained: every image a data: URL, no address), and bad folders (exit 64 / 66)."""
import json
import os
import re
import shutil
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

from certkit import cli
from certkit.calibration import configs, plots, summary
from certkit.calibration import statistics as calstats
from certkit.outputs import write_json

import paths

ROOT = str(paths.ROOT)

stats = pytest.importorskip("scipy.stats")
MS = ["1/4", "1", "4"]


def row(layer=0, head=0, m="1", eps="1/4", L=64, d_head=32, **kw):
    """A calibration row with the fields statistics() reads."""
    r = dict(model="fake", L=L, layer=layer, head=head, multiplier=m, beta=f"{m}/sqrt({d_head})", eps=eps, n=L,
             d_head=d_head, r_exact=min(d_head, L - 1), r_exact_certified_lower=min(d_head, L - 1), r_svd_int=10,
             r_opt=10, R_sym=None, R_sym_r=None, R_con=5, upper_method="refined", lower=3, lower_kind="x", Gamma=1.0,
             certificates="certificates/x.json", seconds=0.1)
    r.update(kw)
    return r


def simpson_rows(heads=8):
    """Within each m, R_con increases strictly with r_svd_int; across m, r_svd_int grows while R_con
    falls (the pooling effect): per-m and within-m Spearman 1, pooled strongly negative."""
    rows = []
    for j, m in enumerate(MS):
        for h in range(heads):
            rows.append(row(layer=h // 4, head=h % 4, m=m, r_svd_int=20 * j + h, R_con=100 - 30 * j + h))
    return rows


# ---------------------------------------------------------------- ranks and correlations
def test_weighted_ranks_are_the_midranks_of_the_expanded_data():
    rng = np.random.default_rng(5)
    v = rng.integers(0, 6, 40).astype(float)            # many ties
    W = rng.integers(0, 4, (3, 40)).astype(float)
    R = calstats.weighted_ranks(v, W)
    for b in range(3):
        expanded = np.repeat(v, W[b].astype(int))
        ranks = stats.rankdata(expanded)                  # scipy's average ranks of the multiset
        first = {x: ranks[list(expanded).index(x)] for x in set(expanded)}
        for j in np.flatnonzero(W[b]):
            assert R[b, j] == pytest.approx(first[v[j]])


def test_weighted_spearman_equals_scipy_on_the_expanded_data():
    rng = np.random.default_rng(6)
    x, y = rng.integers(0, 9, 50).astype(float), rng.integers(0, 9, 50).astype(float) + 0.3 * np.arange(50)
    W = rng.integers(0, 3, (4, 50)).astype(float)
    got = calstats.spearman_weighted(x, y, W)
    for b in range(4):
        k = W[b].astype(int)
        assert got[b] == pytest.approx(stats.spearmanr(np.repeat(x, k), np.repeat(y, k)).statistic, abs=1e-12)


def test_pooled_per_m_and_within_m_known_answers():
    rows = simpson_rows()
    s = calstats.statistics(rows)
    x = [r["r_svd_int"] for r in rows]
    y = [r["R_con"] for r in rows]
    assert s["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic)
    assert s["spearman"] < -0.5                       # pooled over m: anti-correlated
    assert s["spearman_by_m"] == pytest.approx({m: 1.0 for m in MS})
    assert s["spearman_within_m"] == pytest.approx(1.0)
    t = s["spearman_breakdown"]["r_svd_int"]
    assert set(t) == {"pooled", "rank_within_m", "by_m", "by_eps", "by_L", "by_layer"}
    assert t["by_m"]["1"]["configurations"] == 8 and t["by_m"]["1"]["heads"] == 8
    assert set(t["by_layer"]) == {"0", "1"} and t["by_layer"]["1"]["heads"] == 4
    # within every m the order is perfect: each resample of heads keeps rho = 1
    assert t["by_m"]["4"]["ci95"] == pytest.approx([1.0, 1.0]) and t["rank_within_m"]["ci95"] == pytest.approx([1.0, 1.0])
    lo, hi = s["spearman_ci95"]
    assert -1 <= lo < hi < 0 and hi - lo > 0.01 and abs(s["spearman"] - (lo + hi) / 2) < hi - lo


def test_rank_within_m_is_not_the_pooled_correlation():
    """Rank within m = Pearson of the within-m ranks (computed here with scipy) pooled over m."""
    rng = np.random.default_rng(2)
    rows = [row(layer=0, head=h, m=m, r_svd_int=int(rng.integers(0, 30)) + 10 * j, R_con=int(rng.integers(1, 40)))
            for j, m in enumerate(MS) for h in range(10)]
    rx, ry = [], []
    for m in MS:
        sel = [r for r in rows if r["multiplier"] == m]
        rx += list(stats.rankdata([r["r_svd_int"] for r in sel]))
        ry += list(stats.rankdata([r["R_con"] for r in sel]))
    s = calstats.statistics(rows)
    assert s["spearman_within_m"] == pytest.approx(stats.pearsonr(rx, ry).statistic, abs=1e-12)


def test_cluster_bootstrap_is_seeded_and_resamples_heads():
    rng = np.random.default_rng(3)
    rows = [row(layer=l, head=h, m=m, eps=e, r_svd_int=int(rng.integers(5, 30)), R_con=int(rng.integers(1, 50)))
            for l in range(2) for h in range(5) for m in MS for e in ("1/4", "7/20")]
    a, b = calstats.statistics(rows, seed=7), calstats.statistics(rows, seed=7)
    assert a == b                                                   # deterministic under a seed
    assert calstats.statistics(rows, seed=8)["spearman_ci95"] != a["spearman_ci95"]
    # each configuration repeated 4 times inside its head: the same heads, so the same interval
    # (a bootstrap over configurations would shrink it by about 2)
    s4 = calstats.statistics([dict(r) for r in rows for _ in range(4)], seed=7)
    assert s4["spearman"] == pytest.approx(a["spearman"])
    assert s4["spearman_ci95"] == pytest.approx(a["spearman_ci95"])
    one = calstats.statistics([r for r in rows if r["layer"] == 0 and r["head"] == 0])
    assert one["spearman_breakdown"]["r_svd_int"]["pooled"]["heads"] == 1 and one.get("spearman_ci95") is None


def test_statistics_of_many_rows_take_seconds():
    import time
    rng = np.random.default_rng(4)
    rows = [row(layer=l, head=h, m=m, eps=e, L=L, r_svd_int=int(rng.integers(5, 64)), R_con=int(rng.integers(1, 60)),
                r_svd_int_bias=int(rng.integers(5, 64)), r_exact_bias=L - 1, sink_mass=0.5)
            for L in (64, 128, 256) for l in range(12) for h in range(12) for m in ("1/4", "1/2", "1", "2", "4")
            for e in ("3/20", "1/4", "7/20")]
    t = time.perf_counter()
    s = calstats.statistics(rows)
    assert time.perf_counter() - t < 20 and s["configurations"] == 6480 and s["heads"] == 144


# ---------------------------------------------------------------- shares, sink, R_sym
def test_full_dimensional_definitions():
    rows = [row(L=64, d_head=64, r_exact=63, r_svd_int=40),          # full (n - 1 caps it), not full under the old one
            row(L=64, d_head=64, r_exact=63, r_svd_int=63),
            row(L=128, d_head=64, r_exact=64, r_svd_int=60),          # full under both
            row(L=128, d_head=64, r_exact=60, r_svd_int=50)]          # full under neither
    s = calstats.statistics(rows)
    assert s["full_dimensional"] == 3 and s["share_svd_below_exact"] == pytest.approx(2 / 3)
    assert s["full_dimensional_old"] == 1 and s["share_svd_below_exact_old"] == pytest.approx(1.0)
    assert "min(d_head, n − 1)" in s["definitions"]["full_dimensional"]
    assert "bridges" in s and s["bridges"] == ["r_svd_int"] and "spearman_bias" not in s and "full_rank_bias" not in s
    biased = [dict(r, r_exact_bias=eb, r_svd_int_bias=sb, sink_mass=0.1) for r, (eb, sb) in
              zip(rows, [(63, 50), (63, 63), (127, 100), (120, 100)])]
    s = calstats.statistics(biased)
    assert s["bridges"] == ["r_svd_int", "r_svd_int_bias"]
    assert s["full_rank_bias"] == 3 and s["share_svd_below_exact_bias"] == pytest.approx(2 / 3)


def test_sink_mass_median_per_m():
    rows = [row(head=h, m=m, sink_mass=v, r_svd_int_bias=10, r_exact_bias=32)
            for m, vals in (("1", [0.1, 0.2, 0.9]), ("4", [0.5, 0.7, 0.8])) for h, v in enumerate(vals)]
    assert calstats.statistics(rows)["sink_mass_by_m"] == pytest.approx({"1": 0.2, "4": 0.7})


META = {"model": "fake", "info": {"class": "FakeModel", "layers": 2, "heads": 4, "d_head": 64}, "text": "t",
        "text_sha256": "0" * 64, "reconstruction": [{"L": 64, "max_abs_diff_float32_model": 1.1e-6}]}


def meta_of(rows):
    return dict(META, grid={"layers": sorted({r["layer"] for r in rows}), "heads": sorted({r["head"] for r in rows}),
                            "lengths": sorted({r["L"] for r in rows}),
                            "multipliers": sorted({r["multiplier"] for r in rows}, key=Fraction),
                            "eps": sorted({r["eps"] for r in rows}, key=Fraction)})


def test_one_length_run_names_what_the_share_is_not_defined_for():
    rows = [dict(r, d_head=64, r_exact=63) for r in simpson_rows()]     # L = 64 < d_head + 1: old share empty
    s = calstats.statistics(rows)
    assert s["full_dimensional_old"] == 0 and s["share_svd_below_exact_old"] is None
    md = summary.summary_markdown(meta_of(rows), s, rows)
    assert "(of 0)" not in md and "not defined" in md and "r_exact = d_head = 64" in md
    assert f"(of {len(rows)})" in md                                    # the new definition covers them all


def test_a_constant_bridge_says_why_spearman_is_undefined():
    """At L = 512 every MiniLM head has r_SVD_int = d_head: no rank correlation, and the summary says why."""
    rows = [row(layer=l, head=h, r_svd_int=32, R_con=5 + l + h) for l in range(2) for h in range(3)]
    s = calstats.statistics(rows)
    assert s["spearman_breakdown"]["r_svd_int"]["pooled"]["rho"] is None
    assert "— (r_SVD_int is constant)" in summary.summary_markdown(meta_of(rows), s, rows)


def test_no_claim_about_r_sym_when_none_was_computed():
    rows = simpson_rows()
    md = summary.summary_markdown(meta_of(rows), calstats.statistics(rows), rows)
    assert "R_sym" in md and "no claim" in md
    assert not re.search(r"R_sym[^.]*(is VERIFIED|below n in|is a kernel-VERIFIED)", md)
    assert "and so is every R_sym" not in md
    rows = [dict(r, R_sym=r["n"]) for r in rows]
    md = summary.summary_markdown(meta_of(rows), calstats.statistics(rows), rows)
    assert "VERIFIED in 24 configurations and below n in 0" in md and "no claim" not in md


def test_summary_has_the_breakdown_both_bridges_and_the_paper():
    rows = [dict(r, r_svd_int_bias=r["r_svd_int"] + 1, r_exact_bias=63, r_opt_bias=1, Gamma_bias=1.0,
                 r_exact_bias_certified_lower=63, sink_mass=0.25 * (1 + MS.index(r["multiplier"])), bridge=2)
            for r in simpson_rows()]
    s = calstats.statistics(rows)
    md = summary.summary_markdown(meta_of(rows), s, rows)
    for needle in ("| pooled |", "| rank within m |", "| m = 1/4 |", "| ε = 1/4 |", "| L = 64 |", "| layer 1 |",
                   "with bias: ρ [95 % CI]", "0.574 / 0.606", "41.9 %", "sink mass", "comparable with"):
        assert needle in md, needle
    assert f"{s['spearman']:.3f}" in md and f"{s['spearman_bias']:.3f}" in md
    assert "/tmp" not in md and "http" not in md
    old = simpson_rows()                                               # rows before the bias bridge
    md = summary.summary_markdown(meta_of(old), calstats.statistics(old), old)
    assert "with bias" not in md and "r_SVD_int (bias)" not in md and "sink mass" not in md


# ---------------------------------------------------------------- folders
def write_calibrate_folder(out, rows, bias=True):
    """A calibrate output folder: meta.json and one config per group (configs.py's layout)."""
    groups = {}
    for r in rows:
        groups.setdefault((r["L"], r["layer"], r["head"], r["multiplier"]), []).append(r)
    for (L, l, h, m), rs in groups.items():
        tau = list(2 * np.exp(-np.arange(33) / (4 * float(Fraction(m)) + 2)))
        g = {"rows": rs, "tau_width": tau}
        if bias:
            g["tau_width_bias"] = [min(2.0, 1.5 * t) for t in tau]
        write_json(configs.group_path(str(out), L, l, h, Fraction(m)), g)
    write_json(os.path.join(out, "meta.json"), meta_of(rows))


def biased_rows():
    rng = np.random.default_rng(9)
    return [dict(r, r_svd_int_bias=min(63, r["r_svd_int"] + int(rng.integers(0, 5))), r_exact_bias=63,
                 r_exact_bias_certified_lower=63, r_opt_bias=3, Gamma_bias=2.0, sink_mass=float(rng.uniform()),
                 bridge=2, lower=max(1, r["R_con"] // 2), eps=e)
            for r in simpson_rows() for e in ("1/4", "7/20")]


def self_contained(page):
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert "http" not in page and 'src="file' not in page and "<script" not in page and "<link" not in page
    imgs = re.findall(r'<img src="([^"]{0,30})', page)
    assert imgs and all(i.startswith("data:image/png;base64,") for i in imgs)
    return len(imgs)


def test_report_of_a_calibrate_folder(tmp_path, capsys):
    out = tmp_path / "cal"
    rows = biased_rows()
    write_calibrate_folder(out, rows)
    (out / "svd_vs_con.png").write_bytes(b"old")                      # an old figure name: removed
    assert cli.main(["report", str(out)]) == 0
    assert "calibrate report, 5 figures" in capsys.readouterr().out
    page = (out / "report.html").read_text()
    assert self_contained(page) == 5
    for f in plots.FIGURES:
        for ext in ("png", "pdf", "svg"):
            assert (out / f"{f}.{ext}").stat().st_size > 5000, (f, ext)
    assert not (out / "svd_vs_con.png").exists()
    x, y = [r["r_svd_int"] for r in rows], [r["R_con"] for r in rows]
    assert f"{stats.spearmanr(x, y).statistic:.3f}" in page                 # the pooled Spearman, computed here
    xb = [r["r_svd_int_bias"] for r in rows]
    assert f"{stats.spearmanr(xb, y).statistic:.3f}" in page
    assert "0.574 / 0.606" in page and "41.9 %" in page and "rank within m" in page
    # the same folder gives the same bytes (page and figures)
    before = {f: (out / f).read_bytes() for f in os.listdir(out) if f.endswith((".png", ".pdf", ".svg", ".html"))}
    for f in plots.FIGURES:
        (out / f"{f}.png").unlink()
    assert cli.main(["report", str(out)]) == 0
    after = {f: (out / f).read_bytes() for f in before}
    assert [f for f in before if before[f] != after[f]] == []


def test_write_summary_on_rows_without_the_bias_bridge(tmp_path):
    out = tmp_path / "old"
    rows = [dict(r, lower=2) for r in simpson_rows()]
    write_calibrate_folder(out, rows, bias=False)
    got, s = summary.write_summary(str(out))
    assert len(got) == len(rows) and s["bridges"] == ["r_svd_int"]
    header = (out / "results.csv").read_text().splitlines()[0].split(",")
    assert "r_svd_int" in header and "r_svd_int_bias" not in header and "sink_mass" not in header
    assert json.loads((out / "results.json").read_text())["statistics"]["spearman_by_m"] == pytest.approx(
        {m: 1.0 for m in MS})
    assert (out / "bridge_vs_con_by_m.png").exists() and not (out / "sink_mass.png").exists()
    assert "with bias" not in (out / "SUMMARY.md").read_text()


def test_report_of_a_certify_folder(tmp_path, capsys):
    out = tmp_path / "c"
    assert cli.main(["certify", "--synthetic", "gaussian:n=32,d=4,beta=1,seed=0", "--eps", "1/4,1/2",
                     "--peers", "svd", "--out", str(out)]) == 0
    capsys.readouterr()
    files = set(os.listdir(out))
    assert cli.main(["report", str(out)]) == 0
    assert set(os.listdir(out)) == files | {"report.html"}               # nothing else written
    page = (out / "report.html").read_text()
    assert self_contained(page) == 1
    for r in json.loads((out / "summary.json").read_text()):
        assert f"<td>{r['lower']}</td><td>{r['upper']}</td>" in page and r["head"] in page


def test_report_of_a_scale_folder(tmp_path, capsys):
    out = tmp_path / "s"
    assert cli.main(["scale", "--families", "sphere", "--points", "3", "--no-crosscheck", "--out", str(out)]) in (0, 1)
    capsys.readouterr()
    assert cli.main(["report", str(out), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    pngs = [f for f in os.listdir(out) if f.endswith(".png")]
    assert self_contained(page) == len(pngs) >= 1
    summary = json.loads((out / "summary.json").read_text())
    assert "17,850,625" in page and summary["headline"]["verdict"] in page
    assert all(f"| sphere | {s['dim']} |" not in page and f"<td>sphere</td><td>{s['dim']}</td>" in page
               for s in summary["slopes"])


@pytest.mark.parametrize("make, code, needle", [
    (lambda p: p, 64, "not an output folder"),
    (lambda p: (p / "x.json").write_text("{}") and p, 64, "not an output folder"),
    (lambda p: (p / "file.txt").write_text("x") and p / "file.txt", 64, "is a file"),
    (lambda p: p / "missing", 66, "no such folder")])
def test_bad_folder(tmp_path, make, code, needle):
    target = make(tmp_path)
    r = subprocess.run([sys.executable, "-m", "certkit", "report", str(target)], capture_output=True, text=True)
    assert r.returncode == code and needle in r.stderr and str(target) in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_report_help_and_lazy_imports():
    r = subprocess.run([sys.executable, "-m", "certkit", "report", "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and all(w in r.stdout for w in ("calibrate", "certify", "scale", "report.html", "64"))
    code = "import sys, certkit.commands.report, certkit.reporting.build, certkit.calibration.summary; " \
           "print(sorted(m for m in ('matplotlib', 'scipy', 'torch') if m in sys.modules))"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.strip() == "[]", r.stdout + r.stderr


def test_report_of_the_committed_long_context_growth_law(tmp_path):
    """A folder of `scale --families causal-real` alone (causal-real.md, .csv, the plot) is a scale report."""
    src = os.path.join(ROOT, "data", "scaling", "long-context")
    out = tmp_path / "g"
    os.makedirs(out)
    for f in ("causal-real.md", "causal-real.csv", "causal-real.png"):
        shutil.copy(os.path.join(src, f), out / f)
    r = subprocess.run([sys.executable, "-m", "certkit", "report", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    page = (out / "report.html").read_text()
    assert self_contained(page) == 1 and "l18-h8" in page and "growth law" in page


def test_a_layer_compare_report_says_what_was_certified_and_by_which_version(tmp_path):
    import pathlib
    from certkit.cli import main
    folder = pathlib.Path(ROOT) / "data" / "compare" / "minilm-L128-layers"
    assert main(["report", str(folder), "--out", str(tmp_path / "r.html")]) == 0
    page = (tmp_path / "r.html").read_text()
    assert "attention block" in page and "kind attention-distance" not in page
    assert "Produced by certkit" in page
