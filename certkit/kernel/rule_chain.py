"""Rule upper-chain — proofs/chain-rule.md (docs/mathematics.md §5 Thm 5.1 with §3.5 and the chain §7.2).

Statement.  For any W (d x r), E (d x s), F = [W | E], M = I - F F^T, centres c, e (R^r),
c1 (R^s), c' (R^d), exactly (real arithmetic):
  beta <q_i, k_j> = beta <x_i - c, y_j - e> + beta <a_i - c1, b_j> + beta <M q_i - c', M k_j>
                    + beta (F^T q_i)^T (I - F^T F) (F^T k_j) + (column-only) + (row-only),
x = W^T q, y = W^T k, a = E^T q, b = E^T k.  So A is within tau = 2 tanh(osc/4) (Cor. 2.2) of
the r-dimensional Gibbs matrix At with Gamma = beta rho_Q rho_K, where
  osc = beta (delta_1 omega_1 + delta_2 omega_2 + 2 |F^T q|max ||I - F^T F||_2 |F^T k|max) + osc(bias)
and by Theorem 3.4 r_{eps'}(At) <= N_net(r + 1, eps' / sqrt(6 Gamma)), eps' = eps - tau (R = 3).
r = 0 (or 2 tanh(Gamma/2) <= eps'): r_eps(A) <= 1.  Always r_eps(A) <= min(n, N).
Every geometric quantity is a proven float upper bound; the chain is evaluated in Arb.
Witness: basis, query_centre, key_centre (absent: r = 0); residual_basis with
residual_query_centre (optional); complement_query_centre (optional, default 0).
"""
import math
from fractions import Fraction

import flint
import numpy as np

from .fp import U, inflate, float_up, fro_up, norms_up, prod_up, arb_of, arb_to_fraction_upper, arb_to_fraction_lower
from .load import array, obj, Instance, Malformed, Rejected, Unsupported
from .rows import finite

FIELDS = ["basis", "query_centre", "key_centre", "residual_basis", "residual_query_centre",
          "complement_query_centre"]


def _radius_up(P, E, c):
    """max_i |p_i - c| for exact p_i with |p_i - P_i| <= E_i (entrywise)."""
    return float(inflate(np.max(norms_up(P - c) + norms_up(E, 0)), 1)) if P.shape[1] else 0.0


def _diameter_up(P, E):
    """max_{j,j'} |p_j - p_j'| for exact p_j with |p_j - P_j| <= E_j (entrywise)."""
    if P.shape[1] == 0 or P.shape[0] < 2:
        return 0.0
    block = max(1, (1 << 22) // P.size)
    best = max(float(np.max(norms_up((P[j:j + block, None, :] - P).reshape(-1, P.shape[1]))))
               for j in range(0, P.shape[0], block))
    return float(inflate(best + 2 * float(np.max(norms_up(E, 0))), 2))


def _complement(X, P, EP, F) -> tuple[np.ndarray, np.ndarray | float]:
    """Rows of X (I - F F^T), X exact, P = fl(X F) with error EP: (Y, E), E >= |Y - exact| entrywise."""
    if F.shape[1] == 0:
        return X, np.zeros_like(X)
    Z, EZ = prod_up(P, F.T)
    Y = X - Z
    return Y, inflate(inflate(EZ + EP @ np.abs(F.T), 2 * F.shape[1] + 2) + 2 * U * np.abs(Y), 3)


def read_witness(w: dict, d: int, base_dir: str | None) -> tuple:
    w = obj(w, "$.witness", [], FIELDS)
    if len({f in w for f in FIELDS[:3]}) > 1:
        raise Malformed("$.witness", "basis, query_centre and key_centre go together")
    if ("residual_basis" in w) != ("residual_query_centre" in w):
        raise Malformed("$.witness", "residual_basis and residual_query_centre go together")
    get = lambda f, shape, absent: array(w[f], f"$.witness.{f}", base_dir, shape) if f in w else absent
    W = get("basis", (d, None), np.zeros((d, 0)))
    c, e = get("query_centre", (W.shape[1],), np.zeros(0)), get("key_centre", (W.shape[1],), np.zeros(0))
    E = get("residual_basis", (d, None), np.zeros((d, 0)))
    c1, c2 = get("residual_query_centre", (E.shape[1],), np.zeros(0)), get("complement_query_centre", (d,), np.zeros(d))
    if W.shape[1] + E.shape[1] > d:
        raise Malformed("$.witness", f"basis and residual_basis have {W.shape[1] + E.shape[1]} > d = {d} columns")
    return W, c, e, E, c1, c2


def geometry(inst: Instance, W: np.ndarray, c: np.ndarray, e: np.ndarray, E: np.ndarray, c1: np.ndarray,
             c2: np.ndarray) -> dict:
    """Proven float upper bounds of rho_Q, rho_K, delta/omega per block, the orthogonality
    term, osc(bias) and the total oscillation osc (beta included) of the residual logits."""
    K = inst.K if inst.kept is None else inst.K[inst.kept]
    Q, F = inst.Q, np.hstack([W, E])
    r = W.shape[1]
    Pq, EPq = prod_up(Q, F)
    Pk, EPk = prod_up(K, F)
    g = {"r": r, "rho_Q": _radius_up(Pq[:, :r], EPq[:, :r], c), "rho_K": _radius_up(Pk[:, :r], EPk[:, :r], e)}
    delta = [_radius_up(Pq[:, r:], EPq[:, r:], c1)] if E.shape[1] else []
    omega = [_diameter_up(Pk[:, r:], EPk[:, r:])] if E.shape[1] else []
    delta.append(_radius_up(*_complement(Q, Pq, EPq, F), c2))
    omega.append(_diameter_up(*_complement(K, Pk, EPk, F)))
    ortho = 0.0
    if F.shape[1]:
        G, EG = prod_up(F.T, F)                                 # defect >= ||I - F^T F||_F
        defect = inflate(fro_up(np.eye(F.shape[1]) - G) * (1 + 2 * U) + fro_up(EG), 3)
        fq, fk = (np.max(norms_up(X) + norms_up(EX, 0)) for X, EX in ((Pq, EPq), (Pk, EPk)))
        ortho = float(inflate(2 * fq * defect * fk, 4))
    osc_bias = 0.0
    if inst.bias is not None:
        B = inst.bias if inst.kept is None else inst.bias[:, inst.kept]
        osc_bias = float(inflate(np.max(B.max(axis=1) - B.min(axis=1)), 1))
    beta_hi = float_up(inst.beta.hi)
    osc = inflate(beta_hi * inflate(sum(x * y for x, y in zip(delta, omega)) + ortho, 4) + osc_bias, 3)
    g.update(delta_Q=delta, omega_K=omega, ortho=ortho, osc_bias=osc_bias, osc=float(osc),
             beta_hi=beta_hi, N=int(K.shape[0]))
    finite(np.array([g["rho_Q"], g["rho_K"], osc] + delta + omega), "upper-chain/geometry")
    return g


def theta(m):
    """An Arb ball containing an admissible covering density theta_m, m >= 2 (docs/mathematics.md §3.4)."""
    M = flint.arb(m)
    V = flint.arb.pi() ** (M / 2) / (M / 2 + 1).gamma()
    astar = V * (M + 1).sqrt() * ((M * (M + 2)) / (12 * (M + 1))) ** (M / 2)
    if m < 3:
        return astar
    rogers = M * M.log() + M * M.log().log() + 5 * M
    return astar if astar.upper() < rogers.upper() else rogers


def P(m, y):
    """P_m(y) = (y+1)^m - (y-1)^m = 2 sum_{k odd} C(m, k) y^(m-k): positive expansion."""
    return 2 * sum((math.comb(m, k) * y ** (m - k) for k in range(1, m + 1, 2)), flint.arb(0))


def chain(g: dict, eps: Fraction, n: int) -> tuple:
    """docs/mathematics.md §7.2 F2-F12 in Arb from the geometry g: dict of Arb balls and R_sym (int)."""
    with flint.ctx.workprec(128):
        tau = 2 - 4 / (1 + (arb_of(Fraction(g["osc"])) / 2).exp())
        epsp = arb_of(eps) - tau
        Gamma = arb_of(Fraction(g["beta_hi"])) * arb_of(Fraction(g["rho_Q"])) * arb_of(Fraction(g["rho_K"]))
        out = {"tau": tau, "epsp": epsp, "Gamma": Gamma, "eta": None, "S": None}
        if not epsp > 0:
            return out, None, "tau>=eps"
        if g["r"] == 0:
            return out, 1, "r=0"
        if 2 - 4 / (1 + Gamma.exp()) <= epsp:
            return out, 1, "tanh"
        eta = arb_of(max(Fraction(0), arb_to_fraction_lower(epsp / (6 * Gamma).sqrt())))  # any eta <= the true one
        out["eta"] = eta
        m = g["r"] + 1
        if eta >= 2:
            return out, 1, "net"
        S = P(m, 2 / eta)
        if eta < flint.arb(1) / 2:
            S = min(S, theta(m) * P(m, 1 / eta), key=flint.arb.upper)
        out["S"] = S
        cap = min(n, g["N"])
        bound = math.floor(arb_to_fraction_upper(S)) if S.is_finite() else cap
        return out, min(cap, bound), "net"


def enclosures(inst: Instance, eps: Fraction, witness: dict, base_dir: str | None) -> dict:
    """Everything the rule computes: geometry upper bounds and chain balls, for audits."""
    if inst.mask is not None:
        raise Unsupported("upper-chain on a row-masked instance: the chain theorems assume one key set "
                          "shared by all rows (docs/mathematics.md §8.5)")
    g = geometry(inst, *read_witness(witness, inst.Q.shape[1], base_dir))
    out, R, how = chain(g, Fraction(eps), inst.n)
    g.update(out, R_sym=R, decided=how)
    return g


def check(inst, claim, witness, base_dir, route, choices):
    g = enclosures(inst, claim.eps, witness, base_dir)
    cap = min(inst.n, g["N"])
    if claim.bound >= cap:
        return {"R_sym": cap, "decided": "trivial", "r": g["r"]}
    if g["R_sym"] is None:
        raise Rejected("upper-chain/tau", f"tau = 2 tanh(osc/4) with osc <= {g['osc']:.6g} is not certainly < "
                                          f"eps = {claim.eps}")
    if g["R_sym"] > claim.bound:
        raise Rejected("upper-chain/bound", f"certified R_sym = {g['R_sym']} ({g['decided']}, r = {g['r']}) > "
                                            f"claimed {claim.bound}")
    return {"R_sym": g["R_sym"], "decided": g["decided"], "r": g["r"], "osc": g["osc"],
            "Gamma_upper": float(g["Gamma"].upper())}
