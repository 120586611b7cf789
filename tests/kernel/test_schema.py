"""The JSON Schemas of certificate formats 1.0 to the checker's own (1.1 row masks, 1.2 attention sinks and
the kind attention-distance, 1.3 the kind attention-output-distance: each kind's `since` in KINDS) agree with the
strict reader (certkit/kernel/load.py); a document older than its kind is refused."""
import glob
import json
import os

import pytest
from jsonschema import Draft202012Validator

from certkit.kernel import CHECKER, KINDS, Malformed
from certkit.kernel.numerics import instance, kind_and_claim, parse_numeral

import paths

ROOT = str(paths.ROOT)
SCHEMA_PATH = os.path.join(ROOT, "certkit", "format", "certificate-{}.schema.json")
CERT_DIR = os.path.join(ROOT, "data", "certificates")
CERTS = sorted(glob.glob(os.path.join(CERT_DIR, "*.json")))


NEWEST = int(CHECKER.rsplit(".", 1)[1])                 # "certkit-kernel 1.3": the newest minor it reads
VERSIONS = [f"1.{m}" for m in range(NEWEST + 1)]
GOLDEN = os.path.join(ROOT, "tests", "golden")


@pytest.fixture(scope="module", params=VERSIONS)
def schema(request):
    with open(SCHEMA_PATH.format(request.param)) as f:
        return json.load(f)


def minor(schema):
    return int(schema["$id"].rsplit("-1.", 1)[1].split(".")[0])


@pytest.fixture(scope="module")
def validator(schema):
    return Draft202012Validator(schema)


def load(name):
    with open(os.path.join(CERT_DIR, name)) as f:
        return json.load(f)


def reader_verdict(doc):
    """None if the structural reader (header, claim, instance) accepts doc, else the Malformed."""
    try:
        kind_and_claim(doc)
        instance(doc, CERT_DIR)
    except Malformed as e:
        return e
    return None


def test_schema_is_valid_2020_12(schema):
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    Draft202012Validator.check_schema(schema)


def test_corpus_present():
    assert CERTS, "no certificates in data/certificates"


@pytest.mark.parametrize("path", CERTS, ids=os.path.basename)
def test_every_certificate_validates(validator, path):
    """Against every schema of its version or newer; an older schema refuses it (a 1.3 document with the
    lower rules' hints under the 1.0 and 1.2 schemas: its version, and the witness keys they do not know)."""
    with open(path) as f:
        doc = json.load(f)
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(doc)]
    if doc_minor(doc) > minor(validator.schema):
        assert any(e.startswith("['version']") for e in errors), errors
    else:
        assert not errors, errors


def doc_minor(doc):
    return int(doc["version"].split(".")[1])


def _unknown_top(d):
    d["comment"] = "hello"


def _unknown_claim(d):
    d["claim"]["note"] = "x"


def _unknown_instance(d):
    d["instance"]["temperature"] = "1"


def _unknown_witness(d):
    d["witness"]["extra"] = ["0"]


def _float_eps(d):
    d["claim"]["eps"] = 0.25


def _int_bound(d):
    d["claim"]["bound"] = 4


def _missing_claim(d):
    del d["claim"]


def _nan_numeral(d):
    d["instance"]["queries"][0][0] = "NaN"


def _inf_beta(d):
    d["instance"]["beta"] = "inf"


def _zero_denominator(d):
    d["claim"]["eps"] = "1/0"


def _float_in_array(d):
    d["instance"]["keys"][0][0] = 0.5


def _wrong_relation(d):
    d["claim"]["relation"] = ">="


def _wrong_assumptions(d):
    d["assumptions"] = ["factor-rank", "verified-svd"]


def _beta_both(d):
    d["instance"]["beta"] = {"interval": ["1", "2"], "over_sqrt": ["1", "4"]}


MUTATIONS_COVER = [_unknown_top, _unknown_claim, _unknown_instance, _float_eps, _int_bound,
                   _missing_claim, _nan_numeral, _inf_beta, _zero_denominator, _float_in_array,
                   _wrong_relation, _wrong_assumptions, _beta_both]


@pytest.mark.parametrize("mutate", MUTATIONS_COVER, ids=lambda f: f.__name__.strip("_"))
def test_structural_malformations_rejected(validator, mutate):
    doc = load("clustered-n48-cover.json")
    assert reader_verdict(doc) is None and validator.is_valid(doc)
    mutate(doc)
    assert isinstance(reader_verdict(doc), Malformed)
    assert not validator.is_valid(doc)


def test_unknown_witness_key_rejected(validator):
    doc = load("perm-n40-margin.json")
    _unknown_witness(doc)
    assert not validator.is_valid(doc)


def _sidecar_doc():
    doc = load("gauss-n256-d64-factor.json")
    assert reader_verdict(doc) is None
    return doc


@pytest.mark.parametrize("bad", [
    "3AC2A3F12068B3226ABD16AEDFB3B79A48E5A261602E06248F1B821726DD6079",   # uppercase
    "3ac2a3f12068b3226abd16aedfb3b79a48e5a261602e06248f1b821726dd607",    # 63 digits
    "3ac2a3f12068b3226abd16aedfb3b79a48e5a261602e06248f1b821726dd6079\n",  # trailing newline
    "zz" * 32,
])
def test_bad_sidecar_sha256_format_rejected(validator, bad):
    doc = _sidecar_doc()
    doc["instance"]["queries"]["sha256"] = bad
    e = reader_verdict(doc)
    assert isinstance(e, Malformed) and e.path == "$.instance.queries.sha256"
    assert not validator.is_valid(doc)


@pytest.mark.parametrize("field,value,path", [
    ("file", "/tmp/x.npy", "$.instance.queries.file"),
    ("file", "../x.npy", "$.instance.queries.file"),
    ("file", "sub/../x.npy", "$.instance.queries.file"),
    ("dtype", "float16", "$.instance.queries.dtype"),
    ("dtype", "int64", "$.instance.queries.dtype"),
    ("shape", ["256", 64], "$.instance.queries.shape"),
    ("shape", [256, -64], "$.instance.queries.shape"),
    ("tensor", "q", "$.instance.queries.tensor"),
    ("mode", "r", "$.instance.queries.mode"),
])
def test_bad_sidecar_fields_rejected(validator, field, value, path):
    doc = _sidecar_doc()
    doc["instance"]["queries"][field] = value
    e = reader_verdict(doc)
    assert isinstance(e, Malformed) and e.path == path, e
    assert not validator.is_valid(doc)


def _per_kind(schema):
    out = {}
    for branch in schema["allOf"]:
        if "kind" not in branch["if"]["properties"]:
            continue                                    # 1.2: the version gates of row masks, sinks, replacements
        kind = branch["if"]["properties"]["kind"]["const"]
        out[kind] = branch["then"]
    return out


def test_kinds_match_reader(schema):
    kinds = [k for k in KINDS if minor(schema) >= KINDS[k].since]
    assert schema["properties"]["kind"]["enum"] == kinds
    assert list(_per_kind(schema)) == kinds


def test_assumptions_and_relations_match_reader(schema):
    for kind, then in _per_kind(schema).items():
        rel, assumptions = KINDS[kind].relation, list(KINDS[kind].lemmas)
        a = then["properties"]["assumptions"]
        assert a["items"]["enum"] == assumptions, kind
        assert a["minItems"] == a["maxItems"] == len(assumptions) and a["uniqueItems"] is True
        assert then["properties"]["claim"]["properties"]["relation"]["const"] == rel


NUMERALS = [
    "0", "-0", "+17", "007", "3/4", "-3/40", "+1/0003", "0/1", "1/0", "1/00", "3/-4", "-3/+4",
    "1.5", ".5", "5.", "-.5e-3", "1e2000", "1e2001", "1E-2000", "1e-02000", "1e", "e5", ".", "-", "+",
    "0x1p0", "0x1.8p-1", "-0X.8P+3", "0x1.p5", "0x.p5", "0x1", "0x1p5000", "0x1p-5001", "0xgp0",
    "NaN", "inf", "Infinity", "1_000", " 1", "1 ", "1\n", "", "١", "0x1.fffffffffffffp+1023", "1/2/3",
    "1" * 2000, "1" * 2001, "0b101", "1e+5", "1.5e3.2",
]


@pytest.mark.parametrize("s", NUMERALS)
def test_numeral_pattern_matches_reader(schema, s):
    v = Draft202012Validator({"$ref": "#/$defs/numeral", "$defs": schema["$defs"]})
    try:
        parse_numeral(s, "$")
        ok = True
    except Malformed:
        ok = False
    assert v.is_valid(s) == ok, s


def test_spec_example_validates_and_verifies(validator, tmp_path):
    from certkit.choices import check
    md = open(os.path.join(ROOT, "certkit", "format", "certificate-1.0.md"), encoding="utf-8").read()
    block = md.split("```json\n", 1)[1].split("```", 1)[0]
    doc = json.loads(block)
    assert validator.is_valid(doc)
    p = tmp_path / "example.json"
    p.write_text(block)
    v = check(str(p))
    assert v.status == "VERIFIED", v.line()


def test_instance_is_constrained_per_kind(schema):
    """The matrix instance is required by every kind's branch except lower-lattice, whose instance
    is parametric; the top level only says "object"."""
    assert schema["properties"]["instance"]["type"] == "object"
    assert "$ref" not in schema["properties"]["instance"]
    for kind, then in _per_kind(schema).items():
        want = {"lower-lattice": "#/$defs/instance-lattice", "attention-distance": "#/$defs/instance-distance",
                "attention-output-distance": "#/$defs/instance-output"}.get(kind, "#/$defs/instance")
        assert then["properties"]["instance"] == {"$ref": want}, kind


# ---------------------------------------------------------------- lower-lattice (parametric)
def _lattice_writers():
    from fractions import Fraction
    from certkit.search import lattice as lat
    eps = Fraction(35, 100)
    return {
        "ball-weights": lambda p: lat.ball_certificate(p, 2, 400, 5, 2, eps),
        "ball-tokens": lambda p: lat.ball_certificate(p, 4, 409600, 9, 32, eps, mode="tokens"),
        "interaction": lambda p: lat.interaction_certificate(p, 2, 10 ** 4, 5, 13, eps),
        "sphere": lambda p: lat.sphere_certificate(p, 3, Fraction(9, 2), 10 ** 4, eps),
    }


LATTICE = list(_lattice_writers())


def _lattice_doc(tmp_path, name):
    p = str(tmp_path / f"{name}.json")
    _lattice_writers()[name](p)
    with open(p) as f:
        return json.load(f)


def _kernel_status(tmp_path, doc):
    from certkit.choices import check
    p = tmp_path / "mutated.json"
    p.write_text(json.dumps(doc))
    return check(str(p))


@pytest.mark.parametrize("name", LATTICE)
def test_lattice_certificates_validate(validator, tmp_path, name):
    from certkit.choices import check
    doc = _lattice_doc(tmp_path, name)
    assert doc["kind"] == "lower-lattice"
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(doc)]
    assert not errors, errors
    v = check(str(tmp_path / f"{name}.json"))
    assert v.status == "VERIFIED", v.line()


def _lattice_matrix_instance(d):
    d["instance"] = load("clustered-n48-cover.json")["instance"]


def _lattice_missing_half_width(d):
    del d["instance"]["half_width"]


def _lattice_unknown_instance_key(d):
    d["instance"]["temperature"] = "1"


def _lattice_unknown_witness_key(d):
    d["witness"]["extra"] = "0"


def _lattice_mode_on_interaction(d):
    d["instance"]["mode"] = "weights"


def _lattice_bad_mode(d):
    d["instance"]["mode"] = "counts"


def _lattice_json_number(d):
    d["instance"]["spacing"] = 5


def _lattice_cell_length(d):
    d["witness"]["cell"] = ["-2", "0", "2"]


def _lattice_cell_on_sphere(d):
    d["witness"] = {"cell": ["0", "0"]}


def _lattice_empty_witness_on_ball(d):
    d["witness"] = {}


def _lattice_wrong_assumptions(d):
    d["assumptions"] = ["decode-margin"]


def _lattice_wrong_relation(d):
    d["claim"]["relation"] = "<="


LATTICE_MUTATIONS = [  # (document, mutation): the reader says MALFORMED, the schema rejects
    ("ball-weights", _lattice_matrix_instance),
    ("sphere", _lattice_matrix_instance),
    ("ball-tokens", _lattice_missing_half_width),
    ("interaction", _lattice_missing_half_width),
    ("ball-weights", _lattice_unknown_instance_key),
    ("sphere", _lattice_unknown_instance_key),
    ("interaction", _lattice_unknown_witness_key),
    ("interaction", _lattice_mode_on_interaction),
    ("ball-weights", _lattice_bad_mode),
    ("ball-weights", _lattice_json_number),
    ("interaction", _lattice_cell_length),
    ("sphere", _lattice_cell_on_sphere),
    ("ball-tokens", _lattice_empty_witness_on_ball),
    ("sphere", _lattice_wrong_assumptions),
    ("ball-weights", _lattice_wrong_relation),
]


@pytest.mark.parametrize("name,mutate", LATTICE_MUTATIONS,
                         ids=[f"{n}-{m.__name__.strip('_')}" for n, m in LATTICE_MUTATIONS])
def test_lattice_malformations_rejected(validator, tmp_path, name, mutate):
    doc = _lattice_doc(tmp_path, name)
    assert validator.is_valid(doc)
    mutate(doc)
    assert not validator.is_valid(doc)
    v = _kernel_status(tmp_path, doc)
    assert v.status == "MALFORMED", v.line()


def test_lattice_unknown_construction_rejected(validator, tmp_path):
    """A construction the 1.0 checker does not read is UNSUPPORTED (like an unknown kind); the
    schema describes only ball, interaction and sphere."""
    doc = _lattice_doc(tmp_path, "ball-weights")
    doc["instance"]["construction"] = "torus"
    assert not validator.is_valid(doc)
    assert _kernel_status(tmp_path, doc).status == "UNSUPPORTED"


@pytest.mark.parametrize("name", ["clustered-n48-cover.json", "perm-n40-margin.json",
                                  "perm-n64-frobenius.json", "gauss-n32-factor.json",
                                  "gauss-n128-d1-chain.json"])
@pytest.mark.parametrize("lattice", ["ball-tokens", "sphere"])
def test_matrix_kind_with_parametric_instance_rejected(validator, tmp_path, name, lattice):
    doc = load(name)
    if doc_minor(doc) > minor(validator.schema):
        pytest.skip(f"{name} is format {doc['version']}, newer than this schema")
    assert validator.is_valid(doc) and reader_verdict(doc) is None
    doc["instance"] = _lattice_doc(tmp_path, lattice)["instance"]
    assert isinstance(reader_verdict(doc), Malformed)
    assert not validator.is_valid(doc)


def test_lattice_with_parametric_instance_and_matrix_witness_rejected(validator, tmp_path):
    doc = _lattice_doc(tmp_path, "interaction")
    doc["witness"] = load("perm-n40-margin.json")["witness"]
    assert not validator.is_valid(doc)
    assert _kernel_status(tmp_path, doc).status == "MALFORMED"


def test_safetensors_sidecar_is_well_formed_but_unsupported(validator):
    """Format 1.0 names .safetensors sidecars (with a tensor name): the schema accepts the golden
    case, the 1.0 checker answers UNSUPPORTED (it reads .npy sidecars only), never MALFORMED."""
    from certkit.choices import check
    path = os.path.join(ROOT, "tests", "golden", "unsupported", "sidecar-safetensors.json")
    with open(path) as f:
        doc = json.load(f)
    assert doc["witness"]["U"]["file"].endswith(".safetensors") and doc["witness"]["U"]["tensor"] == "U"
    errors = [f"{list(e.absolute_path)}: {e.message[:200]}" for e in validator.iter_errors(doc)]
    assert not errors, errors
    v = check(path)
    assert v.status == "UNSUPPORTED" and "safetensors sidecars" in v.message, v.line()


@pytest.mark.parametrize("name, key", [("perm-n40-inverse.json", "inverse"), ("perm-n64-frobenius.json", "svd_u"),
                                       ("perm-n64-frobenius.json", "svd_s")])
def test_a_13_lower_witness_without_its_hint_is_refused_by_schema_and_reader_alike(tmp_path, name, key):
    with open(SCHEMA_PATH.format("1.3")) as f:
        v = Draft202012Validator(json.load(f))
    doc = load(name)
    assert doc["version"] == "1.3" and v.is_valid(doc)
    del doc["witness"][key]
    assert not v.is_valid(doc)
    got = _kernel_status(tmp_path, doc)
    assert got.status == "MALFORMED" and f"$.witness.{key}" in got.message, got.line()


# ---------------------------------------------------------------- a kind is read from the version that added it
def _golden_verified():
    """{kind: (path, doc)}: the first VERIFIED golden certificate of each kind with no sidecar (it moves anywhere)."""
    out = {}
    for expected in sorted(glob.glob(os.path.join(GOLDEN, "**", "expected.json"), recursive=True)):
        with open(expected) as f:
            cases = json.load(f)
        for rel in sorted(r for r, want in cases.items() if want["verdict"] == "VERIFIED"):
            path = os.path.join(os.path.dirname(expected), *rel.split("/"))
            with open(path) as f:
                text = f.read()
            if '"sha256"' not in text:
                doc = json.loads(text)
                out.setdefault(doc["kind"], (path, doc))
    return out


VERIFIED_OF_KIND = _golden_verified()
TOO_OLD = [(k, m) for k in KINDS for m in range(KINDS[k].since)]


def test_every_kind_has_a_movable_golden_certificate():
    assert set(VERIFIED_OF_KIND) == set(KINDS), sorted(set(KINDS) - set(VERIFIED_OF_KIND))


@pytest.mark.parametrize("kind,old", TOO_OLD, ids=[f"{k}-1.{m}" for k, m in TOO_OLD])
def test_a_kind_older_than_its_format_is_refused(tmp_path, kind, old):
    """A golden VERIFIED certificate of the kind, its version set below the kind's since: MALFORMED $.version,
    never VERIFIED; the same file at its own version still verifies."""
    from certkit.choices import check
    path, doc = VERIFIED_OF_KIND[kind]
    assert doc_minor(doc) >= KINDS[kind].since and check(path).status == "VERIFIED"
    p = tmp_path / "old.json"
    p.write_text(json.dumps(dict(doc, version=f"1.{old}")))
    v = check(str(p))
    assert v.status == "MALFORMED", v.line()
    assert v.message == f"$.version: kind {kind} needs format 1.{KINDS[kind].since}, got 1.{old}", v.line()
