"""certkit tables: the tables of certified constants (certkit.symbolic.tables) as CSV, Markdown
and LaTeX files under --out, their paths printed."""
from ..symbolic.tables import FORMATS, build_tables


def add_arguments(p):
    p.add_argument("--out", default="data/tables", metavar="DIR", help="output folder (default data/tables)")
    p.add_argument("--format", choices=("csv", "md", "tex", "all"), default="all")


def run(args):
    """certkit tables: write every table in the chosen formats, print the paths."""
    from ..outputs import ensure_folder
    ensure_folder(args.out, "--out")
    for path in build_tables(args.out, FORMATS if args.format == "all" else (args.format,)):
        print(path)
    return 0
