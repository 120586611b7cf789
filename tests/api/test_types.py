"""Type hints: every public function of the public API and of the kernel's two faces is annotated,
and mypy (configured in pyproject.toml, [tool.mypy]) finds no error in the files it checks."""
import ast
import importlib.util
import os
import subprocess
import sys

import pytest

from paths import ROOT

ANNOTATED = ["certkit/api.py", "certkit/results.py", "certkit/certificate.py", "certkit/head.py",
             "certkit/numbers.py", "certkit/kernel/check.py"]
KERNEL_FACES = ["certkit/kernel/__init__.py", "certkit/kernel/numerics.py"]


def unannotated(tree, only=None):
    """'name(param)' / 'name -> ?' for each public function or method of tree (or those named in only)
    with a parameter (self and cls aside) or a return type not annotated."""
    out = []
    scopes = [(tree, "")] + [(c, c.name + ".") for c in tree.body if isinstance(c, ast.ClassDef)
                             and not c.name.startswith("_")]
    for scope, prefix in scopes:
        for f in scope.body:
            if not isinstance(f, ast.FunctionDef) or (f.name.startswith("_") and f.name not in ("__init__",)):
                continue
            if only is not None and f.name not in only:
                continue
            a = f.args
            params = [p for p in a.posonlyargs + a.args + a.kwonlyargs if p.arg not in ("self", "cls")]
            params += [p for p in (a.vararg, a.kwarg) if p is not None]
            out += [f"{prefix}{f.name}({p.arg})" for p in params if p.annotation is None]
            if f.returns is None:
                out.append(f"{prefix}{f.name} -> ?")
    return out


def face_functions():
    """{kernel file: names it defines that certkit.kernel or certkit.kernel.numerics exports}."""
    found = {}
    for face in KERNEL_FACES:
        for node in ast.parse((ROOT / face).read_text()).body:
            if isinstance(node, ast.ImportFrom):
                for a in node.names:
                    found.setdefault(f"certkit/kernel/{node.module}.py", set()).add(a.name)
    return found


def test_the_scan_finds_a_missing_hint():
    tree = ast.parse("def f(a: int, b) -> int: ...\ndef g(x: int): ...\ndef _h(y): ...\n"
                     "class C:\n    def m(self, z: int) -> None: ...\n    def n(self, *args): ...\n")
    assert unannotated(tree) == ["f(b)", "g -> ?", "C.n(args)", "C.n -> ?"]


def test_every_public_function_is_annotated():
    missing = [f"{path}: {m}" for path in ANNOTATED for m in unannotated(ast.parse((ROOT / path).read_text()))]
    for path, names in face_functions().items():
        missing += [f"{path}: {m}" for m in unannotated(ast.parse((ROOT / path).read_text()), names)]
    extract = ast.parse((ROOT / "certkit/models/extract.py").read_text())
    missing += [f"certkit/models/extract.py: {m}" for m in unannotated(extract, {"heads_from_model"})]
    assert not missing, "public functions without type hints:\n" + "\n".join(missing)


def test_mypy_passes_on_the_public_api_and_the_kernel(tmp_path):
    if importlib.util.find_spec("mypy") is None:
        pytest.skip("mypy is not installed (it comes with the 'test' extra: pip install -e '.[test]')")
    env = {**os.environ, "MYPY_CACHE_DIR": str(tmp_path / "cache")}
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml")],
                       cwd=ROOT, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0 and "Success" in r.stdout, r.stdout + r.stderr
    checked = int(r.stdout.split("in ")[-1].split()[0])
    assert checked >= 15, r.stdout                   # the kernel (11 files) and the API files, not an empty selection
