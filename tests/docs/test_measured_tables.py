"""Measured numbers in the guide cannot go stale: each benchmark writes what it measured into a
committed file under benchmarks/results/, and the guide page that quotes it (docs/guide/, the manual
the README points to) must show exactly that."""
import re

from paths import ROOT

GUIDE = ROOT / "docs" / "guide"
CERTIFY = (GUIDE / "certify.md").read_text(encoding="utf-8")      # the long-context table
CLUSTER = (GUIDE / "cluster.md").read_text(encoding="utf-8")      # the BLAS-thread ratios
COMPARE = (GUIDE / "compare.md").read_text(encoding="utf-8")      # the compare tables


def test_the_long_context_table_is_the_one_bench_long_wrote():
    rows = [line for line in (ROOT / "benchmarks" / "results" / "long.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("|")]
    assert len(rows) >= 4, "benchmarks/results/long.md holds no table"
    missing = [row for row in rows if row not in CERTIFY.splitlines()]
    assert not missing, f"docs/guide/certify.md's long-context table differs from benchmarks/results/long.md: {missing}"


def test_the_thread_ratios_are_the_ones_bench_threads_measured():
    text = (ROOT / "benchmarks" / "results" / "threads.txt").read_text(encoding="utf-8")
    ratio = {name: float(m) for name, m in re.findall(r"^\s+(default|pinned|CERTKIT_THREADS)\S*.*?ratio\s+([\d.]+)",
                                                          text, re.M)}
    assert set(ratio) == {"default", "pinned", "CERTKIT_THREADS"}
    assert f"{ratio['default']:.2f}×" in CLUSTER
    assert f"{ratio['CERTKIT_THREADS']:.1f}×" in CLUSTER


def per_method_table(summary):
    """The per-method table `certkit compare` wrote at the top of a summary.md."""
    text = (ROOT / summary).read_text(encoding="utf-8")
    section = text.split("## Per method", 1)[1].split("## Per head", 1)[0]
    return [line for line in section.splitlines() if line.startswith("|")]


def test_the_compare_tables_are_the_ones_certkit_compare_wrote():
    for summary in ("data/compare/smollm2-L128/summary.md", "data/compare/smollm2-L2048-evict/summary.md"):
        rows = per_method_table(summary)
        assert len(rows) >= 3, f"{summary} holds no per-method table"
        missing = [row for row in rows if row not in COMPARE.splitlines()]
        assert not missing, f"docs/guide/compare.md's table differs from {summary}: {missing}"
