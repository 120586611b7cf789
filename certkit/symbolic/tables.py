"""Audit tables of the constants of docs/mathematics.md §3.4, §3.5, §7.4 and §8.2.

Every rigorous column is an Arb enclosure [lo, hi] (certkit.symbolic.arb_eval.evaluate_arb)
printed with 12 significant digits, lo rounded toward -inf and hi toward +inf from the
outward-rounded binary64 endpoints (kernel.fp.arb_down / arb_up), so the printed interval
contains the true value.  The "approx" columns are the same sympy expressions evaluated by
mpmath.mp at 40 digits and printed with 30 (non-rigorous cross-check, docs/numerics.md §1).

build_tables(outdir) writes <name>.csv, <name>.md and <name>.tex for each table; the output
is a pure function of the code (no dates, fixed formatting), so reruns are byte-identical.

    certkit tables --out data/tables --format all
"""
import csv
import decimal
import io
import os
from fractions import Fraction

import flint
import mpmath
import sympy as sp

from ..kernel.numerics import arb_down, arb_up
from ..outputs import write_atomic
from ..results import Table, TablesResult
from . import FORMATS
from .chain import P_pos, chain, logN_net, rogers, theta, theta_Astar
from .arb_eval import arb_upper_int, certainly, evaluate_arb, evaluate_mpmath, mpf_fraction

PREC = 192            # Arb working precision (bits)
DPS = 40              # mpmath working precision (digits)
SIG = 12              # significant digits of the rigorous columns
SIG_APPROX = 30       # significant digits of the approximate columns

M_THETA = range(1, 129)
M_NET = (1, 2, 3, 4, 6, 8, 16, 32, 64, 128)
ETA_NET_LOG2 = range(1, 7)          # eta = 2^-k
L_LATTICE = range(3, 12)
D_LATTICE = range(1, 9)
T_THETA = 40
SPEC_74 = {(1, 5, sp.Rational(1, 5)): "2.1", (2, 5, sp.Rational(1, 5)): "3.8",
           (4, 20, sp.Rational(1, 5)): "8.3", (8, 20, sp.Rational(1, 5)): "15.8",
           (16, 20, sp.Rational(1, 5)): "30.6", (32, 20, sp.Rational(1, 5)): "60.0",
           (64, 20, sp.Rational(1, 5)): "116.3"}
R_TYP = (1, 2, 4, 8, 16, 32, 64, 128)
GAMMA_TYP = (5, 20, 100)
EPSP_TYP = (sp.Rational(1, 10), sp.Rational(1, 5))



# ---------------------------------------------------------------- number formatting

def sci(v, sig, rounding):
    """A Fraction as d.ddd...e+XX with sig significant digits, rounded by `rounding`
    (a decimal rounding mode) from the exact value."""
    v = Fraction(v)
    if v == 0:
        return "0." + "0" * (sig - 1) + "e+00"
    ctx = decimal.Context(prec=sig, rounding=rounding, Emax=10 ** 6, Emin=-10 ** 6)
    d = ctx.divide(decimal.Decimal(v.numerator), decimal.Decimal(v.denominator))
    sign, dig, exp = d.as_tuple()             # d = (-1)^sign * int(dig) * 10^exp
    e10 = exp + len(dig) - 1
    digits = "".join(map(str, dig)).ljust(sig, "0")
    assert len(digits) == sig
    s = f"{digits[0]}.{digits[1:]}e{'+' if e10 >= 0 else '-'}{abs(e10):02d}"
    return ("-" if sign else "") + s


def fmt_lo(x):
    """Printed lower end: <= every point of the Arb ball x."""
    return sci(Fraction(arb_down(x)), SIG, decimal.ROUND_FLOOR)


def fmt_hi(x):
    return sci(Fraction(arb_up(x)), SIG, decimal.ROUND_CEILING)


def fmt_approx(v):
    return sci(mpf_fraction(v), SIG_APPROX, decimal.ROUND_HALF_EVEN)


def _encl(expr, env_arb=None, env_mp=None):
    """(lo, hi, approx) strings and the Arb ball of a sympy expression."""
    with flint.ctx.workprec(PREC):
        x = evaluate_arb(expr, env=env_arb)
        lo, hi = fmt_lo(x), fmt_hi(x)
    a = evaluate_mpmath(expr, DPS, env=env_mp)
    return [lo, hi, fmt_approx(a)], x


_LOG10 = sp.log(10)


def _div_log10(expr):
    """expr / log(10), built without sympy's automatic evaluation (which would otherwise
    run assumption queries / evalf over the whole tree)."""
    with sp.evaluate(False):
        return expr / _LOG10


def _log10(expr):
    with sp.evaluate(False):
        return sp.log(expr) / _LOG10


# ---------------------------------------------------------------- the tables

def table_theta():
    """(a) theta_m, m = 1..128: A_m^*, Rogers (m >= 3) and the default min."""
    head = ["m", "Astar_lo", "Astar_hi", "Astar_approx", "Rogers_lo", "Rogers_hi",
            "Rogers_approx", "theta_lo", "theta_hi", "theta_approx", "chosen"]
    rows = []
    for m in M_THETA:
        A = theta_Astar(m)
        a_cols, a_ball = _encl(A)
        if m >= 3:
            Rg = rogers(m)
            r_cols, r_ball = _encl(Rg)
            with flint.ctx.workprec(PREC):
                if r_ball < a_ball:
                    chosen = "Rogers"
                elif a_ball < r_ball:
                    chosen = "Astar"
                else:
                    chosen = "undecided"
        else:
            r_cols = ["", "", ""]
            chosen = "1" if m == 1 else "Astar"
        t_cols, _ = _encl(theta(m))
        rows.append([str(m)] + a_cols + r_cols + t_cols + [chosen])
    return head, rows


def table_n_net():
    """(b) N_net(m, eta): log10 of the default-rule bound, and its integer upper bound."""
    head = ["m", "eta", "log10N_lo", "log10N_hi", "log10N_approx", "rule", "N_upper"]
    rows = []
    for m in M_NET:
        for k in ETA_NET_LOG2:
            eta = sp.Rational(1, 2 ** k)
            logN = logN_net(m, eta)
            cols, _ = _encl(_div_log10(logN))
            with sp.evaluate(False):
                pack = sp.log(P_pos(m, 2 / eta))
                avg = sp.log(theta(m)) + sp.log(P_pos(m, 1 / eta))
            if k >= 2:                          # eta < 1/2
                dec = certainly(sp.Lt(avg, pack, evaluate=False), prec=PREC)
                rule = {True: "Rogers-avg", False: "pack", None: "either"}[dec]
            else:
                rule = "pack"
            with flint.ctx.workprec(PREC):
                S = evaluate_arb(sp.exp(logN, evaluate=False))
                N_up = arb_upper_int(S) if S < 10 ** 15 else None
            rows.append([str(m), str(eta)] + cols + [rule, "" if N_up is None else str(N_up)])
    return head, rows


def table_c_m():
    """(c) C_m^pack = 2m 5^(m-1), C_m^Rogers = 2m theta_m 7^((m-1)/2) (R = 3), log10."""
    head = ["m", "log10Cpack_lo", "log10Cpack_hi", "log10Cpack_approx",
            "log10CRogers_lo", "log10CRogers_hi", "log10CRogers_approx"]
    rows = []
    for m in M_THETA:
        with sp.evaluate(False):
            cp = 2 * sp.Integer(m) * sp.Integer(5) ** (m - 1)
            cr = 2 * sp.Integer(m) * theta(m) * sp.Integer(7) ** sp.Rational(m - 1, 2)
        rows.append([str(m)] + _encl(_log10(cp))[0] + _encl(_log10(cr))[0])
    return head, rows


def gauss_sum(lo, hi):
    """sum_{n=lo}^{hi} e^{-n^2/2} as an exact sympy expression."""
    return sp.Add(*[sp.exp(-sp.Rational(k * k, 2)) for k in range(lo, hi + 1)])


def theta_gauss_arb(T=T_THETA):
    """An Arb ball containing theta = sum_{n in Z} e^{-n^2/2}: [S_T, S_T + tail],
    tail = 2 e^{-(T+1)^2/2} / (1 - e^{-(T+1)}) (docs/mathematics.md §8.2 step 2)."""
    S = evaluate_arb(gauss_sum(-T, T))
    tail = evaluate_arb(2 * sp.exp(-sp.Rational((T + 1) ** 2, 2)) / (1 - sp.exp(-(T + 1))))
    return S.union(S + tail)


THETA_GAUSS = sp.Symbol("theta_gauss")


def margin_expr(L, d):
    """2 (mass/theta)^d - 1 with theta the Symbol THETA_GAUSS; L odd = 2h+1: mass = S_h,
    L even = 2h: mass = sum_{n=-h}^{h-1} e^{-n^2/2}."""
    h = L // 2
    mass = gauss_sum(-h, h) if L % 2 else gauss_sum(-h, h - 1)
    return 2 * (mass / THETA_GAUSS) ** d - 1


def table_lattice():
    """(d) lattice margins 2 (S_h/theta)^d - 1, L = 3..11, d = 1..8."""
    head = ["L", "h", "cell", "d", "margin_lo", "margin_hi", "margin_approx"]
    rows = []
    with flint.ctx.workprec(PREC):
        th_arb = theta_gauss_arb()
    with mpmath.mp.workdps(DPS):
        th_mp = mpmath.jtheta(3, 0, mpmath.exp(mpmath.mpf(-1) / 2))   # independent route
    for L in L_LATTICE:
        h = L // 2
        cell = f"-{h}..{h}" if L % 2 else f"-{h}..{h - 1}"
        for d in D_LATTICE:
            cols, _ = _encl(margin_expr(L, d), {THETA_GAUSS: th_arb}, {THETA_GAUSS: th_mp})
            rows.append([str(L), str(h), cell, str(d)] + cols)
    return head, rows


def typical_chain(r, Gamma, epsp):
    """chain() with tau = 0 (exact_W), R = 3: Gamma = beta, rho_Q = rho_K = 1, eps = eps'."""
    return chain(beta=Gamma, eps=epsp, n=1, N=1, r=r, rho_Q=1, rho_K=1, delta_Q=0,
                    exact_W=True)


def table_typical():
    """(e) log10 S_r (docs/mathematics.md §7.4, R = 3) and the F13 shape, on the grid r x Gamma x eps'."""
    head = ["r", "m", "Gamma", "epsp", "log10S_lo", "log10S_hi", "log10S_approx",
            "log10shape_lo", "log10shape_hi", "mathematics_7.4"]
    rows = []
    for r in R_TYP:
        for G in GAMMA_TYP:
            for e in EPSP_TYP:
                c = typical_chain(r, G, e)
                s_cols, _ = _encl(_div_log10(c["logS"]))
                sh_cols, _ = _encl(_div_log10(c["shape"]))
                rows.append([str(r), str(r + 1), str(G), str(e)] + s_cols + sh_cols[:2]
                            + [SPEC_74.get((r, G, e), "")])
    return head, rows


TABLES = (
    ("theta_m", "theta_m: covering densities (docs/mathematics.md §3.4)", table_theta),
    ("n_net", "N_net(m, eta): default-rule bound (docs/mathematics.md §3.4)", table_n_net),
    ("c_m", "C_m constants of the symbolic shape, R = 3 (docs/mathematics.md §3.5)", table_c_m),
    ("lattice_margins", "Lattice margins 2(S_h/theta)^d - 1 (docs/mathematics.md §8.2)", table_lattice),
    ("typical_logS", "Typical log10 S_r, R = 3 (docs/mathematics.md §7.4)", table_typical),
)

NOTE = ("_lo/_hi: Arb enclosure, 12 significant digits rounded outward (rigorous). "
        "_approx: mpmath.mp at 40 digits, 30 printed (non-rigorous cross-check).")


# ---------------------------------------------------------------- writers

def to_csv(head, rows):
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(head)
    w.writerows(rows)
    return buf.getvalue()


def to_md(title, head, rows):
    out = [f"# {title}", "", NOTE, "",
           "| " + " | ".join(head) + " |",
           "|" + "|".join("---" for _ in head) + "|"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out) + "\n"


_TEX_ESC = {"_": r"\_", "%": r"\%", "&": r"\&", "#": r"\#", "$": r"\$"}


def _tex(s):
    return "".join(_TEX_ESC.get(ch_, ch_) for ch_ in s)


def to_tex(title, head, rows):
    out = [f"% {title}", f"% {NOTE}", "% needs \\usepackage{longtable}",
           "\\begin{longtable}{" + "r" * len(head) + "}",
           "\\hline",
           " & ".join(_tex(h) for h in head) + " \\\\",
           "\\hline", "\\endhead"]
    out += [" & ".join(_tex(c) for c in r) + " \\\\" for r in rows]
    out += ["\\hline", "\\end{longtable}"]
    return "\n".join(out) + "\n"


def write_table(outdir, name, title, head, rows, formats=FORMATS):
    """Write one table (column names head, rows of strings) as outdir/<name>.<format> for each
    format; return the paths written."""
    texts = {"csv": lambda: to_csv(head, rows), "md": lambda: to_md(title, head, rows),
             "tex": lambda: to_tex(title, head, rows)}
    written = []
    for f in formats:
        path = os.path.join(outdir, f"{name}.{f}")
        write_atomic(path, texts[f]())
        written.append(path)
    return written


PRODUCER_FILE = "producer.json"    # beside the tables: the certkit version, commit and libraries that wrote them


def build_tables(outdir="data/tables", formats=FORMATS, names=None):
    """Write every table (or those in `names`) in each format, and PRODUCER_FILE; return the paths written."""
    os.makedirs(outdir, exist_ok=True)
    written = []
    for name, title, fn in TABLES:
        if names is None or name in names:
            written += write_table(outdir, name, title, *fn(), formats)
    return written + [write_producer(outdir)]


def write_producer(outdir):
    """outdir/PRODUCER_FILE: certkit.provenance.producer() (version, commit, libraries), kept apart so that the
    tables' own bytes stay the same from commit to commit; returns its path."""
    import json
    from ..provenance import producer
    path = os.path.join(outdir, PRODUCER_FILE)
    write_atomic(path, json.dumps({"command": "certkit tables", "producer": producer()}, indent=1) + "\n")
    return path


def tables(names=None, out=None, formats=FORMATS):
    """The tables (all, or those in `names`) in memory: a TablesResult (.tables name -> Table, each
    with .title, .columns, .rows; .rows every row led by its table's name); with out, each also
    written as out/<name>.<format> (build_tables' bytes)."""
    found = {}
    for name, title, fn in TABLES:
        if names is None or name in names:
            columns, rows = fn()
            found[name] = Table(rows=[dict(zip(columns, r)) for r in rows], columns=tuple(columns), name=name,
                                title=title)
            if out is not None:
                os.makedirs(out, exist_ok=True)
                write_table(os.fspath(out), name, title, columns, rows, tuple(formats))
    if out is not None and found:
        write_producer(os.fspath(out))
    return TablesResult(rows=[{"table": t.name, **row} for t in found.values() for row in t.rows],
                        columns=("table",), tables=found)
