"""Rule lower-lattice: parametric lattice constructions, checked without enumerating tokens
(docs/mathematics.md §8.2-8.4, proofs/lattice-construction.md).

* ball (d, beta, spacing L, half-width K, mode): keys u/sqrt(beta), u in T = {u in Z^d : |u|^2 <= beta},
  weights e^{-|u|^2/2} (mode weights) or integer multiplicities ceil(e^{(beta-|u|^2)/2}) (mode
  tokens); queries L a/sqrt(beta), a in {-K..K}^d; cells C_a = L a + {lo..hi}^d.  If
  hi - lo < L (disjoint) and d (L K + max(-lo, hi))^2 <= beta (C_a inside T), every margin is
  >= 2 own - 1 with own = (S/theta)^d, S = sum_{lo<=n<=hi} e^{-n^2/2}, theta = sum_Z e^{-n^2/2};
  tokens: own' = own / (2 - (1 - nu) own), nu = e^{-(beta - d (L K + h)^2)/2}.  M = (2K+1)^d.
* interaction (r, rho^2, L, K): unit tokens in R^{r+1} whose rows are the ball rows (d = r,
  beta = rho^2) at beta' = 2 rho^2; visible dimension r (K >= 1, rho >= 1).
* sphere (d, mu, R2): queries = keys = y_u = (u/rho', sqrt(1 - |u|^2/rho'^2)), u in Z^{d-1},
  |u|^2 <= R2 = rho'^2, beta = mu R2, singleton cells; E_a <= theta_mu^{d-1} - 1 and
  margin = (1 - E)/(1 + E), so theta_mu^{d-1} - 1 < (1 - eps)/(1 + eps) gives r_eps >= M = #points.
theta bounds: S_T <= theta_mu <= S_T + 2 e^{-mu (T+1)^2/2} / (1 - e^{-mu (T+1)}).  All in Arb;
comparisons exact.
"""
import math
from fractions import Fraction

import flint
import numpy as np

from .fp import arb_of, arb_up, arb_down, arb_to_fraction_lower, arb_to_fraction_upper
from .load import obj, string, parse_numeral, parse_int, Malformed, Rejected, Unsupported

PREC = 192
TERMS = 60                      # theta truncation (mu >= 1/4: tail < e^{-460})
MAX_COUNT_WORK = 10 ** 8        # sphere lattice count: about (2 sqrt(R2) + 1)^(d-2) vector entries


def _rat(x, path, lo, hi):
    v = parse_numeral(x, path)
    if not lo <= v <= hi:
        raise Malformed(path, f"{v} out of range [{lo}, {hi}]")
    return v


def _gauss_sum(mu, lo, hi):
    """sum over lo <= n <= hi, |n| <= TERMS, of e^{-mu n^2/2}: an Arb ball, a lower bound of the
    full sum (exact when |lo|, |hi| <= TERMS)."""
    m = arb_of(mu)
    return sum(((-m * n * n) / 2).exp() for n in range(max(lo, -TERMS), min(hi, TERMS) + 1))


def theta_sum(mu: Fraction | int) -> flint.arb:
    """An Arb ball containing theta_mu = sum_{n in Z} e^{-mu n^2/2}."""
    m, t = arb_of(mu), TERMS + 1
    tail = 2 * ((-m * t * t) / 2).exp() / (1 - (-m * t).exp())
    return _gauss_sum(mu, -TERMS, TERMS) + flint.arb(0).union(tail)


def _isqrt(v):
    """floor(sqrt(v)) for an int64 array 0 <= v < 2^52, exact."""
    s = np.floor(np.sqrt(v.astype(np.float64))).astype(np.int64)
    for _ in range(2):
        s = np.where((s + 1) * (s + 1) <= v, s + 1, s)
        s = np.where(s * s > v, s - 1, s)
    return s


def lattice_count(k: int, m: int) -> int:
    """#{u in Z^k : |u|^2 <= m} for an integer m >= 0, exact."""
    if k < 2:
        return 2 * math.isqrt(m) + 1 if k else 1
    x = np.arange(-math.isqrt(m), math.isqrt(m) + 1, dtype=np.int64)
    if k == 2:
        return int(np.sum(2 * _isqrt(m - x * x) + 1))
    return sum(lattice_count(k - 1, m - int(t) * int(t)) for t in x)


def _ball(claim, d, beta, L, K, cell, mode, name):
    lo, hi = cell
    if not lo <= 0 <= hi or hi - lo + 1 > L:
        raise Rejected(f"{name}/cells", f"cell offsets [{lo}, {hi}] must contain 0 and fit in the spacing L = {L}")
    reach = L * K + max(-lo, hi)
    if not d * reach * reach <= beta:
        raise Rejected(f"{name}/inside", f"d (L K + h)^2 = {d * reach * reach} > beta = {beta}: "
                                         f"a message cell leaves the key ball")
    M = (2 * K + 1) ** d
    if claim.bound > M:
        raise Rejected(f"{name}/size", f"(2K+1)^d = {M} messages vs claimed bound {claim.bound}")
    own = (_gauss_sum(1, lo, hi) / theta_sum(1)) ** d
    if mode == "tokens":
        nu = (-(arb_of(beta) - d * reach * reach) / 2).exp()
        own = own / (2 - (1 - nu) * own)
    margin = 2 * own - 1
    if not arb_to_fraction_lower(margin) > claim.eps:
        raise Rejected(f"{name}/margin", f"certified margin >= {arb_down(margin):.6g} is not > eps = {claim.eps}")
    return {"messages": M, "certified_min_margin": arb_down(margin)}


def check(instance, claim, witness):
    """(details, beta text) for a lower-lattice certificate; Rejected/Malformed otherwise."""
    x = obj(instance, "$.instance", ["construction"],
            ["d", "r", "beta", "rho_squared", "mu", "radius_squared", "spacing", "half_width", "mode"])
    con = string(x["construction"], "$.instance.construction")
    name = f"lower-lattice/{con}"
    with flint.ctx.workprec(PREC):
        if con in ("ball", "interaction"):
            dim = "d" if con == "ball" else "r"
            need = [dim, "beta" if con == "ball" else "rho_squared", "spacing", "half_width", "mode"]
            obj(x, "$.instance", ["construction"] + need[:4 + (con == "ball")])
            d = parse_int(x[dim], f"$.instance.{dim}", 1, 64)
            beta = _rat(x[need[1]], f"$.instance.{need[1]}", Fraction(1, 10 ** 6), 10 ** 12)
            L = parse_int(x["spacing"], "$.instance.spacing", 1, 10 ** 6)
            K = parse_int(x["half_width"], "$.instance.half_width", 0, 10 ** 6)
            mode = string(x["mode"], "$.instance.mode") if con == "ball" else "weights"
            if mode not in ("weights", "tokens"):
                raise Malformed("$.instance.mode", f"expected \"weights\" or \"tokens\", got {mode!r:.40}")
            w = obj(witness, "$.witness", ["cell"])
            if not isinstance(w["cell"], list) or len(w["cell"]) != 2:
                raise Malformed("$.witness.cell", "expected [lo, hi] cell offsets")
            cell = [parse_int(v, f"$.witness.cell[{i}]", -10 ** 6, 10 ** 6) for i, v in enumerate(w["cell"])]
            return _ball(claim, d, beta, L, K, cell, mode, name), str(beta if con == "ball" else 2 * beta)
        if con != "sphere":
            raise Unsupported(f"lattice construction {con!r} (this checker reads ball, sphere, interaction)")
        obj(x, "$.instance", ["construction", "d", "mu", "radius_squared"])
        obj(witness, "$.witness", [])
        d = parse_int(x["d"], "$.instance.d", 2, 64)
        mu = _rat(x["mu"], "$.instance.mu", Fraction(1, 4), 10 ** 6)
        R2 = _rat(x["radius_squared"], "$.instance.radius_squared", 0, 10 ** 12)
        m = int(R2)                 # |u|^2 is an integer
        if (2 * math.isqrt(m) + 1) ** max(d - 2, 0) > MAX_COUNT_WORK:
            raise Unsupported(f"sphere lattice count in dimension {d - 1} at radius^2 {m} is too large to enumerate")
        E = theta_sum(mu) ** (d - 1) - 1
        if not arb_to_fraction_upper(E) < (1 - claim.eps) / (1 + claim.eps):
            raise Rejected(f"{name}/energy", f"cross energy <= {arb_up(E):.6g} is not < (1 - eps)/(1 + eps) = "
                                             f"{float((1 - claim.eps) / (1 + claim.eps)):.6g}")
        M = lattice_count(d - 1, m)
        if claim.bound > M:
            raise Rejected(f"{name}/size", f"{M} lattice points vs claimed bound {claim.bound}")
        margin = (1 - E) / (1 + E)
        return {"messages": M, "cross_energy_upper": arb_up(E), "certified_min_margin": arb_down(margin)}, str(mu * R2)
