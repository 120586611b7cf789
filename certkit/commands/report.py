"""certkit report DIR: one self-contained DIR/report.html for a calibrate, certify, scale or compare output
folder (docs/report.md).

* calibrate (meta.json + configs/ or results.json): the statistics recomputed from the rows
  (certkit.calibration.report.statistics), the SUMMARY tables with the paper's numbers
  beside ours, the figures (made when missing) and the per-configuration rows;
* certify (summary.json: a list of rows, or {"meta", "rows"} with --model): what was run, the
  sandwiches, their statistics, a sandwich figure and the rows;
* scale (summary.json with "slopes", or points / causal / causal-real csv): scaling.md / causal.md /
  causal-real.md rendered, every figure;
* compare (summary.json with "cheapest"): what was run, summary.md rendered, every figure.
Figures are embedded as base64 PNG; no external CSS, script, font or URL.  The page has no date,
so rebuilding it from the same folder gives the same bytes.  The figure style and the number
format of the tables: certkit.figures.
"""
import base64
import csv
import html
import json
import os
import re
import sys
from fractions import Fraction

from ..errors import InputError, UserError
from ..outputs import write_atomic
from ..provenance import producer_line
from ..figures import COLUMN_WIDTH, METADATA, figure_style, fmt, plain_log_axis

ROW_LIMIT = 400


class ReportError(UserError):
    """DIR is not an output folder certkit report can read (exit 64; the message names the folder)."""


# ---------------------------------------------------------------- HTML pieces
CSS = """body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ccc}
h3{font-size:1.05em}table{border-collapse:collapse;margin:.6em 0;font-size:.85em}th,td{border:1px solid #ccc;padding:.2em .5em;
text-align:left;vertical-align:top}th{background:#f2f2f2}tr:nth-child(even) td{background:#fafafa}code{background:#f4f4f4;
padding:0 .2em}figure{display:inline-block;margin:.5em 1em .8em 0;vertical-align:top;max-width:100%}figure img{max-width:100%;
width:510px;border:1px solid #eee}figcaption{font-size:.85em;color:#444;max-width:510px}.note{color:#555;font-size:.9em}
details{margin:.6em 0}summary{cursor:pointer;font-weight:600}.scroll{overflow-x:auto}"""


def esc(x):
    return html.escape("—" if x is None else str(x), quote=True)


def plain(x):
    """A value of a summary as prose: a list as '0, 1, 2' (runs of 3 or more consecutive integers
    as '0–11'), a float to 3 significant digits (6e-07, not 5.960464477539063e-07)."""
    if isinstance(x, float):
        return f"{x:.3g}"
    if isinstance(x, (list, tuple)):
        if x and all(isinstance(v, int) and not isinstance(v, bool) for v in x):
            runs, out = [], sorted(x)
            for v in out:
                if runs and v == runs[-1][1] + 1:
                    runs[-1][1] = v
                else:
                    runs.append([v, v])
            return ", ".join(f"{a}–{b}" if b - a >= 2 else f"{a}, {b}" if b > a else f"{a}" for a, b in runs)
        return ", ".join(plain(v) for v in x)
    return "—" if x is None else str(x)


def inline(text):
    """Markdown inline markup (`code`, **bold**) of escaped text."""
    t = esc(text)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", t)


def table(header, rows, limit=ROW_LIMIT, more=""):
    """An HTML table (cells escaped); beyond `limit` rows, a note saying how many were left out and where."""
    out = ['<div class="scroll"><table><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for r in rows[:limit]:
        out.append("<tr>" + "".join(f"<td>{inline(c) if isinstance(c, str) else esc(c)}</td>" for c in r) + "</tr>")
    out.append("</tbody></table></div>")
    if len(rows) > limit:
        out.append(f'<p class="note">First {limit} of {len(rows)} rows shown{"; all in " + more if more else ""}.</p>')
    return "\n".join(out)


def markdown(text, limit=ROW_LIMIT, more="", shift=0):
    """The Markdown certkit writes (headings, paragraphs, bullet lists, pipe tables, `code`, **bold**)
    as HTML.  shift 0: the top-level heading is dropped (the page's title says it); shift 1: every
    heading one level down (# becomes <h2>), for a file shown as a section of the page."""
    out, para, items, tab = [], [], [], []

    def flush():
        if para:
            out.append("<p>" + inline(" ".join(para)) + "</p>")
            para.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{inline(i)}</li>" for i in items) + "</ul>")
            items.clear()
        if tab:
            cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in tab]
            body = [c for c in cells[1:] if not all(re.fullmatch(r":?-{3,}:?", x) for x in c)]
            out.append(table(cells[0], body, limit, more))
            tab.clear()
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|"):
            if para or items:
                flush()
            tab.append(s)
            continue
        if tab:
            flush()
        if not s:
            flush()
        elif s.startswith("#"):
            flush()
            level = len(s) - len(s.lstrip("#")) + shift
            if level > 1:
                out.append(f"<h{min(level, 4)}>{inline(s.lstrip('#').strip())}</h{min(level, 4)}>")
        elif s.startswith(("* ", "- ")):
            if para:
                flush()
            items.append(s[2:])
        elif items and line.startswith("  "):
            items[-1] += " " + s
        else:
            para.append(s)
    flush()
    return "\n".join(out)


def short(name, k=24):
    return name if len(name) <= k else name[:k - 1] + "…"


def png_figure(path, caption, data=None):
    """<figure> with the PNG at path (or the PNG bytes data, named path) embedded as base64."""
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    data = base64.b64encode(data).decode("ascii")
    name = os.path.basename(path)
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{esc(caption or name)}">'
            f"<figcaption><code>{esc(name)}</code>{(': ' + esc(caption)) if caption else ''}</figcaption></figure>")


def figures_section(folder, captions, order=()):
    """Every PNG of folder (known names first, in `order`), embedded."""
    pngs = sorted(f for f in os.listdir(folder) if f.lower().endswith(".png"))
    pngs = [f"{o}.png" for o in order if f"{o}.png" in pngs] + [f for f in pngs if f[:-4] not in order]
    if not pngs:
        return '<p class="note">No figures in this folder.</p>', 0
    return "\n".join(png_figure(os.path.join(folder, f), captions.get(f[:-4], "")) for f in pngs), len(pngs)


def page(title, body):
    from .. import __version__
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{esc(title)}</h1>\n{body}\n"
            f"<hr><p class=\"note\">Built by certkit report {esc(__version__)} from the files of this folder; every figure "
            "is embedded (no external file, script or address).</p>\n</body>\n</html>\n")


def read_json(path):
    """JSON of path, or a ReportError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportError(f"{path}: cannot read it as JSON ({getattr(e, 'strerror', None) or e})") from None


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


# ---------------------------------------------------------------- what a folder is
def kind_of(folder):
    """'calibrate', 'certify' or 'scale' for an output folder; InputError when it does not exist,
    ReportError (exit 64) naming the folder when it is none of them."""
    if not os.path.exists(folder):
        raise InputError(f"{folder}: no such folder")
    if not os.path.isdir(folder):
        raise ReportError(f"{folder}: is a file; give an output folder of certkit calibrate, certify, scale or compare")
    has = lambda f: os.path.exists(os.path.join(folder, f))
    if has("meta.json") and (os.path.isdir(os.path.join(folder, "configs")) or has("results.json")):
        meta = read_json(os.path.join(folder, "meta.json"))
        if isinstance(meta, dict) and "grid" in meta:
            return "calibrate"
    if has("summary.json"):
        s = read_json(os.path.join(folder, "summary.json"))
        if isinstance(s, dict) and "slopes" in s:
            return "scale"
        if isinstance(s, dict) and "cheapest" in s and isinstance(s.get("rows"), list):
            return "compare"
        rows = s.get("rows") if isinstance(s, dict) else s
        if isinstance(rows, list) and all(isinstance(r, dict) and "lower" in r and "upper" in r for r in rows):
            return "certify"
    if has("points.csv") and (has("slopes.csv") or has("scaling.md")) or has("causal.csv") or has("causal-real.csv"):
        return "scale"
    raise ReportError(f"{folder}: not an output folder of certkit calibrate (meta.json with configs/ or "
                      f"results.json), certify (summary.json with sandwich rows), scale (summary.json with slopes, "
                      f"or points.csv, causal.csv, causal-real.csv) or compare (summary.json with cheapest)")


# ---------------------------------------------------------------- calibrate
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
    from ..calibration import report as cr
    meta, rows, curves = cr.load(folder)
    if not rows:
        raise ReportError(f"{folder}: a calibrate folder with no finished configuration yet (configs/ is empty)")
    s = cr.statistics(rows)
    expected = [f for f in cr.FIGURES if f != "sink_mass" or any(r.get("sink_mass") is not None for r in rows)]
    missing = [f for f in expected if not os.path.exists(os.path.join(folder, f + ".png"))]
    made = bool(missing)
    if missing:
        cr.figures(rows, curves, folder, s)
    md = cr.summary_markdown(meta, s, rows)
    parts = [markdown(md, limit=10 ** 6)]
    figs, nfig = figures_section(folder, CALIBRATE_CAPTIONS, cr.FIGURES)
    parts += ["<h2>Figures</h2>", '<p class="note">' + ("Made now from the rows (PNG, PDF and SVG in the folder). "
              if made else "PNG embedded; PDF and SVG versions are beside each PNG in the folder. ") + "</p>", figs]
    cols = ["L", "layer", "head", "multiplier", "eps", "n", "r_exact", "r_svd_int"] + \
           (["r_exact_bias", "r_svd_int_bias"] if cr.has_bias_bridge(rows) else []) + \
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


# ---------------------------------------------------------------- entry points
def build(folder, out=None, row_limit=ROW_LIMIT):
    """Write the report of an output folder (calibrate, certify, scale or compare) to out (default
    folder/report.html); returns {"kind", "path", "figures", "rows"}.  A folder that is none of them
    raises ReportError (a UserError, exit 64) naming it; a missing one InputError (66)."""
    folder = os.fspath(folder)
    kind = kind_of(folder)
    title, body, nfig, nrows = {"calibrate": calibrate_html, "certify": certify_html, "scale": scale_html,
                                "compare": compare_html}[kind](folder, row_limit)
    out = os.path.join(folder, "report.html") if out is None else os.fspath(out)
    write_atomic(out, page(title, body))
    return {"kind": kind, "path": out, "figures": nfig, "rows": nrows}


def add_arguments(p):
    p.add_argument("folder", metavar="DIR", help="an output folder of certkit calibrate, certify, scale or compare")
    p.add_argument("--out", metavar="FILE", default=None, help="where to write the page (default DIR/report.html)")
    p.add_argument("--rows", type=int, default=ROW_LIMIT, metavar="N",
                   help=f"at most N rows in each long table (default {ROW_LIMIT}; the CSV/JSON files hold them all)")


def run(args):
    if args.rows < 1:
        raise ReportError(f"--rows: {args.rows} must be >= 1")
    r = build(args.folder, args.out, args.rows)
    print(f"{r['path']}: {r['kind']} report, {r['figures']} figures, {r['rows']} rows")
    print(f"certkit report: open {r['path']} in a browser (self-contained: no network needed)", file=sys.stderr)
    return 0
