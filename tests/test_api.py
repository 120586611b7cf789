"""The public API: doctests, the examples of docs/api.md and README.md run as written, and the
in-memory objects agree with the command line and the kernel."""
import doctest
import importlib
import json
import os
import re
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import certkit

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def python_blocks(path):
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("module", ["certkit", "certkit.api", "certkit.head", "certkit.numbers"])
def test_doctests(module):
    res = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


@pytest.mark.parametrize("path", ["docs/api.md", "README.md"])
def test_documented_examples_run(path, tmp_path, monkeypatch):
    blocks = python_blocks(path)
    assert blocks, f"{path} has no python examples"
    monkeypatch.chdir(tmp_path)
    for code in blocks:
        exec(compile(code, path, "exec"), {"__name__": "__example__"})


def test_public_names_and_light_import():
    for name in certkit.__all__:
        assert getattr(certkit, name) is not None
    out = subprocess.run([sys.executable, "-c", "import certkit, sys; certkit.Head; certkit.verify; "
                          "print(','.join(m for m in ('scipy', 'sympy', 'matplotlib', 'torch') if m in sys.modules))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_public_functions_are_not_shadowed_by_modules():
    import certkit.commands.certify, certkit.commands.audit, certkit.commands.scale  # noqa: F401, E401
    assert callable(certkit.certify) and callable(certkit.scale) and callable(certkit.audit)


def test_float_eps_is_its_shortest_decimal_and_the_claim_says_so():
    head = certkit.Head.from_arrays(np.eye(3) * 2, np.eye(3) * 2, beta=1)
    s = certkit.certify(head, eps=0.1)
    assert s.eps == Fraction(1, 10)
    for c in (s.lower, s.upper):
        assert json.loads(c.document)["claim"]["eps"] == "1/10"
        assert "at eps = 1/10" in c.verdict.message


def test_saved_bytes_equal_the_command_line(tmp_path):
    h = certkit.Head.from_arrays(np.eye(4) * 3, np.eye(4) * 3, beta=1, name="eye4")
    h.save(str(tmp_path / "eye4.npz"))
    r = subprocess.run([sys.executable, "-m", "certkit", "certify", str(tmp_path / "eye4.npz"), "--eps", "1/4",
                        "--peers", "none", "--out", str(tmp_path / "cli")], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    s = certkit.certify(certkit.Head.from_file(str(tmp_path / "eye4.npz")), eps="1/4")
    paths = s.save(str(tmp_path / "api"), prefix="eps-1_4.")
    for side, p in paths.items():
        cli = tmp_path / "cli" / "eye4" / f"eps-1_4.{side}.json"
        assert cli.read_bytes() == open(p, "rb").read()
        assert certkit.verify(str(cli)).status == "VERIFIED"


def test_verify_forms(tmp_path):
    head = certkit.Head.from_arrays(np.eye(3) * 2, np.eye(3) * 2, beta=1)
    s = certkit.certify(head, eps="1/4")
    s.save(str(tmp_path))
    assert certkit.verify(s.upper).status == "VERIFIED"
    assert [v.status for v in certkit.verify(str(tmp_path))] == ["VERIFIED", "VERIFIED"]
    doc = json.loads(s.upper.document)
    doc["claim"]["bound"] = str(s.upper.bound - 1)          # a false claim: one rank fewer
    bad = tmp_path / "bad" / "upper.json"
    bad.parent.mkdir()
    bad.write_text(json.dumps(doc))
    for name, raw in s.upper.sidecars.items():
        (bad.parent / name).write_bytes(raw)
    v = certkit.verify(str(bad))
    assert (v.status, v.exit_code) == ("REJECTED", 1)


def test_bad_input_names_the_value():
    head = certkit.Head.from_arrays(np.eye(2), np.eye(2), beta=1)
    with pytest.raises(certkit.UserError, match="eps"):
        certkit.certify(head, eps=1.5)
    with pytest.raises(certkit.UserError, match="queries .* keys"):
        certkit.Head.from_arrays(np.eye(2), np.ones((2, 3)), beta=1)
    with pytest.raises(certkit.UserError, match="beta"):
        certkit.Head.from_arrays(np.eye(2), np.eye(2), beta="-1")


def test_a_missing_extra_is_named():
    code = ("import sys; sys.modules['scipy'] = None\n"
            "import numpy as np, certkit\n"
            "h = certkit.Head.from_arrays(np.eye(2), np.eye(2), beta=1)\n"
            "print(certkit.verify('" + os.path.join(ROOT, "data", "certificates", "gauss-n32-factor.json") + "').status)\n"
            "try:\n    certkit.certify(h, eps='1/4')\nexcept ModuleNotFoundError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.splitlines()[0] == "VERIFIED"
    assert "needs the 'search' extra: pip install 'certkit[search]'" in out


def test_a_kept_certificate_is_checked_once(monkeypatch):
    """certify() hands the writer's Verdict to the Certificate: the kernel checks each candidate
    once, so each kept certificate exactly once (no second check when it is read back)."""
    import certkit.certificate
    import certkit.kernel
    import certkit.search.writer
    calls = []

    def counting(path, route=certkit.kernel.DEFAULT_ROUTE, time_limit=None):
        v = check(path, route, time_limit)
        calls.append(v.status)
        return v
    check = certkit.kernel.check
    for module in (certkit.kernel, certkit.search.writer, certkit.certificate):
        monkeypatch.setattr(module, "check", counting)
    Q = np.array([[4.0, 0.0], [0.0, 4.0], [-4.0, 0.0]])
    s = certkit.certify(certkit.Head.from_arrays(Q, Q, beta=2), eps="1/4")
    kept = [c for c in (s.lower, s.upper) if c is not None]
    assert len(kept) == 2 and all(c.verdict.status == "VERIFIED" for c in kept)
    assert calls.count("VERIFIED") == len(kept)
    assert len(calls) == len(s.lower.search["tried"]) + 1        # every lower candidate tried, one upper
