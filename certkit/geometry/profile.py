"""The SVD bridge: the residual profile r -> tau_r (docs/mathematics.md §5, §6).

For W_r = span{v_1..v_r} (top right singular vectors of Z = (K - 1 e0^T) P_U, §6.1) the logits
split as l_ij = log pi'_j + beta <P_W q_i, P_W k_j> + h_ij (§5.1), so A is within
    actual <= tau_exact <= tau_width <= tau_spec
in row l1 of an r-dimensional Gibbs matrix (Cor. 2.2, §5.2, Lemma 6.1), with
    tau_width(r) = 2 tanh(beta sum_l delta_Q^(l) omega_K^(l) / 4),
    tau_spec(r) = 2 tanh(beta (2 delta_Q^(1) sigma_{r+1} + delta_Q^(2) omega_K^(2)) / 4)
over the blocks E_1 = U ⊖ W_r, E_2 = U^perp (the package docstring says why tau_spec keeps
omega_K^(2)).  The ranks read off the profile: r_SVD_int(tau) = min{r : tau_r^width <= tau} and
r_opt (§6.3).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable, Iterator

import numpy as np

from ..head import softmax_rows
from .floats import BLOCK, as_float, log_weights
from .radii import chebyshev_centre, diameter, fast_centre
from .visible import frame


def _kept(Q, K, weights, log_offset=None):
    """(Q, K, log w + log_offset, keep) as float64 arrays; keep marks the columns of positive weight."""
    logw = log_weights(weights, np.shape(K)[0])
    if log_offset is not None:
        logw = logw + np.asarray(log_offset, dtype=np.float64)
    return np.asarray(Q, dtype=np.float64), np.asarray(K, dtype=np.float64), logw, np.isfinite(logw)


def _two_tanh_quarter(s):
    """2 tanh(s/4) for s >= 0 (docs/mathematics.md §2.2)."""
    return 2.0 * math.tanh(s / 4.0)


@dataclass(frozen=True)
class ResidualRow:
    """One r of the SVD-bridge profile (docs/mathematics.md §5.1–§6.2).  Blocks: (U ⊖ W_r, U^perp)."""
    r: int
    rho_Q: float                    # rad P_W q_i about its Chebyshev centre
    rho_K: float                    # rad P_W k_j about its Chebyshev centre
    Gamma_W: float                  # beta rho_Q rho_K
    delta_Q: tuple                  # (rad P_{U⊖W} q_i, rad P_{U^perp} q_i), about c'_1, c'_2
    omega_K: tuple                  # (diam P_{U⊖W} k_j, diam P_{U^perp} k_j)
    sigma_next: float               # sigma_{r+1}(Z) (0 beyond min(N, dim U))
    kappa: float                    # max_j |(I - P_W) z_j|
    tau_exact: float                # max_i 2 tanh(osc_j h_ij / 4) at the declared c'
    tau_width: float                # 2 tanh(beta sum_l delta^(l) omega^(l) / 4)
    tau_spec: float                 # 2 tanh(beta (2 delta^(1) sigma_{r+1} + delta^(2) omega^(2)) / 4)
    actual: float                   # max_i ||A_i - At_i||_1 (float64)


@dataclass
class ResidualProfile:
    """rows[r] for r = 0..r_max; basis columns 0..r-1 span W_r, columns r..dim_U-1 span U ⊖ W_r,
    the rest span U^perp (d x d orthonormal, float)."""
    rows: list
    r_max: int
    dim_U: int
    beta: float
    sigma: np.ndarray
    basis: np.ndarray
    tol: float
    extra: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, r):
        return self.rows[r]

    def __iter__(self) -> Iterator[ResidualRow]:
        return iter(self.rows)


def _blocked_osc_and_errors(Qt, Kt, r, m, c1, c2, beta, logw):
    """max_i osc_j h_ij and max_i ||A_i - At_i||_1 (docs/mathematics.md §5.1), in row blocks."""
    n, N = Qt.shape[0], Kt.shape[0]
    cprime = np.concatenate([c1, c2])
    Kres = Kt[:, r:]
    log_pi = logw + beta * (Kres @ cprime)               # log pi'_j
    Qw, Kw = Qt[:, :r], Kt[:, :r]
    osc_max, err_max = 0.0, 0.0
    step = max(1, BLOCK // max(N, 1))
    for i0 in range(0, n, step):
        sl = slice(i0, i0 + step)
        H = beta * ((Qt[sl, r:] - cprime) @ Kres.T)
        osc_max = max(osc_max, float(np.max(H.max(axis=1) - H.min(axis=1))))
        Lt = log_pi + beta * (Qw[sl] @ Kw.T)
        L = logw + beta * (Qt[sl] @ Kt.T)                # exact logits, rotated frame
        err_max = max(err_max, float(np.max(np.abs(softmax_rows(L) - softmax_rows(Lt)).sum(axis=1))))
    return osc_max, err_max


@dataclass
class ProfileGeometry:
    """The beta-independent part of the profile of (Q, K, weights): the frame (as frame()), the
    rotated Qt = Q Omega, Kt = K_kept Omega, and for r = 0..r_max the Chebyshev centres and radii
    of Qt[:, :r] (cQ, rho_Q), Kt[:, :r] (cK, rho_K), Qt[:, r:m] (c1, d1), the diameter w1 of
    Kt[:, r:m] and kappa_r; c2, d2 (queries) and w2 (keys) of the U^perp block Qt[:, m:]."""
    frame: dict
    Qt: np.ndarray
    Kt: np.ndarray
    logw: np.ndarray
    keep: np.ndarray
    per_r: list
    c2: np.ndarray
    d2: float
    w2: float


def profile_geometry(Q, K, weights=None, *, tol=None, tau_rel=None, log_offset=None):
    """ProfileGeometry of the head (zero-weight columns dropped); shared by every beta (docs/mathematics.md §5.2:
    radii, diameters and kappa do not involve beta) and by the chain witnesses of search/chain.
    log_offset: an N-vector added to log w (the column term of a logit bias, absorb_bias)."""
    Q, K, logw, keep = _kept(Q, K, weights, log_offset)
    if not keep.any():
        raise ValueError("all column weights are zero")
    K, logw = K[keep], logw[keep]
    f = frame(Q, K, tol, tau_rel)
    m, d = f["m"], f["d"]
    Om = f["Omega"]
    Qt, Kt = Q @ Om, K @ Om
    St = f["S"] @ f["V_S"] if m else np.zeros((K.shape[0], 0))    # z_j in W-ordered U coords
    c2, d2 = chebyshev_centre(Qt[:, m:]) if d - m else (np.zeros(0), 0.0)
    w2 = diameter(Kt[:, m:])
    per_r = []
    for r in range(f["r_num"] + 1):
        cQ, rho_Q = chebyshev_centre(Qt[:, :r])
        cK, rho_K = chebyshev_centre(Kt[:, :r])
        c1, d1 = chebyshev_centre(Qt[:, r:m])
        zr = St[:, r:m]
        per_r.append(dict(cQ=cQ, rho_Q=rho_Q, cK=cK, rho_K=rho_K, c1=c1, d1=d1, w1=diameter(Kt[:, r:m]),
                          kappa=float(np.sqrt(np.max(np.sum(zr * zr, axis=1)))) if zr.size else 0.0))
    return ProfileGeometry(frame=f, Qt=Qt, Kt=Kt, logw=logw, keep=keep, per_r=per_r, c2=c2, d2=d2, w2=w2)


def residual_profile(Q, K, beta, weights=None, *, tol=None, tau_rel=None, geo=None):
    """The SVD-bridge profile r = 0..r_max (docs/mathematics.md §5, §6), float64, untrusted.

    For W_r = span{v_1..v_r} (top right singular vectors of Z, docs/mathematics.md §6.1) the logits split as
        l_ij = log pi'_j + beta <P_W q_i, P_W k_j> + h_ij,
        log pi'_j = log w_j + beta <c', P_{W^perp} k_j>,  h_ij = beta <P_{W^perp} q_i - c', P_{W^perp} k_j>
    (docs/mathematics.md §5.1), At_i = softmax_{pi'}(beta <P_W q_i, P_W k_j>) is an r-dimensional Gibbs matrix
    and, by Cor. 2.2 and the block bounds of docs/mathematics.md §5.2 / Lemma 6.1,
        actual := max_i ||A_i - At_i||_1 <= tau_exact <= tau_width <= tau_spec.
    Zero-weight (padding) columns are dropped.  r_max = r_num (docs/mathematics.md §6.3).  Key-only heads give
    dim U = 0, r_max = 0 and a single row with every tau = 0.  geo: profile_geometry(Q, K,
    weights, tol=, tau_rel=) computed once for several beta (it must be of the same head).
    """
    b = as_float(beta)
    g = geo if geo is not None else profile_geometry(Q, K, weights, tol=tol, tau_rel=tau_rel)
    f, Qt, Kt = g.frame, g.Qt, g.Kt
    m, r_max, s = f["m"], f["r_num"], f["sigma"]
    rows = []
    for r, x in enumerate(g.per_r):
        d1, w1, d2, w2 = x["d1"], x["w1"], g.d2, g.w2
        sig = float(s[r]) if r < s.size else 0.0
        osc, act = _blocked_osc_and_errors(Qt, Kt, r, m, x["c1"], g.c2, b, g.logw)
        rows.append(ResidualRow(
            r=r, rho_Q=x["rho_Q"], rho_K=x["rho_K"], Gamma_W=b * x["rho_Q"] * x["rho_K"],
            delta_Q=(d1, d2), omega_K=(w1, w2), sigma_next=sig, kappa=x["kappa"],
            tau_exact=_two_tanh_quarter(osc),
            tau_width=_two_tanh_quarter(b * (d1 * w1 + d2 * w2)),
            tau_spec=_two_tanh_quarter(b * (2.0 * d1 * sig + d2 * w2)),
            actual=act))
    return ResidualProfile(rows=rows, r_max=r_max, dim_U=m, beta=b, sigma=s, basis=f["Omega"],
                           tol=f["tol"], extra=dict(tol_U=f["tol_U"], kept=g.keep))


def r_svd_int(profile, tau=None, *, eps=None):
    """r_SVD_int(tau) = min{ r in 0..r_max : tau_r^width <= tau } (docs/mathematics.md §6.3); tau = eps/3 by default.

    Non-increasing in tau.  Returns None when even tau_{r_max}^width > tau, which happens
    only when U is numerical and the U^perp block contributes delta^(2) omega^(2) > 0
    (docs/mathematics.md §6.3 assumes tau_{r_max} = 0, true for exact U).
    """
    if tau is None:
        if eps is None:
            raise ValueError("give tau or eps (tau = eps/3)")
        tau = eps / 3.0
    for row in profile:
        if row.tau_width <= tau:
            return row.r
    return None


def r_opt(profile, eps, log_size: Callable[[int, float, float], float]):
    """argmin_r log_size(r, Gamma_W(r), eps - tau_r^width) over r with tau_r^width < eps
    (docs/mathematics.md §6.3; log_size is the caller's covering bound, e.g. log S_r of docs/mathematics.md §5.3)."""
    best = None
    for row in profile:
        if row.tau_width < eps:
            v = log_size(row.r, row.Gamma_W, eps - row.tau_width)
            if best is None or v < best[1]:
                best = (row.r, v)
    return None if best is None else best[0]


class LazyProfile:
    """The SVD-bridge profile of a head computed only at the r asked for (row(r), cached), for heads
    whose r_max is too large for every r (a logit bias absorbed by absorb_bias gives r_max up to
    n - 1).  The radii are taken about Bădoiu–Clarkson centres (chebyshev_centre without the SLSQP
    polish: any centre gives a valid radius, within a factor 1 + 1/sqrt(200) of the least), so each
    tau here is the same upper bound as in residual_profile, slightly looser.  tau_r^width is
    non-increasing in r (nested projections shrink radii and diameters), so r_svd_int(tau) is found
    by bisection with O(log r_max) rows."""

    def __init__(self, Q, K, beta, weights=None, log_offset=None):
        Q, K, logw, keep = _kept(Q, K, weights, log_offset)
        K, self.logw = K[keep], logw[keep]
        f = self.frame = frame(Q, K)
        self.beta = as_float(beta)
        self.m, self.r_max, self.sigma = f["m"], f["r_num"], f["sigma"]
        self.Qt, self.Kt = Q @ f["Omega"], K @ f["Omega"]
        self.c2, self.d2 = fast_centre(self.Qt[:, self.m:])
        self.w2 = diameter(self.Kt[:, self.m:])
        self.cache = {}

    def row(self, r):
        """The ResidualRow at r (0 <= r <= r_max)."""
        if r not in self.cache:
            m, b, Qt, Kt = self.m, self.beta, self.Qt, self.Kt
            _, rho_Q = fast_centre(Qt[:, :r])
            _, rho_K = fast_centre(Kt[:, :r])
            c1, d1 = fast_centre(Qt[:, r:m])
            w1 = diameter(Kt[:, r:m])
            sig = float(self.sigma[r]) if r < self.sigma.size else 0.0
            osc, act = _blocked_osc_and_errors(Qt, Kt, r, m, c1, self.c2, b, self.logw)
            d2, w2 = self.d2, self.w2
            self.cache[r] = ResidualRow(
                r=r, rho_Q=rho_Q, rho_K=rho_K, Gamma_W=b * rho_Q * rho_K, delta_Q=(d1, d2), omega_K=(w1, w2),
                sigma_next=sig, kappa=float("nan"), tau_exact=_two_tanh_quarter(osc),
                tau_width=_two_tanh_quarter(b * (d1 * w1 + d2 * w2)),
                tau_spec=_two_tanh_quarter(b * (2.0 * d1 * sig + d2 * w2)), actual=act)
        return self.cache[r]

    def r_svd_int(self, tau):
        """min{r : tau_r^width <= tau} by bisection (None when even r_max misses tau)."""
        if self.row(self.r_max).tau_width > tau:
            return None
        lo, hi = -1, self.r_max                 # tau_lo > tau (lo = -1: none), tau_hi <= tau
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if self.row(mid).tau_width <= tau:
                hi = mid
            else:
                lo = mid
        return hi

    def curve(self, points=24, tail=8):
        """Rows at `points` evenly spaced r from 0 to r_max and at the last `tail` r (where the
        width of a full-rank bias drops to 0), in increasing r."""
        rs = {int(round(v)) for v in np.linspace(0, self.r_max, points)} | set(range(max(self.r_max - tail, 0), self.r_max + 1))
        return [self.row(r) for r in sorted(rs)]
