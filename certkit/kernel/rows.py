"""Row enclosures of A: float64 rows m_i and radii rho_i with ||A_i - m_i||_1 <= rho_i.

Every rule works from these (proofs/softmax-enclosure.md).  Two routes:

* fast: float64 mid-rad.  Float logits y (row maximum subtracted), an a-priori per-row bound
  Delta_i on the logit error (Cauchy–Schwarz, the GEMM bound, the beta and log-weight radii,
  the roundings; proofs/fp-rounding.md), Cohen–Fausti turning it into an l1 bound
  (proofs/cohen-fausti.md), the IEEE-only exp (proofs/ieee-exp.md) and the softmax
  normalisation bound rho_sm(N).  rho_i = Delta_i + rho_sm(N).
* arb: Arb balls for every A_ij (Prepared.arb; python-flint, at the caller's precision).  The max-row
  rules bound ||A_i - B_i||_1 from the balls themselves (common.max_row_bound); the lower bounds take
  m_ij = float(midpoint), rho_i = sum_j |A_ij - m_ij| in Arb, rounded up (enclose).

Entries of dropped columns (weight 0) are exactly 0 in A and in m.  Per entry, and for the
mass of any column set C, |A_i(C) - m_i(C)| <= rho_i.
"""
from fractions import Fraction

import flint
import numpy as np

from .expo import exp_nonpos, EXP_REL, EXP_ABS
from .fp import U, ETA, gamma, inflate, float_up, arb_up
from .verdict import Rejected

BLOCK, CHUNK = 256, 1 << 15          # rows per block; entries per cache-sized chunk (and per Arb block)
PRECS = (128, 256, 512, 1024)        # the Arb route's working precisions in bits, tried in turn (common.max_row_bound)


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
        """Kept column j visible to row i: j <= i + o and (i + o - w < j or j < s) (proofs/row-masks.md); len(idx) x Nk."""
        if self.inst.mask is None:
            return np.ones((len(idx), self.Nk), dtype=bool)
        o, w, s = self.inst.mask
        hi = np.asarray(idx)[:, None] + o
        return (self.cols <= hi) & ((self.cols > hi - (np.inf if w is None else w)) | (self.cols < s))

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
        inst, vis, bias = self.inst, self.visible(idx), self.bias_rows(idx)
        logw = [0] * self.Nk if inst.weights is None else [flint.arb(w).log() for w in inst.weights[self.kept].tolist()]
        out = []
        for a, s in enumerate((flint.arb_mat(inst.Q[idx].tolist()) * self.Kt_arb).table()):
            js = np.flatnonzero(vis[a]).tolist()
            x = [inst.beta.ball * s[j] + logw[j] + (0 if bias is None else float(bias[a, j])) for j in js]
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
