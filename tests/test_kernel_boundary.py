"""The trusted kernel imports only the stdlib, numpy and python-flint, and nothing in certkit/
routes a number through mpmath.iv (docs/numerics.md §1).  Outside the kernel, code reaches it only through
the package `certkit.kernel` (its __init__ is the whole public surface), and no module uses another
module's private (_underscore) names."""
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
    assert lines <= 1600, lines   # docs/design.md's ~1,500 plus the parametric lattice rule



def test_trust_md_lists_every_kernel_file_with_its_line_count():
    text = (ROOT / "TRUST.md").read_text()
    total = 0
    for f in sorted(KERNEL.glob("*.py")):
        n = len(f.read_text().splitlines())
        total += n
        assert f"| `certkit/kernel/{f.name}` | {n} |" in text, f"TRUST.md: {f.name} should say {n} lines"
    assert f"({total:,} lines)" in text


# ---------------------------------------------------------------- the kernel's one door, no private names
PACKAGE = "certkit"
KERNEL_PKG = "certkit.kernel"
SUBMODULES = {f.stem for f in KERNEL.glob("*.py") if f.stem != "__init__"}


def _module_name(path, root):
    """Dotted module name of a file under root (tests/x.py -> tests.x, certkit/a/__init__.py -> certkit.a)."""
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(node, path, root):
    """The absolute module an ImportFrom node imports from (relative levels resolved against path)."""
    if node.level == 0:
        return node.module or ""
    pkg = _module_name(path, root).split(".")
    if path.name != "__init__.py":
        pkg = pkg[:-1]
    base = pkg[:len(pkg) - (node.level - 1)] if node.level > 1 else pkg
    return ".".join(base + ([node.module] if node.module else []))


def _kernel_exports():
    """Names bound in certkit/kernel/__init__.py (imported there or defined there)."""
    names = set()
    for node in ast.parse((KERNEL / "__init__.py").read_text()).body:
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def kernel_submodule_imports(path, root=ROOT):
    """[(line, text)] where path imports a kernel submodule instead of the package certkit.kernel."""
    exported = _kernel_exports()
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(KERNEL_PKG + "."):
                    found.append((node.lineno, f"import {a.name}"))
        elif isinstance(node, ast.ImportFrom):
            mod = _absolute(node, path, root)
            if mod.startswith(KERNEL_PKG + "."):
                found.append((node.lineno, f"from {'.' * node.level}{node.module or ''} import ..."))
            elif mod == KERNEL_PKG:
                for a in node.names:
                    if a.name in SUBMODULES and a.name not in exported:
                        found.append((node.lineno, f"from {'.' * node.level}{node.module or ''} import {a.name}"))
    return found


def private_uses(path, root=ROOT):
    """[(line, text)] where path uses another certkit module's private name: `from certkit.x import _y`
    (relative forms included) or `m._y` with m bound by importing a certkit module (or certkit itself)."""
    tree = ast.parse(path.read_text(), str(path))
    private = lambda n: n.startswith("_") and not n.startswith("__") and n != "_"
    found, modules = [], set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            mod = _absolute(node, path, root)
            if mod.split(".")[0] != PACKAGE:
                continue
            for a in node.names:
                if private(a.name):
                    found.append((node.lineno, f"from {'.' * node.level}{node.module or ''} import {a.name}"))
                else:
                    modules.add(a.asname or a.name)
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == PACKAGE:
                    modules.add(a.asname or a.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in modules \
                and private(node.attr):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return found


def _python_files(*folders):
    return sorted(f for d in folders for f in (ROOT / d).rglob("*.py"))


def test_the_scans_catch_what_they_forbid(tmp_path):
    """The two scans flag every forbidden form (absolute, relative, submodule-as-name, attribute)
    and pass the allowed ones, on files written here (so the scans themselves can fail)."""
    bad = tmp_path / "certkit" / "search" / "bad.py"
    bad.parent.mkdir(parents=True)
    bad.write_text("from certkit.kernel.load import instance\n"
                   "import certkit.kernel.rows\n"
                   "from ..kernel.rule_lattice import theta_sum\n"
                   "from ..kernel import rule_chain\n"
                   "from .. import kernel\n"
                   "from ..kernel import check, theta_sum, Malformed\n"
                   "from certkit.geometry import _frame\n"
                   "from . import lower\n"
                   "from .upper import _svd_rank, svd_rank\n"
                   "import certkit.search.lower as low\n"
                   "import certkit\n"
                   "x = lower._prune_both, low._grow_step, certkit._HOMES, lower.__doc__, svd_rank._x\n")
    sub = [t for _, t in kernel_submodule_imports(bad, tmp_path)]
    priv = sorted(t for _, t in private_uses(bad, tmp_path))
    assert sub == ["from certkit.kernel.load import ...", "import certkit.kernel.rows",
                   "from ..kernel.rule_lattice import ...", "from ..kernel import rule_chain"]
    assert priv == sorted(["from certkit.geometry import _frame", "from .upper import _svd_rank",
                           "lower._prune_both", "low._grow_step", "certkit._HOMES", "svd_rank._x"])


def test_nothing_outside_the_kernel_imports_a_kernel_submodule():
    files = [f for f in _python_files("certkit", "tests", "benchmarks") if KERNEL not in f.parents]
    assert len(files) > 30
    bad = [f"{f.relative_to(ROOT)}:{line}: {text}" for f in files for line, text in kernel_submodule_imports(f)]
    assert not bad, "import the package certkit.kernel, not a submodule:\n" + "\n".join(bad)


def test_no_private_name_is_used_across_modules():
    files = _python_files("certkit", "tests")
    bad = [f"{f.relative_to(ROOT)}:{line}: {text}" for f in files for line, text in sorted(set(private_uses(f)))]
    assert not bad, "private names used outside their module:\n" + "\n".join(bad)
