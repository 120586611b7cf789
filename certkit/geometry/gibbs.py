"""The Gibbs form of a head (docs/mathematics.md Lemma 4.1).

<q_i - q_1, k_j - k_1> = <P_V(q_i - q_1), P_V(k_j - k_1)> for V the visible space, so A_i =
softmax_j(log pi_j + beta <x_i, y_j>) with x_i, y_j the V-coordinates of the queries and keys about
their centres and log pi_j = log w_j + beta <q_1, k_j> - beta <B_V^T q_1 - c, B_V^T k_j>: an
r-dimensional Gibbs matrix, r = dim V.
"""
import numpy as np

from .floats import as_float, log_weights
from .radii import chebyshev_centre
from .visible import frame


def gibbs_form(Q, K, beta, weights=None, basis=None):
    """(x, y, log_pi) with A_i = softmax_j(log_pi_j + beta <x_i, y_j>) (docs/mathematics.md Lemma 4.1).

    <q_i - q_1, k_j - k_1> = <P_V(q_i - q_1), P_V(k_j - k_1)>, so with V-coordinates
    (orthonormal basis B_V, d x r) x_i = B_V^T q_i - c, y_j = B_V^T k_j - e (c, e Chebyshev
    centres) and
        log pi_j = log w_j + beta <q_1, k_j> - beta <B_V^T q_1 - c, B_V^T k_j>,
    the logits l_ij equal log pi_j + beta <x_i, y_j> up to row-only terms.  log_pi is shifted
    so that its finite maximum is 0 (it is defined up to a constant); zero weights give -inf.
    basis: a declared d x r orthonormal basis of V; default V = W_{r_num} from
    visible_dimension (float, untrusted).  r = 0 gives x, y with 0 columns (rank-one A).
    """
    Q = np.asarray(Q, dtype=np.float64)
    K = np.asarray(K, dtype=np.float64)
    b = as_float(beta)
    logw = log_weights(weights, K.shape[0])
    if basis is None:
        keep = np.isfinite(logw)
        f = frame(Q, K[keep])
        basis = f["Omega"][:, :f["r_num"]]
    Bv = np.asarray(basis, dtype=np.float64).reshape(Q.shape[1], -1)
    Qv, Kv = Q @ Bv, K @ Bv
    c, _ = chebyshev_centre(Qv)
    e, _ = chebyshev_centre(Kv[np.isfinite(logw)])
    x, y = Qv - c, Kv - e
    log_pi = logw + b * (K @ Q[0]) - b * (Kv @ x[0])
    fin = np.isfinite(log_pi)
    log_pi = log_pi - (log_pi[fin].max() if fin.any() else 0.0)
    return x, y, log_pi
