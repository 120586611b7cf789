"""The trusted kernel imports only the stdlib, numpy and python-flint, never calls LAPACK (np.linalg,
scipy), and nothing in certkit/ routes a number through mpmath.iv (docs/numerics.md §1).  Outside the kernel, code reaches it only through
its two faces: the door `certkit.kernel` (check, Verdict, KINDS, EXIT, the routes, the verdict exceptions)
and `certkit.kernel.numerics` (re-exports of what producers borrow); no module uses another module's
private (_underscore) names."""
import ast
import inspect
import re
import sys

import pytest

from paths import ROOT

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


LAPACK_CALL = re.compile(r"linalg|scipy")       # np.linalg, numpy.linalg, from numpy import linalg, scipy.*


def test_the_kernel_never_chooses_no_lapack_under_certkit_kernel():
    """The kernel makes no float choice: the approximate inverse and SVD two rules bound come from the
    oracle handed to check() (certkit/choices.py), so no file under certkit/kernel/ names numpy's or
    scipy's linear algebra (the scan itself can fail: it flags the forms it forbids)."""
    for bad in ("np.linalg.svd(X)", "numpy.linalg.pinv", "from numpy import linalg", "import scipy.linalg",
                "getattr(np, 'linalg')"):
        assert LAPACK_CALL.search(bad), bad
    found = [f"{f.name}:{i}" for f in sorted(KERNEL.glob("*.py"))
             for i, line in enumerate(f.read_text().splitlines(), 1) if LAPACK_CALL.search(line)]
    assert not found, f"LAPACK under certkit/kernel/ (choices belong to certkit.choices): {found}"


def test_kernel_size_budget():
    lines = sum(len(f.read_text().splitlines()) for f in KERNEL.glob("*.py"))
    assert lines <= 1600, lines   # docs/design.md's ~1,500 plus the parametric lattice rule


KERNEL_LINE_LENGTH = 120      # pyproject.toml [tool.ruff] line-length: the budget counts lines of at most this width


def test_kernel_lines_are_at_most_120_characters_so_the_budget_cannot_be_met_by_packing():
    long = [f"{f.name}:{i}: {len(line)}" for f in sorted(KERNEL.glob("*.py"))
            for i, line in enumerate(f.read_text().splitlines(), 1) if len(line) > KERNEL_LINE_LENGTH]
    assert not long, long
    assert f"line-length = {KERNEL_LINE_LENGTH}" in (ROOT / "pyproject.toml").read_text()



def test_trust_md_lists_every_kernel_file_with_its_line_count():
    text = (ROOT / "TRUST.md").read_text()
    total = 0
    for f in sorted(KERNEL.glob("*.py")):
        n = len(f.read_text().splitlines())
        total += n
        assert f"| `certkit/kernel/{f.name}` | {n} |" in text, f"TRUST.md: {f.name} should say {n} lines"
    assert f"({total:,} lines)" in text


# ---------------------------------------------------------------- the kernel's two faces, no private names
PACKAGE = "certkit"
KERNEL_PKG = "certkit.kernel"
FACES = {KERNEL_PKG, KERNEL_PKG + ".numerics"}          # the only kernel modules code outside it imports
SUBMODULES = {f.stem for f in KERNEL.glob("*.py") if f.stem != "__init__"}
DOOR = {"check", "Verdict", "KINDS", "EXIT", "DEFAULT_ROUTE", "ROUTES", "CHECKER", "TimeLimit", "Malformed", "Unsupported",
        "Rejected"}


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


def _kernel_exports(face="__init__.py"):
    """Names bound in a file of certkit/kernel/ (imported there or defined there)."""
    names = set()
    for node in ast.parse((KERNEL / face).read_text()).body:
        if isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def kernel_submodule_imports(path, root=ROOT):
    """[(line, text)] where path imports a kernel module other than its two faces, certkit.kernel and
    certkit.kernel.numerics."""
    exported = _kernel_exports() | {"numerics"}
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith(KERNEL_PKG + ".") and a.name not in FACES:
                    found.append((node.lineno, f"import {a.name}"))
        elif isinstance(node, ast.ImportFrom):
            mod = _absolute(node, path, root)
            if mod.startswith(KERNEL_PKG + ".") and mod not in FACES:
                found.append((node.lineno, f"from {'.' * node.level}{node.module or ''} import ..."))
            elif mod == KERNEL_PKG:
                for a in node.names:
                    if a.name not in exported:
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
                   "from ..kernel.numerics import theta_sum\n"
                   "from certkit.kernel.numerics import enclose_all\n"
                   "import certkit.kernel.numerics\n"
                   "from ..kernel import numerics\n"
                   "from ..kernel.numerics.x import y\n"
                   "from certkit.geometry import _frame\n"
                   "from . import lower\n"
                   "from .upper import _svd_rank, svd_rank\n"
                   "import certkit.search.lower as low\n"
                   "import certkit\n"
                   "x = lower._prune_both, low._grow_step, certkit._HOMES, lower.__doc__, svd_rank._x\n")
    sub = [t for _, t in kernel_submodule_imports(bad, tmp_path)]
    priv = sorted(t for _, t in private_uses(bad, tmp_path))
    assert sub == ["from certkit.kernel.load import ...", "import certkit.kernel.rows",
                   "from ..kernel.rule_lattice import ...", "from ..kernel import rule_chain",
                   "from ..kernel import theta_sum", "from ..kernel.numerics.x import ..."]
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


def test_certkit_calls_the_door_through_certkit_choices():
    """Every caller of the kernel's check() in certkit, the golden builders and the benchmarks goes
    through certkit.choices.check, which hands it the oracle of the float choices (without one, two
    kinds are UNSUPPORTED): no other file imports check from certkit.kernel or calls kernel.check."""
    files = [f for f in _python_files("certkit", "benchmarks", "tests/golden")
             if KERNEL not in f.parents and f != ROOT / "certkit" / "choices.py"]
    bad = []
    for f in files:
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            if isinstance(node, ast.ImportFrom) and _absolute(node, f, ROOT) == KERNEL_PKG \
                    and any(a.name == "check" for a in node.names):
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno}: imports check from {KERNEL_PKG}")
            elif isinstance(node, ast.Attribute) and node.attr == "check" and isinstance(node.value, ast.Name) \
                    and node.value.id == "kernel":
                bad.append(f"{f.relative_to(ROOT)}:{node.lineno}: kernel.check")
    assert len(files) > 30 and not bad, "call certkit.choices.check:\n" + "\n".join(bad)


def test_the_door_exports_only_what_verifying_needs():
    """certkit.kernel binds exactly the door's names; everything producers borrow is in the face."""
    import certkit.kernel
    import certkit.kernel.numerics
    assert _kernel_exports() == DOOR
    assert {n for n, v in vars(certkit.kernel).items() if not n.startswith("_") and not inspect.ismodule(v)} == DOOR
    assert not DOOR & _kernel_exports("numerics.py")
    for name in _kernel_exports("numerics.py"):
        assert getattr(certkit.kernel.numerics, name) is not None


def test_the_numerics_face_is_re_exports_only():
    """numerics.py holds a docstring and relative imports from kernel modules: a face, no code."""
    body = ast.parse((KERNEL / "numerics.py").read_text()).body
    assert isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
    assert len(body) > 5 and all(isinstance(n, ast.ImportFrom) and n.level == 1 and n.module in SUBMODULES
                                 for n in body[1:])


def test_no_verdict_is_made_outside_the_kernel():
    """Only kernel.check makes a Verdict; the one exception is choices.check's UNSUPPORTED "resource limit" when
    the caller's timer fires before the kernel's check has begun (nothing was checked, nothing can be VERIFIED)."""
    import re
    root = ROOT / "certkit"
    made = sorted(str(p.relative_to(root)) for p in root.rglob("*.py")
                  if "kernel" not in p.parts and re.search(r"\bVerdict\(", p.read_text()))
    assert made == ["choices.py"], made
    text = (root / "choices.py").read_text()
    assert len(re.findall(r"\bVerdict\(", text)) == 1 and 'Verdict("UNSUPPORTED", f"resource limit' in text


def test_a_certificate_holds_only_the_kernels_verdict_on_its_bytes(tmp_path):
    import numpy as np
    import certkit
    from certkit.certificate import Certificate
    from certkit.kernel import Verdict
    h = certkit.Head.from_arrays(np.eye(3), np.eye(3), beta=1)
    c = certkit.compare(h, "kv:int8", out=tmp_path / "c.json")
    v = c.verdict
    assert Certificate.read(str(tmp_path / "c.json"), verdict=v).verdict is v
    forged = Verdict("VERIFIED", v.message, {**v.details, "sha256": "0" * 64})
    with pytest.raises(ValueError, match="not the kernel's on these bytes"):
        Certificate.read(str(tmp_path / "c.json"), verdict=forged)
