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

Beside them, optionally, an encoder series (--encoder-model, --encoder-heads): heads of an encoder
(no mask) at the lengths up to its position limit, certified the same way, so the plot shows the
causal heads against prefix averaging and against encoder heads on the same text.

A per-point budget (--growth-budget SECONDS) makes each sandwich anytime (certkit.search.sandwich):
the searches stop at their next safe point once it is spent and the best VERIFIED sandwich so far
is kept, the row saying whether the budget stopped it.  A point the budget did not stop is what a
run without a budget finds (the sandwich's guarantee), so it is read back under any budget; a point
stopped on its budget is read back only under the same budget.
"""
import json
import math
import os
import sys

import numpy as np

from ..errors import UserError
from ..numbers import tag
from ..outputs import ensure_folder, write_atomic, write_rows
from ..provenance import producer, with_producer

DEFAULT_HEADS = "l7-h1,l1-h2,l18-h8,l11-h6,l28-h2,l29-h1"
DEFAULT_LENGTHS = "128,256,512,1024"
# the encoder series by default: MiniLM's heads with the smallest (2 <= r <= 3) and the largest (127 <= r <= 127)
# certified upper bound at L = 128, eps = 1/4 on the built-in text (data/models/minilm-L128-eps1_4)
DEFAULT_ENCODER_HEADS = "l4-h2,l0-h2"
FIELDS = ["model", "head", "layer", "head_index", "n", "log2_n", "lower", "upper", "lower_kind", "upper_method",
          "seconds", "budget", "stopped_on_budget", "reconstruction_max_abs_diff", "lower_file", "upper_file"]


def parse_heads(text, what="--growth-heads"):
    """[(layer, head)] from "l7-h1,l1-h2" (UserError naming `what` otherwise)."""
    out = []
    for part in [t.strip() for t in text.split(",") if t.strip()]:
        try:
            l, h = part.split("-")
            if l[0] != "l" or h[0] != "h" or not (l[1:].isdigit() and h[1:].isdigit()):
                raise ValueError
            out.append((int(l[1:]), int(h[1:])))
        except (ValueError, IndexError):
            raise UserError(f"{what}: {part!r} is not l<layer>-h<head> (e.g. l7-h1)") from None
    if not out:
        raise UserError(f"{what}: no head")
    if len(set(out)) != len(out):
        l, h = next(x for x in out if out.count(x) > 1)
        raise UserError(f"{what}: l{l}-h{h} is given twice")
    return out


def task(t, say=None):
    """Rows of one (head, n): certify the head at one eps (within t["budget"] seconds, None: no
    budget) into t["folder"], then its rows (with the run's settings, so a rerun reads them back only
    for the same model, text and eps; and, if the budget stopped it, the same budget: without the
    deeper descents, deepen=False, a point the budget did not stop is what a run without one finds).  say: None or
    a callable taking a short text (the search stages, for the status line of a serial run)."""
    from ..driver import ATTEMPTS, SEED, certificate_provenance, certify_head
    h = t["head"]
    rows = certify_head(h, [t["eps"]], t["folder"], (), SEED, ATTEMPTS, certificate_provenance(h), progress=say,
                        budget=t.get("budget"), deepen=False)
    p = h.provenance
    out = [{"head": f"l{p['layer']}-h{p['head']}", "layer": p["layer"], "head_index": p["head"], "n": h.n,
            "log2_n": math.log2(h.n), "lower": r["lower"], "upper": r["upper"], "lower_kind": r["lower_kind"],
            "upper_method": r["upper_method"], "seconds": r["seconds"], "budget": r.get("budget"),
            "stopped_on_budget": None if r.get("budget") is None else bool(r.get("stopped_on_budget")),
            "reconstruction_max_abs_diff": p["reconstruction_max_abs_diff"],
            "lower_file": r["lower_file"] and os.path.join(t["rel"], r["lower_file"]),
            "upper_file": r["upper_file"] and os.path.join(t["rel"], r["upper_file"])} for r in rows]
    out = [dict(r, **t["settings"]) for r in out]
    write_atomic(os.path.join(t["folder"], t["rows"]), json.dumps(out, indent=1) + "\n")
    return out


def load(spec, heads, encoder=False):
    """(model, tokenizer, info) of the decoder (--model) or of the encoder series (--encoder-model),
    its kind and the heads checked (UserError naming the option)."""
    from ..models import loading
    flag, heads_flag = ("--encoder-model", "--encoder-heads") if encoder else ("--model", "--growth-heads")
    mdl, tok, info = loading.load(spec)
    if not encoder and not info["decoder"]:
        raise UserError(f"--model {spec}: {info['family']} is an encoder; the causal growth law needs a decoder "
                        "(encoder heads go beside it with --encoder-model)")
    if encoder and info["decoder"]:
        raise UserError(f"--encoder-model {spec}: {info['family']} is a decoder (causal heads); the encoder series "
                        "needs an encoder (minilm, mpnet or a BERT-family folder)")
    for l, h in heads:
        if not (0 <= l < info["layers"] and 0 <= h < info["heads"]):
            raise UserError(f"{heads_flag}: l{l}-h{h} is not a head of {info['name']} "
                            f"({info['layers']} layers x {info['heads']} heads)")
    return mdl, tok, info


def encoder_lengths(lengths, info):
    """The lengths of the encoder series: those within the encoder's position limit."""
    top = info.get("max_length")
    ns = [n for n in lengths if top is None or n <= top]
    if not ns:
        raise UserError(f"--encoder-model {info['name']}: no --growth-lengths within its {top} positions "
                        f"(give lengths <= {top} beside the longer ones)")
    return ns


def reusable(rows, settings, budget, out):
    """Whether a point's stored rows serve this run: the same settings (model file, text, eps), the
    certificates they name still under out, and, if the budget stopped the point, the same budget (a
    point the budget did not stop is what a run without one finds)."""
    return bool(rows) and all(r.get(k) == v for r in rows for k, v in settings.items()) and \
        all(os.path.exists(os.path.join(out, r[k])) for r in rows for k in ("lower_file", "upper_file") if r.get(k)) \
        and all(not r.get("stopped_on_budget") or r.get("budget") == budget for r in rows)


def plan(mdl, tok, info, heads, lengths, eps, out, budget=None, sub=""):
    """(rows read back, tasks to run) of one series: every (head, n), its certificates under
    out/certificates/causal-real[/sub]/l<l>-h<h>/n<n>."""
    from ..models.capturing import capture
    from ..models.rebuild import model_heads
    from ..models.tokens import builtin_text, inputs
    root = os.path.join("certificates", "causal-real", *([sub] if sub else []))
    # a point is read back only when it was certified with the same model file, text and eps
    settings = {"eps": str(eps), "model": info["name"], "model_sha256": info.get("sha256"),
                "text_sha256": builtin_text()[1]}
    rows_name = f"rows-eps{tag(eps)}.json"
    done, todo = [], []
    for n in lengths:
        waiting = []
        for l, h in heads:
            rel = os.path.join(root, f"l{l}-h{h}", f"n{n}")
            try:
                with open(os.path.join(out, rel, rows_name)) as f:
                    rows = json.load(f)
            except (OSError, ValueError):
                rows = []
            if reusable(rows, settings, budget, out):
                done += rows
            else:
                waiting.append((l, h, rel))
        if not waiting:
            continue
        ids, sha, _ = inputs(tok, info, None, None, n)
        c = capture(mdl, info, ids, layers=sorted({l for l, _, _ in waiting}))
        for l, h, rel in waiting:
            (hd,) = model_heads(c, [l], [h], [1], sha)
            todo.append({"head": hd, "eps": eps, "folder": os.path.join(out, rel), "rel": rel,
                         "settings": settings, "rows": rows_name, "budget": budget})
    return done, todo


def points(model, heads, lengths, eps, out, workers=1, scheduler=None, progress=False, budget=None, encoder=None):
    """The certified points of every (head, n), computed or read back from out/certificates/causal-real,
    and the decoder's info.  encoder: None or (spec, heads), the encoder series (its certificates under
    certificates/causal-real/<encoder name>/, at the lengths within its position limit; checked, like
    the decoder and its heads, before any point is certified).  Each row has "label": the head for the
    decoder, "<encoder name> <head>" for the encoder series."""
    from .. import parallel
    mdl, tok, info = load(model, heads)
    enc = None
    if encoder is not None:
        emdl, etok, einfo = load(encoder[0], encoder[1], encoder=True)
        enc = (emdl, etok, einfo, encoder[1], encoder_lengths(lengths, einfo))
    done, todo = plan(mdl, tok, info, heads, lengths, eps, out, budget)
    del mdl
    keys = [(info["name"], l, h) for l, h in heads]
    if enc is not None:
        emdl, etok, einfo, eheads, ens = enc
        more, etodo = plan(emdl, etok, einfo, eheads, ens, eps, out, budget, sub=einfo["name"])
        del emdl, enc
        done, todo = done + more, todo + etodo
        keys += [(einfo["name"], l, h) for l, h in eheads]
    from ..search.sandwich import remove_stale_work
    for folder in sorted({t["folder"] for t in todo}):          # what a run killed with kill -9 left there
        remove_stale_work(folder)
    from tqdm import tqdm
    with tqdm(total=len(todo), desc=f"causal growth law ({info['name']})", unit="point", disable=not progress) as bar:
        if progress and workers <= 1 and scheduler is None:     # one process: each point's search stages on the bar
            results = (task(t, lambda text, t=t: bar.set_postfix_str(f"{t['head'].name} n={t['head'].n} {text}"[:70]))
                       for t in todo)
        else:
            results = parallel.run(task, todo, workers, scheduler)
        for rows in results:
            done += rows
            bar.update(1)
    for r in done:
        r["label"] = r["head"] if r["model"] == info["name"] else f"{r['model']} {r['head']}"
    return sorted(done, key=lambda r: (keys.index((r["model"], r["layer"], r["head_index"])), r["n"])), info


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


def label(r):
    """The name of a row's head in the tables and the plot (points' "label"; else the head)."""
    return r.get("label") or r["head"]


def laws(rows):
    """{label: {"lower": fit, "upper": fit}} for every head of rows."""
    heads = list(dict.fromkeys(label(r) for r in rows))
    return {h: {k: fit([r for r in rows if label(r) == h], k) for k in ("lower", "upper")} for h in heads}


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


def upper_text(r):
    """A row's upper bound; a point the budget stopped before any upper certificate has the trivial n."""
    if r["upper"] is None and r.get("stopped_on_budget"):
        return f"{r['n']} (trivial)"
    return str(r["upper"])


def budget_text(rows):
    """The markdown's sentence on the per-point budget ('' when no point had one)."""
    had = [r for r in rows if r.get("budget") is not None]
    if not had:
        return ""
    stopped = [r for r in had if r.get("stopped_on_budget")]
    seconds = ", ".join(f"{b:g}" for b in sorted({r["budget"] for r in had}))
    text = (f"Budget: {seconds} s per point (the head's sandwich at one n, anytime: the searches stop at their next "
            f"safe point once it is spent and the best VERIFIED sandwich so far is kept). **{len(stopped)} of "
            f"{len(had)} budgeted points stopped on it**")
    if stopped:
        text += " (" + ", ".join(f"{label(r)} at n = {r['n']}" for r in stopped) + "): their upper bounds are what " \
                "the searches reached in that time, and a larger budget may narrow them"
    text += "; a point the budget did not stop is exactly what a run without a budget finds"
    if len(had) < len(rows):
        text += f"; the other {len(rows) - len(had)} points were certified without a budget"
    return text + "."


def markdown(rows, fits, info, eps, command):
    enc = list(dict.fromkeys(r["model"] for r in rows if r.get("model", info["name"]) != info["name"]))
    dec = [r for r in rows if r.get("model", info["name"]) == info["name"]]
    dheads = list(dict.fromkeys(label(r) for r in dec))
    budgeted = any(r.get("budget") is not None for r in rows)
    title = f"# The causal growth law on real decoder heads ({info['name']}, eps = {eps})"
    if enc:
        title += f", beside encoder heads ({', '.join(enc)})"
    L = [title, "",
         f"Certified sandwiches lower <= r_eps(A) <= upper of {len(dheads)} heads of {info['name']} ({info['class']}, "
         f"{info['layers']} layers x {info['heads']} heads) on window 0 of certkit's built-in text at each length n; "
         "every bound is a kernel-VERIFIED certificate under `certificates/causal-real/`. Per head and bound, two "
         "least-squares laws with 95 % intervals: r = a + b ln n and r = c n^p, and which has the smaller residual sum "
         "of squares. Prefix averaging (a causal head at β = 0) has log2 n − 1 <= r_eps <= log2 n for comparison."]
    for m in enc:
        sel = [r for r in rows if r.get("model") == m]
        L[-1] += (f" Beside them, for comparison, {len(set(map(label, sel)))} heads of the encoder {m} (no mask: "
                  f"every query sees every key), certified the same way on the same text at the lengths within its "
                  f"position limit (n = {min(r['n'] for r in sel)}..{max(r['n'] for r in sel)}), under `certificates/causal-real/{m}/`; they are "
                  f"named `{m} lL-hH` below and drawn in grey in the plot.")
    budget = budget_text(rows)
    L += [""] + ([budget, ""] if budget else []) + ["| head | lower-bound laws | upper-bound laws |", "|---|---|---|"]
    for h, f in fits.items():
        L.append(f"| {h} | {verdict(f['lower'])} | {verdict(f['upper'])} |")
    cols = ["head", "n", "log2 n", "lower", "upper", "upper / lower", "prefix averaging", "seconds"] + \
        (["stopped on the budget"] if budgeted else [])
    L += ["", "| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        ratio = f"{r['upper'] / r['lower']:.2f}" if r["lower"] and r["upper"] else "—"
        stop = [("yes" if r.get("stopped_on_budget") else "no") if r.get("budget") is not None else "no budget"] \
            if budgeted else []
        L.append("| " + " | ".join([label(r), str(r["n"]), f"{r['log2_n']:g}", str(r["lower"]), upper_text(r), ratio,
                                    f"{math.ceil(r['log2_n']) - 1}..{math.ceil(r['log2_n'])}", f"{r['seconds']:.1f}"]
                                   + stop) + " |")
    text = support(dec, {h: fits[h] for h in dheads}, f"{info['name']} heads")
    for m in enc:
        sel = [r for r in rows if r.get("model") == m]
        hs = list(dict.fromkeys(map(label, sel)))
        text += " Encoder heads: " + support(sel, {h: fits[h] for h in hs}, f"{m} heads", caveat=False)
    L += ["", "What the data support: " + text, "",
          f"Regenerate (and resume): `{command}`; points: `causal-real.csv`; plot: `causal-real.png`.", ""]
    return "\n".join(L)


def down(x):
    """x rounded down to 2 decimals (a stated "at least c n" must hold at every point)."""
    return f"{math.floor(x * 100) / 100:.2f}"


LINEAR = 0.5      # a head "grows like n" when its certified lower bound is at least LINEAR n at every length


def support(rows, fits, who="heads", caveat=True):
    """Plain words on what the certified points of these heads (who: what to call them) show,
    computed from them; caveat: end with the sentence on telling the laws apart."""
    lengths = sorted({r["n"] for r in rows})
    if len(lengths) < 3:
        return f"{who}: fewer than 3 lengths, no law is fitted."
    of = lambda h: [r for r in rows if label(r) == h and r["lower"] and r["upper"]]
    share = {h: min(r["lower"] / r["n"] for r in of(h)) for h in fits if of(h)}
    linear = [h for h in share if share[h] >= LINEAR]
    const = [h for h in share if h not in linear and len({r["upper"] for r in of(h)}) == 1]
    above = [h for h in share if h not in linear + const and all(r["lower"] > math.ceil(r["log2_n"]) for r in of(h))]
    slow = [h for h in share if h not in linear + const + above]
    name = lambda hs: ", ".join(hs) or "none"

    def slower(hs):               # each head's power law of the lower bound and its share of n at the largest n
        out = []
        for h in hs:
            last, f = max(of(h), key=lambda r: r["n"]), fits[h]["lower"]
            law = "" if f is None else (f"lower ≈ {math.exp(f['power']['ln_c']):.2g} n^{f['power']['p']:.2f}, p in "
                                        f"[{f['power']['ci95'][0]:.2f}, {f['power']['ci95'][1]:.2f}]; ")
            out.append(f"{h}: {law}{down(last['lower'] / last['n'])} n at n = {last['n']}")
        return "; ".join(out) or "none"
    if linear:
        grow = (f"{len(linear)} of {len(fits)} {who} grow like n itself, a certified lower bound of at least c n at "
                f"every length (" + ", ".join(f"{h}: c = {down(share[h])}" for h in linear) + "); as r_eps <= n always "
                "holds, c n <= r_eps <= n, so no fixed rank serves them as the context grows")
    else:
        grow = f"none of the {len(fits)} {who} grows like n itself (a certified lower bound of at least {LINEAR:g} n at every length)"
    text = (f"over n = {lengths[0]}..{lengths[-1]} ({len(lengths)} lengths), {grow}; "
            f"{len(const)} keep the same certified rank at every length ({name(const)}); {len(above)} have a certified "
            f"lower bound that grows more slowly than n but stays above prefix averaging's log2 n ({slower(above)}); "
            f"{len(slow)} grow slowly, their certified lower "
            f"bound at or below prefix averaging's log2 n at some length ({name(slow)}).")
    if not caveat:
        return text
    return text + (" With a factor-of-" + f"{lengths[-1] // lengths[0]}" + " range of n, a logarithm and a small "
                   "power are hard to tell apart: the RSS comparison is a description of these points, not a proof of "
                   "either law, and nothing here speaks for lengths beyond those measured.")


def plot(rows, fits, eps, path, decoder=None):
    """Certified bands per head against n (log2 axis), with prefix averaging's band; the heads of
    another model than decoder (the encoder series) in grey, dotted."""
    from ..figures import figure_style, save_figure
    with figure_style() as plt:
        two = decoder is not None and any(r.get("model", decoder) != decoder for r in rows)
        fig, ax = plt.subplots(figsize=(3.4, 4.1 if two else 3.4), layout="constrained")
        ns = np.array(sorted({r["n"] for r in rows}), float)
        ax.fill_between(ns, np.ceil(np.log2(ns)) - 1, np.ceil(np.log2(ns)), color="0.6", alpha=0.5,
                        label=r"prefix averaging: $\log_2 n - 1 \leq r \leq \log_2 n$")
        ax.plot(ns, ns, "-", color="k", lw=0.5, alpha=0.6, label=r"$r = n$ (always $r_\varepsilon \leq n$)")
        greys = ["0.2", "0.55", "0.35", "0.7"]
        k = 0
        for h in fits:
            sel = [r for r in rows if label(r) == h and r["lower"] and r["upper"]]
            if not sel:
                continue
            n = np.array([r["n"] for r in sel], float)
            lo, up = [r["lower"] for r in sel], [r["upper"] for r in sel]
            if decoder is None or sel[0].get("model", decoder) == decoder:
                line = ax.plot(n, up, "v-", ms=3, lw=0.8, label=h)[0]
                ax.plot(n, lo, "^--", ms=3, lw=0.8, color=line.get_color())
                ax.fill_between(n, lo, up, color=line.get_color(), alpha=0.12)
            else:                                           # the encoder series: grey, dotted, hollow markers
                c = greys[k % len(greys)]
                k += 1
                ax.plot(n, up, "v:", ms=3.5, lw=1.0, color=c, mfc="white", label=f"{h} (encoder, no mask)")
                ax.plot(n, lo, "^:", ms=3.5, lw=1.0, color=c, mfc="white")
                ax.fill_between(n, lo, up, color=c, alpha=0.08)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(r"context length $n$")
        ax.set_ylabel(r"certified $r_\varepsilon$: lower (▲) and upper (▼)")
        if k:
            ax.set_title(rf"Real heads, $\varepsilon = {eps}$: {decoder} (causal) and encoders (grey)", fontsize=7)
            fig.legend(fontsize=5.5, loc="outside lower center", ncol=2, frameon=False)
        else:
            ax.set_title(rf"Real decoder heads, $\varepsilon = {eps}$")
            ax.legend(fontsize=6, loc="center right", frameon=False)          # the empty band between the groups
        return save_figure(fig, os.path.splitext(path)[0])


def run(model, heads, lengths, eps, out, workers=1, scheduler=None, plots=True, command="", budget=None, encoder=None):
    """Compute (or resume) the points, write causal-real.{md,csv} and the plot; returns (rows, fits).
    budget: None or seconds per point; encoder: None or (spec, heads), the encoder series."""
    from ..outputs import FolderLock
    ensure_folder(out, "--out")
    with FolderLock(out, "--out"):       # one run per folder: then the scratch a killed run left can go
        rows, info = points(model, heads, lengths, eps, out, workers, scheduler, sys.stderr.isatty(), budget, encoder)
    fits = laws(rows)
    write_rows(os.path.join(out, "causal-real.csv"), rows, FIELDS)
    write_atomic(os.path.join(out, "causal-real.md"), with_producer(markdown(rows, fits, info, eps, command), producer()))
    if plots:
        plot(rows, fits, eps, os.path.join(out, "causal-real.png"), info["name"])
    return rows, fits
