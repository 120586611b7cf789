"""The body of a report page for each kind of output folder (certkit report): calibrate (the
statistics recomputed from the rows, the SUMMARY tables, the figures, the rows), certify (what was
run, the sandwiches, their statistics, a sandwich figure, the rows), scale (scaling.md / causal.md /
causal-real.md, the points, every figure) and compare (what was run, summary.md, every figure).
Each returns (title, body HTML, figures, rows)."""
import csv
import os
from fractions import Fraction

from ..figures import COLUMN_WIDTH, METADATA, figure_style, fmt, plain_log_axis
from ..provenance import producer_line
from .markup import ReportError, esc, figures_section, markdown, plain, png_figure, read_json, read_text, short, table


CALIBRATE_CAPTIONS = {
    "bridge_vs_con_by_m": "r_SVD_int(ε/3) against the certified constructive rank R_con, one panel per temperature "
                          "multiplier m, both bridges (jittered: integer points stack); ρ per panel is Spearman's.",
    "spearman_by_m": "Spearman ρ(r_SVD_int, R_con) per m with 95 % cluster-bootstrap intervals (resampling heads); "
                     "dashed: pooled over the grid; dotted: the paper's 0.574 / 0.606.",
    "sandwich_widths": "Certified sandwich widths R_con / lower per length L, one box per m (1 = tight).",
    "tau_width_curves": "Median SVD-bridge residual τ_r^width against r per m; dotted: the ε/3 thresholds that "
                        "define r_SVD_int(ε/3).",
    "sink_mass": "Median attention mass on the two special tokens against m, per length, with 95 % head-bootstrap "
                 "intervals: the attention sink that makes R_con collapse at large m.",
}


def calibrate_html(folder, row_limit):
    from ..calibration.plots import FIGURES, figures
    from ..calibration.statistics import has_bias_bridge, statistics
    from ..calibration.summary import load, summary_markdown
    meta, rows, curves = load(folder)
    if not rows:
        raise ReportError(f"{folder}: a calibrate folder with no finished configuration yet (configs/ is empty)")
    s = statistics(rows)
    expected = [f for f in FIGURES if f != "sink_mass" or any(r.get("sink_mass") is not None for r in rows)]
    missing = [f for f in expected if not os.path.exists(os.path.join(folder, f + ".png"))]
    made = bool(missing)
    if missing:
        figures(rows, curves, folder, s)
    md = summary_markdown(meta, s, rows)
    parts = [markdown(md, limit=10 ** 6)]
    figs, nfig = figures_section(folder, CALIBRATE_CAPTIONS, FIGURES)
    parts += ["<h2>Figures</h2>", '<p class="note">' + ("Made now from the rows (PNG, PDF and SVG in the folder). "
              if made else "PNG embedded; PDF and SVG versions are beside each PNG in the folder. ") + "</p>", figs]
    cols = ["L", "layer", "head", "multiplier", "eps", "n", "r_exact", "r_svd_int"] + \
           (["r_exact_bias", "r_svd_int_bias"] if has_bias_bridge(rows) else []) + \
           ["r_opt", "lower", "R_con", "R_sym", "Gamma"] + (["sink_mass"] if any("sink_mass" in r for r in rows) else [])
    value = lambda v: f"{v:.4g}" if isinstance(v, float) else v
    na = lambda r, c: c == "R_sym" and r.get("R_sym_applicable") is False      # a row-masked head: no chain
    masked = any(na(r, "R_sym") for r in rows)
    parts += ["<h2>Configurations</h2>",
              f"<p>{len(rows)} configurations (one per length, head, multiplier and ε)."
              + (" R_sym —: not applicable, the head has a row mask (the symbolic chain assumes one key set shared by "
                 "every row; docs/mathematics.md §4.5)." if masked else "") + "</p>",
              table(cols, [["—" if na(r, c) else value(r.get(c)) for c in cols] for r in rows], row_limit,
                    "results.csv / results.json")]
    parts.insert(1, f"<p>Produced by {esc(producer_line(meta.get('producer')))}.</p>")
    title = f"certkit calibrate: {meta['model']} ({meta['info']['layers']} layers × {meta['info']['heads']} heads)"
    return title, "\n".join(parts), nfig, len(rows)


# ---------------------------------------------------------------- certify
FACET_HEADS = 40          # heads per facet of the sandwich figure for rows without a layer (head files)


def sandwich_facets(rows):
    """[(title, rows)]: one facet per layer for a model's rows (every layer, none cut off), else the
    heads in groups of FACET_HEADS."""
    if rows and all("layer" in r for r in rows):
        layers = sorted(dict.fromkeys(r["layer"] for r in rows))
        return [(f"layer {l}", [r for r in rows if r["layer"] == l]) for l in layers]
    heads = list(dict.fromkeys(str(r["head"]) for r in rows))
    groups = [heads[i:i + FACET_HEADS] for i in range(0, len(heads), FACET_HEADS)] or [[]]
    return [("" if len(groups) == 1 else f"heads {i * FACET_HEADS + 1}–{i * FACET_HEADS + len(g)}",
             [r for r in rows if str(r["head"]) in set(g)]) for i, g in enumerate(groups)]


def certify_figure(rows):
    """PNG bytes of the certified sandwiches lower ≤ r_ε ≤ upper per head and ε (bars, log scale),
    one facet per layer (sandwich_facets: every row is drawn); nothing is written to the folder."""
    import io
    import numpy as np
    with figure_style() as plt:
        sel = [r for r in rows if r.get("upper") is not None]
        eps = sorted({str(r["eps"]) for r in sel}, key=Fraction)
        label = lambda r: (f"l{r['layer']}-h{r['head_index']}" + (f" m={r['multiplier']}" if str(r.get("multiplier")) != "1"
                                                                   else "") if "layer" in r else short(str(r["head"])))
        facets = sandwich_facets(sel)
        sizes = [max(len(dict.fromkeys(label(r) for r in fr)), 1) for _, fr in facets]
        per = 0.13 * max(len(eps), 1) ** 0.5
        fig, axes = plt.subplots(len(facets), 1, sharex=True, squeeze=False, layout="constrained",
                                 figsize=(COLUMN_WIDTH, 0.9 + sum(per * s + 0.25 for s in sizes)),
                                 gridspec_kw={"height_ratios": [s + 2 for s in sizes]})
        colors = plt.get_cmap("viridis")(np.linspace(0.1, 0.8, max(len(eps), 1)))
        h = 0.8 / max(len(eps), 1)
        ups = [r["upper"] for r in sel] or [2]
        for ax, (title, fr) in zip(axes[:, 0], facets):
            heads = list(dict.fromkeys(label(r) for r in fr))
            for j, e in enumerate(eps):
                for r in (r for r in fr if str(r["eps"]) == e):
                    y = heads.index(label(r)) + (j - (len(eps) - 1) / 2) * h
                    lo = max(r["lower"] or 1, 1)
                    ax.plot([lo, r["upper"]], [y, y], "-", color=colors[j], lw=min(4, 40 / max(len(heads), 1)) + 1,
                            solid_capstyle="butt")
                    ax.plot([lo, r["upper"]], [y, y], "|", color="k", ms=5, mew=0.8)
            ax.set_yticks(range(len(heads)), heads)
            ax.set_ylim(len(heads) - 0.5, -0.5)
            if title:
                ax.set_title(title, fontsize="small", loc="left")
            ax.grid(alpha=0.3, lw=0.4, axis="x")
            ax.set_xscale("log")
        ax = axes[-1, 0]
        for j, e in enumerate(eps):
            ax.plot([], [], "-", color=colors[j], lw=3, label=rf"$\varepsilon = {e}$")
        ax.set_xlim(0.8, max(ups) * 1.3)
        plain_log_axis(ax.xaxis, 1, max(ups) * 1.3)
        ax.set_xlabel(r"certified lower $\leq r_\varepsilon(A) \leq$ upper")
        fig.legend(loc="outside upper center", ncol=min(len(eps), 4), frameon=False)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=200, metadata=METADATA["png"])
        plt.close(fig)
        return buf.getvalue()


def certify_html(folder, row_limit):
    s = read_json(os.path.join(folder, "summary.json"))
    meta, rows = (s.get("meta"), s["rows"]) if isinstance(s, dict) else (None, s)
    from ..driver import certify_statistics
    st = certify_statistics(rows)
    peers = list(dict.fromkeys(p for r in rows for p in (r.get("peers") or {})))
    parts = ["<h2>What was run</h2>"]
    if meta:
        m = lambda k: esc(plain(meta.get(k)))
        parts.append(f"<p>certkit certify --model {m('model')}: {m('class')} "
                     f"({m('family')}, {m('layers')} layers × {m('heads')} heads, "
                     f"d_head {m('d_head')}); input {m('input')}, length {m('length')}; "
                     f"layers {m('certified_layers')}, heads {m('certified_heads')}, multipliers "
                     f"{m('multipliers')}, ε {m('eps')}; reconstruction max |diff| "
                     f"{m('reconstruction_max_abs_diff')}.</p>")
    parts.append(f"<p>Produced by {esc(producer_line((meta or {}).get('producer')))}.</p>")
    heads = list(dict.fromkeys(r.get("head") for r in rows))
    eps = ", ".join(sorted({str(r.get("eps")) for r in rows}, key=Fraction))
    parts.append(f"<p>{len(heads)} heads × ε {{{esc(eps)}}}: {len(rows)} rows; "
                 f"peers: {esc(', '.join(peers) or 'none')}. Every bound is a kernel-VERIFIED certificate under "
                 "<code>&lt;head&gt;/eps-&lt;ε&gt;.{lower,upper}.json</code>.</p>")
    parts += ["<h2>Statistics</h2>",
              table(["quantity", "value"], [["rows", st["rows"]], ["complete sandwiches (both bounds)", st["complete"]],
                                            ["tight (lower = upper)", st["tight"]],
                                            ["median upper / lower", fmt(st.get("median_upper_over_lower"))],
                                            ["max upper / lower", fmt(st.get("max_upper_over_lower"))]]),
              table(["ε", "complete", "median lower", "median upper"],
                    [[e, v["complete"], fmt(v["median_lower"], 1), fmt(v["median_upper"], 1)] for e, v in st["by_eps"].items()])]
    nfig = 0
    figs = []
    if any(r.get("upper") is not None for r in rows):
        try:
            import matplotlib  # noqa: F401
        except ModuleNotFoundError:
            figs.append('<p class="note">No sandwich figure: matplotlib is not installed (pip install '
                        "'certkit[plots]').</p>")
        else:
            figs.append(png_figure("sandwiches (made for this page)", "certified sandwiches lower ≤ r_ε(A) ≤ upper "
                                   "per head and ε, one panel per layer (every row; log scale)", certify_figure(rows)))
            nfig += 1
    for f in sorted(os.listdir(folder)):
        if f.lower().endswith(".png"):
            figs.append(png_figure(os.path.join(folder, f), ""))
            nfig += 1
    parts += ["<h2>Figures</h2>"] + figs
    base = ["layer", "head_index", "multiplier"] if meta else ["head", "n", "N", "d"]
    cols = base + ["beta", "eps", "lower", "upper", "lower_kind", "upper_method"] + [f"{p} k" for p in peers] + \
        (["visible_dimension"] if meta else []) + ["seconds"]
    body = [[r.get(c) if not c.endswith(" k") else (r.get("peers") or {}).get(c[:-2], {}).get("k") for c in cols]
            for r in rows]
    parts += ["<h2>Sandwiches</h2>", table(cols, body, row_limit, "summary.json / summary.md")]
    title = f"certkit certify: {meta['model']}" if meta else "certkit certify: certified sandwiches"
    return title + " — lower ≤ r_ε(A) ≤ upper", "\n".join(parts), nfig, len(rows)


# ---------------------------------------------------------------- scale
SCALE_CAPTIONS = {"sphere": "Sphere family: certified lower bounds M against β, with the fitted slopes.",
                  "ball": "Ball family: certified lower bounds M against β, with the fitted slopes.",
                  "interaction": "Interaction family: certified lower bounds M against Γ, with the fitted slopes.",
                  "causal": "Causal attention (prefix averaging): certified bounds against the context length n."}


def scale_html(folder, row_limit):
    path = os.path.join(folder, "summary.json")
    s = read_json(path) if os.path.exists(path) else {}
    parts = ["<h2>What was run</h2>",
             f"<p>certkit scale at ε = {esc(s.get('eps', '?'))} (slope tolerance {esc(s.get('tolerance', '?'))}): "
             "every point is a kernel-VERIFIED parametric lower bound (kind <code>lower-lattice</code>); certificates "
             "under <code>certificates/</code>.</p>"]
    nrows = 0
    if s.get("slopes") and not os.path.exists(os.path.join(folder, "scaling.md")):
        cols = ["family", "dim", "theory", "slope", "ci95", "rel_error", "within_tolerance", "points", "verified"]
        fmtv = lambda v: (f"[{v[0]:.5g}, {v[1]:.5g}]" if isinstance(v, list) else f"{v:.5g}" if isinstance(v, float) else v)
        parts += ["<h2>Slopes</h2>", table(cols, [[fmtv(x.get(c)) for c in cols] for x in s["slopes"]])]
    for md in ("scaling.md", "causal.md", "causal-real.md"):
        if os.path.exists(os.path.join(folder, md)):
            parts.append(markdown(read_text(os.path.join(folder, md)), row_limit, md, shift=1))
    if os.path.exists(os.path.join(folder, "points.csv")):
        with open(os.path.join(folder, "points.csv"), newline="") as f:
            pts = list(csv.reader(f))
        if pts:
            nrows = len(pts) - 1
            parts += ["<h2>Points</h2>", table(pts[0], pts[1:], row_limit, "points.csv")]
    figs, nfig = figures_section(folder, SCALE_CAPTIONS, ("sphere", "ball", "interaction", "causal"))
    parts += ["<h2>Figures</h2>", figs]
    return "certkit scale: scaling laws of the approximation rank", "\n".join(parts), nfig, nrows


def compare_what(meta):
    """What a compare run certified, in one sentence, from its summary's meta."""
    p = meta.get("norm")
    if meta.get("level") == "layer":
        return (f"for each layer and setting, a kernel-VERIFIED certificate (kind attention-output-distance, a layer "
                f"of heads) of the error of the layer's attention block on the model's own values through W_O, "
                f"max_i ‖(Σ_h (A_h V_h − A′_h V′_h) W_O^h)_i‖{p}" + (" relative to the block's output" if meta.get(
                    "relative") else "") + " ≤ ε, with per-token max, mean and p99 beside their float values.")
    if p:
        return (f"for each head and setting, a kernel-VERIFIED certificate (kind attention-output-distance) of the "
                f"error of the head's output on its own values, max_i ‖(A V W − A′ V′ W)_i‖{p}"
                + (" relative to ‖(A V W)_i‖" if meta.get("relative") else "") + " ≤ ε.")
    return ("for each head and compression setting, a kernel-VERIFIED certificate (kind attention-distance) of "
            "max_i ‖A_i − A′_i‖₁ ≤ ε, the worst error of the attention output over value matrices with entries "
            "in [−1, 1].")


def compare_html(folder, row_limit):
    s = read_json(os.path.join(folder, "summary.json"))
    meta = s.get("meta") or {}
    parts = ["<h2>What was run</h2>",
             f"<p><code>{esc(meta.get('command', 'certkit compare'))}</code>: {esc(compare_what(meta))}</p>",
             f"<p>Produced by {esc(producer_line(meta.get('producer')))}.</p>"]
    if os.path.exists(os.path.join(folder, "summary.md")):
        parts.append(markdown(read_text(os.path.join(folder, "summary.md")), row_limit, "summary.md", shift=1))
    figs, nfig = figures_section(folder, {}, ())
    parts += ["<h2>Figures</h2>", figs]
    return f"certkit compare: {meta.get('model', 'heads')}", "\n".join(parts), nfig, len(s["rows"])
