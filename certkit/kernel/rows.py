"""Row enclosures of A: float64 rows m_i and radii rho_i with ||A_i - m_i||_1 <= rho_i (proofs/softmax-enclosure.md),
from which every rule works; dropped or masked entries are exactly 0 in A and m.  Two routes:

* fast: float logits y (row maximum subtracted), a per-row bound Delta_i on their error (proofs/fp-rounding.md),
  Cohen–Fausti turning it into an l1 bound, the IEEE-only exp, the normalisation bound: rho_i = Delta_i + rho_sm(N).
* arb: Arb balls for every A_ij (Prepared.arb); the max-row rules bound ||A_i - B_i||_1 from the balls themselves
  (max_row_bound), the lower bounds take m_ij = float(midpoint), rho_i = sum_j |A_ij - m_ij| rounded up (enclose).
Below, what the rules share: index arrays, decoders, enclose_all, max_row_bound, row distances, choose.
"""
from fractions import Fraction

import flint
import numpy as np

from .fp import U, ETA, gamma, inflate, float_up, sum_up, arb_up, arb_to_fraction_lower, exp_nonpos, EXP_REL, EXP_ABS
from .load import array, Instance, Malformed, Rejected, Unsupported

BLOCK, CHUNK = 256, 1 << 15          # rows per block; entries per cache-sized chunk (and per Arb block)
PRECS = (128, 256, 512, 1024)        # the Arb route's working precisions in bits, tried in turn (max_row_bound)


def rho_softmax(N):
    """||softmax(y) - fl(E(y)/fl(sum E(y)))||_1 <= rho_sm(N) for float y with max_j y_j = 0."""
    u, r, t, g = Fraction(U), Fraction(EXP_REL), Fraction(EXP_ABS), Fraction(gamma(N))
    return float_up(u / (1 - g) + N * Fraction(ETA) / 2
                    + (2 * (r + N * t) + g * (1 + r + N * t)) / ((1 - g) * (1 - r - N * t)))


class Prepared:
    """Per-instance quantities shared by all row blocks of the fast route; the Arb rows (arb)."""

    def __init__(self, inst):
        self.inst, self.kept = inst, inst.kept
        K = inst.K if self.kept is None else inst.K[self.kept]
        self.Kt, self.Nk, self.d = np.ascontiguousarray(K.T), K.shape[0], inst.Q.shape[1]
        self.cols = np.arange(inst.N) if self.kept is None else self.kept     # original index of each kept column
        # norms rounded up; inflate's absolute term also covers squares that underflow
        self.Kmax = inflate(float(np.sqrt(inflate(np.max(np.einsum("ij,ij->i", K, K)), 2 * self.d))), 2)
        self.Qn = inflate(np.sqrt(inflate(np.einsum("ij,ij->i", inst.Q, inst.Q), 2 * self.d)), 2)
        self.b_mid, self.b_rad, self.bmax, self.Kt_arb = None, None, 0.0, None
        if inst.weights is not None:                       # then kept is not None
            with flint.ctx.workprec(120):
                logw = [flint.arb(wj).log() for wj in inst.weights[self.kept].tolist()]
                self.b_mid = np.array([float(L.mid()) for L in logw])
                self.b_rad = max(arb_up(abs(L - flint.arb(m))) for L, m in zip(logw, self.b_mid.tolist()))
            self.bmax = inflate(float(np.max(np.abs(self.b_mid))) + self.b_rad, 2)
        self.rho_sm, self.g_d = rho_softmax(self.Nk), gamma(self.d + 2)

    def bias_rows(self, idx):
        b = self.inst.bias
        return None if b is None else b[idx] if self.kept is None else b[np.ix_(idx, self.kept)]

    def delta(self, idx, biasmax):
        """A-priori bound on |fl-logit - true logit - (row constant)| for rows idx."""
        bm, br = abs(self.inst.beta.mid), self.inst.beta.rad
        S = inflate(self.Qn[idx] * self.Kmax, 2)                 # >= |<q_i,k_j>|
        err_s = inflate(self.g_d * S + self.d * ETA, 3)          # GEMM error
        Sh = inflate(S + err_s, 1)                               # >= |fl <q_i,k_j>|
        P = inflate(bm * Sh * (1 + U) + ETA, 3)                  # >= |fl(beta_mid * s)|
        Lsum = inflate(P + self.bmax + biasmax, 2)
        Lmax = inflate(Lsum * (1 + 2 * U), 2)                    # >= |l^_ij|
        D = (br * S + bm * err_s + U * bm * Sh + ETA + (self.b_rad or 0.0)
             + 2 * U * Lsum * (1 + U) + 2 * U * Lmax)
        return inflate(D, 16)

    def visible(self, idx):
        """Kept column j visible to row i: lo_j <= i < hi_j (Instance.mask; proofs/row-masks.md); len(idx) x Nk."""
        if self.inst.mask is None:
            return np.ones((len(idx), self.Nk), dtype=bool)
        i, (lo, hi) = np.asarray(idx)[:, None], self.inst.mask
        return (lo[self.cols] <= i) & (i < hi[self.cols])

    def block(self, idx):
        """(m, rho) for the rows idx (m over all N columns); worked in chunks of rows that fit in cache."""
        inst, l = self.inst, self.inst.Q[idx] @ self.Kt
        biasmax, step = np.zeros(len(idx)), max(1, CHUNK // max(self.Nk, 1))
        for c in range(0, len(idx), step):
            ix, x = idx[c:c + step], l[c:c + step]
            x *= inst.beta.mid
            if self.b_mid is not None:
                x += self.b_mid
            bias = self.bias_rows(ix)
            if bias is not None:
                x += bias
                biasmax[c:c + step] = np.max(np.abs(bias), axis=1)
            vis = None if inst.mask is None else self.visible(ix)
            if vis is not None:
                x[~vis] = -np.inf                                # max over the visible keys only
            x -= np.max(x, axis=1, keepdims=True)
            exp_nonpos(x, out=x)
            if vis is not None:
                x[~vis] = 0.0                                    # a masked entry of A is exactly 0
            x /= np.sum(x, axis=1, keepdims=True)
        if self.kept is not None:                                # dropped columns: exactly 0 in m
            full = np.zeros((len(idx), inst.N))
            full[:, self.kept], l = l, full
        return l, self.delta(idx, biasmax) + self.rho_sm

    def arb(self, idx):
        """A's rows idx as lists of N Arb balls at the caller's working precision, masked or dropped entries exactly 0
        (proofs/softmax-enclosure.md (4)): Q K^T, beta, log w_j, exp, sum and division in Arb from the exact inputs."""
        if self.Kt_arb is None:
            self.Kt_arb = flint.arb_mat(self.Kt.tolist())          # exact, at the first call
        inst, vis, bias, beta = self.inst, self.visible(idx), self.bias_rows(idx), self.inst.beta.ball()
        logw = [0] * self.Nk if inst.weights is None else [flint.arb(w).log() for w in inst.weights[self.kept].tolist()]
        out = []
        for a, s in enumerate((flint.arb_mat(inst.Q[idx].tolist()) * self.Kt_arb).table()):
            js = np.flatnonzero(vis[a]).tolist()
            x = [beta * s[j] + logw[j] + (0 if bias is None else float(bias[a, j])) for j in js]
            shift = flint.arb(max(float(v.mid()) for v in x))
            e = dict(zip(self.cols[js].tolist(), [(v - shift).exp() for v in x]))     # original column: its ball
            Z = sum(e.values(), flint.arb(0))
            out.append([e[j] / Z if j in e else flint.arb(0) for j in range(inst.N)])
        return out


def enclose(inst, rows=None, route="fast"):
    """Yield (idx, m, rho) over the requested rows in blocks; m covers all N columns (dropped columns are 0).  ||A_i -
    m_i||_1 <= rho_i for i in idx.  Route arb: Prepared.arb at PRECS[0] bits, m_ij = float(midpoint), rho_i in Arb."""
    prep, step = Prepared(inst), BLOCK if route == "fast" else max(1, CHUNK // inst.N)
    rows = np.arange(inst.n) if rows is None else np.asarray(rows, dtype=np.int64)
    for s in range(0, len(rows), step):
        idx = rows[s:s + step]
        if route == "fast":
            m, rho = prep.block(idx)
        else:
            with flint.ctx.workprec(PRECS[0]):
                A = prep.arb(idx)
                m = np.array([[float(x.mid()) for x in r] for r in A])
                rho = np.array([arb_up(x) for x in arb_l1(A, m.tolist())])
        if not (np.all(np.isfinite(m)) and np.all(np.isfinite(rho))):
            raise Rejected("enclosure", "non-finite value in the row enclosure (overflow)")
        yield idx, m, rho


def arb_l1(X, Y):
    """Balls of sum_j |X_ij - Y_ij| per row, X and Y lists of rows of Arb balls (or exact numbers)."""
    return [sum((abs(x - y) for x, y in zip(r, t)), flint.arb(0)) for r, t in zip(X, Y)]


# ---------------------------------------------------------------- what the rules share
AUTO_ARB = 1 << 20          # route auto, lower bounds and output distances: Arb on instances of at most 2^20 entries


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
            G = w["decoder"] if isinstance(w["decoder"], np.ndarray) else array(w["decoder"], f"{path}.decoder",
                                                                                 base_dir, (N, M))
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
        N = m.shape[1]
        return T, inflate(rho + inflate(gamma(N) * sum_up(np.abs(m), axis=1) + N * self.M * ETA, 3), 2)


def max_row_bound(inst, route, fast_bound, arb_bound, eps=None, other=None):
    """(e, i, used): the largest of proven bounds e_i >= ||A_i - B_i||_1, its row, the route used.  fast:
    fast_bound(idx, m, rho) on the fast enclosures; arb: arb_bound(idx, *Arb rows of inst (and other)) -> Arb
    balls of the row errors at PRECS in turn, for the rows not yet below float(eps) (so below eps), block by block, the
    largest fast bounds first, until a row is certainly above eps; auto: fast, then arb on the rows fast leaves open."""
    err = np.concatenate([fast_bound(*b) for b in enclose(inst, None, "fast")]) if route != "arb" else \
        np.full(inst.n, np.inf)
    cut = np.inf if eps is None else float(eps)
    todo = np.flatnonzero(~(err < cut) & (route != "fast"))
    todo = todo[np.argsort(-err[todo], kind="stable")]             # the likeliest to exceed eps first
    used, step = route if len(todo) else "fast", max(1, CHUNK // inst.N)
    arbs = [Prepared(x).arb for x in (inst, other) if x is not None and len(todo)]     # only if needed
    for prec in PRECS:
        for part in (todo[s:s + step] for s in range(0, len(todo), step)):        # memory: one block of rows
            with flint.ctx.workprec(prec):
                balls = arb_bound(part, *arbs)
            err[part] = np.minimum(err[part], [arb_up(b) for b in balls])
            if eps is not None and any(arb_to_fraction_lower(b) > eps for b in balls):
                return float(np.max(err)), int(np.argmax(err)), used          # certainly above eps: no precision helps
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
    """choices.<what>(a copy of x), an untrusted float choice (check()'s oracle), as `parts` finite float64 arrays:
    the rule bounds them, so any answer is sound.  Unsupported without an oracle; Rejected(step) if it fails."""
    if choices is None:
        raise Unsupported(f"{step.split('/')[0]} (format 1.0-1.2) needs a float {what} chosen outside the kernel: "
                          f"pass check(path, choices=certkit.choices.LAPACK), or give it in the witness (1.3)")
    try:
        got = getattr(choices, what)(x.copy())
        got = [np.array(a, dtype=np.float64) for a in (got if parts > 1 else [got])]
    except (ArithmeticError, TypeError, ValueError) as e:
        raise Rejected(step, str(e)) from None
    if len(got) != parts:
        raise Rejected(step, f"the chosen {what} is not {parts} arrays")
    return [finite(a, step) for a in got]
