"""Route auto's precision: on the families reported as rejected by the old route auto
(tests/precision_families.py: the float softmax given back as its own approximation, twin rows,
beta 2^20 and 2^30 on nearly equal keys, column weights, plain Gaussian heads, a head of n N > 2^20
with a few loose rows), a true claim at eps = truth (1 + 1e-6) is VERIFIED on auto, and a false one
at truth (1 - 1e-6) is VERIFIED by no route.  The truth is the independent 256-bit Arb reference
(tests/arb_reference.py).  Before the per-row Arb re-check with rising precision, auto rejected
the self, twins and most tiny-error claims (benchmarks/results/auto_route.txt)."""
import os
from fractions import Fraction

import pytest
from hypothesis import given, settings, strategies as st

from certkit.choices import check
from certkit.search import writer

import precision_families
from arb_reference import eps_near

REL = Fraction(1, 10 ** 6)
HEADS = {name: (Q, K, beta, w, labels)
         for _, name, Q, K, beta, w, labels in precision_families.heads([16], seed=1)}


def judge(tmp_path, Q, K, beta, w, labels):
    """For every claim of the head: (label, auto's verdict at +1e-6, the statuses at -1e-6 on fast, arb, auto)."""
    head, found = precision_families.claims(Q, K, beta, w, labels)
    assert found
    out = []
    for label, kind, bound, wit, err in found:
        path = os.path.join(tmp_path, f"{label}.json")
        writer.certificate(path, kind, bound, eps_near(err, REL), head, wit)
        v = check(path, "auto")
        writer.certificate(path, kind, bound, eps_near(err, -REL), head, wit)
        out.append((label, v, [check(path, r).status for r in ("fast", "arb", "auto")]))
    return out


@pytest.mark.parametrize("name", sorted(HEADS))
def test_true_claims_verify_on_auto_and_false_ones_on_no_route(tmp_path, name):
    for label, v, below in judge(tmp_path, *HEADS[name]):
        assert v.status == "VERIFIED", (name, label, v.line())
        assert below == ["REJECTED"] * 3, (name, label, below)


def test_auto_rechecks_the_rows_the_fast_route_leaves_open_and_says_so(tmp_path):
    """The float softmax as its own approximation (true error ~1e-16): fast rejects, auto proves it on
    its Arb rows and names both enclosures (a claim fast proves stays "fast": tests/kernel/test_auto_route.py)."""
    name = next(n for n in HEADS if n.startswith("self-"))
    (label, v, _), = judge(tmp_path, *HEADS[name])
    assert v.details["route"] == "auto" and "arb balls where fast is open" in v.message
    assert v.details["certified_max_row_error"] < 1e-15
    path = os.path.join(tmp_path, f"{label}.json")
    head, ((_, kind, bound, wit, err),) = precision_families.claims(*HEADS[name])
    writer.certificate(path, kind, bound, eps_near(err, REL), head, wit)
    assert check(path, "fast").status == "REJECTED"


@settings(max_examples=12, deadline=None)
@given(seed=st.integers(0, 2 ** 20), n=st.sampled_from([8, 12, 20]),
       family=st.sampled_from(["self", "beta", "weights", "gaussian"]))
def test_property_families_at_one_millionth(tmp_path_factory, seed, n, family):
    tmp = tmp_path_factory.mktemp("p")
    for fam, name, Q, K, beta, w, labels in precision_families.heads([n], seed=seed):
        if fam != family:
            continue
        head, found = precision_families.claims(Q, K, beta, w, labels)
        for label, kind, bound, wit, err in found:
            path = os.path.join(tmp, "c.json")
            writer.certificate(path, kind, bound, eps_near(err, REL), head, wit)
            assert check(path, "auto").status == "VERIFIED", (name, label)
            writer.certificate(path, kind, bound, eps_near(err, -REL), head, wit)
            assert all(check(path, r).status == "REJECTED" for r in ("fast", "arb", "auto")), (name, label)


@pytest.mark.heavy
def test_a_head_above_2_20_entries_gets_the_arb_recheck_on_its_few_open_rows(tmp_path):
    """n = N = 1100 (n N > 2^20): 8 rows whose fast bound is > 1; the Arb re-check of those rows alone proves
    a claim at truth (1 + 1e-6) that the fast route rejects (the old whole-head re-check stopped at 2^20)."""
    (fam, name, Q, K, beta, w, labels), = [h for h in precision_families.heads([], seed=0, large=1100)]
    (label, v, below), = judge(tmp_path, Q, K, beta, w, labels)
    assert v.status == "VERIFIED" and v.details["route"] == "auto", v.line()
    assert below == ["REJECTED"] * 3
    assert check(os.path.join(tmp_path, f"{label}.json"), "fast").status == "REJECTED"
