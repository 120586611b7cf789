"""The summaries of a compare run: summary.csv, summary.json and summary.md (per method over the
heads or layers, per head or layer, the cheapest setting whose certified error is <= eps) and the
figures (a layer x head panel per setting, or per layer and method at --level layer)."""
import csv
import io
import json
import os
from fractions import Fraction

from ..outputs import write_atomic
from ..provenance import producer_line

COLUMNS = ["head", "layer", "head_index", "method", "family", "cost", "norm", "relative", "certified", "certified_float",
           "estimate", "kernel_bound", "verdict", "lower", "lower_eps", "file", "seconds"]
STATS = [f"{q}_{s}{f}" for q in ("abs", "rel") for s in ("max", "mean", "p99") for f in ("", "_float")]
LAYER_COLUMNS = ["layer", "heads", "method", "family", "cost", "norm", "relative", "certified", "estimate",
                 "kernel_bound", "verdict", *STATS, "file", "seconds"]


def quantity(meta):
    """The certified quantity of a run, as text."""
    if not meta.get("norm"):
        return "max_i ||A_i - A'_i||_1"
    p, rel = meta["norm"], meta.get("relative")
    if meta.get("level") == "layer":
        return f"max_i ||(sum_h (A_h V_h - A'_h V'_h) W_O^h)_i||_{p}" + (f" / ||(sum_h A_h V_h W_O^h)_i||_{p}" if rel else "")
    return f"max_i ||(A V W - A' V' W)_i||_{p}" + (f" / ||(A V W)_i||_{p}" if rel else "")


def cheapest(rows, eps):
    """Per head and method family: the cheapest setting whose certified error is <= eps (None: none is)."""
    best = {}
    for r in rows:
        key = (r["head"], r["family"])
        ok = r["certified"] is not None and Fraction(r["certified"]) <= eps
        if key not in best:
            best[key] = None
        if ok and (best[key] is None or r["cost"] < best[key]["cost"]):
            best[key] = r
    return [{"head": h, "family": f, "cheapest": None if r is None else r["method"],
             "certified": None if r is None else r["certified"]} for (h, f), r in best.items()]


def short(certified, none="not proved"):
    """A certified distance (an exact decimal of 4 significant digits) as short text: the same number,
    in scientific notation below 10^-3."""
    if certified is None:
        return none
    return certified if Fraction(certified) >= Fraction(1, 1000) else f"{float(Fraction(certified)):.4g}"


def method_statistics(rows, eps, missing=2.0):
    """Markdown table lines: per method, over the heads, the median, 90th percentile and largest
    certified distance and (with eps) on how many heads it is the cheapest setting within eps."""
    import numpy as np
    best = [] if eps is None else cheapest(rows, eps)
    wins = {}                     # a tie (int8 and fp8 both 8 bits, say) counts for every setting it ties
    for c in best:
        if c["cheapest"] is None:
            continue
        cost = next(r["cost"] for r in rows if r["head"] == c["head"] and r["method"] == c["cheapest"])
        for r in rows:
            if (r["head"], r["family"], r["cost"]) == (c["head"], c["family"], cost) and r["certified"] is not None \
                    and Fraction(r["certified"]) <= eps:
                wins[r["method"]] = wins.get(r["method"], 0) + 1
    head = "| method | heads | median | p90 | max |" + (f" cheapest within {eps} |" if eps is not None else "")
    lines = [head, "|---" * (5 + (eps is not None)) + "|"]
    for m in dict.fromkeys(r["method"] for r in rows):
        v = np.array([r["certified_float"] if r["certified_float"] is not None else missing for r in rows
                      if r["method"] == m])
        lines.append(f"| {m} | {len(v)} | {np.median(v):.3g} | {np.quantile(v, 0.9):.3g} | {v.max():.3g} |"
                     + (f" {wins.get(m, 0)} |" if eps is not None else ""))
    if eps is not None:
        none = {f: sum(c["cheapest"] is None for c in best if c["family"] == f) for f in dict.fromkeys(c["family"] for c in best)}
        lines += ["", f"Heads where no setting is within {eps}: " + ", ".join(f"{f} {k}" for f, k in none.items()) + "."]
    return lines


def summary_markdown(meta, rows, eps):
    lines = [f"# certkit compare: {meta.get('model') or 'heads'}", "",
             (f"Certified {quantity(meta)} (attention-output-distance certificates, each VERIFIED by the kernel): the "
              "error of each head's output on its own values, through its slice of the output projection."
              if meta.get("norm") else
              "Certified max_i ||A_i - A'_i||_1 (attention-distance certificates, each VERIFIED by the kernel): "
              "the worst error of the attention output over value matrices with entries in [-1, 1]."), "",
             f"Regenerate: `{meta['command']}`", "", f"Produced by {producer_line(meta.get('producer'))}."
             + (f" The model: `{meta['model_source']}`." if meta.get("model_source") else ""), "",
             "## Per method (" + ("an error not proved counts as inf" if meta.get("norm") else
                                  "a distance not proved counts as 2") + ")", ""]
    lines += method_statistics(rows, eps, float("inf") if meta.get("norm") else 2.0)
    lines += ["", "## Per head", "", "| head | method | certified | float estimate | r_eps >= |", "|---|---|---|---|---|"]
    for k, r in enumerate(rows):
        first = k == 0 or rows[k - 1]["head"] != r["head"]              # r_eps >= m once per head
        lines.append(f"| {r['head']} | {r['method']} | {short(r['certified'], '—')} | {r['estimate']:.4g} | "
                     f"{'' if r.get('lower') is None or not first else r['lower']} |")
    if eps is not None:
        lines += ["", f"## Cheapest setting with certified error <= {eps}", "", "| head | method | cheapest | certified |",
                  "|---|---|---|---|"]
        lines += [f"| {c['head']} | {c['family']} | {c['cheapest'] or 'none'} | {short(c['certified'], '—')} |"
                  for c in cheapest(rows, eps)]
    return "\n".join(lines) + "\n"


def layer_markdown(meta, rows, eps):
    """The summary of a --level layer run: per method over layers, then per layer and method."""
    import numpy as np
    p = meta["norm"]
    lines = [f"# certkit compare --level layer: {meta.get('model')}", "",
             f"Certified per token i the error of each layer's attention block on the model's own values, through "
             f"W_O: ||D_i||_{p} with D = sum_h (A_h V_h - A'_h V'_h) W_O^h (abs), and ||D_i||_{p} / ||O_i||_{p} with "
             f"O = sum_h A_h V_h W_O^h (rel).  The max over tokens is the claim of a layer certificate (kind "
             f"attention-output-distance, format 1.3) VERIFIED by the kernel; mean and p99 are over the per-token "
             f"bounds of the kernel's numerics; each beside its float64 value.", "",
             f"Regenerate: `{meta['command']}`", "", f"Produced by {producer_line(meta.get('producer'))}."
             + (f" The model: `{meta['model_source']}`." if meta.get("model_source") else ""), "",
             "## Per method: certified relative error, max over tokens, over the layers", "",
             "| method | layers | median | p90 | max | median of float | median of mean over tokens |" +
             (f" layers within {eps} |" if eps is not None else ""), "|---" * (7 + (eps is not None)) + "|"]
    for m in dict.fromkeys(r["method"] for r in rows):
        v = np.array([r["rel_max"] for r in rows if r["method"] == m])
        f = np.array([r["rel_max_float"] for r in rows if r["method"] == m])
        mean = np.array([r["rel_mean"] for r in rows if r["method"] == m])
        lines.append(f"| {m} | {len(v)} | {np.median(v):.3g} | {np.quantile(v, 0.9):.3g} | {v.max():.3g} | "
                     f"{np.median(f):.3g} | {np.median(mean):.3g} |"
                     + (f" {int(np.sum(v <= float(eps)))} |" if eps is not None else ""))
    lines += ["", "## Per layer", "", "| layer | method | abs max | abs mean | abs p99 | rel max | rel mean | rel p99 | "
              "rel max (float) | certified claim |", "|---" * 10 + "|"]
    for r in rows:
        lines.append(f"| {r['layer']} | {r['method']} | " + " | ".join(
            f"{r[k]:.4g}" for k in ("abs_max", "abs_mean", "abs_p99", "rel_max", "rel_mean", "rel_p99", "rel_max_float"))
            + f" | {short(r['certified'], '—')} |")
    return "\n".join(lines) + "\n"


def write_summary(meta, rows, out, eps):
    buf = io.StringIO()
    layer = meta.get("level") == "layer"
    w = csv.DictWriter(buf, LAYER_COLUMNS if layer else COLUMNS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    write_atomic(os.path.join(out, "summary.csv"), buf.getvalue())
    doc = {"meta": meta, "rows": rows, "cheapest": None if eps is None else cheapest(rows, eps)}
    write_atomic(os.path.join(out, "summary.json"), json.dumps(doc, indent=1) + "\n")
    write_atomic(os.path.join(out, "summary.md"), (layer_markdown if layer else summary_markdown)(meta, rows, eps))


def figures(meta, rows, out):
    """out/compare-<family>.{png,pdf,svg}: per layer x head, the certified error of each setting of a
    method family on one colour scale (model runs only; nothing without matplotlib)."""
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        return []
    if not rows or rows[0].get("layer") is None:
        return []
    from ..figures import layer_head_panels, layer_method_map
    if meta.get("level") == "layer":
        return layer_method_map(rows, "rel_max" if meta.get("relative") else "abs_max", os.path.join(out, "compare-layers"),
                                f"{meta['model']}, L = {meta['length']}: certified max over tokens of "
                                + ("‖D_i‖{0} / ‖O_i‖{0}" if meta.get("relative") else "‖D_i‖{0}").format(
                                    {"2": "₂", "inf": "∞"}[meta["norm"]]),
                                None if meta.get("eps") is None else Fraction(meta["eps"]))
    paths = []
    for fam in dict.fromkeys(r["family"] for r in rows):
        specs = list(dict.fromkeys(r["method"] for r in rows if r["family"] == fam))
        panels = [(s, [r for r in rows if r["method"] == s], lambda r: r["certified_float"], "viridis", ".2f")
                  for s in specs]
        eps = None if meta.get("eps") is None else Fraction(meta["eps"])
        paths += layer_head_panels(panels, os.path.join(out, f"compare-{fam}"),
                                   f"{meta['model']}, L = {meta['length']}: certified "
                                   + quantity(meta).replace("||", "‖").replace("'", "′"),
                                   shared_scale=True, eps=eps)
    return paths
