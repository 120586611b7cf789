"""A compare run (`certkit compare`): for each head (or, at --level layer, each layer of a model's
heads) and each compression setting, a kernel-VERIFIED certificate of the compressed head's error
(certkit.search.compare) under out/<head>/, the head's rows in out/<head>/rows.json written last, so
that a rerun with the same settings resumes (certkit.driver.finished_heads); the summary
(certkit.comparison.summary) is rewritten after each head, the figures made at the end."""
import json
import os
import re
from dataclasses import dataclass

from ..driver import HEAD_ROWS, finished_heads
from ..errors import UserError
from ..numbers import tag
from ..outputs import FolderLock, write_atomic
from .summary import figures, write_summary

# the settings that decide a compare run's certificates: a rerun into the same --out resumes only with the same
RUN_SETTINGS = ("methods", "eps", "lower", "model", "model_sha256", "text_sha256", "window", "length", "norm",
                "relative", "level")


@dataclass(frozen=True)
class LayerHeads:
    """The heads of one layer, compared together (--level layer); name: the layer's folder under --out."""
    name: str
    layer: int
    heads: tuple


class CompareError(UserError):
    """Bad input to compare (a message naming the argument and value)."""


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


def compare_heads(heads, methods, eps, meta, out, *, lower=False, norm=None, relative=False, workers=1,
                  scheduler=None, wait=False, started=None, finished=None):
    """Every head of heads (LayerHeads at meta["level"] "layer") at every method, into out (locked:
    wait for another run writing there, or refuse), resuming the heads a run with the same settings
    finished there; in workers processes or on scheduler (certkit.parallel).  started(done): called
    once the finished heads are known ({index: rows}); finished(rows): with each head's rows as it
    ends, after the summary is rewritten.  Returns the rows, in the heads' order, with the summary
    and the figures written."""
    from ..parallel import run as run_tasks
    with FolderLock(out, "--out", wait):
        done = finished_heads(out, meta, heads, RUN_SETTINGS, ("file",), CompareError)
        tasks = [{"index": i, "head": h, "out": out, "methods": methods, "eps": eps, "lower": lower,
                  "norm": norm, "relative": bool(relative)} for i, h in enumerate(heads) if i not in done]
        if started is not None:
            started(done)
        layer = meta.get("level") == "layer"
        for i, new in run_tasks(compare_layer if layer else compare_head, tasks, workers, scheduler):
            done[i] = new
            write_summary(meta, [r for j in sorted(done) for r in done[j]], out, eps)   # nothing lost
            if finished is not None:
                finished(new)
        rows = [r for j in sorted(done) for r in done[j]]
        write_summary(meta, rows, out, eps)
        figures(meta, rows, out)
    return rows
