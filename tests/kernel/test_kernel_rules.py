"""Kernel behaviour on hand-made certificates: soundness guards and the FP environment check."""
import json
import pathlib
from fractions import Fraction

import numpy as np
import pytest

from certkit import kernel, synthetic
from certkit.choices import LAPACK, check
from certkit.search import basic, writer

import paths


@pytest.fixture
def head():
    return synthetic.head("gaussian", 24, 4, beta=Fraction(2), seed=3)


def _factor_cert(tmp_path, head, U, V, eps=Fraction(1, 4), bound=None):
    return writer.certificate(str(tmp_path / "f.json"), "upper-factorization", bound or U.shape[1], eps, head,
                              {"U": (U, "float"), "V": (V, "float")})


def test_overflowing_factors_are_rejected_not_verified(tmp_path, head):
    U = np.full((24, 3), 1e300)
    V = np.full((24, 3), 1e300)
    V[:, 1] = -1e300
    path = _factor_cert(tmp_path, head, U, V)
    for route in ("fast", "arb", "auto"):     # the Arb bound beyond binary64 rounds up to +inf, never overflows
        v = check(path, route)
        assert v.status == "REJECTED", (route, v.line())


def test_exact_rank_one_head_is_certified_at_rank_one(tmp_path):
    """Key-only head: every row is the same probability vector, so B = 1 p^T has error 0."""
    h = synthetic.head("key-only", 16, 4, beta=Fraction(3), seed=1)
    A = h.attention()
    U, V = np.ones((16, 1)), A[0][:, None]
    v = check(_factor_cert(tmp_path, h, U, V, eps=Fraction(1, 10 ** 9), bound=1))
    assert v.status == "VERIFIED" and v.details["certified_max_row_error"] < 1e-12


def test_zero_factor_has_error_one(tmp_path, head):
    """B = 0 has row error exactly 1: rejected at eps < 1 whatever the route."""
    for route in ("fast", "arb"):
        v = check(_factor_cert(tmp_path, head, np.zeros((24, 1)), np.zeros((24, 1)), eps=Fraction(999, 1000)), route)
        assert v.status == "REJECTED" and "row-error" in v.message


def test_certified_error_is_tight(tmp_path, head):
    """The certified bound exceeds the float error by a tiny relative amount only."""
    A = head.attention()
    k, U, V = basic.svd_factor(A, 0.25)
    v = check(_factor_cert(tmp_path, head, U, V))
    assert v.status == "VERIFIED"
    fl = basic.row_errors(A, U @ V.T).max()
    assert fl <= v.details["certified_max_row_error"] <= fl + 1e-10


def test_flush_to_zero_environment_is_an_internal_error(tmp_path, head):
    torch = pytest.importorskip("torch")
    path = _factor_cert(tmp_path, head, np.zeros((24, 1)), np.zeros((24, 1)))
    if not torch.set_flush_denormal(True):
        pytest.skip("this CPU cannot flush denormals")
    try:
        v = check(path)
    finally:
        torch.set_flush_denormal(False)
    assert v.status == "INTERNAL-ERROR" and "floating-point" in v.message
    assert check(path).status == "REJECTED"


# ---------------------------------------------------------------- the kernel never chooses: hints, or an oracle
GOLDEN = paths.GOLDEN
ROOT = paths.ROOT
CHOOSING = ["valid/perm-n32-inverse.json", "valid/perm-n32-inverse-soft-decoder.json", "valid/perm-n40-frobenius.json"]
FALSE = ["invalid/perm-n32-inverse--eps-above-inverse-norm.json", "invalid/perm-n32-inverse--duplicate-message.json",
         "invalid/perm-n40-frobenius--bound-plus-1.json", "invalid/perm-n40-frobenius--eps-above-tail.json"]
HINTS = ("inverse", "svd_u", "svd_s", "svd_vt")


def legacy(rel, folder):
    """The golden certificate rel as the format-1.0 document it upgrades: its hints removed (arrays inline)."""
    doc = json.loads((GOLDEN / rel).read_text())
    assert doc["version"] == "1.3" and any(k in doc["witness"] for k in HINTS), rel
    doc["version"], doc["witness"] = "1.0", {k: v for k, v in doc["witness"].items() if k not in HINTS}
    assert "file" not in json.dumps(doc), rel
    out = folder / pathlib.Path(rel).name
    out.write_text(json.dumps(doc))
    return out


class Oracle:
    """LAPACK's choices, with inverse(T) and svd(X) replaced where given."""

    def __init__(self, inverse=None, svd=None):
        self.inverse, self.svd = inverse or LAPACK.inverse, svd or LAPACK.svd


def _reversed_svd(X):
    U, s, Vt = LAPACK.svd(X)
    return U[:, ::-1], s[::-1], Vt[::-1]            # the same product, singular values increasing


def _erasing_inverse(T):
    T[:] = np.eye(len(T))                           # an oracle that writes into what it is shown
    return np.eye(len(T))


def _erasing_svd(X):
    U, s, Vt = LAPACK.svd(X)
    X *= 0.0
    return U, s * 0, Vt


def _fails(_):
    raise np.linalg.LinAlgError("SVD did not converge")


def _perturbed(a, rel=1e-3, seed=0):
    rng = np.random.default_rng(seed)
    return a * (1 + rel * rng.standard_normal(a.shape))


GARBAGE = {
    "wrong shape": Oracle(inverse=lambda T: np.eye(len(T) + 1), svd=lambda X: [a[:-1] for a in LAPACK.svd(X)]),
    "NaN": Oracle(inverse=lambda T: np.full(T.shape, np.nan), svd=lambda X: [a * np.nan for a in LAPACK.svd(X)]),
    "not arrays": Oracle(inverse=lambda T: None, svd=lambda X: "usv"),
    "too few": Oracle(inverse=lambda T: (T, T), svd=lambda X: LAPACK.svd(X)[:2]),
    "raises": Oracle(inverse=_fails, svd=_fails),
    "zero": Oracle(inverse=np.zeros_like, svd=lambda X: [0 * a for a in LAPACK.svd(X)]),
    "huge": Oracle(inverse=lambda T: 1e300 * LAPACK.inverse(T), svd=lambda X: [1e300 * a for a in LAPACK.svd(X)]),
}
TRICKY = {"unsorted": Oracle(svd=_reversed_svd), "writes into its argument": Oracle(inverse=_erasing_inverse, svd=_erasing_svd)}
PERTURBED = Oracle(inverse=lambda T: _perturbed(LAPACK.inverse(T)), svd=lambda X: [_perturbed(a) for a in LAPACK.svd(X)])


def test_a_legacy_certificate_without_choices_is_unsupported(tmp_path):
    for rel in CHOOSING:
        path = legacy(rel, tmp_path)
        v = kernel.check(path)
        assert v.status == "UNSUPPORTED" and "choices=certkit.choices.LAPACK" in v.message, v.line()
        assert kernel.check(path, choices=LAPACK).status == "VERIFIED"
    assert kernel.check(GOLDEN / "valid" / "gauss-n24-factor.json").status == "VERIFIED"     # nothing to choose


@pytest.mark.parametrize("name", sorted(GARBAGE) + sorted(TRICKY))
def test_a_hostile_oracle_can_only_reject(name, tmp_path):
    """Whatever the oracle answers (format 1.0-1.2), a false claim is never VERIFIED, and a garbage answer is
    REJECTED, never an internal error.  Reversed singular values would pair sigma_i with the wrong s_i and an
    oracle that writes into its argument would change the matrix the kernel bounds: both are harmless."""
    oracle = GARBAGE.get(name) or TRICKY[name]
    for rel in FALSE:
        assert kernel.check(legacy(rel, tmp_path), "fast", choices=oracle).status == "REJECTED", rel
    for rel in CHOOSING:
        v = kernel.check(legacy(rel, tmp_path), "fast", choices=oracle)
        assert v.status in (("REJECTED",) if name in GARBAGE else ("REJECTED", "VERIFIED")), (rel, v.line())


def test_any_good_choice_verifies(tmp_path):
    """Another inverse or SVD (not LAPACK's pinv; the SVD of the other orientation) verifies the same claims."""
    other = Oracle(inverse=np.linalg.inv,
                   svd=lambda X: (lambda U, s, Vt: (Vt.T, s, U.T))(*np.linalg.svd(X.T, full_matrices=False)))
    for rel in CHOOSING:
        assert kernel.check(legacy(rel, tmp_path), choices=other).status == "VERIFIED", rel


def committed_certificates():
    """Every committed certificate of the two kinds that choose (the golden corpora and data/)."""
    for folder in (GOLDEN, ROOT / "data" / "certificates", ROOT / "data" / "scaling" / "certificates"):
        for path in sorted(folder.rglob("*.json")):
            raw = path.read_bytes()             # malformed ones hold bytes that are not UTF-8
            if b'"kind": "lower-decoding-inverse-norm"' in raw or b'"kind": "lower-frobenius-tail"' in raw:
                yield path


def test_format_13_carries_its_choices_so_no_oracle_changes_a_verdict():
    """The hints travel in the witness: with LAPACK, with no oracle, with a perturbed or a garbage one, every
    committed certificate gets the same verdict; only the two legacy (format 1.0) copies take an oracle."""
    legacy_ones, checked = [], 0
    for path in committed_certificates():
        try:
            doc = json.loads(path.read_bytes())
        except ValueError:
            continue
        if not isinstance(doc, dict) or doc.get("kind") not in writer.HINTED or "malformed" in path.parts:
            continue
        if doc["version"] != "1.3":
            legacy_ones.append(path.name)
            continue
        want = kernel.check(path, choices=LAPACK)
        for oracle in (None, PERTURBED, GARBAGE["NaN"], GARBAGE["raises"]):
            v = kernel.check(path, choices=oracle)
            assert (v.status, v.message) == (want.status, want.message), (path, oracle, v.line(), want.line())
        checked += 1
    assert sorted(legacy_ones) == ["perm-n32-inverse-legacy-1.0.json", "perm-n40-frobenius-legacy-1.0.json"]
    assert checked >= 20, checked


def test_the_perturbed_oracle_does_change_a_legacy_verdict_somewhere(tmp_path):
    """The test above can fail: on a legacy certificate the same perturbation is felt (its inverse-norm bound moves)."""
    path = legacy(CHOOSING[0], tmp_path)
    a, b = (kernel.check(path, choices=o) for o in (LAPACK, PERTURBED))
    assert a.details["certified_inverse_norm"] != b.details["certified_inverse_norm"]


def test_a_13_witness_without_its_choice_is_malformed_and_a_12_one_with_it_too(tmp_path):
    for rel, key in ((CHOOSING[0], "inverse"), (CHOOSING[2], "svd_u")):
        doc = json.loads((GOLDEN / rel).read_text())
        gone = dict(doc, witness={k: v for k, v in doc["witness"].items() if k != key})
        (tmp_path / "a.json").write_text(json.dumps(gone))
        v = kernel.check(tmp_path / "a.json", choices=LAPACK)
        assert v.status == "MALFORMED" and f"$.witness.{key}: required key is missing" in v.message, v.line()
        (tmp_path / "b.json").write_text(json.dumps(dict(doc, version="1.2")))
        v = kernel.check(tmp_path / "b.json", choices=LAPACK)
        assert v.status == "MALFORMED" and "unknown key" in v.message, v.line()
    doc = json.loads((GOLDEN / CHOOSING[0]).read_text())
    doc["witness"]["inverse"] = doc["witness"]["inverse"][:-1]          # M - 1 rows
    (tmp_path / "c.json").write_text(json.dumps(doc))
    v = kernel.check(tmp_path / "c.json")
    assert v.status == "MALFORMED" and "$.witness.inverse" in v.message, v.line()


