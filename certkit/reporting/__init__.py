"""certkit report: one self-contained report.html for a calibrate, certify, scale or compare output
folder (docs/report.md).

    markup.py  the pieces of the page: Markdown and tables as HTML, embedded PNG figures, the page
    pages.py   the body of each kind of folder's page
    build.py   kind_of(folder) and build(folder, out, row_limit): the page written

Figures are embedded as base64 PNG; no external CSS, script, font or URL.  The page has no date,
so rebuilding it from the same folder gives the same bytes.  The figure style and the number
format of the tables: certkit.figures.
"""
