"""certkit audit: exact values on a hand-computed head, agreement on the corpus, every flag can
fire, and bad input gives exit 2 with a message naming the file / option."""
import json
import math
import pathlib

import numpy as np
import pytest

from certkit.audit import audit as A
from certkit.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[1]


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
        for q in A.GEOMETRY:            # the kernel's bound is above the exact value
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
    real = A.enclosures

    def halved(*a, **k):
        g = real(*a, **k)
        g["rho_Q"] = g["rho_Q"] / 2
        return g
    monkeypatch.setattr(A, "enclosures", halved)
    code, (rec,) = _json(capsys, ["--head", hand_head, "--eps", "1/2", "--r", "1"])
    assert code == 1 and any(f.startswith("unsound: kernel upper bound of rho_Q") for f in rec["flags"])


def test_route_disagreement_is_flagged(hand_head, capsys, monkeypatch):
    real = A.chain_mpmath

    def off(*a, **k):
        import mpmath
        res = real(*a, **k)
        with mpmath.workdps(50):          # a 1e-20 relative disagreement, far below float resolution
            res["Gamma"] = res["Gamma"] * (1 + mpmath.mpf(10) ** -20)
        return res
    monkeypatch.setattr(A, "chain_mpmath", off)
    code, (rec,) = _json(capsys, ["--head", hand_head, "--eps", "1/2", "--r", "1"])
    assert code == 1 and any(f.startswith("routes: Gamma") for f in rec["flags"])


def test_float_outside_enclosure_is_flagged(hand_head, capsys, monkeypatch):
    real = A.float_geometry

    def bad(be, *a):
        g = real(be, *a)
        if be.name == "torch_f32":
            g["rho_K"] = g["rho_K"] * 1.01
        return g
    monkeypatch.setattr(A, "float_geometry", bad)
    code, (rec,) = _json(capsys, ["--head", hand_head, "--eps", "1/2", "--r", "1"])
    assert code == 1 and any(f.startswith("outside: rho_K torch_f32") for f in rec["flags"])


def test_ordering_violation_is_flagged(hand_head, capsys, monkeypatch):
    real = A.geo.residual_profile

    def swapped(*a, **k):
        import dataclasses
        prof = real(*a, **k)
        row = prof.rows[0]
        prof.rows[0] = dataclasses.replace(row, tau_exact=row.tau_width + 1e-3)
        return prof
    monkeypatch.setattr(A.geo, "residual_profile", swapped)
    code, (rec,) = _json(capsys, ["--head", hand_head, "--eps", "1/2", "--r", "1"])
    assert code == 1 and any(f.startswith("ordering: r = 0") for f in rec["flags"])


@pytest.mark.parametrize("argv, needle", [
    (["--head", "nowhere.npz"], "nowhere.npz: no such file"),
    (["--head", "HAND", "--eps", "2"], "--eps '2': eps must lie in (0, 1)"),
    (["--head", "HAND", "--beta", "fast"], "--beta 'fast'"),
    (["--head", "HAND", "--r", "x"], "--r 'x'"),
    (["--head", "NOK"], "missing array 'K'"),
    (["--head", "OBJ"], "unreadable .npz"),
    (["--head", "TXT"], "must be .npz or .safetensors"),
    (["--head", "NOBETA"], "give --beta"),
    ([], "nothing to audit"),
    (["MALF"], "MALFORMED $.claim"),
])
def test_bad_input_exit_2(argv, needle, hand_head, tmp_path, capsys):
    nok = _npz(tmp_path / "nok.npz", Q=np.ones((2, 2)))
    nobeta = _npz(tmp_path / "nobeta.npz", Q=np.ones((2, 2)), K=np.ones((3, 2)))
    obj = tmp_path / "obj.npz"
    np.savez(obj, Q=np.array([object()], dtype=object), K=np.ones((2, 2)))
    txt = tmp_path / "h.txt"
    txt.write_text("Q")
    malf = tmp_path / "m.json"
    malf.write_text(json.dumps({"format": "certkit-certificate", "version": "1.0", "kind": "upper-chain",
                                "claim": {}, "instance": {}, "witness": {}, "assumptions": []}))
    sub = {"HAND": hand_head, "NOK": nok, "OBJ": str(obj), "TXT": str(txt), "NOBETA": nobeta, "MALF": str(malf)}
    assert main(["audit"] + [sub.get(a, a) for a in argv]) == 2
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_committed_head_files_read(capsys):
    heads = sorted((ROOT / "data" / "heads").iterdir())
    assert any(p.suffix == ".npz" for p in heads) and any(p.suffix == ".safetensors" for p in heads)
    from certkit.headfile import read_head
    for p in heads:
        h = read_head(str(p))
        assert h["Q"].shape[1] == h["K"].shape[1] and h["beta"] > 0


def test_head_files_are_regenerated_byte_identically(tmp_path):
    from certkit import corpus
    for p in corpus.write_heads(str(tmp_path)):
        name = pathlib.Path(p).name
        assert (ROOT / "data" / "heads" / name).read_bytes() == pathlib.Path(p).read_bytes(), name


def test_negative_eps_prime_compares_exactly(capsys):
    """r where tau > eps: eps' < 0 must be compared with its sign (regression: man_exp drops it)."""
    import mpmath
    from fractions import Fraction
    assert A._mpf_fraction(mpmath.mpf(-3) / 4) == Fraction(-3, 4) and A._mpf_fraction(mpmath.mpf(0)) == 0
    code, recs = _json(capsys, ["--head", str(ROOT / "data" / "heads" / "gauss-n128-d16-beta4.safetensors"),
                                "--r", "3"])
    rows = {r["quantity"]: r for r in recs[0]["rows"]}
    assert rows["epsp"]["arb"][1] < 0 and code == 0 and recs[0]["flags"] == []
