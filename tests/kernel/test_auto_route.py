"""route auto (the verify default): the fast route, then the Arb route on the rows the fast one leaves open.
True claims a relative 2^-40 above the exact max row error verify; false ones as close below are
rejected by every route (the exact values come from an independent Arb reference)."""
import os
from fractions import Fraction

import numpy as np
import pytest

import certkit
from certkit.choices import check
from certkit.search import writer

from arb_reference import attention_rows, factor_row_errors, eps_near, truncated_svd
from paths import GOLDEN


def gaussian(rng):
    return rng.standard_normal((48, 8)), rng.standard_normal((48, 8)), Fraction(2)


def cancelling(rng):
    """|q|, |k| ~ 2^30 but q.k ~ 2^20: the fast route's Cauchy-Schwarz logit bound is ~0.03."""
    a, b = np.zeros(8), np.zeros(8)
    a[:2], b[:2] = (1, 1), (1, -1)
    Q = 2.0 ** 30 * a + rng.standard_normal((48, 8)) * 2.0 ** -10
    K = 2.0 ** 30 * b + rng.standard_normal((48, 8)) * 2.0 ** -10
    return Q, K, Fraction(1, 2 ** 20)


def claim_file(tmp_path, make, rel, seed=0):
    Q, K, beta = make(np.random.default_rng(seed))
    k = 30 if make is gaussian else 6                      # max row error 0.11 and 1.0e-5
    head = certkit.Head.from_arrays(Q, K, beta)
    U, V = truncated_svd(head.attention(), k)
    eps = eps_near(factor_row_errors(attention_rows(Q, K, beta), U, V), rel)
    path = os.path.join(tmp_path, f"{make.__name__}-{rel}.json")
    writer.certificate(path, "upper-factorization", k, eps, head, {"U": (U, "float"), "V": (V, "float")})
    return path


@pytest.mark.parametrize("make, rel", [(gaussian, 2.0 ** -40), (cancelling, 2.0 ** -20)])
def test_auto_rescues_a_true_claim_the_fast_route_rejects(tmp_path, make, rel):
    path = claim_file(tmp_path, make, rel)
    assert check(path, "fast").status == "REJECTED"        # the reason auto exists
    v = check(path, "auto")
    assert v.status == "VERIFIED" and v.details["route"] == "auto", v.line()
    assert "arb balls where fast is open" in v.message


@pytest.mark.parametrize("make, rel", [(gaussian, -(2.0 ** -40)), (cancelling, -(2.0 ** -20))])
def test_a_false_claim_just_below_the_truth_is_rejected_by_every_route(tmp_path, make, rel):
    path = claim_file(tmp_path, make, rel)
    for route in ("fast", "arb", "auto"):
        assert check(path, route).status == "REJECTED", route


def test_auto_takes_the_fast_route_when_it_verifies():
    v = check(os.path.join(GOLDEN, "valid", "gauss-n24-factor.json"), "auto")
    assert v.status == "VERIFIED" and v.details["route"] == "fast"


def test_auto_rescues_a_covering_claim(tmp_path):
    """upper-covering with eps a relative 2^-40 above max_i ||A_i - A_sigma(i)||_1 (Arb reference)."""
    import flint
    from arb_reference import bounds
    from certkit.search import basic
    Q, K, beta = gaussian(np.random.default_rng(1))
    head = certkit.Head.from_arrays(Q, K, beta)
    reps, sigma = basic.greedy_cover(head.attention(), 0.5)
    rows = attention_rows(Q, K, beta)
    with flint.ctx.workprec(256):
        errors = [sum((abs(a - b) for a, b in zip(rows[i], rows[s])), flint.arb(0)) for i, s in enumerate(sigma)]
    assert 0 < max(bounds(e)[1] for e in errors) < 1
    path = os.path.join(tmp_path, "cover.json")
    for rel, want in ((2.0 ** -40, "VERIFIED"), (-(2.0 ** -40), "REJECTED")):
        writer.certificate(path, "upper-covering", len(reps), eps_near(errors, rel), head,
                           {"representatives": (reps, "int"), "assignment": (sigma, "int")})
        assert (check(path, "fast").status, check(path, "auto").status) == ("REJECTED", want), rel


def test_cli_and_api_default_to_auto(tmp_path):
    import subprocess
    import sys
    path = claim_file(tmp_path, gaussian, 2.0 ** -40)
    assert certkit.verify(path).status == "VERIFIED"
    assert certkit.verify(path, route="fast").status == "REJECTED"
    run = lambda *a: subprocess.run([sys.executable, "-m", "certkit", "verify", *a, path], capture_output=True,
                                    text=True, timeout=300)
    assert run().returncode == 0 and run("--route", "fast").returncode == 1
    assert "arb balls where fast is open" in run().stdout


def test_one_default_route_everywhere():
    """The kernel states the default route once; check, batch, the API and the CLI all take it."""
    import inspect
    from certkit import api, batch, certificate
    from certkit.cli import build_parser
    from certkit.kernel import DEFAULT_ROUTE
    assert DEFAULT_ROUTE == "auto"
    for f in (check, batch.check_record, batch.check_verdict, batch.records, api.verify, certificate.Certificate.read):
        assert inspect.signature(f).parameters["route"].default == DEFAULT_ROUTE, f.__qualname__
    assert build_parser(["verify"]).parse_args(["verify", "x.json"]).route == DEFAULT_ROUTE
