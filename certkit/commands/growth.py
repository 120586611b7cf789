"""The causal growth law on real decoder heads (certkit scale --families causal-real).

For chosen heads of a decoder (by default SmolLM2-135M: in each third of its layers, the heads with
the smallest and the largest certified upper bound at L = 128), the certified sandwich

    lower(n) <= r_eps(A_n) <= upper(n),   A_n = the head on window 0 of the built-in text at length n,

for n = 128, 256, ..., each bound a kernel-VERIFIED certificate, and two least-squares laws per head
and bound, each with its 95 % interval:

    logarithmic:  r = a + b ln n           (prefix averaging, a causal head at beta = 0, has
                                            log2 n - 1 <= r_eps <= log2 n: docs/mathematics.md §8.5)
    power:        ln r = ln c + p ln n     (r = c n^p; p = 1 is a rank that grows with the context)

with the residual sum of squares of each in r, so the summary can say which describes the points
better.  Each (head, n) is one task (certkit.parallel), resumable: its rows are written last, beside
its certificates, and a rerun skips it.
"""
import json
import math
import os
import sys
import time

import numpy as np

from ..errors import UserError
from ..numbers import tag
from ..outputs import write_atomic
from ..search import writer

DEFAULT_HEADS = "l7-h1,l1-h2,l18-h8,l11-h6,l28-h2,l29-h1"
DEFAULT_LENGTHS = "128,256,512,1024"
FIELDS = ["head", "layer", "head_index", "n", "log2_n", "lower", "upper", "lower_kind", "upper_method", "seconds",
          "reconstruction_max_abs_diff", "lower_file", "upper_file"]


def parse_heads(text):
    """[(layer, head)] from "l7-h1,l1-h2" (UserError naming --heads otherwise)."""
    out = []
    for part in [t.strip() for t in text.split(",") if t.strip()]:
        try:
            l, h = part.split("-")
            if l[0] != "l" or h[0] != "h":
                raise ValueError
            out.append((int(l[1:]), int(h[1:])))
        except (ValueError, IndexError):
            raise UserError(f"--growth-heads: {part!r} is not l<layer>-h<head> (e.g. l7-h1)") from None
    if not out:
        raise UserError("--growth-heads: no head")
    return out


def task(t):
    """Rows of one (head, n): certify the head at one eps into t["folder"], then its rows (with the
    run's settings, so a rerun reads them back only for the same model, text and eps)."""
    from .certify import certificate_provenance, certify_head
    h = t["head"]
    rows = certify_head(h, [t["eps"]], t["folder"], (), 0, 24, certificate_provenance(h))
    p = h.provenance
    out = [{"head": f"l{p['layer']}-h{p['head']}", "layer": p["layer"], "head_index": p["head"], "n": h.n,
            "log2_n": math.log2(h.n), "lower": r["lower"], "upper": r["upper"], "lower_kind": r["lower_kind"],
            "upper_method": r["upper_method"], "seconds": r["seconds"],
            "reconstruction_max_abs_diff": p["reconstruction_max_abs_diff"],
            "lower_file": r["lower_file"] and os.path.join(t["rel"], r["lower_file"]),
            "upper_file": r["upper_file"] and os.path.join(t["rel"], r["upper_file"])} for r in rows]
    out = [dict(r, **t["settings"]) for r in out]
    write_atomic(os.path.join(t["folder"], t["rows"]), json.dumps(out, indent=1) + "\n")
    return out


def points(model, heads, lengths, eps, out, workers=1, scheduler=None, progress=False):
    """The certified points of every (head, n), computed or read back from out/certificates/causal-real."""
    from .. import parallel
    from ..models import extract as ex
    mdl, tok, info = ex.load(model)
    if not info["decoder"]:
        raise UserError(f"--model {model}: {info['family']} is an encoder; the causal growth law needs a decoder")
    for l, h in heads:
        if not (0 <= l < info["layers"] and 0 <= h < info["heads"]):
            raise UserError(f"--growth-heads: l{l}-h{h} is not a head of {info['name']} "
                            f"({info['layers']} layers x {info['heads']} heads)")
    root = os.path.join(out, "certificates", "causal-real")
    # a point is read back only when it was certified with the same model file, text and eps
    settings = {"eps": str(eps), "model": info["name"], "model_sha256": info.get("sha256"),
                "text_sha256": ex.builtin_text()[1]}
    rows_name = f"rows-eps{tag(eps)}.json"
    done, todo = [], []
    for n in lengths:
        waiting = []
        for l, h in heads:
            rel = os.path.join("certificates", "causal-real", f"l{l}-h{h}", f"n{n}")
            try:
                with open(os.path.join(out, rel, rows_name)) as f:
                    rows = json.load(f)
            except (OSError, ValueError):
                rows = []
            if rows and all(r.get(k) == v for r in rows for k, v in settings.items()):
                done += rows
            else:
                waiting.append((l, h, rel))
        if not waiting:
            continue
        ids, sha, _ = ex.inputs(tok, info, None, None, n)
        c = ex.capture(mdl, info, ids, layers=sorted({l for l, _, _ in waiting}))
        for l, h, rel in waiting:
            (hd,) = ex.model_heads(c, [l], [h], [1], sha)
            todo.append({"head": hd, "eps": eps, "folder": os.path.join(root, f"l{l}-h{h}", f"n{n}"), "rel": rel,
                         "settings": settings, "rows": rows_name})
    del mdl
    from tqdm import tqdm
    with tqdm(total=len(todo), desc=f"causal growth law ({info['name']})", unit="point", disable=not progress) as bar:
        for rows in parallel.run(task, todo, workers, scheduler):
            done += rows
            bar.update(1)
    return sorted(done, key=lambda r: (heads.index((r["layer"], r["head_index"])), r["n"])), info


def fit(rows, key):
    """The two laws of one head and bound over its VERIFIED points (module docstring): {"log": (b, a,
    ci95 of b, rss), "power": (p, ln c, ci95 of p, rss)}, or None below 3 points."""
    from scipy import stats
    ok = [r for r in rows if r[key]]
    if len(ok) < 3:
        return None
    n = np.array([r["n"] for r in ok], float)
    y = np.array([r[key] for r in ok], float)
    t = stats.t.ppf(0.975, len(ok) - 2)
    lg = stats.linregress(np.log(n), y)
    pw = stats.linregress(np.log(n), np.log(y))
    rss_log = float(np.sum((lg.intercept + lg.slope * np.log(n) - y) ** 2))
    rss_pow = float(np.sum((np.exp(pw.intercept) * n ** pw.slope - y) ** 2))
    return {"log": {"b": lg.slope, "a": lg.intercept, "ci95": [lg.slope - t * lg.stderr, lg.slope + t * lg.stderr],
                    "rss": rss_log},
            "power": {"p": pw.slope, "ln_c": pw.intercept, "ci95": [pw.slope - t * pw.stderr, pw.slope + t * pw.stderr],
                      "rss": rss_pow}}


def laws(rows):
    """{head: {"lower": fit, "upper": fit}} for every head of rows."""
    heads = list(dict.fromkeys(r["head"] for r in rows))
    return {h: {k: fit([r for r in rows if r["head"] == h], k) for k in ("lower", "upper")} for h in heads}


def verdict(f):
    """Which law describes the points better, in words (None: too few points)."""
    if f is None:
        return "—"
    if f["log"]["b"] == 0 and f["log"]["rss"] == 0:
        return f"constant: r = {f['log']['a']:g} at every n"
    better = "log" if f["log"]["rss"] < f["power"]["rss"] else "power"
    return (f"{f['log']['b']:.2f} ln n {f['log']['a']:+.1f} (b in [{f['log']['ci95'][0]:.2f}, {f['log']['ci95'][1]:.2f}]; "
            f"RSS {f['log']['rss']:.3g}) · {math.exp(f['power']['ln_c']):.3g} n^{f['power']['p']:.2f} (p in "
            f"[{f['power']['ci95'][0]:.2f}, {f['power']['ci95'][1]:.2f}]; RSS {f['power']['rss']:.3g}) · closer: {better}")


def markdown(rows, fits, info, eps, command):
    L = [f"# The causal growth law on real decoder heads ({info['name']}, eps = {eps})", "",
         f"Certified sandwiches lower <= r_eps(A) <= upper of {len(fits)} heads of {info['name']} ({info['class']}, "
         f"{info['layers']} layers x {info['heads']} heads) on window 0 of certkit's built-in text at each length n; "
         "every bound is a kernel-VERIFIED certificate under `certificates/causal-real/`. Per head and bound, two "
         "least-squares laws with 95 % intervals: r = a + b ln n and r = c n^p, and which has the smaller residual sum "
         "of squares. Prefix averaging (a causal head at β = 0) has log2 n − 1 <= r_eps <= log2 n for comparison.", "",
         "| head | lower-bound laws | upper-bound laws |", "|---|---|---|"]
    for h, f in fits.items():
        L.append(f"| {h} | {verdict(f['lower'])} | {verdict(f['upper'])} |")
    L += ["", "| head | n | log2 n | lower | upper | upper / lower | prefix averaging | seconds |",
          "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ratio = f"{r['upper'] / r['lower']:.2f}" if r["lower"] and r["upper"] else "—"
        L.append(f"| {r['head']} | {r['n']} | {r['log2_n']:g} | {r['lower']} | {r['upper']} | {ratio} | "
                 f"{math.ceil(r['log2_n']) - 1}..{math.ceil(r['log2_n'])} | {r['seconds']:.1f} |")
    L += ["", "What the data support: " + support(rows, fits), "",
          f"Regenerate (and resume): `{command}`; points: `causal-real.csv`; plot: `causal-real.png`.", ""]
    return "\n".join(L)


def support(rows, fits):
    """Plain words on what the certified points show, computed from them."""
    lengths = sorted({r["n"] for r in rows})
    if len(lengths) < 3:
        return "fewer than 3 lengths: no law is fitted."
    of = lambda h: [r for r in rows if r["head"] == h and r["lower"] and r["upper"]]
    share = {h: min(r["lower"] / r["n"] for r in of(h)) for h in fits if of(h)}
    linear = [h for h in share if share[h] >= 0.5]
    const = [h for h in share if len({r["upper"] for r in of(h)}) == 1]
    above = [h for h in share if h not in linear and all(r["lower"] > math.ceil(r["log2_n"]) for r in of(h))]
    slow = [h for h in share if h not in linear + const + above]
    name = lambda hs: ", ".join(hs) or "none"
    text = (f"over n = {lengths[0]}..{lengths[-1]} ({len(lengths)} lengths), {len(linear)} of {len(fits)} heads grow "
            f"like n itself: their certified lower bound is at least {min((share[h] for h in linear), default=0):.2f} n "
            f"at every length ({name(linear)}), so no fixed rank serves them as the context grows; "
            f"{len(const)} keep the same certified rank at every length ({name(const)}); {len(above)} grow more slowly "
            f"but stay above prefix averaging's log2 n ({name(above)}); {len(slow)} grow slowly, their certified lower "
            f"bound at or below prefix averaging's log2 n at some length ({name(slow)}). ")
    return text + ("With a factor-of-" + f"{lengths[-1] // lengths[0]}" + " range of n, a logarithm and a small "
                   "power are hard to tell apart: the RSS comparison is a description of these points, not a proof of "
                   "either law, and nothing here speaks for lengths beyond those measured.")


def plot(rows, fits, eps, path):
    """Certified bands per head against n (log2 axis), with prefix averaging's band."""
    from .figures import figure_style, save_figure
    with figure_style() as plt:
        fig, ax = plt.subplots(figsize=(3.4, 3.4), layout="constrained")
        ns = np.array(sorted({r["n"] for r in rows}), float)
        ax.fill_between(ns, np.ceil(np.log2(ns)) - 1, np.ceil(np.log2(ns)), color="0.6", alpha=0.5,
                        label=r"prefix averaging: $\log_2 n - 1 \leq r \leq \log_2 n$")
        for h in fits:
            sel = [r for r in rows if r["head"] == h and r["lower"] and r["upper"]]
            n = np.array([r["n"] for r in sel], float)
            line = ax.plot(n, [r["upper"] for r in sel], "v-", ms=3, lw=0.8, label=h)[0]
            ax.plot(n, [r["lower"] for r in sel], "^--", ms=3, lw=0.8, color=line.get_color())
            ax.fill_between(n, [r["lower"] for r in sel], [r["upper"] for r in sel], color=line.get_color(), alpha=0.12)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(r"context length $n$")
        ax.set_ylabel(r"certified $r_\varepsilon$: lower (▲) and upper (▼)")
        ax.set_title(rf"Real decoder heads, $\varepsilon = {eps}$")
        ax.legend(fontsize=6, loc="center right", frameon=False)          # the empty band between the groups
        return save_figure(fig, os.path.splitext(path)[0])


def run(model, heads, lengths, eps, out, workers=1, scheduler=None, plots=True, command=""):
    """Compute (or resume) the points, write causal-real.{md,csv} and the plot; returns (rows, fits)."""
    t0 = time.perf_counter()
    writer.ensure_folder(out, "--out")
    rows, info = points(model, heads, lengths, eps, out, workers, scheduler, sys.stderr.isatty())
    fits = laws(rows)
    import csv
    import io
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=FIELDS, lineterminator="\n", extrasaction="ignore")
    w.writeheader()
    w.writerows(rows)
    write_atomic(os.path.join(out, "causal-real.csv"), buf.getvalue())
    write_atomic(os.path.join(out, "causal-real.md"), markdown(rows, fits, info, eps, command))
    if plots:
        plot(rows, fits, eps, os.path.join(out, "causal-real.png"))
    for r in rows:
        print(f"{r['head']}  n={r['n']}:  {r['lower']} <= r_eps(A) <= {r['upper']}  [{r['seconds']:.1f} s]")
    print(f"causal growth law: {len(rows)} points in {time.perf_counter() - t0:.1f} s; outputs under {out}",
          file=sys.stderr)
    return rows, fits
