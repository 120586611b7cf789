"""Lattice constructions (docs/mathematics.md §8.2-8.4, proofs/lattice-construction.md): the parametric rule
against the golden corpus, brute-force counts, independent float computations of the explicit
matrices, and the scale command."""
import csv
import itertools
import json
import math
import os
import re
import subprocess
import sys
from fractions import Fraction

import mpmath
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from certkit.choices import check
from certkit.kernel.numerics import lattice_count, theta_sum
from certkit.search import lattice as lat
from certkit.search.writer import certificate
from certkit.scaling.laws import fit_slope

import paths

GOLDEN = os.path.join(paths.GOLDEN, "lattice")
with open(os.path.join(GOLDEN, "expected.json")) as f:
    EXPECTED = json.load(f)
EPS = Fraction(35, 100)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_golden_lattice(name):
    v = check(os.path.join(GOLDEN, name))
    assert v.status == EXPECTED[name]["verdict"], v.line()
    assert EXPECTED[name]["contains"] in v.message, v.line()


def test_golden_lattice_lists_every_file():
    on_disk = {n for n in os.listdir(GOLDEN) if n.endswith(".json") and n != "expected.json"}
    assert on_disk == set(EXPECTED)


# ---------------------------------------------------------------- counts and constants
@settings(max_examples=60, deadline=None)
@given(k=st.integers(1, 4), m=st.integers(0, 60))
def test_lattice_count_equals_brute_force(k, m):
    c = math.isqrt(m)
    brute = sum(1 for u in itertools.product(range(-c, c + 1), repeat=k) if sum(t * t for t in u) <= m)
    assert lattice_count(k, m) == brute


def test_lattice_count_known_values():
    # Gauss circle N(r^2): r = 10 -> 317; sums of three squares <= 25 -> 515 (OEIS A000605 at 5)
    assert lattice_count(2, 100) == 317
    assert lattice_count(3, 25) == 515
    assert lattice_count(1, 10 ** 10) == 2 * 10 ** 5 + 1


@pytest.mark.parametrize("mu", [Fraction(1, 4), Fraction(1), Fraction(43, 8), Fraction(6)])
def test_theta_enclosure_contains_the_series(mu):
    mpmath.mp.dps = 40
    ref = mpmath.nsum(lambda n: mpmath.e ** (-mpmath.mpf(mu.numerator) / mu.denominator * n * n / 2), [-mpmath.inf, mpmath.inf])
    ball = theta_sum(mu)
    lo, hi = mpmath.mpf(ball.lower().str(30, radius=False)), mpmath.mpf(ball.upper().str(30, radius=False))
    assert lo <= ref * (1 + mpmath.mpf(10) ** -25) and ref * (1 - mpmath.mpf(10) ** -25) <= hi
    if mu == 1:                                   # docs/mathematics.md §8.2: theta = 2.50662828804...
        assert abs(float(ref) - 2.50662828804) < 1e-10


@pytest.mark.parametrize("d,L,want", [(2, 5, 0.9636), (3, 5, 0.9457), (4, 5, 0.9279), (6, 5, 0.8929),
                                      (2, 3, 0.559), (3, 3, 0.376), (4, 3, 0.215), (2, 7, 0.9989)])
def test_margin_matches_spec_table(d, L, want, tmp_path):
    beta = d * (L * 2 + L // 2) ** 2
    v = check(lat.ball_certificate(str(tmp_path / "b.json"), d, beta, L, 2, Fraction(1, 100)))
    assert v.status == "VERIFIED", v.line()
    assert abs(v.details["certified_min_margin"] - want) < 6e-4


# ---------------------------------------------------------------- the mathematics, independently in floats
def _float_margin(d, beta, L, K, mode):
    """min_a margin of the ball instance computed directly: rows over T, cells by coordinates."""
    c = math.isqrt(beta)
    u = np.array([v for v in itertools.product(range(-c, c + 1), repeat=d) if sum(t * t for t in v) <= beta])
    a = np.array(list(itertools.product(range(-K, K + 1), repeat=d)))
    logw = -(u * u).sum(1) / 2.0 if mode == "weights" else np.log(np.ceil(np.exp((beta - (u * u).sum(1)) / 2.0)))
    logits = (L * a) @ u.T + logw
    P = np.exp(logits - logits.max(1, keepdims=True))
    P /= P.sum(1, keepdims=True)
    h = L // 2
    lo, hi = (-h, h) if L % 2 else (-h, h - 1)
    worst = 1.0
    for i, ai in enumerate(a):
        off = u - L * ai
        own = P[i, np.all((off >= lo) & (off <= hi), axis=1)].sum()
        worst = min(worst, 2 * own - 1)
    return worst


@settings(max_examples=12, deadline=None)
@given(d=st.integers(1, 2), L=st.integers(3, 6), K=st.integers(0, 2), extra=st.integers(0, 30))
def test_parametric_margin_is_a_lower_bound_of_the_true_margin(d, L, K, extra, tmp_path_factory):
    h = L // 2
    beta = d * (L * K + h) ** 2 + extra
    v = check(lat.ball_certificate(str(tmp_path_factory.mktemp("p") / "b.json"), d, beta, L, K, Fraction(1, 100)))
    true = _float_margin(d, beta, L, K, "weights")
    if v.status == "VERIFIED":
        assert v.details["certified_min_margin"] <= true + 1e-12
    else:   # only a margin that really is small can be rejected
        assert v.details == {"sha256": v.details["sha256"]} and true < 0.2


def test_tokens_margin_lower_bound_and_its_weakness_at_small_beta(tmp_path):
    # d = 2, beta = 72, L = 3, K = 1: true margin ~0.559 (own mass ~0.78) but the multiplicity bound gives ~0.277
    true = _float_margin(2, 72, 3, 1, "tokens")
    assert true > 0.5
    v = check(lat.ball_certificate(str(tmp_path / "t.json"), 2, 72, 3, 1, Fraction(1, 4), mode="tokens"))
    assert v.status == "VERIFIED" and 0.27 < v.details["certified_min_margin"] < true
    v = check(lat.ball_certificate(str(tmp_path / "t.json"), 2, 72, 3, 1, EPS, mode="tokens"))
    assert v.status == "REJECTED" and "margin" in v.message


def test_sphere_cross_energy_bound(tmp_path):
    for d, R2 in [(2, 400), (3, 100), (4, 25)]:
        mu = lat.sphere_mu(d, 0.35)
        h, _, _ = lat.materialise_sphere(d, mu, R2)
        Y, beta = h.queries, float(h.beta)
        D2 = ((Y[:, None, :] - Y[None, :, :]) ** 2).sum(-1)
        W = np.exp(-beta * D2 / 2)
        np.fill_diagonal(W, 0)
        v = check(lat.sphere_certificate(str(tmp_path / "s.json"), d, mu, R2, EPS))
        assert v.status == "VERIFIED"
        assert W.sum(1).max() <= v.details["cross_energy_upper"]
        assert v.details["messages"] == len(Y)


# ---------------------------------------------------------------- parametric vs explicit
@pytest.mark.parametrize("con,d,beta,L,mode,K", [("ball", 2, 400, 5, "weights", None), ("ball", 3, 400, 5, "weights", None),
                                                 ("ball", 1, 72, 5, "tokens", 1), ("interaction", 2, 256, 5, "weights", None)])
def test_parametric_and_explicit_agree(con, d, beta, L, mode, K, tmp_path):
    K = lat.max_half_width(d, beta, L) if K is None else K
    if con == "ball":
        pp = lat.ball_certificate(str(tmp_path / "p.json"), d, beta, L, K, EPS, mode=mode)
    else:
        pp = lat.interaction_certificate(str(tmp_path / "p.json"), d, beta, L, K, EPS)
    h, msg, cells = lat.materialise_ball(d, beta, L, K, mode)
    xp = certificate(str(tmp_path / "x.json"), "lower-decoding-margin", len(msg), EPS, h,
                     {"messages": (msg, "int"), "cells": (cells, "int")})
    vp, vx = check(pp), check(xp)
    assert vp.status == vx.status == "VERIFIED", (vp.line(), vx.line())
    assert vp.details["messages"] == vx.details["messages"] == (2 * K + 1) ** d
    assert vp.details["certified_min_margin"] <= vx.details["certified_min_margin"] + 1e-9
    if con == "interaction":
        sv = lat.visible_singular_values(h)
        assert h.d == d + 1 and np.sum(sv > 1e-9 * sv[0]) == d


def test_explicit_materialisation_reproduces_the_logits():
    d, beta, L, K = 2, 50, 3, 1
    h, msg, cells = lat.materialise_ball(d, beta, L, K, "weights")
    u = np.array([v for v in itertools.product(range(-7, 8), repeat=2) if v[0] ** 2 + v[1] ** 2 <= beta])
    a = np.array(list(itertools.product(range(-K, K + 1), repeat=2)))
    want = (L * a) @ u.T - (u * u).sum(1) / 2
    got = float(h.beta) * h.queries @ h.keys.T
    assert np.array_equal(np.sort(got, axis=1), np.sort(want, axis=1))
    # each cell holds (hi - lo + 1)^d = 9 keys and lies inside T
    assert all(np.sum(cells == i) == 9 for i in range(len(msg)))


def test_sphere_random_screening_verifies(tmp_path):
    h, msg, cells = lat.sphere_random(3, 400, 1500, 0.35, seed=1)
    v = check(certificate(str(tmp_path / "r.json"), "lower-decoding-margin", len(msg), EPS, h,
                          {"messages": (msg, "int"), "cells": (cells, "int")}))
    assert v.status == "VERIFIED" and len(msg) > 100


def test_headline_65_to_the_4(tmp_path):
    v = check(lat.ball_certificate(str(tmp_path / "h.json"), 4, 640 ** 2, 9, 32, EPS, mode="tokens"))
    assert v.status == "VERIFIED" and v.details["messages"] == 65 ** 4 == 17850625
    lo, hi = lat.log10_tokens(4, 640 ** 2)
    # docs/mathematics.md §8.2: log10(count) ~ beta/(2 ln 10) + 4 log10(theta) = 88945.11 -> an 88,946-digit number
    assert 88945.0 < lo <= hi < 88945.2 and math.floor(hi) + 1 == 88946


@settings(max_examples=40, deadline=None)
@given(d=st.integers(1, 6), L=st.integers(1, 12), beta=st.integers(1, 10 ** 9))
def test_max_half_width_is_the_largest(d, L, beta):
    K = lat.max_half_width(d, beta, L)
    h = L // 2
    if K is None:
        assert d * h * h > beta
    else:
        assert d * (L * K + h) ** 2 <= beta < d * (L * (K + 1) + h) ** 2


# ---------------------------------------------------------------- slopes and the CLI
def test_fit_slope_known_answer():
    x = np.geomspace(10, 1e4, 9)
    s = fit_slope(x, [7 * v ** 1.5 for v in x])
    assert abs(s["slope"] - 1.5) < 1e-12 and s["ci95"][0] <= 1.5 <= s["ci95"][1]
    rng = np.random.default_rng(0)
    s = fit_slope(x, [v ** 2 * math.exp(0.01 * rng.standard_normal()) for v in x])
    assert s["ci95"][0] < 2 < s["ci95"][1] and abs(s["slope"] - 2) < 0.05


def _scale(*args):
    return subprocess.run([sys.executable, "-m", "certkit", "scale", *args], capture_output=True, text=True)


def test_scale_cli_end_to_end_and_deterministic(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    r = _scale("--families", "ball,interaction", "--points", "4", "--out", str(a), "--no-plots", "--no-crosscheck")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stderr and "65^4 point: VERIFIED" in r.stdout
    with open(a / "slopes.csv") as f:
        sl = list(csv.DictReader(f))
    assert len(sl) == 8 and all(s["within_tolerance"] == "True" for s in sl)
    with open(a / "points.csv") as f:
        pts = list(csv.DictReader(f))
    assert len(pts) == 32 and all(p["verdict"] == "VERIFIED" for p in pts)
    for p in pts[:3]:      # every listed certificate re-verifies from disk
        assert check(str(a / p["certificate"])).status == "VERIFIED"
    r2 = _scale("--families", "ball,interaction", "--points", "4", "--out", str(b), "--no-plots", "--no-crosscheck")
    assert r2.returncode == 0
    for name in ("points.csv", "slopes.csv", "scaling.md"):
        assert (a / name).read_text().replace(str(a), "") == (b / name).read_text().replace(str(b), "")


def test_scale_crosscheck_and_plots(tmp_path):
    r = _scale("--families", "sphere", "--points", "3", "--out", str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "cross-check: 12/12" in r.stdout
    assert (tmp_path / "sphere.png").stat().st_size > 10000
    md = (tmp_path / "scaling.md").read_text()
    assert "| sphere | 2 |" in md and "65^4" in md


@pytest.mark.parametrize("args,msg", [(["--families", "torus"], "unknown family"), (["--eps", "2"], "(0, 1)"),
                                      (["--points", "2"], ">= 3"), (["--eps", "abc"], "--eps")])
def test_scale_bad_input_exits_64(args, msg, tmp_path):
    r = _scale(*args, "--out", str(tmp_path))
    assert r.returncode == 64 and msg in r.stderr and "Traceback" not in r.stderr, (r.returncode, r.stderr)


@pytest.mark.parametrize("args,msg", [(["--families", "torus"], "unknown family"), (["--eps", "2"], "(0, 1)"),
                                      (["--eps", "0"], "(0, 1)"), (["--eps=-1/4"], "(0, 1)"),
                                      (["--eps", "nan"], "--eps"), (["--points", "2"], ">= 3"),
                                      (["--eps", "abc"], "--eps"), (["--tolerance", "1"], "--tolerance")])
def test_scale_parse_raises_scale_error(args, msg):
    """run() raises (the CLI turns a UserError into exit 64) instead of printing and returning."""
    import argparse
    from certkit import errors
    from certkit.commands.scale import ScaleError, add_arguments, run
    p = argparse.ArgumentParser()
    add_arguments(p)
    with pytest.raises(ScaleError, match=re.escape(msg)) as e:
        run(p.parse_args(args + ["--out", "/nonexistent-never-created"]))
    assert isinstance(e.value, errors.UserError) and e.value.exit_code == errors.USAGE == 64


def test_scale_eps_is_read_exactly():
    import argparse
    from certkit.commands.scale import add_arguments, parse_options as parse
    p = argparse.ArgumentParser()
    add_arguments(p)
    assert parse(p.parse_args(["--eps", "0.35"]))[1] == Fraction(7, 20)
    assert parse(p.parse_args(["--eps", " 1/4 "]))[1] == Fraction(1, 4)
    assert parse(p.parse_args([]))[1] == Fraction(7, 20)


def test_show_prints_the_parametric_instance():
    r = subprocess.run([sys.executable, "-m", "certkit", "show", os.path.join(GOLDEN, "ball-65x4-tokens.json")],
                       capture_output=True, text=True)
    assert r.returncode == 0 and "construction=ball" in r.stdout and "half_width=32" in r.stdout
    assert "r_eps(A) >= 17850625" in r.stdout


def test_scale_out_that_is_a_file_exits_73(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("x")
    r = _scale("--families", "ball", "--points", "3", "--no-plots", "--no-crosscheck", "--out", str(f))
    assert r.returncode == 73 and "--out" in r.stderr and "Traceback" not in r.stderr, (r.returncode, r.stderr)
    assert f.read_text() == "x"
