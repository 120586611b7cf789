"""The summary of a calibration folder (certkit.calibration): results.csv, results.json and SUMMARY.md
(our numbers beside the paper's, the Spearman breakdown, the shares, the sandwiches, medians per
length and multiplier) and the figures (plots.py), rebuilt from the finished groups under DIR/configs
(write_summary); load reads a folder back."""
import json
import os
from fractions import Fraction

import numpy as np

from ..figures import fmt
from ..outputs import write_atomic, write_json, write_rows
from ..provenance import with_producer
from .configs import collect, group_path
from .plots import FIGURES, figures
from .statistics import DEFINITIONS, RESAMPLES, has_bias_bridge, statistics

PAPER = {"spearman": "0.574 / 0.606", "share_svd_below_exact": 0.419, "reconstruction": 1.57e-6, "heads": 84}
FIELDS = ["model", "L", "layer", "head", "multiplier", "beta", "eps", "n", "d_head", "r_exact", "r_exact_certified_lower",
          "r_svd_int", "r_opt", "R_sym", "R_sym_r", "R_con", "upper_method", "lower", "lower_kind", "Gamma",
          "r_exact_bias", "r_exact_bias_certified_lower", "r_svd_int_bias", "r_opt_bias", "Gamma_bias", "sink_mass",
          "bridge", "mask", "r_exact_max", "R_sym_applicable", "certificates", "seconds"]
BIAS_FIELDS = ("r_exact_bias", "r_exact_bias_certified_lower", "r_svd_int_bias", "r_opt_bias", "Gamma_bias",
               "sink_mass", "bridge")


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
    bias = "r_svd_int_bias" in s.get("bridges", ())
    L = summary_opening(meta, s, rows, bias) + paper_table(meta, s, rows, bias)
    L += ["## Spearman(r_SVD_int, R_con) by stratum", ""]
    L += spearman_table(s)
    L += sandwich_lines(s)
    L += ["", "## Per length and multiplier (medians over heads and eps)", ""]
    L += per_length_table(rows, meta["grid"], bias)
    L += ["", f"Median time per configuration (one eps): {fmt(s.get('median_seconds_per_config'), 2)} s. "
          "Rows: `results.csv` / `results.json`; figures (PNG, PDF, SVG): "
          + ", ".join(f"`{f}.png`" for f in FIGURES if f != "sink_mass" or s.get("sink_mass_by_m"))
          + "; `certkit report` on this folder builds `report.html`.", ""]
    return "\n".join(L)


def summary_opening(meta, s, rows, bias):
    """SUMMARY.md's title and first paragraphs: the model, the grid, the text, what is certified, the
    bridges and the row mask (bias: the rows have the bias-aware bridge)."""
    g, info = meta["grid"], meta["info"]
    nheads = len(g["layers"]) * len(g["heads"])
    sym = s.get("R_sym_computed", 0)
    bridge_note = ("the bias-aware bridge (r_SVD_int etc. of the full centred logits βQKᵀ + bias) is shown beside the "
                   "Q, K-only one" + ("; this model has no logit bias, so the two are identical" if bias and all(
                       r.get("r_svd_int_bias") == r.get("r_svd_int") and r.get("r_exact_bias") == r.get("r_exact")
                       for r in rows) else "")) if bias else \
        "these rows predate the bias-aware bridge (rerun `certkit calibrate` on this folder to add it)"
    return [f"# Real-model calibration: {meta['model']} ({info['class']}, {info['layers']} layers × "
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
            "(a decoder); " + DEFINITIONS["masked"] + ".", ""] if s.get("masked") else [])


def paper_table(meta, s, rows, bias):
    """Our numbers beside the paper's: a table, then the definitions it uses."""
    rec = meta["reconstruction"]
    r32 = [r["max_abs_diff_float32_model"] for r in rec if "max_abs_diff_float32_model" in r]
    r64 = [r["max_abs_diff_float64_model"] for r in rec if "max_abs_diff_float64_model" in r]
    g, info = meta["grid"], meta["info"]
    nheads = len(g["layers"]) * len(g["heads"])
    L = ["## Our numbers beside the paper's", "",
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
          + f" ({s.get('bootstrap', {}).get('resamples', RESAMPLES)} resamples, seed {s.get('bootstrap', {}).get('seed', 0)}).", ""]
    return L


def sandwich_lines(s):
    """SUMMARY.md's sandwiches, R_sym and attention-sink paragraphs."""
    sym = s.get("R_sym_computed", 0)
    L = ["", "## Sandwiches", ""]
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
    return L


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
    write_json(os.path.join(out, "results.json"), {"meta": meta, "statistics": s, "rows": rows})
    write_atomic(os.path.join(out, "SUMMARY.md"), with_producer(summary_markdown(meta, s, rows), meta.get("producer")))
    if with_plots and rows:
        figures(rows, curves, out, s)
    return rows, s
