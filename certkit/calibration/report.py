"""The calibration report: statistics of the rows, DIR/results.{csv,json}, DIR/SUMMARY.md (our
numbers beside the paper's) and the figures, rebuilt from the finished groups under DIR/configs.

statistics(rows): Spearman(r_SVD_int, R_con) pooled, per m, per eps, per length, per layer and
rank-within-m, each with a 95 % cluster-bootstrap interval (resampling heads), for the Q, K-only
bridge and, when the rows have it, the bias-aware one; the share of full-dimensional configurations
with r_SVD_int < r_exact under the stated definitions; the sandwiches; the attention-sink mass.
No scipy: the ranks and the bootstrap are vectorised numpy (a few seconds for ~7,500 rows).
figures(rows, curves, out): one figure per question, PNG + PDF + SVG (docs/report.md)."""
import json
import os
import warnings
import zlib
from fractions import Fraction

import numpy as np

from ..figures import fmt
from ..outputs import write_atomic as write_text, write_rows
from ..provenance import with_producer
from .configs import collect, group_path, write_atomic

PAPER = {"spearman": "0.574 / 0.606", "share_svd_below_exact": 0.419, "reconstruction": 1.57e-6, "heads": 84}
FIELDS = ["model", "L", "layer", "head", "multiplier", "beta", "eps", "n", "d_head", "r_exact", "r_exact_certified_lower",
          "r_svd_int", "r_opt", "R_sym", "R_sym_r", "R_con", "upper_method", "lower", "lower_kind", "Gamma",
          "r_exact_bias", "r_exact_bias_certified_lower", "r_svd_int_bias", "r_opt_bias", "Gamma_bias", "sink_mass",
          "bridge", "mask", "r_exact_max", "R_sym_applicable", "certificates", "seconds"]
BIAS_FIELDS = ("r_exact_bias", "r_exact_bias_certified_lower", "r_svd_int_bias", "r_opt_bias", "Gamma_bias",
               "sink_mass", "bridge")
BRIDGES = ("r_svd_int", "r_svd_int_bias")          # Q, K only; the full centred logits beta Q K^T + bias
STRATA = (("by_m", "multiplier"), ("by_eps", "eps"), ("by_L", "L"), ("by_layer", "layer"))
RESAMPLES = 1000
DEFINITIONS = {
    "full_dimensional": "r_exact = min(d_head, n − 1): the visible dimension of Q, K is as large as the doubly "
                        "centred logits allow (n − 1 caps it when d_head ≥ n)",
    "full_dimensional_old": "r_exact = d_head (the previous definition; it selects nothing when every n − 1 < d_head)",
    "full_rank_bias": "r_exact_bias = n − 1: the centred logits βQKᵀ + bias have full rank",
    "rank_within_m": "ranks of r_SVD_int and of R_con computed within each multiplier m (midranks, centred and "
                     "divided by the stratum size), then one Pearson correlation over the pooled within-m ranks; "
                     "with strata of equal size this is the correlation of the raw within-m ranks",
    "bootstrap": "95 % percentile interval over resamples of heads (clusters (layer, head), drawn with replacement "
                 "among the stratum's heads; every configuration of a drawn head comes along), seeded",
    "sink_mass": "the mean over query rows of the attention mass on the two special tokens (positions 0 and n − 1; "
                 "for a decoder the first token, position 0, the only key every query sees)",
    "masked": "for a head with a row mask (a decoder: causal, sliding window, sinks) r_exact is the masked visible "
              "dimension r_M (docs/mathematics.md §4.5) and full-dimensional means r_M = r_exact_max = min(d_head, "
              "rows that see two keys − 1); R_sym is not applicable (—): the symbolic chain assumes one key set "
              "shared by every row and no bound of r_ε by r_M alone holds under a causal mask (§4.5)",
}
FIGURES = ("bridge_vs_con_by_m", "spearman_by_m", "sandwich_widths", "tau_width_curves", "sink_mass")
OLD_PLOTS = ("svd_vs_con.png", "tau_curves.png", "sandwich_by_layer.png")     # replaced; removed when figures are made


def frac_key(v):
    """Sort key of an exact numeral ('1/4', 3, '7/20')."""
    return Fraction(str(v))


def has_bias_bridge(rows):
    """True when the rows carry the bias-aware bridge (r_svd_int_bias; bridge version >= 2)."""
    return any(r.get("r_svd_int_bias") is not None for r in rows)


# ---------------------------------------------------------------- weighted ranks and correlations
def weighted_ranks(v, W):
    """Midranks of the values v (length n) in the multisets where row j of a resample b appears
    W[b, j] times: shape (B, n), ties averaged (the ranks scipy.stats.rankdata gives the expanded data)."""
    order = np.argsort(v, kind="stable")
    vs = v[order]
    starts = np.flatnonzero(np.r_[True, vs[1:] != vs[:-1]])
    group = np.empty(len(v), dtype=np.intp)
    group[order] = np.cumsum(np.r_[True, vs[1:] != vs[:-1]]) - 1
    G = np.add.reduceat(W[:, order], starts, axis=1)
    mid = np.cumsum(G, axis=1) - G + (G + 1) / 2
    return mid[:, group]


def weighted_pearson(a, b, W):
    """Pearson correlation of the columns a, b (B x n or n) with row weights W (B x n): one value per
    resample, NaN where one side is constant."""
    s = W.sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        da = a - ((W * a).sum(axis=1) / s)[:, None]
        db = b - ((W * b).sum(axis=1) / s)[:, None]
        va, vb = (W * da * da).sum(axis=1), (W * db * db).sum(axis=1)
        r = (W * da * db).sum(axis=1) / np.sqrt(va * vb)
    r[(va <= 1e-12 * (W * a * a).sum(axis=1)) | (vb <= 1e-12 * (W * b * b).sum(axis=1)) | ~(s > 0)] = np.nan
    return np.clip(r, -1, 1)


def spearman_weighted(x, y, W, strata=None):
    """Spearman correlation of x, y for each resample (rows of W); strata: an integer label per
    configuration for the rank-within-stratum variant (ranks computed within each stratum, centred
    and divided by the stratum's size, then one Pearson correlation)."""
    if strata is None:
        return weighted_pearson(weighted_ranks(x, W), weighted_ranks(y, W), W)
    rx, ry = np.zeros(W.shape), np.zeros(W.shape)
    for s in np.unique(strata):
        i = np.flatnonzero(strata == s)
        Ws = W[:, i]
        size = Ws.sum(axis=1, keepdims=True)
        with np.errstate(invalid="ignore", divide="ignore"):
            rx[:, i] = np.where(size > 0, (weighted_ranks(x[i], Ws) - (size + 1) / 2) / size, 0)
            ry[:, i] = np.where(size > 0, (weighted_ranks(y[i], Ws) - (size + 1) / 2) / size, 0)
    return weighted_pearson(rx, ry, W)


def spearman_cell(x, y, clusters, strata=None, seed=0, resamples=RESAMPLES, tag=""):
    """{"rho", "ci95", "configurations", "heads"}: Spearman(x, y) (None when undefined) and its
    95 % cluster-bootstrap interval: resamples of the distinct clusters (heads) drawn with
    replacement, each drawn head bringing all its configurations.  Seeded by (seed, crc32(tag)):
    the same cell gets the same interval whatever else is computed.  No interval with < 2 heads."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    ids, cl = np.unique(np.asarray(clusters), return_inverse=True)
    cell = {"rho": None, "ci95": None, "configurations": int(len(x)), "heads": int(len(ids))}
    if len(x) < 3:
        return cell
    if np.ptp(x) == 0 or np.ptp(y) == 0:        # a constant variable: no rank correlation
        cell["constant"] = "r_SVD_int" if np.ptp(x) == 0 else "R_con"
        return cell
    rho = spearman_weighted(x, y, np.ones((1, len(x))), strata)[0]
    if np.isnan(rho):
        return cell
    cell["rho"] = float(rho)
    if len(ids) < 2:
        return cell
    rng = np.random.default_rng([seed, zlib.crc32(tag.encode())])
    counts = rng.multinomial(len(ids), np.full(len(ids), 1 / len(ids)), size=resamples).astype(float)
    block = max(1, 2_000_000 // len(x))
    boot = np.concatenate([spearman_weighted(x, y, counts[b:b + block][:, cl], strata)
                           for b in range(0, resamples, block)])
    boot = boot[~np.isnan(boot)]
    if len(boot):
        cell["ci95"] = [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))]
    return cell


def head_id(r, i):
    """The cluster of a row: its head (layer, head) as one integer; a row that names no head is its own."""
    return r["layer"] * 100_000 + r["head"] if "layer" in r and "head" in r else -1 - i


def breakdown(rows, bridge, seed=0, resamples=RESAMPLES):
    """Spearman(bridge, R_con) pooled, rank-within-m and per m, eps, L, layer (spearman_cell each)."""
    ok = [r for r in rows if r.get(bridge) is not None and r.get("R_con") is not None]
    x = np.array([r[bridge] for r in ok], dtype=float)
    y = np.array([r["R_con"] for r in ok], dtype=float)
    heads = np.array([head_id(r, i) for i, r in enumerate(ok)], dtype=np.int64)
    ms = sorted({r.get("multiplier", "1") for r in ok}, key=frac_key)
    m_idx = np.array([ms.index(r.get("multiplier", "1")) for r in ok], dtype=np.intp)
    # the resamples are seeded by the stratum, not the bridge: both bridges see the same heads drawn
    out = {"pooled": spearman_cell(x, y, heads, None, seed, resamples, "pooled"),
           "rank_within_m": spearman_cell(x, y, heads, m_idx, seed, resamples, "within_m")}
    for name, field in STRATA:
        if not all(field in r for r in ok):
            continue
        values = sorted({r[field] for r in ok}, key=frac_key)
        out[name] = {}
        for v in values:
            i = np.array([r[field] == v for r in ok])
            out[name][str(v)] = spearman_cell(x[i], y[i], heads[i], None, seed, resamples, f"{name}/{v}")
    return out


def share_below(rows, full, below):
    """(configurations that are full-dimensional, share of them with `below`) under the predicate full."""
    sel = [r for r in rows if full(r)]
    return len(sel), (sum(1 for r in sel if below(r)) / len(sel) if sel else None)


def statistics(rows, seed=0, resamples=RESAMPLES):
    """Summary statistics of calibration rows (the keys are listed in docs/report.md):
    * spearman, spearman_ci95, pearson, spearman_by_eps, spearman_by_m, spearman_within_m(_ci95):
      the Q, K-only bridge r_SVD_int against R_con; spearman_bias, spearman_bias_ci95,
      spearman_bias_by_m, spearman_bias_within_m(_ci95) the same for r_svd_int_bias (when present);
    * spearman_breakdown[bridge][pooled | rank_within_m | by_m | by_eps | by_L | by_layer]: cells
      {rho, ci95, configurations, heads} with 95 % cluster-bootstrap intervals (resampling heads);
    * full_dimensional / share_svd_below_exact (r_exact = min(d_head, n - 1)), full_dimensional_old /
      share_svd_below_exact_old (r_exact = d_head), full_rank_bias / share_svd_below_exact_bias
      (r_exact_bias = n - 1, r_svd_int_bias < r_exact_bias); definitions (the texts);
    * sandwiches, median_upper_over_lower, max_upper_over_lower, tight, median_R_con_over_n;
      R_sym_computed (rows with a VERIFIED R_sym), R_sym_informative (R_sym < n);
    * sink_mass_by_m (median), median_seconds_per_config."""
    bridges = [b for b in BRIDGES if b == "r_svd_int" or has_bias_bridge(rows)]
    ok = [r for r in rows if r.get("R_con") is not None and r.get("r_svd_int") is not None]
    s = {"configurations": len(rows), "with_both": len(ok),
         "heads": len({(r["layer"], r["head"]) for r in rows if "layer" in r}), "bridges": bridges,
         "bootstrap": {"resamples": resamples, "seed": seed, "unit": "head (layer, head)"}}
    if rows:
        s["spearman_breakdown"] = {b: breakdown(rows, b, seed, resamples) for b in bridges}
        for b, pre in (("r_svd_int", "spearman"), ("r_svd_int_bias", "spearman_bias")):
            if b not in s["spearman_breakdown"]:
                continue
            t = s["spearman_breakdown"][b]
            if t["pooled"]["rho"] is not None:
                s[pre], s[pre + "_ci95"] = t["pooled"]["rho"], t["pooled"]["ci95"]
            if t["rank_within_m"]["rho"] is not None:
                s[pre + "_within_m"], s[pre + "_within_m_ci95"] = t["rank_within_m"]["rho"], t["rank_within_m"]["ci95"]
            for name in ("by_m", "by_eps"):
                if name in t:
                    s[f"{pre}_{name}"] = {v: c["rho"] for v, c in t[name].items() if c["rho"] is not None}
    if len(ok) >= 3:
        x = np.array([r["r_svd_int"] for r in ok], dtype=float)
        y = np.array([r["R_con"] for r in ok], dtype=float)
        p = weighted_pearson(x, y, np.ones((1, len(x))))[0]
        if not np.isnan(p):
            s["pearson"] = float(p)
    below = lambda r: r.get("r_svd_int") is not None and r["r_svd_int"] < r["r_exact"]
    s["full_dimensional"], s["share_svd_below_exact"] = share_below(
        rows, lambda r: r["r_exact"] == r.get("r_exact_max", min(r["d_head"], r["n"] - 1)), below)
    s["full_dimensional_old"], s["share_svd_below_exact_old"] = share_below(rows, lambda r: r["r_exact"] == r["d_head"], below)
    s["definitions"] = dict(DEFINITIONS)
    if has_bias_bridge(rows):
        s["full_rank_bias"], s["share_svd_below_exact_bias"] = share_below(
            rows, lambda r: r.get("r_exact_bias") == r["n"] - 1,
            lambda r: r.get("r_svd_int_bias") is not None and r["r_svd_int_bias"] < r["r_exact_bias"])
    sw = [r for r in rows if r.get("R_con") is not None and r.get("lower")]
    if sw:
        ratio = [r["R_con"] / r["lower"] for r in sw]
        s.update(sandwiches=len(sw), median_upper_over_lower=float(np.median(ratio)), max_upper_over_lower=float(max(ratio)),
                 tight=sum(1 for r in sw if r["R_con"] == r["lower"]),
                 median_R_con_over_n=float(np.median([r["R_con"] / r["n"] for r in sw])))
    s["R_sym_computed"] = sum(1 for r in rows if r.get("R_sym") is not None)
    s["R_sym_not_applicable"] = sum(1 for r in rows if r.get("R_sym_applicable") is False)
    s["masked"] = sum(1 for r in rows if r.get("mask") is not None)
    s["R_sym_informative"] = sum(1 for r in rows if r.get("R_sym") is not None and r["R_sym"] < r["n"])
    sinks = [r for r in rows if r.get("sink_mass") is not None and "multiplier" in r]
    if sinks:
        s["sink_mass_by_m"] = {m: float(np.median([r["sink_mass"] for r in sinks if r["multiplier"] == m]))
                               for m in sorted({r["multiplier"] for r in sinks}, key=frac_key)}
    s["median_seconds_per_config"] = float(np.median([r["seconds"] for r in rows])) if rows else None
    return s


# ---------------------------------------------------------------- SUMMARY.md
def cell_text(c):
    """'0.537 [0.41, 0.64]' of a spearman_cell; '—' when undefined."""
    if c is None or c["rho"] is None:
        return f"— ({c['constant']} is constant)" if c and c.get("constant") else "—"
    ci = c["ci95"]
    return f"{c['rho']:.3f}" + (f" [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else " (one head: no interval)")


def share_text(count, share, rows, definition):
    """The share cell; when no configuration is full-dimensional, what it is not defined for."""
    if share is not None:
        return f"{100 * share:.1f} % (of {count})"
    if not rows:
        return "not defined (no configurations)"
    if definition == "old" and all(r["n"] - 1 < r["d_head"] for r in rows):
        Ls = sorted({r.get("L", r["n"]) for r in rows})
        return (f"not defined: no configuration has r_exact = d_head = {rows[0]['d_head']} (at L = "
                f"{', '.join(map(str, Ls))}, r_exact ≤ n − 1 < d_head)")
    if definition == "bias" and all(r.get("r_exact_bias", 0) <= r["d_head"] < r["n"] - 1 for r in rows):
        return "not defined: r_exact_bias ≤ d_head < n − 1 in every configuration (no logit bias to raise the rank)"
    what = {"new": "r_exact = min(d_head, n − 1)", "old": "r_exact = d_head",
            "bias": "full-rank centred logits (r_exact_bias = n − 1)"}[definition]
    return f"not defined: no configuration has {what}"


def comparable(kind, value=None, meta=None):
    """Which of the paper's numbers a Spearman row is comparable with (the paper: BERT-base, 84
    heads, Spearman 0.574 / 0.606 in two settings it does not name)."""
    if kind == "pooled":
        return "0.574 / 0.606 if the paper pooled its whole grid (settings not named)"
    if kind == "rank_within_m":
        return "none in the paper: removes the effect of pooling over m"
    if kind == "by_m":
        return ("0.574 / 0.606 if the paper used the model's own temperature (m = 1 is the real model)" if value == "1"
                else "none (a temperature the model does not use)")
    if kind == "by_eps":
        return "one of 0.574 / 0.606 if the paper's two settings are two ε"
    if kind == "by_L":
        return "one of 0.574 / 0.606 if the paper's two settings are two lengths"
    return "none (the paper gives no per-layer value)"


def per_length_table(rows, g, bias):
    """The medians per (L, m): r_exact, r_SVD_int (and the bias bridge), r_opt, lower, R_con, Γ, sink mass."""
    sink = any(r.get("sink_mass") is not None for r in rows)
    cols = ["L", "m", "r_exact", "r_SVD_int"] + (["r_exact (bias)", "r_SVD_int (bias)"] if bias else []) + \
           ["r_opt", "lower", "R_con", "Γ"] + (["sink mass"] if sink else [])
    keys = ["r_exact", "r_svd_int"] + (["r_exact_bias", "r_svd_int_bias"] if bias else []) + \
           ["r_opt", "lower", "R_con", "Gamma"] + (["sink_mass"] if sink else [])
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for Lv in g["lengths"]:
        for m in g["multipliers"]:
            sel = [r for r in rows if r["L"] == Lv and r["multiplier"] == m]
            if not sel:
                continue
            cells = []
            for k in keys:
                v = [r[k] for r in sel if r.get(k) is not None]
                cells.append(fmt(float(np.median(v)), 3 if k == "sink_mass" else 1) if v else "—")
            out.append(f"| {Lv} | {m} | " + " | ".join(cells) + " |")
    return out


def spearman_table(s):
    """The breakdown table: one row per stratum, both bridges side by side."""
    t = s.get("spearman_breakdown")
    if not t:
        return ["No Spearman correlation: the rows name no heads."]
    bias = "r_svd_int_bias" in t
    cols = ["stratum", "configurations", "heads", "Q, K only: ρ [95 % CI]"] + \
           (["with bias: ρ [95 % CI]"] if bias else []) + ["comparable with (paper)"]
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]

    def line(label, kind, get, value=None):
        a = get(t["r_svd_int"])
        cells = [label, str(a["configurations"]), str(a["heads"]), cell_text(a)] + \
                ([cell_text(get(t["r_svd_int_bias"]))] if bias else []) + [comparable(kind, value)]
        out.append("| " + " | ".join(cells) + " |")
    line("pooled", "pooled", lambda b: b["pooled"])
    line("rank within m", "rank_within_m", lambda b: b["rank_within_m"])
    for name, label in (("by_m", "m = {}"), ("by_eps", "ε = {}"), ("by_L", "L = {}"), ("by_layer", "layer {}")):
        for v in t["r_svd_int"].get(name, {}):
            line(label.format(v), name,
                 lambda b, v=v: b.get(name, {}).get(v, {"rho": None, "configurations": 0, "heads": 0}), v)
    return out


def summary_markdown(meta, s, rows):
    """SUMMARY.md: our numbers beside the paper's, the Spearman breakdown (both bridges), the shares
    under both definitions, the sandwiches, medians per length and multiplier (with the sink mass)."""
    rec = meta["reconstruction"]
    r32 = [r["max_abs_diff_float32_model"] for r in rec if "max_abs_diff_float32_model" in r]
    r64 = [r["max_abs_diff_float64_model"] for r in rec if "max_abs_diff_float64_model" in r]
    g, info = meta["grid"], meta["info"]
    nheads = len(g["layers"]) * len(g["heads"])
    bias = "r_svd_int_bias" in s.get("bridges", ())
    sym = s.get("R_sym_computed", 0)
    bridge_note = ("the bias-aware bridge (r_SVD_int etc. of the full centred logits βQKᵀ + bias) is shown beside the "
                   "Q, K-only one" + ("; this model has no logit bias, so the two are identical" if bias and all(
                       r.get("r_svd_int_bias") == r.get("r_svd_int") and r.get("r_exact_bias") == r.get("r_exact")
                       for r in rows) else "")) if bias else \
        "these rows predate the bias-aware bridge (rerun `certkit calibrate` on this folder to add it)"
    L = [f"# Real-model calibration: {meta['model']} ({info['class']}, {info['layers']} layers × "
         f"{info['heads']} heads, d_head = {info['d_head']})", "",
         f"Grid: layers {g['layers']}, heads {g['heads']} ({nheads} heads) × lengths {g['lengths']} × temperature "
         f"multipliers {g['multipliers']} (β = m/√d_head; m = 1 is the model) × eps {g['eps']}: "
         f"{s['configurations']} configurations. Text: {meta['text']}, sha256 `{meta['text_sha256'][:16]}…`.", "",
         "Every R_con and lower bound below is a kernel-VERIFIED certificate under `certificates/`"
         + (", and so is every R_sym reported." if sym else
            "; R_sym (the symbolic chain) is not applicable to these row-masked heads (— in the rows; see the row "
            "mask below)." if rows and s.get("R_sym_not_applicable") == len(rows) else
            "; R_sym (the symbolic chain) was not computed or not verified in any configuration, and this summary "
            "makes no claim about it."), "",
         f"Bridges: {bridge_note}.", ""] + ([
         f"Row mask: {', '.join(sorted({r['mask'] for r in rows if r.get('mask')}))} in {s['masked']} configurations "
         "(a decoder); " + DEFINITIONS["masked"] + ".", ""] if s.get("masked") else []) + [
         "## Our numbers beside the paper's", "",
         "| quantity | ours | paper (BERT-base) | comparable with |", "|---|---|---|---|",
         f"| heads | {nheads} ({meta['model']}: {info['layers']} layers × {info['heads']}, d_head {info['d_head']}) | "
         f"{PAPER['heads']} (7 layers × 12, d_head 64) | the head count only |",
         f"| reconstruction max abs diff (float32 model) | {max(r32):.3g} | {PAPER['reconstruction']:.3g} | "
         "1.57e-6: the same float32 floor |" if r32 else "| reconstruction (float32 model) | — | 1.57e-6 | — |",
         f"| reconstruction, model in float64 | {f'{r64[0]:.3g}' if r64 else '—'} | — | ours only |",
         f"| Spearman(r_SVD_int, R_con), pooled | {cell_text(s.get('spearman_breakdown', {}).get('r_svd_int', {}).get('pooled'))} "
         f"| {PAPER['spearman']} | {comparable('pooled')}; our R_con is our own certified constructive rank |"]
    if bias:
        L.append(f"| the same with the bias-aware bridge | {cell_text(s['spearman_breakdown']['r_svd_int_bias']['pooled'])} "
                 f"| {PAPER['spearman']} | as above (BERT-base has no logit bias) |")
    L += [f"| Pearson(r_SVD_int, R_con) | {fmt(s.get('pearson'))} | — | — |",
          f"| share of full-dimensional configurations with r_SVD_int < r_exact, full-dimensional ⇔ r_exact = "
          f"min(d_head, n − 1) | {share_text(s['full_dimensional'], s['share_svd_below_exact'], rows, 'new')} | "
          f"{100 * PAPER['share_svd_below_exact']:.1f} % | 41.9 % (τ^width ≤ ε/3 as in the paper; the two definitions "
          "agree when every n − 1 ≥ d_head) |",
          f"| the same, old definition r_exact = d_head | "
          f"{share_text(s['full_dimensional_old'], s['share_svd_below_exact_old'], rows, 'old')} | "
          f"{100 * PAPER['share_svd_below_exact']:.1f} % | 41.9 % if the paper's full-dimensional means r_exact = d_head |"]
    if bias:
        L.append(f"| r_SVD_int_bias < r_exact_bias among configurations whose centred logits have full rank "
                 f"(r_exact_bias = n − 1) | {share_text(s.get('full_rank_bias', 0), s.get('share_svd_below_exact_bias'), rows, 'bias')} "
                 "| — | none (the paper's bridge ignores any bias) |")
    L += ["", "Definitions: full-dimensional ⇔ " + DEFINITIONS["full_dimensional"] + "; old: "
          + DEFINITIONS["full_dimensional_old"] + (("; bias bridge: " + DEFINITIONS["full_rank_bias"]) if bias else "")
          + ". Rank within m: " + DEFINITIONS["rank_within_m"] + ". Intervals: " + DEFINITIONS["bootstrap"]
          + f" ({s.get('bootstrap', {}).get('resamples', RESAMPLES)} resamples, seed {s.get('bootstrap', {}).get('seed', 0)}).", "",
          "## Spearman(r_SVD_int, R_con) by stratum", ""]
    L += spearman_table(s)
    L += ["", "## Sandwiches", ""]
    if s.get("sandwiches"):
        L.append(f"{s['sandwiches']} configurations with both bounds; median R_con / lower "
                 f"{fmt(s.get('median_upper_over_lower'), 2)}, max {fmt(s.get('max_upper_over_lower'), 2)}, tight "
                 f"{s.get('tight', 0)}; median R_con / n {fmt(s.get('median_R_con_over_n'), 3)}.")
    else:
        L.append("No configuration has both certified bounds.")
    if sym:
        L.append(f"R_sym (the symbolic chain) is VERIFIED in {sym} configurations and below n in "
                 f"{s.get('R_sym_informative', 0)} of them"
                 + (": as the paper says, the symbolic shape is not a finite constructive certificate at these "
                    "dimensions." if not s.get("R_sym_informative") else "."))
    elif s.get("R_sym_not_applicable"):
        L.append(f"R_sym: — (not applicable) in {s['R_sym_not_applicable']} configurations: their heads carry a row "
                 "mask, and the symbolic chain assumes one key set shared by every row (docs/mathematics.md §4.5, "
                 "§8.5; the kernel answers UNSUPPORTED), so no chain certificate is attempted.")
    else:
        L.append("R_sym: not computed (no VERIFIED chain certificate in any configuration); no claim is made about it.")
    if s.get("sink_mass_by_m"):
        L += ["", "## Attention sink", "",
              "Sink mass (" + DEFINITIONS["sink_mass"] + "), median over heads and lengths per multiplier: "
              + ", ".join(f"m = {m}: {v:.3f}" for m, v in s["sink_mass_by_m"].items())
              + ". The last column of the table below gives it per (L, m) beside the median R_con."]
    L += ["", "## Per length and multiplier (medians over heads and eps)", ""]
    L += per_length_table(rows, g, bias)
    L += ["", f"Median time per configuration (one eps): {fmt(s.get('median_seconds_per_config'), 2)} s. "
          "Rows: `results.csv` / `results.json`; figures (PNG, PDF, SVG): "
          + ", ".join(f"`{f}.png`" for f in FIGURES if f != "sink_mass" or s.get("sink_mass_by_m"))
          + "; `certkit report` on this folder builds `report.html`.", ""]
    return "\n".join(L)


# ---------------------------------------------------------------- figures
def curves_with_bias(out, curves):
    """The curves of collect() with the other curves of each group (tau_width_bias ...) when stored."""
    full = []
    for c in curves:
        try:
            with open(group_path(out, c["L"], c["layer"], c["head"], Fraction(c["multiplier"]))) as f:
                g = json.load(f)
        except OSError:
            g = {}
        extra = {k: g[k] for k in ("tau_width_bias", "tau_exact", "tau_spec") if k in g}
        if "tau_width_bias_r" in g:             # computed at some r only (grid.bridge): NaN elsewhere
            dense = [float("nan")] * (max(g["tau_width_bias_r"]) + 1)
            for r, t in zip(g["tau_width_bias_r"], g["tau_width_bias"]):
                dense[r] = t
            extra["tau_width_bias"] = dense
        full.append(dict(c, **extra))
    return full


def m_label(m):
    """'$m = 1/4$' for a multiplier."""
    return f"$m = {m}$"


def head_bootstrap_median(values, clusters, seed, tag, resamples=RESAMPLES):
    """(median, [lo, hi]) of values with a 95 % cluster-bootstrap interval over the heads (clusters)."""
    v = np.asarray(values, dtype=float)
    ids, cl = np.unique(np.asarray(clusters), return_inverse=True)
    med = float(np.median(v))
    if len(ids) < 2:
        return med, [med, med]
    rng = np.random.default_rng([seed, zlib.crc32(tag.encode())])
    W = rng.multinomial(len(ids), np.full(len(ids), 1 / len(ids)), size=resamples)[:, cl]
    order = np.argsort(v)
    cw = np.cumsum(W[:, order], axis=1)
    half = cw[:, -1:] / 2
    meds = v[order][np.argmax(cw >= half, axis=1)]
    return med, [float(np.percentile(meds, 2.5)), float(np.percentile(meds, 97.5))]


def bridge_series(rows, s):
    """The bridges to draw: (field, label, colour, marker); the bias-aware one only when it differs."""
    bias = "r_svd_int_bias" in s.get("bridges", ())
    same = bias and all(r.get("r_svd_int_bias") == r.get("r_svd_int") for r in rows)
    return [("r_svd_int", "Q, K only" + (" (= with bias: no bias)" if same else ""), "C0", "o")] + \
        ([("r_svd_int_bias", r"with bias ($\beta QK^\top + B$)", "C3", "^")] if bias and not same else [])


def figure_bridge_vs_con(rows, s, path, seed=0):
    """(a) r_SVD_int(eps/3) against R_con, one panel per m, both bridges (jittered: integer points
    stack); Spearman's rho of each bridge in the panel's corner."""
    import matplotlib.pyplot as plt
    from ..figures import save_figure
    ms = sorted({r["multiplier"] for r in rows}, key=frac_key)
    series = bridge_series(rows, s)
    ncol = 3 if len(ms) > 4 else 2 if len(ms) > 1 else 1
    nrow = -(-len(ms) // ncol)
    fig, axes = plt.subplots(nrow, ncol, figsize=(3.4, 0.75 + 1.25 * nrow), sharex=True, sharey=True, squeeze=False,
                             layout="constrained")
    rng = np.random.default_rng(seed)
    t = s.get("spearman_breakdown", {})
    many = len(rows) > 1500
    ys = [r["R_con"] for r in rows if r.get("R_con")]
    for ax, m in zip(axes.flat, ms):
        for k, (key, label, color, marker) in enumerate(series):
            sel = [r for r in rows if r["multiplier"] == m and r.get(key) is not None and r.get("R_con") is not None]
            if sel:
                x = np.array([r[key] for r in sel], dtype=float) + rng.uniform(-0.35, 0.35, len(sel))
                y = np.array([r["R_con"] for r in sel], dtype=float) * 10 ** rng.uniform(-0.035, 0.035, len(sel))
                ax.scatter(x, y, s=2 if many else 6, alpha=0.2 if many else 0.6, lw=0, color=color, marker=marker,
                           label=label, rasterized=many)
            c = t.get(key, {}).get("by_m", {}).get(m)
            if c and c["rho"] is not None:
                ax.text(0.04, 0.96 - 0.14 * k, rf"$\rho$ = {c['rho']:.2f}", transform=ax.transAxes, color=color,
                        ha="left", va="top", fontsize=8, bbox={"fc": "white", "ec": "none", "alpha": 0.7, "pad": 0.5})
        ax.set_yscale("log")
        ax.grid(alpha=0.3, lw=0.4)
        ax.set_title(m_label(m), fontsize=8, pad=2)
    if ys:
        from ..figures import plain_log_axis
        plain_log_axis(axes[0, 0].yaxis, min(ys) * 0.8, max(ys) * 1.25)
    for ax in axes.flat[len(ms):]:
        ax.set_visible(False)
    for j in range(ncol):                              # the lowest visible panel of each column shows its ticks
        col = [ax for ax in axes[:, j] if ax.get_visible()]
        if col:
            col[-1].xaxis.set_tick_params(labelbottom=True)
    fig.supxlabel(r"$r_{\mathrm{SVD,int}}(\varepsilon/3)$", fontsize=8)
    fig.supylabel(r"$R_{\mathrm{con}}$ (certified constructive rank)", fontsize=8)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    if handles:
        leg = fig.legend(handles, labels, loc="outside upper center", ncol=len(handles), markerscale=2.5,
                         handletextpad=0.2, frameon=False)
        for h in leg.legend_handles:
            h.set_alpha(1)
    return save_figure(fig, path)


def figure_spearman_by_m(rows, s, path):
    """(b) Spearman(r_SVD_int, R_con) per m with 95 % cluster-bootstrap intervals, both bridges."""
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from ..figures import save_figure
    t = s["spearman_breakdown"]
    fig, ax = plt.subplots(figsize=(3.4, 2.5), layout="constrained")
    ms = list(t["r_svd_int"]["by_m"])
    x = np.log2([float(Fraction(m)) for m in ms])
    series = bridge_series(rows, s)
    handles = []
    for k, (bridge, label, color, marker) in enumerate(series):
        cells = [t[bridge]["by_m"].get(m, {"rho": None, "ci95": None}) for m in ms]
        rho = np.array([np.nan if c["rho"] is None else c["rho"] for c in cells])
        lo = np.array([np.nan if not c["ci95"] else c["ci95"][0] for c in cells])
        hi = np.array([np.nan if not c["ci95"] else c["ci95"][1] for c in cells])
        off = (k - (len(series) - 1) / 2) * 0.12
        handles.append(ax.errorbar(x + off, rho, yerr=[np.nan_to_num(rho - lo), np.nan_to_num(hi - rho)],
                                   fmt=marker + "-", color=color, ms=4, lw=1, capsize=2, label=label))
        pooled = t[bridge]["pooled"]["rho"]
        if pooled is not None:
            ax.axhline(pooled, color=color, lw=0.7, ls="--")
    for v in (0.574, 0.606):
        ax.axhline(v, color="0.35", lw=0.8, ls=":")
    handles += [Line2D([], [], color="0.3", lw=0.7, ls="--", label="pooled over the grid"),
                Line2D([], [], color="0.35", lw=0.8, ls=":", label="paper: 0.574 / 0.606")]
    ax.set_xticks(x, ms)
    ax.set_xlim(x.min() - 0.4, x.max() + 0.4)
    ax.set_ylim(-1.05, 1.05)
    ax.set_xlabel(r"temperature multiplier $m$ ($\beta = m/\sqrt{d_{\mathrm{head}}}$)")
    ax.set_ylabel(r"Spearman $\rho(r_{\mathrm{SVD,int}}, R_{\mathrm{con}})$")
    ax.grid(alpha=0.3, lw=0.4)
    fig.legend(handles=handles, loc="outside upper center", ncol=2, handlelength=1.8, frameon=False,
               columnspacing=1.0)
    return save_figure(fig, path)


def figure_sandwich_widths(rows, path):
    """(c) R_con / lower per length L, one box per multiplier m (log scale; 1 = tight)."""
    import matplotlib.pyplot as plt
    from ..figures import save_figure
    sw = [r for r in rows if r.get("R_con") is not None and r.get("lower")]
    Ls = sorted({r["L"] for r in sw})
    ms = sorted({r["multiplier"] for r in sw}, key=frac_key)
    fig, ax = plt.subplots(figsize=(3.4, 2.4), layout="constrained")
    width = 0.8 / max(len(ms), 1)
    colors = plt.get_cmap("viridis")(np.linspace(0.05, 0.9, max(len(ms), 1)))
    for j, m in enumerate(ms):
        data, pos = [], []
        for i, Lv in enumerate(Ls):
            v = [r["R_con"] / r["lower"] for r in sw if r["L"] == Lv and r["multiplier"] == m]
            if v:
                data.append(v)
                pos.append(i + (j - (len(ms) - 1) / 2) * width)
        if not data:
            continue
        bp = ax.boxplot(data, positions=pos, widths=width * 0.8, patch_artist=True, showfliers=True,
                        flierprops={"marker": ".", "ms": 2, "alpha": 0.5, "mec": colors[j], "mfc": colors[j]},
                        medianprops={"color": "k", "lw": 0.8}, whiskerprops={"lw": 0.6}, capprops={"lw": 0.6},
                        boxprops={"lw": 0.6})
        for b in bp["boxes"]:
            b.set_facecolor(colors[j])
        ax.plot([], [], "s", color=colors[j], label=m_label(m))
    ax.axhline(1, color="0.4", lw=0.6, ls=":")
    ax.set_yscale("log")
    ratios = [r["R_con"] / r["lower"] for r in sw] or [1]
    ax.set_ylim(0.92, max(ratios) * 1.15)
    from ..figures import plain_log_axis
    plain_log_axis(ax.yaxis, 1, max(ratios) * 1.15)
    ax.set_xticks(range(len(Ls)), [f"$L = {Lv}$" for Lv in Ls])
    ax.set_xlim(-0.55, len(Ls) - 0.45)
    ax.set_ylabel(r"$R_{\mathrm{con}}\,/\,$lower (1 = tight)")
    ax.grid(alpha=0.3, lw=0.4, axis="y")
    fig.legend(loc="outside upper center", ncol=min(len(ms), 5), handletextpad=0.1, columnspacing=0.7,
               frameon=False)
    return save_figure(fig, path)


def median_curve(curves):
    """The median (over the curves that reach each r) of curves of different lengths."""
    k = max(len(c) for c in curves)
    M = np.full((len(curves), k), np.nan)
    for i, c in enumerate(curves):
        M[i, :len(c)] = c
    with warnings.catch_warnings():         # an r no curve reaches (NaN) stays NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(M, axis=0)


def figure_tau_curves(rows, curves, path):
    """(d) median τ_r^width against r per m (labelled lines) and the ε/3 thresholds (labelled), one
    column per length L (curves of different lengths are not pooled); a second row for the
    bias-aware bridge when it differs, drawn with markers at the r where it was computed."""
    import matplotlib.pyplot as plt
    from ..figures import save_figure
    ms = sorted({c["multiplier"] for c in curves}, key=frac_key)
    Ls = sorted({c["L"] for c in curves})
    bias = any("tau_width_bias" in c and c["tau_width_bias"] != c["tau_width"] for c in curves)
    panels = [("tau_width", "Q, K only" if bias else "Q, K only (= with bias)" if any(
        "tau_width_bias" in c for c in curves) else "Q, K only")] + \
        ([("tau_width_bias", r"with bias ($\beta QK^\top + B$)")] if bias else [])
    width = 3.4 if len(Ls) == 1 else 7.0
    fig, axes = plt.subplots(len(panels), len(Ls), figsize=(width, 1.05 + 1.65 * len(panels)), squeeze=False,
                             sharey=True, layout="constrained")
    colors = plt.get_cmap("viridis")(np.linspace(0.05, 0.9, max(len(ms), 1)))
    eps = sorted({r["eps"] for r in rows}, key=frac_key)
    dashes = [(0, (1, 1.5)), (0, (4, 2)), (0, (6, 2, 1, 2)), (0, (2, 3))]
    for i, (key, title) in enumerate(panels):
        for jL, Lv in enumerate(Ls):
            ax = axes[i, jL]
            for j, m in enumerate(ms):
                cs = [c[key] for c in curves if c["multiplier"] == m and c["L"] == Lv and c.get(key)]
                if cs:
                    med = median_curve(cs)
                    at = np.isfinite(med)           # the bias curves are sampled at some r only
                    sparse = not at.all()
                    ax.semilogy(np.arange(len(med))[at], np.maximum(med[at], 1e-6), color=colors[j], lw=1.1,
                                marker="." if sparse else None, ms=3, label=m_label(m))
            for k, e in enumerate(eps):
                ax.axhline(float(Fraction(e)) / 3, color="0.25", lw=0.8, ls=dashes[k % len(dashes)],
                           label=rf"$\varepsilon/3 = {Fraction(e) / 3}$")
            ax.set_ylim(1e-3, 3)
            ax.set_xlim(0, None)
            if jL == 0:
                ax.set_ylabel(r"median $\tau_r^{\mathrm{width}}$")
            ax.set_title(f"{title}, $L = {Lv}$", fontsize=8, pad=2)
            ax.grid(alpha=0.3, lw=0.4)
            if i == len(panels) - 1:
                ax.set_xlabel(r"$r$ (SVD truncation rank)")
    fig.legend(*axes[0, 0].get_legend_handles_labels(), loc="outside lower center", ncol=3 if len(Ls) == 1 else 8,
               handlelength=1.8, columnspacing=0.9, frameon=False)
    return save_figure(fig, path)


def figure_sink_mass(rows, path, seed=0):
    """(e) median attention mass on the special tokens against m, per length, with 95 % head-bootstrap intervals."""
    import matplotlib.pyplot as plt
    from ..figures import save_figure
    one = {}
    for r in rows:                                  # one value per group (it does not depend on eps)
        if r.get("sink_mass") is not None:
            one[(r["L"], r["layer"], r["head"], r["multiplier"])] = r["sink_mass"]
    Ls = sorted({k[0] for k in one})
    ms = sorted({k[3] for k in one}, key=frac_key)
    fig, ax = plt.subplots(figsize=(3.4, 2.2), layout="constrained")
    for i, Lv in enumerate(Ls):
        x, y, lo, hi = [], [], [], []
        for m in ms:
            ks = [k for k in one if k[0] == Lv and k[3] == m]
            if not ks:
                continue
            med, ci = head_bootstrap_median([one[k] for k in ks], [k[1] * 100_000 + k[2] for k in ks], seed,
                                            f"sink/{Lv}/{m}")
            x.append(np.log2(float(Fraction(m))) + (i - (len(Ls) - 1) / 2) * 0.08)
            y.append(med)
            lo.append(med - ci[0])
            hi.append(ci[1] - med)
        ax.errorbar(x, y, yerr=[lo, hi], fmt="os^Dv"[i % 5] + "-", ms=3.5, lw=1, capsize=2, label=f"$L = {Lv}$")
    ax.set_xticks(np.log2([float(Fraction(m)) for m in ms]), ms)
    ax.set_ylim(0, 1)
    ax.set_xlabel(r"temperature multiplier $m$")
    ax.set_ylabel("attention mass on the special\ntokens (median over heads)")
    ax.grid(alpha=0.3, lw=0.4)
    ax.legend(loc="upper left", borderpad=0.3)
    return save_figure(fig, path)


def figures(rows, curves, out, s=None, seed=0):
    """The calibration figures under out, each as .png, .pdf and .svg (FIGURES; docs/report.md):
    bridge_vs_con_by_m, spearman_by_m, sandwich_widths, tau_width_curves and, when the rows carry
    it, sink_mass.  The old three PNGs (OLD_PLOTS) are removed.  Returns the PNG paths written."""
    from ..figures import figure_style
    s = s if s is not None else statistics(rows, seed)
    for f in OLD_PLOTS:
        if os.path.exists(os.path.join(out, f)):
            os.remove(os.path.join(out, f))
    made = []
    with figure_style():
        made += figure_bridge_vs_con(rows, s, os.path.join(out, "bridge_vs_con_by_m"), seed)
        if s.get("spearman_breakdown", {}).get("r_svd_int", {}).get("by_m"):
            made += figure_spearman_by_m(rows, s, os.path.join(out, "spearman_by_m"))
        if any(r.get("R_con") is not None and r.get("lower") for r in rows):
            made += figure_sandwich_widths(rows, os.path.join(out, "sandwich_widths"))
        if curves:
            made += figure_tau_curves(rows, curves, os.path.join(out, "tau_width_curves"))
        if any(r.get("sink_mass") is not None for r in rows):
            made += figure_sink_mass(rows, os.path.join(out, "sink_mass"), seed)
    return [p for p in made if p.endswith(".png")]




def load(out):
    """(meta, rows, curves) of a calibrate folder: meta.json and the finished groups under configs/
    (results.json's rows when configs/ is absent)."""
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    if os.path.isdir(os.path.join(out, "configs")):
        rows, curves = collect(out, meta["grid"])
        return meta, rows, curves_with_bias(out, curves)
    with open(os.path.join(out, "results.json")) as f:
        return meta, json.load(f)["rows"], []


def csv_fields(rows):
    """The columns of results.csv: FIELDS, without the bias-aware bridge's when no row has it."""
    return FIELDS if has_bias_bridge(rows) else [f for f in FIELDS if f not in BIAS_FIELDS]


def write_summary(out, with_plots=True):
    """Rebuild results.csv, results.json, SUMMARY.md (and the figures) of out from its meta.json and
    finished configs; returns (rows, statistics)."""
    meta, rows, curves = load(out)
    s = statistics(rows)
    write_rows(os.path.join(out, "results.csv"), rows, csv_fields(rows))
    write_atomic(os.path.join(out, "results.json"), {"meta": meta, "statistics": s, "rows": rows})
    write_text(os.path.join(out, "SUMMARY.md"), with_producer(summary_markdown(meta, s, rows), meta.get("producer")))
    if with_plots and rows:
        figures(rows, curves, out, s)
    return rows, s
