"""The figure style of every certkit figure and the number format of the report tables.

figure_style() and save_figure() are the paper-grade defaults: 8 pt fonts at a column width of
3.4 in, mathtext labels, PNG (200 dpi) + PDF + SVG written without dates or software stamps (the
SVG ids salted with a fixed string), so reruns give the same bytes where matplotlib allows.
matplotlib is imported only when a figure is made.
"""
import contextlib

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
            p = f"{stem}.{ext}"
            fig.savefig(p, dpi=dpi, metadata=meta)
            paths.append(p)
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
