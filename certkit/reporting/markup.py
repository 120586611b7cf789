"""The pieces of a report page (certkit report): escaped text, values as prose, Markdown (the subset
certkit writes) and tables as HTML, PNG figures embedded as base64, the page itself with its inline
CSS, and the files of a folder read with errors that name them."""
import base64
import html
import json
import os
import re

from ..errors import UserError

ROW_LIMIT = 400


class ReportError(UserError):
    """DIR is not an output folder certkit report can read (exit 64; the message names the folder)."""


CSS = """body{font-family:system-ui,-apple-system,"Segoe UI",Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#222;line-height:1.45}h1{font-size:1.5em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #ccc}
h3{font-size:1.05em}table{border-collapse:collapse;margin:.6em 0;font-size:.85em}th,td{border:1px solid #ccc;padding:.2em .5em;
text-align:left;vertical-align:top}th{background:#f2f2f2}tr:nth-child(even) td{background:#fafafa}code{background:#f4f4f4;
padding:0 .2em}figure{display:inline-block;margin:.5em 1em .8em 0;vertical-align:top;max-width:100%}figure img{max-width:100%;
width:510px;border:1px solid #eee}figcaption{font-size:.85em;color:#444;max-width:510px}.note{color:#555;font-size:.9em}
details{margin:.6em 0}summary{cursor:pointer;font-weight:600}.scroll{overflow-x:auto}"""


def esc(x):
    return html.escape("—" if x is None else str(x), quote=True)


def plain(x):
    """A value of a summary as prose: a list as '0, 1, 2' (runs of 3 or more consecutive integers
    as '0–11'), a float to 3 significant digits (6e-07, not 5.960464477539063e-07)."""
    if isinstance(x, float):
        return f"{x:.3g}"
    if isinstance(x, (list, tuple)):
        if x and all(isinstance(v, int) and not isinstance(v, bool) for v in x):
            runs, out = [], sorted(x)
            for v in out:
                if runs and v == runs[-1][1] + 1:
                    runs[-1][1] = v
                else:
                    runs.append([v, v])
            return ", ".join(f"{a}–{b}" if b - a >= 2 else f"{a}, {b}" if b > a else f"{a}" for a, b in runs)
        return ", ".join(plain(v) for v in x)
    return "—" if x is None else str(x)


def inline(text):
    """Markdown inline markup (`code`, **bold**) of escaped text."""
    t = esc(text)
    t = re.sub(r"`([^`]+)`", r"<code>\1</code>", t)
    return re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", t)


def table(header, rows, limit=ROW_LIMIT, more=""):
    """An HTML table (cells escaped); beyond `limit` rows, a note saying how many were left out and where."""
    out = ['<div class="scroll"><table><thead><tr>' + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr></thead><tbody>"]
    for r in rows[:limit]:
        out.append("<tr>" + "".join(f"<td>{inline(c) if isinstance(c, str) else esc(c)}</td>" for c in r) + "</tr>")
    out.append("</tbody></table></div>")
    if len(rows) > limit:
        out.append(f'<p class="note">First {limit} of {len(rows)} rows shown{"; all in " + more if more else ""}.</p>')
    return "\n".join(out)


def markdown(text, limit=ROW_LIMIT, more="", shift=0):
    """The Markdown certkit writes (headings, paragraphs, bullet lists, pipe tables, `code`, **bold**)
    as HTML.  shift 0: the top-level heading is dropped (the page's title says it); shift 1: every
    heading one level down (# becomes <h2>), for a file shown as a section of the page."""
    out, para, items, tab = [], [], [], []

    def flush():
        if para:
            out.append("<p>" + inline(" ".join(para)) + "</p>")
            para.clear()
        if items:
            out.append("<ul>" + "".join(f"<li>{inline(i)}</li>" for i in items) + "</ul>")
            items.clear()
        if tab:
            cells = [[c.strip() for c in line.strip().strip("|").split("|")] for line in tab]
            body = [c for c in cells[1:] if not all(re.fullmatch(r":?-{3,}:?", x) for x in c)]
            out.append(table(cells[0], body, limit, more))
            tab.clear()
    for line in text.splitlines():
        s = line.strip()
        if s.startswith("|"):
            if para or items:
                flush()
            tab.append(s)
            continue
        if tab:
            flush()
        if not s:
            flush()
        elif s.startswith("#"):
            flush()
            level = len(s) - len(s.lstrip("#")) + shift
            if level > 1:
                out.append(f"<h{min(level, 4)}>{inline(s.lstrip('#').strip())}</h{min(level, 4)}>")
        elif s.startswith(("* ", "- ")):
            if para:
                flush()
            items.append(s[2:])
        elif items and line.startswith("  "):
            items[-1] += " " + s
        else:
            para.append(s)
    flush()
    return "\n".join(out)


def short(name, k=24):
    return name if len(name) <= k else name[:k - 1] + "…"


def png_figure(path, caption, data=None):
    """<figure> with the PNG at path (or the PNG bytes data, named path) embedded as base64."""
    if data is None:
        with open(path, "rb") as f:
            data = f.read()
    data = base64.b64encode(data).decode("ascii")
    name = os.path.basename(path)
    return (f'<figure><img src="data:image/png;base64,{data}" alt="{esc(caption or name)}">'
            f"<figcaption><code>{esc(name)}</code>{(': ' + esc(caption)) if caption else ''}</figcaption></figure>")


def figures_section(folder, captions, order=()):
    """Every PNG of folder (known names first, in `order`), embedded."""
    pngs = sorted(f for f in os.listdir(folder) if f.lower().endswith(".png"))
    pngs = [f"{o}.png" for o in order if f"{o}.png" in pngs] + [f for f in pngs if f[:-4] not in order]
    if not pngs:
        return '<p class="note">No figures in this folder.</p>', 0
    return "\n".join(png_figure(os.path.join(folder, f), captions.get(f[:-4], "")) for f in pngs), len(pngs)


def page(title, body):
    from .. import __version__
    return ("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
            "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
            f"<title>{esc(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n<h1>{esc(title)}</h1>\n{body}\n"
            f"<hr><p class=\"note\">Built by certkit report {esc(__version__)} from the files of this folder; every figure "
            "is embedded (no external file, script or address).</p>\n</body>\n</html>\n")


def read_json(path):
    """JSON of path, or a ReportError naming the file."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ReportError(f"{path}: cannot read it as JSON ({getattr(e, 'strerror', None) or e})") from None


def read_text(path):
    with open(path, encoding="utf-8") as f:
        return f.read()
