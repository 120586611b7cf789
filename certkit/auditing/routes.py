"""The audit's routes: every quantity of the upper-chain rule for one (head, eps, witness), computed
five ways (proofs/chain-rule.md, docs/mathematics.md §5-§7).

    rho_Q, rho_K, delta_1, omega_1, delta_2, omega_2, ortho, osc_bias, osc   (geometry)
    tau = 2 tanh(osc/4), eps' = eps - tau, Gamma = beta rho_Q rho_K,
    eta = eps'/sqrt(6 Gamma), log10 S, R_sym                                  (chain, docs/mathematics.md §7.2)

    numpy f64, torch f32, torch f64   plain floating point: the geometry here, the chain by
                                      certkit.symbolic.float_chain in the backend's arithmetic;
    kernel                            the trusted rule: proven upper (lower, for eps', eta) bounds;
    arb                               exact Arb enclosures of the geometry (arb_mat products,
                                      128 bits) fed to the sympy chain by the Arb walker;
    mpmath                            the sympy chain by mpmath at 50 digits, at the Arb midpoints.

Plus two float64 checks the comparison needs: the witness's actual row error max_i ||A_i - At_i||_1
and the SVD-bridge residual profile (actual, tau_exact, tau_width, tau_spec per r).
"""
import functools
from dataclasses import dataclass
from fractions import Fraction

import flint
import mpmath
import numpy as np
from scipy.spatial.distance import pdist

from .. import geometry
from ..head import Head, softmax_rows
from ..kernel.numerics import arb_of, arb_to_fraction_lower, arb_to_fraction_upper, chain_enclosures
from ..symbolic import float_chain
from ..symbolic.arb_eval import chain_arb, chain_mpmath

GEOMETRY = ["rho_Q", "rho_K", "delta_1", "omega_1", "delta_2", "omega_2", "ortho", "osc_bias", "osc"]
CHAIN = list(float_chain.CHAIN)           # tau, epsp, Gamma, eta, log10_S, R_sym
QUANTITIES = GEOMETRY + CHAIN
LOWER = {"epsp", "eta"}                   # the kernel gives lower bounds of these, upper of the rest
FLOAT_COLUMNS = ["numpy_f64", "torch_f32", "torch_f64"]
COLUMNS = FLOAT_COLUMNS + ["kernel", "arb", "mpmath"]


@dataclass(eq=False)
class Subject:
    """A head under audit: the Head, the kernel's Instance of it (the exact numbers), the text of
    its beta, and its SVD-bridge profile computed once for all its eps and r."""
    head: Head
    inst: object
    beta_text: str

    @property
    def kept(self):
        """Indices of the kept columns (weight > 0)."""
        w = self.head.weights
        return np.arange(self.head.N) if w is None else np.flatnonzero(w > 0)

    @functools.cached_property
    def profile(self):
        h = self.head
        return geometry.residual_profile(h.queries, h.keys, h.beta_float, h.weights)


def subject(head, inst=None):
    """The Subject of a Head (inst: its kernel Instance when the caller has it)."""
    inst = head.instance() if inst is None else inst
    return Subject(head, inst, inst.beta.text)


# ----------------------------------------------------------------------------- float backends

class _Numpy:
    name = "numpy_f64"

    def arr(self, a):
        return np.asarray(a, dtype=np.float64)

    def scalar(self, x):
        return np.float64(x)

    def hstack(self, a, b):
        return np.hstack([a, b])

    def eye(self, k):
        return np.eye(k)

    def rownorm_max(self, X):
        return float(np.linalg.norm(X, axis=1).max()) if X.size else 0.0

    def diam(self, X):
        return float(pdist(X).max()) if X.shape[0] > 1 and X.shape[1] else 0.0

    def fro(self, X):
        return float(np.linalg.norm(X))

    def osc_rows(self, B):
        return float((B.max(axis=1) - B.min(axis=1)).max())

    exp, log, log1p, sqrt = (staticmethod(np.exp), staticmethod(np.log), staticmethod(np.log1p),
                             staticmethod(np.sqrt))

    def f(self, x):
        return float(x)


class _Torch:
    def __init__(self, torch, dtype, name):
        self.t, self.dtype, self.name = torch, dtype, name

    def arr(self, a):
        return self.t.as_tensor(np.array(a, dtype=np.float64)).to(self.dtype)    # a writable copy

    def scalar(self, x):
        return self.t.tensor(float(x), dtype=self.dtype)

    def hstack(self, a, b):
        return self.t.cat([a, b], dim=1)

    def eye(self, k):
        return self.t.eye(k, dtype=self.dtype)

    def rownorm_max(self, X):
        return self.scalar(0) if X.numel() == 0 else self.t.linalg.vector_norm(X, dim=1).max()

    def diam(self, X):
        if X.shape[0] < 2 or X.shape[1] == 0:
            return self.scalar(0)
        return self.t.pdist(X).max()

    def fro(self, X):
        return self.t.linalg.norm(X)

    def osc_rows(self, B):
        return (B.max(dim=1).values - B.min(dim=1).values).max()

    def exp(self, x):
        return self.t.exp(x)

    def log(self, x):
        return self.t.log(x)

    def log1p(self, x):
        return self.t.log1p(x)

    def sqrt(self, x):
        return self.t.sqrt(x)

    def f(self, x):
        return float(x)


def backends(with_torch=True):
    """(the float backends, whether torch is among them): numpy float64, and torch float32 and
    float64 when with_torch and torch is installed."""
    out = [_Numpy()]
    if not with_torch:
        return out, False
    try:
        import torch
    except ImportError:
        return out, False
    out += [_Torch(torch, torch.float32, "torch_f32"), _Torch(torch, torch.float64, "torch_f64")]
    return out, True


def float_geometry(be, s, wit, beta):
    """The geometry of proofs/chain-rule.md in the backend's floating point (no error bounds);
    also "_Gamma" = beta rho_Q rho_K.  s: a Subject; wit: the witness arrays; beta: a float."""
    W, c, e, E, c1, c2 = (be.arr(x) for x in wit)
    keep = s.kept
    Q, K = be.arr(s.head.queries), be.arr(s.head.keys[keep])
    r, sdim = W.shape[1], E.shape[1]
    F = be.hstack(W, E)
    g = {"rho_Q": be.rownorm_max(Q @ W - c) if r else be.scalar(0),
         "rho_K": be.rownorm_max(K @ W - e) if r else be.scalar(0),
         "delta_1": be.rownorm_max(Q @ E - c1) if sdim else be.scalar(0),
         "omega_1": be.diam(K @ E) if sdim else be.scalar(0)}
    Mq, Mk = Q - (Q @ F) @ F.T, K - (K @ F) @ F.T
    g["delta_2"], g["omega_2"] = be.rownorm_max(Mq - c2), be.diam(Mk)
    g["ortho"] = (2 * be.rownorm_max(Q @ F) * be.fro(be.eye(r + sdim) - F.T @ F) * be.rownorm_max(K @ F)
                  if r + sdim else be.scalar(0))
    bias = s.head.bias
    g["osc_bias"] = be.osc_rows(be.arr(bias[:, keep])) if bias is not None else be.scalar(0)
    b = be.scalar(beta)
    g = {k: be.scalar(v) if isinstance(v, (int, float)) else v for k, v in g.items()}
    g["osc"] = b * (g["delta_1"] * g["omega_1"] + g["delta_2"] * g["omega_2"] + g["ortho"]) + g["osc_bias"]
    g["_Gamma"] = b * g["rho_Q"] * g["rho_K"]
    return g


def float_columns(rows, backends_, s, wit, eps, r, cap):
    """Fill the float columns of rows: the geometry here, the chain by symbolic.float_chain."""
    for be in backends_:
        g = float_geometry(be, s, wit, s.head.beta_float)
        for q in GEOMETRY:
            rows[q][be.name] = be.f(g[q])
        for q, v in float_chain.evaluate(g["osc"], g["_Gamma"], eps, r, cap, be).items():
            rows[q][be.name] = v


# ----------------------------------------------------------------------------- the kernel

def enc(x):
    """[lo, hi] floats rounded outward of an Arb ball (None for None or a non-finite ball)."""
    if x is None or not x.is_finite():
        return None
    return [float(x.lower()), float(x.upper())]


def kernel_column(rows, inst, eps, witness_doc, base_dir, has_residual_block):
    """Fill the kernel column of rows with the trusted rule's bounds; returns the rule's enclosures
    (the comparison needs its tau)."""
    k = chain_enclosures(inst, eps, witness_doc, base_dir)
    kg = {"rho_Q": k["rho_Q"], "rho_K": k["rho_K"], "ortho": k["ortho"], "osc_bias": k["osc_bias"], "osc": k["osc"]}
    dl, om = list(k["delta_Q"]), list(k["omega_K"])
    if not has_residual_block:
        dl, om = [0.0] + dl, [0.0] + om
    kg.update(delta_1=dl[0], omega_1=om[0], delta_2=dl[1], omega_2=om[1])
    for q in GEOMETRY:
        rows[q]["kernel"] = [None, float(kg[q])]
    rows["tau"]["kernel"] = enc(k["tau"])
    rows["epsp"]["kernel"] = enc(k["epsp"])
    rows["Gamma"]["kernel"] = enc(k["Gamma"])
    rows["eta"]["kernel"] = None if k["eta"] is None else [float(k["eta"].lower()), None]
    rows["log10_S"]["kernel"] = enc(log10_ball(k["S"])) if k["S"] is not None else (
        [0.0, 0.0] if k["R_sym"] == 1 else None)
    rows["R_sym"]["kernel"] = k["R_sym"]
    return k


def log10_ball(S):
    return None if S is None else (S.log() / flint.arb(10).log())


# ----------------------------------------------------------------------------- Arb geometry

def _amat(a):
    return flint.arb_mat([[float(x) for x in row] for row in np.atleast_2d(a)]) if a.size else None


def _ball(lo, hi):
    return arb_of(lo).union(arb_of(hi))


def _max_ball(balls):
    """An enclosure of max_i x_i for balls x_i."""
    if not balls:
        return flint.arb(0)
    lo = max(arb_to_fraction_lower(x) for x in balls)
    hi = max(arb_to_fraction_upper(x) for x in balls)
    return _ball(lo, hi)


def _rows(M):
    return [[M[i, j] for j in range(M.ncols())] for i in range(M.nrows())]


def _radius_arb(P, centre):
    """Enclosure of max_i |P_i - centre| (P: arb_mat, centre: float array)."""
    if P is None:
        return flint.arb(0)
    cs = [flint.arb(float(x)) for x in centre]
    return _max_ball([sum(((x - y) ** 2 for x, y in zip(row, cs)), flint.arb(0)).sqrt() for row in _rows(P)])


def _diameter_arb(P):
    """Enclosure of max_{j,j'} |P_j - P_j'| by the Gram matrix G = P P^T."""
    if P is None or P.nrows() < 2:
        return flint.arb(0)
    G = P * P.transpose()
    n = G.nrows()
    diag = [G[j, j] for j in range(n)]
    sq = [diag[j] + diag[k] - 2 * G[j, k] for j in range(n) for k in range(j + 1, n)]
    lo = max(max(arb_to_fraction_lower(x), Fraction(0)) for x in sq)
    hi = max(arb_to_fraction_upper(x) for x in sq)
    return _ball(lo, hi).sqrt() if lo > 0 else flint.arb(0).union(arb_of(hi).sqrt())


def arb_geometry(s, wit, beta):
    """Exact enclosures (128-bit Arb) of the geometry of the witness; beta: exact Arb ball."""
    W, c, e, E, c1, c2 = wit
    keep = s.kept
    Q, K = s.head.queries, s.head.keys[keep]
    r, sdim = W.shape[1], E.shape[1]
    with flint.ctx.workprec(128):
        AQ, AK = _amat(Q), _amat(K)
        AW, AE = (_amat(W) if r else None), (_amat(E) if sdim else None)
        Fm = np.hstack([W, E])
        g = {"rho_Q": _radius_arb(AQ * AW, c) if r else flint.arb(0),
             "rho_K": _radius_arb(AK * AW, e) if r else flint.arb(0),
             "delta_1": _radius_arb(AQ * AE, c1) if sdim else flint.arb(0),
             "omega_1": _diameter_arb(AK * AE) if sdim else flint.arb(0)}
        if r + sdim:
            AF = _amat(Fm)
            Mq, Mk = AQ - AQ * AF * AF.transpose(), AK - AK * AF * AF.transpose()
            D = _amat(np.eye(r + sdim)) - AF.transpose() * AF
            fro = sum((x * x for row in _rows(D) for x in row), flint.arb(0)).sqrt()
            g["ortho"] = 2 * _radius_arb(AQ * AF, np.zeros(r + sdim)) * fro * _radius_arb(AK * AF, np.zeros(r + sdim))
        else:
            Mq, Mk = AQ, AK
            g["ortho"] = flint.arb(0)
        g["delta_2"] = _radius_arb(Mq, c2)
        g["omega_2"] = _diameter_arb(Mk)
        if s.head.bias is not None:
            B = s.head.bias[:, keep]
            g["osc_bias"] = arb_of(max(Fraction(float(hi)) - Fraction(float(lo))
                                       for hi, lo in zip(B.max(axis=1), B.min(axis=1))))
        else:
            g["osc_bias"] = flint.arb(0)
        g["osc"] = beta * (g["delta_1"] * g["omega_1"] + g["delta_2"] * g["omega_2"] + g["ortho"]) + g["osc_bias"]
    return g


def _mid(x):
    """The exact midpoint of the ball x (a point inside it)."""
    with flint.ctx.workprec(512):     # mid() rounds to the working precision
        man, ex = x.mid().man_exp()
    return Fraction(int(man)) * Fraction(2) ** int(ex)


def exact_columns(rows, s, wit, eps, r, N):
    """Fill the arb and mpmath columns: the Arb geometry, then the sympy chain by the Arb walker
    (on the balls) and by mpmath at 50 digits (at their midpoints).  Returns (arb chain, mpmath
    chain): the raw balls and mpf values the comparison checks exactly."""
    n = s.inst.n
    beta_ball = s.inst.beta.ball()
    ag = arb_geometry(s, wit, beta_ball)
    for q in GEOMETRY:
        rows[q]["arb"] = enc(ag[q])
    with flint.ctx.workprec(128):
        rho_K_b = beta_ball * ag["rho_K"]
    ca = chain_arb(beta=1, eps=eps, n=n, N=N, r=r, rho_Q=ag["rho_Q"], rho_K=rho_K_b, delta_Q=1, omega_K=ag["osc"])
    cm = chain_mpmath(beta=1, eps=eps, n=n, N=N, r=r, rho_Q=_mid(ag["rho_Q"]), rho_K=_mid(rho_K_b),
                      delta_Q=1, omega_K=_mid(ag["osc"]), dps=50)
    for q in ("tau", "epsp", "Gamma", "eta"):
        rows[q]["arb"] = enc(ca[q])
        rows[q]["mpmath"] = None if cm[q] is None else float(cm[q])
    rows["log10_S"]["arb"] = enc(ca["logS"] / flint.arb(10).log()) if ca["logS"] is not None else (
        [0.0, 0.0] if ca["R_sym"] == 1 else None)
    rows["log10_S"]["mpmath"] = None if cm["logS"] is None else float(cm["logS"] / mpmath.log(10))
    rows["R_sym"]["arb"], rows["R_sym"]["mpmath"] = ca["R_sym"], cm["R_sym"]
    for res, col in ((ca, "arb"), (cm, "mpmath")):   # F6 holds: R_sym = 1, lines F7-F11 not used
        if res["F6"] is True:
            rows["eta"][col] = None
            rows["log10_S"][col] = [0.0, 0.0] if col == "arb" else 0.0
    return ca, cm


# ----------------------------------------------------------------------------- float64 checks

def witness_residual(s, wit, beta):
    """max_i ||A_i - At_i||_1 for the witness's r-dimensional Gibbs matrix At (float64)."""
    W, c, e, E, c1, c2 = wit
    keep = s.kept
    h = s.head
    Q, K = h.queries, h.keys[keep]
    d = Q.shape[1]
    Fm = np.hstack([W, E])
    M = np.eye(d) - Fm @ Fm.T
    logw = np.zeros(len(keep)) if h.weights is None else np.log(h.weights[keep])
    col = logw + beta * ((K @ W) @ c + (K @ E) @ c1 + (K @ M) @ c2)
    L = beta * Q @ K.T + logw
    if h.bias is not None:
        L = L + h.bias[:, keep]
    Lt = beta * (Q @ W - c) @ (K @ W - e).T + col
    return float(np.abs(softmax_rows(L) - softmax_rows(Lt)).sum(axis=1).max())


def profile_levels(s):
    """Per r of the SVD-bridge profile: r, actual, tau_exact, tau_width, tau_spec (floats)."""
    return [{"r": row.r, "actual": row.actual, "tau_exact": row.tau_exact, "tau_width": row.tau_width,
             "tau_spec": row.tau_spec} for row in s.profile]
