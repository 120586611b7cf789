"""The masked visible dimension r_M of docs/mathematics.md §4.5 (proofs/masked-visible-dimension.md),
stated as tests: hand-computed values where the mask changes the dimension (keys never seen, a
one-key window, row blocks whose key sets do not overlap), r_M <= r, r - 1 <= r_M for a causal
mask that shows the last row every key, the certified lower bound never above the exact r_M
(Fractions on the dyadic inputs, never the code under test), each row invariant under moving its
query orthogonally to its key differences D_i, and the exact masked Gibbs form of Lemma 4.3 (b)."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from certkit import geometry as g
from certkit.head import Head, RowMask

from test_geometry import exact_rank


def exact_masked_rank(Q, K, visible):
    """r_M = rank(Q_M D^T) over Q: Q_M the differences q_i - q_i0 of the rows that see two keys or
    more, D every difference k_j - k_j' of two keys one row sees (all pairs, not the code's spanning set)."""
    rows = [i for i in range(len(Q)) if visible[i].sum() >= 2]
    if len(rows) < 2:
        return 0
    F = lambda v: [Fraction(float(x)) for x in v]
    q0 = F(Q[rows[0]])
    QM = [[a - b for a, b in zip(F(Q[i]), q0)] for i in rows[1:]]
    pairs = {(j, jj) for i in rows for j in np.flatnonzero(visible[i]) for jj in np.flatnonzero(visible[i]) if j < jj}
    D = [[a - b for a, b in zip(F(K[jj]), F(K[j]))] for j, jj in sorted(pairs)]
    M = [[sum(a * b for a, b in zip(q, dk)) for dk in D] for q in QM]
    return exact_rank(M)


def dyadic(rng, shape):
    """Gaussian entries rounded to multiples of 1/64 (exact in binary; generic enough)."""
    return np.round(rng.standard_normal(shape) * 64) / 64


def test_keys_never_seen_lower_the_dimension():
    """n = 4 queries, N = 20 keys, causal: rows 1..3 see keys {0, 1}, {0..2}, {0..3}, so
    U_M = span{q_2 - q_1, q_3 - q_1} (row 0 sees one key) and r_M = 2, where the unmasked r = 3."""
    rng = np.random.default_rng(1)
    Q, K = dyadic(rng, (4, 6)), dyadic(rng, (20, 6))
    un = g.visible_dimension(Q, K)
    m = g.visible_dimension(Q, K, mask=RowMask())
    assert (un["r_num"], un["r_exact_lower"]) == (3, 3)
    assert (m["r_num"], m["r_exact_lower"], m["rows_seeing_two"], m["pairs"]) == (2, 2, 3, 3)
    assert exact_masked_rank(Q, K, RowMask().visible(np.arange(4), 20)) == 2


def test_a_one_key_window_has_dimension_zero_and_sinks_restore_it():
    """window(i, 1): every row sees its own key only, so every row is e_i whatever Q is: r_M = 0.
    With one sink, rows 1.. see {0, i}: the differences k_i - k_0 span R^5 again."""
    rng = np.random.default_rng(2)
    Q, K = dyadic(rng, (12, 5)), dyadic(rng, (12, 5))
    assert g.visible_dimension(Q, K)["r_num"] == 5
    one = g.visible_dimension(Q, K, mask=RowMask(window=1))
    assert (one["r_num"], one["r_exact_lower"], one["pairs"]) == (0, 0, 0)
    sink = g.visible_dimension(Q, K, mask=RowMask(window=1, sinks=1))
    assert (sink["r_num"], sink["r_exact_lower"], sink["rows_seeing_two"]) == (5, 5, 11)


def test_row_blocks_whose_keys_differ_by_one_direction():
    """A boolean mask (packed documents): rows 0, 1 see keys {0, 1}, rows 2, 3 see keys {2, 3}, and
    k_1 - k_0 = k_3 - k_2 = e_1 while k_2 - k_0 = 5 e_2: sum D_i = span{e_1}, so r_M = 1; unmasked,
    the key differences span e_1 and e_2, r = 2."""
    Q = np.array([[1.0, 2.0, -1.0], [0.5, -1.0, 2.0], [-2.0, 0.25, 1.0], [3.0, 1.0, 0.5]])
    K = np.array([[0.0, 0, 0], [1.0, 0, 0], [0.0, 5, 0], [1.0, 5, 0]])
    vis = np.array([[1, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 1], [0, 0, 1, 1]], dtype=bool)
    assert g.visible_dimension(Q, K)["r_num"] == 2
    m = g.visible_dimension(Q, K, mask=vis)
    assert (m["r_num"], m["r_exact_lower"], m["pairs"]) == (1, 1, 2)
    assert exact_masked_rank(Q, K, vis) == 1
    assert np.allclose(np.abs(m["V"][:, 0]), [1, 0, 0])        # V_M = P_{U_M} span{e_1} = span{e_1}


def test_padding_columns_are_left_out_with_or_without_a_mask():
    rng = np.random.default_rng(3)
    Q, K = dyadic(rng, (8, 4)), dyadic(rng, (8, 4))
    w = np.ones(8)
    w[[2, 5]] = 0
    assert g.visible_dimension(Q, K, weights=w)["r_num"] == g.visible_dimension(Q, K[w > 0])["r_num"]
    m = g.visible_dimension(Q, K, mask=RowMask(), weights=w)
    vis = RowMask().visible(np.arange(8), 8) & (w > 0)
    assert m["r_num"] == exact_masked_rank(Q, K, vis)
    pairs, rows = g.visible_pairs(RowMask(), 8, 8, w > 0)
    assert not np.isin(pairs, [2, 5]).any() and rows.tolist() == [1, 2, 3, 4, 5, 6, 7]


def test_the_dense_and_the_structured_mask_give_the_same_pairs():
    mask = RowMask(offset=2, window=3, sinks=2)
    a = g.visible_pairs(mask, 30, 40)
    b = g.visible_pairs(mask.visible(np.arange(30), 40), 30, 40)
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
    with pytest.raises(ValueError, match="boolean matrix"):
        g.visible_pairs(np.ones((3, 3), dtype=bool), 4, 3)


masks = st.builds(RowMask, offset=st.integers(0, 3), window=st.one_of(st.none(), st.integers(1, 6)),
                  sinks=st.integers(0, 2))


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 9), st.integers(0, 4), st.integers(1, 5), masks, st.integers(0, 10 ** 6))
def test_masked_dimension_properties(n, extra, d, mask, seed):
    """r_exact_lower <= r_M(exact) <= r (float r of the kept keys, the same data), r_M <= min(d, rows - 1),
    and the float r_M equals the exact one on these generic dyadic inputs."""
    rng = np.random.default_rng(seed)
    N = n + mask.offset + extra
    Q, K = dyadic(rng, (n, d)), dyadic(rng, (N, d))
    vis = mask.visible(np.arange(n), N)
    m = g.visible_dimension(Q, K, mask=mask)
    exact = exact_masked_rank(Q, K, vis)
    assert m["r_exact_lower"] <= exact
    assert m["r_num"] == exact
    assert exact <= g.visible_dimension(Q, K)["r_num"]
    assert exact <= min(d, max(m["rows_seeing_two"] - 1, 0))


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 12), st.integers(1, 6), st.integers(0, 10 ** 6))
def test_causal_mask_with_every_key_seen_loses_at_most_one_dimension(n, d, seed):
    """o = 0, n = N, no padding: only row 0 sees a single key, so r - 1 <= r_M <= r (Lemma 4.3 (c))."""
    rng = np.random.default_rng(seed)
    Q, K = dyadic(rng, (n, d)), dyadic(rng, (n, d))
    r = g.visible_dimension(Q, K)["r_num"]
    rm = g.visible_dimension(Q, K, mask=RowMask())["r_num"]
    assert r - 1 <= rm <= r


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 10), st.integers(1, 5), masks, st.sampled_from(["1/2", "1", "3"]), st.integers(0, 10 ** 6))
def test_each_row_is_invariant_orthogonally_to_its_key_differences(n, d, mask, beta, seed):
    """Lemma 4.3 (a): q_i -> q_i + t with t orthogonal to D_i = span{k_j - k_j' : j, j' in S_i} leaves
    row i of A unchanged (float softmax, 1e-12); a move inside D_i changes it whenever D_i != 0."""
    rng = np.random.default_rng(seed)
    N = n + mask.offset
    Q, K = rng.standard_normal((n, d)), rng.standard_normal((N, d))
    h = Head.from_arrays(Q, K, beta=beta, mask=mask)
    A = h.attention()
    i = int(rng.integers(0, n))
    seen = np.flatnonzero(mask.visible([i], N)[0])
    Di = K[seen[1:]] - K[seen[0]]
    basis = np.linalg.svd(Di, full_matrices=True)[2] if len(Di) else np.eye(d)
    r = int(np.sum(np.linalg.svd(Di, compute_uv=False) > 1e-9)) if len(Di) else 0
    t = basis[r:].T @ rng.standard_normal(d - r) * 3 if r < d else np.zeros(d)
    Q2 = Q.copy()
    Q2[i] += t
    A2 = h.replace(queries=Q2).attention()
    assert np.abs(A2[i] - A[i]).sum() <= 1e-12
    if r:
        Q3 = Q.copy()
        Q3[i] += 5 * basis[0]
        assert np.abs(h.replace(queries=Q3).attention()[i] - A[i]).sum() > 1e-9


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 10), st.integers(1, 5), masks, st.integers(0, 10 ** 6))
def test_exact_masked_gibbs_form(n, d, mask, seed):
    """Lemma 4.3 (b): with B the basis of V_M (visible_dimension's V), x_i = B^T (q_i - q_i0) on the
    rows that see two keys (0 elsewhere), y_j = B^T k_j and pi_j = e^{beta <q_i0, k_j>}, the masked
    softmax of log pi + beta X Y^T is A."""
    rng = np.random.default_rng(seed)
    N = n + mask.offset
    Q, K = rng.standard_normal((n, d)), rng.standard_normal((N, d))
    beta = 0.7
    A = Head.from_arrays(Q, K, beta="7/10", mask=mask).attention()
    m = g.visible_dimension(Q, K, mask=mask)
    _, rows = g.visible_pairs(mask, n, N)
    B = m["V"]
    X = np.zeros((n, B.shape[1]))
    if len(rows):
        X[rows] = (Q[rows] - Q[rows[0]]) @ B
        log_pi = beta * (K @ Q[rows[0]])
    else:
        log_pi = np.zeros(N)
    L = log_pi + beta * (X @ (K @ B).T)
    L[~mask.visible(np.arange(n), N)] = -np.inf
    G = np.exp(L - L.max(axis=1, keepdims=True))
    assert np.abs(G / G.sum(axis=1, keepdims=True) - A).sum(axis=1).max() <= 1e-9
