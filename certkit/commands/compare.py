"""certkit compare: the certified error of a compressed head.

For each head and each compression setting (certkit.compress: quantised queries and keys,
low-rank keys or logits, an evicted KV cache, sliding-window or top-k attention), a certificate of

    max_i ||A_i - A'_i||_1 <= eps          (kind attention-distance, format 1.2)

that the kernel VERIFIES, eps the smallest the search states (the kernel's bound rounded up to 4
significant digits).  By the operator identity this is the worst error of the attention output
over every value matrix with entries in [-1, 1].  With --eps, the summary names per head and
method the cheapest setting whose certified error is <= eps: the compression engineer's table.
The heads: head files, --synthetic specs, or a model's heads on a text (as certkit certify).
"""
import csv
import io
import json
import os
import re
import sys
import time
from dataclasses import dataclass
from fractions import Fraction

from ..compress import parse_methods
from ..errors import UserError
from ..head import Head
from ..numbers import decimal, parse_beta, parse_distance, parse_output_eps, tag
from ..outputs import FolderLock, write_atomic
from ..provenance import portable_path, producer, producer_line
from ..search import writer
from ..driver import HEAD_ROWS, finished_heads, parse_synthetic, read_model_heads

# the settings that decide a compare run's certificates: a rerun into the same --out resumes only with the same
RUN_SETTINGS = ("methods", "eps", "lower", "model", "model_sha256", "text_sha256", "window", "length", "norm",
                "relative", "level")
COLUMNS = ["head", "layer", "head_index", "method", "family", "cost", "norm", "relative", "certified", "certified_float",
           "estimate", "kernel_bound", "verdict", "lower", "lower_eps", "file", "seconds"]
STATS = [f"{q}_{s}{f}" for q in ("abs", "rel") for s in ("max", "mean", "p99") for f in ("", "_float")]
LAYER_COLUMNS = ["layer", "heads", "method", "family", "cost", "norm", "relative", "certified", "estimate",
                 "kernel_bound", "verdict", *STATS, "file", "seconds"]


@dataclass(frozen=True)
class LayerHeads:
    """The heads of one layer, compared together (--level layer); name: the layer's folder under --out."""
    name: str
    layer: int
    heads: tuple


class CompareError(UserError):
    """Bad input to compare (a message naming the argument and value)."""


def add_arguments(p):
    p.add_argument("heads", nargs="*", metavar="HEAD", help=".npz or .safetensors head files (arrays Q, K; "
                   "optional beta, weights, bias)")
    p.add_argument("--synthetic", action="append", default=[], metavar="SPEC",
                   help="a synthetic head FAMILY[:n=..,N=..,d=..,beta=..,seed=..] as for certkit certify (repeatable)")
    p.add_argument("--beta", help="temperature for head files without one (e.g. 1/8 or 1/sqrt(64))")
    p.add_argument("--method", action="append", required=True, metavar="SPEC",
                   help="a compression setting, repeatable or ';'-separated: quant:int8, quant:int4, quant:fp8 "
                        "(queries and keys; quant:int8,int4 lists several), lowrank:k=16 (rank-k keys; ,of=logits "
                        "for rank-k logits), evict:sinks=4,window=64 (a KV cache keeping attention sinks and a "
                        "recent window; ,heavy=8 adds the 8 keys of largest attention mass; evict:keep=0-15,40 a "
                        "fixed list), window:w=128 (sliding window), topk:k=32. A range a..b doubles from a to b: "
                        "lowrank:k=4..64, evict:sinks=4,window=16..512")
    p.add_argument("--eps", default=None, help="a tolerance (exact, e.g. 1/4): the summary names per head and method "
                   "the cheapest setting whose certified error is <= eps")
    p.add_argument("--lower", action="store_true", help="with --eps: also certify r_eps(A) >= m (the lower search), "
                   "shown beside the low-rank rows: no attention matrix of rank below m is within eps")
    p.add_argument("--out", default=None, metavar="DIR", help="output folder (default data/compare; with --model "
                   "data/compare/<model>)")
    p.add_argument("--norm", choices=("inf", "2"), default=None,
                   help="instead of the worst case over all values, the error of each head's output on its own "
                        "values through its slice of W_O: max_i ||(A V W - A' V' W)_i|| in this row norm "
                        "(attention-output-distance certificates, format 1.3; heads with values: --model, or head "
                        "files with a 'values' array and optionally 'projection')")
    p.add_argument("--relative", action="store_true",
                   help="with --norm: the output error relative to the output, max_i ||D_i|| / ||(A V W)_i||")
    p.add_argument("--level", choices=("head", "layer"), default="head",
                   help="layer (with --model): certify the attention block of each layer, max_i ||(sum_h (A_h V_h - "
                        "A'_h V'_h) W_O^h)_i|| in the --norm (default 2), one certificate per layer and setting; the "
                        "summary gives per layer the certified max, mean and p99 over tokens, absolute and relative "
                        "to the layer's output, each beside its float64 value")
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON on stdout")
    p.add_argument("--wait", action="store_true", help="if another certkit run is writing into --out, wait for it")
    g = p.add_argument_group("the heads of a model (instead of HEAD files): docs/models.md")
    g.add_argument("--model", metavar="DIR|FILE.gguf", help="a local Hugging Face folder, a GGUF file, or minilm / "
                   "mpnet / smollm2 (the built-in real weights), read as for certkit certify")
    g.add_argument("--text", metavar="FILE", help="UTF-8 text for the model (default: certkit's built-in text)")
    g.add_argument("--tokens", metavar="FILE", help="token ids instead of a text")
    g.add_argument("--length", type=int, default=128, metavar="N", help="tokens per window (default 128)")
    g.add_argument("--window", type=int, default=0, metavar="K", help="which window of the text (default 0)")
    g.add_argument("--layers", dest="model_layers", default="all", metavar="LIST", help="layers: all, 0-3 or 0,5")
    g.add_argument("--heads", dest="model_heads", default="all", metavar="LIST", help="heads: all, 0-3 or 0,5")
    p.add_argument("--workers", type=int, default=1, metavar="N", help="heads compared in N parallel processes "
                   "(default 1; certificates identical to a serial run)")
    p.add_argument("--scheduler", metavar="ADDRESS", default=None,
                   help="compare the heads on Dask distributed: local, local:N or a scheduler address such as "
                        "tcp://host:8786 (needs the 'dask' extra; certificates identical to a serial run)")


def compare_head(task):
    """(index, rows) of one head: a certificate per setting under out/<head>/, rows.json written last."""
    from ..search.compare import certify_distance, certify_output_distance
    h, out, eps = task["head"], task["out"], task["eps"]
    folder = os.path.join(out, h.name)
    os.makedirs(folder, exist_ok=True)
    p = h.provenance
    where = {"layer": p.get("layer"), "head_index": p.get("head")}
    prov = {k: v for k, v in p.items() if isinstance(v, (str, int)) and not isinstance(v, bool)}
    rows = []
    lower = lower_row(h, eps, folder, prov) if task["lower"] else {}
    for m in task["methods"]:
        path = os.path.join(folder, re.sub(r"[^A-Za-z0-9.]+", "-", m.spec) + ".json")
        if task.get("norm"):
            c = certify_output_distance(h, m.apply(h), task["norm"], task["relative"], path=path,
                                        provenance=dict(prov, compression=m.spec))
        else:
            c = certify_distance(h, m.apply(h), path=path, provenance=dict(prov, compression=m.spec))
        rows.append({**dict(c.row(os.path.relpath(path, out) if c.certificate else None), head=h.name),
                     **where, "family": m.family, "cost": m.cost, "method": m.spec, **lower})
    write_atomic(os.path.join(folder, HEAD_ROWS), json.dumps(rows, indent=1) + "\n")
    return task["index"], rows


def compare_layer(task):
    """(index, rows) of one layer: a layer certificate per setting under out/<layer>/, rows.json written last."""
    from ..search.compare import certify_layer_output
    group, out = task["head"], task["out"]
    folder = os.path.join(out, group.name)
    os.makedirs(folder, exist_ok=True)
    p = group.heads[0].provenance
    prov = {k: v for k, v in p.items() if isinstance(v, (str, int)) and not isinstance(v, bool) and k != "head"}
    rows = []
    for m in task["methods"]:
        path = os.path.join(folder, re.sub(r"[^A-Za-z0-9.]+", "-", m.spec) + ".json")
        c = certify_layer_output(group.name, list(group.heads), [m.apply(h) for h in group.heads], task["norm"],
                                 task["relative"], path=path, provenance=dict(prov, compression=m.spec))
        rows.append({**c.row(os.path.relpath(path, out) if c.certificate else None), "layer": group.layer,
                     "family": m.family, "cost": m.cost, "method": m.spec})
    write_atomic(os.path.join(folder, HEAD_ROWS), json.dumps(rows, indent=1) + "\n")
    return task["index"], rows


def layers_of(heads):
    """The heads grouped by layer (provenance "layer"), in order, as LayerHeads."""
    by = {}
    for h in heads:
        by.setdefault(h.provenance["layer"], []).append(h)
    return [LayerHeads(f"layer-{l}", l, tuple(hs)) for l, hs in by.items()]


def lower_row(h, eps, folder, prov):
    """{"lower": m, "lower_eps": eps} with a kernel-VERIFIED certificate of r_eps(A) >= m under folder."""
    from ..search.sandwich import certify_lower
    r = certify_lower(h.attention(), eps, h, os.path.join(folder, f"eps-{tag(eps)}.lower.json"), prov)
    return {"lower": None if r is None else r["bound"], "lower_eps": str(eps)}


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


def run(args):
    """certkit compare: exit 0 if every setting of every head got a certified distance, 1 otherwise."""
    methods = [m for spec in args.method for m in parse_methods(spec)]
    layer = getattr(args, "level", "head") == "layer"
    if layer:
        if args.model is None or args.lower:
            raise CompareError("--level layer compares the attention block of a model's layers: it needs --model "
                               "(and takes no --lower)")
        args.norm = args.norm or "2"
    if args.relative and not args.norm:
        raise CompareError("--relative needs --norm inf or --norm 2 (the row norm of the output error)")
    parse_eps = parse_output_eps if args.norm else parse_distance
    eps = None if args.eps is None else parse_eps(args.eps, "--eps")
    if args.lower and (eps is None or eps >= 1):
        raise CompareError("--lower needs --eps below 1 (the tolerance of the rank lower bound r_eps(A))")
    if args.workers < 1:
        raise CompareError(f"--workers: {args.workers} must be >= 1")
    from ..parallel import parse_scheduler
    parse_scheduler(args.scheduler)
    meta = {"methods": [m.spec for m in methods], "eps": None if eps is None else str(eps), "lower": args.lower,
            "norm": args.norm, "relative": bool(args.relative), "level": "layer" if layer else "head"}
    if args.model is not None:
        if args.heads or args.synthetic or args.beta:
            raise CompareError("--model compares a model's heads: give no HEAD files, --synthetic or --beta with it")
        args.multipliers = "1"
        _, heads, model_meta = read_model_heads(args, [Fraction(1)], os.path.join("data", "compare"))
        meta = {**model_meta, **meta}
        heads = layers_of(heads) if layer else heads
    else:
        if args.text or args.tokens or args.length != 128 or args.window or args.model_layers != "all" \
                or args.model_heads != "all":
            raise CompareError("--text, --tokens, --length, --window, --layers and --heads need --model")
        beta = parse_beta(args.beta, "--beta") if args.beta else None
        heads = [Head.from_file(f, beta) for f in args.heads] + [parse_synthetic(s) for s in args.synthetic]
        if not heads:
            raise CompareError("no heads: give HEAD files, --synthetic SPEC or --model (see certkit compare --help)")
        if args.norm and any(h.values is None for h in heads):
            raise CompareError(f"--norm needs heads with values: head {next(h.name for h in heads if h.values is None)!r} "
                               f"has none (--model reads V and W_O from the model; a head file needs a 'values' array)")
        args.out = args.out or os.path.join("data", "compare")
        writer.ensure_folder(args.out, "--out")
    meta["command"] = command_line(args)
    meta["producer"] = producer()
    with FolderLock(args.out, "--out", args.wait):
        return compare_heads(args, heads, methods, eps, meta)


def command_line(args):
    import shlex
    parts = ["certkit", "compare"] + list(args.heads)
    for s in args.synthetic:
        parts += ["--synthetic", s]
    for flag, value, default in (("--model", args.model, None), ("--text", args.text, None),
                                 ("--tokens", args.tokens, None), ("--length", args.length, 128),
                                 ("--window", args.window, 0), ("--layers", args.model_layers, "all"),
                                 ("--heads", args.model_heads, "all"), ("--beta", args.beta, None),
                                 ("--eps", args.eps, None), ("--norm", args.norm, None),
                                 ("--level", getattr(args, "level", "head"), "head")):
        if value != default:
            parts += [flag, str(value)]
    for m in args.method:
        parts += ["--method", m]
    return " ".join(map(shlex.quote, parts + (["--relative"] if args.relative else []) + (["--lower"] if args.lower else [])
                        + ["--out", portable_path(args.out)]))


def compare_heads(args, heads, methods, eps, meta):
    from ..parallel import run as run_tasks
    done = finished_heads(args.out, meta, heads, RUN_SETTINGS, ("file",), CompareError)
    tasks = [{"index": i, "head": h, "out": args.out, "methods": methods, "eps": eps, "lower": args.lower,
              "norm": args.norm, "relative": bool(args.relative)} for i, h in enumerate(heads) if i not in done]
    bar = None
    if sys.stderr.isatty():
        from tqdm import tqdm
        bar = tqdm(total=len(heads), initial=len(done), desc="certkit compare", unit="head", file=sys.stderr)
    t0 = time.perf_counter()
    try:
        layer = meta.get("level") == "layer"
        for i, new in run_tasks(compare_layer if layer else compare_head, tasks, args.workers, args.scheduler):
            done[i] = new
            write_summary(meta, [r for j in sorted(done) for r in done[j]], args.out, eps)   # nothing lost
            if bar is not None:
                bar.update(1)
            if not args.json:
                for r in new:
                    who = f"layer {r['layer']}" if layer else r["head"]
                    (bar.write if bar is not None else print)(
                        f"{who}  {r['method']}:  {quantity(meta)} <= {short(r['certified'])}"
                        f"  (float {r['estimate']:.4g})  [{r['seconds']:.2f} s]")
    finally:
        if bar is not None:
            bar.close()
    rows = [r for j in sorted(done) for r in done[j]]
    write_summary(meta, rows, args.out, eps)
    figures(meta, rows, args.out)
    if args.json:
        json.dump(rows, sys.stdout, indent=1)
        print()
    elif eps is not None:
        for c in cheapest(rows, eps):
            print(f"{c['head']}  {c['family']}: cheapest with certified error <= {decimal(eps)}: "
                  f"{c['cheapest'] or 'none'}" + (f" ({short(c['certified'])})" if c["cheapest"] else ""))
    print(f"{len(rows)} certified distances ({len(heads)} heads) in {time.perf_counter() - t0:.1f} s; certificates "
          f"and summary.md/json/csv under {args.out}", file=sys.stderr)
    return 0 if all(r["certified"] is not None for r in rows) else 1
