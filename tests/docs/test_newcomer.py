"""What a newcomer meets first: the guide's lines for reading a certify summary (docs/guide/certify.md) work as written,
certify writes summary.csv, the '-' of the peer columns is explained, the help of show and tables
has examples, the report prints prose (no Python lists, no 17-digit floats) and a sandwich
figure with every layer, and benchmarks/bench_long.py leaves no temporary folder behind."""
import importlib.util
import json
import os
import re
import subprocess
import sys

import pytest

from certkit import cli

import paths

ROOT = str(paths.ROOT)


@pytest.fixture(scope="module")
def certified(tmp_path_factory):
    out = tmp_path_factory.mktemp("c") / "out"
    code = cli.main(["certify", "--synthetic", "gaussian:n=12,d=3,beta=1,seed=0", "--synthetic",
                     "gaussian:n=10,d=2,beta=2,seed=1", "--eps", "1/4,1/2", "--peers", "svd,performer",
                     "--out", str(out)])
    assert code == 0
    return out


def readme_pandas_lines():
    text = open(os.path.join(ROOT, "docs", "guide", "certify.md"), encoding="utf-8").read()
    block = re.search(r"\n    import json, pandas as pd\n((?:    .*\n)+)", text)
    assert block, "docs/guide/certify.md's pandas lines"
    return ["import json, pandas as pd"] + [line[4:] for line in block.group(1).splitlines()]


def test_readme_pandas_lines_work_as_written(certified, tmp_path, monkeypatch):
    pytest.importorskip("pandas")
    lines = readme_pandas_lines()
    assert any("summary.json" in line for line in lines) and any("summary.csv" in line for line in lines)
    monkeypatch.chdir(tmp_path)
    model = tmp_path / "model"                       # a --model summary: {"meta", "rows"}
    model.mkdir()
    rows = json.loads((certified / "summary.json").read_text())
    (model / "summary.json").write_text(json.dumps({"meta": {"model": "x"}, "rows": rows}))
    (model / "summary.csv").write_text((certified / "summary.csv").read_text())
    for line in lines[1:]:
        folder = model if '["rows"]' in line else certified
        env = {}
        exec(lines[0] + "\n" + line.replace("DIR", str(folder)), env)
        df = env["rows"]
        assert len(df) == 4 and {"head", "eps", "lower", "upper"} <= set(df.columns), line
        assert list(df["lower"]) == [r["lower"] for r in rows]


def test_certify_writes_summary_csv_and_explains_the_dash(certified):
    import csv
    with open(certified / "summary.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    js = json.loads((certified / "summary.json").read_text())
    assert len(rows) == len(js) == 4 and "svd_k" in rows[0] and "performer_k" in rows[0]
    assert [int(r["upper"]) for r in rows] == [r["upper"] for r in js]
    md = (certified / "summary.md").read_text()
    assert "'-' means no k reaches eps" in md


def test_the_output_legend_explains_the_dash(tmp_path):
    r = subprocess.run([sys.executable, "-m", "certkit", "certify", "--synthetic", "gaussian:n=12,d=3,beta=1,seed=0",
                        "--eps", "1/4", "--peers", "performer", "--out", str(tmp_path / "o")],
                       capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=ROOT), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "performer=-" in r.stdout and "'-' means no k reaches eps" in r.stdout


@pytest.mark.parametrize("command", ["show", "tables", "certify"])
def test_help_has_examples(command, capsys):
    with pytest.raises(SystemExit):
        cli.build_parser([command, "--help"]).parse_args([command, "--help"])
    out = capsys.readouterr().out
    assert "Examples:" in out and f"certkit {command} " in out.split("Examples:")[1]


def test_show_example_runs():
    from certkit.cli import COMMANDS
    example = COMMANDS["show"].epilog.split("Examples:\n")[1].splitlines()[0].split()
    r = subprocess.run([sys.executable, "-m", *example], capture_output=True, text=True, cwd=ROOT,
                       env=dict(os.environ, PYTHONPATH=ROOT), timeout=120)
    assert r.returncode == 0 and "claim" in r.stdout, r.stderr


def model_rows(layers=4, heads=20):
    return [{"head": f"l{l}-h{h}", "layer": l, "head_index": h, "kv_head": h, "multiplier": "1", "n": 8, "N": 8,
             "d": 2, "beta": "1/8", "eps": e, "lower": 2, "upper": 3 + h % 4, "lower_kind": "x",
             "upper_method": "svd", "peers": {}, "seconds": 0.1}
            for l in range(layers) for h in range(heads) for e in ("1/4", "1/2")]


def test_report_prints_prose_and_every_layer(tmp_path):
    pytest.importorskip("matplotlib")
    from certkit.reporting import build, pages
    rows = model_rows()
    assert len(rows) > 60
    facets = pages.sandwich_facets(rows)
    assert [t for t, _ in facets] == [f"layer {l}" for l in range(4)]
    assert sum(len(fr) for _, fr in facets) == len(rows)                  # every row, none cut at 60
    meta = {"model": "m", "class": "C", "family": "bert", "layers": 4, "heads": 20, "d_head": 2, "input": "text",
            "length": 8, "certified_layers": [0, 1, 2, 3], "certified_heads": list(range(20)),
            "multipliers": ["1", "2"], "eps": ["1/4", "1/2"], "reconstruction_max_abs_diff": 5.960464477539063e-07}
    (tmp_path / "summary.json").write_text(json.dumps({"meta": meta, "rows": rows}))
    r = build.build(tmp_path)
    page = open(r["path"], encoding="utf-8").read()
    ran = page.split("What was run</h2>")[1].split("<h2>")[0]
    assert "[" not in ran and "'" not in ran and "&#x27;" not in ran, ran
    assert not re.search(r"\d\.\d{8,}", ran), ran
    assert "layers 0–3, heads 0–19" in ran and "multipliers 1, 2" in ran and "6e-07" in ran
    assert "one panel per layer" in page and "first 60 rows" not in page


def test_plain_values():
    from certkit.reporting.markup import plain
    assert plain([0, 1, 2, 3, 7]) == "0–3, 7" and plain([0, 2]) == "0, 2" and plain([4, 5]) == "4, 5"
    assert plain(0.30000000000000004) == "0.3" and plain(["1/4", "1/2"]) == "1/4, 1/2" and plain(None) == "—"


def test_bench_long_removes_its_temporary_folders(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("bench_long", os.path.join(ROOT, "benchmarks", "bench_long.py"))
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    monkeypatch.setattr(bench.tempfile, "tempdir", str(tmp_path))
    r = bench.run_once(ROOT, 16, 300)
    assert r is not None and r[2] is not None
    assert os.listdir(tmp_path) == []
