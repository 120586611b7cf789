"""The greedy growth with shortlists (certkit.search.lower.growth, limit=): the shortlist's estimate is
the new row's l1 norm of the inverse of the bordered contraction [[T_S, c_i], [r_i, d_i]] (Schur
complement), the step's value is the true ||T^{-1}||_inf of its argmax cells and never below the
full step's minimum, and the late candidates on wide heads (N > 512) pass the inverse-norm test."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from certkit import synthetic
from certkit.search.lower.candidates import late_candidates
from certkit.search.lower.growth import grow_inverse, grow_step, shortlist


def attention(family, n, d, beta, seed, N=None):
    return synthetic.head(family, n, d, beta=Fraction(beta), N=N, seed=seed).attention()


def plain_contraction(A, msgs, cells):
    """T[a, b] = sum of A[msgs[a], j] over the columns j with cells[j] = b (a loop)."""
    T = np.zeros((len(msgs), len(msgs)))
    for j, b in enumerate(cells):
        T[:, b] += A[msgs, j]
    return T


def plain_inverse_norm(T):
    try:
        return float(np.abs(np.linalg.inv(T)).sum(axis=1).max())
    except np.linalg.LinAlgError:
        return np.inf


def bordered_estimate(A, S, i):
    """The l1 norm of the last row of the inverse of [[T_S, c], [r, d]]: T_S the argmax-cell
    contraction of S, and row i taking the columns where it exceeds every row of S (c: S's mass on
    them, d: row i's) while the rest of row i stays in S's cells (r)."""
    cells = np.argmax(A[S], axis=0)
    take = A[i] > A[S].max(axis=0)
    TS = plain_contraction(A, S, cells)
    c = A[S][:, take].sum(axis=1)
    r = np.array([A[i, (cells == b) & ~take].sum() for b in range(len(S))])
    T = np.block([[TS, c[:, None]], [r[None, :], np.array([[A[i, take].sum()]])]])
    try:
        return float(np.abs(np.linalg.inv(T)[-1]).sum())
    except np.linalg.LinAlgError:
        return np.inf


HEADS = st.tuples(st.sampled_from(["gaussian", "clustered"]), st.integers(24, 48), st.sampled_from([4, 8]),
                  st.sampled_from([2, 4, 8]), st.integers(0, 10 ** 6))


@settings(max_examples=15, deadline=None)
@given(head=HEADS, size=st.integers(2, 6), limit=st.integers(1, 12))
def test_the_shortlist_holds_the_rows_of_smallest_bordered_estimate(head, size, limit):
    family, n, d, beta, seed = head
    A = attention(family, n, d, beta, seed)
    S = list(np.random.default_rng(seed).choice(n, size, replace=False))
    cand = np.setdiff1d(np.arange(n), S)
    est = np.array([bordered_estimate(A, S, i) for i in cand])
    got = shortlist(A, S, cand, limit)
    assert len(got) == min(limit, len(cand)) and np.all(np.diff(got) > 0)
    worst_in = max(est[np.searchsorted(cand, got)])
    outside = np.setdiff1d(cand, got)
    if outside.size and np.isfinite(worst_in):        # every row left out is estimated no better
        assert min(est[np.searchsorted(cand, outside)]) >= worst_in * (1 - 1e-9)


@settings(max_examples=15, deadline=None)
@given(head=HEADS, steps=st.integers(1, 8), limit=st.integers(1, 16))
def test_a_step_with_a_shortlist_is_exact_for_its_row_and_no_better_than_all_rows(head, steps, limit):
    family, n, d, beta, seed = head
    A = attention(family, n, d, beta, seed)
    S = [int(np.argmax(A.max(axis=1)))]
    for _ in range(steps):
        msgs, cells, v = grow_step(A, S, limit)
        full = grow_step(A, S)[2]
        assert np.array_equal(msgs[:-1], S) and msgs[-1] not in S
        assert np.array_equal(cells, np.argmax(A[msgs], axis=0))
        assert v == pytest.approx(plain_inverse_norm(plain_contraction(A, msgs, cells)), rel=1e-9) or v == np.inf
        assert v >= full * (1 - 1e-12)
        S = list(msgs)


@settings(max_examples=10, deadline=None)
@given(head=HEADS, limit=st.integers(1, 8))
def test_a_shortlist_far_worse_than_the_last_step_falls_back_to_all_rows(head, limit):
    """last tiny: every shortlist's best is above FALLBACK x last, so the step is the full one."""
    family, n, d, beta, seed = head
    A = attention(family, n, d, beta, seed)
    S = [int(np.argmax(A.max(axis=1)))]
    for _ in range(4):
        a, b = grow_step(A, S, limit, last=1e-12), grow_step(A, S)
        assert np.array_equal(a[0], b[0]) and a[2] == b[2]
        S = list(b[0])


def test_late_candidates_on_a_wide_head_pass_the_inverse_norm_test():
    """N > 512: the growth with shortlists (argmax cells) and its soft extension (a decoder G with
    row l1 norms <= 1) both satisfy eps ||(A[msgs] G)^{-1}||_inf < 1."""
    A = attention("gaussian", 200, 8, 4, 7, N=600)     # n > SHORTLIST: the shortlists are used
    eps = 0.25
    found = list(late_candidates(A, eps, pruning={}, growth=[]))
    assert found, "the growth finds more than one message on this head"
    for kind, M, msgs, dec in found:
        assert kind == "lower-decoding-inverse-norm" and len(set(msgs.tolist())) == M
        if dec.ndim == 1:
            T = plain_contraction(A, msgs, dec)
        else:
            assert np.abs(dec).sum(axis=1).max() <= 1 + 1e-12
            T = A[msgs] @ dec
        assert eps * plain_inverse_norm(T) < 1
    grown = grow_inverse(A, eps, max_local=0, limit=128)[0]
    assert found[0][1] == len(grown)


def test_the_late_growth_is_skipped_above_GROWTH_MAX(monkeypatch):
    """The growth stage runs where the lower bound to beat is at most GROWTH_MAX, not above."""
    from certkit.search.lower import candidates
    A = attention("gaussian", 200, 8, 4, 7, N=600)
    grown = len(grow_inverse(A, 0.25, max_local=0, limit=128)[0])
    monkeypatch.setattr(candidates, "GROWTH_MAX", 10)
    at = list(late_candidates(A, 0.25, pruning={}, growth=[], stages=("growth",), above=10))
    above = list(late_candidates(A, 0.25, pruning={}, growth=[], stages=("growth",), above=11))
    assert at and at[0][1] == grown and above == []


def test_the_full_lower_search_gives_the_late_growth_its_best_other_candidate_to_beat(monkeypatch):
    """certify_lower(late=True) (calibrate, compare): the late candidates get above = the largest
    other candidate, so the GROWTH_MAX rule applies there as in the sandwich."""
    from certkit.search import sandwich as sandwich_mod
    A = attention("gaussian", 200, 8, 4, 7, N=600)
    seen = []

    def late(A, eps, pruning, growth=None, soft=True, stages=("pruning", "growth"), above=0):
        seen.append(above)
        yield from ()
    monkeypatch.setattr(sandwich_mod, "late_candidates", late)
    cands = sandwich_mod.lower_candidates(A, 0.25, {})
    assert len(seen) == 1 and seen[0] == max(c[0] for c in cands) > 0
