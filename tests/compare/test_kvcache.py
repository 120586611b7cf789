"""KV-cache formats as engines store them (certkit.kvcache): the dequantised keys and values equal,
bit for bit, an independent decoding of llama.cpp's block bytes (the layouts of ggml's block_q8_0,
block_q4_0, ...: an fp16 scale, an fp16 minimum for the _1 formats, packed nibbles and high bits),
blocks run along the head dimension of one token, the fp8 formats equal torch's casts of the
scaled numbers, and int8 is an integer times a float32 scale per token."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from certkit import compress
from certkit.kvcache import FORMATS, FormatError, dequantised

gguf = pytest.importorskip("gguf")
from gguf.quants import quantize  # noqa: E402

BLOCKS = {"q8_0": 34, "q4_0": 18, "q4_1": 20, "q5_0": 22, "q5_1": 24}      # bytes per block of 32


def decode(raw, name):
    """The 32 numbers of each block of a llama.cpp row, from its bytes, in float32 as ggml computes them."""
    raw = np.asarray(raw, dtype=np.uint8).reshape(-1, BLOCKS[name])
    f16 = lambda a: a.copy().view(np.float16).astype(np.float32).reshape(-1, 1)   # noqa: E731
    d = f16(raw[:, 0:2])
    if name == "q8_0":
        return (d * raw[:, 2:].view(np.int8).astype(np.float32)).reshape(-1)
    m = f16(raw[:, 2:4]) if name.endswith("_1") else None
    at = 4 if m is not None else 2
    qh = None
    if name.startswith("q5"):
        qh = raw[:, at:at + 4].copy().view("<u4").astype(np.int64).reshape(-1, 1)
        at += 4
    qs = raw[:, at:at + 16].astype(np.int64)
    x = np.concatenate([qs & 0xF, qs >> 4], axis=1)                       # element j and j + 16
    if qh is not None:
        x |= ((qh >> np.arange(32)) & 1) << 4
    if m is None:
        return (d * (x - (16 if qh is not None else 8)).astype(np.float32)).reshape(-1)
    return (d * x.astype(np.float32) + m).reshape(-1)


@pytest.mark.parametrize("name", sorted(BLOCKS))
@given(seed=st.integers(0, 10 ** 6), tokens=st.integers(1, 5), blocks=st.integers(1, 4),
       scale=st.sampled_from([1e-3, 1.0, 30.0]))
@settings(max_examples=25, deadline=None)
def test_llama_cpp_formats_equal_a_decoding_of_their_bytes(name, seed, tokens, blocks, scale):
    x = np.random.default_rng(seed).standard_normal((tokens, 32 * blocks)) * scale
    got = dequantised(x, name)
    raw = quantize(x.astype(np.float32), getattr(gguf.GGMLQuantizationType, name.upper()))
    want = np.stack([decode(r, name) for r in raw]).astype(np.float64)
    assert got.dtype == np.float64 and np.array_equal(got, want)
    for t in range(tokens):                              # a token's numbers depend on that token only
        assert np.array_equal(dequantised(x[t:t + 1], name), got[t:t + 1])


def test_llama_cpp_formats_need_a_head_dimension_of_whole_blocks():
    with pytest.raises(FormatError, match="multiple of 32"):
        dequantised(np.ones((3, 48)), "q4_0")


@pytest.mark.parametrize("name", ["fp8_e4m3", "fp8_e5m2"])
def test_fp8_is_torchs_cast_of_the_scaled_float32_numbers_times_a_float32_scale(name):
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(2).standard_normal((7, 64)) * 5
    dtype = {"fp8_e4m3": torch.float8_e4m3fn, "fp8_e5m2": torch.float8_e5m2}[name]
    top = float(torch.finfo(dtype).max)
    s = float(np.float32(np.max(np.abs(x)) / top))
    q = torch.from_numpy(x.astype(np.float32) / np.float32(s)).to(dtype).to(torch.float64).numpy()
    assert np.array_equal(dequantised(x, name), q * s)
    if name == "fp8_e4m3":                                 # and certkit's own e4m3 rounding agrees
        assert np.array_equal(q, compress.fp8_e4m3((x.astype(np.float32) / np.float32(s)).astype(np.float64)))


def test_int8_per_token_is_an_integer_times_a_float32_scale_of_that_token():
    x = np.random.default_rng(3).standard_normal((6, 40)) * np.array([[1e-3], [1], [10], [100], [0.5], [2]])
    y = dequantised(x, "int8")
    for t in range(6):
        s = float(np.float32(np.max(np.abs(x[t])) / 127))
        q = y[t] / s
        assert np.array_equal(q, np.rint(q)) and np.max(np.abs(q)) <= 127
        assert np.all(np.abs(y[t] - x[t]) <= s / 2 * (1 + 1e-6))


def test_the_registry_names_every_format_once_with_its_storage():
    assert set(FORMATS) == {"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "fp8_e4m3", "fp8_e5m2", "int8"}
    assert [FORMATS[f].bits for f in ("q8_0", "q5_1", "q5_0", "q4_1", "q4_0")] == [8.5, 6.0, 5.5, 5.0, 4.5]
    with pytest.raises(FormatError, match="unknown KV format"):
        dequantised(np.ones((1, 32)), "q3_k")


def test_kv_methods_quantise_keys_and_values_apart_and_never_the_queries():
    from certkit.compress import MethodError, parse_methods
    from certkit.head import Head
    rng = np.random.default_rng(4)
    h = Head.from_arrays(rng.standard_normal((8, 32)), rng.standard_normal((8, 32)), beta="1/8",
                         values=rng.standard_normal((8, 64)))
    r = parse_methods("kv:k=q8_0,v=q4_0")[0].apply(h)
    assert np.array_equal(r.queries, h.queries)
    assert np.array_equal(r.keys, dequantised(h.keys, "q8_0")) and np.array_equal(r.values, dequantised(h.values, "q4_0"))
    only_k = parse_methods("kv:k=q4_0")[0].apply(h)
    assert np.array_equal(only_k.values, h.values) and only_k.provenance["compression"] == "kv:k=q4_0"
    assert [m.spec for m in parse_methods("kv:q8_0,q4_0")] == ["kv:q8_0", "kv:q4_0"]
    for bad, words in (("kv:", "name a KV format"), ("kv:q3_k", "unknown KV format"), ("kv:k=q8_0,k=q4_0", "once")):
        with pytest.raises(MethodError, match=words):
            parse_methods(bad)


def test_llama_cpp_keys_are_quantised_in_its_rotary_layout():
    """gguf dim 2i = HF dim i, 2i + 1 = HF dim i + d/2: a q4_0 block of a 64-dim key holds HF dims
    0..15 and 32..47.  Quantising in that layout is quantising the permuted key, mapped back."""
    from certkit.kvcache import rope_order
    x = np.random.default_rng(5).standard_normal((4, 64)) * np.linspace(0.1, 10, 64)    # dims of unequal size
    order = rope_order(64)
    assert list(order[:4]) == [0, 32, 1, 33] and sorted(order) == list(range(64))
    assert set(order[:32]) == set(range(16)) | set(range(32, 48))                      # the first block
    y = dequantised(x, "q4_0", "llama.cpp-rope")
    assert np.array_equal(y[:, order], dequantised(x[:, order], "q4_0"))
    assert not np.array_equal(y, dequantised(x, "q4_0"))                               # the layout matters
    assert np.array_equal(dequantised(x, "int8", "llama.cpp-rope"), dequantised(x, "int8"))   # per token: it does not
    from certkit.head import Head
    from certkit import compress
    h = Head.from_arrays(x, x, beta="1/8", values=x, provenance={"key_layout": "llama.cpp-rope"})
    r = compress.kv(h, "q4_0", "q4_0")
    assert np.array_equal(r.keys, y) and np.array_equal(r.values, dequantised(x, "q4_0"))   # values: HF layout
