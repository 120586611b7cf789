"""certkit.symbolic (docs/mathematics.md §3.4, §7) and certkit.symbolic.tables (certkit tables): identities, constants, the two
evaluation routes, monotonicity of R_sym, and byte-identical tables."""
import decimal
import math
import random
from fractions import Fraction

import flint
import mpmath
import pytest
import sympy as sp
from hypothesis import given, strategies as st

from certkit.symbolic import tables
from certkit.kernel.numerics import arb_to_fraction_lower, arb_to_fraction_upper
from certkit.symbolic import (P, P_pos, chain_arb, chain_mpmath, evaluate_arb,
                              evaluate_mpmath, rogers, theta, theta_Astar)
from certkit.symbolic.arb_eval import LINES, certainly
from certkit.symbolic.chain import chain, logN_net, to_exact

PREC = 192


def _frac_of_mpf(v):
    sign, man, exp, _ = v._mpf_
    f = Fraction(int(man)) * Fraction(2) ** int(exp) if man else Fraction(0)
    return -f if sign else f


def _in_widened(ball, approx, rel=Fraction(1, 10 ** 25)):
    lo, hi = arb_to_fraction_lower(ball), arb_to_fraction_upper(ball)
    w = rel * max(abs(lo), abs(hi))
    v = _frac_of_mpf(approx) if isinstance(approx, mpmath.mpf) else Fraction(approx)
    return lo - w <= v <= hi + w


# ---------------------------------------------------------------- sympy identities

def test_positive_expansion_of_P_m():
    y = sp.Symbol("y")
    for m in range(1, 13):
        assert sp.expand((P(m, y) - P_pos(m, y)).doit()) == 0
        assert all(c > 0 for c in sp.Poly(P_pos(m, y).doit(), y).coeffs())
    # the symbolic-m form (a Sum) agrees too
    for m in (1, 2, 5, 8):
        ms = sp.Symbol("m", integer=True, positive=True)
        assert sp.expand(P_pos(ms, y).subs(ms, m).doit() - P(m, y)) == 0


def test_tanh_single_occurrence_form():
    s = sp.Symbol("s", real=True)
    diff = 2 * sp.tanh(s / 4) - (2 - 4 / (1 + sp.exp(s / 2)))
    assert sp.simplify(diff.rewrite(sp.exp)) == 0


def test_hemisphere_lift_preserves_inner_products():
    m = 3
    x = sp.symbols(f"x1:{m + 1}", real=True)
    k = sp.symbols(f"k1:{m + 1}", real=True)
    xh = list(x) + [sp.sqrt(1 - sum(t ** 2 for t in x))]
    kh = list(k) + [0]
    assert sp.simplify(sum(a * b for a, b in zip(xh, kh)) - sum(a * b for a, b in zip(x, k))) == 0


def _gibbs(keys, pibar, g, x):
    logits = [g * sum(a * b for a, b in zip(x, kj)) for kj in keys]
    Z = sum(p * mpmath.exp(t) for p, t in zip(pibar, logits))
    p = [w * mpmath.exp(t) / Z for w, t in zip(pibar, logits)]
    f = mpmath.log(Z) / g
    m = len(x)
    c = [sum(p[j] * keys[j][i] for j in range(len(keys))) for i in range(m)]
    return p, f, c


def _dot(a, b):
    return sum(s * t for s, t in zip(a, b))


def _unit(rng, m):
    v = [mpmath.mpf(rng.gauss(0, 1)) for _ in range(m)]
    n = mpmath.sqrt(_dot(v, v))
    return [t / n for t in v]


@given(st.integers(0, 2 ** 32 - 1), st.integers(1, 4), st.integers(1, 5))
def test_bregman_identity_and_lemma_3_1(seed, m, nkeys):
    rng = random.Random(seed)
    with mpmath.mp.workdps(50):
        keys = []
        for _ in range(nkeys):
            u = _unit(rng, m)
            rad = mpmath.mpf(rng.random())
            keys.append([rad * t for t in u])
        w = [mpmath.mpf(rng.random()) + mpmath.mpf(1) / 100 for _ in range(nkeys)]
        pibar = [t / sum(w) for t in w]
        g = mpmath.mpf(rng.uniform(0.1, 30))
        x, y = _unit(rng, m), _unit(rng, m)
        px, fx, cx = _gibbs(keys, pibar, g, x)
        py, fy, cy = _gibbs(keys, pibar, g, y)
        kl = sum(a * mpmath.log(a / b) for a, b in zip(py, px))
        tol = mpmath.mpf(10) ** -40
        assert abs(kl - g * (fx - fy - _dot([s - t for s, t in zip(x, y)], cy))) < tol
        kl0 = sum(a * mpmath.log(a / b) for a, b in zip(py, pibar))
        assert abs(kl0 - g * (_dot(y, cy) - fy)) < tol
        a = mpmath.mpf(2)
        lam = a + fy - _dot(y, cy)
        assert -tol <= lam <= a + tol
        ct = [lam * s + t for s, t in zip(y, cy)]
        lhs = a + fx - _dot(x, ct)
        rhs = kl / g + lam * (1 - _dot(x, y))
        assert abs(lhs - rhs) < tol


# ---------------------------------------------------------------- theta_m

def test_theta_A2_A3():
    with flint.ctx.workprec(PREC):
        t2, t3 = evaluate_arb(theta_Astar(2)), evaluate_arb(theta_Astar(3))
        assert t2 > flint.arb("1.2091") and t2 < flint.arb("1.2093")
        assert t3 > flint.arb("1.4634") and t3 < flint.arb("1.4636")
    assert sp.simplify(theta_Astar(2) - 2 * sp.pi / (3 * sp.sqrt(3))) == 0
    assert theta(1) == 1 and theta(2) == theta_Astar(2)


def test_rogers_beats_Astar_exactly_from_m_34():
    for m in range(3, 129):
        rog_smaller = certainly(sp.Lt(rogers(m), theta_Astar(m), evaluate=False), prec=PREC)
        assert rog_smaller is (m >= 34), m          # decided either way, never undecided
    with flint.ctx.workprec(PREC):
        # docs/mathematics.md §3.4: theta_65 <= 689.2 whereas theta(A_65^*) = 8.9e4 (both as printed)
        r65, a65 = evaluate_arb(rogers(65)), evaluate_arb(theta_Astar(65))
        assert r65 > 689.15 and r65 < 689.25
        assert a65 > 8.85e4 and a65 < 8.95e4


def test_rogers_and_loglog_only_from_m_3():
    with pytest.raises(ValueError):
        rogers(2)


# ---------------------------------------------------------------- docs/mathematics.md tables

SPEC_82 = {3: ("0.559", "0.376", "0.215", "<0"),
           5: ("0.9636", "0.9457", "0.9279", "0.8929"),
           7: ("0.9989", "0.9984", "0.9978", "0.9968"),
           9: ("0.99999", "0.99998", "0.99998", "0.99996")}


def _round_dec(q, places):
    d = decimal.Decimal(q.numerator) / decimal.Decimal(q.denominator)
    return str(d.quantize(decimal.Decimal(1).scaleb(-places), rounding=decimal.ROUND_HALF_EVEN))


def test_lattice_margins_match_spec_8_2():
    with flint.ctx.workprec(PREC):
        th = tables.theta_gauss_arb()
        # Poisson summation: theta = sqrt(2 pi) (1 + 2 sum_{k>=1} e^{-2 pi^2 k^2}); the k >= 4
        # terms are < e^{-315} and far below the radius of either ball
        pi = flint.arb.pi()
        pois = (2 * pi).sqrt() * (1 + 2 * sum((-2 * pi * pi * k * k).exp() for k in (1, 2, 3)))
        assert th.overlaps(pois) and not th.overlaps((2 * pi).sqrt())
        assert th > flint.arb("2.50662828804") and th < flint.arb("2.50662828805")
        for L, vals in SPEC_82.items():
            for d, printed in zip((2, 3, 4, 6), vals):
                x = evaluate_arb(tables.margin_expr(L, d), env={tables.THETA_GAUSS: th})
                if printed == "<0":
                    assert x < 0
                    continue
                places = len(printed.split(".")[1])
                lo, hi = arb_to_fraction_lower(x), arb_to_fraction_upper(x)
                assert _round_dec(lo, places) == _round_dec(hi, places) == printed, (L, d, x)


def test_theta_gauss_enclosure_is_tight_and_contains_jtheta():
    with flint.ctx.workprec(PREC):
        th = tables.theta_gauss_arb()
        assert th.rad() < flint.arb(2) ** -150
    with mpmath.mp.workdps(60):
        assert _in_widened(th, mpmath.jtheta(3, 0, mpmath.exp(mpmath.mpf(-1) / 2)), Fraction(0))


SPEC_74 = [(1, 5, "2.1"), (2, 5, "3.8"), (4, 20, "8.3"), (8, 20, "15.8"), (16, 20, "30.6"),
           (32, 20, "60.0"), (64, 20, "116.3")]


@pytest.mark.parametrize("r,G,val", SPEC_74)
def test_spec_7_4_typical_log10_S(r, G, val):
    res = chain_arb(G, Fraction(1, 5), 10 ** 300, 10 ** 300, r, 1, 1, 0, exact_W=True, prec=PREC)
    with flint.ctx.workprec(PREC):
        l10 = res["logS"] / flint.arb(10).log()
        assert l10 > float(val) - 0.1 and l10 < float(val) + 0.1
        # and it rounds to the printed digit
        assert _round_dec(arb_to_fraction_lower(l10), 1) == _round_dec(
            arb_to_fraction_upper(l10), 1) == val
        # below the F13 pack shape
        assert res["logS"] < res["shape"]


# ---------------------------------------------------------------- two routes

fr = st.fractions


def _q(x, den=10 ** 6):
    return Fraction(x).limit_denominator(den)


@st.composite
def chain_inputs(draw, rmax=12):
    """Random chain inputs, spread (log-uniform scales) so that every branch is reached:
    no certificate (tau >= eps), F6 (2 tanh(Gamma/2) <= eps'), eta < 1/2, 1/2 <= eta < 2
    (needs a < 2, i.e. pibar_min near 1, and eps' > 1/2)."""
    rng = random.Random(draw(st.integers(0, 2 ** 64 - 1)))
    kw = dict(
        beta=_q(10 ** rng.uniform(-1.5, 2.5)),
        eps=_q(rng.uniform(0.001, 0.999), 1000),
        n=rng.choice([7, 256, 4096, 10 ** 30]),
        N=rng.choice([1, 64, 10 ** 6, 10 ** 30]),
        r=rng.randint(0, rmax),
        rho_Q=_q(0 if rng.random() < 0.05 else 10 ** rng.uniform(-1.5, 0.3)),
        rho_K=_q(10 ** rng.uniform(-1.5, 0.3)),
        delta_Q=_q(rng.choice([0, 10 ** rng.uniform(-4, -0.5)])),
    )
    which = rng.choice(["omega", "sigma", "both", "exact"])
    if which in ("omega", "both"):
        kw["omega_K"] = _q(rng.uniform(0, 2))
    if which in ("sigma", "both"):
        kw["sigma_next"] = _q(10 ** rng.uniform(-3, 0))
    if which == "exact":
        kw["exact_W"] = True
    if rng.random() < 0.5:
        kw["pibar_min"] = _q(rng.choice([10 ** rng.uniform(-6, 0), 1 - 10 ** rng.uniform(-6, -1)]))
    return kw


@given(chain_inputs())
def test_arb_and_mpmath_routes_agree(kw):
    a = chain_arb(**kw, prec=PREC)
    b = chain_mpmath(**kw, dps=45)
    for k in LINES:
        assert (a[k] is None) == (b[k] is None), k
        if a[k] is not None:
            assert a[k].is_finite() or not a["certified"], k
            if a[k].is_finite():
                assert _in_widened(a[k], b[k]), (k, a[k], b[k])
    for k in ("F3", "F6"):
        if a[k] is not None:
            assert a[k] == b[k], k
    if a["F3"] is not None:
        assert a["certified"] == b["certified"]
    if a["certified"]:
        assert b["R_sym"] <= a["R_sym"] <= min(kw["n"], kw["N"])
        if a["logS"] is not None and a["shape"] is not None and not a["F6"]:
            assert not (a["logS"] > a["shape"])             # F13 bounds logS
            if kw.get("pibar_min") is None:                  # a = 2: past F6, eta < 1/2
                assert a["eta"] < 0.5


def test_walker_rejects_float_and_unknown_nodes():
    for bad in (sp.Float(0.5), sp.Rational(1, 3) + sp.Float("0.1"),
                sp.exp(sp.Float(1), evaluate=False), sp.Integer(2) ** sp.Float(0.5)):
        with pytest.raises(TypeError):
            evaluate_arb(bad, prec=64)
        with pytest.raises(TypeError):
            evaluate_mpmath(bad, 30)
    for bad in (sp.sin(1), sp.Symbol("x"), sp.oo, sp.I, sp.EulerGamma, sp.Integer(2) ** sp.pi):
        with pytest.raises(TypeError):
            evaluate_arb(bad, prec=64)
    with pytest.raises(TypeError):
        to_exact(sp.Float(0.25))
    with pytest.raises(TypeError):
        chain(sp.Float(1), Fraction(1, 5), 10, 10, 2, 1, 1, 0, exact_W=True)


def test_walker_whitelist_values():
    x = sp.Rational(7, 3)
    exprs = [sp.tanh(x), sp.Max(x, sp.sqrt(5), evaluate=False),
             sp.ceiling(sp.pi * 3, evaluate=False),
             sp.floor(sp.E * 10, evaluate=False), sp.gamma(x, evaluate=False),
             sp.binomial(x, 3, evaluate=False), x ** sp.Rational(2, 3), x ** -3]
    with flint.ctx.workprec(PREC):
        for e in exprs:
            assert _in_widened(evaluate_arb(e), evaluate_mpmath(e, 60), Fraction(1, 10 ** 55)), e
    assert evaluate_arb(sp.floor(sp.E * 10, evaluate=False), prec=PREC) == 27


def test_logN_net_branches():
    with flint.ctx.workprec(PREC):
        assert evaluate_arb(logN_net(5, 2)) == 0
        assert evaluate_arb(logN_net(5, 3)) == 0
        # eta = 1/2: packing branch only; P_3(4) = 5^3 - 3^3 = 98
        assert evaluate_arb(logN_net(3, sp.Rational(1, 2))).overlaps(flint.arb(98).log())
        # eta = 1 is neither >= 2 nor < 1/2
        assert evaluate_arb(logN_net(2, 1)).overlaps(flint.arb(8).log())   # P_2(2) = 9 - 1


# ---------------------------------------------------------------- monotonicity of R_sym

INCREASING = ("beta", "rho_Q", "rho_K", "delta_Q", "omega_K")


@given(chain_inputs(rmax=8), st.sampled_from(INCREASING + ("eps",)),
       fr(Fraction(1, 100), 3, max_denominator=100))
def test_R_sym_monotone(kw, name, factor):
    kw = dict(kw, n=10 ** 40, N=10 ** 40)           # no cap hides the comparison
    if name == "omega_K":
        kw.pop("exact_W", None)
        kw.setdefault("omega_K", Fraction(1, 2))
    if name == "delta_Q":
        kw.pop("exact_W", None)
        if "omega_K" not in kw and "sigma_next" not in kw:
            kw["omega_K"] = Fraction(1, 2)
    v = Fraction(kw[name]) if kw.get(name) is not None else Fraction(0)
    v2 = v * (1 + factor) + factor / 10                 # v2 > v
    if name == "eps":
        v2 = min(v2, Fraction(999, 1000))
        if v2 <= v:
            return
    lo = chain_arb(**dict(kw, **{name: v}), prec=PREC)
    hi = chain_arb(**dict(kw, **{name: v2}), prec=PREC)
    if name == "eps":                                   # R_sym decreases in eps
        lo, hi = hi, lo
    if hi["certified"]:
        assert lo["certified"]
        if _crosses_eta_half(lo, hi):
            return          # the default rule jumps there: test_default_rule_jumps_at_eta_half
        assert lo["R_sym"] <= hi["R_sym"], (name, v, v2, lo["R_sym"], hi["R_sym"])


def _crosses_eta_half(a, b):
    """Both past F6 and eta on different sides of 1/2 (only reachable when a < 2)."""
    if a["F6"] is not False or b["F6"] is not False:
        return False
    return bool(a["eta"] < 0.5) != bool(b["eta"] < 0.5)


@pytest.mark.xfail(strict=True, reason=(
    "docs/mathematics.md §3.4 default rule allows the Rogers-average term only for eta < 1/2, so logS jumps "
    "UP as eta crosses 1/2 from below; §7.3's 'logS decreases in eta' fails there.  Reachable "
    "only with the pibar_min refinement (a < 2) and eps' > 1/2; with a = 2, F6 fires first."))
def test_default_rule_jumps_at_eta_half():
    kw = dict(beta=1, n=10 ** 9, N=10 ** 9, r=4, rho_Q=1, rho_K=1, delta_Q=0, exact_W=True,
              pibar_min=1)                                   # a = 0, Rb = 1, Gamma = 1
    small = chain_arb(eps=Fraction(7, 10), **kw)             # eta = 0.4950: R_sym = 531
    large = chain_arb(eps=Fraction(71, 100), **kw)           # eta = 0.5020: R_sym = 2837
    assert small["eta"] < 0.5 and large["eta"] > 0.5
    assert large["R_sym"] <= small["R_sym"]                  # R_sym decreasing in eps: fails


def test_with_a_equal_2_the_eta_half_jump_is_unreachable():
    # a = 2 (Rb = 3): eta >= 1/2 means Gamma <= 2 eps'^2/3 < eps', so 2 tanh(Gamma/2) < eps'
    # and F6 has already returned R_sym = 1.
    rng = random.Random(1)
    for _ in range(300):
        G = Fraction(10 ** rng.uniform(-3, 1)).limit_denominator(10 ** 6)
        e = Fraction(rng.uniform(0.001, 0.999)).limit_denominator(1000)
        res = chain_mpmath(G, e, 10, 10, 2, 1, 1, 0, exact_W=True, dps=20)
        assert res["F6"] or res["eta"] < 0.5


def test_R_sym_examples():
    # r = 0 or Gamma = 0: one row suffices; tau >= eps: no certificate
    assert chain_arb(2, Fraction(1, 5), 50, 50, 0, 1, 1, 0, exact_W=True)["R_sym"] == 1
    assert chain_arb(2, Fraction(1, 5), 50, 50, 3, 0, 1, 0, exact_W=True)["R_sym"] == 1
    res = chain_arb(100, Fraction(1, 5), 50, 50, 3, 1, 1, 1, omega_K=1)
    assert res["F3"] is False and res["R_sym"] is None
    # tiny Gamma: 2 tanh(Gamma/2) <= eps'
    assert chain_arb(Fraction(1, 100), Fraction(1, 5), 50, 50, 3, 1, 1, 0, exact_W=True)["F6"]
    # the cap
    assert chain_arb(20, Fraction(1, 5), 50, 70, 8, 1, 1, 0, exact_W=True)["R_sym"] == 50
    # an uncapped value equals floor(exp(logS)), which mpmath reproduces
    a = chain_arb(5, Fraction(1, 5), 10 ** 9, 10 ** 9, 1, 1, 1, 0, exact_W=True)
    b = chain_mpmath(5, Fraction(1, 5), 10 ** 9, 10 ** 9, 1, 1, 1, 0, exact_W=True)
    assert a["R_sym"] == b["R_sym"] == int(mpmath.floor(b["S"])) == 132


def test_chain_middle_eta_branch():
    # a = 0 (pibar_min = 1), eps = 9/10, Gamma = 11/10: 2 tanh(Gamma/2) > eps, and
    # eta = 0.9/sqrt(2.2) lies in [1/2, 2): only the packing bound applies
    kw = dict(beta=Fraction(11, 10), eps=Fraction(9, 10), n=10 ** 9, N=10 ** 9, r=3, rho_Q=1,
              rho_K=1, delta_Q=0, exact_W=True, pibar_min=1)
    a, b = chain_arb(**kw, prec=PREC), chain_mpmath(**kw, dps=45)
    assert a["F6"] is False and a["eta"] > 0.5 and a["eta"] < 2
    with flint.ctx.workprec(PREC):
        with sp.evaluate(False):
            pack = sp.log(P_pos(4, 2 / chain(**kw)["eta"]))
        assert a["logS"].overlaps(evaluate_arb(pack))
    assert _in_widened(a["logS"], b["logS"]) and a["R_sym"] == b["R_sym"]


def test_arb_ball_inputs():
    # interval inputs: the enclosure holds for the whole ball; point inputs inside agree
    beta = flint.arb("3 +/- 0.01")
    res = chain_arb(beta, Fraction(1, 5), 10 ** 9, 10 ** 9, 2, 1, 1, Fraction(1, 100),
                    omega_K=Fraction(1, 2))
    pt = chain_arb(3, Fraction(1, 5), 10 ** 9, 10 ** 9, 2, 1, 1, Fraction(1, 100),
                   omega_K=Fraction(1, 2))
    assert res["certified"] and res["logS"].contains(pt["logS"])
    assert res["R_sym"] >= pt["R_sym"]


# ---------------------------------------------------------------- tables

def test_build_tables_is_deterministic_and_consistent(tmp_path):
    d1, d2 = tmp_path / "a", tmp_path / "b"
    w1 = tables.build_tables(str(d1))
    w2 = tables.build_tables(str(d2))
    assert len(w1) == len(w2) == 16 and w1[-1].endswith("producer.json")
    for p1, p2 in zip(w1[:-1], w2[:-1]):                # the tables; producer.json names the run
        assert open(p1, "rb").read() == open(p2, "rb").read(), p1
    import csv
    for name, _, _ in tables.TABLES:
        rows = list(csv.DictReader(open(d1 / f"{name}.csv")))
        assert rows
        for row in rows:
            for k in row:
                if k.endswith("_lo") and row[k]:
                    stem = k[:-3]
                    lo, hi = Fraction(row[k]), Fraction(row[stem + "_hi"])
                    assert lo <= hi
                    if stem + "_approx" in row:
                        assert lo <= Fraction(row[stem + "_approx"]) <= hi, (name, row)
    th = list(csv.DictReader(open(d1 / "theta_m.csv")))
    assert [r["chosen"] for r in th[32:34]] == ["Astar", "Rogers"]
    typ = [r for r in csv.DictReader(open(d1 / "typical_logS.csv")) if r["mathematics_7.4"]]
    assert len(typ) == 7


def test_tables_run(tmp_path, capsys):
    import argparse
    from certkit.commands import tables as command
    p = argparse.ArgumentParser()
    command.add_arguments(p)
    assert command.run(p.parse_args(["--out", str(tmp_path), "--format", "md"])) == 0
    out = capsys.readouterr().out.split()
    assert len(out) == 6 and all(p.endswith(".md") for p in out[:-1]) and out[-1].endswith("producer.json")


def test_printed_bounds_round_outward():
    x = flint.arb(1) / 3
    lo, hi = tables.fmt_lo(x), tables.fmt_hi(x)
    assert lo == "3.33333333333e-01" and hi == "3.33333333334e-01"
    assert tables.fmt_lo(-x) == "-3.33333333334e-01"
    assert tables.sci(Fraction(1), 12, decimal.ROUND_FLOOR) == "1.00000000000e+00"
    assert tables.sci(Fraction(-1, 10 ** 30), 3, decimal.ROUND_CEILING) == "-1.00e-30"


# ---------------------------------------------------------------- the float chain is the sympy chain
@given(st.integers(0, 40), st.integers(-6, 14), st.integers(-8, 4), st.sampled_from(["1/10", "1/4", "7/20", "1/2"]))
def test_float_chain_agrees_with_the_mpmath_chain(r, log2_gamma, log2_osc, eps):
    """symbolic.float_chain (calibrate's r_opt, the audit's float columns) evaluates the same F2-F12
    as chain.chain: with Gamma = rho_Q rho_K, omega = osc, beta = delta = 1, every line agrees with
    mpmath at 50 digits to float precision (R_sym exactly, away from an integer boundary)."""
    from certkit.symbolic import float_chain
    Gamma, osc = 2.0 ** log2_gamma, 2.0 ** log2_osc
    f = float_chain.evaluate(osc, Gamma, Fraction(eps), r, 10 ** 6)
    m = chain_mpmath(beta=1, eps=Fraction(eps), n=10 ** 6, N=10 ** 6, r=r, rho_Q=Gamma, rho_K=1, delta_Q=1,
                     omega_K=osc, dps=50)
    for k in ("tau", "epsp", "Gamma"):
        assert f[k] == pytest.approx(float(m[k]), rel=1e-13, abs=1e-15)
    if not f["epsp"] > 0:
        assert f["log10_S"] is None and m["F3"] is False
        return
    if m["F6"] is True:
        assert f["R_sym"] == 1 and f["log10_S"] == 0.0
        return
    assert f["eta"] == pytest.approx(float(m["eta"]), rel=1e-13)
    assert f["log10_S"] * math.log(10) == pytest.approx(float(m["logS"]), rel=1e-11, abs=1e-12)
    S = float(mpmath.exp(m["logS"]))
    if abs(S - round(S)) > 1e-6 * max(1, S):
        assert f["R_sym"] == m["R_sym"]
    assert float_chain.log_size(r, Gamma, f["epsp"]) == pytest.approx(float(m["logS"]), rel=1e-11, abs=1e-12)


def test_float_log_theta_is_log_theta():
    from certkit.symbolic import float_chain
    for m in range(1, 129):
        assert float_chain.log_theta(m) == pytest.approx(float(evaluate_mpmath(sp.log(theta(m)), 30)), rel=1e-13, abs=1e-15)
