"""Build the attention-output-distance golden corpus (format 1.3, proofs/attention-output-distance.md):
certificates of  max_i ||(A V W - A' V' W)_i|| <= eps  (norm inf or 2, absolute or relative) at the
eps that search/compare.py's certify_output_distance states, the same claims just below the truth,
and the malformed and unsupported uses of values, projections and the new quantities.

    .venv/bin/python tests/golden/output/build.py

Deterministic (the folder's *.json are rewritten); every file is checked here on both routes and a
case that does not come out as expected stops the build.  Every VERIFIED or REJECTED claim is also
judged by the independent mpmath oracle (tests/distance_oracle.py, 60 digits from the numerals): a
VERIFIED claim is true, a REJECTED one false."""
import copy
import glob
import json
import math
import os
import sys
from fractions import Fraction as F

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.dirname(TESTS), TESTS]

import numpy as np  # noqa: E402

import distance_oracle as oracle  # noqa: E402
from certkit import compress, streaming  # noqa: E402
from certkit.choices import check  # noqa: E402
from certkit.head import Head, RowMask  # noqa: E402
from certkit.numbers import decimal  # noqa: E402
from certkit.search.compare import certify_output  # noqa: E402

PRODUCER = "tests/golden/output/build.py"
EXPECTED = {}


def heads():
    """[(name, head, replacement, norm, relative)]: one VERIFIED certificate each (inline arrays)."""
    rng = np.random.default_rng(7)
    n, d, dv = 12, 32, 32
    Q, K, V = rng.standard_normal((n, d)) / 4, rng.standard_normal((n, d)) / 4, rng.standard_normal((n, dv))
    W = rng.standard_normal((dv, 6)) / 4
    causal = Head.from_arrays(Q, K, beta=1, mask=RowMask(0), values=V, name="causal-n12")
    projected = causal.replace(projection=W, name="causal-n12-proj")
    window = causal.replace(mask=RowMask(0, 4, 1), name="window-n12-sink")
    weighted = Head.from_arrays(Q, K, beta="1/2", weights=np.array([1, 2, 0, 1] * 3, dtype=float), values=V,
                                projection=W, name="encoder-n12-weights")
    encoder = Head.from_arrays(Q, K, beta=1, values=V, name="encoder-n12")
    shorter = Head.from_arrays(Q, K[4:], beta=1, values=V[4:], name="last-8-keys")     # a cache of 8 of the 12 keys
    second = Head.from_arrays(rng.standard_normal((n, d)) / 4, K, beta=1, mask=RowMask(0), values=V[::-1].copy(),
                              projection=rng.standard_normal((dv, 6)) / 4, name="causal-n12-second")
    kivi = lambda h: streaming.kivi(h, bits=2, group=4, residual=4)        # noqa: E731
    return [
        ("causal-kv-q4_0-inf", [(causal, compress.kv(causal, "q4_0", "q4_0"))], "inf", False),
        ("causal-proj-kv-q8_0-2", [(projected, compress.kv(projected, "q8_0", "q8_0"))], "2", False),
        ("causal-proj-kv-fp8-relative-inf", [(projected, compress.kv(projected, "fp8_e5m2", "fp8_e5m2"))], "inf", True),
        ("window-sink-evict-relative-2", [(window, compress.evict(window, sinks=1, window=2))], "2", True),
        ("encoder-weights-int8-relative-2", [(weighted, compress.kv(weighted, "int8", "int8"))], "2", True),
        ("encoder-shorter-replacement-inf", [(encoder, shorter)], "inf", False),
        ("causal-h2o-inf", [(causal, compress.evict(causal, sinks=1, window=2, heavy=2))], "inf", False),
        ("causal-proj-kivi-2bit-2", [(projected, kivi(projected))], "2", False),
        ("layer-two-heads-kivi-relative-inf", [(projected, kivi(projected)), (second, kivi(second))], "inf", True),
        ("layer-two-heads-q4_0-h2o-2", [(projected, compress.kv(projected, "q4_0", "q4_0")),
                                        (second, compress.evict(second, sinks=0, window=3, heavy=2))], "2", False),
    ]


def path_of(name):
    return os.path.join(HERE, f"{name}.json")


def load(name):
    with open(path_of(name)) as f:
        return json.load(f)


def expect(name, verdict, contains):
    """Check the file on both routes; a VERIFIED or REJECTED claim also by the oracle."""
    verdicts = [check(path_of(name), route) for route in ("fast", "arb")]
    for v in verdicts:
        assert v.status == verdict and contains in v.message, (name, v.line())
    doc = load(name)
    if verdict in ("VERIFIED", "REJECTED"):
        truth = oracle.output_truth(doc)
        false = oracle.fraction(truth) > F(doc["claim"]["eps"]) if truth != oracle.mpmath.inf else True
        assert false == (verdict == "REJECTED"), name
    EXPECTED[f"{name}.json"] = {"verdict": verdict, "contains": contains}


def mutate(src, name, edit, verdict, contains):
    doc = copy.deepcopy(load(src))
    edit(doc)
    with open(path_of(name), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    expect(name, verdict, contains)


def below_truth(doc):
    """A decimal eps (9 significant digits) about one part in a million below the truth."""
    t = oracle.fraction(oracle.output_truth(doc)) * (1 - F(1, 10 ** 6))
    scale = F(10) ** (8 - math.floor(math.log10(t)))
    return decimal(F(math.floor(t * scale)) / scale)


def build():
    for f in glob.glob(os.path.join(HERE, "*.json")):
        os.remove(f)
    for name, pairs, norm, relative in heads():
        claim, _, _, _, v, _ = certify_output(pairs, norm, relative, path=path_of(name), shared=False, provenance={
            "producer": PRODUCER, "method": pairs[0][1].provenance.get("compression", "")})
        assert v.status == "VERIFIED" and load(name)["version"] == "1.3", (name, v.line())
        expect(name, "VERIFIED", f" <= {claim}")
        eps = below_truth(load(name))
        mutate(name, f"{name}-eps-below-truth", lambda d: d["claim"].__setitem__("eps", eps), "REJECTED",
               "attention-output-distance/row-norm")
    src = "causal-proj-kv-q8_0-2"
    inst = lambda d: d["instance"]                          # noqa: E731
    rep = lambda d: d["instance"]["replacement"]           # noqa: E731

    def zero_output(d):                                     # every value 0: (A V W)_i = 0, no relative error
        inst(d)["values"] = [["0x0.0p+0"] * len(r) for r in inst(d)["values"]]
    mutate("causal-proj-kv-fp8-relative-inf", "relative-zero-output", zero_output, "REJECTED",
           "attention-output-distance/row-norm")
    for name, edit, contains in [
        ("version-1.2", lambda d: d.__setitem__("version", "1.2"),
         "$.version: kind attention-output-distance needs format 1.3, got 1.2"),
        ("values-missing", lambda d: inst(d).pop("values"), "$.instance.values: required key is missing"),
        ("replacement-values-missing", lambda d: rep(d).pop("values"),
         "$.instance.replacement.values: required key is missing"),
        ("values-one-row-short", lambda d: inst(d)["values"].pop(), "$.instance.values: shape 11×32 where 12×? is required"),
        ("replacement-values-other-dv", lambda d: [r.pop() for r in rep(d)["values"]],
         "$.instance.replacement.values: shape 12×31 where 12×32 is required"),
        ("projection-other-rows", lambda d: inst(d)["projection"].pop(),
         "$.instance.projection: shape 31×6 where 32×? is required"),
        ("projection-in-replacement", lambda d: rep(d).__setitem__("projection", inst(d)["projection"]),
         "$.instance.replacement.projection: unknown key"),
        ("replacement-other-n", lambda d: rep(d)["queries"].pop(),
         "$.instance.replacement: 11 queries x 12 keys where the head has 12 x 12"),
        ("quantity-l1-distance", lambda d: d["claim"].__setitem__("quantity", "max_row_l1_distance"),
         "$.claim.quantity: expected 'max_row_output_distance_inf' or"),
        ("quantity-norm-1", lambda d: d["claim"].__setitem__("quantity", "max_row_output_distance_1"),
         "$.claim.quantity: expected"),
        ("claim-with-bound", lambda d: d["claim"].__setitem__("bound", "1"), "$.claim.bound: unknown key"),
        ("eps-2-to-the-64", lambda d: d["claim"].__setitem__("eps", str(2 ** 64)), "$.claim.eps: eps must lie in"),
        ("values-too-large", lambda d: inst(d)["values"][0].__setitem__(0, "0x1p+65"),
         "$.instance: value or projection entries larger than 2^64"),
        ("witness-not-empty", lambda d: d["witness"].__setitem__("U", []), "$.witness.U: unknown key"),
        ("assumptions-distance", lambda d: d.__setitem__("assumptions", ["attention-distance"]),
         "$.assumptions: kind attention-output-distance relies on exactly ['attention-output-distance']"),
    ]:
        mutate(src, name, edit, "MALFORMED", contains)
    layer, kivi = "layer-two-heads-q4_0-h2o-2", "causal-proj-kivi-2bit-2"
    heads_of = lambda d: d["instance"]["heads"]            # noqa: E731
    for name, edit, contains in [
        ("layer-no-heads", lambda d: heads_of(d).clear(), "$.instance.heads: expected a list of 1 to 256 heads"),
        ("layer-head-without-projection", lambda d: heads_of(d)[1].pop("projection"),
         "$.instance.heads[1]: a layer's heads need projections W of one width, one n"),
        ("layer-projections-of-two-widths", lambda d: [r.pop() for r in heads_of(d)[1]["projection"]],
         "$.instance.heads[1]: a layer's heads need projections W of one width, one n"),
        ("layer-heads-and-a-head", lambda d: d["instance"].__setitem__("beta", "1"), "$.instance.beta: unknown key"),
    ]:
        mutate(layer, name, edit, "MALFORMED", contains)
    for name, edit, contains in [
        ("key-rows-one-short", lambda d: rep(d)["row_mask"]["from"].pop(),
         "$.instance.replacement.row_mask.from: shape"),
        ("key-rows-and-offset", lambda d: rep(d)["row_mask"].__setitem__("offset", "0"),
         "$.instance.replacement.row_mask.offset: unknown key"),
        ("key-rows-row-unseen", lambda d: rep(d)["row_mask"].__setitem__("until", ["0"] * len(rep(d)["row_mask"]["until"])),
         "$.instance.replacement.row_mask: query 0 sees no key"),
    ]:
        mutate(kivi, name, edit, "MALFORMED", contains)
    mutate(src, "version-1.4", lambda d: d.__setitem__("version", "1.4"), "UNSUPPORTED", "format version 1.4")
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(dict(sorted(EXPECTED.items())), f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    build()
    print(f"{len(EXPECTED)} files in {HERE}")
