"""Caches that change as a decoder streams (certkit.streaming): StreamingLLM, H2O online, KIVI, stated as
per-key row intervals (format 1.3), and the layer-level output distance they are compared by.

The H2O and KIVI tests state what each query must see from an independent, plain reading of the
methods (sets and dicts, token by token), not from the code under test."""
import json
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import certkit
import distance_oracle as oracle
from certkit import compress, streaming
from certkit.choices import check
from certkit.head import Head, KeyRows, RowMask, softmax_rows
from certkit.search.compare import certify_layer_output
from certkit.search.writer import output_certificate


def causal(n=24, d=4, dv=8, seed=0, mask=None):
    rng = np.random.default_rng(seed)
    return Head.from_arrays(rng.standard_normal((n, d)), rng.standard_normal((n, d)), beta="1/2",
                            mask=mask or RowMask(0), values=rng.standard_normal((n, dv)), name=f"c{seed}")


def seen(head):
    """Row i's visible keys, from the head's float logits."""
    L = head.logits()
    return [set(np.flatnonzero(np.isfinite(L[i]))) for i in range(head.n)]


def h2o_reference(head, heavy, window, sinks):
    """H2O read plainly: token i joins the cache, the query attends to the cache, every cached key adds
    its attention to its score, then, while the cache is over budget, the lowest-scoring key that is
    neither a sink nor among the window most recent leaves (the oldest on a tie)."""
    L, cache, score, rows = head.logits(), [], {}, []
    for i in range(head.n):
        cache.append(i)
        rows.append(set(cache))
        a = softmax_rows(L[i][cache][None, :])[0]
        for j, x in zip(cache, a):
            score[j] = score.get(j, 0.0) + x
        while len(cache) > sinks + heavy + window:
            out = min((j for j in cache if j >= sinks and j <= i - window), key=lambda j: (score[j], j))
            cache.remove(out)
    return rows


@given(st.integers(0, 10 ** 6), st.integers(0, 3), st.integers(1, 5), st.integers(1, 5))
@settings(max_examples=30, deadline=None)
def test_h2o_evicts_online_as_the_method_reads(seed, sinks, window, heavy):
    h = causal(20, seed=seed)
    e = compress.evict(h, sinks=sinks, window=window, heavy=heavy)
    assert isinstance(e.mask, KeyRows) and e.bias is None
    assert seen(e) == h2o_reference(h, heavy, window, sinks)


def test_h2o_never_looks_at_later_queries():
    """Changing the queries after row t changes nothing any row <= t sees (the set used to be chosen
    with every query's attention, future ones included)."""
    h = causal(30, seed=3)
    Q = h.queries.copy()
    Q[15:] = np.random.default_rng(9).standard_normal(Q[15:].shape) * 5
    a, b = (seen(compress.evict(x, sinks=1, window=3, heavy=4)) for x in (h, h.replace(queries=Q)))
    assert a[:16] == b[:16] and a != b


def test_streaming_llm_on_a_window_head_with_sinks_is_exact_key_rows():
    h = causal(20, mask=RowMask(0, 6, 2))
    e = compress.evict(h, sinks=1, window=3)
    for i, s in enumerate(seen(e)):
        assert s == {j for j in range(20) if j <= i and (j < 1 or i - 3 < j) and (j < 2 or i - 6 < j)}


@pytest.mark.parametrize("bits", streaming.KIVI_BITS)
def test_kivi_groups_quantise_within_their_range(bits):
    x = np.random.default_rng(bits).standard_normal((50, 16)) * 3
    q = streaming.quantise_groups(x, bits)
    lo, hi = x.astype(np.float32).min(axis=1, keepdims=True), x.astype(np.float32).max(axis=1, keepdims=True)
    step = (hi - lo) / (2 ** bits - 1)
    assert np.all(np.abs(q - x) <= step / 2 * (1 + 1e-5) + 1e-5 * np.abs(x))
    assert all(len(np.unique(r)) <= 2 ** bits for r in q)
    assert np.array_equal(q, q.astype(np.float32))               # float32 numbers, exact in binary64


@pytest.mark.parametrize("group,residual", [(4, 4), (4, 8), (2, 6)])
def test_kivi_each_row_sees_one_copy_of_each_past_token_in_its_streaming_state(group, residual):
    """Query i sees key j <= i once: full until j's block of `residual` tokens is complete (i + 1 >=
    residual (j // residual + 1)), then quantised per channel over its group of `group` tokens (all <= i);
    value j full while j > i - residual, then quantised per token."""
    h = causal(23, d=4, dv=8, seed=1)
    e = streaming.kivi(h, bits=2, group=group, residual=residual)
    Kq = streaming.kivi_keys(h.keys, 2, group)
    Vq = streaming.kivi_values(h.values, 2, group)
    vis = e.mask.visible(np.arange(e.n), e.N)
    for i in range(h.n):
        cols = np.flatnonzero(vis[i])
        assert len(cols) == i + 1
        for c in cols:
            j = next(t for t in range(h.n) if np.array_equal(e.keys[c], h.keys[t]) or np.array_equal(e.keys[c], Kq[t])
                     and (e.keys[c] != h.keys[t]).any())
            quantised_key = i + 1 >= residual * (j // residual + 1)
            assert np.array_equal(e.keys[c], Kq[j] if quantised_key else h.keys[j])
            assert np.array_equal(e.values[c], Vq[j] if j <= i - residual else h.values[j])
            if quantised_key:
                assert (j // group + 1) * group - 1 <= i            # its group holds past tokens only


def test_kivi_needs_values_and_a_causal_head():
    h = causal(8)
    with pytest.raises(streaming.CacheError, match="no values"):
        streaming.kivi(h.replace(values=None))
    with pytest.raises(streaming.CacheError, match="no causal"):
        streaming.kivi(h.replace(mask=None))
    with pytest.raises(streaming.CacheError, match="multiple of group"):
        streaming.kivi(h, bits=2, group=4, residual=6)


def layer(seed, heads=3, n=10, dv=6, dout=5):
    rng = np.random.default_rng(seed)
    K = rng.standard_normal((n, 4))
    return [Head.from_arrays(rng.standard_normal((n, 4)), K, beta="1/2", mask=RowMask(0), values=rng.standard_normal((n, dv)),
                             projection=rng.standard_normal((dv, dout)), name=f"l{seed}-h{h}") for h in range(heads)]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("norm", ["inf", "2"])
def test_a_layer_certificate_bounds_the_true_sum_over_heads(tmp_path, seed, norm):
    """The layer's certified error is above the 60-digit truth of the summed heads and within 1.001 of it;
    a claim a hair below the truth is not VERIFIED."""
    hs = layer(seed)
    reps = [compress.evict(h, sinks=1, window=2, heavy=2) if k % 2 else streaming.kivi(h, 2, 2, 2)
            for k, h in enumerate(hs)]
    c = certify_layer_output("l", hs, reps, norm, relative=seed % 2 == 1, path=str(tmp_path / "l.json"))
    assert c.verdict.status == "VERIFIED"
    truth = oracle.fraction(oracle.output_truth(str(tmp_path / "l.json")))
    assert truth <= c.distance <= truth * 1.001 + 1e-12
    assert np.all(c.rows.bound >= c.rows.estimate * (1 - 1e-12))
    path = output_certificate(str(tmp_path / "below.json"), list(zip(hs, reps)), truth * (1 - 10 ** -9), norm,
                              seed % 2 == 1)
    assert check(path).status == "REJECTED"


def test_a_layer_of_one_head_is_the_head():
    hs = layer(5, heads=1)
    r = [compress.kv(hs[0], "int8", "int8")]
    a = certify_layer_output("l", hs, r, "2")
    b = certkit.compare(hs[0], r[0], norm="2")
    assert a.distance == b.distance and np.array_equal(a.rows.bound, b.rows.bound)


def test_a_layer_needs_projections_of_one_width():
    hs = layer(6, heads=2)
    hs[1] = hs[1].replace(projection=hs[1].projection[:, :3])
    with pytest.raises(certkit.head.HeadError, match="one width"):
        certify_layer_output("l", hs, hs, "2")
