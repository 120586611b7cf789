"""What an output folder is (kind_of) and its report page written (build): calibrate (meta.json
with configs/ or results.json), certify (summary.json: a list of sandwich rows, or {"meta", "rows"}
with --model), scale (summary.json with "slopes", or points / causal / causal-real csv), compare
(summary.json with "cheapest")."""
import os

from ..errors import InputError
from ..outputs import write_atomic
from .markup import ROW_LIMIT, ReportError, page, read_json
from .pages import calibrate_html, certify_html, compare_html, scale_html


def kind_of(folder):
    """'calibrate', 'certify' or 'scale' for an output folder; InputError when it does not exist,
    ReportError (exit 64) naming the folder when it is none of them."""
    if not os.path.exists(folder):
        raise InputError(f"{folder}: no such folder")
    if not os.path.isdir(folder):
        raise ReportError(f"{folder}: is a file; give an output folder of certkit calibrate, certify, scale or compare")
    has = lambda f: os.path.exists(os.path.join(folder, f))
    if has("meta.json") and (os.path.isdir(os.path.join(folder, "configs")) or has("results.json")):
        meta = read_json(os.path.join(folder, "meta.json"))
        if isinstance(meta, dict) and "grid" in meta:
            return "calibrate"
    if has("summary.json"):
        s = read_json(os.path.join(folder, "summary.json"))
        if isinstance(s, dict) and "slopes" in s:
            return "scale"
        if isinstance(s, dict) and "cheapest" in s and isinstance(s.get("rows"), list):
            return "compare"
        rows = s.get("rows") if isinstance(s, dict) else s
        if isinstance(rows, list) and all(isinstance(r, dict) and "lower" in r and "upper" in r for r in rows):
            return "certify"
    if has("points.csv") and (has("slopes.csv") or has("scaling.md")) or has("causal.csv") or has("causal-real.csv"):
        return "scale"
    raise ReportError(f"{folder}: not an output folder of certkit calibrate (meta.json with configs/ or "
                      f"results.json), certify (summary.json with sandwich rows), scale (summary.json with slopes, "
                      f"or points.csv, causal.csv, causal-real.csv) or compare (summary.json with cheapest)")


def build(folder, out=None, row_limit=ROW_LIMIT):
    """Write the report of an output folder (calibrate, certify, scale or compare) to out (default
    folder/report.html); returns {"kind", "path", "figures", "rows"}.  A folder that is none of them
    raises ReportError (a UserError, exit 64) naming it; a missing one InputError (66)."""
    folder = os.fspath(folder)
    kind = kind_of(folder)
    title, body, nfig, nrows = {"calibrate": calibrate_html, "certify": certify_html, "scale": scale_html,
                                "compare": compare_html}[kind](folder, row_limit)
    out = os.path.join(folder, "report.html") if out is None else os.fspath(out)
    write_atomic(out, page(title, body))
    return {"kind": kind, "path": out, "figures": nfig, "rows": nrows}
