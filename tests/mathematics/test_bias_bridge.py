"""The SVD bridge on the full logits beta Q K^T + B (docs/mathematics.md §6.4, proofs/bias-rank.md):
absorbing the bias keeps the attention, reduces to the bias-free numbers when the bias is only row
and column terms, and the certified rank lower bound never exceeds the exact rank and reaches it
on well-conditioned heads."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from certkit import geometry
from certkit.head import softmax_rows
from certkit.numbers import OverSqrt


def _head(seed, n=12, N=10, d=3, k=2, scale=1.0):
    rng = np.random.default_rng(seed)
    Q, K = rng.normal(size=(n, d)), rng.normal(size=(N, d))
    B = scale * rng.normal(size=(n, k)) @ rng.normal(size=(k, N))
    return Q, K, B


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10 ** 6), c=st.integers(1, 9), D=st.sampled_from([2, 3, 16, 64]),
       drop=st.booleans(), scale=st.sampled_from([0.1, 1.0, 10.0]))
def test_absorbed_bias_has_the_same_attention(seed, c, D, drop, scale):
    """softmax(beta Qa Ka^T + log w + col) = softmax(beta Q K^T + log w + B), padded keys included."""
    Q, K, B = _head(seed, scale=scale)
    B = B + np.arange(Q.shape[0])[:, None] * 0.3 + np.cos(np.arange(K.shape[0]))[None, :]   # row + column terms
    w = np.ones(K.shape[0])
    if drop:
        w[[1, 4]] = 0.0
    beta = OverSqrt(Fraction(c), Fraction(D))
    b = float(beta)
    Qa, Ka, off = geometry.absorb_bias(Q, K, beta, B, w)
    with np.errstate(divide="ignore"):
        logw = np.log(w)
    A = softmax_rows(b * Q @ K.T + logw + B)
    Aa = softmax_rows(b * Qa @ Ka.T + logw + off)
    assert np.max(np.abs(A - Aa)) < 1e-12
    assert np.all(Aa[:, w == 0] == 0)


@pytest.mark.parametrize("kind", ["zero", "row-and-column"])
def test_bias_of_row_and_column_terms_gives_the_bias_free_bridge(kind):
    """B_c = 0: no dimension is added and every bridge number is that of the bias-free head with
    the column term as weights (docs/mathematics.md §6.4)."""
    Q, K, _ = _head(3, n=20, N=20, d=4)
    n, N = Q.shape[0], K.shape[0]
    B = np.zeros((n, N)) if kind == "zero" else np.arange(n)[:, None] * 1.5 + np.sin(np.arange(N))[None, :]
    beta = Fraction(3, 2)
    Qa, Ka, off = geometry.absorb_bias(Q, K, beta, B)
    assert Qa.shape == Q.shape and Ka.shape == K.shape
    p0 = geometry.residual_profile(Q, K, beta, np.exp(off))       # the column term is a column weight
    g = geometry.profile_geometry(Qa, Ka, log_offset=off)
    p1 = geometry.residual_profile(Qa, Ka, beta, geo=g)
    assert [r.r for r in p0] == [r.r for r in p1]
    assert np.allclose([r.tau_width for r in p0], [r.tau_width for r in p1], rtol=0, atol=1e-12)
    assert np.allclose([r.actual for r in p0], [r.actual for r in p1], rtol=0, atol=1e-12)
    for eps in (0.15, 0.25, 0.35):
        assert geometry.r_svd_int(p0.rows, eps=eps) == geometry.r_svd_int(p1.rows, eps=eps)
    assert geometry.visible_dimension(Qa, Ka)["r_num"] == geometry.visible_dimension(Q, K)["r_num"]
    if kind == "zero":
        assert np.array_equal(Qa, Q) and np.array_equal(Ka, K) and not np.any(off)


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 10 ** 6), d=st.integers(1, 4), k=st.integers(0, 3), c=st.integers(1, 5),
       D=st.sampled_from([3, 5, 32]))
def test_certified_rank_lower_bound_is_sound_and_tight(seed, d, k, c, D):
    """rank J (beta Q K^T + B) J <= d + k exactly (B = F G^T of rank k); its float evaluation has
    full numerical rank at the rounding level, so a bound E that were too small would count those
    (the test fails); on these well-conditioned heads the bound reaches d + k."""
    n, N = 14, 12
    Q, K, B = _head(seed, n=n, N=N, d=d, k=max(k, 1))
    if k == 0:
        B = np.zeros((n, N))
    beta = OverSqrt(Fraction(c), Fraction(D))
    low, E = geometry.biased_rank_lower(Q, K, beta, B)
    assert 0 < E < 1e-9
    assert low <= d + k
    b = float(beta)
    M = b * Q @ K.T + B
    s = np.linalg.svd(M - M.mean(0) - M.mean(1, keepdims=True) + M.mean(), compute_uv=False)
    if s[d + k - 1] > 1e-6 * s[0]:
        assert low == d + k


def test_rank_lower_bound_counts_the_bias_rank_beside_qk():
    """A Toeplitz bias sin((i - j)/5) has centred rank 2 on top of Q K^T's d."""
    rng = np.random.default_rng(0)
    n, d = 64, 16
    Q, K = rng.normal(size=(n, d)), rng.normal(size=(n, d))
    i = np.arange(n)
    B = 2 * np.sin((i[:, None] - i[None, :]) / 5.0)
    beta = OverSqrt(Fraction(1), Fraction(d))
    low, _ = geometry.biased_rank_lower(Q, K, beta, B)
    assert low == d + 2
    Qa, Ka, _ = geometry.absorb_bias(Q, K, beta, B)
    assert Qa.shape[1] == d + 2 and geometry.visible_dimension(Qa, Ka)["r_num"] == d + 2
    with pytest.raises(ValueError):
        geometry.absorb_bias(Q, K, 0, B)


def test_lazy_profile_bisection_equals_the_scan():
    """LazyProfile.r_svd_int (bisection) is the first r of a full scan of its own rows, and its
    taus bound the float error like residual_profile's (actual <= tau_exact <= tau_width)."""
    Q, K, _ = _head(7, n=40, N=40, d=5)
    i = np.arange(40)
    B = np.where(np.abs(i[:, None] - i[None, :]) < 3, 1.5, 0.0)         # a banded (high-rank) bias
    beta = Fraction(1, 2)
    Qa, Ka, off = geometry.absorb_bias(Q, K, beta, B)
    lp = geometry.LazyProfile(Qa, Ka, beta, log_offset=off)
    rows = [lp.row(r) for r in range(lp.r_max + 1)]
    for r in rows:
        assert r.actual <= r.tau_exact + 1e-12 and r.tau_exact <= r.tau_width + 1e-12
    for tau in (0.05, 0.1, 0.3, 1.0):
        scan = next((r.r for r in rows if r.tau_width <= tau), None)
        fresh = geometry.LazyProfile(Qa, Ka, beta, log_offset=off)
        assert fresh.r_svd_int(tau) == scan
    assert rows[-1].tau_width == 0.0 or rows[-1].tau_width < 1e-9


def test_grid_bridge_reports_both_bridges():
    """calibrate's bridge(): a head without bias has identical plain and _bias fields; with a banded
    bias the full-logit rank and its certified lower bound exceed the Q, K-only ones."""
    from certkit.calibration import grid
    from certkit.head import Head
    Q, K, _ = _head(11, n=32, N=32, d=4)
    h = Head.from_arrays(Q, K, OverSqrt(Fraction(1), Fraction(4)), provenance={"length": 32})
    fields, curves, _ = grid.bridge(h, ["1/4"])
    f = fields["1/4"]
    for k in ("r_exact", "r_svd_int", "r_opt", "Gamma"):
        assert f[k + "_bias"] == f[k]
    assert f["r_exact_bias_certified_lower"] == f["r_exact_certified_lower"] == 4
    assert curves["tau_width_bias"] == curves["tau_width"] and 0 < f["sink_mass"] < 1
    i = np.arange(32)
    hb = h.replace(bias=np.where(np.abs(i[:, None] - i[None, :]) < 2, 2.0, 0.0))
    fb, cb, _ = grid.bridge(hb, ["1/4"])
    fb = fb["1/4"]
    assert fb["r_exact"] == 4 and fb["r_exact_bias"] > 4 and 4 < fb["r_exact_bias_certified_lower"] <= fb["r_exact_bias"]
    assert fb["r_opt_bias"] is None and len(cb["tau_width_bias_r"]) == len(cb["tau_width_bias"])


def test_calibrate_refreshes_an_old_bridge_and_keeps_the_certificates(tmp_path):
    """A group written by an older bridge (no _bias fields) is refreshed on the next run: the
    searches' fields are kept as they were, the bridge fields are added."""
    import json
    import os
    pytest.importorskip("transformers")
    from certkit import calibration as calibrate
    from certkit.calibration import configs, grid
    out = str(tmp_path / "cal")
    calibrate.calibrate(layers=[0], heads=[2], lengths=[64], multipliers=[1], eps=["1/4"], out=out)
    path = configs.group_path(out, 64, 0, 2, Fraction(1))
    with open(path) as f:
        g = json.load(f)
    new = g["rows"][0]
    old = {k: v for k, v in new.items() if not k.endswith("_bias") and k not in ("sink_mass", "bridge")}
    old["R_con"] = 999                          # a marker: a refresh must keep the searches' numbers
    g["rows"] = [old]
    g.pop("tau_width_bias")
    with open(path, "w") as f:
        json.dump(g, f)
    res = calibrate.calibrate(layers=[0], heads=[2], lengths=[64], multipliers=[1], eps=["1/4"], out=out)
    assert res.computed == 0 and res.skipped == 1
    (row,) = res.rows
    assert row["R_con"] == 999 and row["bridge"] == grid.BRIDGE
    assert {k: v for k, v in row.items() if k not in ("R_con", "seconds")} == \
        {k: v for k, v in new.items() if k not in ("R_con", "seconds")}
    assert os.path.exists(path)
