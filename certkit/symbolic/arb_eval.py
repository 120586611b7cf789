"""Two evaluators of the sympy expressions of chain.py.

* evaluate_arb(expr, prec=None, env=None): a whitelisted sympy -> Arb (python-flint) walker.
  The result is a flint.arb ball that provably contains the exact real value of expr.
  Leaves: Integer/Rational (exact), pi, E, and Symbols bound in env to flint.arb balls.
  Nodes: Add, Mul, Pow (integer or rational exponent), exp, log, gamma, binomial, tanh,
  Min, Max, floor, ceiling, Piecewise (conditions: true/false, <, <=, >, >=, And, Or, Not,
  decided in three-valued logic; when a condition cannot be decided the enclosure is the
  union of every branch that may be active).  Anything else, and in particular any
  sympy.Float, raises TypeError.  Precision: prec bits if given, else the caller's
  flint.ctx (use `with flint.ctx.workprec(p):`).
* evaluate_mpmath(expr, dps, env=None): the same whitelist walked with mpmath.mp at dps
  decimal digits.  Non-rigorous (docs/numerics.md §1): an independent cross-check for audits and the
  "approximate" columns of tables, never a deciding number.

chain_arb / chain_mpmath evaluate chain.chain(...) line by line by each route.
"""
import math
from fractions import Fraction

import flint
import mpmath
import sympy as sp

from ..kernel.numerics import arb_to_fraction_upper
from .chain import chain

__all__ = ["evaluate_arb", "evaluate_mpmath", "chain_arb", "chain_mpmath", "arb_upper_int",
           "certainly", "mpf_fraction", "LINES"]

LINES = ("omega", "tau", "epsp", "Gamma", "a", "Rb", "eta", "theta", "logS", "S", "shape")


class _Walker:
    """Shared traversal and whitelist; the arithmetic comes from the subclass."""

    def __init__(self, env=None):
        self.env = dict(env or {})
        self.memo = {}

    # ---- values
    def __call__(self, e):
        try:
            return self.memo[e]
        except KeyError:
            pass
        v = self._eval(e)
        self.memo[e] = v
        return v

    def _eval(self, e):
        if isinstance(e, sp.Float):
            raise TypeError(f"sympy.Float {e!r} rejected: inexact leaf")
        if not isinstance(e, sp.Basic):
            raise TypeError(f"not a sympy expression: {type(e).__name__}")
        if isinstance(e, sp.Integer):
            return self.integer(int(e))
        if isinstance(e, sp.Rational):
            return self.rational(int(e.p), int(e.q))
        if e is sp.pi:
            return self.pi()
        if e is sp.E:
            return self.e()
        if isinstance(e, sp.Symbol):
            if e in self.env:
                return self.env[e]
            raise TypeError(f"unbound symbol {e}")
        if isinstance(e, sp.Add):
            args = [self(a) for a in e.args]
            s = args[0]
            for a in args[1:]:
                s = s + a
            return s
        if isinstance(e, sp.Mul):
            args = [self(a) for a in e.args]
            s = args[0]
            for a in args[1:]:
                s = s * a
            return s
        if isinstance(e, sp.Pow):
            base, ex = e.args
            if isinstance(ex, sp.Float):
                raise TypeError(f"sympy.Float exponent {ex!r} rejected")
            if isinstance(ex, sp.Integer):
                return self.ipow(self(base), int(ex))
            if isinstance(ex, sp.Rational):
                return self.rpow(self(base), int(ex.p), int(ex.q))
            raise TypeError(f"Pow with non-rational exponent {ex} rejected")
        if isinstance(e, sp.exp):
            return self.exp(self(e.args[0]))
        if isinstance(e, sp.log):
            if len(e.args) != 1:
                raise TypeError("log with a base rejected")
            return self.log(self(e.args[0]))
        if isinstance(e, sp.gamma):
            return self.gamma(self(e.args[0]))
        if isinstance(e, sp.binomial):
            a, k = e.args
            if isinstance(k, sp.Integer) and int(k) >= 0:
                if isinstance(a, sp.Integer):
                    return self.integer(math.comb(int(a), int(k)) if int(a) >= 0 else
                                        int(sp.binomial(a, k)))
                return self.binom(self(a), int(k))
            raise TypeError("binomial(x, k) needs a non-negative integer k")
        if isinstance(e, sp.tanh):
            return self.tanh(self(e.args[0]))
        if isinstance(e, sp.Min):
            return self.minmax([self(a) for a in e.args], True)
        if isinstance(e, sp.Max):
            return self.minmax([self(a) for a in e.args], False)
        if isinstance(e, sp.floor):
            return self.floor(self(e.args[0]))
        if isinstance(e, sp.ceiling):
            return self.ceil(self(e.args[0]))
        if isinstance(e, sp.Piecewise):
            return self.piecewise(e)
        raise TypeError(f"node {type(e).__name__} not in the whitelist: {e}")

    # ---- conditions: True / False / None (undecided)
    def cond(self, c):
        if c is sp.true or c is True:
            return True
        if c is sp.false or c is False:
            return False
        if isinstance(c, sp.And):
            vals = [self.cond(a) for a in c.args]
            if any(v is False for v in vals):
                return False
            return True if all(v is True for v in vals) else None
        if isinstance(c, sp.Or):
            vals = [self.cond(a) for a in c.args]
            if any(v is True for v in vals):
                return True
            return False if all(v is False for v in vals) else None
        if isinstance(c, sp.Not):
            v = self.cond(c.args[0])
            return None if v is None else not v
        if isinstance(c, (sp.StrictLessThan, sp.LessThan, sp.StrictGreaterThan,
                          sp.GreaterThan)):
            a, b = self(c.lhs), self(c.rhs)
            if isinstance(c, (sp.StrictGreaterThan, sp.GreaterThan)):
                a, b = b, a              # now: a < b  or  a <= b
            strict = isinstance(c, (sp.StrictLessThan, sp.StrictGreaterThan))
            return self.compare(a, b, strict)
        raise TypeError(f"condition {type(c).__name__} not in the whitelist: {c}")


class _ArbWalker(_Walker):
    def integer(self, k):
        return flint.arb(k)

    def rational(self, p, q):
        return flint.arb(p) / q

    def pi(self):
        return flint.arb.pi()

    def e(self):
        return flint.arb.const_e()

    def ipow(self, x, k):
        return x ** k if k >= 0 else 1 / (x ** (-k))

    def rpow(self, x, p, q):
        root = x.sqrt() if q == 2 else x.root(q)
        return self.ipow(root, p)

    def exp(self, x):
        return x.exp()

    def log(self, x):
        return x.log()

    def gamma(self, x):
        return x.gamma()

    def binom(self, x, k):
        return x.bin(k)

    def tanh(self, x):
        return x.tanh()

    def minmax(self, xs, is_min):
        s = xs[0]
        for x in xs[1:]:
            s = s.min(x) if is_min else s.max(x)
        return s

    def floor(self, x):
        return x.floor()

    def ceil(self, x):
        return x.ceil()

    def compare(self, a, b, strict):
        if (a < b) if strict else (a <= b):
            return True
        if (a >= b) if strict else (a > b):
            return False
        return None

    def piecewise(self, e):
        acc = None
        for expr, c in e.args:
            v = self.cond(c)
            if v is False:
                continue
            x = self(expr)
            acc = x if acc is None else acc.union(x)
            if v is True:
                return acc
        if acc is None:
            raise ValueError(f"no branch of {e} can be active")
        return acc          # no branch certainly active (cannot happen with a final True)


class _MpWalker(_Walker):
    def integer(self, k):
        return mpmath.mpf(k)

    def rational(self, p, q):
        return mpmath.mpf(p) / q

    def pi(self):
        return +mpmath.mp.pi

    def e(self):
        return +mpmath.mp.e

    def ipow(self, x, k):
        return x ** k

    def rpow(self, x, p, q):
        return (mpmath.sqrt(x) if q == 2 else mpmath.root(x, q)) ** p

    def exp(self, x):
        return mpmath.exp(x)

    def log(self, x):
        return mpmath.log(x)

    def gamma(self, x):
        return mpmath.gamma(x)

    def binom(self, x, k):
        return mpmath.binomial(x, k)

    def tanh(self, x):
        return mpmath.tanh(x)

    def minmax(self, xs, is_min):
        return min(xs) if is_min else max(xs)

    def floor(self, x):
        return mpmath.floor(x)

    def ceil(self, x):
        return mpmath.ceil(x)

    def compare(self, a, b, strict):
        return bool(a < b) if strict else bool(a <= b)

    def piecewise(self, e):
        for expr, c in e.args:
            if self.cond(c):
                return self(expr)
        raise ValueError(f"no branch of {e} is active")


def evaluate_arb(expr, prec=None, env=None):
    """A flint.arb enclosure of the exact value of a whitelisted sympy expression."""
    if prec is None:
        return _ArbWalker(env)(sp.sympify(expr))
    with flint.ctx.workprec(prec):
        return _ArbWalker(env)(sp.sympify(expr))


def evaluate_mpmath(expr, dps, env=None):
    """A non-rigorous mpmath.mp approximation of expr at dps digits (audit cross-check)."""
    with mpmath.mp.workdps(dps):
        return +_MpWalker(env)(sp.sympify(expr))


def certainly(cond, prec=None, env=None):
    """Three-valued decision (True / False / None) of a sympy condition by Arb."""
    if prec is None:
        return _ArbWalker(env).cond(cond)
    with flint.ctx.workprec(prec):
        return _ArbWalker(env).cond(cond)


def arb_upper_int(x):
    """The largest integer <= the upper end of the finite ball x: for an integer-valued
    quantity enclosed by x, an int certainly >= its true value."""
    if not x.is_finite():
        raise ValueError(f"ball {x} is not finite")
    f = arb_to_fraction_upper(x)
    return f.numerator // f.denominator


def mpf_fraction(v):
    """The exact rational value of a finite mpmath mpf (mpmath.mpf(v) would re-round it to the
    ambient precision; man_exp drops the sign).  ValueError for inf / nan."""
    if not isinstance(v, mpmath.mpf):
        raise TypeError(type(v).__name__)
    sign, man, exp, _ = v._mpf_
    if not man:
        if v != 0:
            raise ValueError(f"non-finite {v}")
        return Fraction(0)
    f = Fraction(int(man)) * Fraction(2) ** int(exp)
    return -f if sign else f


# ---------------------------------------------------------------- the chain by two routes

def _symbolise(kwargs):
    """Replace flint.arb inputs by fresh sympy Symbols; return (kwargs, env)."""
    env = {}
    out = {}
    for k, v in kwargs.items():
        if isinstance(v, flint.arb):
            s = sp.Symbol(f"in_{k}")
            env[s] = v
            out[k] = s
        else:
            out[k] = v
    return out, env


def _lines(ex, w):
    """Evaluate the lines of chain() in order with walker w.  F3 is decided right after
    F2; when it does not certainly hold the certificate does not exist at this r and the
    lines after F5 are not evaluated (None)."""
    res = dict.fromkeys(LINES)
    res["m"] = ex["m"]
    res["F6"] = None
    for k in ("omega", "tau"):
        if ex[k] is not None:
            res[k] = w(ex[k])
    res["F3"] = w.cond(ex["F3"])
    res["epsp"], res["Gamma"] = w(ex["epsp"]), w(ex["Gamma"])
    if res["F3"] is not True:
        return res
    res["F6"] = w.cond(ex["F6"])
    for k in LINES[4:]:
        if ex[k] is not None:
            res[k] = w(ex[k])
    return res


def chain_arb(beta, eps, n, N, r, rho_Q, rho_K, delta_Q, omega_K=None, sigma_next=None,
              pibar_min=None, exact_W=False, prec=128):
    """docs/mathematics.md §7.2 evaluated with Arb (rules of §7.3) at prec bits.

    Real inputs may be exact numbers (see chain.to_exact) or flint.arb balls (then every
    enclosure holds for every point of the input balls).  Returns a dict with flint.arb
    enclosures for omega, tau, epsp, Gamma, a, Rb, eta, theta, logS, S, shape (None where a
    line is not reached), m, F3 and F6 as True/False/None (None: undecided by Arb), and
      certified:  F3 certainly holds (tau < eps for every input in the balls);
      R_sym:      an int certainly >= min(n, N, floor(exp(logS))) (1 when F6 certainly holds),
                  or None when not certified;
      R_sym_ball: the enclosure of R_sym before rounding to an int.
    """
    kw, env = _symbolise(dict(beta=beta, eps=eps, rho_Q=rho_Q, rho_K=rho_K, delta_Q=delta_Q,
                              omega_K=omega_K, sigma_next=sigma_next, pibar_min=pibar_min))
    ex = chain(n=n, N=N, r=r, exact_W=exact_W, **kw)
    with flint.ctx.workprec(prec):
        w = _ArbWalker(env)
        res = _lines(ex, w)
        res["certified"] = res["F3"] is True
        res["R_sym"] = res["R_sym_ball"] = None
        if res["certified"]:
            if res["F6"] is True:
                ball = flint.arb(1)
            else:
                ball = w(ex["R_sym"])
            res["R_sym_ball"] = ball
            cap = min(int(n), int(N))           # R_sym <= min(n, N) whatever logS is
            res["R_sym"] = min(cap, arb_upper_int(ball)) if ball.is_finite() else cap
    return res


def chain_mpmath(beta, eps, n, N, r, rho_Q, rho_K, delta_Q, omega_K=None, sigma_next=None,
                 pibar_min=None, exact_W=False, dps=40):
    """The same chain by mpmath.mp at dps digits (non-rigorous; audit cross-check).
    Same keys as chain_arb, with mpf values, bools, and R_sym an int or None."""
    ex = chain(beta=beta, eps=eps, n=n, N=N, r=r, rho_Q=rho_Q, rho_K=rho_K, delta_Q=delta_Q,
               omega_K=omega_K, sigma_next=sigma_next, pibar_min=pibar_min, exact_W=exact_W)
    with mpmath.mp.workdps(dps):
        w = _MpWalker()
        res = _lines(ex, w)
        res["certified"] = res["F3"]
        res["R_sym"] = res["R_sym_ball"] = None
        if res["certified"]:
            v = w(ex["R_sym"])
            res["R_sym_ball"] = v
            res["R_sym"] = int(v)
    return res

