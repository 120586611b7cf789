"""Kernel behaviour on hand-made certificates: soundness guards and the FP environment check."""
import pathlib
from fractions import Fraction

import numpy as np
import pytest

from certkit import kernel, synthetic
from certkit.choices import LAPACK, check
from certkit.search import basic, writer


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


# ---------------------------------------------------------------- the kernel never chooses: its oracle
GOLDEN = pathlib.Path(__file__).resolve().parent / "golden"
CHOOSING = ["valid/perm-n32-inverse.json", "valid/perm-n32-inverse-soft-decoder.json", "valid/perm-n40-frobenius.json"]
FALSE = ["invalid/perm-n32-inverse--eps-above-inverse-norm.json", "invalid/perm-n32-inverse--duplicate-message.json",
         "invalid/perm-n40-frobenius--bound-plus-1.json", "invalid/perm-n40-frobenius--eps-above-tail.json"]


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


def test_without_choices_a_rule_that_chooses_is_unsupported():
    for rel in CHOOSING:
        v = kernel.check(GOLDEN / rel)
        assert v.status == "UNSUPPORTED" and "choices=certkit.choices.LAPACK" in v.message, v.line()
        assert kernel.check(GOLDEN / rel, choices=LAPACK).status == "VERIFIED"
    assert kernel.check(GOLDEN / "valid" / "gauss-n24-factor.json").status == "VERIFIED"     # nothing to choose


@pytest.mark.parametrize("name", sorted(GARBAGE) + sorted(TRICKY))
def test_a_hostile_oracle_can_only_reject(name):
    """Whatever the oracle answers, a false claim is never VERIFIED, and a garbage answer is REJECTED,
    never an internal error.  Reversed singular values would pair sigma_i with the wrong s_i and an
    oracle that writes into its argument would change the matrix the kernel bounds: both are harmless."""
    oracle = GARBAGE.get(name) or TRICKY[name]
    for rel in FALSE:
        assert kernel.check(GOLDEN / rel, "fast", choices=oracle).status == "REJECTED", rel
    for rel in CHOOSING:
        v = kernel.check(GOLDEN / rel, "fast", choices=oracle)
        assert v.status in (("REJECTED",) if name in GARBAGE else ("REJECTED", "VERIFIED")), (rel, v.line())


def test_any_good_choice_verifies():
    """Another inverse or SVD (not LAPACK's pinv; the SVD of the other orientation) verifies the same claims."""
    other = Oracle(inverse=np.linalg.inv,
                   svd=lambda X: (lambda U, s, Vt: (Vt.T, s, U.T))(*np.linalg.svd(X.T, full_matrices=False)))
    for rel in CHOOSING:
        assert kernel.check(GOLDEN / rel, choices=other).status == "VERIFIED", rel
