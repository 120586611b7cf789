"""Verified singular values (proofs/verified-svd.md; docs/numerics.md §4, INTLAB style).

For X (m x n, m >= n) and a float thin SVD U, s, V with alpha_U >= ||U^T U - I||_2,
alpha_V >= ||V^T V - I||_2 (< 1/2) and rho >= ||X V - U diag(s)||_2:

    (sqrt(1-alpha_U) s_i - rho)/sqrt(1+alpha_V) <= sigma_i(X) <= (sqrt(1+alpha_U) s_i + rho)/sqrt(1-alpha_V).

2-norms are bounded by Frobenius norms; the rounding of each float product fl(AB) by
gamma_k |A||B| + k eta entrywise, whose Frobenius norm is <= gamma_k ||A||_F ||B||_F + ...
"""

import flint
import numpy as np

from .fp import U as u, ETA, gamma, inflate, fro_up, arb_up, arb_down


def singular_value_bounds(X: np.ndarray, Uf: np.ndarray, s: np.ndarray, Vt: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Arrays (lo, hi) of floats with lo_i <= sigma_i(X) <= hi_i, i = 1..min(m, n), sorted, from any
    float thin SVD X ~ Uf diag(s) Vt (an untrusted choice, e.g. LAPACK's: it only chooses);
    ArithmeticError if it has the wrong shapes, s is not non-increasing and >= 0, or it is too poor."""
    if X.shape[0] < X.shape[1]:
        X, Uf, Vt = X.T, Vt.T, Uf.T
    m, n = X.shape
    V, I = Vt.T, np.eye(n)
    if Uf.shape != (m, n) or s.shape != (n,) or V.shape != (n, n) or np.any(s[1:] > s[:-1]) or np.any(s < 0):
        raise ArithmeticError(f"float SVD of shapes {Uf.shape}, {s.shape}, {Vt.shape} for a {m} x {n} matrix, or "
                              f"singular values not non-increasing and >= 0")

    def ortho_defect(W, k):
        G = W.T @ W - I
        fw = fro_up(W)
        return inflate(fro_up(G) * (1 + u) + gamma(k) * fw * fw + n * k * ETA, 4)

    aU, aV = ortho_defect(Uf, m), ortho_defect(V, n)
    Us = Uf * s
    R = X @ V - Us
    rho = inflate(fro_up(R) * (1 + u) + gamma(n) * fro_up(X) * fro_up(V)
                  + np.sqrt(m * n) * n * ETA + u * fro_up(Us) + np.sqrt(m * n) * ETA, 6)
    if not (aU < 0.5 and aV < 0.5 and rho < np.inf):
        raise ArithmeticError("float SVD too inaccurate to verify (orthogonality defect >= 1/2 or residual not finite)")
    lo, hi = np.empty(n), np.empty(n)
    with flint.ctx.workprec(80):
        AU, AV, R_ = flint.arb(aU), flint.arb(aV), flint.arb(rho)
        up_f = (1 + AU).sqrt() / (1 - AV).sqrt()
        lo_f = (1 - AU).sqrt() / (1 + AV).sqrt()
        for i, si in enumerate(s.tolist()):
            S = flint.arb(si)
            hi[i] = arb_up(up_f * S + R_ / (1 - AV).sqrt())
            lo[i] = max(0.0, arb_down(lo_f * S - R_ / (1 + AV).sqrt()))
    return lo, hi
