"""Output distances (kind attention-output-distance, format 1.3; proofs/attention-output-distance.md):

    max_i ||(A V W - A' V' W)_i|| <= eps   (row norm inf or 2; relative: over ||(A V W)_i||)

judged against an independent 60-digit oracle (tests/distance_oracle.py, reading the certificate's
numerals): on random heads, values, projections and replacements (other keys, other values, fewer
keys, masks, weights) the kernel's certified bound lies above the truth and within 1.001 of it, a
claim at truth (1 + 1e-6) is VERIFIED on the default route and a claim at truth (1 - 1e-9) never is.
"""
import json
from fractions import Fraction

import mpmath
import numpy as np
import pytest

import certkit
import distance_oracle as oracle
from certkit.choices import check
from certkit.head import Head, HeadError, RowMask
from certkit.search.compare import certify_output_distance
from certkit.search.writer import output_certificate

from paths import GOLDEN as GOLDEN_CORPORA, ROOT

CASES = 300


def case(seed):
    """A random (head, replacement) pair with values: sizes, temperature, masks, weights, projection,
    which of K and V change and how much, and a replacement with fewer keys, all drawn from seed."""
    rng = np.random.default_rng(seed)
    n, d, dv = int(rng.integers(1, 9)), int(rng.integers(1, 5)), int(rng.integers(1, 4))
    N = int(rng.integers(max(n, 1), 10))
    beta = ["1/4", "1", "3", "1/sqrt(8)"][seed % 4]
    Q, K, V = rng.standard_normal((n, d)), rng.standard_normal((N, d)), rng.standard_normal((N, dv))
    mask = [None, RowMask(N - n), RowMask(N - n, 3, 1)][seed % 3]
    weights = rng.integers(0, 3, N).astype(float) if seed % 5 == 0 else None
    if weights is not None:
        weights[0] = 1.0                                    # key 0 is visible to every row (mask or not), kept
    W = rng.standard_normal((dv, int(rng.integers(1, 5)))) if seed % 2 else None
    head = Head.from_arrays(Q, K, beta=beta, mask=mask, weights=weights, values=V, projection=W)
    scale = 10.0 ** -float(rng.integers(1, 5))
    K2 = K + scale * rng.standard_normal(K.shape) * (seed % 7 != 1)
    V2 = V + scale * rng.standard_normal(V.shape) * (seed % 7 != 2)
    if seed % 6 == 3 and N > n:                           # a replacement that keeps only the last n keys
        keep = slice(N - n, N)
        rep = Head.from_arrays(Q, K2[keep], beta=beta, values=V2[keep], mask=None if mask is None else RowMask(0))
    else:
        rep = Head.from_arrays(Q, K2, beta=beta, mask=mask, weights=weights, values=V2)
    return head, rep, ["inf", "2"][seed % 2 == 0 and seed % 3 != 0], seed % 4 == 1


def claim_at(tmp_path, head, rep, norm, relative, eps, name):
    path = str(tmp_path / f"{name}.json")
    output_certificate(path, [(head, rep)], eps, norm, relative)
    return path


def test_three_hundred_random_claims_against_the_oracle(tmp_path):
    checked = tight = 0
    for seed in range(CASES):
        head, rep, norm, relative = case(seed)
        c = certify_output_distance(head, rep, norm, relative)
        path = claim_at(tmp_path, head, rep, norm, relative, Fraction(1), "probe")
        with open(path) as f:
            t = oracle.output_truth(json.load(f))
        if not mpmath.isfinite(t) or t < mpmath.mpf(2) ** -600:
            continue                                     # nothing to bound (a zero output, identical heads)
        checked += 1
        bound = c.kernel_bound
        assert bound is not None and mpmath.mpf(bound) >= t, (seed, bound, t)
        if t > 1e-9:
            tight += 1
            assert mpmath.mpf(bound) <= t * (1 + 1e-3), (seed, bound, t)
        above, below = (Fraction(str(mpmath.nstr(t * f, 40))) for f in (1 + mpmath.mpf("1e-6"), 1 - mpmath.mpf("1e-9")))
        v = check(claim_at(tmp_path, head, rep, norm, relative, above, "above"))
        assert v.status == "VERIFIED", (seed, v.message)
        v = check(claim_at(tmp_path, head, rep, norm, relative, below, "below"))
        assert v.status == "REJECTED", (seed, v.message)
    assert checked >= 0.9 * CASES and tight >= 0.8 * CASES, (checked, tight)


@pytest.mark.parametrize("route", ["fast", "arb"])
def test_both_routes_bound_the_truth_from_above(tmp_path, route):
    for seed in range(12):
        head, rep, norm, relative = case(seed)
        path = claim_at(tmp_path, head, rep, norm, relative, Fraction(2) ** 60, f"r{seed}")
        v = check(path, route)
        with open(path) as f:
            t = oracle.output_truth(json.load(f))
        if not mpmath.isfinite(t):
            continue
        assert v.status == "VERIFIED" and v.details["certified_max_row_output_distance"] >= t, (seed, v.message)


def test_a_relative_claim_on_a_zero_output_row_is_not_verified(tmp_path):
    """A row whose output A V W is 0 has no relative error: no claim about it can be VERIFIED."""
    Q = np.array([[1.0, 0.0], [0.0, 1.0]])
    head = Head.from_arrays(Q, Q, beta=1, values=np.array([[1.0], [-1.0]]))
    zero = Head.from_arrays(np.zeros((2, 2)), Q, beta=1, values=np.array([[1.0], [-1.0]]))   # uniform rows: 0
    for h, r in ((zero, head), (zero, zero)):
        v = check(claim_at(tmp_path, h, r, "inf", True, Fraction(1000), "zero"))
        assert v.status == "REJECTED", v.message


def test_the_api_compares_outputs_of_a_kv_cache():
    rng = np.random.default_rng(0)
    h = Head.from_arrays(rng.standard_normal((40, 32)), rng.standard_normal((40, 32)), beta="1/8", mask=RowMask(0),
                         values=rng.standard_normal((40, 32)), projection=rng.standard_normal((32, 48)))
    c = certkit.compare(h, "kv:q4_0", norm="2", relative=True)
    assert isinstance(c, certkit.OutputComparison) and c.verdict.status == "VERIFIED"
    assert c.estimate <= float(c.distance) <= c.estimate * 1.001 + 1e-12
    assert c.certificate is not None and "/ ||(A V W)_i||_2 <=" in c.certificate.claim
    with pytest.raises(certkit.UserError, match="norm"):
        certkit.compare(h, "kv:q4_0", norm="1")
    with pytest.raises(HeadError, match="values"):
        certkit.compare(Head.from_arrays(h.queries, h.keys, beta="1/8"), "kv:q8_0", norm="inf")


# ---------------------------------------------------------------- the golden corpus (tests/golden/output/build.py)
GOLDEN = GOLDEN_CORPORA / "output"
EXPECTED = json.loads((GOLDEN / "expected.json").read_text())


@pytest.mark.parametrize("route", ["fast", "arb", "auto"])
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_golden_output_distance(name, route):
    v = check(str(GOLDEN / name), route)
    assert v.status == EXPECTED[name]["verdict"], v.line()
    assert EXPECTED[name]["contains"] in v.message, v.line()


def test_the_golden_corpus_covers_every_verdict_and_every_quantity():
    assert {e["verdict"] for e in EXPECTED.values()} == {"VERIFIED", "REJECTED", "MALFORMED", "UNSUPPORTED"}
    quantities = {json.loads((GOLDEN / n).read_text())["claim"]["quantity"] for n, e in EXPECTED.items()
                  if e["verdict"] == "VERIFIED"}
    assert quantities == {f"max_row_{r}output_distance_{p}" for r in ("", "relative_") for p in ("inf", "2")}


def test_the_format_1_3_schema_accepts_the_well_formed_files_and_refuses_the_structural_faults():
    from jsonschema import Draft202012Validator
    schema = json.loads((ROOT / "certkit" / "format" / "certificate-1.3.schema.json").read_text())
    v = Draft202012Validator(schema)
    for name, e in EXPECTED.items():
        doc = json.loads((GOLDEN / name).read_text())
        if e["verdict"] in ("VERIFIED", "REJECTED"):
            assert v.is_valid(doc), (name, next(v.iter_errors(doc)).message)
    for name in ("version-1.2.json", "values-missing.json", "replacement-values-missing.json",
                 "projection-in-replacement.json", "quantity-l1-distance.json", "quantity-norm-1.json",
                 "claim-with-bound.json", "witness-not-empty.json", "assumptions-distance.json", "version-1.4.json"):
        assert not v.is_valid(json.loads((GOLDEN / name).read_text())), name


def test_certkit_compare_norm_on_head_files_with_values(tmp_path):
    """The command line: --norm (and --relative) certify each head's output error on the values the
    head file holds; a head without values, or --relative without --norm, is a usage error."""
    import subprocess
    import sys
    rng = np.random.default_rng(1)
    h = Head.from_arrays(rng.standard_normal((24, 32)), rng.standard_normal((24, 32)), beta="1/8", mask=RowMask(0),
                         values=rng.standard_normal((24, 32)), projection=rng.standard_normal((32, 8)))
    path = h.save(str(tmp_path / "h.npz"))
    back = Head.from_file(path)
    assert np.array_equal(back.values, h.values) and np.array_equal(back.projection, h.projection)
    cli = lambda *a: subprocess.run([sys.executable, "-m", "certkit", "compare", *map(str, a)],   # noqa: E731
                                    capture_output=True, text=True, cwd=ROOT)
    r = cli(path, "--method", "kv:q8_0,int8", "--norm", "2", "--relative", "--eps", "1/10", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    doc = json.loads((tmp_path / "o" / "summary.json").read_text())
    assert [x["method"] for x in doc["rows"]] == ["kv:q8_0", "kv:int8"]
    assert all(x["verdict"] == "VERIFIED" and x["norm"] == "2" and x["relative"] for x in doc["rows"])
    assert "/ ||(A V W)_i||_2" in r.stdout and "--norm 2" in doc["meta"]["command"] and "--relative" in doc["meta"]["command"]
    v = subprocess.run([sys.executable, "-m", "certkit", "verify", str(tmp_path / "o")], capture_output=True, text=True)
    assert v.returncode == 0 and v.stdout.count("VERIFIED") == 2, v.stdout
    bad = cli("--synthetic", "gaussian:n=8,d=2", "--method", "kv:int8", "--norm", "inf", "--out", tmp_path / "b")
    assert bad.returncode == 64 and "needs heads with values" in bad.stderr
    bad = cli(path, "--method", "kv:int8", "--relative", "--out", tmp_path / "c")
    assert bad.returncode == 64 and "--relative needs --norm" in bad.stderr


def test_compare_relative_on_a_zero_output_leaves_the_verdict_to_the_kernel():
    """No finite relative bound (a row whose output is 0): the kernel itself REJECTS the largest claim the
    format allows; nothing outside the kernel makes up a verdict."""
    rng = np.random.default_rng(1)
    h = Head.from_arrays(rng.standard_normal((6, 4)), rng.standard_normal((6, 4)), beta=1, values=np.zeros((6, 3)))
    c = certkit.compare(h, "kv:int8", norm="inf", relative=True)
    assert c.distance is None and c.kernel_bound is None
    assert c.verdict.status == "REJECTED" and "attention-output-distance/row-norm" in c.verdict.message
