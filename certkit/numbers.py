"""Exact numbers from user input: one parser for eps, beta and every other number.

* int, fractions.Fraction, decimal.Decimal and strings ("1/4", "0.1", "2.5e-3", "0x1p-2") are exact;
* a Python (or numpy) float is read by its shortest decimal form: 0.1 means 1/10, not the binary
  number 3602879701896397/36028797018963968 nearest to it (``exact(0.1) == Fraction(1, 10)``);
* beta may also be an exact irrational c/sqrt(D) ("1/sqrt(64)", OverSqrt(1, 64)) or an interval
  of temperatures (BetaInterval(lo, hi): a certificate then holds for every beta in it).
"""
import math
import numbers as _numbers
import re
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

from .errors import UserError

MAX_LEN = 2000         # characters of a number given as text (the kernel's numerals: numerals.MAX_LEN)
MAX_DEC_EXP = 2000     # |e| of a decimal exponent (as the kernel's numerals)
MAX_BITS = 5000        # bits of an integer, numerator or denominator (the kernel's binary exponent bound)
_EXP = re.compile(r"[eE]\s*([+-]?\d+)")


class OutOfRange(UserError):
    """A number too large (or too long) to read: the message says the bound."""


def brief(x: Any) -> str:
    """A short text for a number of any size: str(x) when short, else about 3 significant digits
    (1e+308; about 10^400 beyond binary64), so that no message prints a 300-digit number."""
    if isinstance(x, (OverSqrt, BetaInterval)):
        s = str(x)
        return s if len(s) <= 24 else s[:24] + "..."
    f = Fraction(x)
    if max(abs(f.numerator).bit_length(), f.denominator.bit_length()) <= 64:
        s = str(x) if not isinstance(x, str) else str(f)
        if len(s) <= 24:
            return s
    e = (abs(f.numerator).bit_length() - f.denominator.bit_length()) * math.log10(2)    # about log10 |f|
    if f and abs(e) < 307:
        return f"{float(f):.3g}"
    if f and 307 <= e < 309 and f <= Fraction(1.7976931348623157e308):
        return f"{float(f):.3g}"
    return f"{'-' if f < 0 else ''}about 10^{round(e)}"


def _bounded(f, x, what):
    """f unless its numerator or denominator has more than MAX_BITS bits (UserError)."""
    if max(abs(f.numerator).bit_length(), f.denominator.bit_length()) > MAX_BITS:
        raise OutOfRange(f"{what}: {brief(x) if not isinstance(x, str) else repr(x[:40])} is out of range "
                        f"(numerator and denominator of at most {MAX_BITS} bits)")
    return f


def exact(x: object, what: str = "number") -> Fraction:
    """The exact rational value of x (see the module docstring); UserError naming `what` otherwise.

    >>> exact("1/8"), exact(0.1), exact("2.5e-3")
    (Fraction(1, 8), Fraction(1, 10), Fraction(1, 400))
    """
    if isinstance(x, bool):
        raise UserError(f"{what}: expected a number, got {x!r}")
    if isinstance(x, Fraction):
        return _bounded(x, x, what)
    if isinstance(x, _numbers.Integral):
        return _bounded(Fraction(int(x)), x, what)
    if isinstance(x, Decimal):
        if not x.is_finite():
            raise UserError(f"{what}: {x} is not finite")
        if abs(x.adjusted()) > MAX_DEC_EXP:
            raise OutOfRange(f"{what}: {x:.3e} is out of range (decimal exponent |e| <= {MAX_DEC_EXP})")
        return _bounded(Fraction(x), x, what)
    if isinstance(x, _numbers.Real):            # float, numpy floating: shortest decimal form
        f = float(x)
        if not math.isfinite(f):
            raise UserError(f"{what}: {f} is not finite")
        return Fraction(repr(f))
    if isinstance(x, str):
        if len(x) > MAX_LEN:
            raise OutOfRange(f"{what}: {x[:40]!r}... is longer than {MAX_LEN} characters")
        m = None if "0x" in x.lower() else _EXP.search(x)
        if m and abs(int(m.group(1))) > MAX_DEC_EXP:          # before Fraction computes 10**e
            raise OutOfRange(f"{what}: {x.strip()!r}: decimal exponent out of range (|e| <= {MAX_DEC_EXP})")
        try:
            if "0x" in x.lower():                # a C99 hex float, e.g. 0x1p-2 (exact binary64)
                f = float.fromhex(x.strip())
                if math.isfinite(f):
                    return Fraction(f)
            return _bounded(Fraction(x.strip()), x, what)
        except OutOfRange:                       # a number, too large or too fine to read (1e-2000)
            raise
        except (ValueError, ZeroDivisionError, OverflowError):
            raise UserError(f"{what}: {x!r} is not a number (use an integer, a decimal or p/q)") from None
    raise UserError(f"{what}: expected a number, got {type(x).__name__}")


def parse_eps(x: object, what: str = "eps") -> Fraction:
    """eps in (0, 1), exact.  (For eps >= 1, B = 0 already gives r_eps(A) = 0.)

    >>> parse_eps(0.25), parse_eps("1/10")
    (Fraction(1, 4), Fraction(1, 10))
    """
    e = exact(x, what)
    if not 0 < e < 1:
        raise UserError(f"{what}: {brief(e)} is outside (0, 1) (for eps >= 1, B = 0 already gives r_eps = 0)")
    return e


def parse_distance(x: object, what: str = "eps") -> Fraction:
    """A distance tolerance for max_i ||A_i - A'_i||_1 in (0, 2), exact (every such distance is <= 2)."""
    e = exact(x, what)
    if not 0 < e < 2:
        raise UserError(f"{what}: {brief(e)} is outside (0, 2) (every row-l1 distance of two attentions is <= 2)")
    return e


def parse_output_eps(x: object, what: str = "eps") -> Fraction:
    """A tolerance for an output distance, exact, in (0, 2^64) (the certificate format's range)."""
    e = exact(x, what)
    if not 0 < e < 2 ** 64:
        raise UserError(f"{what}: {brief(e)} is outside (0, 2^64)")
    return e


def parse_eps_list(x: Any, what: str = "--eps") -> list[Fraction]:
    """A list of eps from "0.1,1/4", one number, or an iterable of numbers; an empty entry
    ("1/4,,1/2", "1/4,") is refused, not skipped."""
    parts = x.split(",") if isinstance(x, str) else list(x) if isinstance(x, (list, tuple)) else [x]
    if not parts or parts == [""] or all(isinstance(p, str) and not p.strip() for p in parts):
        raise UserError(f"{what}: empty list")
    for i, p in enumerate(parts):
        if isinstance(p, str) and not p.strip():
            raise UserError(f"{what}: entry {i + 1} of {x!r} is empty (give numbers separated by single commas)")
    return [parse_eps(p, what) for p in parts]


MAX_BUDGET = 10 ** 9   # seconds (about 32 years): a larger budget is a typo


PEER_NAMES = ("svd", "nystrom", "performer", "linformer")
MAX_INDEX = 1 << 20        # the largest index a range may name (layers, heads, tokens, keys): checked before expanding
MAX_JOBS = 1024


def parse_peers(x: object, what: str = "peers") -> tuple[str, ...]:
    """Peer names: "none", "svd,nystrom", a name, or a list of names among PEER_NAMES (CLI and API alike)."""
    if isinstance(x, str):
        x = [] if x.strip() == "none" else [p.strip() for p in x.split(",") if p.strip()]
    try:
        names: tuple[str, ...] = tuple(x)  # type: ignore[arg-type]
    except TypeError:
        raise UserError(f"{what}: expected peer names among {', '.join(PEER_NAMES)}, got {x!r:.60}") from None
    for p in names:
        if p not in PEER_NAMES:
            raise UserError(f"{what}: unknown peer {p!r:.60} (choose from {', '.join(PEER_NAMES)} or none)")
    return names


def parse_time_limit(x: object, what: str = "time_limit") -> float | None:
    """Seconds per certificate: None (no limit) or a number in (0, MAX_BUDGET] (CLI and API alike)."""
    if x is None:
        return None
    if isinstance(x, bool):
        raise UserError(f"{what}: expected seconds (a positive number), got {x!r}")
    try:
        e = exact(x, what)
    except UserError:
        raise UserError(f"{what}: expected seconds (a positive number), got {x!r:.60}") from None
    if not 0 < e <= MAX_BUDGET:
        raise UserError(f"{what}: {brief(e)} seconds is outside (0, {MAX_BUDGET}]")
    return float(e)


def parse_jobs(x: object, what: str = "jobs") -> int:
    """A number of worker processes, an integer in [1, MAX_JOBS] (CLI and API alike)."""
    if isinstance(x, bool) or not isinstance(x, (int, str)) or not str(x).strip().isdecimal():   # "²" isdigit, int() refuses it
        raise UserError(f"{what}: expected a positive integer, got {x!r:.60}")
    n = int(x)
    if not 1 <= n <= MAX_JOBS:
        raise UserError(f"{what}: {brief(n)} is outside [1, {MAX_JOBS}]")
    return n


def parse_budget(x: object, what: str = "budget") -> float | None:
    """A time budget in seconds, >= 0 and finite (None: no budget), as a float.

    >>> parse_budget("45"), parse_budget(0.5), parse_budget(None)
    (45.0, 0.5, None)
    """
    if x is None:
        return None
    if isinstance(x, bool):
        raise UserError(f"{what}: expected seconds (a number >= 0), got {x!r}")
    e = exact(x, what)
    if not 0 <= e <= MAX_BUDGET:
        raise UserError(f"{what}: {brief(e)} seconds is outside [0, {MAX_BUDGET}]")
    return float(e)


@dataclass(frozen=True)
class OverSqrt:
    """The exact temperature beta = c / sqrt(D) (e.g. the usual 1/sqrt(d_head))."""
    c: Fraction
    D: Fraction

    def __float__(self) -> float:
        """The float nearest c / sqrt(D) (to about an ulp), for c and D of any size: no OverflowError where
        float(D) overflows (D = 10^1500 gives 1e-750, that is 0.0)."""
        import flint
        with flint.ctx.workprec(80):
            c, D = (flint.arb(v.numerator) / v.denominator for v in (self.c, self.D))
            return float((c / D.sqrt()).mid())

    def __str__(self) -> str:
        return f"{self.c}/sqrt({self.D})"


@dataclass(frozen=True)
class BetaInterval:
    """Every beta in [lo, hi]: a certificate for this set holds for each of its temperatures."""
    lo: Fraction
    hi: Fraction

    def __float__(self) -> float:
        return float((self.lo + self.hi) / 2)

    def __str__(self) -> str:
        return f"[{self.lo}, {self.hi}]"


Beta = Fraction | OverSqrt | BetaInterval            # an exact temperature, or an interval of them
_SQRT = re.compile(r"(.+?)\s*/\s*(?:sqrt\((.+)\)|√\s*(.+))")


def parse_beta(x: object, what: str = "beta") -> Beta:
    """An exact beta >= 0: a Fraction, an OverSqrt or a BetaInterval.

    >>> parse_beta("1/8"), str(parse_beta("1/sqrt(64)")), parse_beta(0.125)
    (Fraction(1, 8), '1/sqrt(64)', Fraction(1, 8))
    """
    b: Beta
    if isinstance(x, OverSqrt):
        b = OverSqrt(exact(x.c, what), exact(x.D, what))
    elif isinstance(x, BetaInterval):
        b = BetaInterval(exact(x.lo, what), exact(x.hi, what))
        if b.lo > b.hi:
            raise UserError(f"{what}: interval [{brief(b.lo)}, {brief(b.hi)}] is empty")
    elif isinstance(x, str) and (m := _SQRT.fullmatch(x.strip())):
        b = OverSqrt(exact(m.group(1), what), exact(m.group(2) or m.group(3), what))
    else:
        try:
            b = exact(x, what)
        except OutOfRange:
            raise
        except UserError:
            raise UserError(f"{what}: {x!r} is not a temperature (use e.g. 2, 1/8, 0.125 or 1/sqrt(64))") from None
    if isinstance(b, OverSqrt) and b.D <= 0:
        raise UserError(f"{what}: {b}: D must be positive")
    low = b.lo if isinstance(b, BetaInterval) else b.c if isinstance(b, OverSqrt) else b
    if low < 0:
        raise UserError(f"{what}: {brief(b) if not isinstance(b, OverSqrt) else b} is negative (beta must be >= 0)")
    return b


def parse_indices(x: Any, what: str) -> str | list[int]:
    """'all', '0-6', '0,3,5', an int or a list of ints -> 'all' or a sorted list of distinct
    indices >= 0 (checked against the model's layers / heads when it is loaded)."""
    if isinstance(x, str) and x.strip() == "all":
        return "all"
    if isinstance(x, int) and not isinstance(x, bool):
        x = [x]
    out: set[int] = set()
    if isinstance(x, str):
        for part in x.split(","):
            part = part.strip()
            if not part:
                continue
            ends = part.split("-")                    # "5" or "0-6"
            if len(ends) > 2 or not all(re.fullmatch(r"\s*\d+\s*", v) for v in ends):
                raise UserError(f"{what}: cannot read {part[:40]!r} (use 'all', '0-6' or '0,3,5')")
            a, b = (int(v) if len(v.strip()) <= 12 else MAX_INDEX + 1 for v in (ends[0], ends[-1]))
            if max(a, b) > MAX_INDEX:                 # checked before the range is expanded
                raise UserError(f"{what}: {part[:40]!r} names an index beyond the largest, {MAX_INDEX}")
            if b < a:
                raise UserError(f"{what}: {part!r} is an empty range (write it low-high)")
            out.update(range(a, b + 1))
    else:
        try:
            out = {int(v) for v in x}
        except (TypeError, ValueError):
            raise UserError(f"{what}: expected 'all', a range like '0-6' or a list of integers, got {x!r}") from None
    if not out:
        raise UserError(f"{what}: empty list")
    if min(out) < 0:
        raise UserError(f"{what}: {min(out)} is negative")
    if max(out) > MAX_INDEX:
        raise UserError(f"{what}: {brief(max(out))} is beyond the largest index {MAX_INDEX}")
    return sorted(out)


def numeral(x: int | Fraction | float) -> str:
    """The exact certificate numeral of an int, a Fraction or a binary64 (hex float, exact)."""
    if isinstance(x, _numbers.Integral):
        return str(int(x))
    if isinstance(x, Fraction):
        return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
    return float(x).hex()


def decimal(x: Fraction) -> str:
    """x as an exact decimal (1933/100000 -> "0.01933") when its denominator is 2^a 5^b, else "p/q"."""
    x = Fraction(x)
    q, twos, fives = x.denominator, 0, 0
    while q % 2 == 0:
        q, twos = q // 2, twos + 1
    while q % 5 == 0:
        q, fives = q // 5, fives + 1
    if q != 1:
        return f"{x.numerator}/{x.denominator}"
    k = max(twos, fives)                           # x 10^k is an integer
    digits = str(abs(x.numerator) * 10 ** k // x.denominator).rjust(k + 1, "0")
    body = digits[:-k] + "." + digits[-k:] if k else digits
    return ("-" if x < 0 else "") + body


def tag(x: object) -> str:
    """A file-name-safe form of an exact number: 1/4 -> 1_4; a number longer than 40 characters
    (eps = 1e-400) -> its brief form and 8 hex digits of its hash, still one name per number."""
    s = str(x).replace("/", "_")
    if len(s) <= 40:
        return s
    import hashlib
    return (brief(x).replace("about 10^", "1e") + "-" +
            hashlib.sha256(s.encode()).hexdigest()[:8]).replace("/", "_")
