"""certkit report DIR: one self-contained DIR/report.html for a calibrate, certify, scale or compare output
folder (docs/report.md): the arguments, one call of certkit.reporting.build.build and the lines printed.
"""
import sys

from ..reporting.build import build
from ..reporting.markup import ROW_LIMIT, ReportError


def add_arguments(p):
    p.add_argument("folder", metavar="DIR", help="an output folder of certkit calibrate, certify, scale or compare")
    p.add_argument("--out", metavar="FILE", default=None, help="where to write the page (default DIR/report.html)")
    p.add_argument("--rows", type=int, default=ROW_LIMIT, metavar="N",
                   help=f"at most N rows in each long table (default {ROW_LIMIT}; the CSV/JSON files hold them all)")


def run(args):
    if args.rows < 1:
        raise ReportError(f"--rows: {args.rows} must be >= 1")
    r = build(args.folder, args.out, args.rows)
    print(f"{r['path']}: {r['kind']} report, {r['figures']} figures, {r['rows']} rows")
    print(f"certkit report: open {r['path']} in a browser (self-contained: no network needed)", file=sys.stderr)
    return 0
