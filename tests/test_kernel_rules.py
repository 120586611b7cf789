"""Kernel behaviour on hand-made certificates: soundness guards and the FP environment check."""
from fractions import Fraction

import numpy as np
import pytest

from certkit import synthetic
from certkit.kernel import check
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
