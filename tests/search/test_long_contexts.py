"""Long contexts (docs/design.md, "Long contexts"): the paths certkit takes on large heads, checked
on small ones by lowering their thresholds, against the plain definitions.

* the inverse carried through the pruning (Schur downdate, Woodbury update) is T^{-1};
* the pruning from a start of m messages gives the plain pruning's result at sizes where the
  carried inverse decides (m >= 32);
* the sketched SVD finds a rank-r matrix exactly, and its rank meets the target;
* row-blocked errors, attention and refinement equal the one-block computations (up to the
  GEMM's rounding per block);
* the starts of the lower search are capped, and the traversal shrinks with n N.
"""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import certkit.head
from certkit import synthetic
from certkit.driver import CertifyError, parse_synthetic
from certkit.kernel.numerics import max_row_error
from certkit.search import upper
from certkit.search.lower import messages, pruning
from certkit.search.lower.candidates import decoding_candidates
from certkit.search.lower.decoding import SAFETY, argmax_cells, contraction, margins
from certkit.search.lower.messages import far_count, farthest_rows, l1_distances
from certkit.search.lower.pruning import InverseTracker, prune_both, without
from certkit.search.basic import row_errors


def attention(family, n, d, beta, seed):
    return synthetic.head(family, n, d, beta=Fraction(beta), seed=seed).attention()


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10 ** 6), m=st.integers(3, 40), steps=st.integers(1, 12))
def test_carried_inverse_is_the_inverse(seed, m, steps):
    """After any sequence of drops and column replacements, norm() = ||T^{-1}||_inf."""
    rng = np.random.default_rng(seed)
    T = np.eye(m) * m + rng.random((m, m))                  # diagonally dominant: invertible
    inv = InverseTracker(T)
    for _ in range(min(steps, m - 2)):
        a = int(rng.integers(0, T.shape[0]))
        T = without(T, a)
        inv.drop(a)
        g = np.unique(rng.integers(0, T.shape[0], int(rng.integers(1, 4))))
        D = rng.random((T.shape[0], len(g)))
        inv.replace_columns(g, D)
        T[:, g] += D
        want = np.abs(np.linalg.inv(T)).sum(axis=1).max()
        assert inv.norm(T) == pytest.approx(want, rel=1e-9)


def test_without_drops_one_row_and_column():
    T = np.arange(25.0).reshape(5, 5)
    for a in range(5):
        keep = [i for i in range(5) if i != a]
        assert np.array_equal(without(T, a), T[np.ix_(keep, keep)])


@pytest.mark.parametrize("family,n,beta,eps", [("gaussian", 160, 3, 0.2), ("near-permutation", 120, 8, 0.1),
                                               ("clustered", 140, 20, 0.25)])
def test_pruning_with_the_carried_inverse_equals_plain_pruning(family, n, beta, eps):
    """The same (messages, cells) as pruning that refactorises T at every step."""
    from test_fast_paths import ref_inverse_norm, ref_prune
    A = attention(family, n, 6, beta, 3)
    thr = eps * (1 + SAFETY) + 1e-12
    start = farthest_rows(A, n)
    fast = prune_both(A, start, eps, thr)
    tests = (lambda T: bool(np.all(margins(T) > thr)),
             lambda T: eps * ref_inverse_norm(T) * (1 + 1e-3) < 1 - 1e-9)
    for (m1, c1), test in zip(fast, tests):
        m2, c2 = ref_prune(A, start, test)
        assert np.array_equal(m1, m2) and np.array_equal(c1, c2)


def test_far_count_keeps_small_heads_and_shrinks_with_size():
    assert [far_count(n, n) for n in (64, 512, 1024)] == [64, 512, 1024]
    assert [far_count(n, n) for n in (2048, 4096, 16384)] == [256, 64, 16]
    assert far_count(100, 20000) == 100        # at most min(n, N)


def test_lower_search_starts_are_capped(monkeypatch):
    A = attention("near-permutation", 90, 6, 8, 0)
    seen = []
    real = prune_both
    monkeypatch.setattr(messages, "CAP", 20)
    monkeypatch.setattr(pruning, "prune_both", lambda A, msgs, *rest: seen.append(len(msgs)) or real(A, msgs, *rest))
    decoding_candidates(A, 0.2)
    assert seen and max(seen) <= 20


def test_farthest_rows_in_blocks_equal_one_block():
    A = attention("gaussian", 70, 5, 2, 1)
    ref = [int(np.argmax(A.max(axis=1)))]
    dist = np.abs(A - A[ref[0]]).sum(axis=1)
    while len(ref) < 30:
        ref.append(int(np.argmax(dist)))
        dist = np.minimum(dist, np.abs(A - A[ref[-1]]).sum(axis=1))
    assert farthest_rows(A, 30).tolist() == ref
    assert np.array_equal(l1_distances(A, A[3], block_entries=7), np.abs(A - A[3]).sum(axis=1))


def test_factor_row_errors_in_blocks_equal_row_errors():
    rng = np.random.default_rng(0)
    A, C, G = rng.random((53, 41)), rng.random((53, 4)), rng.random((4, 41))
    assert np.array_equal(upper.factor_row_errors(A, C, G), row_errors(A, C @ G))          # one block: the same floats
    assert np.allclose(upper.factor_row_errors(A, C, G, block_entries=100), row_errors(A, C @ G), rtol=1e-13)


def test_sketched_svd_recovers_an_exact_low_rank_matrix():
    rng = np.random.default_rng(1)
    A = rng.standard_normal((300, 7)) @ rng.standard_normal((7, 260))
    U, s, Vt = upper.sketched_svd(A, 12)
    assert np.allclose((U[:, :7] * s[:7]) @ Vt[:7], A, atol=1e-9 * np.abs(A).max())
    assert s[7] <= 1e-9 * s[0]
    assert np.allclose(s[:7], np.linalg.svd(A, compute_uv=False)[:7], rtol=1e-10)


def test_sketched_rank_meets_the_target_and_is_not_far_from_the_full_svd():
    A = attention("gaussian", 200, 8, 2, 0)
    target = 0.25 * (1 - upper.SAFETY)
    U, s, Vt, k = upper.sketched_svd_rank(A, target, K=16)
    assert upper.factor_row_errors(A, U[:, :k] * s[:k], Vt[:k]).max() <= target
    Uf, sf, Vft = np.linalg.svd(A, full_matrices=False)
    k_full = upper.svd_rank(A, Uf, sf, Vft, target)
    assert k_full - 2 <= k <= k_full + 2


def test_search_on_the_large_path_is_certified(monkeypatch):
    """upper.search with the large-head thresholds lowered: sketched SVD, blocked refinement with a
    budget; the kernel-certified error of its answer is <= eps and its rank is <= the SVD's."""
    h = synthetic.head("gaussian", 96, 6, beta=Fraction(2), seed=2)
    A, inst = h.attention(), h.instance()
    judge = lambda U, V: max_row_error(inst, U, V, "fast")[0]
    monkeypatch.setattr(upper, "LARGE", 1000)
    monkeypatch.setattr(upper, "BLOCK", 500)
    r = upper.search(A, 0.25, judge, attempts=4)
    assert r["k"] is not None and r["k"] <= r["svd_rank"]
    assert max_row_error(inst, r["U"], r["V"], "fast")[0] <= 0.25


def test_blocked_refinement_follows_the_one_block_refinement(monkeypatch):
    A = attention("gaussian", 64, 5, 2, 4)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    C, G = U[:, :6] * s[:6], Vt[:6]
    one = upper.refine(A, C, G, iters=3)
    monkeypatch.setattr(upper, "LARGE", 100)
    monkeypatch.setattr(upper, "BLOCK", 300)
    blocked = upper.refine(A, C, G, iters=3)
    for x, y in zip(one, blocked):
        assert np.allclose(x, y, rtol=1e-3, atol=1e-5)


def test_refinement_budget_is_shared_and_spent():
    A = attention("gaussian", 48, 5, 2, 5)
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    budget = [7]
    upper.refine(A, U[:, :3] * s[:3], Vt[:3], eps=1e-6, budget=budget)
    assert budget[0] <= 0


def test_attention_in_row_blocks_equals_one_block(monkeypatch):
    h = synthetic.head("gaussian", 77, 4, beta=Fraction(3), seed=1)
    whole = h.attention()
    monkeypatch.setattr(certkit.head, "BLOCKED", 200)
    blocked = h.attention()
    assert np.allclose(blocked, whole, rtol=1e-12, atol=1e-15)      # the GEMM may round per block
    assert np.array_equal(blocked[:1], certkit.head.softmax_rows(h.logits(rows=slice(0, 1))))   # blocks of 1 row


def test_synthetic_sizes():
    assert parse_synthetic("gaussian:n=16384,d=2").n == 16384
    with pytest.raises(CertifyError, match="16384"):
        parse_synthetic("gaussian:n=16385,d=2")


def test_contraction_in_blocks_of_messages_is_the_same():
    A = attention("gaussian", 60, 4, 2, 6)
    cells = argmax_cells(A, farthest_rows(A, 5))
    rows = np.arange(60)
    assert np.array_equal(contraction(A, rows, cells, 5, block_entries=100), contraction(A, rows, cells, 5))
