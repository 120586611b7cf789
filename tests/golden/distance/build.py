"""Build the attention-distance golden corpus (format 1.2, proofs/attention-distance.md): for every
method of certkit.compress a certificate  max_i ||A_i - A'_i||_1 <= eps  at the eps that
search/compare.py's certify_distance states, one-mutation variants with the verdict each must get,
and the malformed and unsupported uses of a replacement and of row keys.

    .venv/bin/python tests/golden/distance/build.py

Deterministic (the folder's *.json are rewritten); every file is checked here on both routes and a
case that does not come out as expected stops the build.  Every attention-distance claim is also
judged by an independent mpmath oracle (tests/distance_oracle.py, 60 digits from the certificate's
numerals): a VERIFIED claim is true and the kernel's certified bound lies above the truth; a
REJECTED claim is false, not rejected for enclosure slack alone."""
import copy
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
from certkit import compress, corpus, synthetic  # noqa: E402
from certkit.head import Head, RowMask  # noqa: E402
from certkit.choices import check  # noqa: E402
from certkit.numbers import OverSqrt, decimal  # noqa: E402
from certkit.search.compare import certify_distance  # noqa: E402

PRODUCER = "tests/golden/distance/build.py"
EXPECTED = {}


# ---------------------------------------------------------------- heads
def local(n, beta, angle=0.15, sink=False):
    """A causal head that looks at its recent keys: q_i = k_i = (cos(angle i), sin(angle i)) and a
    third coordinate 1 in every query; with sink, key 0 is (0, 0, 1), an attention sink every
    query gives the logit beta (its own key's)."""
    i = np.arange(n)
    Q = np.stack([np.cos(angle * i), np.sin(angle * i), np.ones(n)], axis=1)
    K = np.stack([np.cos(angle * i), np.sin(angle * i), np.zeros(n)], axis=1)
    if sink:
        K[0] = [0.0, 0.0, 1.0]
    name = f"local-n{n}" + ("-sink" if sink else "")
    return Head.from_arrays(Q, K, beta=beta, mask=RowMask(0), name=name, provenance={"family": "local"})


def lightest(head, count):
    """The `count` keys with the least total attention mass sum_i A_ij."""
    return np.sort(np.argsort(head.attention().sum(axis=0), kind="stable")[:count])


def cases():
    """[(name, head, replacement)]: one VERIFIED certificate each."""
    gauss = synthetic.head("gaussian", 40, 8, beta=F(2), seed=3)
    clustered = synthetic.head("clustered", 40, 8, beta=F(4), seed=1)
    peaked = synthetic.head("clustered", 40, 8, beta=F(8), seed=1)
    rect = synthetic.head("gaussian", 32, 8, beta=OverSqrt(F(8), F(8)), N=40, seed=5)    # n != N, beta = 8/sqrt(8)
    rng = np.random.default_rng(11)
    weights = rng.integers(0, 4, 40).astype(float)           # some keys dropped (0), some counted 2 or 3 times
    weighted = gauss.replace(weights=weights, bias=np.round(rng.standard_normal((40, 40)), 3), name="gauss-n40-wb")
    sink, plain = local(32, F(8), sink=True), local(32, F(8))
    keep = np.setdiff1d(np.arange(40), lightest(peaked, 8))
    return [
        ("gauss-n40-int8", gauss, compress.quantize(gauss, "int8")),
        ("gauss-n40-kv-int8-fp8", gauss, compress.kv(gauss, "int8", "fp8_e5m2")),
        ("gauss-n40-int4", gauss, compress.quantize(gauss, "int4")),
        ("gauss-n40-fp8", gauss, compress.quantize(gauss, "fp8")),
        ("clustered-n40-lowrank-keys", clustered, compress.lowrank(clustered, 3)),
        ("gauss-n32x40-sqrt-lowrank-logits", rect, compress.lowrank(rect, 4, "logits")),
        ("local-n32-sink-evict", sink, compress.evict(sink, sinks=1, window=6)),
        ("clustered-n40-keep", peaked, compress.keep(peaked, keep)),
        ("local-n32-window", plain, compress.window(plain, 6)),
        ("clustered-n40-topk", peaked, compress.topk(peaked, 8)),
        ("gauss-n40-weights-bias-int8", weighted, compress.quantize(weighted, "int8")),
    ]


# ---------------------------------------------------------------- files
def path_of(name):
    return os.path.join(HERE, f"{name}.json")


def load(name):
    with open(path_of(name)) as f:
        return json.load(f)


def expect(name, verdict, contains):
    """Check the file on both routes; a REJECTED or VERIFIED distance claim also by the oracle."""
    verdicts = [check(path_of(name), route) for route in ("fast", "arb")]
    for v in verdicts:
        assert v.status == verdict and contains in v.message, (name, v.line())
    doc = load(name)
    if doc["kind"] == "attention-distance" and verdict in ("VERIFIED", "REJECTED"):
        assert oracle.claim_is_false(doc) == (verdict == "REJECTED"), name
        truth = oracle.fraction(oracle.truth(doc))
        assert all(truth <= F(v.details["certified_max_row_distance"]) for v in verdicts if v.status == "VERIFIED")
    EXPECTED[f"{name}.json"] = {"verdict": verdict, "contains": contains}


def mutate(src, name, edit, verdict, contains):
    doc = copy.deepcopy(load(src))
    edit(doc)
    with open(path_of(name), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    expect(name, verdict, contains)


def below_truth(doc):
    """A decimal eps (9 significant digits) about one part in a million below the true distance."""
    t = oracle.fraction(oracle.truth(doc)) * (1 - F(1, 10 ** 6))
    scale = F(10) ** (8 - math.floor(math.log10(t)))
    return decimal(F(math.floor(t * scale)) / scale)


def evict_the_sink(doc):
    """The replacement's cache no longer keeps its attention sink (key 0): row_mask without sinks."""
    mask = doc["instance"]["replacement"]["row_mask"]
    assert mask.pop("sinks") == "1"


def drop_heaviest_kept_key(doc):
    """The kept key of the replacement with the largest total attention mass gets weight 0."""
    rep = doc["instance"]["replacement"]
    rows = oracle.attention(rep)
    j = max(range(len(rows[0])), key=lambda j: sum(r[j] for r in rows))
    rep["column_weights"][j] = "0x0.0p+0"


def rescale_channel(doc):
    """One channel (the one of the largest entry) of the replacement's keys doubled: another scale."""
    K = doc["instance"]["replacement"]["keys"]
    c = max(range(len(K[0])), key=lambda c: max(abs(float.fromhex(row[c])) for row in K))
    for row in K:
        row[c] = (2 * float.fromhex(row[c])).hex()


# ---------------------------------------------------------------- the corpus
def build_verified():
    made = {}
    for name, head, rep in cases():
        spec = rep.provenance["compression"]
        c = certify_distance(head, rep, path=path_of(name), provenance={"producer": PRODUCER, "method": spec})
        assert c.verdict.status == "VERIFIED", (name, c.verdict.line())
        assert load(name)["version"] == "1.2"
        expect(name, "VERIFIED", f"max_i ||A_i - A'_i||_1 <= {c.distance}")
        made[name] = c
    return made


def build_rejected():
    for src in ("gauss-n40-int8", "clustered-n40-lowrank-keys", "local-n32-sink-evict", "local-n32-window",
                "clustered-n40-topk", "gauss-n40-weights-bias-int8"):
        eps = below_truth(load(src))
        mutate(src, f"{src}-eps-below-truth", lambda d: d["claim"].__setitem__("eps", eps), "REJECTED",
               f"vs claimed eps = {F(eps)}")
    rejected = "attention-distance/row-distance"
    mutate("local-n32-sink-evict", "local-n32-sink-evict-sink-dropped", evict_the_sink, "REJECTED", rejected)
    mutate("clustered-n40-keep", "clustered-n40-keep-key-dropped", drop_heaviest_kept_key, "REJECTED", rejected)
    mutate("gauss-n40-int8", "gauss-n40-int8-scale-changed", rescale_channel, "REJECTED", rejected)
    mutate("gauss-n40-int8", "gauss-n40-int8-beta-changed",
           lambda d: d["instance"]["replacement"].__setitem__("beta", "33/16"), "REJECTED", rejected)


def build_sinks_elsewhere(made):
    """Attention sinks on other kinds: an upper-factorization of the evicted cache (1.2), and an
    upper-chain certificate given a row mask with sinks (UNSUPPORTED)."""
    evicted = made["local-n32-sink-evict"].replacement
    corpus.produce(path_of("local-n32-sink-evict-factor"), "upper-factorization", evicted, F(1, 4))
    assert load("local-n32-sink-evict-factor")["version"] == "1.2"
    expect("local-n32-sink-evict-factor", "VERIFIED", "r_eps(A) <= ")
    head = synthetic.head("key-only", 32, 8, beta=F(6), seed=0)
    corpus.produce(path_of("keyonly-n32-chain"), "upper-chain", head, F(1, 10))
    expect("keyonly-n32-chain", "VERIFIED", "r_eps(A) <= ")

    def add_sinks(d):
        d["version"] = "1.2"
        d["instance"]["row_mask"] = {"offset": "0", "window": "4", "sinks": "1"}
    mutate("keyonly-n32-chain", "keyonly-n32-chain-sinks", add_sinks, "UNSUPPORTED",
           "upper-chain on a row-masked instance")


def build_malformed():
    rep = lambda d: d["instance"]["replacement"]        # noqa: E731
    for name, src, edit, contains in [
        ("replacement-other-n", "gauss-n40-int8", lambda d: rep(d)["queries"].pop(),
         "$.instance.replacement: 39 queries x 40 keys where the head has 40 x 40"),
        ("replacement-other-N", "gauss-n40-int8", lambda d: rep(d)["keys"].pop(),
         "$.instance.replacement: 40 queries x 39 keys where the head has 40 x 40"),
        ("replacement-in-version-1.1", "gauss-n40-int8", lambda d: d.__setitem__("version", "1.1"),
         "$.version: kind attention-distance needs format 1.2, got 1.1"),
        ("replacement-missing", "gauss-n40-int8", lambda d: d["instance"].pop("replacement"),
         "$.instance.replacement: required key is missing"),
        ("claim-with-bound", "gauss-n40-int8", lambda d: d["claim"].__setitem__("bound", "1"),
         "$.claim.bound: unknown key"),
        ("claim-quantity-r-eps", "gauss-n40-int8", lambda d: d["claim"].__setitem__("quantity", "r_eps"),
         "$.claim.quantity: expected 'max_row_l1_distance', got 'r_eps'"),
        ("claim-eps-2", "gauss-n40-int8", lambda d: d["claim"].__setitem__("eps", "2"),
         "$.claim.eps: eps must lie in (0, 2), got 2"),
        ("witness-not-empty", "gauss-n40-int8", lambda d: d["witness"].__setitem__("U", [["0x1.0p+0"]]),
         "$.witness.U: unknown key"),
        ("sinks-negative", "local-n32-sink-evict", lambda d: rep(d)["row_mask"].__setitem__("sinks", "-1"),
         "$.instance.replacement.row_mask.sinks: integer -1 out of range"),
        ("sinks-row-without-key", "local-n32-sink-evict",
         lambda d: rep(d)["row_mask"].update(offset="-2", sinks="0"),
         "$.instance.replacement.row_mask: query 0 sees no key"),
        ("sinks-in-version-1.1", "local-n32-sink-evict-factor", lambda d: d.__setitem__("version", "1.1"),
         "$.instance.row_mask.sinks: unknown key"),
        ("replacement-on-factorization", "local-n32-sink-evict-factor",
         lambda d: d["instance"].__setitem__("replacement", copy.deepcopy(d["instance"])),
         "$.instance.replacement: unknown key"),
    ]:
        mutate(src, name, edit, "MALFORMED", contains)


def main():
    for f in os.listdir(HERE):
        if f.endswith(".json"):
            os.remove(os.path.join(HERE, f))
    made = build_verified()
    build_rejected()
    build_sinks_elsewhere(made)
    build_malformed()
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(EXPECTED, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(EXPECTED)} cases written to {HERE}")


if __name__ == "__main__":
    main()
