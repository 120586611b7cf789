"""certkit scale: the scaling laws of the approximation rank, every point a kernel-VERIFIED
parametric lower bound (docs/mathematics.md §8.2-8.4, proofs/lattice-construction.md).

* sphere (d = 2, 3, 4): hemisphere lattice, r_eps >= M(beta) ~ V_{d-1} (beta/mu)^{(d-1)/2};
* ball (d = 2, 3, 4, 6): discrete-Gaussian messages with integer token multiplicities,
  r_eps >= (2K+1)^d ~ (4 beta/(d L^2))^{d/2};
* interaction (r = 1..4): the ball rows embedded in R^{r+1} with visible dimension r,
  r_eps >= (2K+1)^r ~ Gamma^{r/2}.
For each line: the least-squares slope of log M against log beta (log Gamma) with a 95 %
t-interval, against the theory exponent.  Where the covering upper bound is informative (small
d) its Arb value (Theorems 3.3 / 3.4 / 4.2 through the symbolic chain of docs/mathematics.md §7) is plotted too.
Outputs under --out: points.csv, slopes.csv, scaling.md, summary.json, <family>.png (.pdf, .svg) and the
certificates.
"""
import contextlib
import csv
import io
import json
import math
import os
import tempfile
from fractions import Fraction
from typing import Any

import numpy as np

from ..choices import check
from ..errors import UserError
from ..figures import finish_plot
from ..provenance import producer, with_producer
from ..outputs import write_atomic
from ..results import CausalLaw, ScaleResult
from ..search import lattice as lat
from . import CAUSAL_NS, DEFAULT_LAWS, EPS, POINTS, TOLERANCE

# the lattice families: dims, x range (beta; interaction: rho), theory exponent, chain-plotted dims
LATTICE_FAMILIES: dict[str, dict[str, Any]] = {
    "sphere": {"dims": (2, 3, 4), "lo": 10 ** 4, "hi": 10 ** 7, "chain": (2, 3)},
    "ball": {"dims": (2, 3, 4, 6), "lo": 10 ** 5, "hi": 10 ** 8, "chain": (2, 3), "L": 5},
    "interaction": {"dims": (1, 2, 3, 4), "lo": 300, "hi": 9487, "chain": (1, 2), "L": 5},
}
HEADLINE = {"d": 4, "beta": 640 ** 2, "L": 9, "K": 32}     # 65^4 messages, ~10^88946 tokens


class ScaleError(UserError):
    """Bad input to certkit scale (the message names the argument); the CLI exits 64."""


def exponent(family, dim):
    return Fraction(dim - 1, 2) if family == "sphere" else Fraction(dim, 2)


def grid(family, points):
    """Integer x values log-spaced over the family's range (beta; interaction: rho)."""
    f = LATTICE_FAMILIES[family]
    return [int(v) for v in np.unique(np.round(np.geomspace(f["lo"], f["hi"], points)).astype(np.int64))]


def chain_log10_upper(family, dim, beta, eps, K=None, L=None):
    """log10 of the covering upper bound N_net(m, eps/sqrt(6 Gamma)) for every head of the family's
    geometry at this beta (Arb, upper end): sphere m = d (Thm 3.3), ball m = d + 1 (Thm 3.4),
    interaction m = r + 1 with Gamma = beta' rho_Q rho_K (Thm 4.2).  Not a kernel certificate."""
    import flint
    from ..symbolic.arb_eval import chain_arb
    big = 10 ** 400
    if family == "interaction":
        rho = flint.arb(beta).sqrt()
        rho_Q = flint.arb(L * K) * flint.arb(dim).sqrt() / (flint.arb(2).sqrt() * rho)
        res = chain_arb(beta=Fraction(2 * beta), eps=eps, n=big, N=big, r=dim, rho_Q=rho_Q,
                        rho_K=1 / flint.arb(2).sqrt(), delta_Q=0, exact_W=True)
    else:
        r = dim - 1 if family == "sphere" else dim
        res = chain_arb(beta=Fraction(beta), eps=eps, n=big, N=big, r=r, rho_Q=1, rho_K=1, delta_Q=0, exact_W=True)
    if res["logS"] is None:
        return 0.0
    return float((res["logS"] / flint.arb(10).log()).upper())


def point(family, dim, x, eps, cert_dir):
    """Write and kernel-check one parametric certificate; returns the row (dict)."""
    f = LATTICE_FAMILIES[family]
    path = os.path.join(cert_dir, family, f"{'r' if family == 'interaction' else 'd'}{dim}-x{x}.json")
    prov = {"producer": "certkit scale", "family": family}
    row = {"family": family, "dim": dim, "exponent": str(exponent(family, dim))}
    if family == "sphere":
        mu = lat.sphere_mu(dim, float(eps))
        R2 = Fraction(x) / mu
        M = lat.sphere_count(dim, R2)
        lat.sphere_certificate(path, dim, mu, R2, eps, prov, bound=M)
        row.update(beta=x, x=x, params=f"mu={mu} R2={R2}", M=M)
        K = L = None
    else:
        L = f["L"]
        beta = x if family == "ball" else x * x
        K = lat.max_half_width(dim, beta, L)
        if family == "ball":
            lat.ball_certificate(path, dim, beta, L, K, eps, mode="tokens", provenance=prov)
        else:
            lat.interaction_certificate(path, dim, beta, L, K, eps, provenance=prov)
        row.update(beta=beta if family == "ball" else 2 * beta, x=beta if family == "ball" else None,
                   params=f"L={L} K={K}", M=(2 * K + 1) ** dim)
    v = check(path, "fast")
    det = v.details
    row.update(verdict=v.status, certified_M=det.get("messages") if v.status == "VERIFIED" else None,
               margin=det.get("certified_min_margin"), certificate=os.path.relpath(path, os.path.dirname(cert_dir)))
    if family == "interaction":
        row["x"] = lat.interaction_gamma(dim, beta, L, K)[0] if v.status == "VERIFIED" else None
        row["visible_dimension"] = dim if v.status == "VERIFIED" and K >= 1 and beta >= 1 else None
    if family == "ball":
        row["log10_tokens"] = lat.log10_tokens(dim, beta)[1]
    row["log10_M"] = math.log10(row["M"])
    if dim in f["chain"]:
        row["chain_log10_upper"] = chain_log10_upper(family, dim, x if family != "interaction" else x * x, eps, K, L)
    if v.status != "VERIFIED":
        row["reason"] = v.message
    return row


def fit_slope(x, M):
    """Least-squares slope of ln M on ln x with its standard error and 95 % t-interval."""
    from scipy import stats
    X = np.log(np.asarray(x, dtype=float))
    Y = np.array([math.log(m) for m in M])
    r = stats.linregress(X, Y)
    t = stats.t.ppf(0.975, len(X) - 2) if len(X) > 2 else float("inf")
    return {"slope": r.slope, "stderr": r.stderr, "ci95": [r.slope - t * r.stderr, r.slope + t * r.stderr],
            "intercept": r.intercept}


def slopes(rows, tolerance):
    out = []
    for family in LATTICE_FAMILIES:
        for dim in LATTICE_FAMILIES[family]["dims"]:
            sel = [r for r in rows if r["family"] == family and r["dim"] == dim]
            if not sel:
                continue
            ok = [r for r in sel if r["verdict"] == "VERIFIED"]
            theory = float(exponent(family, dim))
            s = {"family": family, "dim": dim, "theory": theory, "points": len(sel),
                 "verified": len(ok), "x_min": min(r["x"] or 0 for r in sel), "x_max": max(r["x"] or 0 for r in sel)}
            if len(ok) >= 3:
                s.update(fit_slope([r["x"] for r in ok], [r["certified_M"] for r in ok]))
                s["rel_error"] = s["slope"] / theory - 1
                s["within_tolerance"] = abs(s["rel_error"]) <= tolerance
                up = [r for r in ok if r.get("chain_log10_upper") is not None]
                if len(up) >= 3:
                    s["chain_slope"] = fit_slope([r["x"] for r in up], [10 ** r["chain_log10_upper"] for r in up])["slope"]
            else:
                s["within_tolerance"] = False
            out.append(s)
    return out


def headline(eps, cert_dir):
    """The 65^4 ball point at beta = 640^2 with integer multiplicities (real tokens)."""
    h = HEADLINE
    path = os.path.join(cert_dir, "ball-65x4-beta640sq.json")
    lat.ball_certificate(path, h["d"], h["beta"], h["L"], h["K"], eps, mode="tokens",
                         provenance={"producer": "certkit scale", "family": "ball", "note": "65^4 headline point"})
    v = check(path, "fast")
    return {"d": h["d"], "beta": h["beta"], "L": h["L"], "K": h["K"], "M": (2 * h["K"] + 1) ** h["d"],
            "verdict": v.status, "line": v.line(), "margin": v.details.get("certified_min_margin"),
            "log10_tokens": list(lat.log10_tokens(h["d"], h["beta"])),
            "certificate": os.path.relpath(path, os.path.dirname(cert_dir))}


CROSSCHECK = [   # small instances: parametric vs explicit matrix through the generic decoding rule
    ("ball", dict(d=2, beta=400, L=5, mode="weights")), ("ball", dict(d=2, beta=900, L=5, mode="weights")),
    ("ball", dict(d=3, beta=400, L=5, mode="weights")), ("ball", dict(d=4, beta=196, L=5, mode="weights")),
    ("ball", dict(d=1, beta=72, L=5, K=1, mode="tokens")), ("ball", dict(d=2, beta=72, L=3, K=1, mode="tokens", eps=Fraction(1, 4))),
    ("interaction", dict(d=1, beta=400, L=5)), ("interaction", dict(d=2, beta=256, L=5)),
    ("sphere", dict(d=2, R2=400)), ("sphere", dict(d=3, R2=100)), ("sphere", dict(d=4, R2=25)),
    ("sphere-random", dict(d=3, beta=400, P=2000)),
]


def crosscheck_pair(con, p, eps, stem):
    """Write the certificates of one cross-check instance: (parametric path or None, explicit path,
    explicit Head, extra parameter text, numerical visible dimension or None).  The explicit head is
    the instance materialised (exact dyadic entries; sphere points float-rounded) with all rows as
    messages and its cells, for lower-decoding-margin."""
    from ..search.writer import certificate
    e = p.get("eps", eps)
    pp, xp = stem + ".parametric.json", stem + ".explicit.json"
    extra, vis = "", None
    if con == "sphere":
        mu = lat.sphere_mu(p["d"], float(e))
        extra = f" mu={mu}"
        lat.sphere_certificate(pp, p["d"], mu, p["R2"], e)
        h, msg, cells = lat.materialise_sphere(p["d"], mu, p["R2"])
    elif con == "sphere-random":
        pp = None
        h, msg, cells = lat.sphere_random(p["d"], p["beta"], p["P"], float(e))
    else:
        K = p.get("K", lat.max_half_width(p["d"], p["beta"], p["L"]))
        extra = f" K={K}" if "K" not in p else ""
        if con == "ball":
            lat.ball_certificate(pp, p["d"], p["beta"], p["L"], K, e, mode=p["mode"])
        else:
            lat.interaction_certificate(pp, p["d"], p["beta"], p["L"], K, e)
        h, msg, cells = lat.materialise_ball(p["d"], p["beta"], p["L"], K, p.get("mode", "weights"))
        if con == "interaction":
            sv = lat.visible_singular_values(h)
            vis = int(np.sum(sv > 1e-9 * sv[0]))
    certificate(xp, "lower-decoding-margin", len(msg), e, h, {"messages": (msg, "int"), "cells": (cells, "int")})
    return pp, xp, h, extra, vis


def explicit_crosscheck(eps, out_dir):
    """Each small instance checked as an explicit matrix by lower-decoding-margin; the parametric
    certificate of the same instance must give the same M."""
    rows = []
    d_ = os.path.join(out_dir, "crosscheck")
    for i, (con, p) in enumerate(CROSSCHECK):
        pp, xp, h, extra, vis = crosscheck_pair(con, p, eps, os.path.join(d_, f"{i:02d}-{con}"))
        vx = check(xp, "fast")
        M = vx.details.get("messages")
        row = {"construction": con, "params": " ".join(f"{k}={v}" for k, v in p.items()) + extra,
               "columns": h.N, "explicit_M": h.n, "explicit_verdict": vx.status,
               "explicit_margin": vx.details.get("certified_min_margin"), "visible_dimension": vis}
        if pp is not None:
            vp = check(pp, "fast")
            row.update(parametric_M=vp.details.get("messages"), parametric_verdict=vp.status,
                       parametric_margin=vp.details.get("certified_min_margin"))
            row["agree"] = vp.status == vx.status == "VERIFIED" and vp.details.get("messages") == M
        else:
            row.update(parametric_M=None, parametric_verdict=None, parametric_margin=None,
                       agree=vx.status == "VERIFIED")
        rows.append(row)
    return rows


# ---------------------------------------------------------------- outputs
POINT_FIELDS = ["family", "dim", "exponent", "beta", "x", "params", "M", "log10_M", "verdict", "certified_M",
                "margin", "log10_tokens", "visible_dimension", "chain_log10_upper", "certificate"]


def cell(v, sig=6):
    """A number in the tables: a float to sig significant digits, None an empty cell."""
    return "" if v is None else (f"{v:.{sig}g}" if isinstance(v, float) else str(v))


def write_csv(path, rows, fields):
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: cell(r.get(k)) if not isinstance(r.get(k), list) else " ".join(map(cell, r[k])) for k in fields})
    write_atomic(path, buf.getvalue())


def markdown(sl, head, cc, eps, tolerance):
    xs = {"sphere": "β", "ball": "β", "interaction": "Γ"}
    L = [f"# Scaling laws of the approximation rank (eps = {eps})", "",
         "Every point is a kernel-VERIFIED parametric lower bound r_eps(A) >= M (kind `lower-lattice`). "
         "Slopes are least-squares fits of log M against log β (interaction: log Γ) with 95 % t-intervals; "
         f"tolerance {tolerance:.0%} of the theory exponent. The covering upper bound (Theorems 3.3 / 3.4 / 4.2, "
         "evaluated in Arb; not a kernel certificate) is fitted where it is plotted.", "",
         "Ranges: sphere β in [1e4, 1e7]; ball β in [1e5, 1e8]; interaction ρ in [300, 9487] (β' = 2ρ² in "
         "[1.8e5, 1.8e8]). The ball starts at 1e5 because M = (2K+1)^d with K = ⌊(√(β/d) − h)/L⌋ carries an "
         "offset of order L/√β in 2K+1: over [1e4, 1e7] the fitted slopes are +0.9 %, +0.8 %, +1.3 %, +1.5 % "
         "above d/2 for d = 2, 3, 4, 6 (a finite-β effect of the same kind is a likely source of the paper's 2–8 %).", "",
         "| family | dim | x | range | points (VERIFIED) | theory | slope | 95 % CI | rel. error | within | upper-bound slope |",
         "|---|---|---|---|---|---|---|---|---|---|---|"]
    for s in sl:
        ci = s.get("ci95")
        rel = "" if s.get("rel_error") is None else f"{s['rel_error']:+.3%}"
        L.append(f"| {s['family']} | {s['dim']} | {xs[s['family']]} | {cell(s['x_min'], 3)}–{cell(s['x_max'], 3)} | "
                 f"{s['points']} ({s['verified']}) | {s['theory']:g} | {cell(s.get('slope'), 5)} | "
                 f"{'[' + cell(ci[0], 5) + ', ' + cell(ci[1], 5) + ']' if ci else ''} | "
                 f"{rel} | "
                 f"{'yes' if s['within_tolerance'] else 'NO'} | {cell(s.get('chain_slope'), 4)} |")
    lo, hi = head["log10_tokens"]
    L += ["", "## The 65^4 point", "",
          f"Ball, d = {head['d']}, β = 640² = {head['beta']}, spacing L = {head['L']}, K = {head['K']}, integer "
          f"multiplicities: **r_eps >= {head['M']:,} = 65^4**, {head['verdict']}, certified margin "
          f"{cell(head['margin'])}; the head has 10^{lo:.4f} to 10^{hi:.4f} tokens (a {math.floor(hi) + 1:,}-digit number). "
          f"Certificate `{head['certificate']}`.", "",
          "## Cross-check: parametric rule vs the explicit matrix", "",
          "Small instances materialised as explicit matrices (exact dyadic entries; sphere points rounded to float64) "
          "and checked by the generic `lower-decoding-margin` rule.", "",
          "| construction | parameters | columns | explicit M (verdict, margin) | parametric M (verdict, margin) | visible dim | agree |",
          "|---|---|---|---|---|---|---|"]
    for r in cc:
        par = "—" if r["parametric_verdict"] is None else \
            f"{cell(r['parametric_M'])} ({r['parametric_verdict']}, {cell(r['parametric_margin'], 4)})"
        L.append(f"| {r['construction']} | {r['params']} | {r['columns']} | {r['explicit_M']} ({r['explicit_verdict']}, "
                 f"{cell(r['explicit_margin'], 4)}) | {par} | {cell(r['visible_dimension'])} | {'yes' if r['agree'] else 'NO'} |")
    L += ["", "Points: `points.csv`; slopes: `slopes.csv`; plots: `sphere.png`, `ball.png`, `interaction.png`.", ""]
    return "\n".join(L)


def plot(rows, sl, family, path):
    """The family's certified points log10 M against log10 beta (Gamma), the theory slope through
    them, the covering upper bound where informative; the legend gives each fitted slope with its
    95 % interval.  path (.png) gets a .pdf and an .svg beside it (certkit.figures style)."""
    from ..figures import figure_style
    with figure_style() as plt:
        fig, ax = plt.subplots(figsize=(3.4, 3.3), layout="constrained")
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        lab = "r" if family == "interaction" else "d"
        for i, s in enumerate(x for x in sl if x["family"] == family):
            sel = [r for r in rows if r["family"] == family and r["dim"] == s["dim"] and r["verdict"] == "VERIFIED"]
            if not sel:
                continue
            c = colors[i % len(colors)]
            x = np.array([r["x"] for r in sel], dtype=float)
            y = np.array([r["log10_M"] for r in sel])
            ci = s.get("ci95")
            fit = "" if s.get("slope") is None else f"{s['slope']:.4f}" + (
                f" [{ci[0]:.4f}, {ci[1]:.4f}]" if ci else "")
            ax.plot(np.log10(x), y, "o", color=c, ms=3.5,
                    label=f"${lab} = {s['dim']}$: slope {fit} (theory {s['theory']:g})")
            xm, ym = np.log10(x).mean(), y.mean()
            ax.plot(np.log10(x), ym + s["theory"] * (np.log10(x) - xm), "-", color=c, lw=0.9, alpha=0.7)
            up = [r for r in sel if r.get("chain_log10_upper") is not None]
            if up:
                ax.plot(np.log10([r["x"] for r in up]), [r["chain_log10_upper"] for r in up], "^--", color=c,
                        mfc="none", ms=3.5, lw=0.7, label=f"${lab} = {s['dim']}$: covering upper bound")
        ax.set_xlabel(r"$\log_{10}\Gamma$" if family == "interaction" else r"$\log_{10}\beta$")
        ax.set_ylabel(r"$\log_{10} M$   (certified $r_\varepsilon \geq M$)")
        law = {"sphere": r"$r_\varepsilon \asymp \beta^{(d-1)/2}$, hemisphere lattice",
               "ball": r"$r_\varepsilon \asymp \beta^{d/2}$, discrete-Gaussian tokens",
               "interaction": r"$r_\varepsilon \asymp \Gamma^{r/2}$, invisible coordinate in $\mathbb{R}^{r+1}$"}[family]
        finish_plot(fig, ax, f"{family}: {law}", path, legend_size=8, below=True)


# ---------------------------------------------------------------- causal attention (prefix averaging)
CAUSAL_FIELDS = ["n", "ln_n", "lower", "lower_kind", "upper", "upper_kind", "cover", "margin_messages",
                 "cover_bound", "lower_certificate", "upper_certificate"]


def causal_point(n, eps, cert_dir):
    """Certified lower <= r_eps(A) <= upper for n x n prefix averaging (causal, beta = 0;
    docs/mathematics.md §8.5): a decoding lower certificate (inverse-norm messages, else margin
    messages), a covering upper certificate, and the upper search's factorisation (certkit certify's,
    started at the lower bound) where it beats the cover; each written and kernel-checked."""
    from ..search import causal, writer
    from ..search.sandwich import certify_upper
    head = causal.prefix_head(n)
    folder = os.path.join(cert_dir, "causal")
    os.makedirs(folder, exist_ok=True)
    prov = {"producer": "certkit scale", "family": "causal", "n": n}
    reps, assign = causal.covering(n, eps)
    cov = os.path.join(folder, f"n{n}-cover.json")
    vu = writer.write_checked(cov, "upper-covering", len(reps), eps, head,
                              {"representatives": (reps, "int"), "assignment": (assign, "int")}, prov, shared=True)
    margin = causal.messages(n, eps, "margin")
    lo = os.path.join(folder, f"n{n}-lower.json")
    for kind, msgs in (("lower-decoding-inverse-norm", causal.messages(n, eps, "inverse")),
                       ("lower-decoding-margin", margin)):
        vl = writer.write_checked(lo, kind, len(msgs), eps, head,
                                  {"messages": (msgs, "int"), "cells": (causal.cells(msgs, n), "int")}, prov, shared=True)
        if vl.status == "VERIFIED":
            break
    lower = len(msgs) if vl.status == "VERIFIED" else None
    upper, upper_kind, up = (len(reps), "upper-covering", cov) if vu.status == "VERIFIED" else (None, None, None)
    fac = certify_upper(head.attention(), eps, head, head.instance(), os.path.join(folder, f"n{n}-factor.json"),
                        prov, floor=lower or 1, layout={"shared": True})
    if fac is not None and (upper is None or fac["bound"] < upper):
        upper, upper_kind, up = fac["bound"], "upper-factorization", fac["file"]
    rel = lambda p: os.path.relpath(p, os.path.dirname(cert_dir))
    return {"n": n, "ln_n": math.log(n), "lower": lower, "lower_kind": kind if lower else None,
            "upper": upper, "upper_kind": upper_kind, "cover": len(reps) if vu.status == "VERIFIED" else None,
            "margin_messages": len(margin),
            "cover_bound": math.ceil(math.log(n) / -math.log(1 - float(eps) / 2)) + 1,
            "lower_certificate": rel(lo) if lower else None, "upper_certificate": rel(up) if up else None}


def causal_fit(rows, key):
    """Least-squares M = a + b ln n over the VERIFIED points, with b's 95 % t-interval."""
    from scipy import stats
    ok = [r for r in rows if r[key] is not None]
    if len(ok) < 3:
        return None
    f = stats.linregress([r["ln_n"] for r in ok], [r[key] for r in ok])
    t = stats.t.ppf(0.975, len(ok) - 2)
    return {"b": f.slope, "a": f.intercept, "ci95": [f.slope - t * f.stderr, f.slope + t * f.stderr]}


def causal_law(eps, cert_dir, ns=CAUSAL_NS, progress=False):
    """{"points", "lower_fit", "upper_fit", "theory"}: the growth of r_eps with n for causal attention
    at beta = 0; theory: the margin construction's 1/ln(2/(1 - eps)) and the cover's 1/-ln(1 - eps/2)
    per unit of ln n."""
    from tqdm import tqdm
    rows = [causal_point(n, eps, cert_dir) for n in tqdm(ns, desc="causal law", unit="n", disable=not progress)]
    return {"points": rows, "lower_fit": causal_fit(rows, "lower"), "upper_fit": causal_fit(rows, "upper"),
            "theory": {"margin_per_ln_n": 1 / math.log(2 / (1 - float(eps))),
                       "cover_per_ln_n": 1 / -math.log(1 - float(eps) / 2)}}


def causal_markdown(law, eps):
    lf, uf, th = law["lower_fit"], law["upper_fit"], law["theory"]
    fit = lambda f: "—" if f is None else f"{f['b']:.3f} ln n {f['a']:+.2f} (95 % CI of the slope [{f['ci95'][0]:.3f}, {f['ci95'][1]:.3f}])"
    L = [f"# Causal attention: how r_eps grows with the context length (eps = {eps})", "",
         "Prefix averaging — a causal head at β = 0, row i uniform on keys 0..i (docs/mathematics.md §8.5) — for "
         "n = 64 … 4096. Both bounds are kernel-VERIFIED explicit certificates (format 1.1, causal row mask). Lower: "
         "a decoding contraction on geometric messages with prefix cells, greedy on the inverse-norm test (Lemma 8.2) "
         "with the margin test (Lemma 8.1) as fallback. Upper: the smaller of a covering (representatives r_k with "
         "(r_{k−1} + 2)/(r_k + 1) ≥ 1 − ε/2) and the factorisation found by certkit certify's upper search.", "",
         f"* lower: r_eps ≥ {fit(lf)}; the margin construction alone gives {th['margin_per_ln_n']:.3f} ln n",
         f"* upper: r_eps ≤ {fit(uf)}; the covering count is ⌈ln n / −ln(1 − ε/2)⌉ + 1 = {th['cover_per_ln_n']:.3f} ln n + O(1)",
         "", "So r_eps(prefix averaging) = Θ(log n): a causal head's approximation rank keeps growing with the "
         "context, but only logarithmically." + causal_gap(law), "",
         "| n | log2 n | certified lower | lower by | certified upper | upper by | covering | margin messages |",
         "|---|---|---|---|---|---|---|---|"]
    for r in law["points"]:
        L.append(f"| {r['n']} | {math.log2(r['n']):g} | {r['lower']} | {r['lower_kind']} | {r['upper']} | {r['upper_kind']} | "
                 f"{r['cover']} | {r['margin_messages']} |")
    return "\n".join(L + ["", "Points: `causal.csv`; plot: `causal.png`; certificates: `certificates/causal/`.", ""])


def causal_gap(law):
    """A sentence on how tight the sandwiches are (computed from the certified points)."""
    pts = [r for r in law["points"] if r["lower"] and r["upper"]]
    if not pts:
        return ""
    width = max(r["upper"] - r["lower"] for r in pts)
    text = f" Every certified sandwich has width at most {width}"
    if all(r["upper"] == math.ceil(math.log2(r["n"])) and r["lower"] == r["upper"] - 1 for r in pts):
        text += ": at every length tested, **log2 n − 1 ≤ r_eps ≤ log2 n**"
    return text + "."


def causal_plot(law, eps, path):
    """Certified lower and upper bounds against n (log2 axis) with their least-squares fits in ln n
    (the slope's 95 % interval in the legend); path (.png) gets a .pdf and an .svg beside it."""
    from ..figures import figure_style
    with figure_style() as plt:
        fig, ax = plt.subplots(figsize=(3.4, 3.2), layout="constrained")
        n = np.array([r["n"] for r in law["points"]], dtype=float)
        ax.plot(n, [r["cover"] for r in law["points"]], "x", color="0.5", ms=4, label="covering upper bound")
        for key, fit, mk, lab in (("upper", law["upper_fit"], "v", "certified upper (best)"),
                                  ("lower", law["lower_fit"], "^", "certified lower (decoding)")):
            y = [r[key] if r[key] is not None else np.nan for r in law["points"]]
            line = ax.plot(n, y, mk, ms=4, label=lab)[0]
            if fit:
                ax.plot(n, fit["a"] + fit["b"] * np.log(n), "-", color=line.get_color(), lw=0.9,
                        label=f"fit ${fit['b']:.2f}\\,\\ln n {fit['a']:+.1f}$, slope 95 % CI "
                              f"[{fit['ci95'][0]:.2f}, {fit['ci95'][1]:.2f}]")
        ax.fill_between(n, [r["lower"] or 0 for r in law["points"]], [r["upper"] or 0 for r in law["points"]],
                        alpha=0.12, label=r"$r_\varepsilon$ lies here")
        ax.set_xscale("log", base=2)
        ax.set_xlabel(r"context length $n$")
        ax.set_ylabel(r"$r_\varepsilon$ (certified bounds)")
        finish_plot(fig, ax, rf"Causal attention, $\beta = 0$, $\varepsilon = {eps}$: $r_\varepsilon = \Theta(\log n)$",
                    path, legend_size=8, below=True)


# ---------------------------------------------------------------- the laws in one call
def laws(families=DEFAULT_LAWS, eps=EPS, points=POINTS, tolerance=TOLERANCE, out=None, crosscheck=True,
         causal_lengths=None, progress=False, rows=None):
    """The certified scaling laws of `families` (LATTICE_FAMILIES and "causal") at eps (exact): a
    ScaleResult with the lattice points (points per line, log-spaced), their slopes against the
    theory within tolerance, the 65^4 headline point, the explicit cross-check (crosscheck) and the
    causal law at causal_lengths (None: CAUSAL_NS; given, they add the causal family).  The
    certificates go under out/certificates (out/crosscheck for the cross-check); out None: a
    temporary folder, removed.  progress: bars on stderr; rows: None or a list the lattice points
    are appended to as they are certified (what a caller keeps when the run is interrupted)."""
    from tqdm import tqdm
    families = [families] if isinstance(families, str) else list(families)
    if causal_lengths is not None and "causal" not in families:
        families.append("causal")
    bad = [f for f in families if f not in LATTICE_FAMILIES and f != "causal"]
    if bad:
        raise ScaleError(f"families: unknown family {bad[0]!r} "
                         f"(choose from {', '.join([*LATTICE_FAMILIES, 'causal'])})")
    rows = [] if rows is None else rows
    folder = tempfile.TemporaryDirectory(prefix="certkit-") if out is None else contextlib.nullcontext(os.fspath(out))
    with folder as base:
        cert_dir = os.path.join(base, "certificates")
        os.makedirs(cert_dir, exist_ok=True)
        tasks = [(f, d, x) for f in families if f in LATTICE_FAMILIES
                 for d in LATTICE_FAMILIES[f]["dims"] for x in grid(f, points)]
        for f, d, x in tqdm(tasks, desc="certkit scale", unit="pt", disable=not progress):
            rows.append(point(f, d, x, eps, cert_dir))
        head = headline(eps, cert_dir)
        cc = explicit_crosscheck(eps, base) if crosscheck else []
        law = None
        if "causal" in families:
            law = causal_law(eps, cert_dir, CAUSAL_NS if causal_lengths is None else tuple(causal_lengths), progress)
        return ScaleResult(rows=rows, columns=tuple(POINT_FIELDS), eps=eps, tolerance=tolerance,
                           slopes=slopes(rows, tolerance), headline=head, crosscheck=cc,
                           causal=None if law is None else CausalLaw(
                               rows=law["points"], columns=tuple(CAUSAL_FIELDS), lower_fit=law["lower_fit"],
                               upper_fit=law["upper_fit"], theory=law["theory"]),
                           out=None if out is None else base)


def write(result, out, plots=True):
    """The files of a ScaleResult under out: points.csv, slopes.csv, scaling.md, summary.json and
    (plots) <family>.png with .pdf and .svg; with the causal law, causal.csv, causal.md (causal.png)."""
    rows, sl, eps = result.rows, result.slopes, result.eps
    write_csv(os.path.join(out, "points.csv"), rows, POINT_FIELDS)
    write_csv(os.path.join(out, "slopes.csv"), sl, ["family", "dim", "theory", "slope", "stderr", "ci95", "rel_error",
                                                    "within_tolerance", "points", "verified", "x_min", "x_max", "chain_slope"])
    made_by = producer()
    write_atomic(os.path.join(out, "scaling.md"),
                 with_producer(markdown(sl, result.headline, result.crosscheck, eps, result.tolerance), made_by))
    write_atomic(os.path.join(out, "summary.json"), json.dumps(
        {"eps": str(eps), "tolerance": result.tolerance, "slopes": sl, "headline": result.headline,
         "crosscheck": result.crosscheck, "producer": made_by},
        indent=1, default=str) + "\n")
    if plots:
        for f in dict.fromkeys(r["family"] for r in rows):
            plot(rows, sl, f, os.path.join(out, f"{f}.png"))
    if result.causal is not None:
        c = result.causal
        law = {"points": c.rows, "lower_fit": c.lower_fit, "upper_fit": c.upper_fit, "theory": c.theory}
        write_csv(os.path.join(out, "causal.csv"), law["points"], CAUSAL_FIELDS)
        write_atomic(os.path.join(out, "causal.md"), with_producer(causal_markdown(law, eps), made_by))
        if plots:
            causal_plot(law, eps, os.path.join(out, "causal.png"))
