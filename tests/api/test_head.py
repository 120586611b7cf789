"""certkit.Head: one attention head A = row-softmax(beta Q K^T + log w + bias) built from numpy,
torch or lists, with an exact beta; its float attention, its kernel instance and its files.

References are hand computations, mpmath at 50 digits and the kernel's own reading of a written
certificate, never the code under test."""
import dataclasses
import math
import os
from decimal import Decimal
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st
from hypothesis.extra.numpy import arrays

from certkit.errors import InputError, UserError
from certkit.head import Head, HeadError, softmax_rows
from certkit.kernel.numerics import instance as read_instance, max_row_error, read_json
from certkit.numbers import BetaInterval, OverSqrt
from certkit.search import writer

# every entry is exact in float16, bfloat16 (8 significant bits), float32 and float64
Q_EXACT = [[1.0, -0.5, 0.0], [2.25, 0.375, -3.0]]
K_EXACT = [[0.5, 1.0, -1.5], [-2.0, 0.25, 4.0], [0.0, 0.0, 1.0], [-0.75, 3.5, 0.125]]


def _want():
    return np.array(Q_EXACT, dtype=np.float64), np.array(K_EXACT, dtype=np.float64)


# ---------------------------------------------------------------- inputs: numpy, torch, lists
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16])
def test_numpy_float_arrays_become_the_same_float64(dtype):
    Q, K = _want()
    h = Head.from_arrays(np.array(Q_EXACT, dtype=dtype), np.array(K_EXACT, dtype=dtype), beta=1)
    assert h.queries.dtype == h.keys.dtype == np.float64
    assert np.array_equal(h.queries, Q) and np.array_equal(h.keys, K)
    assert (h.n, h.N, h.d) == (2, 4, 3)


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.int8, np.uint8])
def test_numpy_integer_arrays_are_widened_exactly(dtype):
    Q = np.array([[1, 2], [3, 4]], dtype=dtype)
    K = np.array([[5, 6], [7, 8], [9, 10]], dtype=dtype)
    h = Head.from_arrays(Q, K, beta="1/64", weights=np.array([1, 0, 2], dtype=dtype))
    assert h.queries.dtype == h.keys.dtype == h.weights.dtype == np.float64
    assert h.queries.tolist() == [[1.0, 2.0], [3.0, 4.0]] and h.weights.tolist() == [1.0, 0.0, 2.0]


def test_large_integers_are_widened_to_the_nearest_float64():
    h = Head.from_arrays(np.array([[2 ** 53 + 1]], dtype=np.int64), [[1.0]], beta=1)
    assert h.queries[0, 0] == float(2 ** 53)          # round to nearest even, as float() does


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16", "float64"])
def test_torch_tensors_become_the_same_float64(dtype):
    torch = pytest.importorskip("torch")
    t = getattr(torch, dtype)
    Qt = torch.tensor(Q_EXACT, dtype=t, requires_grad=dtype != "float16")   # a graph is detached, not an error
    Kt = torch.tensor(K_EXACT, dtype=t)
    w = torch.tensor([1.0, 0.0, 2.5, 1.0], dtype=t)
    bias = torch.full((2, 4), -0.5, dtype=t)
    h = Head.from_arrays(Qt, Kt, beta="1/8", weights=w, bias=bias)
    Q, K = _want()
    for a in (h.queries, h.keys, h.weights, h.bias):
        assert isinstance(a, np.ndarray) and a.dtype == np.float64
    assert np.array_equal(h.queries, Q) and np.array_equal(h.keys, K)
    assert h.weights.tolist() == [1.0, 0.0, 2.5, 1.0] and np.all(h.bias == -0.5)


def test_torch_values_not_exact_in_the_dtype_are_widened_from_the_dtype():
    """A bfloat16 tensor holds bfloat16 numbers: Head stores exactly those, not the decimals typed."""
    torch = pytest.importorskip("torch")
    t = torch.tensor([[0.1, 1.0 / 3.0]], dtype=torch.bfloat16)
    h = Head.from_arrays(t, [[1.0, 0.0]], beta=1)
    assert h.queries.tolist() == [[float(v) for v in t[0].tolist()]]
    assert h.queries[0, 0] != 0.1                         # 0.1 is not a bfloat16 number


def test_nested_lists_and_all_inputs_give_one_head():
    a = Head.from_arrays(Q_EXACT, K_EXACT, beta=2)
    b = Head.from_arrays(np.array(Q_EXACT, np.float32), np.array(K_EXACT, np.float16), beta=Fraction(2))
    assert np.array_equal(a.queries, b.queries) and np.array_equal(a.keys, b.keys) and a.beta == b.beta
    assert np.array_equal(a.attention(), b.attention())


def test_head_owns_read_only_copies():
    Q, K = _want()
    h = Head.from_arrays(Q, K, beta=1)
    Q[0, 0] = 99.0
    assert h.queries[0, 0] == 1.0
    with pytest.raises(ValueError):
        h.queries[0, 0] = 5.0
    with pytest.raises(dataclasses.FrozenInstanceError):
        h.beta = Fraction(3)
    h2 = h.replace(beta="1/4")
    assert h2.beta == Fraction(1, 4) and h.beta == 1 and np.array_equal(h2.queries, h.queries)


# ---------------------------------------------------------------- exact beta
@pytest.mark.parametrize("beta", ["1/8", 0.125, Fraction(1, 8), "0.125", Decimal("0.125"), np.float64(0.125),
                                  "1.25e-1", 1 / 8])
def test_rational_beta_forms_are_exactly_one_eighth(beta):
    h = Head.from_arrays(Q_EXACT, K_EXACT, beta=beta)
    assert isinstance(h.beta, Fraction) and h.beta == Fraction(1, 8)
    assert h.beta_json() == "1/8" and h.beta_float == 0.125


@pytest.mark.parametrize("beta", [0.1, "0.1", np.float64(0.1), Decimal("0.1"), "1/10"])
def test_point_one_means_one_tenth(beta):
    h = Head.from_arrays(Q_EXACT, K_EXACT, beta=beta)
    assert h.beta == Fraction(1, 10) and h.beta != Fraction(0.1)      # not the binary64 nearest 0.1
    assert h.beta_json() == "1/10"
    inst = h.instance()
    assert inst.beta.lo == inst.beta.hi == Fraction(1, 10)


@pytest.mark.parametrize("beta", ["1/sqrt(64)", "1 / sqrt(64)", "1/√64", OverSqrt(1, 64), OverSqrt(Fraction(1), 64)])
def test_over_sqrt_beta_forms(beta):
    h = Head.from_arrays(Q_EXACT, K_EXACT, beta=beta)
    assert h.beta == OverSqrt(Fraction(1), Fraction(64))
    assert h.beta_json() == {"over_sqrt": ["1", "64"]} and h.beta_float == 0.125
    inst = h.instance()
    assert inst.beta.lo <= Fraction(1, 8) <= inst.beta.hi


def test_irrational_and_interval_beta_reach_the_kernel_exactly():
    h = Head.from_arrays(Q_EXACT, K_EXACT, beta="3/sqrt(32)")
    assert h.beta_json() == {"over_sqrt": ["3", "32"]}
    b = h.instance().beta
    exact = mpmath.mpf(3) / mpmath.sqrt(32)
    assert b.lo < b.hi and mpmath.mpf(b.lo.numerator) / b.lo.denominator <= exact <= \
        mpmath.mpf(b.hi.numerator) / b.hi.denominator
    assert abs(h.beta_float - 3 / math.sqrt(32)) < 1e-16
    hi = Head.from_arrays(Q_EXACT, K_EXACT, beta=BetaInterval("1/4", 0.5))
    assert hi.beta == BetaInterval(Fraction(1, 4), Fraction(1, 2))
    assert hi.beta_json() == {"interval": ["1/4", "1/2"]}
    assert (hi.instance().beta.lo, hi.instance().beta.hi) == (Fraction(1, 4), Fraction(1, 2))


@pytest.mark.parametrize("beta", ["-1", -0.5, "abc", "1/0", float("nan"), float("inf"), None, True, [1],
                                  "1/sqrt(0)", "1/sqrt(-4)", BetaInterval(2, 1)])
def test_bad_beta_is_a_user_error_naming_beta(beta):
    with pytest.raises(UserError, match="beta") as e:
        Head.from_arrays(Q_EXACT, K_EXACT, beta=beta)
    assert e.value.exit_code == 64


# ---------------------------------------------------------------- bad input
def _bad(field, match, **kw):
    args = dict(queries=Q_EXACT, keys=K_EXACT, beta=1)
    args.update(kw)
    with pytest.raises(HeadError, match=match) as e:
        Head.from_arrays(args.pop("queries"), args.pop("keys"), **args)
    assert field in str(e.value) and isinstance(e.value, UserError) and e.value.exit_code == 64
    return str(e.value)


def test_shape_mismatch_names_queries_and_keys():
    msg = _bad("keys", r"queries \(2, 3\) and keys \(4, 2\)", keys=[r[:2] for r in K_EXACT])
    assert "queries" in msg
    _bad("queries", "queries", queries=[1.0, 2.0, 3.0])                   # 1-D
    _bad("keys", "keys", keys=np.zeros((0, 3)))                            # empty
    _bad("queries", "queries", queries=np.zeros((2, 3, 1)))                # 3-D


def test_non_finite_entries_name_the_field_and_the_entry():
    Q = np.array(Q_EXACT)
    Q[1, 2] = np.nan
    assert "(1, 2)" in _bad("queries", "queries: non-finite", queries=Q)
    K = np.array(K_EXACT)
    K[3, 0] = -np.inf
    assert "(3, 0)" in _bad("keys", "keys: non-finite", keys=K)
    _bad("bias", "bias", bias=np.full((2, 4), np.nan))
    _bad("weights", "weights", weights=[1.0, np.inf, 1.0, 1.0])


def test_weights_must_be_non_negative_with_the_right_shape():
    _bad("weights", "weights", weights=[1.0, -1.0, 1.0, 1.0])
    _bad("weights", "weights", weights=[0.0, 0.0, 0.0, 0.0])               # every column dropped
    _bad("weights", r"weights: need shape \(4,\)", weights=[1.0, 1.0, 1.0])
    _bad("bias", r"bias: need finite entries and shape \(2, 4\)", bias=np.zeros((4, 2)))


@pytest.mark.parametrize("field", ["queries", "keys", "weights", "bias"])
@pytest.mark.parametrize("value", [[["a", "b", "c"]] * 2, np.array([["1", "2", "3"]] * 2), object(),
                                   np.array([[1 + 2j, 0, 0]] * 2), [[1.0, 2.0], [3.0]]],
                         ids=["strings", "string-array", "object", "complex", "ragged"])
def test_non_numeric_input_names_the_field(field, value):
    _bad(field, field, **{field: value})


def test_file_errors(tmp_path):
    with pytest.raises(InputError, match="no such file") as e:
        Head.from_file(str(tmp_path / "missing.npz"))
    assert e.value.exit_code == 66
    (tmp_path / "h.txt").write_text("Q K")
    with pytest.raises(HeadError, match=r"\.npz or \.safetensors"):
        Head.from_file(str(tmp_path / "h.txt"))
    np.savez(tmp_path / "nobeta.npz", Q=np.eye(2), K=np.eye(2))
    with pytest.raises(HeadError, match="beta"):
        Head.from_file(str(tmp_path / "nobeta.npz"))
    assert Head.from_file(str(tmp_path / "nobeta.npz"), beta="1/2").beta == Fraction(1, 2)
    np.savez(tmp_path / "noK.npz", Q=np.eye(2), beta=np.array(1.0))
    with pytest.raises(HeadError, match="'K'"):
        Head.from_file(str(tmp_path / "noK.npz"))
    np.savez(tmp_path / "obj.npz", Q=np.array([[object()]], dtype=object), K=np.eye(1), beta=np.array(1.0))
    with pytest.raises(HeadError, match="pickle"):
        Head.from_file(str(tmp_path / "obj.npz"))
    np.savez(tmp_path / "nan.npz", Q=np.array([[np.nan]]), K=np.eye(1), beta=np.array(1.0))
    with pytest.raises(HeadError, match="nan.npz: Q: non-finite"):
        Head.from_file(str(tmp_path / "nan.npz"))


# ---------------------------------------------------------------- the float attention
def test_attention_of_a_two_by_two_head_by_hand():
    """Q = I, K = diag(1, 2), beta = 1/2: logits [[1/2, 0], [0, 1]]."""
    h = Head.from_arrays([[1.0, 0.0], [0.0, 1.0]], [[1.0, 0.0], [0.0, 2.0]], beta="1/2")
    e = math.e
    want = np.array([[math.sqrt(e) / (math.sqrt(e) + 1), 1 / (math.sqrt(e) + 1)],
                     [1 / (1 + e), e / (1 + e)]])
    A = h.attention()
    assert A.shape == (2, 2) and np.allclose(A, want, rtol=1e-15, atol=0)
    assert np.allclose(A.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    assert np.allclose(h.logits(), [[0.5, 0.0], [0.0, 1.0]], rtol=0, atol=0)
    # column weights count a key w times (w = 0 drops it); a bias is added to the logits
    hw = h.replace(weights=[3.0, 0.0])
    assert hw.attention().tolist() == [[1.0, 0.0], [1.0, 0.0]]
    hw = h.replace(weights=[1.0, 3.0], bias=[[0.0, math.log(2)], [0.0, 0.0]])
    want = np.array([[math.sqrt(e) / (math.sqrt(e) + 6), 6 / (math.sqrt(e) + 6)],
                     [1 / (1 + 3 * e), 3 * e / (1 + 3 * e)]])
    assert np.allclose(hw.attention(), want, rtol=1e-14, atol=0)
    assert np.allclose(h.attention(beta=0), 0.5, rtol=0, atol=0)        # beta = 0: uniform rows


def test_softmax_rows_is_shift_invariant_and_drops_minus_infinity():
    L = np.array([[1000.0, 999.0, -np.inf], [-1000.0, -1001.0, -np.inf]])
    S = softmax_rows(L)
    p = 1 / (1 + math.exp(-1))
    assert np.allclose(S, [[p, 1 - p, 0.0], [p, 1 - p, 0.0]], rtol=1e-15, atol=0)
    assert S[0, 2] == S[1, 2] == 0.0


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 6), st.integers(1, 7), st.integers(1, 4), st.data())
def test_attention_rows_are_probability_vectors(n, N, d, data):
    Q = data.draw(arrays(np.float64, (n, d), elements=st.floats(-4, 4)))
    K = data.draw(arrays(np.float64, (N, d), elements=st.floats(-4, 4)))
    A = Head.from_arrays(Q, K, beta=data.draw(st.sampled_from(["0", "1/3", "5", "50"]))).attention()
    assert A.shape == (n, N) and np.all(A >= 0) and np.allclose(A.sum(axis=1), 1.0, rtol=0, atol=1e-14)


# ---------------------------------------------------------------- the kernel's instance
HEADS_FOR_INSTANCE = {
    "plain": dict(beta="2"),
    "over-sqrt": dict(beta="1/sqrt(8)"),
    "interval-weights-bias": dict(beta=BetaInterval("299/100", "301/100"), weights=[1.0, 0.0, 2.5, 1.0],
                                  bias=[[0.25, -1.0, 0.0, 2.0], [0.0, 0.5, -0.125, 1.0]]),
    "unit-weights": dict(beta="1/2", weights=[1.0, 1.0, 1.0, 1.0]),
}


@pytest.mark.parametrize("inline_limit", [4096, 1], ids=["inline", "sidecars"])
@pytest.mark.parametrize("name", sorted(HEADS_FOR_INSTANCE))
def test_instance_equals_the_kernels_reading_of_a_written_certificate(tmp_path, name, inline_limit):
    h = Head.from_arrays(Q_EXACT, K_EXACT, **HEADS_FOR_INSTANCE[name])
    path = writer.certificate(str(tmp_path / "c.json"), "upper-factorization", 1, Fraction(1, 2), h,
                              {"U": (np.zeros((h.n, 1)), "float"), "V": (np.zeros((h.N, 1)), "float")},
                              inline_limit=inline_limit)
    doc, _ = read_json(path)
    if inline_limit == 1:
        assert isinstance(doc["instance"]["queries"], dict)            # really read from a sidecar
    disk, mem = read_instance(doc, str(tmp_path)), h.instance()
    for f in ("Q", "K", "weights", "bias"):
        a, b = getattr(disk, f), getattr(mem, f)
        assert (a is None and b is None) or (a.dtype == b.dtype and np.array_equal(a, b)), f
    for f in ("lo", "hi", "mid", "rad", "text"):
        assert getattr(disk.beta, f) == getattr(mem.beta, f), f
    assert disk.beta.ball().lower() == mem.beta.ball().lower() and disk.beta.ball().upper() == mem.beta.ball().upper()
    assert (mem.n, mem.N) == (h.n, h.N)


def _mp_attention(Q, K, beta, w, bias):
    """Row-softmax at 50 digits for one exact beta (an mpmath number)."""
    mpmath.mp.dps = 50
    n, N = Q.shape[0], K.shape[0]
    out = np.zeros((n, N), dtype=object)
    for i in range(n):
        L = []
        for j in range(N):
            if w is not None and w[j] == 0:
                L.append(None)
                continue
            v = beta * mpmath.fsum(mpmath.mpf(float(a)) * mpmath.mpf(float(b)) for a, b in zip(Q[i], K[j]))
            if w is not None:
                v += mpmath.log(mpmath.mpf(float(w[j])))
            if bias is not None:
                v += mpmath.mpf(float(bias[i, j]))
            L.append(v)
        m = max(v for v in L if v is not None)
        e = [mpmath.mpf(0) if v is None else mpmath.exp(v - m) for v in L]
        Z = mpmath.fsum(e)
        out[i] = [x / Z for x in e]
    return out


BETAS = st.sampled_from([Fraction(0), Fraction(1, 3), Fraction(2), Fraction(9), OverSqrt(Fraction(3), Fraction(2)),
                         OverSqrt(Fraction(1), Fraction(7)), BetaInterval(Fraction(1), Fraction(11, 10))])


@st.composite
def small_heads(draw):
    n, N, d = draw(st.integers(1, 5)), draw(st.integers(1, 6)), draw(st.integers(1, 3))
    Q = draw(arrays(np.float64, (n, d), elements=st.floats(-3, 3, width=32)))
    K = draw(arrays(np.float64, (N, d), elements=st.floats(-3, 3, width=32)))
    w = draw(st.none() | arrays(np.float64, N, elements=st.sampled_from([0.0, 0.5, 1.0, 4.0])))
    if w is not None and not (w > 0).any():
        w[0] = 1.0
    bias = draw(st.none() | arrays(np.float64, (n, N), elements=st.floats(-5, 5, width=32)))
    return Head.from_arrays(Q, K, beta=draw(BETAS), weights=w, bias=bias)


@settings(max_examples=40, deadline=None)
@given(small_heads())
@example(Head.from_arrays(Q_EXACT, K_EXACT, beta=BetaInterval(1, Fraction(11, 10))))          # the set, not its middle
@example(Head.from_arrays(Q_EXACT, K_EXACT, beta=OverSqrt(3, 2), weights=[1.0, 0.0, 4.0, 0.5]))
@example(Head.from_arrays(Q_EXACT, K_EXACT, beta=Fraction(9), bias=[[0.0, 2.0, -1.0, 0.5], [1.0, 0.0, 0.0, -3.0]]))
def test_kernel_bound_of_the_float_attention_covers_the_true_error(h):
    """U = attention (float), V = I: the kernel's proven max_i ||A_i - B_i||_1 for B = the float
    attention is at least the true (50-digit) error at every beta of the head's set, i.e. the
    enclosure contains the float attention up to its bound; for a point beta it is also tiny."""
    A = h.attention()
    bound, row, _ = max_row_error(h.instance(), np.ascontiguousarray(A), np.eye(h.N), "fast")
    assert 0 <= row < h.n and math.isfinite(bound)
    b = h.beta
    if isinstance(b, BetaInterval):
        points = [mpmath.mpf(b.lo.numerator) / b.lo.denominator, mpmath.mpf(b.hi.numerator) / b.hi.denominator]
    elif isinstance(b, OverSqrt):
        points = [mpmath.mpf(b.c.numerator) / b.c.denominator / mpmath.sqrt(mpmath.mpf(b.D.numerator) / b.D.denominator)]
    else:
        points = [mpmath.mpf(b.numerator) / b.denominator]
    for beta in points:
        T = _mp_attention(h.queries, h.keys, beta, h.weights, h.bias)
        err = max(mpmath.fsum(abs(T[i, j] - mpmath.mpf(float(A[i, j]))) for j in range(h.N)) for i in range(h.n))
        assert err <= mpmath.mpf(bound), (float(err), bound)
    if not isinstance(b, BetaInterval):
        assert bound < 1e-12, bound


# ---------------------------------------------------------------- files
@pytest.mark.parametrize("ext", [".npz", ".safetensors"])
def test_save_and_from_file_round_trip(tmp_path, ext):
    rng = np.random.default_rng(3)
    Q, K = rng.standard_normal((5, 3)), rng.standard_normal((7, 3))
    w = np.array([1.0, 0.0, 2.0, 1.0, 1.0, 3.0, 0.5])
    bias = rng.standard_normal((5, 7))
    h = Head.from_arrays(Q, K, beta="1/8", weights=w, bias=bias, name="x")
    path = str(tmp_path / f"saved{ext}")
    assert h.save(path) == path
    g = Head.from_file(path)
    assert g.name == "saved" and g.beta == Fraction(1, 8) and g.provenance == {"file": f"saved{ext}"}
    for f in ("queries", "keys", "weights", "bias"):
        assert np.array_equal(getattr(g, f), getattr(h, f)), f
    assert np.array_equal(g.attention(), h.attention())
    plain = Head.from_arrays(Q, K, beta=3)
    plain.save(path)
    g = Head.from_file(path, name="renamed")
    assert g.weights is None and g.bias is None and g.beta == 3 and g.name == "renamed"


@pytest.mark.parametrize("ext", [".npz", ".safetensors"])
@pytest.mark.parametrize("beta", ["1/10", "1/sqrt(2)", BetaInterval(1, 2)])
def test_a_beta_that_is_not_a_binary64_is_not_stored(tmp_path, ext, beta):
    """Only a beta equal to a float64 is written: reading it back never changes it silently."""
    h = Head.from_arrays(Q_EXACT, K_EXACT, beta=beta)
    path = h.save(str(tmp_path / f"h{ext}"))
    with pytest.raises(HeadError, match="beta"):
        Head.from_file(path)
    assert Head.from_file(path, beta=beta).beta == h.beta


def test_save_refuses_other_extensions(tmp_path):
    with pytest.raises(HeadError, match=r"\.npz or \.safetensors"):
        Head.from_arrays(Q_EXACT, K_EXACT, beta=1).save(str(tmp_path / "h.pt"))
    assert not os.path.exists(tmp_path / "h.pt")
