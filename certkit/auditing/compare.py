"""The audit's comparison: where the routes of routes.py disagree.  Each flag is one line starting
with its category:

    outside      a float value outside the Arb enclosure by more than its precision explains
                 (relative 1e-9 for float64, 1e-3 for float32, plus an absolute floor);
    unsound      a kernel upper bound below the Arb enclosure (lower bound above it), or the
                 witness's actual row error max_i ||A_i - At_i||_1 above the kernel's tau;
    routes       the mpmath value outside the Arb walker's ball (compared exactly), or their R_sym differ;
    ordering     actual <= tau^exact <= tau^width <= tau^spec violated at some r of the
                 SVD-bridge profile (docs/mathematics.md §6.2; geometry.residual_profile).
"""
from fractions import Fraction

import flint
import mpmath

from ..kernel.numerics import arb_to_fraction_lower, arb_to_fraction_upper
from ..symbolic.arb_eval import mpf_fraction
from .routes import GEOMETRY, LOWER, QUANTITIES

KINDS = ("outside", "unsound", "routes", "ordering")
REL_TOL = {"numpy_f64": 1e-9, "torch_f64": 1e-9, "torch_f32": 1e-3}
ROUTE_KEYS = (("tau", "tau"), ("epsp", "epsp"), ("Gamma", "Gamma"), ("eta", "eta"), ("log10_S", "logS"))


def outside(rows):
    """Float points vs the Arb enclosures (geometry scaled by its largest value)."""
    out = []
    scale = max(1.0, *(abs(v[1]) for q in GEOMETRY for v in [rows[q]["arb"]] if v))
    for q in QUANTITIES:
        enc = rows[q]["arb"]
        for col in ("numpy_f64", "torch_f32", "torch_f64"):
            v = rows[q][col]
            if v is None or enc is None or q == "R_sym":
                continue
            tol = REL_TOL[col] * (scale if q in GEOMETRY else max(1.0, abs(v)))
            if not (enc[0] - tol <= v <= enc[1] + tol):
                out.append(f"outside: {q} {col} = {v:.10g} not in Arb [{enc[0]:.10g}, {enc[1]:.10g}]")
        if q == "R_sym":
            for col in ("numpy_f64", "torch_f64"):
                v, a = rows[q][col], rows[q]["arb"]
                if v is not None and a is not None and abs(v - a) > max(1, 1e-6 * a):
                    out.append(f"outside: R_sym {col} = {v} vs Arb {a}")
    return out


def unsound(rows):
    """Kernel bounds on the wrong side of the exact enclosures."""
    out = []
    for q in QUANTITIES:
        kv, enc = rows[q]["kernel"], rows[q]["arb"]
        if kv is None or enc is None:
            continue
        if q == "R_sym":
            if kv < enc:
                out.append(f"unsound: kernel R_sym {kv} < exact-geometry R_sym {enc}")
            continue
        if q in LOWER:
            if kv[0] is not None and kv[0] > enc[1]:
                out.append(f"unsound: kernel lower bound of {q} {kv[0]:.10g} > exact {enc[1]:.10g}")
        elif kv[1] is not None and kv[1] < enc[0]:
            out.append(f"unsound: kernel upper bound of {q} {kv[1]:.10g} < exact {enc[0]:.10g}")
    return out


def witness(actual, kernel_tau):
    """The witness's actual row error max_i ||A_i - At_i||_1 above the kernel's tau (an Arb ball,
    None when the rule did not reach it): the rule's bound would be unsound."""
    if kernel_tau is not None and actual > float(kernel_tau.upper()) + 1e-12:
        return [f"unsound: witness row error {actual:.10g} > kernel tau {float(kernel_tau.upper()):.10g}"]
    return []


def routes(rows, ca, cm):
    """mpmath inside the Arb walker's balls (compared exactly, not in float) and the same R_sym.
    ca, cm: the Arb and mpmath chains (routes.exact_columns)."""
    out = []
    for q, key in ROUTE_KEYS:
        a, m = rows[q]["arb"], rows[q]["mpmath"]
        if (a is None) != (m is None):
            out.append(f"routes: {q} reached by one exact route only (arb {a}, mpmath {m})")
        elif a is not None and not (q in ("eta", "log10_S") and ca["F6"] is True):
            ball, val = ca[key], cm[key]
            if not mpmath.isfinite(val):
                out.append(f"routes: {q} mpmath {val} is not finite, the Arb walker ball is {ball.str(25)}")
                continue
            val = mpf_fraction(val)
            slack = Fraction(1, 10 ** 40) * max(1, abs(val))
            with flint.ctx.workprec(256):      # endpoints at full precision (lower()/upper() round)
                lo, hi = arb_to_fraction_lower(ball), arb_to_fraction_upper(ball)
            if not (lo - slack <= val <= hi + slack):
                out.append(f"routes: {q} mpmath {mpmath.nstr(cm[key], 25)} outside the Arb walker ball {ball.str(25)}")
    if rows["R_sym"]["arb"] != rows["R_sym"]["mpmath"]:
        out.append(f"routes: R_sym Arb {rows['R_sym']['arb']} vs mpmath {rows['R_sym']['mpmath']}")
    return out


def ordering(levels):
    """Mark each profile level ok / not ok (in place) and flag those where actual <= tau_exact <=
    tau_width <= tau_spec fails beyond float slack."""
    out = []
    for o in levels:
        vals = [o["actual"], o["tau_exact"], o["tau_width"], o["tau_spec"]]
        o["ok"] = all(a <= b + 1e-12 + 1e-9 * abs(b) for a, b in zip(vals, vals[1:]))
        if not o["ok"]:
            out.append(f"ordering: r = {o['r']}: actual {o['actual']:.6g}, tau_exact {o['tau_exact']:.6g}, "
                       f"tau_width {o['tau_width']:.6g}, tau_spec {o['tau_spec']:.6g}")
    return out


def flags(records):
    """The disagreements of audit records (certkit.auditing.audit_head / audit_certificate), one dict
    per flag: {"source", "eps", "r", "kind" (outside, unsound, routes or ordering), "message"};
    [] when every route agrees."""
    return [{"source": rec["source"], "eps": rec["eps"], "r": rec["r"], "kind": f.split(":", 1)[0], "message": f}
            for rec in records for f in rec["flags"]]
