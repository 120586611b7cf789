"""Peer low-rank approximations (certkit.search.peers) and the kernel-certified smallest rank."""
import os
from fractions import Fraction

import numpy as np
import pytest

from certkit import synthetic
from certkit.head import Head
from certkit.search import peers

import paths

HEADS = os.path.join(paths.ROOT, "data", "heads")


def attention(h):
    return h.attention()


def instance(h):
    return h.instance()


def row_error(A, U, V):
    return np.abs(A - U @ V.T).sum(axis=1).max()


@pytest.mark.parametrize("method", sorted(peers.PEERS))
def test_shapes_and_finite(method):
    h = synthetic.head("gaussian", 12, 4, beta=Fraction(2), N=20, seed=1)
    U, V = peers.PEERS[method](attention(h), h, 3, 0)
    assert U.shape == (12, 3) and V.shape == (20, 3)
    assert U.dtype == V.dtype == np.float64
    assert np.isfinite(U).all() and np.isfinite(V).all()


@pytest.mark.parametrize("method", ["svd", "nystrom", "linformer"])
def test_rank_out_of_range_is_refused(method):
    h = synthetic.head("gaussian", 8, 4, seed=0)
    A = attention(h)
    for k in (0, 9):
        with pytest.raises(ValueError):
            peers.PEERS[method](A, h, k, 0)


def test_svd_full_rank_is_exact():
    h = synthetic.head("gaussian", 16, 4, beta=Fraction(3), seed=2)
    A = attention(h)
    assert row_error(A, *peers.truncated_svd(A, h, 16, 0)) < 1e-12


def test_performer_converges_as_k_grows():
    h = synthetic.head("gaussian", 16, 4, beta=Fraction(1), seed=0)
    A = attention(h)
    coarse = row_error(A, *peers.performer(A, h, 8, 0))
    fine = row_error(A, *peers.performer(A, h, 2048, 0))
    assert fine < 0.2 and fine < coarse / 3, (coarse, fine)


def test_performer_draws_average_to_A():
    """The mean of 40 independent seeds' estimates lands near A: the random features are
    centred on the right kernel (a biased feature sampler plateaus far from A)."""
    h = synthetic.head("gaussian", 8, 4, beta=Fraction(1), seed=4)
    A = attention(h)
    B = np.mean([(lambda U, V: U @ V.T)(*peers.performer(A, h, 512, s)) for s in range(40)], axis=0)
    assert np.abs(A - B).sum(axis=1).max() < 0.05


def test_performer_column_weights_and_bias():
    h = synthetic.head("gaussian", 10, 4, beta=Fraction(1), N=14, seed=5)
    w = np.random.default_rng(0).uniform(0.0, 3.0, 14)
    w[3] = 0.0
    hw = h.replace(weights=w)
    U0, V0 = peers.performer(attention(h), h, 64, 7)
    U, V = peers.performer(attention(hw), hw, 64, 7)
    B0 = (U0 @ V0.T) * w                     # reweight the unweighted estimate and renormalise
    assert np.allclose(U @ V.T, B0 / B0.sum(axis=1, keepdims=True), rtol=1e-12, atol=1e-15)
    assert np.allclose((U @ V.T).sum(axis=1), 1.0)
    with pytest.raises(ValueError, match="logit bias"):
        hb = h.replace(bias=np.zeros((10, 14)))
        peers.performer(attention(hb), hb, 8, 0)


def test_linformer_singleton_segments_reproduce_A():
    h = synthetic.head("gaussian", 12, 4, beta=Fraction(2), N=18, seed=6)
    rng = np.random.default_rng(1)
    w = rng.uniform(0.5, 2.0, 18)
    w[0] = 0.0
    for extra in ({}, {"weights": w}, {"weights": w, "bias": rng.standard_normal((12, 18))}):
        hh = h.replace(**extra)
        A = attention(hh)
        U, V = peers.linformer(A, hh, 18, 0)
        assert np.array_equal(V, np.eye(18))
        assert row_error(A, U, V) < 1e-12


def test_linformer_pools_mass_evenly_within_segments():
    h = synthetic.head("gaussian", 6, 4, seed=0, N=10)
    A = attention(h)
    U, V = peers.linformer(A, h, 3, 0)
    B = U @ V.T
    assert np.allclose(B.sum(axis=1), 1.0)
    for seg in np.array_split(np.arange(10), 3):
        assert np.allclose(B[:, seg], B[:, seg[:1]])


def test_nystrom_interpolates_low_rank_attention():
    h = synthetic.head("key-only", 32, 4, beta=Fraction(2))
    A = attention(h)
    assert row_error(A, *peers.nystrom(A, h, 1, 0)) < 1e-12
    h2 = synthetic.head("gaussian", 20, 4, beta=Fraction(2), seed=3)
    h2 = h2.replace(queries=h2.queries[np.arange(20) % 2])      # two distinct query rows: rank(A) = 2
    A2 = attention(h2)
    assert np.linalg.matrix_rank(A2) == 2
    assert row_error(A2, *peers.nystrom(A2, h2, 1, 0)) > 1e-3
    assert row_error(A2, *peers.nystrom(A2, h2, 2, 0)) < 1e-12


@pytest.mark.parametrize("method", ["svd", "nystrom"])
def test_smallest_rank_key_only_is_one(method):
    h = synthetic.head("key-only", 32, 4, beta=Fraction(2))
    r = peers.smallest_rank(method, attention(h), h, instance(h), Fraction(1, 10))
    assert r["method"] == method and r["k"] == 1
    assert r["certified_error"] <= Fraction(1, 10) and r["seconds"] >= 0


@pytest.mark.parametrize("method", sorted(peers.PEERS))
def test_smallest_rank_is_certified(method):
    h = Head.from_file(os.path.join(HEADS, "gauss-n32-d8-beta2.safetensors"))
    A, inst, eps = attention(h), instance(h), Fraction(1, 4)
    r = peers.smallest_rank(method, A, h, inst, eps, seed=0)
    assert set(r) == {"method", "k", "certified_error", "seconds"}
    if r["k"] is None:
        assert r["certified_error"] > eps
        assert peers.certified_error(method, A, h, inst, min(A.shape), 0) == r["certified_error"]
    else:
        assert 1 <= r["k"] <= min(A.shape)
        assert r["certified_error"] <= eps
        assert peers.certified_error(method, A, h, inst, r["k"], 0) == r["certified_error"]


def test_smallest_rank_svd_is_minimal():
    h = Head.from_file(os.path.join(HEADS, "gauss-n32-d8-beta2.safetensors"))
    A, inst, eps = attention(h), instance(h), Fraction(1, 4)
    r = peers.smallest_rank("svd", A, h, inst, eps)
    assert r["k"] is not None and r["k"] > 1
    assert peers.certified_error("svd", A, h, inst, r["k"] - 1) > eps
    scan = next(k for k in range(1, 33) if peers.certified_error("svd", A, h, inst, k) <= eps)
    assert r["k"] == scan


def test_smallest_rank_reports_none_when_kmax_fails():
    h = synthetic.head("gaussian", 24, 4, beta=Fraction(4), seed=0)
    A, inst = attention(h), instance(h)
    r = peers.smallest_rank("svd", A, h, inst, Fraction(1, 100), kmax=2)
    assert r["k"] is None and r["certified_error"] > Fraction(1, 100)


@pytest.mark.filterwarnings("ignore::RuntimeWarning")
def test_kernel_rejection_counts_as_failure(monkeypatch):
    """A peer emitting overflowing factors is never certified: error inf, k None."""
    h = synthetic.head("gaussian", 8, 4, seed=0)
    monkeypatch.setitem(peers.PEERS, "bad", lambda A, h, k, seed: (np.full((8, k), 1e300), np.full((8, k), 1e300)))
    r = peers.smallest_rank("bad", attention(h), h, instance(h), Fraction(1, 2))
    assert r["k"] is None and r["certified_error"] == float("inf")


@pytest.mark.parametrize("peer", ["svd", "nystrom"])
@pytest.mark.parametrize("seed", [0, 1])
def test_k_independent_work_done_once_finds_the_same_rank(peer, seed):
    """smallest_rank with the SVD / pivoted QRs computed once equals recomputing them at every k."""
    from fractions import Fraction
    from certkit.search.peers import smallest_rank
    h = synthetic.head("gaussian", 48, 6, beta=Fraction(3), seed=seed)
    A, inst = h.attention(), h.instance()
    once, every = (smallest_rank(peer, A, h, inst, 0.25, reuse=r) for r in (True, False))
    assert once["k"] is not None
    assert (once["k"], once["certified_error"]) == (every["k"], every["certified_error"])
