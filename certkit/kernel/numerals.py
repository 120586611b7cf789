"""Exact numerals of format 1.0: integer, p/q, exact decimal, C99 hex float -> Fraction.

JSON floats never reach here (the loader rejects them); every numeral is a string and is
parsed exactly.  Size limits keep hostile input from exhausting memory or time.
"""
import re
from fractions import Fraction

from .verdict import Malformed

MAX_LEN = 2000
MAX_DEC_EXP = 2000
MAX_BIN_EXP = 5000

_INT = re.compile(r"[+-]?[0-9]+\Z")
_RAT = re.compile(r"([+-]?[0-9]+)/([0-9]+)\Z")
_DEC = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?(?:[eE]([+-]?[0-9]+))?\Z")
_HEX = re.compile(r"([+-]?)0[xX]([0-9a-fA-F]*)(?:\.([0-9a-fA-F]*))?[pP]([+-]?[0-9]+)\Z")


def parse_numeral(s: object, path: str) -> Fraction:
    """Return the exact rational value of numeral string s; Malformed(path) otherwise."""
    if isinstance(s, bool) or not isinstance(s, str):
        kind = "a JSON float" if isinstance(s, float) else f"a JSON {type(s).__name__}"
        raise Malformed(path, f"expected an exact numeral string, got {kind} {s!r}")
    if len(s) > MAX_LEN:
        raise Malformed(path, f"numeral longer than {MAX_LEN} characters")
    if _INT.match(s):
        return Fraction(int(s))
    m = _RAT.match(s)
    if m:
        if int(m.group(2)) == 0:
            raise Malformed(path, f"zero denominator in {s!r}")
        return Fraction(int(m.group(1)), int(m.group(2)))
    m = _HEX.match(s)
    if m:
        sign, ip, fp, e = m.group(1), m.group(2), m.group(3) or "", int(m.group(4))
        if not (ip or fp) or abs(e) > MAX_BIN_EXP:
            raise Malformed(path, f"bad or out-of-range hex float {s!r}")
        v = Fraction(int(ip + fp, 16)) * Fraction(2) ** (e - 4 * len(fp))
        return -v if sign == "-" else v
    m = _DEC.match(s)
    if m and (m.group(2) or m.group(3)):
        sign, ip, fp, e = m.group(1), m.group(2), m.group(3) or "", int(m.group(4) or 0)
        if abs(e) > MAX_DEC_EXP:
            raise Malformed(path, f"decimal exponent out of range in {s!r} (|e| <= {MAX_DEC_EXP})")
        v = Fraction(int((ip or "0") + fp)) * Fraction(10) ** (e - len(fp))
        return -v if sign == "-" else v
    raise Malformed(path, f"not an exact numeral (integer, p/q, decimal or hex float): {s!r}")


def parse_int(s, path, lo=None, hi=None):
    v = parse_numeral(s, path)
    if v.denominator != 1:
        raise Malformed(path, f"expected an integer, got {s!r}")
    v = int(v)
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise Malformed(path, f"integer {v} out of range [{lo}, {hi}]")
    return v


def exact_float(v: Fraction, path: str) -> float:
    """The binary64 number equal to the rational v; Malformed if v is not exactly representable."""
    try:
        f = float(v)
    except OverflowError:
        raise Malformed(path, f"{str(v)[:40]}... overflows binary64") from None
    if Fraction(f) != v:
        raise Malformed(path, f"{v} is not exactly representable in binary64 (write it as a hex float)")
    return f
