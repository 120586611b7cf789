"""Lattice constructions of docs/mathematics.md §8.2-8.4 (untrusted): parameters, parametric certificates, and
small explicit materialisations for the generic decoding rule.

ball (d, beta, L, K, cell [lo, hi], mode): rows A_a(u) ∝ e^{-|u - L a|^2/2} on
T = {u in Z^d : |u|^2 <= beta} (mode weights) or ∝ ceil(e^{(beta - |u|^2)/2}) e^{<La,u>} (tokens);
M = (2K+1)^d messages.  interaction (r, rho^2, L, K): the same rows realised by unit tokens in
R^{r+1} (the weight lives in an invisible coordinate).  sphere (d, mu, R2): the hemisphere lattice
y_u = (u/rho', sqrt(1 - |u|^2/rho'^2)), u in Z^{d-1}, |u|^2 <= R2, at beta = mu R2.
"""
import itertools
import math
from fractions import Fraction

import flint
import numpy as np

from ..head import Head
from ..kernel import KINDS
from ..kernel.numerics import FORMAT, arb_down, arb_of, arb_up, lattice_count, theta_sum
from ..numbers import numeral, tag
from ..outputs import write_json
from . import writer


def cell_offsets(L):
    """Cell offsets [lo, hi] for spacing L: odd L = 2h+1 -> [-h, h]; even L = 2h -> [-h, h-1]."""
    h = L // 2
    return [-h, h] if L % 2 else [-h, h - 1]


def max_half_width(d, beta, L, cell=None):
    """The largest K with d (L K + h)^2 <= beta (h = max(-lo, hi)), or None if even K = 0 fails."""
    lo, hi = cell or cell_offsets(L)
    h, beta = max(-lo, hi), Fraction(beta)
    if d * h * h > beta:
        return None
    K = max(int((math.isqrt(int(beta / d)) - h) // L), 0)
    while d * (L * (K + 1) + h) ** 2 <= beta:
        K += 1
    while K > 0 and d * (L * K + h) ** 2 > beta:
        K -= 1
    return K


def _write(path, instance, witness, bound, eps, provenance):
    kind = KINDS["lower-lattice"]
    doc = {"format": FORMAT, "version": writer.version_of(kind.name), "kind": kind.name,
           "claim": {"quantity": "r_eps", "relation": kind.relation, "bound": str(int(bound)),
                     "eps": numeral(Fraction(eps))},
           "instance": instance, "witness": witness, "assumptions": list(kind.lemmas)}
    if provenance:
        doc["provenance"] = provenance
    return write_json(path, doc)


def ball_certificate(path, d, beta, L, K, eps, mode="weights", cell=None, provenance=None):
    cell = cell or cell_offsets(L)
    inst = {"construction": "ball", "d": str(d), "beta": numeral(Fraction(beta)), "spacing": str(L),
            "half_width": str(K), "mode": mode}
    return _write(path, inst, {"cell": [str(c) for c in cell]}, (2 * K + 1) ** d, eps, provenance)


def interaction_certificate(path, r, rho2, L, K, eps, cell=None, provenance=None):
    cell = cell or cell_offsets(L)
    inst = {"construction": "interaction", "r": str(r), "rho_squared": numeral(Fraction(rho2)),
            "spacing": str(L), "half_width": str(K)}
    return _write(path, inst, {"cell": [str(c) for c in cell]}, (2 * K + 1) ** r, eps, provenance)


def log10_tokens(d, beta):
    """Proven bounds (lo, hi) of log10 of the ball construction's token count in mode tokens,
    sum_{u in T} ceil(e^{(beta - |u|^2)/2}), T = {u in Z^d : |u|^2 <= beta}: the box |u_i| <= c =
    isqrt(beta/d) lies in T, so the count is >= e^{beta/2} (sum_{|n|<=min(c,60)} e^{-n^2/2})^d; and it is
    <= e^{beta/2} theta_1^d + |T| with |T| <= (2 isqrt(beta) + 1)^d.  Arb; reported, not decided on."""
    beta = Fraction(beta)
    with flint.ctx.workprec(192):
        b, ln10 = arb_of(beta), flint.arb(10).log()
        c = min(math.isqrt(int(beta / d)), 60)
        box = sum((flint.arb(-n * n).exp().sqrt() for n in range(-c, c + 1)), flint.arb(0))
        top = (b / 2 + d * theta_sum(1).log()).exp() + (2 * math.isqrt(int(beta)) + 1) ** d
        return arb_down(b / 2 / ln10 + d * box.log() / ln10), arb_up(top.log() / ln10)


def interaction_gamma(r, rho2, L, K):
    """Proven bounds (lo, hi) of L K sqrt(r) rho (rho^2 = rho2), the scale of the interaction construction's
    logits (the x of its scaling law); lo uses isqrt(rho2) <= rho.  Arb; reported, not decided on."""
    with flint.ctx.workprec(192):
        lk = L * K * flint.arb(r).sqrt()
        return arb_down(lk * math.isqrt(int(Fraction(rho2)))), arb_up(lk * arb_of(Fraction(rho2)).sqrt())


def sphere_certificate(path, d, mu, R2, eps, provenance=None, bound=None):
    """bound: the claimed count (default: computed, sphere_count(d, R2))."""
    inst = {"construction": "sphere", "d": str(d), "mu": numeral(Fraction(mu)), "radius_squared": numeral(Fraction(R2))}
    return _write(path, inst, {}, sphere_count(d, R2) if bound is None else bound, eps, provenance)


def sphere_count(d, R2):
    """#{u in Z^{d-1} : |u|^2 <= R2}: the number of hemisphere-lattice points."""
    return lattice_count(d - 1, int(Fraction(R2)))


def theta(mu):
    n = np.arange(-200, 201)
    return float(np.exp(-mu * n * n / 2.0).sum())


def sphere_mu(d, eps, slack=0.98):
    """The smallest mu on a 1/8 grid with theta_mu^{d-1} - 1 < slack (1 - eps)/(1 + eps)."""
    target = slack * (1 - eps) / (1 + eps)
    mu = Fraction(1, 4)
    while theta(float(mu)) ** (d - 1) - 1 >= target:
        mu += Fraction(1, 8)
    return mu


# ---------------------------------------------------------------- explicit materialisations
def _grid(d, K):
    return np.array(list(itertools.product(range(-K, K + 1), repeat=d)), dtype=np.int64).reshape(-1, d)


def _key_lattice(d, beta):
    c = math.isqrt(int(Fraction(beta)))
    u = _grid(d, c)
    return u[(u * u).sum(axis=1) <= Fraction(beta)]


def _cells(u, L, K, cell):
    """Column -> message index (row of _grid(d, K)) when u lies in L a + {lo..hi}^d, else -1."""
    lo, hi = cell
    a = np.floor_divide(u - lo, L)                  # candidate a with L a + lo <= u < L a + lo + L
    off = u - L * a
    ok = np.all((off >= lo) & (off <= hi) & (np.abs(a) <= K), axis=1)
    idx = np.ravel_multi_index((a + K).T.clip(0, 2 * K), (2 * K + 1,) * u.shape[1])
    return np.where(ok, idx, -1)


def materialise_ball(d, beta, L, K, mode="weights", cell=None):
    """The ball instance as an explicit Head with exact dyadic entries, plus messages and cells.

    beta_e = 4^s with 2^s >= sqrt(beta); queries L a 2^-s, keys u 2^-s, so beta_e <q, k> = <La, u>.
    weights mode: an extra coordinate (2^-s for queries, -|u|^2/2 2^-s for keys) adds -|u|^2/2,
    i.e. the weights e^{-|u|^2/2} exactly (the §8.4 embedding).  tokens mode: integer column
    weights m_u = ceil(e^{(beta - |u|^2)/2}) (must be < 2^53)."""
    cell = cell or cell_offsets(L)
    u, a = _key_lattice(d, beta), _grid(d, K)
    s = max(0, math.ceil(math.log2(max(math.sqrt(float(beta)), 1.0))))
    sc = 2.0 ** -s
    Q, Kk = (L * a) * sc, u * sc
    weights = None
    if mode == "weights":
        Q = np.hstack([Q, np.full((len(a), 1), sc)])
        Kk = np.hstack([Kk, -(u * u).sum(axis=1, keepdims=True) / 2.0 * sc])
    else:
        weights = np.array([_ceil_exp((Fraction(beta) - int(v)) / 2) for v in (u * u).sum(axis=1)], dtype=np.float64)
    head = Head(Q, Kk, Fraction(4 ** s), weights=weights, name=f"ball-d{d}-beta{beta}-L{L}-K{K}-{mode}",
                provenance={"construction": "ball", "d": d, "beta": str(beta), "L": L, "K": K, "mode": mode})
    return head, np.arange(len(a)), _cells(u, L, K, cell)


def _ceil_exp(x):
    """ceil(e^x) for a rational x >= 0, exactly (Arb), as an int below 2^53."""
    if x == 0:
        return 1
    with flint.ctx.workprec(200):
        e = (flint.arb(x.numerator) / x.denominator).exp()
        lo, hi = int(e.lower().floor().unique_fmpz()), int(e.upper().floor().unique_fmpz())
    if lo != hi or lo + 1 >= 2 ** 53:
        raise ValueError(f"ceil(e^{x}) is not resolved below 2^53")
    return lo + 1


def materialise_sphere(d, mu, R2):
    """The hemisphere lattice as an explicit Head (float-rounded points; beta = mu R2 exact)."""
    R2 = Fraction(R2)
    u = _key_lattice(d - 1, R2)
    rho = math.sqrt(float(R2))
    Y = np.hstack([u / rho, np.sqrt(np.maximum(0.0, 1.0 - (u * u).sum(axis=1, keepdims=True) / float(R2)))])
    M = len(Y)
    head = Head(Y, Y, Fraction(mu) * R2, name=f"sphere-d{d}-mu{tag(Fraction(mu))}-R2{tag(R2)}",
                provenance={"construction": "sphere", "d": d, "mu": str(mu), "R2": str(R2)})
    return head, np.arange(M), np.arange(M)


def visible_singular_values(head):
    """Singular values of the doubly centred logit matrix (l_ij - l_1j - l_i1 + l_11)/beta (docs/mathematics.md §4.1);
    the visible dimension is their numerical rank."""
    Qc, Kc = head.queries - head.queries[0], head.keys - head.keys[0]
    return np.linalg.svd(Qc @ Kc.T, compute_uv=False)


def sphere_random(d, beta, P, eps, seed=0):
    """The reading notes' alternative: P uniform points on S^{d-1}, delete the point of largest cross
    energy E_a = sum_{b != a} e^{-beta |y_a - y_b|^2/2} until max E < 0.98 (1-eps)/(1+eps).
    Returns the Head (float points, exact beta) with all points as messages and singleton cells."""
    rng = np.random.default_rng(seed)
    Y = rng.standard_normal((P, d))
    Y /= np.linalg.norm(Y, axis=1, keepdims=True)
    b = float(beta)
    D2 = np.maximum(0.0, 2.0 - 2.0 * (Y @ Y.T))
    W = np.exp(-b * D2 / 2.0)
    np.fill_diagonal(W, 0.0)
    E = W.sum(axis=1)
    keep = np.ones(P, dtype=bool)
    target = 0.98 * (1 - eps) / (1 + eps)
    while keep.any():
        i = int(np.argmax(np.where(keep, E, -np.inf)))
        if E[i] < target:
            break
        keep[i] = False
        E -= W[:, i]
    Y = Y[keep]
    M = len(Y)
    head = Head(Y, Y, Fraction(beta), name=f"sphere-random-d{d}-beta{beta}-P{P}-seed{seed}",
                provenance={"construction": "sphere-random", "d": d, "beta": str(beta), "P": P, "seed": seed})
    return head, np.arange(M), np.arange(M)
