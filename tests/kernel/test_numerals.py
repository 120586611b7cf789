from fractions import Fraction

import pytest
from hypothesis import given, strategies as st

from certkit.kernel import Malformed
from certkit.kernel.numerics import exact_float, parse_numeral
from certkit.numbers import numeral


@pytest.mark.parametrize("s,v", [("3", 3), ("-17", -17), ("3/20", Fraction(3, 20)), ("0.15", Fraction(3, 20)),
                                 ("1.5e-3", Fraction(3, 2000)), ("-.5", Fraction(-1, 2)), ("0x1.8p-3", Fraction(3, 16)),
                                 ("-0x.8p1", Fraction(-1)), ("1E2", 100), ("+2", 2)])
def test_exact_values(s, v):
    assert parse_numeral(s, "$.x") == v


@pytest.mark.parametrize("s", ["NaN", "inf", "-Infinity", "", "1/0", "0x1p", "1e", "1.2.3", "0x1.g", "1e99999",
                               "9" * 3000, " 1", "1_000", 0.25, 1, None, True, [], {}])
def test_malformed_numerals(s):
    with pytest.raises(Malformed) as e:
        parse_numeral(s, "$.claim.eps")
    assert e.value.path == "$.claim.eps"


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_hex_float_round_trip_is_exact(x):
    assert Fraction(x) == parse_numeral(numeral(x), "$") and exact_float(parse_numeral(numeral(x), "$"), "$") == x


@given(st.fractions())
def test_rational_round_trip(q):
    assert parse_numeral(numeral(q), "$") == q


def test_decimal_not_representable_is_malformed():
    with pytest.raises(Malformed, match="not exactly representable"):
        exact_float(parse_numeral("0.1", "$.a[0]"), "$.a[0]")
