"""The calibration grid: one group per (length L, layer, head, multiplier m), computed, written
atomically and skipped when already there (resumable).

For the model's head at length L and beta = m / sqrt(d_head) (m = 1 is the model), and each eps:
* r_exact: the numerical visible dimension (docs/mathematics.md §4.4), with its certified lower bound;
* r_SVD_int(eps/3) and r_opt from the SVD-bridge residual profile tau_r (docs/mathematics.md §6.2-6.3);
* R_sym: the symbolic chain bound (docs/mathematics.md §7), as a kernel-VERIFIED upper-chain certificate;
* R_con and the lower bound: kernel-VERIFIED constructive certificates (certkit certify's searches);
* Gamma = beta rho_Q rho_K of the full visible space, and the tau_r curves;
* the same bridge on the full logits beta Q K^T + bias (the _bias fields, docs/mathematics.md §6.4)
  and the attention mass on the special tokens (sink_mass).
One JSON file per group under OUT/configs (configs.py); certificates under
OUT/certificates/L<L>-l<layer>-h<head>/m<m>-eps-<eps>.{lower,upper,chain}.json.
"""
import functools
import json
import os
import time
from fractions import Fraction

import numpy as np

from .. import geometry
from ..driver import sandwich_files
from ..errors import UserError
from ..models.families import times
from ..numbers import tag
from ..outputs import write_json
from ..provenance import producer
from .. import parallel
from ..search import writer
from ..search.chain import best_chain
from ..symbolic.float_chain import log_size
from .configs import group_path

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


BRIDGE = 3          # version of the bridge fields; groups written with an older one are refreshed


def bridge(h, eps_list, geo=None):
    """The SVD bridge of the head h (at its beta) for each eps, on Q, K only and on the full logits
    beta Q K^T + bias (docs/mathematics.md §6.4; identical when h has no bias): ({eps: fields},
    curves).  fields: r_exact (float r_num) with its certified lower bound, r_svd_int(eps/3), r_opt,
    Gamma, the same with suffix _bias, and sink_mass (the mean attention on the two special tokens,
    positions 0 and n - 1 of the calibration window).  With a bias, the full-logit profile has r up
    to n - 1 and is computed lazily (geometry.LazyProfile: r_svd_int_bias by bisection, the curve
    at 24 evenly spaced r and the last 8, listed in tau_width_bias_r; r_opt_bias, an argmin over
    every r, is not computed).
    curves: tau_width, tau_exact, tau_spec, sigma (Q, K only) and tau_width_bias.  geo: profile_geometry of (Q, K) shared between
    multipliers (it does not depend on beta; the biased one does and is computed here)."""
    b = h.beta_float
    vis = geometry.visible_dimension(h.queries, h.keys, weights=h.weights, mask=h.mask)     # masked: §4.5
    geo = geo if geo is not None else geometry.profile_geometry(h.queries, h.keys, h.weights)
    prof = geometry.residual_profile(h.queries, h.keys, b, h.weights, geo=geo)
    lazy = None
    if h.bias is not None:
        Qa, Ka, off = geometry.absorb_bias(h.queries, h.keys, h.beta, h.bias, h.weights)
        if Qa.shape[1] > h.d:                   # a centred bias part: the bridge of the full logits
            lazy = geometry.LazyProfile(Qa, Ka, h.beta, h.weights, off)
            vis_b = {"r_num": lazy.r_max}               # its frame's numerical rank (visible_dimension's r_num)
            r_low_b = geometry.biased_rank_lower(h.queries, h.keys, h.beta, h.bias, h.weights)[0]
            if h.mask is not None:              # masked (ALiBi decoders): §4.5 on (Qa, Ka), float only
                vis_b = {"r_num": geometry.visible_dimension(Qa, Ka, weights=h.weights, mask=h.mask)["r_num"]}
                r_low_b = None                  # biased_rank_lower bounds the unmasked centred logits
            curve_b = lazy.curve()
    if lazy is None:                            # no bias, or only row and column terms: the same head
        vis_b, r_low_b = vis, vis["r_exact_lower"]
    A = h.attention()
    if h.mask is not None:                      # a decoder: the first token, which every query sees
        sink = float(np.mean(A[:, 0]))
    else:                                       # an encoder: its two special tokens
        sink = float(np.mean(A[:, 0] + A[:, -1])) if h.n > 1 else 1.0
    # the largest r_M a masked head can have: d, one less than the rows that see two keys, the key pairs
    cap = min(h.d, max(vis.get("rows_seeing_two", 0) - 1, 0), vis.get("pairs", 0))
    out = {}
    for e in eps_list:
        eps = float(Fraction(e))
        r_int = geometry.r_svd_int(prof.rows, eps=eps)
        r_op = geometry.r_opt(prof.rows, eps, log_size)
        out[str(Fraction(e))] = {
            "r_exact": vis["r_num"], "r_exact_certified_lower": vis["r_exact_lower"],
            "r_svd_int": r_int, "r_opt": r_op, "Gamma": prof.rows[-1].Gamma_W,
            "r_exact_bias": vis_b["r_num"], "r_exact_bias_certified_lower": r_low_b,
            "r_svd_int_bias": r_int if lazy is None else lazy.r_svd_int(eps / 3),
            "r_opt_bias": r_op if lazy is None else None,
            "Gamma_bias": prof.rows[-1].Gamma_W if lazy is None else lazy.row(lazy.r_max).Gamma_W,
            "sink_mass": sink, "bridge": BRIDGE, "mask": None if h.mask is None else str(h.mask),
            **({} if h.mask is None else {"r_exact_max": cap})}
    curves = {"tau_width": [r.tau_width for r in prof.rows], "tau_exact": [r.tau_exact for r in prof.rows],
              "tau_spec": [r.tau_spec for r in prof.rows], "sigma": [float(s) for s in prof.sigma]}
    if lazy is None:
        curves["tau_width_bias"] = curves["tau_width"]
    else:
        curves.update(tau_width_bias_r=[r.r for r in curve_b], tau_width_bias=[r.tau_width for r in curve_b])
    return out, curves, (prof, A)


def group(head, multiplier, eps_list, cert_dir, text_sha256=None, geo=None):
    """All eps of one (head, multiplier): {"rows": one row per eps, the bridge's curves (bridge()),
    "seconds"}.  head: the model's Head at length L (certkit.models.rebuild.head: its provenance names
    model, layer, head and length); beta becomes multiplier / sqrt(d_head).  geo:
    geometry.profile_geometry of the head when the caller shares it between multipliers."""
    t0 = time.perf_counter()
    mult = Fraction(multiplier)
    p = head.provenance
    h = head.replace(beta=times(head.beta, mult))
    geo = geo if geo is not None else geometry.profile_geometry(h.queries, h.keys, h.weights)
    fields, curves, (prof, A) = bridge(h, eps_list, geo)
    inst = h.instance()
    folder = f"L{p['length']}-l{p['layer']}-h{p['head']}"      # one per head and length: Q, K stored once
    base_dir = os.path.join(cert_dir, folder)
    os.makedirs(base_dir, exist_ok=True)
    prov = {"producer": "certkit calibrate", "model": p["model"], "layer": p["layer"], "head": p["head"],
            "length": p["length"], "multiplier": str(mult), "text_sha256": text_sha256}
    chain_cache = {}                            # per r: witness and kernel geometry, shared by the eps
    lower_cache = {}                            # the lower search's eps-free work, kept across the eps
    rows = []
    for e in eps_list:
        eps = Fraction(e)
        te = time.perf_counter()
        name = f"m{tag(mult)}-eps-{tag(eps)}"
        stem = os.path.join(base_dir, name)
        br = fields[str(eps)]
        lo, up = sandwich_files(A, eps, h, inst, stem, prov, LAYOUT, lower_cache, **UPPER_SEARCH)
        rs = sorted({r for r in (br["r_opt"], prof.r_max) if r is not None})
        R_sym = None
        # the chain does not apply to a row-masked head (docs/mathematics.md §4.5, §8.5; the kernel answers
        # UNSUPPORTED): no chain certificate, R_sym not applicable (R_sym_applicable False)
        best = None if h.mask is not None else best_chain(h, eps, rs=rs, geo=geo, cache=chain_cache, inst=inst)
        if best is not None:
            v = writer.write_checked(stem + ".chain.json", "upper-chain", best[0], eps, h,
                                     {k: (a, "float") for k, a in best[2].items()},
                                     dict(prov, search=f"chain r={best[1]}"), **LAYOUT)
            if v.status == "VERIFIED":          # a rejected file and its sidecars are removed
                R_sym = int(best[0])
        rows.append(row_of(p, mult, h, eps, br, {
            "R_sym": R_sym, "R_sym_r": best[1] if best else None, "R_sym_applicable": h.mask is None,
            "R_con": up["bound"] if up else None, "upper_method": up["method"] if up else None,
            "lower": lo["bound"] if lo else None, "lower_kind": lo["kind"] if lo else None,
            "certificates": f"certificates/{folder}/{name}.{{lower,upper,chain}}.json",
            "seconds": round(time.perf_counter() - te, 3)}))
    return {"rows": rows, **curves, "seconds": round(time.perf_counter() - t0, 3)}


def row_of(p, mult, h, eps, br, found):
    """One results row: where (model, L, layer, head, m, beta, eps, n, d_head), the bridge fields
    br and the searches' fields `found` (summary.FIELDS orders the CSV columns)."""
    return {"model": p["model"], "L": p["length"], "layer": p["layer"], "head": p["head"], "multiplier": str(mult),
            "beta": str(h.beta), "eps": str(eps),
            "n": h.n, "d_head": h.d, **br, **found}


def refresh(task):
    """Recompute the bridge fields and curves of groups written with an older bridge (the
    certificates, R_con, lower and R_sym do not depend on it and are kept), rewriting each config."""
    h0 = task["head"]
    p = h0.provenance
    geo = geometry.profile_geometry(h0.queries, h0.keys, h0.weights)
    done = []
    for m in task["multipliers"]:
        path = group_path(task["out"], p["length"], p["layer"], p["head"], Fraction(m))
        with open(path) as f:
            g = json.load(f)
        t0 = time.perf_counter()
        h = h0.replace(beta=times(h0.beta, Fraction(m)))
        fields, curves, _ = bridge(h, [r["eps"] for r in g["rows"]], geo)
        keep = ("R_sym", "R_sym_r", "R_sym_applicable", "R_con", "upper_method", "lower", "lower_kind", "certificates",
                "seconds")
        g["rows"] = [row_of(p, Fraction(m), h, Fraction(r["eps"]), fields[r["eps"]], {k: r[k] for k in keep if k in r})
                     for r in g["rows"]]
        g.update(curves)
        g["bridge_seconds"] = round(time.perf_counter() - t0, 3)
        write_json(path, g)
        done.append(g)
    return done


def head_task(task):
    """The remaining multipliers task["multipliers"] of one head at one length (task["head"]): the
    beta-independent geometry once, then group() per multiplier, each written atomically to its
    config file under task["out"] as soon as it is done.  Each group's seconds include its share
    of the geometry.  task: head, multipliers, eps, cert_dir, out, text_sha256 (a dict, so that a
    worker process receives it whole)."""
    if task.get("refresh"):
        return refresh(task)
    h = task["head"]
    p = h.provenance
    t0 = time.perf_counter()
    geo = geometry.profile_geometry(h.queries, h.keys, h.weights)
    share = (time.perf_counter() - t0) / len(task["multipliers"])
    done = []
    for m in task["multipliers"]:
        g = group(h, m, task["eps"], task["cert_dir"], task.get("text_sha256"), geo)
        g["seconds"] = round(g["seconds"] + share, 3)
        write_json(group_path(task["out"], p["length"], p["layer"], p["head"], Fraction(m)), g)
        done.append(g)
    return done


def run_grid(model_spec, out, layers, heads, lengths, mults, eps_list, workers=1, progress=False, scheduler=None,
             lock=None, text=None, tokens=None):
    """Run (or resume) the grid of model_spec ('minilm', 'mpnet' or a local folder) into out:
    layers, heads: "all" or index lists (checked against the model); lengths, mults, eps_list:
    parsed values (certkit.calibration.parse_options).  Writes out/meta.json, one config per group
    and the certificates; returns (groups computed now, groups already done, meta).  Each head's
    groups are one task for certkit.parallel.run (workers processes, or a Dask scheduler).  lock: the
    folder's certkit.outputs.FolderLock, acquired as soon as the folder exists (the caller releases it).
    text or tokens: the input instead of the built-in text (window 0 of each length, the tokenizer's
    own special tokens; certkit.models.tokens.inputs)."""
    from ..models.capturing import capture
    from ..models.loading import load
    from ..models.rebuild import head, reconstruction_error
    from ..models.tokens import builtin_text, inputs, sha256_of, token_window
    model, tok, info = load(model_spec)          # a folder, a GGUF file or a built-in name, as certify --model
    layers, heads = (list(range(info[what])) if idx == "all" else in_range(idx, info[what], what)
                     for what, idx in (("layers", layers), ("heads", heads)))
    if text is None and tokens is None and not info["decoder"]:     # the encoder grid's [CLS] text [SEP] windows
        _, sha = builtin_text()
        source = "pydoc_data.topics (sorted keys)"
        window = lambda L: token_window(tok, info["kind"], L)
    else:       # your input, or a decoder's built-in text: each length tokenised once, its own special tokens
        window = functools.lru_cache(maxsize=None)(lambda L: inputs(tok, info, text, tokens, L)[0])
        sha = builtin_text()[1] if text is None and tokens is None else \
            sha256_of(text) if text is not None else sha256_of(ids=np.asarray(tokens).reshape(-1))
        source = "pydoc_data.topics (sorted keys)" if text is None and tokens is None else \
            "--text" if text is not None else "--tokens"
        window(min(lengths))                 # a bad input (too short, no tokenizer) fails before any work
    from ..outputs import ensure_folder
    ensure_folder(out, "out")                # created once the model and its input are read
    if lock is not None:
        lock.acquire()
    previous = os.path.join(out, "meta.json")
    if os.path.exists(previous):
        with open(previous) as f:
            before = json.load(f).get("text_sha256")
        if before != sha:
            raise UserError(f"--out {out}: holds groups computed on another text (sha256 {str(before)[:16]}..., this "
                            f"input {sha[:16]}...): give another --out")
    cert_dir = os.path.join(out, "certificates")
    recon, todo = [], []
    for L in lengths:
        c = capture(model, info, window(L), layers=layers)
        recon.append({"L": L, "max_abs_diff_float32_model": reconstruction_error(c)})
        for l in layers:
            for h in heads:
                paths = {m: group_path(out, L, l, h, m) for m in mults}
                left = [str(m) for m in mults if not os.path.exists(paths[m])]
                stale = [str(m) for m in mults if str(m) not in left and stale_bridge(paths[m])]
                for ms, redo in ((left, False), (stale, True)):
                    if ms:
                        todo.append({"head": head(c, l, h), "multipliers": ms, "eps": [str(e) for e in eps_list],
                                     "cert_dir": cert_dir, "out": out, "text_sha256": sha, "refresh": redo})
    recon.append({"L": lengths[0], "max_abs_diff_float64_model": float64_check(model, info, window(lengths[0]))})
    total = len(lengths) * len(layers) * len(heads) * len(mults)
    meta = {"model": info["name"], "spec": model_spec,
            "info": {k: os.path.basename(v) if k == "file" else v        # a GGUF file: its name (and sha256)
                     for k, v in info.items() if k not in ("folder", "name")},
            "text": source, "text_sha256": sha, "reconstruction": recon, "producer": producer(),
            "grid": {"layers": layers, "heads": heads, "lengths": list(lengths), "multipliers": [str(m) for m in mults],
                     "eps": [str(e) for e in eps_list]}}
    write_json(os.path.join(out, "meta.json"), meta)
    del model
    todo.sort(key=lambda t: (t["refresh"], -t["head"].provenance["length"]))   # longest first: the pool ends short
    left = sum(len(t["multipliers"]) for t in todo if not t["refresh"])
    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=left, desc=f"certkit calibrate {info['name']}", unit="group")
    done = 0
    for result in parallel.run(head_task, todo, workers, scheduler):
        if "bridge_seconds" in result[0]:           # a refreshed group, not a new one
            continue
        done += len(result)
        if bar:
            bar.update(len(result))
    if bar:
        bar.close()
    return done, total - left, meta


def stale_bridge(path):
    """True when the finished group at path was written with an older bridge (BRIDGE)."""
    with open(path) as f:
        rows = json.load(f)["rows"]
    return any(r.get("bridge", 1) < BRIDGE for r in rows)


def in_range(idx, limit, what):
    """idx (a list of indices) when each lies in 0..limit-1, else UserError naming `what`."""
    bad = [i for i in idx if not 0 <= i < limit]
    if bad or not idx:
        raise UserError(f"{what}: {bad[0] if bad else 'no index'} is out of range 0..{limit - 1} "
                             f"(this model has {limit} {what})")
    return list(idx)


def float64_check(model, info, ids):
    """max |rebuild - attention| with the model in float64 on the token ids (expected 0 up to float64 rounding)."""
    import copy
    from ..models.capturing import capture
    from ..models.rebuild import reconstruction_error
    m64 = copy.deepcopy(model).double()
    c = capture(m64, info, ids)
    return reconstruction_error(c)
