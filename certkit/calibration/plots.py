"""The calibration figures (certkit.calibration): one figure per question, PNG + PDF + SVG
(docs/report.md) — r_SVD_int against R_con per m, Spearman per m with its intervals, the sandwich
widths, the SVD-bridge residual curves, the attention-sink mass."""
import os
import warnings
import zlib
from fractions import Fraction

import numpy as np

from .statistics import RESAMPLES, frac_key, statistics

FIGURES = ("bridge_vs_con_by_m", "spearman_by_m", "sandwich_widths", "tau_width_curves", "sink_mass")
OLD_PLOTS = ("svd_vs_con.png", "tau_curves.png", "sandwich_by_layer.png")     # replaced; removed when figures are made


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
