"""Shared pieces of the rules: witness index arrays, decoders, certified row-l1 sums, untrusted choices."""
from fractions import Fraction

import flint
import numpy as np

from .fp import ETA, gamma, inflate, sum_up, arb_up
from .load import array
from .verdict import Malformed, Rejected, Unsupported


def indices(x: object, path: str, base_dir: str, upper: int, length: int | None = None) -> np.ndarray:
    """An int array with entries in [0, upper)."""
    a = array(x, path, base_dir, (length,), kind="int")
    if a.size and (a.min() < 0 or a.max() >= upper):
        i = int(np.argmax((a < 0) | (a >= upper)))
        raise Malformed(f"{path}[{i}]", f"index {int(a[i])} out of range [0, {upper})")
    return a


class Decoder:
    """G (N x M) with sum_b |G_jb| <= 1 for every column j: cells (indicator columns, -1 = in
    no cell) or an explicit float matrix, checked exactly."""

    def __init__(self, w, path, base_dir, N, M=None):
        """M = None: as many cells as the largest cell id + 1 (or the decoder's width)."""
        if ("cells" in w) == ("decoder" in w):
            raise Malformed(path, "give exactly one of \"cells\" or \"decoder\"")
        if "cells" in w:
            c = array(w["cells"], f"{path}.cells", base_dir, (N,), kind="int")
            M = int(c.max(initial=-1)) + 1 if M is None else M
            if c.size and (c.min() < -1 or c.max() >= M):
                i = int(np.argmax((c < -1) | (c >= M)))
                raise Malformed(f"{path}.cells[{i}]", f"cell {int(c[i])} out of range [-1, {M})")
            self.cells, self.G = c, None
        else:
            G = array(w["decoder"], f"{path}.decoder", base_dir, (N, M))
            M = G.shape[1]
            col = np.abs(G).sum(axis=1)
            for j in np.flatnonzero(col >= 1 - 1e-9):   # certify the close calls exactly
                if sum(Fraction(x) for x in np.abs(G[j]).tolist()) > 1:
                    raise Rejected("decoder", f"sum_b |G[{j},b]| > 1 (exactly)")
            self.cells, self.G = None, G
        self.M = M

    def apply(self, m, rho):
        """(T^, e): T^ = fl(m G) and e_a >= rho_a + sum_b |T^_ab - (m G)_ab|."""
        N = m.shape[1]
        if self.G is not None:
            T = m @ self.G
        else:
            T = np.zeros((m.shape[0], self.M))
            sel = np.flatnonzero(self.cells >= 0)
            if sel.size:
                order = sel[np.argsort(self.cells[sel], kind="stable")]
                cs = self.cells[order]
                starts = np.flatnonzero(np.r_[True, cs[1:] != cs[:-1]])
                T[:, cs[starts]] = np.add.reduceat(m[:, order], starts, axis=1)
        return T, inflate(rho + inflate(gamma(N) * sum_up(np.abs(m), axis=1) + N * self.M * ETA, 3), 2)


def arb_row_l1(D, add):
    """Floats >= sum_j |D_ij| + add_i, D an arb_mat: the rows' l1 norms in Arb, no float rounding."""
    return np.array([arb_up(sum(map(abs, r), flint.arb(a))) for r, a in zip(D.table(), add.tolist())])


def certainly_le(x, eps):
    """x (float, a proven upper bound) <= eps (Fraction), decided exactly; NaN/inf: False."""
    return bool(np.isfinite(x)) and Fraction(float(x)) <= eps


def finite(x, step):
    """Reject (never verify) on a NaN or inf produced by overflow in a float step."""
    if not np.all(np.isfinite(x)):
        raise Rejected(step, "non-finite intermediate value (overflow in float arithmetic)")
    return x


def choose(choices, what, step, x, ndims):
    """choices.<what>(a copy of x), an untrusted float choice (check()'s oracle), as finite float64
    arrays with ndims dimensions each; the rule bounds them, so any answer is sound.  Unsupported
    without an oracle; Rejected(step) if it fails or answers something else."""
    if choices is None:
        raise Unsupported(f"{step.split('/')[0]} needs a float {what} chosen outside the kernel: pass "
                          f"check(path, choices=certkit.choices.LAPACK) or any object with inverse(T) and svd(X)")
    try:
        got = getattr(choices, what)(x.copy())
        got = [np.array(a, dtype=np.float64) for a in (got if len(ndims) > 1 else [got])]
    except (ArithmeticError, TypeError, ValueError) as e:
        raise Rejected(step, str(e)) from None
    if [a.ndim for a in got] != list(ndims):
        raise Rejected(step, f"the chosen {what} is not {len(ndims)} array(s) of {list(ndims)} dimensions")
    return [finite(a, step) for a in got]
