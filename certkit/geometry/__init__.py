"""Head geometry: visible interaction dimension, radii and the SVD bridge (docs/mathematics.md §4–§6).

UNTRUSTED.  Everything here is float64 numpy/scipy and only *chooses* things (subspaces,
centres, ranks) that a certificate later declares; the trusted kernel re-evaluates whatever it
relies on.  The single rigorous quantity is ``visible_dimension(...)["r_exact_lower"]``, a
certified lower bound on r_exact (docs/mathematics.md §4.4, "lower bounds are certifiable").

Notation (docs/mathematics.md §4.1).  Queries q_1..q_n and keys k_1..k_N are rows of Q (n x d) and K (N x d);
logits l_ij = log w_j + beta <q_i, k_j>.

* U = span{q_i - q_1}, the query-difference space; numerically the span B_U of the right
  singular vectors of Q_c = Q - 1 q-bar^T above tol_U (docs/mathematics.md §4.4 step 1).
* S = (K - 1 e0^T) B_U (e0 = mean key), the centred visible key matrix in U-coordinates; it has
  the singular values of Z = (K - 1 e0^T) P_U (docs/mathematics.md §4.4 step 2, §6.1).
* r_num = #{k : sigma_k(S) > tol} (docs/mathematics.md §4.4 step 3), V = W_{r_num}.
* W_r = span{v_1..v_r}, the top right singular vectors of Z (docs/mathematics.md §6.1), nested in r.
* W_r^perp = E_1 ⊕ E_2, E_1 = U ⊖ W_r, E_2 = U^perp (two blocks, docs/mathematics.md §5.2).

Deviations from the letter of docs/mathematics.md (all documented where they happen):

* tol_U and the default tol are floored by a bound on the float formation error of Q_c and S.
  The purely relative docs/mathematics.md tolerance 10 max(n, d) u sigma_1(Q_c) fails when all queries are
  equal but not dyadic-friendly: fl(mean) != q, Q_c is pure round-off (sigma_1 ~ 1e-15) and
  the relative rule keeps that noise direction, giving dim U = 1 and r_num = 1 for a key-only
  head.  With the floor, dim U = 0 and r_num = 0.
* tau_spec uses the spectral width 2 sigma_{r+1}(Z) only on the block E_1 = U ⊖ W_r (where
  Lemma 6.1 applies) and keeps the exact width omega_K^(2) on E_2 = U^perp:
      tau_spec(r) = 2 tanh( beta (2 delta_Q^(1) sigma_{r+1} + delta_Q^(2) omega_K^(2)) / 4 ).
  When U is exact (delta_Q^(2) = 0) this is docs/mathematics.md §6.2's 2 tanh(beta delta_Q sigma_{r+1} / 2).
  With a numerical U the literal formula 2 tanh(beta (delta^(1) + delta^(2)) sigma_{r+1} / 2)
  is not an upper bound of tau_exact (keys outside U are not controlled by sigma(Z)).
* The residual query centre c' changes osc_j h_ij (h_ij contains -beta <c', P_{W^perp} k_j>,
  a function of j).  We take c' = (Chebyshev centre of P_{E_1} q_i, Chebyshev centre of
  P_{E_2} q_i), the centres delta_Q^(l) are measured about, so tau_exact <= tau_width holds.

One idea per module: visible.py (frame, the visible dimension and its certified lower bound, masked
or not), radii.py (Chebyshev centres and diameters), profile.py (the SVD-bridge profile and the
ranks read off it), bias.py (a logit bias absorbed, and the certified rank of the biased logits),
gibbs.py (Lemma 4.1) and floats.py (the float helpers they share); this package is their public
face (__all__).
"""
from .bias import absorb_bias, biased_rank_lower, centred_bias
from .gibbs import gibbs_form
from .profile import (LazyProfile, ProfileGeometry, ResidualProfile, ResidualRow, profile_geometry, r_opt, r_svd_int,
                      residual_profile)
from .radii import chebyshev_centre, diameter
from .visible import frame, visible_dimension, visible_pairs

__all__ = [
    "frame", "visible_dimension", "visible_pairs", "chebyshev_centre", "diameter", "profile_geometry",
    "ProfileGeometry",
    "residual_profile", "ResidualRow", "centred_bias", "absorb_bias", "biased_rank_lower", "LazyProfile",
    "ResidualProfile", "r_svd_int", "r_opt", "gibbs_form",
]
