"""The public API: doctests, the examples of docs/api.md, README.md and docs/guide/ run as written, and the
in-memory objects agree with the command line and the kernel."""
import doctest
import importlib
import json
import os
import pathlib
import re
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest

import certkit

import paths

ROOT = str(paths.ROOT)


def python_blocks(path):
    text = open(os.path.join(ROOT, path), encoding="utf-8").read()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


@pytest.mark.parametrize("module", ["certkit", "certkit.api", "certkit.head", "certkit.numbers"])
def test_doctests(module):
    res = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert res.attempted > 0 and res.failed == 0


GUIDE_EXAMPLES = ["docs/guide/python.md", "docs/guide/model-runs.md", "docs/guide/compare.md"]   # its python blocks


def test_every_guide_page_with_python_examples_is_run():
    pages = sorted(f"docs/guide/{p.name}" for p in pathlib.Path(ROOT, "docs", "guide").glob("*.md")
                   if "```python" in p.read_text(encoding="utf-8"))
    assert pages == sorted(GUIDE_EXAMPLES)


@pytest.mark.parametrize("path", ["docs/api.md", "README.md", *GUIDE_EXAMPLES])
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
    import certkit.driver, certkit.commands.audit, certkit.auditing, certkit.scaling.laws, certkit.scaling.growth, certkit.commands.scale  # noqa: F401, E401
    import certkit.commands.compare, certkit.search.compare  # noqa: F401, E401
    assert callable(certkit.certify) and callable(certkit.scale) and callable(certkit.audit)
    assert callable(certkit.compare)


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
    import certkit.kernel
    calls = []

    def counting(path, route=certkit.kernel.DEFAULT_ROUTE, choices=None, data=None):
        v = check(path, route, choices)
        calls.append(v.status)
        return v
    check = certkit.kernel.check
    monkeypatch.setattr(certkit.kernel, "check", counting)      # every certkit caller goes through certkit.choices
    Q = np.array([[4.0, 0.0], [0.0, 4.0], [-4.0, 0.0]])
    s = certkit.certify(certkit.Head.from_arrays(Q, Q, beta=2), eps="1/4")
    kept = [c for c in (s.lower, s.upper) if c is not None]
    assert len(kept) == 2 and all(c.verdict.status == "VERIFIED" for c in kept)
    assert calls.count("VERIFIED") == len(kept)
    assert len(calls) == len(s.lower.search["tried"]) + 1        # every lower candidate tried, one upper


# ---------------------------------------------------------------- results as records
def test_tables_result_is_frozen_records_with_the_command_lines_bytes(tmp_path):
    import dataclasses
    from certkit.results import Table, TablesResult
    t = certkit.tables(names=["theta_m", "c_m"], out=tmp_path / "t", formats=["csv"])
    assert isinstance(t, TablesResult) and set(t.tables) == {"theta_m", "c_m"} and isinstance(t["c_m"], Table)
    for name in ("theta_m", "c_m"):
        committed = (pathlib.Path(ROOT) / "data" / "tables" / f"{name}.csv").read_text()
        assert t[name].to_csv() == committed == (tmp_path / "t" / f"{name}.csv").read_text()
        assert t[name].title and t[name].columns == tuple(committed.splitlines()[0].split(","))
    assert sorted(os.listdir(tmp_path / "t")) == ["c_m.csv", "producer.json", "theta_m.csv"]
    assert len(t.rows) == len(t["theta_m"].rows) + len(t["c_m"].rows) == 128 + len(t["c_m"].rows)
    assert t.rows[0] == {"table": "theta_m", **t["theta_m"].rows[0]} and t.fields()[0] == "table"
    written = t.to_csv(tmp_path / "all.csv")
    assert written == (tmp_path / "all.csv").read_text() and written.count("\n") == len(t.rows) + 1
    with pytest.raises(dataclasses.FrozenInstanceError):
        t.rows = []                                      # type: ignore[misc]


def test_audit_result_rows_flatten_the_records():
    from certkit.results import AuditResult
    head = certkit.Head.from_arrays(np.eye(4) * 2, np.eye(4) * 2, beta=1, name="eye4")
    a = certkit.audit(head, eps=["1/2", "1/4"], with_torch=False)
    assert isinstance(a, AuditResult) and len(a.records) == 2 and a.flags == []
    assert len(a.rows) == sum(len(rec["rows"]) for rec in a.records)
    rec = a.records[1]
    by_q = {row["quantity"]: row for row in a.rows if row["eps"] == rec["eps"]}
    for q in rec["rows"]:
        row = by_q[q["quantity"]]
        assert row["source"] == rec["source"] and row["r"] == rec["r"] and row["numpy_f64"] == q["numpy_f64"]
        for c in ("kernel", "arb"):
            want = q[c] if isinstance(q[c], list) else [q[c], q[c]]
            assert [row[c + "_lo"], row[c + "_hi"]] == want
    assert a.fields()[:4] == ["source", "eps", "r", "quantity"] and "kernel" not in a.fields()
    assert a.to_csv().count("\n") == len(a.rows) + 1


def test_audit_of_a_certificate_file_and_its_flags():
    a = certkit.audit(os.path.join(ROOT, "data", "certificates", "gauss-n128-d1-chain.json"), with_torch=False)
    assert len(a.records) == 1 and a.records[0]["source"].endswith("gauss-n128-d1-chain.json")
    assert a.flags == [f for rec in a.records for f in rec["flags"]] == []


def test_scale_result_keeps_its_certificates_when_asked(tmp_path):
    law = certkit.scale("sphere", points=3, eps="7/20", out=tmp_path / "s")
    assert law.out == str(tmp_path / "s") and law.causal is None and law.eps == Fraction(7, 20)
    assert law.crosscheck and all(r["agree"] for r in law.crosscheck)       # by default, as `certkit scale`
    assert [r["family"] for r in law.rows] == ["sphere"] * 9 and all(r["verdict"] == "VERIFIED" for r in law.rows)
    for r in law.rows:
        assert certkit.verify(str(tmp_path / "s" / r["certificate"])).status == "VERIFIED"
    assert law.to_csv().splitlines()[0].startswith("family,dim,exponent,beta,x,params,M")


def test_frame_needs_pandas_and_names_it(monkeypatch):
    from certkit.results import Records
    rec = Records(rows=[{"a": 1, "b": None}, {"a": 2, "c": "x"}], columns=("b", "a"))
    assert rec.fields() == ["b", "a", "c"] and rec.to_csv() == "b,a,c\n,1,\n,2,x\n"
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ModuleNotFoundError, match="needs pandas.*pip install pandas"):
        rec.frame()
    import types
    fake = types.ModuleType("pandas")
    fake.DataFrame = lambda rows, columns: ("frame", rows, columns)      # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pandas", fake)
    assert rec.frame() == ("frame", rec.rows, ["b", "a", "c"])


@pytest.mark.parametrize("name", ["audit", "scale", "calibrate", "tables"])
def test_parameters_are_keyword_only_and_checked_by_python(name):
    import inspect
    fn = getattr(certkit, name)
    params = list(inspect.signature(fn).parameters.values())
    assert all(p.kind is p.KEYWORD_ONLY for p in params[2 if name == "audit" else 1:])
    assert not any(p.kind in (p.VAR_KEYWORD, p.VAR_POSITIONAL) for p in params)
    assert inspect.signature(fn).return_annotation.__name__.endswith("Result")
    with pytest.raises(TypeError, match="unexpected keyword argument 'bogus'"):
        fn(bogus=1)
