"""The chain F2-F12 of docs/mathematics.md §7.2 in plain floating point (untrusted, no error bounds).

One evaluation for every float caller: `certkit calibrate` chooses r_opt with log_size (Python
floats), `certkit audit` fills its numpy / torch columns with evaluate (in the backend's own
arithmetic).  Nothing here decides a certificate: the kernel's rule upper-chain re-evaluates the
chain with proven enclosures, and chain.py / arb_eval.py give the exact and the mpmath routes.

    tau = 2 - 4/(1 + exp(osc/2)) = 2 tanh(osc/4)       eps' = eps - tau
    F6:  r = 0 or 2 - 4/(1 + exp(Gamma)) <= eps'   ->  R_sym = 1, log S = 0
    eta = eps' / sqrt(6 Gamma)                          (F8 with R_b = 3)
    log S = 0                                           if eta >= 2
          = log P_m(2/eta)                              if 1/2 <= eta < 2
          = min(log P_m(2/eta), log theta_m + log P_m(1/eta))   if eta < 1/2   (m = r + 1)
    R_sym = min(cap, floor(exp(log S)))

with P_m(y) = (y+1)^m - (y-1)^m evaluated as m log(y+1) + log1p(-((y-1)/(y+1))^m).
"""
import math

__all__ = ["MathOps", "MATH", "CHAIN", "log_theta", "log_size", "log_size_terms", "evaluate"]

CHAIN = ("tau", "epsp", "Gamma", "eta", "log10_S", "R_sym")


class MathOps:
    """Python float arithmetic.  A backend (numpy, torch) offers the same six operations on its
    own scalars: scalar(x), exp, log, log1p, sqrt and f (its value as a Python float)."""
    name = "python"

    @staticmethod
    def scalar(x):
        return float(x)

    @staticmethod
    def exp(x):
        return math.exp(min(x, 700))          # exp(700) is already infinite for every use here

    log, log1p, sqrt, f = (staticmethod(math.log), staticmethod(math.log1p), staticmethod(math.sqrt),
                           staticmethod(float))


MATH = MathOps()


def log_theta(m):
    """log theta_m, the default covering density of docs/mathematics.md §3.4 (A_m* lattice, and
    Rogers' bound for m >= 3), in float64."""
    if m == 1:
        return 0.0
    la = (m / 2) * math.log(math.pi) - math.lgamma(m / 2 + 1) + 0.5 * math.log(m + 1) \
        + (m / 2) * math.log(m * (m + 2) / (12 * (m + 1)))
    if m < 3:
        return la
    return min(la, math.log(m * math.log(m) + m * math.log(math.log(m)) + 5 * m))


def log_size_terms(r, Gamma, epsp, ops=MATH):
    """(eta, log S_r(eps')) for eps' > 0: eta in the backend's arithmetic (None when F6 holds and
    R_sym = 1 needs no net), log S as a Python float."""
    two = ops.scalar(2)
    if r == 0 or ops.f(two - 4 / (1 + ops.exp(Gamma))) <= ops.f(epsp):
        return None, 0.0
    eta = epsp / ops.sqrt(6 * Gamma)
    m = r + 1

    def logP(y):                       # log((y+1)^m - (y-1)^m), y >= 1
        return m * ops.log(y + 1) + ops.log1p(-((y - 1) / (y + 1)) ** m)
    e = ops.f(eta)
    if e >= 2:
        return eta, 0.0
    logS = ops.f(logP(2 / eta))
    if e < 0.5:
        logS = min(logS, log_theta(m) + ops.f(logP(1 / eta)))
    return eta, logS


def log_size(r, Gamma, epsp):
    """log S_r(eps') in float (F6-F11) for eps' > 0: the covering size whose minimum over r is r_opt
    (geometry.r_opt).  It only chooses r; R_sym is decided by the kernel."""
    return log_size_terms(r, Gamma, epsp)[1]


def evaluate(osc, Gamma, eps, r, cap, ops=MATH):
    """F2-F12 from the oscillation osc and Gamma = beta rho_Q rho_K (backend scalars): a dict with
    the floats tau, epsp, Gamma, eta, log10_S and the int R_sym (None: line not reached, i.e. eps' <= 0
    stops after F5, and F6 leaves eta unused)."""
    out = dict.fromkeys(CHAIN)
    two = ops.scalar(2)
    tau = two - 4 / (1 + ops.exp(osc / 2))
    epsp = ops.scalar(eps) - tau
    out.update(tau=ops.f(tau), epsp=ops.f(epsp), Gamma=ops.f(Gamma))
    if not ops.f(epsp) > 0:
        return out
    eta, logS = log_size_terms(r, Gamma, epsp, ops)
    if eta is None:
        out.update(log10_S=0.0, R_sym=1)
        return out
    out["eta"] = ops.f(eta)
    out["log10_S"] = logS / math.log(10)
    out["R_sym"] = cap if logS >= math.log(cap + 1) else min(cap, math.floor(math.exp(logS)))
    return out
