"""The trusted kernel imports only the stdlib, numpy and python-flint, and nothing in certkit/
routes a number through mpmath.iv (NUMERICS §1)."""
import ast
import pathlib
import re
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
KERNEL = ROOT / "certkit" / "kernel"
ALLOWED = {"numpy", "flint"}


def _imports(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0], 0
        elif isinstance(node, ast.ImportFrom):
            yield (node.module or "").split(".")[0], node.level


def test_kernel_imports_stay_inside_the_boundary():
    stdlib = set(sys.stdlib_module_names)
    files = sorted(KERNEL.glob("*.py"))
    assert len(files) >= 8
    for f in files:
        for mod, level in _imports(f):
            if level > 0:
                continue            # relative: inside the kernel
            assert mod in stdlib or mod in ALLOWED, f"{f.name} imports {mod}"


def test_kernel_relative_imports_do_not_leave_the_kernel():
    for f in KERNEL.glob("*.py"):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level > 1:
                raise AssertionError(f"{f.name} imports from outside certkit/kernel")


def test_no_mpmath_interval_arithmetic_anywhere_in_certkit():
    pat = re.compile(r"mpmath\.iv|\biv\.(exp|log)|from mpmath import iv")
    for f in (ROOT / "certkit").rglob("*.py"):
        assert not pat.search(f.read_text()), f"{f} uses mpmath.iv"


def test_kernel_size_budget():
    lines = sum(len(f.read_text().splitlines()) for f in KERNEL.glob("*.py"))
    assert lines <= 1600, lines   # ARCHITECTURE's ~1,500 plus the parametric lattice rule



def test_trust_md_lists_every_kernel_file_with_its_line_count():
    text = (ROOT / "TRUST.md").read_text()
    total = 0
    for f in sorted(KERNEL.glob("*.py")):
        n = len(f.read_text().splitlines())
        total += n
        assert f"| `certkit/kernel/{f.name}` | {n} |" in text, f"TRUST.md: {f.name} should say {n} lines"
    assert f"({total:,} lines)" in text
