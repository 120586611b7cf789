"""Committed results a reader can reproduce: every summary names the version that made it (certkit,
the commit of a checkout, the checker, the libraries that decide numbers), and nothing in a committed
result names the producing machine."""
import json
import os
import re
import subprocess
import sys

import pytest

from certkit.provenance import portable_path, producer, producer_line

import paths

ROOT = str(paths.ROOT)
ABSOLUTE = re.compile(r"(?<![\w.:/])/(?:home|work|tmp|Users|root|var|private|opt|mnt)/[^\s\"'`)]*|site-packages|[A-Z]:\\\\")


def committed(*roots):
    out = subprocess.run(["git", "-C", ROOT, "ls-files", *roots], capture_output=True, text=True, check=True).stdout
    return [f for f in out.splitlines() if f.endswith((".json", ".md", ".csv", ".txt", ".tex"))]


@pytest.mark.skipif(not os.path.isdir(os.path.join(ROOT, ".git")), reason="needs the git checkout")
def test_no_committed_result_names_the_producing_machine():
    files = committed("data", "benchmarks/results")
    assert files, "no committed results found"
    bad = []
    for f in files:
        with open(os.path.join(ROOT, f), encoding="utf-8") as fh:
            for k, line in enumerate(fh, 1):
                if ABSOLUTE.search(line):
                    bad.append(f"{f}:{k}: {ABSOLUTE.search(line).group(0)[:80]}")
    assert not bad, "absolute or machine paths in committed results:\n" + "\n".join(bad[:20])


def test_the_path_pattern_catches_what_it_should():
    assert ABSOLUTE.search('"model_file": "/work/main/.venv/lib/python3.11/site-packages/x.gguf"')
    assert ABSOLUTE.search("--out /home/alice/runs/x")
    assert not ABSOLUTE.search("--out data/compare/smollm2-L128-layers and 1/sqrt(64), https://example.org/a/b")


def test_producer_names_the_version_the_checker_and_the_libraries():
    import certkit
    from certkit.kernel import CHECKER
    p = producer()
    assert p["certkit"] == certkit.__version__ and p["checker"] == CHECKER
    assert p["libraries"]["numpy"] and p["libraries"]["python-flint"]
    if os.path.isdir(os.path.join(ROOT, ".git")):
        head = subprocess.run(["git", "-C", ROOT, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
        assert p["commit"] == head and isinstance(p["modified"], bool)
    line = producer_line(p)
    assert line.startswith(f"certkit {certkit.__version__}") and CHECKER in line
    assert producer_line(None).startswith("producing version not recorded")


def test_portable_paths(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert portable_path(str(tmp_path / "data" / "x")) == os.path.join("data", "x")
    assert portable_path("rel/dir") == "rel/dir"
    assert portable_path("/somewhere/else/out") == "out"


def test_a_compare_summary_records_its_producer_and_a_relative_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "res"
    r = subprocess.run([sys.executable, "-m", "certkit", "compare", "--synthetic", "gaussian:n=16,d=4,mask=causal",
                        "--method", "kv:int8", "--out", str(out)], capture_output=True, text=True, timeout=300,
                       env={**os.environ, "PYTHONPATH": ROOT})
    assert r.returncode == 0, r.stderr
    s = json.loads((out / "summary.json").read_text())
    assert s["meta"]["producer"]["certkit"] and s["meta"]["command"].endswith("--out res")
    md = (out / "summary.md").read_text()
    assert "Produced by certkit" in md and str(tmp_path) not in md
    assert not ABSOLUTE.search(json.dumps(s["meta"]))
