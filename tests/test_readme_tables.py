"""Measured numbers in the README cannot go stale: each benchmark writes what it measured into a
committed file under benchmarks/results/, and the README must show exactly that."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_the_long_context_table_is_the_one_bench_long_wrote():
    rows = [line for line in (ROOT / "benchmarks" / "results" / "long.md").read_text(encoding="utf-8").splitlines()
            if line.startswith("|")]
    assert len(rows) >= 4, "benchmarks/results/long.md holds no table"
    missing = [row for row in rows if row not in README.splitlines()]
    assert not missing, f"README's long-context table differs from benchmarks/results/long.md: {missing}"


def test_the_thread_ratios_are_the_ones_bench_threads_measured():
    text = (ROOT / "benchmarks" / "results" / "threads.txt").read_text(encoding="utf-8")
    ratio = {name: float(m) for name, m in re.findall(r"^\s+(default|pinned|CERTKIT_THREADS)\S*.*?ratio\s+([\d.]+)",
                                                          text, re.M)}
    assert set(ratio) == {"default", "pinned", "CERTKIT_THREADS"}
    assert f"{ratio['default']:.2f}×" in README
    assert f"{ratio['CERTKIT_THREADS']:.1f}×" in README
