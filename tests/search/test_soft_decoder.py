"""Soft decoders for the inverse-norm rule (certkit/search/lower/soft.py: soft_decoder, soft_extend).

The mathematics (docs/mathematics.md §8.1, proofs/decode-inverse-norm.md (L6)): over decoders G
with row l1 norms <= 1, the smallest ||(A_S G)^{-1}||_inf is the LP value
t* = min { max_j ||X_j||_1 : A_S X = I }.  Stated here against HiGHS (best_decoder_lp,
its X checked feasible with value t*):
* no decoder beats t*: cells (argmax, and after coordinate descent) and the soft decoder;
* G = X / t* for the LP's X reaches t* (so the minimum is attained);
* the soft decoder is a valid decoder and lands close to t*;
and the certificates built from soft decoders are VERIFIED by the kernel."""
import json
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from certkit import synthetic
from certkit.api import certify
from certkit.head import Head
from certkit.search.lower.candidates import other_starts
from certkit.search.lower.decoding import SAFETY, argmax_cells, contraction, decoded, inverse_norm, passes
from certkit.search.lower.descent import local_cells
from certkit.search.lower.growth import grow_inverse
from certkit.search.lower.messages import farthest_rows
from certkit.search.lower.pruning import prune_both, prune_both_last
from certkit.search.lower.soft import best_decoder_lp, soft_decoder, soft_extend, soft_prune

from paths import ROOT


heads = st.tuples(st.sampled_from(["gaussian", "clustered"]), st.integers(24, 48), st.integers(2, 8),
                  st.sampled_from(["1", "2", "4"]), st.integers(0, 10**6), st.integers(2, 7))


@settings(max_examples=25, deadline=None)
@given(heads)
def test_no_decoder_beats_the_lp_and_the_lp_decoder_attains_it(spec):
    family, n, d, beta, seed, M = spec
    A = synthetic.head(family, n, d, beta=Fraction(beta), seed=seed).attention()
    msgs = farthest_rows(A, M)
    M = len(msgs)
    t, X = best_decoder_lp(A[msgs])
    assert np.allclose(A[msgs] @ X, np.eye(M), atol=1e-7)            # feasible, with value t
    assert np.abs(X).sum(axis=1).max() == pytest.approx(t, rel=1e-7)
    cells = argmax_cells(A, msgs)
    assert inverse_norm(contraction(A, msgs, cells, M)) >= t * (1 - 1e-7)
    assert local_cells(A, msgs, cells)[1] >= t * (1 - 1e-7)
    v, G = soft_decoder(A[msgs])
    assert np.abs(G).sum(axis=1).max() <= 1
    assert v == inverse_norm(A[msgs] @ G)
    assert v >= t * (1 - 1e-7)
    assert v <= 1.25 * t                                   # a search quality bound (measured: a few %)
    G_lp = X / np.abs(X).sum(axis=1).max()
    assert inverse_norm(A[msgs] @ G_lp) == pytest.approx(t, rel=1e-6)


def test_soft_extension_is_verified_by_the_kernel(tmp_path):
    """A head where the soft decoders add messages to the greedy growth; the sandwich's lower
    certificate carries an explicit decoder and the kernel VERIFIES it."""
    A_head = Head.from_file(ROOT / "data" / "heads" / "gauss-n128-d16-beta4.safetensors")
    A = A_head.attention()
    growth = []
    msgs, _ = grow_inverse(A, 0.25, growth=growth)
    more, G = soft_extend(A, 0.25, msgs, growth)
    assert G is not None and len(more) > len(msgs)
    assert 0.25 * inverse_norm(A[more] @ G) < 1
    s = certify(A_head, eps="1/4")
    assert s.lower.bound >= len(more)
    assert s.lower.verdict.status == "VERIFIED"
    paths = s.save(tmp_path)
    w = json.loads(open(paths["lower"]).read())["witness"]
    assert "decoder" in w


@settings(max_examples=15, deadline=None)
@given(heads)
def test_other_starts_pass_their_own_test_and_replay_across_eps(spec):
    """Every start's growth passes the inverse-norm test with its decoder; a growth record kept
    across eps gives the same messages as a fresh search at each eps."""
    family, n, d, beta, seed, _ = spec
    A = synthetic.head(family, n, d, beta=Fraction(beta), seed=seed).attention()
    far = farthest_rows(A, 6)
    records = {}
    for eps in (0.35, 0.15, 0.25):
        kind, M, msgs, dec = other_starts(A, eps, far[1:], records)
        assert M == len(msgs) == len(set(msgs.tolist()))
        assert eps * inverse_norm(decoded(A, msgs, dec)) < 1
        fresh = other_starts(A, eps, far[1:], {})
        assert fresh[1] == M and np.array_equal(fresh[2], msgs)


@settings(max_examples=15, deadline=None)
@given(heads, st.sampled_from([0.15, 0.25, 0.4]))
def test_soft_prune_returns_a_larger_prefix_of_the_pruning_that_passes(spec, eps):
    """soft_prune: a set the pruning passed on the way (the start without a prefix of the dropped
    messages), larger than the argmax cells' M0, whose decoder (row l1 norms <= 1) passes the
    inverse-norm test in floats; None only when no probe passes."""
    family, n, d, beta, seed, _ = spec
    A = synthetic.head(family, n, d, beta=Fraction(beta), seed=seed).attention()
    start = farthest_rows(A, min(A.shape))
    dropped = []
    msgs0, _ = prune_both(A, start, eps, eps * (1 + SAFETY) + 1e-12, dropped)[1]
    M0 = len(msgs0)
    assert np.array_equal(prune_both_last(start, dropped[:len(start) - M0]), msgs0)
    found = soft_prune(A, eps, start, dropped, M0, probes=4)
    if found is None:
        return
    msgs, G = found
    assert len(msgs) > M0
    assert np.array_equal(msgs, prune_both_last(start, dropped[:len(start) - len(msgs)]))
    assert G.shape == (A.shape[1], len(msgs)) and np.abs(G).sum(axis=1).max() <= 1
    assert passes(inverse_norm(A[msgs] @ G), eps)


def test_soft_prune_beats_the_pruning_and_the_kernel_verifies_it(tmp_path):
    """A head where soft decoders keep more of the pruning's messages than the argmax cells (the
    route of heads with N > 512, here called directly): the kernel VERIFIES the certificate."""
    from certkit.search import writer
    h = Head.from_file(ROOT / "data" / "heads" / "gauss-n128-d16-beta4.safetensors")
    A = h.attention()
    start = farthest_rows(A, min(A.shape))
    dropped = []
    msgs0, _ = prune_both(A, start, 0.25, 0.25 * (1 + SAFETY) + 1e-12, dropped)[1]
    msgs, G = soft_prune(A, 0.25, start, dropped, len(msgs0))
    assert len(msgs) > len(msgs0)
    v = writer.write_checked(str(tmp_path / "lower.json"), "lower-decoding-inverse-norm", len(msgs), "1/4", h,
                             {"messages": (msgs, "int"), "decoder": (G, "float")}, {"producer": "test"})
    assert v.status == "VERIFIED"
