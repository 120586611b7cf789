"""Shared pieces of the rules: witness index arrays, decoders, the row enclosures they take (all rows' worst
bound, a decoder applied block by block), certified row-l1 sums, untrusted choices."""
from fractions import Fraction

import flint
import numpy as np

from .fp import U, ETA, gamma, inflate, sum_up, arb_up, arb_to_fraction_lower
from .load import array, Instance
from .rows import enclose, CHUNK, PRECS, Prepared
from .verdict import Malformed, Rejected, Unsupported

AUTO_ARB = 1 << 20          # route auto: Arb re-checks the rows fast leaves open if they hold at most 2^20 entries


def indices(x: object, path: str, base_dir: str | None, upper: int | None, length: int | None = None, lower: int = 0,
            what: str = "index") -> np.ndarray:
    """An int array with entries in [lower, upper) (upper None: its largest entry + 1)."""
    a = array(x, path, base_dir, (length,), kind="int")
    upper = int(a.max(initial=lower - 1)) + 1 if upper is None else upper
    if a.size and (a.min() < lower or a.max() >= upper):
        i = int(np.argmax((a < lower) | (a >= upper)))
        raise Malformed(f"{path}[{i}]", f"{what} {int(a[i])} out of range [{lower}, {upper})")
    return a


class Decoder:
    """G (N x M) with sum_b |G_jb| <= 1 for every column j: cells (indicator columns, -1 = in
    no cell) or an explicit float matrix, checked exactly."""

    def __init__(self, w, path, base_dir, N, M=None):
        """M = None: as many cells as the largest cell id + 1 (or the decoder's width)."""
        if ("cells" in w) == ("decoder" in w):
            raise Malformed(path, "give exactly one of \"cells\" or \"decoder\"")
        if "cells" in w:
            self.cells, self.G = indices(w["cells"], f"{path}.cells", base_dir, M, N, -1, "cell"), None
            M = int(self.cells.max(initial=-1)) + 1 if M is None else M
        else:
            G = array(w["decoder"], f"{path}.decoder", base_dir, (N, M))
            M = G.shape[1]
            for j in np.flatnonzero(np.abs(G).sum(axis=1) >= 1 - 1e-9):   # certify the close calls exactly
                if sum(Fraction(x) for x in np.abs(G[j]).tolist()) > 1:
                    raise Rejected("decoder", f"sum_b |G[{j},b]| > 1 (exactly)")
            self.cells, self.G = None, G
        self.M = M

    def apply(self, m, rho):
        """(T^, e): T^ = fl(m G) and e_a >= rho_a + sum_b |T^_ab - (m G)_ab|."""
        if self.G is not None:
            T = m @ self.G
        else:                       # cell sums in float (any order); column M gathers the cell -1 (none)
            T = np.zeros((m.shape[0], self.M + 1))
            np.add.at(T.T, self.cells, m.T)
            T = T[:, :self.M]
        return T, inflate(rho + inflate(gamma(m.shape[1]) * sum_up(np.abs(m), axis=1) + m.shape[1] * self.M * ETA, 3), 2)


def max_row_bound(inst, route, fast_bound, arb_bound, eps=None, other=None):
    """(e, i, used): the largest of proven bounds e_i >= ||A_i - B_i||_1, its row, the route used.  fast:
    fast_bound(idx, m, rho) on the fast enclosures; arb: arb_bound(idx, *Arb rows of inst (and other)) -> Arb
    balls of the row errors at PRECS in turn, for the rows not yet below float(eps) (so below eps), until a row is
    certainly above eps; auto: fast, then arb on the rows fast leaves open if they hold <= AUTO_ARB entries."""
    err = np.concatenate([fast_bound(*b) for b in enclose(inst, None, "fast")]) if route != "arb" else np.full(inst.n, np.inf)
    cut = np.inf if eps is None else float(eps)
    todo = np.flatnonzero(~(err < cut) & (route != "fast"))
    todo = todo[:0] if route == "auto" and len(todo) * inst.N > AUTO_ARB else todo
    used, step = route if len(todo) else "fast", max(1, CHUNK // inst.N)
    arbs = [Prepared(x).arb for x in (inst, other) if x is not None and len(todo)]     # only if needed
    for prec in PRECS:
        with flint.ctx.workprec(prec):
            balls = [b for s in range(0, len(todo), step) for b in arb_bound(todo[s:s + step], *arbs)]
        err[todo] = np.minimum(err[todo], [arb_up(b) for b in balls])
        if eps is not None and any(arb_to_fraction_lower(b) > eps for b in balls):
            break                                           # a row certainly above eps: no precision helps
        todo = todo[~(err[todo] < cut)]
    return float(np.max(err)), int(np.argmax(err)), used


def enclose_all(inst: Instance, rows: object = None, route: str = "fast", dec: Decoder | None = None) -> tuple:
    """(idx, m, rho) of the requested rows; with a Decoder dec, (idx, fl(m G), rho + its error) block by block."""
    parts = [(i, m, r) if dec is None else (i, *dec.apply(m, r)) for i, m, r in enclose(inst, rows, route)]
    if not parts:
        return np.zeros(0, dtype=np.int64), np.zeros((0, inst.N if dec is None else dec.M)), np.zeros(0)
    return tuple(np.concatenate(c) for c in zip(*parts))


def row_distance(m, m2, add, step):
    """Floats >= ||m_i - m2_i||_1 + add_i per row, from fl(m - m2) = (m - m2)(1 + d), |d| <= u (a difference
    of floats never underflows inexactly), summed upward."""
    return finite(inflate(sum_up(np.abs(m - m2), axis=1) * (1 + 2 * U) + add, 4), step)


def row_error_within(worst_row, eps, step, B):
    """(worst, used) of (worst, row, used), worst a proven bound of max_i ||A_i - B_i||_1, if certainly
    <= eps (decided exactly; NaN/inf never); else Rejected(step)."""
    worst, row, used = worst_row
    if not (np.isfinite(worst) and Fraction(worst) <= eps):
        raise Rejected(step, f"certified max_i ||A_i - {B}||_1 <= {worst:.6g} (row {row}) vs claimed eps = {eps}")
    return worst, used


def finite(x, step):
    """Reject (never verify) on a NaN or inf produced by overflow in a float step."""
    if not np.all(np.isfinite(x)):
        raise Rejected(step, "non-finite intermediate value (overflow in float arithmetic)")
    return x


def choose(choices, what, step, x, parts=1):
    """choices.<what>(a copy of x), an untrusted float choice (check()'s oracle), as `parts` finite
    float64 arrays: the rule bounds them, so any answer is sound.  Unsupported without an oracle;
    Rejected(step) if it fails or answers something else."""
    if choices is None:
        raise Unsupported(f"{step.split('/')[0]} needs a float {what} chosen outside the kernel: pass "
                          f"check(path, choices=certkit.choices.LAPACK) or any object with inverse(T) and svd(X)")
    try:
        got = getattr(choices, what)(x.copy())
        got = [np.array(a, dtype=np.float64) for a in (got if parts > 1 else [got])]
    except (ArithmeticError, TypeError, ValueError) as e:
        raise Rejected(step, str(e)) from None
    if len(got) != parts:
        raise Rejected(step, f"the chosen {what} is not {parts} arrays")
    return [finite(a, step) for a in got]
