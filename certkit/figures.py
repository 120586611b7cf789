"""The figure style of every certkit figure and the number format of the report tables.

figure_style() and save_figure() are the paper-grade defaults: 8 pt fonts at a column width of
3.4 in, mathtext labels, PNG (200 dpi) + PDF + SVG written without dates or software stamps (the
SVG ids salted with a fixed string), so reruns give the same bytes where matplotlib allows.
matplotlib is imported only when a figure is made.
"""
import contextlib
import io
import os

from .outputs import write_atomic

COLUMN_WIDTH = 3.4       # inches: one column of a two-column paper
RC = {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 8, "ytick.labelsize": 8,
      "legend.fontsize": 8, "legend.title_fontsize": 8, "figure.titlesize": 8, "font.family": "DejaVu Sans",
      "mathtext.fontset": "dejavusans", "axes.linewidth": 0.6, "xtick.major.width": 0.6, "ytick.major.width": 0.6,
      "lines.linewidth": 1.0, "savefig.dpi": 200, "svg.hashsalt": "certkit", "svg.fonttype": "path",
      "pdf.fonttype": 42, "legend.framealpha": 0.85}
METADATA = {"png": {"Software": None}, "pdf": {"Creator": None, "Producer": None, "CreationDate": None},
            "svg": {"Creator": None, "Date": None}}


@contextlib.contextmanager
def figure_style():
    """matplotlib (Agg) with certkit's paper-grade rcParams for the duration of the block."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    with plt.rc_context(RC):
        yield plt


def save_figure(fig, stem, dpi=200):
    """fig as stem.png (dpi), stem.pdf and stem.svg, with no date or software stamp (reruns give the
    same bytes where matplotlib allows); closes fig and returns the three paths."""
    import matplotlib.pyplot as plt
    paths = []
    with plt.rc_context({"svg.hashsalt": RC["svg.hashsalt"]}):
        for ext, meta in METADATA.items():
            p, buf = f"{stem}.{ext}", io.BytesIO()
            fig.savefig(buf, format=ext, dpi=dpi, metadata=meta)
            paths.append(write_atomic(p, buf.getvalue()))      # never through a link (certkit.outputs)
    plt.close(fig)
    return paths


def plain_log_axis(axis, lo, hi):
    """Readable ticks (1, 1.5, 2, 3, 5, 10, ...) on a log axis spanning [lo, hi], without 2×10^0 labels."""
    from matplotlib.ticker import FixedLocator, FuncFormatter, NullFormatter
    for mantissas in ((1, 1.5, 2, 3, 5, 7), (1, 2, 5), (1, 3), (1,)):
        ticks = [v * 10 ** k for k in range(-3, 6) for v in mantissas if lo <= v * 10 ** k <= hi]
        if len(ticks) <= 7:
            break
    axis.set_major_locator(FixedLocator(ticks))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def fmt(v, p=3):
    """A number for a table: None as an em dash, floats to p decimals."""
    return "—" if v is None else (f"{v:.{p}f}" if isinstance(v, float) else str(v))


def layer_head_maps(rows, stem, title):
    """A model's certified numbers per layer (rows) x query head (columns), four panels: the lower
    bound, the upper bound of r_eps(A), upper / lower (1 = tight) and, when the SVD peer was run,
    upper / the truncated SVD's certified k (below 1: our certificate needs fewer terms).  rows: the
    summary rows of one eps and one multiplier.  Writes stem.{png,pdf,svg}; returns the paths."""
    svd_k = lambda r: ((r.get("peers") or {}).get("svd") or {}).get("k")
    panels = [("certified lower bound", rows, lambda r: r["lower"], "viridis", "d"),
              ("certified upper bound", rows, lambda r: r["upper"], "viridis", "d"),
              ("upper / lower", rows, lambda r: r["upper"] / r["lower"] if r["lower"] and r["upper"] else None,
               "magma_r", ".2f")]
    if any(svd_k(r) for r in rows):
        panels.append(("upper / SVD k", rows, lambda r: r["upper"] / svd_k(r) if r["upper"] and svd_k(r) else None,
                       "cividis", ".2f"))
    return layer_head_panels(panels, stem, title)


def layer_head_panels(panels, stem, title, shared_scale=False, log=None, eps=None):
    """Heat maps side by side, one per panel (name, rows, value(row) or None, colormap, number
    format): layers down, query heads across, each cell labelled while the grid is small; with
    shared_scale, one colour scale and one colour bar for all panels, logarithmic when log (None:
    when every value is positive and they span more than a decade); eps: a contour around the cells
    below eps and a mark on the colour bar.  Writes stem.{png,pdf,svg}; returns the paths."""
    import numpy as np
    from matplotlib.colors import LogNorm, Normalize
    every = [r for p in panels for r in p[1]]
    layers = sorted({r["layer"] for r in every})
    heads = sorted({r["head_index"] for r in every})
    grid = lambda rows, f: np.array([[next((f(r) for r in rows if r["layer"] == l and r["head_index"] == h
                                            and f(r) is not None), np.nan) for h in heads] for l in layers], dtype=float)
    grids = [grid(rows, f) for _, rows, f, _, _ in panels]
    finite = [g[np.isfinite(g)] for g in grids]
    limits = (min(f.min() for f in finite if f.size), max(f.max() for f in finite if f.size)) \
        if shared_scale and any(f.size for f in finite) else (None, None)
    if log is None:
        log = limits[0] is not None and limits[0] > 0 and limits[1] > 10 * limits[0]
    norm = (LogNorm if log else Normalize)(*limits) if limits[0] is not None else None
    with figure_style() as plt:
        width = min(2 * COLUMN_WIDTH, 1.0 + 0.36 * len(heads) * len(panels))
        fig, axes = plt.subplots(1, len(panels), figsize=(width, 1.0 + 0.17 * len(layers)), layout="constrained",
                                 sharey=True, squeeze=False)
        for ax, (name, _, _, cmap, form), values in zip(axes[0], panels, grids):
            im = ax.imshow(values, cmap=cmap, aspect="auto", interpolation="nearest", norm=norm)
            ax.set_title(name)
            ax.set_xticks(range(len(heads)), heads, fontsize=6)
            ax.set_xlabel("head")
            if eps is not None and np.nanmin(values) < eps < np.nanmax(values):
                ax.contour(values, levels=[float(eps)], colors="red", linewidths=0.6)
            if norm is None:
                fig.colorbar(im, ax=ax, shrink=0.8, pad=0.02)
            if len(layers) * len(heads) * len(panels) <= 400:       # labels only where they stay legible
                for (i, j), v in np.ndenumerate(values):
                    if np.isfinite(v):
                        r, g, b, _ = im.cmap(im.norm(v))          # dark text on light cells, light on dark
                        ax.text(j, i, format(int(v) if form == "d" else v, form), ha="center", va="center",
                                fontsize=4, color="k" if 0.299 * r + 0.587 * g + 0.114 * b > 0.5 else "w")
        if norm is not None:                              # one colour bar, after the last panel
            bar = fig.colorbar(im, ax=list(axes[0]), shrink=0.8, pad=0.02)
            if eps is not None and limits[0] <= eps <= limits[1]:
                bar.ax.axhline(float(eps), color="red", linewidth=0.8)
                bar.set_label(f"red line and contours: ε = {eps}", fontsize=6)
        axes[0][0].set_yticks(range(len(layers)), layers, fontsize=6)
        axes[0][0].set_ylabel("layer")
        fig.suptitle(title)
        return save_figure(fig, stem)


def layer_method_map(rows, key, stem, title, eps=None):
    """One heat map: layers down, methods across, rows[key] on a logarithmic colour scale (linear if some value
    is <= 0), one colour bar, a red contour and bar mark at eps.  Writes stem.{png,pdf,svg}; returns the paths."""
    import numpy as np
    from matplotlib.colors import LogNorm, Normalize
    layers = sorted({r["layer"] for r in rows})
    methods = list(dict.fromkeys(r["method"] for r in rows))
    values = np.array([[next((r[key] for r in rows if r["layer"] == l and r["method"] == m), np.nan)
                        for m in methods] for l in layers], dtype=float)
    finite = values[np.isfinite(values)]
    lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
    norm = LogNorm(lo, hi) if lo > 0 and hi > lo else Normalize(lo, hi)
    with figure_style() as plt:
        fig, ax = plt.subplots(figsize=(min(2 * COLUMN_WIDTH, 1.6 + 0.42 * len(methods)), 2.4 + 0.16 * len(layers)),
                               layout="constrained")
        im = ax.imshow(values, cmap="viridis", aspect="auto", interpolation="nearest", norm=norm)
        ax.set_xticks(range(len(methods)), methods, rotation=60, ha="right", fontsize=6)
        ax.set_yticks(range(len(layers)), layers, fontsize=6)
        ax.set_ylabel("layer")
        bar = fig.colorbar(im, ax=ax, shrink=0.8, pad=0.02)
        if eps is not None and finite.size and lo < eps < hi:
            ax.contour(values, levels=[float(eps)], colors="red", linewidths=0.6)
            bar.ax.axhline(float(eps), color="red", linewidth=0.8)
            bar.set_label(f"red line and contour: ε = {eps}", fontsize=6)
        ax.set_title(title, fontsize=7)
        return save_figure(fig, stem)


def finish_plot(fig, ax, title, path, legend_size=8, below=False):
    """Title, grid, legend (below the axes when below), then path (.png) and its .pdf and .svg, saved
    without dates or software stamps (identical bytes on a rerun)."""
    ax.set_title(title, fontsize=8)
    ax.grid(alpha=0.3, lw=0.4)
    if below:
        fig.legend(loc="outside lower center", fontsize=legend_size, ncol=1, frameon=False, handlelength=2.2)
    else:
        ax.legend(fontsize=legend_size)
    save_figure(fig, os.path.splitext(path)[0])
