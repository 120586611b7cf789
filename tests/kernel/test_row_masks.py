"""Row masks (format 1.1, proofs/row-masks.md): the golden mask corpus on both routes, the
enclosure property on random masked heads, and the writer's version discipline."""
import json
import os

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from certkit.head import Head, HeadError, RowMask
from certkit.choices import check
from certkit.kernel.numerics import enclose_all, make_instance
from certkit.search import writer

import paths

MASKS = os.path.join(paths.GOLDEN, "masks")
ROOT = str(paths.ROOT)
with open(os.path.join(MASKS, "expected.json")) as f:
    EXPECTED = json.load(f)


def test_expected_lists_every_file():
    on_disk = {f for f in os.listdir(MASKS) if f.endswith(".json") and f != "expected.json"}
    assert on_disk == set(EXPECTED)
    assert {e["verdict"] for e in EXPECTED.values()} == {"VERIFIED", "REJECTED", "MALFORMED", "UNSUPPORTED"}


@pytest.mark.parametrize("route", ["fast", "arb"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_golden_masks(name, route):
    v = check(os.path.join(MASKS, name), route)
    assert v.status == EXPECTED[name]["verdict"], v.line()
    assert EXPECTED[name]["contains"] in v.message, v.line()


def test_schema_1_1_accepts_the_masks_and_1_0_does_not():
    jsonschema = pytest.importorskip("jsonschema")
    s10 = json.load(open(os.path.join(ROOT, "certkit", "format", "certificate-1.0.schema.json")))
    s11 = json.load(open(os.path.join(ROOT, "certkit", "format", "certificate-1.1.schema.json")))
    doc = json.load(open(os.path.join(MASKS, "gauss-n32-causal-factor.json")))
    assert doc["version"] == "1.1" and "row_mask" in doc["instance"]
    jsonschema.validate(doc, s11)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(doc, s10)
    unmasked = json.load(open(os.path.join(ROOT, "data", "certificates", "gauss-n32-factor.json")))
    jsonschema.validate(unmasked, s11)           # every 1.0 document is a valid 1.1 document


def test_writer_writes_1_1_only_with_a_mask(tmp_path):
    h = Head.from_arrays(np.eye(3), np.eye(3), beta=1)
    for head, version in ((h, "1.0"), (h.replace(mask=RowMask(0)), "1.1")):
        p = writer.certificate(str(tmp_path / f"{version}.json"), "upper-factorization", 3, "1/2", head,
                               {"U": (head.attention(), "float"), "V": (np.eye(3), "float")})
        doc = json.load(open(p))
        assert doc["version"] == version and ("row_mask" in doc["instance"]) == (version == "1.1")
        assert check(p).status == "VERIFIED"


masked_heads = st.builds(
    lambda n, N, d, seed, beta, o, w, pad, sinks: (n, N, d, seed, beta, o, w, pad, sinks),
    st.integers(1, 12), st.integers(1, 12), st.integers(1, 4), st.integers(0, 10 ** 6),
    st.sampled_from([0, 1, 3, 20]), st.integers(-2, 3), st.one_of(st.none(), st.integers(1, 5)), st.booleans(),
    st.sampled_from([0, 0, 1, 3]))


@settings(max_examples=80, deadline=None)
@given(masked_heads)
def test_enclosure_of_masked_heads(params):
    """m_ij = 0 exactly off the visible keys (row mask with window and sinks, padding), and
    the float attention lies within rho_i of m_i (both approximate the same A; the float one to
    ~1e-15); the kernel refuses a head exactly when Head does (some row sees no key)."""
    n, N, d, seed, beta, o, w, pad, sinks = params
    rng = np.random.default_rng(seed)
    weights = (rng.random(N) > 0.3).astype(float) if pad else None
    Q, K = rng.standard_normal((n, d)), rng.standard_normal((N, d))
    try:
        h = Head.from_arrays(Q, K, beta=beta, weights=weights, mask=RowMask(o, w, sinks))
    except HeadError:                           # some row sees no kept key: refused, as the kernel does
        from certkit.kernel import Malformed
        with pytest.raises(Malformed, match="sees no key|every column is dropped"):
            make_instance(str(beta), Q, K, weights, None, RowMask(o, w, sinks).json())
        return
    vis = RowMask(o, w, sinks).visible(np.arange(n), N) & (True if weights is None else weights[None, :] > 0)
    A = h.attention()
    assert np.all(A[~vis] == 0)
    for route in ("fast", "arb"):
        idx, m, rho = enclose_all(h.instance(), None, route)
        assert np.all(m[~vis[idx]] == 0)
        assert np.all(np.abs(m - A[idx]).sum(axis=1) <= rho + 1e-12)


def test_kernel_refuses_a_row_without_keys_like_the_head():
    from certkit.kernel import Malformed
    Q = np.zeros((3, 1))
    with pytest.raises(Malformed, match="query 0 sees no key"):
        make_instance("1", Q, Q, None, None, {"offset": "-1"})
    with pytest.raises(HeadError, match="query 0 sees no key"):
        Head.from_arrays(Q, Q, beta=1, mask=RowMask(-1))


def test_a_window_past_the_last_key_is_malformed_not_rejected():
    """Row 0 of a 1 x 1 head with offset 1 and window 1 would see only key 1, which does not exist:
    MALFORMED when read (it once got through the reader and was REJECTED for a NaN row)."""
    from certkit.kernel import Malformed
    with pytest.raises(Malformed, match="query 0 sees no key"):
        make_instance("1", np.zeros((1, 1)), np.zeros((1, 1)), None, None, {"offset": "1", "window": "1"})
