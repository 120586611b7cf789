"""certkit.numbers: the one exact parser for every number a user gives (eps, beta, ...).

A float means its shortest decimal form (0.1 is 1/10); strings p/q and decimals are exact; eps lies
in (0, 1); beta >= 0 is a rational, c/sqrt(D) or an interval.  References: Fraction and Decimal
from the standard library and the kernel's numeral reader, not certkit.numbers itself."""
import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from certkit.errors import USAGE, UserError
from certkit.kernel.numerics import parse_numeral
from certkit.numbers import BetaInterval, OverSqrt, exact, numeral, parse_beta, parse_eps, parse_eps_list, tag

finite = st.floats(allow_nan=False, allow_infinity=False)
unit_open = st.fractions(min_value=0, max_value=1).filter(lambda q: 0 < q < 1)


# ---------------------------------------------------------------- exact
@given(finite)
def test_a_float_is_its_shortest_decimal(x):
    assert exact(x) == Fraction(repr(float(x))) == Fraction(Decimal(repr(x)))


@given(finite)
def test_numpy_floats_are_read_like_python_floats(x):
    assert exact(np.float64(x)) == Fraction(repr(x))
    with np.errstate(over="ignore"):
        y = np.float32(x)
    assume(math.isfinite(y))
    assert exact(y) == Fraction(repr(float(y)))


def test_point_one_is_one_tenth_not_its_binary64():
    assert exact(0.1) == Fraction(1, 10) != Fraction(0.1)
    assert exact(1e-300) == Fraction(1, 10 ** 300)
    assert exact(2.5e-3) == exact("2.5e-3") == exact("0.0025") == Fraction(1, 400)


@given(st.integers(-10 ** 30, 10 ** 30), st.integers(1, 10 ** 30))
def test_strings_p_over_q_are_exact(p, q):
    assert exact(f"{p}/{q}") == Fraction(p, q)
    assert exact(f" {p}/{q} ") == Fraction(p, q)


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_hex_floats_are_their_exact_binary_value(x):
    assert exact(x.hex()) == Fraction(x)


@given(st.fractions())
def test_fractions_ints_and_decimals_are_exact(q):
    assert exact(q) == q and exact(q.numerator) == q.numerator
    d = Decimal(q.numerator) / Decimal(q.denominator)          # 28-digit decimal, exact as a Decimal
    assert exact(d) == Fraction(d) and exact(str(d)) == Fraction(str(d))


@pytest.mark.parametrize("x", [float("nan"), float("inf"), -float("inf"), np.nan, Decimal("NaN"), Decimal("Infinity"),
                               "abc", "1/0", "", "1.2.3", "0x1p", "0xzz", None, True, False, [1], {}, object(), 1j])
def test_exact_rejects_non_numbers_naming_the_argument(x):
    with pytest.raises(UserError, match="^--thing: ") as e:
        exact(x, "--thing")
    assert e.value.exit_code == USAGE == 64 and isinstance(e.value, ValueError)


# ---------------------------------------------------------------- eps
@given(unit_open)
def test_eps_strings_are_exact(q):
    assert parse_eps(f"{q.numerator}/{q.denominator}") == q == parse_eps(q)


@given(st.floats(min_value=0, max_value=1, exclude_min=True, exclude_max=True))
def test_eps_floats_are_their_shortest_decimal(x):
    assert parse_eps(x) == Fraction(repr(x))


@pytest.mark.parametrize("x", [0, "0", 0.0, -0.0, 1, "1", 1.0, "1/1", -0.25, "-1/4", 2, "3/2", 1e300,
                               float("nan"), "nan", float("inf"), "1/0", "abc", None])
def test_eps_outside_the_open_unit_interval_is_refused(x):
    with pytest.raises(UserError, match="^--eps: "):
        parse_eps(x, "--eps")


@given(st.fractions())
def test_eps_is_accepted_exactly_on_the_open_unit_interval(q):
    if 0 < q < 1:
        assert parse_eps(q) == q
    else:
        with pytest.raises(UserError, match=r"outside \(0, 1\)"):
            parse_eps(q)


def test_eps_lists():
    assert parse_eps_list("0.1,1/4, 0.5") == [Fraction(1, 10), Fraction(1, 4), Fraction(1, 2)]
    assert parse_eps_list([0.1, "1/3"]) == [Fraction(1, 10), Fraction(1, 3)]
    assert parse_eps_list(0.25) == [Fraction(1, 4)]
    for bad in ("", ",", "0.1,1", "0.1,abc"):
        with pytest.raises(UserError, match="^--eps"):
            parse_eps_list(bad)


# ---------------------------------------------------------------- beta
@given(st.fractions(min_value=0))
def test_rational_beta_is_exact(q):
    assert parse_beta(f"{q.numerator}/{q.denominator}") == q == parse_beta(q)
    assert isinstance(parse_beta(q), Fraction)


@given(st.floats(min_value=0, allow_infinity=False))
def test_float_beta_is_its_shortest_decimal(x):
    assert parse_beta(x) == Fraction(repr(x))


@given(st.fractions(min_value=0, max_value=10 ** 6), st.fractions(min_value=0, max_value=10 ** 6))
def test_over_sqrt_strings(c, D):
    assume(D > 0)
    for text in (f"{c}/sqrt({D})", f"{c} / sqrt({D})", f"{c}/√{D}"):
        b = parse_beta(text)
        assert b == OverSqrt(c, D) and isinstance(b.c, Fraction) and isinstance(b.D, Fraction)
    assert math.isclose(float(OverSqrt(c, D)), float(c) / math.sqrt(float(D)), rel_tol=1e-15)


def test_beta_forms():
    assert parse_beta("1/sqrt(64)") == OverSqrt(Fraction(1), Fraction(64)) and float(parse_beta("1/sqrt(64)")) == 0.125
    assert str(parse_beta("1/sqrt(64)")) == "1/sqrt(64)"
    assert parse_beta(OverSqrt(2, "0.5")) == OverSqrt(Fraction(2), Fraction(1, 2))
    iv = parse_beta(BetaInterval("1/4", 0.5))
    assert iv == BetaInterval(Fraction(1, 4), Fraction(1, 2)) and float(iv) == 0.375 and str(iv) == "[1/4, 1/2]"
    assert parse_beta(BetaInterval(2, 2)) == BetaInterval(Fraction(2), Fraction(2))
    assert parse_beta(0) == 0 and parse_beta(np.float32(0.5)) == Fraction(1, 2)


@pytest.mark.parametrize("x", ["-1", -0.001, "-1/sqrt(4)", "1/sqrt(0)", "1/sqrt(-1)", OverSqrt(1, 0),
                               OverSqrt(-1, 4), BetaInterval(2, 1), BetaInterval(-1, 1), "abc", "1/sqrt(x)",
                               float("nan"), float("inf"), None, True])
def test_bad_beta_is_refused_naming_it(x):
    with pytest.raises(UserError, match="^--beta"):
        parse_beta(x, "--beta")


# ---------------------------------------------------------------- numerals for certificates
@given(st.fractions())
def test_numeral_of_a_fraction_is_read_back_exactly_by_the_kernel(q):
    assert parse_numeral(numeral(q), "$") == q


@given(finite)
def test_numeral_of_a_float_is_its_exact_binary_value(x):
    assert parse_numeral(numeral(x), "$") == Fraction(x)
    assert parse_numeral(numeral(np.float64(x)), "$") == Fraction(x)


def test_numeral_and_tag():
    assert numeral(3) == "3" and numeral(np.int64(-7)) == "-7" and numeral(Fraction(6, 4)) == "3/2"
    assert numeral(Fraction(4, 2)) == "2" and numeral(0.5) == "0x1.0000000000000p-1"
    assert tag(Fraction(1, 4)) == "1_4" and tag(Fraction(3)) == "3" and tag("7/20") == "7_20"
