"""Property tests stating the mathematics of docs/mathematics.md §4–§6 for certkit.geometry (untrusted floats).

Lemma 4.1 (exact Gibbs decomposition), r = 0 for key-only heads, Lemma 6.1 (kappa_r <=
sigma_{r+1}, omega <= 2 sigma_{r+1}), the ordering actual <= tau_exact <= tau_width <= tau_spec,
monotonicity in r, r_SVD_int in tau, Chebyshev centres, and exactly r-dimensional heads.
Exact references (ranks) use Fractions on the dyadic inputs, never the code under test.
"""
import math
from fractions import Fraction

import numpy as np
from hypothesis import given, strategies as st

from certkit import geometry as g
from certkit.head import Head
from certkit.synthetic import head

SLACK = 1e-12
FAMILIES = ["gaussian", "clustered", "near-permutation"]
betas = st.sampled_from([Fraction(1, 4), Fraction(1), Fraction(3), Fraction(8)])


@st.composite
def heads(draw, weighted=True):
    fam = draw(st.sampled_from(FAMILIES))
    n, N, d = draw(st.integers(2, 10)), draw(st.integers(2, 12)), draw(st.integers(1, 5))
    h = head(fam, n, d, beta=draw(betas), N=N, seed=draw(st.integers(0, 10 ** 6)))
    if weighted and draw(st.booleans()):
        rng = np.random.default_rng(draw(st.integers(0, 10 ** 6)))
        h = h.replace(weights=np.exp(rng.uniform(-2, 2, N)))
    return h


def exact_rank(M):
    """Rank over Q of a matrix of Fractions (Gaussian elimination)."""
    M = [row[:] for row in M]
    rank, cols = 0, len(M[0]) if M else 0
    for c in range(cols):
        piv = next((i for i in range(rank, len(M)) if M[i][c] != 0), None)
        if piv is None:
            continue
        M[rank], M[piv] = M[piv], M[rank]
        for i in range(len(M)):
            if i != rank and M[i][c] != 0:
                f = M[i][c] / M[rank][c]
                M[i] = [a - f * b for a, b in zip(M[i], M[rank])]
        rank += 1
    return rank


def exact_visible_rank(Q, K):
    """r_exact = rank( (Q - 1 q_1^T)(K - 1 k_1^T)^T ) in exact rational arithmetic (docs/mathematics.md §4.1)."""
    Qf = [[Fraction(float(v)) for v in row] for row in Q]
    Kf = [[Fraction(float(v)) for v in row] for row in K]
    Qc = [[a - b for a, b in zip(row, Qf[0])] for row in Qf[1:]]
    Kc = [[a - b for a, b in zip(row, Kf[0])] for row in Kf[1:]]
    if not Qc or not Kc:
        return 0
    return exact_rank([[sum(a * b for a, b in zip(q, k)) for k in Kc] for q in Qc])


def gibbs_matrix(x, y, log_pi, beta):
    L = log_pi[None, :] + float(beta) * (x @ y.T)
    L = L - L.max(axis=1, keepdims=True)
    E = np.exp(L)
    return E / E.sum(axis=1, keepdims=True)


def doubly_centred_logits(h):
    L = float(h.beta) * (h.queries @ h.keys.T)
    return L - L.mean(axis=1, keepdims=True) - L.mean(axis=0, keepdims=True) + L.mean()


def float_rank_doubly_centred(h):
    """Numerical rank of the doubly centred logits; the tolerance is relative to the
    *uncentred* logits, the scale of the centring round-off."""
    L = float(h.beta) * (h.queries @ h.keys.T)
    return np.linalg.matrix_rank(doubly_centred_logits(h), tol=1e3 * max(L.shape) * 2.0 ** -52 * np.linalg.norm(L, 2))


# ------------------------------------------------------------------ Lemma 4.1 / §4.4
@given(heads())
def test_lemma_4_1_gibbs_form_reproduces_attention_and_rank(h):
    """A_i = softmax_j(log pi_j + beta <x_i, y_j>) with x, y in the r-dimensional V (Lemma 4.1),
    and r_num = rank of the doubly centred logit matrix = r_exact (docs/mathematics.md §4.1)."""
    x, y, log_pi = g.gibbs_form(h.queries, h.keys, h.beta, h.weights)
    A = h.attention()
    assert np.abs(gibbs_matrix(x, y, log_pi, h.beta) - A).max() <= 1e-10
    vd = g.visible_dimension(h.queries, h.keys)
    assert x.shape[1] == y.shape[1] == vd["r_num"]
    assert float_rank_doubly_centred(h) == vd["r_num"]
    r_exact = exact_visible_rank(h.queries, h.keys)
    assert vd["r_num"] == r_exact
    # the certified lower bound is a lower bound (and here tight)
    assert vd["r_exact_lower"] <= r_exact
    assert vd["r_exact_lower"] == r_exact


@given(st.integers(2, 12), st.integers(2, 12), st.integers(1, 6), betas, st.integers(0, 10 ** 6),
       st.booleans())
def test_key_only_heads_have_r_zero_and_rank_one(n, N, d, beta, seed, dyadic):
    """All queries equal: U = {0}, r = 0, and A = 1 pi-bar^T has rank one (Theorem 4.2, r = 0).
    Non-dyadic queries make fl(mean) != q; the formation-error floor of tol_U still gives 0."""
    h = head("key-only", n, d, beta=beta, N=N, seed=seed)
    if not dyadic:
        h = h.replace(queries=np.tile(np.random.default_rng(seed).standard_normal(d), (n, 1)))
    vd = g.visible_dimension(h.queries, h.keys)
    assert vd["r_num"] == 0 and vd["dim_U"] == 0 and vd["r_exact_lower"] == 0
    A = h.attention()
    assert np.linalg.matrix_rank(A) == 1
    x, y, log_pi = g.gibbs_form(h.queries, h.keys, h.beta)
    assert x.shape == (n, 0) and y.shape == (N, 0)
    assert np.abs(gibbs_matrix(x, y, log_pi, beta) - A).max() <= 1e-12
    P = g.residual_profile(h.queries, h.keys, h.beta)
    assert len(P) == 1 and P.r_max == 0
    row = P[0]
    assert row.Gamma_W == 0 and row.tau_width <= 1e-12 and row.actual <= 1e-12


# ------------------------------------------------------------------ Lemma 6.1, ordering, monotonicity
@given(heads())
def test_lemma_6_1_and_residual_ordering(h):
    """kappa_r <= sigma_{r+1}(Z), omega_K(r) <= 2 kappa_r <= 2 sigma_{r+1}(Z) (U exact: the
    U^perp block carries no query spread), and max_i ||A_i - At_i||_1 <= tau_exact <= tau_width
    <= tau_spec for every r (Cor. 2.2, docs/mathematics.md §5.2)."""
    P = g.residual_profile(h.queries, h.keys, h.beta, h.weights)
    assert P.r_max == g.visible_dimension(h.queries, h.keys)["r_num"]
    for row in P:
        assert row.kappa <= row.sigma_next * (1 + 1e-9) + SLACK
        assert row.omega_K[0] <= 2 * row.kappa * (1 + 1e-9) + SLACK
        assert row.omega_K[0] <= 2 * row.sigma_next * (1 + 1e-9) + SLACK
        assert row.delta_Q[1] <= 1e-12          # queries lie in the numerical U
        assert row.actual <= row.tau_exact + SLACK
        assert row.tau_exact <= row.tau_width + SLACK
        assert row.tau_width <= row.tau_spec + SLACK
        assert 0 <= row.tau_spec <= 2


@given(heads())
def test_width_and_spectral_taus_non_increasing_and_zero_at_r_max(h):
    """delta^(1)(r), omega^(1)(r) shrink with the nested complements U ⊖ W_r, sigma_{r+1} is
    non-increasing, so tau_width and tau_spec are non-increasing in r; all residuals vanish at
    r = r_max (U exact).  (tau_exact is not monotone: see the counterexample below.)"""
    P = g.residual_profile(h.queries, h.keys, h.beta, h.weights)
    for a, b in zip(P.rows, P.rows[1:]):
        assert b.tau_width <= a.tau_width + SLACK
        assert b.tau_spec <= a.tau_spec + SLACK
        assert b.delta_Q[0] <= a.delta_Q[0] * (1 + 1e-9) + SLACK
        assert b.omega_K[0] <= a.omega_K[0] * (1 + 1e-9) + SLACK
    last = P[P.r_max]
    assert max(last.actual, last.tau_exact, last.tau_width, last.tau_spec) <= 1e-9


@given(heads(), st.lists(st.floats(1e-8, 2.5), min_size=2, max_size=8))
def test_r_svd_int_non_increasing_in_tau(h, taus):
    """r_SVD_int(tau) = min{r : tau_r^width <= tau} is non-increasing in tau, lies in 0..r_max,
    is 0 for tau >= 2 tanh(.) bounds above 2, and defaults to tau = eps/3 (docs/mathematics.md §6.3)."""
    P = g.residual_profile(h.queries, h.keys, h.beta, h.weights)
    taus = sorted(taus)
    rs = [g.r_svd_int(P, t) for t in taus]
    assert all(r is not None and 0 <= r <= P.r_max for r in rs)
    assert all(b <= a for a, b in zip(rs, rs[1:]))
    for t, r in zip(taus, rs):
        assert P[r].tau_width <= t and all(P[k].tau_width > t for k in range(r))
    assert g.r_svd_int(P, 2.0) == 0
    assert g.r_svd_int(P, eps=0.25) == g.r_svd_int(P, 0.25 / 3)


# ------------------------------------------------------------------ radii and centres
def mean_radius(X):
    return float(np.max(np.linalg.norm(X - X.mean(axis=0), axis=1))) if X.shape[1] else 0.0


@given(heads())
def test_gamma_with_chebyshev_centres_at_most_gamma_with_means(h):
    """Gamma_W = beta rad(P_W q_i) rad(P_W k_j) with Chebyshev centres is <= the same with the
    means as centres (docs/mathematics.md §4.2: any centre is valid, Chebyshev minimises)."""
    P = g.residual_profile(h.queries, h.keys, h.beta)
    b = float(h.beta)
    for row in P:
        Wb = P.basis[:, :row.r]
        gamma_mean = b * mean_radius(h.queries @ Wb) * mean_radius(h.keys @ Wb)
        assert row.Gamma_W <= gamma_mean * (1 + 1e-12) + SLACK
        assert abs(row.Gamma_W - b * row.rho_Q * row.rho_K) <= 1e-12 * (1 + row.Gamma_W)


@given(st.integers(1, 40), st.integers(1, 6), st.integers(0, 10 ** 6))
def test_chebyshev_centre_between_half_diameter_and_jung(p, k, seed):
    """radius = max |x - c| and diam/2 <= rad(X) <= diam sqrt(k / (2 (k + 1))) (Jung's theorem);
    the returned radius is near-minimal, hence within Jung's bound."""
    X = np.random.default_rng(seed).standard_normal((p, k)) * np.exp(np.linspace(0, 1, k))
    c, rad = g.chebyshev_centre(X)
    assert math.isclose(rad, np.max(np.linalg.norm(X - c, axis=1)), rel_tol=1e-15, abs_tol=0)
    D = g.diameter(X)
    brute = max(np.linalg.norm(a - b) for a in X for b in X)
    assert math.isclose(D, brute, rel_tol=1e-12, abs_tol=1e-300)
    assert D / 2 <= rad * (1 + 1e-12)
    assert rad <= D * math.sqrt(k / (2 * (k + 1))) * (1 + 1e-6)


# ------------------------------------------------------------------ exactly r-dimensional heads
@given(st.integers(0, 3), st.data())
def test_exactly_r_dimensional_heads_have_r_num_r(r, data):
    """q_i = B a_i + q0, k_j = B b_j + C c_j with [B | C] orthonormal, B of width r < d: the
    head is exactly an r-dimensional Gibbs matrix (the C c_j are key-only), so r_num = r,
    the certified lower bound is r, and the profile ends at r with zero residual."""
    d = data.draw(st.integers(r + 1, 6))
    n, N = data.draw(st.integers(r + 2, 12)), data.draw(st.integers(r + 2, 12))
    rng = np.random.default_rng(data.draw(st.integers(0, 10 ** 6)))
    R, _ = np.linalg.qr(rng.standard_normal((d, d)))
    B, C = R[:, :r], R[:, r:]
    Q = rng.standard_normal((n, r)) @ B.T + rng.standard_normal(d)
    K = rng.standard_normal((N, r)) @ B.T + 2.0 * rng.standard_normal((N, d - r)) @ C.T
    h = Head(Q, K, data.draw(betas))
    vd = g.visible_dimension(Q, K)
    assert vd["r_num"] == r
    assert vd["r_exact_lower"] == r
    assert float_rank_doubly_centred(h) == r
    x, y, log_pi = g.gibbs_form(Q, K, h.beta)
    assert x.shape[1] == r
    assert np.abs(gibbs_matrix(x, y, log_pi, h.beta) - h.attention()).max() <= 1e-10
    P = g.residual_profile(Q, K, h.beta)
    assert P.r_max == r and P[r].tau_width <= 1e-9 and P[r].actual <= 1e-9


# ------------------------------------------------------------------ docs/mathematics.md errata (counterexamples)
def test_tau_exact_is_not_monotone_in_r():
    """docs/mathematics.md §6.2 says all three residual levels are non-increasing in r; tau_exact is not.
    At r = 1 the residual is one-dimensional, so tau_exact(1) = tau_width(1) is optimal over
    every c'; at r = 0 the Chebyshev c' already gives a smaller value."""
    Q = np.array([[-1.0, -1.0], [0.0, -2.0], [0.0, 2.0]])
    K = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 1.0], [-1.0, 0.0]])
    P = g.residual_profile(Q, K, 1)
    assert P.r_max == 2
    assert math.isclose(P[1].tau_exact, P[1].tau_width, rel_tol=1e-12)
    assert P[1].tau_exact > P[0].tau_exact + 0.1


def test_literal_tau_spec_fails_with_numerical_U():
    """docs/mathematics.md §6.2's 2 tanh(beta (delta^(1) + delta^(2)) sigma_{r+1}(Z) / 2) is not an upper bound
    when U is numerical: a query direction of size 2^-50 (below tol_U) meets keys of size 2^50
    in that direction.  Z = 0, so the literal tau_spec is 0 while the actual error is 0.66; the
    two-block tau_spec used here bounds it.  Also tau_width(r_max) > 0, so r_SVD_int can be
    undefined (None)."""
    e = 2.0 ** -50
    Q = np.array([[1, e], [-1, e], [1, -e], [-1, -e]])
    K = np.array([[0, 2.0 ** 50], [0, -2.0 ** 50], [0, 0]])
    P = g.residual_profile(Q, K, 1)
    row = P[0]
    assert P.r_max == 0 and P.dim_U == 1 and row.sigma_next == 0
    literal = 2 * math.tanh(sum(row.delta_Q) * row.sigma_next / 2)
    assert literal == 0 and row.actual > 0.6
    assert row.actual <= row.tau_exact + SLACK <= row.tau_width + 2 * SLACK <= row.tau_spec + 3 * SLACK
    assert g.r_svd_int(P, eps=0.25) is None
    assert exact_visible_rank(Q, K) == 1 and g.visible_dimension(Q, K)["r_exact_lower"] <= 1
