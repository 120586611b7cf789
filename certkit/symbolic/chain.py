"""docs/mathematics.md §3.4 and §7.2 as sympy expressions.

Every function here builds an exact sympy expression (Integer/Rational leaves, pi, exp, log,
sqrt, gamma, binomial, Min, floor, Piecewise).  No sympy.Float is ever created: inputs are
converted exactly (int, Fraction, decimal string, sympy Rational; a Python float by its exact
binary value).  Decisions that depend on real values (F3, F6, the eta >= 2 / eta < 1/2 branches
of the default N_net rule) are left as *unevaluated* relationals inside the expression, so
that the evaluator decides them: the Arb walker (arb_eval.evaluate_arb) with three-valued
logic, the mpmath walker (arb_eval.evaluate_mpmath) by plain comparison.  sympy's own
numerical comparison is never used to decide anything (docs/numerics.md §1, §2).

The same `chain(...)` output is evaluated by both routes (arb_eval.chain_arb and
arb_eval.chain_mpmath).
"""
import functools
import math
from fractions import Fraction

import sympy as sp

__all__ = ["to_exact", "P", "P_pos", "V", "theta_Astar", "rogers", "theta", "logN_net", "chain"]

_HALF = sp.Rational(1, 2)


def _unevaluated(fn):
    """Build the expression with sympy's automatic evaluation switched off: sympy then neither
    rewrites nor decides anything from numerical values (log of a number it believes
    negative, sign tests by evalf, ...); the evaluators see the formula as written."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with sp.evaluate(False):
            return fn(*args, **kwargs)
    return wrapper


def to_exact(v):
    """An exact sympy number (or the given sympy expression) for an input value.

    int, Fraction, str ("0.2" means 1/5 exactly), sympy Integer/Rational/Symbol/expression
    without Float; a Python float is taken at its exact binary value.  sympy.Float: TypeError.
    """
    if isinstance(v, sp.Basic):
        if v.atoms(sp.Float):
            raise TypeError(f"sympy.Float in input {v!r}: pass an exact Rational instead")
        return v
    if isinstance(v, bool):
        raise TypeError("bool is not a number here")
    if isinstance(v, int):
        return sp.Integer(v)
    if isinstance(v, (Fraction, float, str)):
        f = Fraction(v)
        return sp.Rational(f.numerator, f.denominator)
    raise TypeError(f"cannot convert {type(v).__name__} exactly")


def _m(m):
    if isinstance(m, sp.Integer):
        m = int(m)
    if not isinstance(m, int) or isinstance(m, bool) or m < 1:
        raise ValueError(f"dimension m must be an int >= 1, got {m!r}")
    return m


# ---------------------------------------------------------------- F9: P_m(y)

@_unevaluated
def P(m, y):
    """P_m(y) = (y+1)^m - (y-1)^m (docs/mathematics.md §3.4), as written (not for interval evaluation)."""
    y = to_exact(y)
    return (y + 1) ** m - (y - 1) ** m


@_unevaluated
def P_pos(m, y):
    """The positive expansion 2 * sum_{k odd <= m} binomial(m, k) y^(m-k).

    For an int m the sum is written out (each term has a positive coefficient, so an interval
    evaluation at y >= 0 is tight); for a symbolic m it is a sympy Sum over k = 2j+1.
    """
    y = to_exact(y)
    if isinstance(m, (int, sp.Integer)):
        m = _m(m)
        return 2 * sp.Add(*[sp.Integer(math.comb(m, k)) * y ** (m - k) for k in range(1, m + 1, 2)])
    j = sp.Dummy("j", integer=True, nonnegative=True)
    return 2 * sp.Sum(sp.binomial(m, 2 * j + 1) * y ** (m - 2 * j - 1),
                      (j, 0, sp.floor((m - 1) / sp.Integer(2))))


# ---------------------------------------------------------------- F10: theta_m

@_unevaluated
def V(m):
    """Volume of the unit ball of R^m: pi^(m/2) / Gamma(m/2 + 1)."""
    h = sp.Rational(_m(m), 2)
    return sp.pi ** h / sp.gamma(h + 1)


@_unevaluated
def theta_Astar(m):
    """Covering density of A_m^*: V_m sqrt(m+1) (m(m+2)/(12(m+1)))^(m/2)  [C, SPLAG ch. 2]."""
    m = _m(m)
    return V(m) * sp.sqrt(m + 1) * sp.Rational(m * (m + 2), 12 * (m + 1)) ** sp.Rational(m, 2)


@_unevaluated
def rogers(m):
    """Rogers (1957): m ln m + m ln ln m + 5m, for m >= 3 only (ln ln m > 0 needs m >= 3)."""
    m = _m(m)
    if m < 3:
        raise ValueError("Rogers' bound is used for m >= 3 only (docs/mathematics.md §7.3)")
    mm = sp.Integer(m)
    return mm * sp.log(mm) + mm * sp.log(sp.log(mm)) + 5 * mm


@_unevaluated
def theta(m):
    """Default theta_m = min(theta(A_m^*), Rogers_m [m >= 3]); theta_1 = 1 (docs/mathematics.md §3.4)."""
    m = _m(m)
    if m == 1:
        return sp.Integer(1)
    if m == 2:
        return theta_Astar(2)
    return sp.Min(theta_Astar(m), rogers(m), evaluate=False)


# ---------------------------------------------------------------- F11: log N_net

@_unevaluated
def logN_net(m, eta, expanded=True):
    """log of the default N_net(m, eta) bound (docs/mathematics.md §3.4 "Default rule"):

        0                                                      if eta >= 2
        min( log P(m, 2/eta), [log theta_m + log P(m, 1/eta)  if eta < 1/2] )   otherwise.

    The branch conditions stay unevaluated (Piecewise); P by its positive expansion unless
    expanded=False.
    """
    m = _m(m)
    eta = to_exact(eta)
    Pf = P_pos if expanded else P
    pack = sp.log(Pf(m, 2 / eta))
    avg = sp.log(theta(m)) + sp.log(Pf(m, 1 / eta))
    return sp.Piecewise(
        (sp.Integer(0), sp.Ge(eta, 2, evaluate=False)),
        (sp.Min(pack, avg, evaluate=False), sp.Lt(eta, _HALF, evaluate=False)),
        (pack, sp.true),
        evaluate=False)


# ---------------------------------------------------------------- §7.2: the chain

def _two_minus(x):
    """2 - 4/(1 + exp(x)) = 2 tanh(x/2), x occurring once (docs/mathematics.md §7.3)."""
    return 2 - 4 / (1 + sp.exp(x))


@_unevaluated
def chain(beta, eps, n, N, r, rho_Q, rho_K, delta_Q, omega_K=None, sigma_next=None,
          pibar_min=None, exact_W=False):
    """The chain F1..F13 of docs/mathematics.md §7.2 for one r, as a dict of sympy expressions.

    Keys (None where a line is not reached / not applicable):
      m, omega (F1), tau (F2), F3 (relational tau < eps: the certificate exists only if it
      holds), epsp (F4), Gamma (F5), F6 (condition under which R_sym = 1: sympy.true for
      r == 0 or Gamma == 0, else the relational 2 - 4/(1+exp(Gamma)) <= epsp), a, Rb (F7),
      eta (F8), theta (F10), logS (F11), S = exp(logS), R_sym (F12, valid when F3 holds:
      Piecewise((1, F6), (Min(n, N, floor(exp(logS))), True))), shape (F13: the right-hand
      side log(2m) + (m-1)/2 log(1+8 Rb) + r/2 log(1 + Gamma/epsp^2), report only).

    exact_W=True means W = V exactly (r = r_exact, exact arithmetic): tau = 0 and omega_K,
    sigma_next, delta_Q are not used.
    """
    beta, eps, rho_Q, rho_K = (to_exact(v) for v in (beta, eps, rho_Q, rho_K))
    n, N = to_exact(n), to_exact(N)
    r = int(r)
    if r < 0:
        raise ValueError("r must be >= 0")
    m = r + 1
    out = dict(m=m, omega=None, tau=None, F3=None, epsp=None, Gamma=None, F6=None, a=None,
               Rb=None, eta=None, theta=None, logS=None, S=None, R_sym=None, shape=None)
    # F1, F2
    if exact_W:
        tau = sp.Integer(0)
    else:
        delta_Q = to_exact(delta_Q)
        cands = []
        if omega_K is not None:
            cands.append(to_exact(omega_K))
        if sigma_next is not None:
            cands.append(2 * to_exact(sigma_next))
        if not cands:
            raise ValueError("F1 needs omega_K or sigma_next (or exact_W=True)")
        omega = cands[0] if len(cands) == 1 else sp.Min(*cands, evaluate=False)
        out["omega"] = omega
        tau = _two_minus(beta * delta_Q * omega / 2)
    out["tau"] = tau
    # F3, F4, F5
    out["F3"] = sp.Lt(tau, eps, evaluate=False)
    epsp = eps - tau
    out["epsp"] = epsp
    Gamma = beta * rho_Q * rho_K
    out["Gamma"] = Gamma
    # F6
    if r == 0 or Gamma.is_zero is True:
        out["F6"] = sp.true
        out["R_sym"] = sp.Integer(1)
        out["logS"] = sp.Integer(0)
        out["S"] = sp.Integer(1)
        return out
    F6 = sp.Le(_two_minus(Gamma), epsp, evaluate=False)
    out["F6"] = F6
    # F7
    if pibar_min is None:
        a = sp.Integer(2)
    else:
        a = sp.Min(sp.Integer(2), sp.log(1 / to_exact(pibar_min)) / Gamma, evaluate=False)
    Rb = 1 + a
    out["a"], out["Rb"] = a, Rb
    # F8, F10, F11
    eta = epsp / sp.sqrt(2 * Rb * Gamma)
    out["eta"] = eta
    out["theta"] = theta(m)
    logS = logN_net(m, eta)
    out["logS"] = logS
    out["S"] = sp.exp(logS)
    # F12
    out["R_sym"] = sp.Piecewise(
        (sp.Integer(1), F6),
        (sp.Min(n, N, sp.floor(sp.exp(logS), evaluate=False), evaluate=False), sp.true),
        evaluate=False)
    # F13
    out["shape"] = (sp.log(2 * sp.Integer(m)) + sp.Rational(m - 1, 2) * sp.log(1 + 8 * Rb)
                    + sp.Rational(r, 2) * sp.log(1 + Gamma / epsp ** 2))
    return out
