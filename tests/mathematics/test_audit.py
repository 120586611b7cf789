"""certkit audit: exact values on a hand-computed head, agreement on the corpus, every flag can
fire, the in-memory entry points agree with the command line, and bad input raises a UserError
(exit 64, or 66 for a missing file) with a message naming the file / option."""
import json
import math
import pathlib

import numpy as np
import pytest

import certkit.auditing
import certkit.commands.audit
from certkit.auditing import compare, core, routes
from certkit.cli import main
from certkit.errors import UserError
from certkit.head import Head

from paths import ROOT



def _npz(path, **arrays):
    np.savez(path, **arrays)
    return str(path)


@pytest.fixture
def hand_head(tmp_path):
    """q = (+-1, 0); k = (0, 1), (0, -1), (2, 0).  With W = e1 (r = 1): x = +-1 about c = 0
    (rho_Q = 1); y in {0, 0, 2} about e = 1 (rho_K = 1); the complement coordinate is 0 for the
    queries (delta_2 = 0) and {1, -1, 0} for the keys (omega_2 = 2); osc = 0, tau = 0,
    Gamma = beta = 1/2, and 2 tanh(Gamma/2) = 0.4898 <= eps' = 1/2, so R_sym = 1."""
    return _npz(tmp_path / "hand.npz", Q=np.array([[1.0, 0], [-1, 0]]),
                K=np.array([[0.0, 1], [0, -1], [2, 0]]), beta=np.array([0.5]))


def _json(capsys, argv):
    code = main(["audit", "--json"] + argv)
    out = capsys.readouterr().out
    return code, json.loads(out)


def test_hand_computed_head(hand_head, capsys):
    code, recs = _json(capsys, ["--head", hand_head, "--eps", "1/2", "--r", "1"])
    assert code == 0
    (rec,) = recs
    rows = {r["quantity"]: r for r in rec["rows"]}
    want = {"rho_Q": 1, "rho_K": 1, "delta_2": 0, "omega_2": 2, "osc": 0, "tau": 0, "Gamma": 0.5, "epsp": 0.5}
    for q, v in want.items():
        lo, hi = rows[q]["arb"]
        assert lo <= v <= hi and hi - lo < 1e-15, (q, rows[q]["arb"])
        assert rows[q]["numpy_f64"] == pytest.approx(v, abs=1e-15)
        assert rows[q]["torch_f64"] == pytest.approx(v, abs=1e-15)
        assert rows[q]["torch_f32"] == pytest.approx(v, abs=1e-6)
    assert 2 * math.tanh(0.25) <= 0.5
    assert [rows["R_sym"][c] for c in ("numpy_f64", "torch_f32", "torch_f64", "kernel", "arb", "mpmath")] == [1] * 6
    assert rec["flags"] == []


def test_corpus_chain_certificates_have_no_flags(capsys):
    certs = sorted(str(p) for p in (ROOT / "data" / "certificates").glob("*chain.json"))
    assert certs
    code, recs = _json(capsys, certs)
    assert code == 0 and all(r["flags"] == [] for r in recs)
    for rec in recs:
        rows = {r["quantity"]: r for r in rec["rows"]}
        for q in routes.GEOMETRY:            # the kernel's bound is above the exact value
            assert rows[q]["kernel"][1] >= rows[q]["arb"][0]
        assert rows["R_sym"]["kernel"] >= rows["R_sym"]["arb"]
        # each certificate claims the kernel's R_sym
        doc = json.load(open(rec["source"]))
        assert int(doc["claim"]["bound"]) == rows["R_sym"]["kernel"]


def test_human_table(hand_head, capsys):
    assert main(["audit", "--head", hand_head, "--eps", "1/2", "--r", "0,1"]) == 0
    out = capsys.readouterr()
    assert out.out.count("no flags") == 2 and "quantity" in out.out and "2 audits, 0 flags" in out.err


def test_unsound_kernel_is_flagged(hand_head, capsys, monkeypatch):
    real = routes.chain_enclosures

    def halved(*a, **k):
        g = real(*a, **k)
        g["rho_Q"] = g["rho_Q"] / 2
        return g
    monkeypatch.setattr(routes, "chain_enclosures", halved)
    code, (rec,) = _json(capsys, ["--head", hand_head, "--eps", "1/2", "--r", "1"])
    assert code == 1 and any(f.startswith("unsound: kernel upper bound of rho_Q") for f in rec["flags"])


def test_route_disagreement_is_flagged(hand_head, capsys, monkeypatch):
    real = routes.chain_mpmath

    def off(*a, **k):
        import mpmath
        res = real(*a, **k)
        with mpmath.workdps(50):          # a 1e-20 relative disagreement, far below float resolution
            res["Gamma"] = res["Gamma"] * (1 + mpmath.mpf(10) ** -20)
        return res
    monkeypatch.setattr(routes, "chain_mpmath", off)
    code, (rec,) = _json(capsys, ["--head", hand_head, "--eps", "1/2", "--r", "1"])
    assert code == 1 and any(f.startswith("routes: Gamma") for f in rec["flags"])


def test_float_outside_enclosure_is_flagged(hand_head, capsys, monkeypatch):
    real = routes.float_geometry

    def bad(be, *a):
        g = real(be, *a)
        if be.name == "torch_f32":
            g["rho_K"] = g["rho_K"] * 1.01
        return g
    monkeypatch.setattr(routes, "float_geometry", bad)
    code, (rec,) = _json(capsys, ["--head", hand_head, "--eps", "1/2", "--r", "1"])
    assert code == 1 and any(f.startswith("outside: rho_K torch_f32") for f in rec["flags"])


def test_ordering_violation_is_flagged(hand_head, capsys, monkeypatch):
    real = routes.geometry.residual_profile

    def swapped(*a, **k):
        import dataclasses
        prof = real(*a, **k)
        row = prof.rows[0]
        prof.rows[0] = dataclasses.replace(row, tau_exact=row.tau_width + 1e-3)
        return prof
    monkeypatch.setattr(routes.geometry, "residual_profile", swapped)
    code, (rec,) = _json(capsys, ["--head", hand_head, "--eps", "1/2", "--r", "1"])
    assert code == 1 and any(f.startswith("ordering: r = 0") for f in rec["flags"])


@pytest.mark.parametrize("argv, needle, code", [
    (["--head", "nowhere.npz"], "nowhere.npz: no such file", 66),
    (["nowhere.json"], "nowhere.json: no such file", 66),
    (["--head", "HAND", "--eps", "2"], "--eps: 2 is outside (0, 1)", 64),
    (["--head", "HAND", "--eps", "x"], "--eps: 'x' is not a number", 64),
    (["--head", "HAND", "--beta", "fast"], "--beta: 'fast'", 64),
    (["--head", "HAND", "--r", "x"], "--r 'x'", 64),
    (["--head", "HAND", "--r", "-1"], "--r '-1'", 64),
    (["--head", "NOK"], "missing array 'K'", 64),
    (["--head", "OBJ"], "unreadable .npz", 64),
    (["--head", "TXT"], "must be .npz or .safetensors", 64),
    (["--head", "NOBETA"], "(--beta on the command line)", 64),
    ([], "nothing to audit", 64),
    (["MALF"], "MALFORMED $.claim", 64),
    (["BADWIT"], "MALFORMED $.witness", 64),
])
def test_bad_input_is_a_user_error(argv, needle, code, hand_head, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    nok = _npz(tmp_path / "nok.npz", Q=np.ones((2, 2)))
    nobeta = _npz(tmp_path / "nobeta.npz", Q=np.ones((2, 2)), K=np.ones((3, 2)))
    obj = tmp_path / "obj.npz"
    np.savez(obj, Q=np.array([object()], dtype=object), K=np.ones((2, 2)))
    txt = tmp_path / "h.txt"
    txt.write_text("Q")
    malf = tmp_path / "m.json"
    malf.write_text(json.dumps({"format": "certkit-certificate", "version": "1.0", "kind": "upper-chain",
                                "claim": {}, "instance": {}, "witness": {}, "assumptions": []}))
    badwit = tmp_path / "badwit.json"
    doc = json.loads((ROOT / "data" / "certificates" / "keyonly-n64-chain.json").read_text())
    doc["witness"] = {"unknown_field": []}
    badwit.write_text(json.dumps(doc))
    sub = {"HAND": hand_head, "NOK": nok, "OBJ": str(obj), "TXT": str(txt), "NOBETA": nobeta, "MALF": str(malf),
           "BADWIT": str(badwit)}
    argv = [sub.get(a, a) for a in argv]
    # the command raises the UserError (its exit code and a message naming the file / option) ...
    with pytest.raises(UserError) as e:
        certkit.commands.audit.run(_args(argv))
    assert e.value.exit_code == code and needle in str(e.value)
    # ... and the command line prints it on one line with that exit status
    assert main(["audit"] + argv) == code
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def _args(argv):
    import argparse
    p = argparse.ArgumentParser()
    certkit.commands.audit.add_arguments(p)
    return p.parse_args(argv)


def test_in_memory_entry_points_equal_the_command_line(hand_head, capsys):
    """audit_head / audit_certificate return the records of --json (up to seconds and the source
    label), and flags() lists the disagreements."""
    strip = lambda recs: [{k: v for k, v in r.items() if k not in ("seconds", "source")} for r in recs]
    code, cli = _json(capsys, ["--head", hand_head, "--eps", "1/2", "--eps", "1/4", "--r", "0,1"])
    head = Head.from_file(hand_head)
    recs = certkit.auditing.audit_head(head, ["1/2", 0.25], rs=[0, 1])
    assert code == 0 and strip(recs) == strip(cli) and len(recs) == 4
    assert [r["source"] for r in recs] == [f"hand (eps = {e})" for e in ("1/2", "1/2", "1/4", "1/4")]
    assert certkit.auditing.flags(recs) == []
    cert = str(ROOT / "data" / "certificates" / "keyonly-n64-chain.json")
    code, cli = _json(capsys, [cert])
    assert strip(certkit.auditing.audit_certificate(cert)) == strip(cli)
    no_torch = certkit.auditing.audit_head(head, "1/2", rs=1, with_torch=False)
    assert no_torch[0]["torch"] is False and all(r["torch_f32"] is None for r in no_torch[0]["rows"])
    with pytest.raises(core.NotAuditable, match="parametric"):
        certkit.auditing.audit_certificate(str(ROOT / "data" / "certificates" / "sphere-d3-lattice.json"))
    with pytest.raises(UserError, match="expected a certkit.Head"):
        certkit.auditing.audit_head({"Q": np.eye(2)}, "1/2")
    with pytest.raises(UserError, match="r 'x'"):
        certkit.auditing.audit_head(head, "1/2", rs="x")
    with pytest.raises(UserError, match="head 'wide' cannot be stated in a certificate: head dimension d = 513"):
        certkit.auditing.audit_head(Head.from_arrays(np.eye(2, 513), np.eye(2, 513), beta=1, name="wide"), "1/2")


def test_flags_lists_each_disagreement(hand_head, monkeypatch):
    real = routes.float_geometry

    def bad(be, *a):
        g = real(be, *a)
        if be.name == "numpy_f64":
            g["rho_K"] = g["rho_K"] * 1.01
        return g
    monkeypatch.setattr(routes, "float_geometry", bad)
    recs = certkit.auditing.audit_head(Head.from_file(hand_head), "1/2", rs=1, with_torch=False)
    found = compare.flags(recs)
    assert found and all(f["kind"] == "outside" and f["source"] == "hand (eps = 1/2)" and f["r"] == 1 for f in found)
    assert any(f["message"].startswith("outside: rho_K numpy_f64") for f in found)


def test_audit_package_imports_light():
    import subprocess
    import sys
    out = subprocess.run([sys.executable, "-c", "import sys, argparse, certkit.auditing, certkit.commands.audit as a; "
                          "a.add_arguments(argparse.ArgumentParser()); "
                          "print(','.join(m for m in ('sympy', 'torch', 'scipy', 'mpmath') if m in sys.modules))"],
                         capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""


def test_committed_head_files_read(capsys):
    heads = sorted((ROOT / "data" / "heads").iterdir())
    assert any(p.suffix == ".npz" for p in heads) and any(p.suffix == ".safetensors" for p in heads)
    for p in heads:
        h = Head.from_file(str(p))
        assert h.queries.shape[1] == h.keys.shape[1] and h.beta > 0


def test_head_files_are_regenerated_byte_identically(tmp_path):
    from certkit import corpus
    for p in corpus.write_heads(str(tmp_path)):
        name = pathlib.Path(p).name
        assert (ROOT / "data" / "heads" / name).read_bytes() == pathlib.Path(p).read_bytes(), name


def test_negative_eps_prime_compares_exactly(capsys):
    """r where tau > eps: eps' < 0 must be compared with its sign (regression: man_exp drops it)."""
    import mpmath
    from fractions import Fraction
    from certkit.symbolic.arb_eval import mpf_fraction
    assert mpf_fraction(mpmath.mpf(-3) / 4) == Fraction(-3, 4) and mpf_fraction(mpmath.mpf(0)) == 0
    code, recs = _json(capsys, ["--head", str(ROOT / "data" / "heads" / "gauss-n128-d16-beta4.safetensors"),
                                "--r", "3"])
    rows = {r["quantity"]: r for r in recs[0]["rows"]}
    assert rows["epsp"]["arb"][1] < 0 and code == 0 and recs[0]["flags"] == []
