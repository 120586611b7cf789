"""Attention distance (format 1.2, proofs/attention-distance.md): the golden distance corpus on both
routes, every claim in it judged by an independent mpmath oracle (tests/distance_oracle.py), the
1.2 schema, the writer's version discipline, and for random small heads and every method of
certkit.compress: a claim below the true distance is never VERIFIED, one 1e-6 above it is."""
import copy
import functools
import json
import os
import tempfile
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import distance_oracle as oracle
from certkit import compress
from certkit.head import Head, HeadError, RowMask
from certkit.choices import check
from certkit.numbers import numeral
from certkit.search import writer

import paths

ROOT = str(paths.ROOT)
GOLDEN = str(paths.GOLDEN)
DISTANCE = os.path.join(GOLDEN, "distance")
FORMAT = os.path.join(ROOT, "certkit", "format")


def load(path):
    with open(path) as f:
        return json.load(f)


EXPECTED = load(os.path.join(DISTANCE, "expected.json"))
KIND = {name: load(os.path.join(DISTANCE, name)).get("kind") for name in EXPECTED}


def golden(verdict, kind="attention-distance"):
    """Names of the golden distance files with this verdict and kind."""
    return sorted(n for n, e in EXPECTED.items() if e["verdict"] == verdict and KIND[n] == kind)


@functools.cache
def truth(name):
    return oracle.fraction(oracle.truth(os.path.join(DISTANCE, name)))


def test_expected_lists_every_file():
    on_disk = {f for f in os.listdir(DISTANCE) if f.endswith(".json") and f != "expected.json"}
    assert on_disk == set(EXPECTED)
    assert {e["verdict"] for e in EXPECTED.values()} == {"VERIFIED", "REJECTED", "MALFORMED", "UNSUPPORTED"}
    specs = {load(os.path.join(DISTANCE, n))["provenance"]["method"] for n in golden("VERIFIED")}
    assert {s.split(":")[0] for s in specs} == set(compress.METHODS) - {"kivi"}    # kivi: output level only
    for part in ("kv:", "quant:int8", "quant:int4", "quant:fp8", "of=logits", "evict:sinks=", "evict:keep=", "window:w=",
                 "topk:k="):
        assert any(part in s for s in specs), part


@pytest.mark.parametrize("route", ["fast", "arb"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_golden_distance(name, route):
    v = check(os.path.join(DISTANCE, name), route)
    assert v.status == EXPECTED[name]["verdict"], v.line()
    assert EXPECTED[name]["contains"] in v.message, v.line()
    if v.status == "VERIFIED" and name in golden("VERIFIED"):
        assert truth(name) <= Fraction(v.details["certified_max_row_distance"]), "the kernel's bound is below the truth"


@pytest.mark.parametrize("name", golden("VERIFIED") + golden("REJECTED"))
def test_the_oracle_agrees(name):
    """A VERIFIED claim is true; a REJECTED one is false (not rejected for enclosure slack alone)."""
    eps = oracle.number(load(os.path.join(DISTANCE, name))["claim"]["eps"])
    assert (truth(name) > eps) == (EXPECTED[name]["verdict"] == "REJECTED"), (float(truth(name)), float(eps))


# ---------------------------------------------------------------- schema
def schema(version):
    return load(os.path.join(FORMAT, f"certificate-{version}.schema.json"))


def test_schema_1_2_accepts_1_2_1_1_and_1_0_documents_and_1_1_refuses_a_distance():
    jsonschema = pytest.importorskip("jsonschema")
    s12, s11 = schema("1.2"), schema("1.1")
    jsonschema.Draft202012Validator.check_schema(s12)
    docs = [load(os.path.join(DISTANCE, n)) for n in golden("VERIFIED") + golden("VERIFIED", "upper-factorization")]
    assert {d["version"] for d in docs} == {"1.2"} and any("sinks" in d["instance"].get("row_mask", {}) for d in docs)
    masked = load(os.path.join(GOLDEN, "masks", "gauss-n32-causal-factor.json"))
    unmasked = load(os.path.join(ROOT, "data", "certificates", "gauss-n32-factor.json"))
    assert masked["version"] == "1.1" and unmasked["version"] == "1.0"
    for doc in docs + [masked, unmasked]:
        jsonschema.validate(doc, s12)
    for doc in docs:
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate(doc, s11)


@pytest.mark.parametrize("name", ["claim-with-bound.json", "claim-quantity-r-eps.json", "replacement-missing.json",
                                  "replacement-in-version-1.1.json", "sinks-in-version-1.1.json",
                                  "replacement-on-factorization.json", "witness-not-empty.json"])
def test_schema_1_2_refuses_the_structural_malformations(name):
    jsonschema = pytest.importorskip("jsonschema")
    assert EXPECTED[name]["verdict"] == "MALFORMED"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(load(os.path.join(DISTANCE, name)), schema("1.2"))


def test_schema_1_2_refuses_a_row_mask_in_version_1_0():
    jsonschema = pytest.importorskip("jsonschema")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(load(os.path.join(GOLDEN, "masks", "row-mask-in-version-1.0.json")), schema("1.2"))


def test_the_example_of_certificate_1_2_md_validates_verifies_and_is_true(tmp_path):
    jsonschema = pytest.importorskip("jsonschema")
    with open(os.path.join(FORMAT, "certificate-1.2.md"), encoding="utf-8") as f:
        block = f.read().split("```json\n", 1)[1].split("```", 1)[0]
    doc = json.loads(block)
    jsonschema.validate(doc, schema("1.2"))
    (tmp_path / "example.json").write_text(block)
    for route in ("fast", "arb"):
        assert check(str(tmp_path / "example.json"), route).status == "VERIFIED"
    assert oracle.fraction(oracle.truth(doc)) <= oracle.number(doc["claim"]["eps"])


def test_verify_json_of_a_distance_claim_with_eps_1_validates(tmp_path, capsys):
    jsonschema = pytest.importorskip("jsonschema")
    from certkit import cli
    h = Head.from_arrays(np.eye(3), np.eye(3), beta=2)
    path = writer.certificate(str(tmp_path / "d.json"), "attention-distance", 0, 1, h, {},
                              replacement=compress.quantize(h, "int4"))
    assert cli.main(["verify", "--json", path]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out[0]["kind"], out[0]["relation"], out[0]["bound"], out[0]["eps"]) == ("attention-distance", "<=", 0, "1")
    jsonschema.validate(out, load(os.path.join(FORMAT, "verify-output.schema.json")))


# ---------------------------------------------------------------- the writer's version discipline
def test_writer_writes_1_2_only_for_sinks_or_a_replacement(tmp_path):
    h = Head.from_arrays(np.eye(3), np.eye(3), beta=1)
    heads = [(h, "1.0"), (h.replace(mask=RowMask(0)), "1.1"), (h.replace(mask=RowMask(0, 1, 1)), "1.2")]
    assert [writer.version_of("upper-factorization", x) for x, _ in heads] == [v for _, v in heads]
    assert writer.version_of("attention-distance", h, h) == "1.2"    # a replacement, even of an unmasked head
    assert writer.version_of("attention-output-distance") == "1.3"   # the kind's own since
    for head, version in heads:
        p = writer.certificate(str(tmp_path / f"{version}.json"), "upper-factorization", 3, "1/2", head,
                               {"U": (head.attention(), "float"), "V": (np.eye(3), "float")})
        assert load(p)["version"] == version and check(p).status == "VERIFIED"
        p = writer.certificate(str(tmp_path / f"d{version}.json"), "attention-distance", 0, "1/2", head, {},
                               replacement=head)
        assert load(p)["version"] == "1.2" and check(p).status == "VERIFIED"


# ---------------------------------------------------------------- every method, claims at the truth
def methods(head, rng):
    """One setting of every method of certkit.compress, parameters drawn from rng, in its spelling."""
    n, N, d = head.n, head.N, head.d
    keep = np.flatnonzero(rng.random(N) < 0.6)
    keep = keep if keep.size else np.array([int(rng.integers(N))])
    spelled = ["quant:int8,int4,fp8", "kv:int8,fp8_e4m3,fp8_e5m2", f"lowrank:k={rng.integers(1, d + 1)}",
               f"lowrank:k={rng.integers(1, min(n, N, d) + 1)},of=logits",
               f"evict:sinks={rng.integers(0, 3)},window={rng.integers(1, 5)},heavy={rng.integers(0, 3)}",
               f"evict:keep={','.join(map(str, keep))}", f"window:w={rng.integers(1, N + 1)}",
               f"topk:k={rng.integers(1, N + 1)}"]
    found = compress.parse_methods(";".join(spelled))
    assert {m.family for m in found} == set(compress.METHODS) - {"kivi"}     # kivi: output level (test_streaming)
    return found


def claim_at(doc, eps, path):
    d = copy.deepcopy(doc)
    d["claim"]["eps"] = numeral(eps)
    with open(path, "w") as f:
        json.dump(d, f)
    return check(path)


heads = st.builds(lambda n, N, d, seed, beta, causal: (n, N, d, seed, beta, causal),
                  st.integers(1, 10), st.integers(1, 10), st.integers(1, 4), st.integers(0, 10 ** 6),
                  st.fractions(0, 12, max_denominator=8), st.booleans())


@settings(max_examples=60, deadline=None)
@given(heads)
def test_no_claim_below_the_truth_is_verified_and_one_just_above_is(params):
    n, N, d, seed, beta, causal = params
    rng = np.random.default_rng(seed)
    head = Head.from_arrays(rng.standard_normal((n, d)), rng.standard_normal((N, d)), beta=beta,
                            mask=RowMask(0) if causal else None)
    with tempfile.TemporaryDirectory() as tmp:
        for m in methods(head, rng):
            try:
                rep = m.apply(head)
            except (HeadError, compress.MethodError):
                continue                     # a setting that leaves a row without keys, or evict on a head
                                             # without a mask: refused
            doc = load(writer.certificate(os.path.join(tmp, "d.json"), "attention-distance", 0, 1, head, {},
                                          replacement=rep))
            t = oracle.fraction(oracle.truth(doc))
            if t > 0:
                v = claim_at(doc, t * (1 - Fraction(1, 10 ** 9)), os.path.join(tmp, "below.json"))
                assert v.status == "REJECTED", (m.spec, float(t), v.line())
            if t + Fraction(1, 10 ** 6) < 2:
                v = claim_at(doc, t + Fraction(1, 10 ** 6), os.path.join(tmp, "above.json"))
                assert v.status == "VERIFIED", (m.spec, float(t), v.line())
