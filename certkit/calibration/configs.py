"""The calibration's store of finished groups: OUT/configs/L<L>/l<layer>-h<head>-m<m>.json, one per
(length, layer, head, multiplier), each written atomically (certkit.outputs.write_json), so that a
rerun skips what is there and an interrupted run loses nothing finished; collect() reads them back
for the report."""
import json
import os
from fractions import Fraction

from ..numbers import tag


def group_path(out, L, l, h, m):
    """The config file of group (L, layer l, head h, multiplier m) under out."""
    return os.path.join(out, "configs", f"L{L}", f"l{l}-h{h}-m{tag(m)}.json")


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

