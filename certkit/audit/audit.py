"""certkit audit — every number of the chain certificate, computed five ways, disagreements flagged.

For a head (a certificate's instance, or Q, K, beta from a .npz/.safetensors file), a tolerance
eps and a witness (W, c, e, E, c1, c') of the upper-chain rule (proofs/chain-rule.md) —
the certificate's own witness for kind upper-chain, otherwise the SVD-bridge witness at the r
with the smallest certified bound — each chain quantity

    rho_Q, rho_K, delta_1, omega_1, delta_2, omega_2, ortho, osc_bias, osc   (geometry)
    tau = 2 tanh(osc/4), eps' = eps - tau, Gamma = beta rho_Q rho_K,
    eta = eps'/sqrt(6 Gamma), log10 S, R_sym                                  (chain, SPEC §7.2)

is evaluated by
    numpy f64, torch f32, torch f64   plain floating point (geometry and chain),
    kernel                            the trusted rule: proven upper (lower, for eps', eta) bounds,
    arb                               exact Arb enclosures of the geometry (arb_mat products,
                                      128 bits) fed to the sympy chain by the Arb walker,
    mpmath                            the sympy chain by mpmath at 50 digits, at the Arb midpoints.

Flags (any flag: exit status 1):
    outside      a float value outside the Arb enclosure by more than its precision explains
                 (relative 1e-9 for float64, 1e-3 for float32, plus an absolute floor);
    unsound      a kernel upper bound below the Arb enclosure (lower bound above it), or the
                 witness's actual row error max_i ||A_i - At_i||_1 above the kernel's tau;
    routes       the mpmath value outside the Arb walker's ball, or their R_sym differ;
    ordering     actual <= tau^exact <= tau^width <= tau^spec violated at some r of the
                 SVD-bridge profile (SPEC §6.2; geometry.residual_profile).
"""
import json
import math
import os
import sys
import time
from fractions import Fraction

import flint
import mpmath
import numpy as np
from scipy.spatial.distance import pdist

from .. import geometry as geo
from ..headfile import HeadFileError, read_head, parse_beta, beta_float
from ..kernel.fp import arb_to_fraction_lower, arb_to_fraction_upper, arb_of
from ..kernel.load import read_json, header, claim as read_claim, instance as read_instance
from ..kernel.rule_chain import enclosures, _witness
from ..kernel.verdict import Malformed, Unsupported
from ..search.chain import best_chain, chain_witness, witness_json
from ..search.writer import kernel_instance
from ..symbolic.arb_eval import chain_arb, chain_mpmath

GEOMETRY = ["rho_Q", "rho_K", "delta_1", "omega_1", "delta_2", "omega_2", "ortho", "osc_bias", "osc"]
CHAIN = ["tau", "epsp", "Gamma", "eta", "log10_S", "R_sym"]
QUANTITIES = GEOMETRY + CHAIN
LOWER = {"epsp", "eta"}                   # the kernel gives lower bounds of these, upper of the rest
COLUMNS = ["numpy_f64", "torch_f32", "torch_f64", "kernel", "arb", "mpmath"]
REL_TOL = {"numpy_f64": 1e-9, "torch_f64": 1e-9, "torch_f32": 1e-3}


class AuditInputError(ValueError):
    pass


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
        return self.t.as_tensor(np.asarray(a, dtype=np.float64)).to(self.dtype)

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


def _backends():
    out = [_Numpy()]
    try:
        import torch
    except ImportError:
        return out, False
    out += [_Torch(torch, torch.float32, "torch_f32"), _Torch(torch, torch.float64, "torch_f64")]
    return out, True


def float_geometry(be, head, wit, beta):
    """The geometry of proofs/chain-rule.md in the backend's floating point (no error bounds)."""
    W, c, e, E, c1, c2 = (be.arr(x) for x in wit)
    keep = head["kept"]
    Q, K = be.arr(head["Q"]), be.arr(head["K"][keep])
    r, s, d = W.shape[1], E.shape[1], Q.shape[1]
    F = be.hstack(W, E)
    g = {"rho_Q": be.rownorm_max(Q @ W - c) if r else be.scalar(0),
         "rho_K": be.rownorm_max(K @ W - e) if r else be.scalar(0),
         "delta_1": be.rownorm_max(Q @ E - c1) if s else be.scalar(0),
         "omega_1": be.diam(K @ E) if s else be.scalar(0)}
    Mq, Mk = Q - (Q @ F) @ F.T, K - (K @ F) @ F.T
    g["delta_2"], g["omega_2"] = be.rownorm_max(Mq - c2), be.diam(Mk)
    g["ortho"] = (2 * be.rownorm_max(Q @ F) * be.fro(be.eye(r + s) - F.T @ F) * be.rownorm_max(K @ F)
                  if r + s else be.scalar(0))
    g["osc_bias"] = be.osc_rows(be.arr(head["bias"][:, keep])) if head["bias"] is not None else be.scalar(0)
    b = be.scalar(beta)
    g = {k: be.scalar(v) if isinstance(v, (int, float)) else v for k, v in g.items()}
    g["osc"] = b * (g["delta_1"] * g["omega_1"] + g["delta_2"] * g["omega_2"] + g["ortho"]) + g["osc_bias"]
    g["_Gamma"] = b * g["rho_Q"] * g["rho_K"]
    return g


def _log_theta(m):
    """log theta_m (SPEC §3.4 default), float64."""
    if m == 1:
        return 0.0
    la = (m / 2) * math.log(math.pi) - math.lgamma(m / 2 + 1) + 0.5 * math.log(m + 1) \
        + (m / 2) * math.log(m * (m + 2) / (12 * (m + 1)))
    if m < 3:
        return la
    return min(la, math.log(m * math.log(m) + m * math.log(math.log(m)) + 5 * m))


def float_chain(be, g, eps, r, cap):
    """SPEC §7.2 F2-F12 in the backend's floating point: dict of floats (None: not reached)."""
    out = dict.fromkeys(CHAIN)
    two = be.scalar(2)
    tau = two - 4 / (1 + be.exp(g["osc"] / 2))
    epsp = be.scalar(eps) - tau
    G = g["_Gamma"]
    out.update(tau=be.f(tau), epsp=be.f(epsp), Gamma=be.f(G))
    if not be.f(epsp) > 0:
        return out
    if r == 0 or be.f(two - 4 / (1 + be.exp(G))) <= be.f(epsp):
        out.update(log10_S=0.0, R_sym=1)
        return out
    eta = epsp / be.sqrt(6 * G)
    out["eta"] = be.f(eta)
    m = r + 1

    def logP(y):                       # log((y+1)^m - (y-1)^m), y >= 1
        return m * be.log(y + 1) + be.log1p(-((y - 1) / (y + 1)) ** m)
    if be.f(eta) >= 2:
        logS = 0.0
    else:
        logS = be.f(logP(2 / eta))
        if be.f(eta) < 0.5:
            logS = min(logS, _log_theta(m) + be.f(logP(1 / eta)))
    out["log10_S"] = logS / math.log(10)
    out["R_sym"] = cap if logS >= math.log(cap + 1) else min(cap, math.floor(math.exp(logS)))
    return out


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


def arb_geometry(head, wit, beta):
    """Exact enclosures (128-bit Arb) of the geometry of the witness; beta: exact Arb ball."""
    W, c, e, E, c1, c2 = wit
    keep = head["kept"]
    Q, K = head["Q"], head["K"][keep]
    r, s, d = W.shape[1], E.shape[1], Q.shape[1]
    with flint.ctx.workprec(128):
        AQ, AK = _amat(Q), _amat(K)
        AW, AE = (_amat(W) if r else None), (_amat(E) if s else None)
        Fm = np.hstack([W, E])
        g = {"rho_Q": _radius_arb(AQ * AW, c) if r else flint.arb(0),
             "rho_K": _radius_arb(AK * AW, e) if r else flint.arb(0),
             "delta_1": _radius_arb(AQ * AE, c1) if s else flint.arb(0),
             "omega_1": _diameter_arb(AK * AE) if s else flint.arb(0)}
        if r + s:
            AF = _amat(Fm)
            Mq, Mk = AQ - AQ * AF * AF.transpose(), AK - AK * AF * AF.transpose()
            D = _amat(np.eye(r + s)) - AF.transpose() * AF
            fro = sum((x * x for row in _rows(D) for x in row), flint.arb(0)).sqrt()
            g["ortho"] = 2 * _radius_arb(AQ * AF, np.zeros(r + s)) * fro * _radius_arb(AK * AF, np.zeros(r + s))
        else:
            Mq, Mk = AQ, AK
            g["ortho"] = flint.arb(0)
        g["delta_2"] = _radius_arb(Mq, c2)
        g["omega_2"] = _diameter_arb(Mk)
        if head["bias"] is not None:
            B = head["bias"][:, keep]
            g["osc_bias"] = arb_of(max(Fraction(float(hi)) - Fraction(float(lo))
                                       for hi, lo in zip(B.max(axis=1), B.min(axis=1))))
        else:
            g["osc_bias"] = flint.arb(0)
        g["osc"] = beta * (g["delta_1"] * g["omega_1"] + g["delta_2"] * g["omega_2"] + g["ortho"]) + g["osc_bias"]
    return g


# ----------------------------------------------------------------------------- one audit

def _enc(x):
    """[lo, hi] floats rounded outward of an Arb ball (None passes through)."""
    if x is None:
        return None
    if not x.is_finite():
        return None
    return [float(x.lower()), float(x.upper())]


def _log10_ball(S):
    return None if S is None else (S.log() / flint.arb(10).log())


def audit_one(label, head, eps, witness_doc, base_dir, backends, with_torch):
    """The audit record of one (head, eps, witness): rows, checks, flags."""
    t0 = time.perf_counter()
    inst = head["inst"]
    d = head["Q"].shape[1]
    wit = _witness(witness_doc, d, base_dir)          # the kernel's reader: exact float arrays
    r = wit[0].shape[1]
    N = int(len(head["kept"]))
    cap = min(inst.n, N)
    beta_f = beta_float(head["beta"])
    rows = {q: dict.fromkeys(COLUMNS) for q in QUANTITIES}
    # float columns
    for be in backends:
        g = float_geometry(be, head, wit, beta_f)
        for q in GEOMETRY:
            rows[q][be.name] = be.f(g[q])
        for q, v in float_chain(be, g, eps, r, cap).items():
            rows[q][be.name] = v
    # kernel
    k = enclosures(inst, eps, witness_doc, base_dir)
    kg = {"rho_Q": k["rho_Q"], "rho_K": k["rho_K"], "ortho": k["ortho"], "osc_bias": k["osc_bias"], "osc": k["osc"]}
    dl, om = list(k["delta_Q"]), list(k["omega_K"])
    if wit[3].shape[1] == 0:
        dl, om = [0.0] + dl, [0.0] + om
    kg.update(delta_1=dl[0], omega_1=om[0], delta_2=dl[1], omega_2=om[1])
    for q in GEOMETRY:
        rows[q]["kernel"] = [None, float(kg[q])]
    rows["tau"]["kernel"] = _enc(k["tau"])
    rows["epsp"]["kernel"] = _enc(k["epsp"])
    rows["Gamma"]["kernel"] = _enc(k["Gamma"])
    rows["eta"]["kernel"] = None if k["eta"] is None else [float(k["eta"].lower()), None]
    rows["log10_S"]["kernel"] = _enc(_log10_ball(k["S"])) if k["S"] is not None else (
        [0.0, 0.0] if k["R_sym"] == 1 else None)
    rows["R_sym"]["kernel"] = k["R_sym"]
    # Arb geometry + the sympy chain by the Arb walker, and by mpmath at the midpoints
    beta_ball = inst.beta.ball
    ag = arb_geometry(head, wit, beta_ball)
    for q in GEOMETRY:
        rows[q]["arb"] = _enc(ag[q])
    with flint.ctx.workprec(128):
        rho_K_b = beta_ball * ag["rho_K"]
    ca = chain_arb(beta=1, eps=eps, n=inst.n, N=N, r=r, rho_Q=ag["rho_Q"], rho_K=rho_K_b, delta_Q=1,
                   omega_K=ag["osc"])
    def mid(x):                           # the exact midpoint of the ball (a point inside it)
        with flint.ctx.workprec(512):     # mid() rounds to the working precision
            man, ex = x.mid().man_exp()
        return Fraction(int(man)) * Fraction(2) ** int(ex)
    cm = chain_mpmath(beta=1, eps=eps, n=inst.n, N=N, r=r, rho_Q=mid(ag["rho_Q"]), rho_K=mid(rho_K_b),
                      delta_Q=1, omega_K=mid(ag["osc"]), dps=50)
    for q, key in (("tau", "tau"), ("epsp", "epsp"), ("Gamma", "Gamma"), ("eta", "eta")):
        rows[q]["arb"] = _enc(ca[key])
        rows[q]["mpmath"] = None if cm[key] is None else float(cm[key])
    rows["log10_S"]["arb"] = _enc(ca["logS"] / flint.arb(10).log()) if ca["logS"] is not None else (
        [0.0, 0.0] if ca["R_sym"] == 1 else None)
    rows["log10_S"]["mpmath"] = None if cm["logS"] is None else float(cm["logS"] / mpmath.log(10))
    rows["R_sym"]["arb"], rows["R_sym"]["mpmath"] = ca["R_sym"], cm["R_sym"]
    for res, col in ((ca, "arb"), (cm, "mpmath")):   # F6 holds: R_sym = 1, lines F7-F11 not used
        if res["F6"] is True:
            rows["eta"][col] = None
            rows["log10_S"][col] = [0.0, 0.0] if col == "arb" else 0.0
    flags = []
    # outside: float points vs the Arb enclosures
    scale = max(1.0, *(abs(v[1]) for q in GEOMETRY for v in [rows[q]["arb"]] if v))
    for q in QUANTITIES:
        enc = rows[q]["arb"]
        for col in ("numpy_f64", "torch_f32", "torch_f64"):
            v = rows[q][col]
            if v is None or enc is None or q == "R_sym":
                continue
            tol = REL_TOL[col] * (scale if q in GEOMETRY else max(1.0, abs(v)))
            if not (enc[0] - tol <= v <= enc[1] + tol):
                flags.append(f"outside: {q} {col} = {v:.10g} not in Arb [{enc[0]:.10g}, {enc[1]:.10g}]")
        if q == "R_sym":
            for col in ("numpy_f64", "torch_f64"):
                v, a = rows[q][col], rows[q]["arb"]
                if v is not None and a is not None and abs(v - a) > max(1, 1e-6 * a):
                    flags.append(f"outside: R_sym {col} = {v} vs Arb {a}")
    # unsound: kernel bounds on the wrong side of the exact enclosures
    for q in QUANTITIES:
        kv, enc = rows[q]["kernel"], rows[q]["arb"]
        if kv is None or enc is None:
            continue
        if q == "R_sym":
            if kv < enc:
                flags.append(f"unsound: kernel R_sym {kv} < exact-geometry R_sym {enc}")
            continue
        if q in LOWER:
            if kv[0] is not None and kv[0] > enc[1]:
                flags.append(f"unsound: kernel lower bound of {q} {kv[0]:.10g} > exact {enc[1]:.10g}")
        elif kv[1] is not None and kv[1] < enc[0]:
            flags.append(f"unsound: kernel upper bound of {q} {kv[1]:.10g} < exact {enc[0]:.10g}")
    # routes: mpmath inside the Arb walker balls (compared exactly, not in float), same R_sym
    for q, key in (("tau", "tau"), ("epsp", "epsp"), ("Gamma", "Gamma"), ("eta", "eta"), ("log10_S", "logS")):
        a, m = rows[q]["arb"], rows[q]["mpmath"]
        if (a is None) != (m is None):
            flags.append(f"routes: {q} reached by one exact route only (arb {a}, mpmath {m})")
        elif a is not None and not (q in ("eta", "log10_S") and ca["F6"] is True):
            ball, val = ca[key], _mpf_fraction(cm[key])
            slack = Fraction(1, 10 ** 40) * max(1, abs(val))
            with flint.ctx.workprec(256):      # endpoints at full precision (lower()/upper() round)
                lo, hi = arb_to_fraction_lower(ball), arb_to_fraction_upper(ball)
            if not (lo - slack <= val <= hi + slack):
                flags.append(f"routes: {q} mpmath {mpmath.nstr(cm[key], 25)} outside the Arb walker ball {ball.str(25)}")
    if rows["R_sym"]["arb"] != rows["R_sym"]["mpmath"]:
        flags.append(f"routes: R_sym Arb {rows['R_sym']['arb']} vs mpmath {rows['R_sym']['mpmath']}")
    # the witness's own residual: actual row error of At vs the kernel's tau
    actual = witness_residual(head, wit, beta_f)
    checks = {"witness_actual_row_error": actual}
    if k["tau"] is not None and actual > float(k["tau"].upper()) + 1e-12:
        flags.append(f"unsound: witness row error {actual:.10g} > kernel tau {float(k['tau'].upper()):.10g}")
    # ordering along the SVD-bridge profile
    if "profile" not in head:                 # once per head, shared by its eps / r targets
        head["profile"] = geo.residual_profile(head["Q"], head["K"], beta_f, head["weights"])
    prof = head["profile"]
    order = []
    for row in prof:
        vals = [row.actual, row.tau_exact, row.tau_width, row.tau_spec]
        ok = all(a <= b + 1e-12 + 1e-9 * abs(b) for a, b in zip(vals, vals[1:]))
        order.append({"r": row.r, "actual": row.actual, "tau_exact": row.tau_exact, "tau_width": row.tau_width,
                      "tau_spec": row.tau_spec, "ok": ok})
        if not ok:
            flags.append(f"ordering: r = {row.r}: actual {row.actual:.6g}, tau_exact {row.tau_exact:.6g}, "
                         f"tau_width {row.tau_width:.6g}, tau_spec {row.tau_spec:.6g}")
    return {"source": label, "n": inst.n, "N": N, "d": d, "beta": head["beta_text"], "eps": str(eps), "r": r,
            "torch": with_torch, "rows": [dict(quantity=q, **rows[q]) for q in QUANTITIES],
            "checks": checks, "ordering": order, "flags": flags,
            "seconds": round(time.perf_counter() - t0, 3)}


def _mpf_fraction(x):
    """The exact rational value of an mpmath mpf."""
    sign, man, ex, _ = x._mpf_             # exact; mpmath.mpf(x) would round, man_exp drops the sign
    return (-1) ** sign * Fraction(int(man)) * Fraction(2) ** int(ex)


def witness_residual(head, wit, beta):
    """max_i ||A_i - At_i||_1 for the witness's r-dimensional Gibbs matrix At (float64)."""
    W, c, e, E, c1, c2 = wit
    keep = head["kept"]
    Q, K = head["Q"], head["K"][keep]
    d = Q.shape[1]
    Fm = np.hstack([W, E])
    M = np.eye(d) - Fm @ Fm.T
    logw = np.zeros(len(keep)) if head["weights"] is None else np.log(head["weights"][keep])
    col = logw + beta * ((K @ W) @ c + (K @ E) @ c1 + (K @ M) @ c2)
    L = beta * Q @ K.T + logw
    if head["bias"] is not None:
        L = L + head["bias"][:, keep]
    Lt = beta * (Q @ W - c) @ (K @ W - e).T + col

    def sm(X):
        X = X - X.max(axis=1, keepdims=True)
        P = np.exp(X)
        return P / P.sum(axis=1, keepdims=True)
    return float(np.abs(sm(L) - sm(Lt)).sum(axis=1).max())


# ----------------------------------------------------------------------------- inputs

def _head_from_instance(inst, beta, beta_text):
    kept = np.arange(inst.N) if inst.weights is None else np.flatnonzero(inst.weights > 0)
    return {"inst": inst, "Q": inst.Q, "K": inst.K, "weights": inst.weights, "bias": inst.bias,
            "kept": kept, "beta": beta, "beta_text": beta_text}


def _beta_exact_from_inst(inst):
    """A float-compatible stand-in for beta (search only): the midpoint."""
    return Fraction(inst.beta.mid)


def targets_from_certificate(path, rs):
    """[(label, head, eps, witness_doc, base_dir)] for a certificate file."""
    doc, _ = read_json(path)
    kind = header(doc)
    c = read_claim(doc, kind)
    if kind == "lower-lattice":           # parametric: no explicit head, no chain quantities
        print(f"certkit audit: {path}: skipped (lower-lattice certificates are parametric; "
              f"certkit scale cross-checks them against explicit matrices)", file=sys.stderr)
        return []
    base = os.path.dirname(os.path.abspath(path))
    inst = read_instance(doc, base)
    head = _head_from_instance(inst, _beta_exact_from_inst(inst), inst.beta.text)
    if kind == "upper-chain" and rs is None:
        return [(path, head, c.eps, doc["witness"], base)]
    return [(path, head, c.eps, w, ".") for w in _chain_witnesses(head, c.eps, rs)]


def targets_from_head(path, beta_text, eps_list, rs):
    h = read_head(path, parse_beta(beta_text) if beta_text is not None else None)
    inst = kernel_instance(h)
    head = _head_from_instance(inst, h["beta"], inst.beta.text)
    out = []
    for eps in eps_list:
        out += [(f"{path} (eps = {eps})", head, eps, w, ".") for w in _chain_witnesses(head, eps, rs)]
    return out


def _chain_witnesses(head, eps, rs):
    """Witness docs: the best r (smallest certified R_sym, else the smallest tau) or the given rs."""
    Q, K, w = head["Q"], head["K"], head["weights"]
    b = beta_float(head["beta"])
    if rs == "all":
        Kk = K[head["kept"]]
        rs = list(range(geo._frame(Q, Kk)["r_num"] + 1))
    if rs is None:
        found = best_chain(head["inst"], Q, K, b, eps, w)
        if found is not None:
            return [witness_json(found[2])]
        rs = [0]
    return [witness_json(chain_witness(Q, K, b, w, r)) for r in rs]


# ----------------------------------------------------------------------------- output

def _fmt(v):
    if v is None:
        return "—"
    if isinstance(v, list):
        lo, hi = v
        if lo is None:
            return f"<= {hi:.10g}"
        if hi is None:
            return f">= {lo:.10g}"
        return f"[{lo:.10g}, {hi:.10g}]"
    if isinstance(v, int):
        return str(v)
    return f"{v:.10g}"


def render(rec):
    lines = [f"audit {rec['source']}: n = {rec['n']}, N = {rec['N']}, d = {rec['d']}, beta = {rec['beta']}, "
             f"eps = {rec['eps']}, r = {rec['r']}  ({rec['seconds']} s)"]
    head = ["quantity"] + COLUMNS
    table = [[r["quantity"]] + [_fmt(r[c]) for c in COLUMNS] for r in rec["rows"]]
    if not rec["torch"]:
        for row in table:
            row[2] = row[3] = "n/a"
    widths = [max(len(x[i]) for x in [head] + table) for i in range(len(head))]
    lines.append("  ".join(h.ljust(w) for h, w in zip(head, widths)))
    lines += ["  ".join(x.ljust(w) for x, w in zip(row, widths)) for row in table]
    lines.append(f"witness residual max_i ||A_i - At_i||_1 = {rec['checks']['witness_actual_row_error']:.6g}")
    bad = [o for o in rec["ordering"] if not o["ok"]]
    lines.append(f"ordering actual <= tau_exact <= tau_width <= tau_spec: {len(rec['ordering']) - len(bad)}/"
                 f"{len(rec['ordering'])} r values ok")
    if rec["flags"]:
        lines += [f"FLAG {f}" for f in rec["flags"]]
    else:
        lines.append("no flags")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- CLI

def add_arguments(p):
    p.add_argument("certificates", nargs="*", metavar="CERT.json", help="certificates whose instance is audited")
    p.add_argument("--head", action="append", default=[], metavar="FILE",
                   help="a head as .npz/.safetensors with arrays Q, K (beta, weights, bias optional); repeatable")
    p.add_argument("--beta", metavar="B", help="beta for --head files: 2, 1/8, 1/sqrt(64) (overrides the file's)")
    p.add_argument("--eps", action="append", metavar="E",
                   help="tolerance(s) for --head files, exact (default 1/4); repeatable")
    p.add_argument("--r", metavar="R", help="audit at these r (comma list, or 'all'); default: the certificate's "
                                            "witness, else the r with the smallest certified bound")
    p.add_argument("--json", action="store_true", help="machine-readable records on stdout")


def _parse_r(text):
    if text is None or text == "all":
        return text
    try:
        rs = [int(x) for x in text.split(",")]
        if any(r < 0 for r in rs):
            raise ValueError
        return rs
    except ValueError:
        raise AuditInputError(f"--r {text!r}: expected a comma list of integers >= 0, or 'all'") from None


def _parse_eps(texts):
    out = []
    for t in texts or ["1/4"]:
        try:
            e = Fraction(t)
        except (ValueError, ZeroDivisionError):
            raise AuditInputError(f"--eps {t!r}: not an exact number") from None
        if not 0 < e < 1:
            raise AuditInputError(f"--eps {t!r}: eps must lie in (0, 1)")
        out.append(e)
    return out


def run(args):
    try:
        rs = _parse_r(args.r)
        eps_list = _parse_eps(args.eps)
        if not args.certificates and not args.head:
            raise AuditInputError("nothing to audit: give certificates and/or --head FILE")
        targets = []
        for p in args.certificates:
            try:
                targets += targets_from_certificate(p, rs)
            except Malformed as e:
                raise AuditInputError(f"{p}: MALFORMED {e.path}: {e.what}") from None
            except Unsupported as e:
                raise AuditInputError(f"{p}: UNSUPPORTED {e}") from None
        for p in args.head:
            targets += targets_from_head(p, args.beta, eps_list, rs)
    except (AuditInputError, HeadFileError) as e:
        print(f"certkit audit: {e}", file=sys.stderr)
        return 2
    backends, with_torch = _backends()
    records = []
    tty = sys.stderr.isatty() and len(targets) > 1
    for i, (label, head, eps, wdoc, base) in enumerate(targets, 1):
        if tty:
            print(f"\r[{i}/{len(targets)}] {os.path.basename(label)[:50]:<50}", end="", file=sys.stderr, flush=True)
        rec = audit_one(label, head, Fraction(eps), wdoc, base, backends, with_torch)
        records.append(rec)
        if not args.json:
            if tty:
                print("\r" + " " * 60 + "\r", end="", file=sys.stderr)
            print(render(rec))
            print()
    nflag = sum(len(r["flags"]) for r in records)
    if args.json:
        json.dump(records, sys.stdout, indent=1, default=str, allow_nan=False)
        print()
    print(f"{len(records)} audits, {nflag} flags" + ("" if with_torch else " (torch not installed: torch columns n/a)"),
          file=sys.stderr)
    return 1 if nflag else 0
