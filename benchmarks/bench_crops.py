"""Benchmark: which end of the sandwich is loose?  Crops of real heads small enough to (nearly) solve
exactly, beside today's searches (certkit.certify with default settings) on the same crops.

    .venv/bin/python benchmarks/bench_crops.py [--out benchmarks/results/crops.md] [--quick]
        [--cache FILE.npz] [--only NAME,...]

Writes crops.md (the table and its conclusion) and crops.csv beside it.  Deterministic: fixed
seeds, no clocks in any decision (the seconds column is the only thing that changes on a rerun);
about 15-20 minutes on one or two cores (most of it the model capture and the upper searches).

The crops.  A crop is a set R of n <= 24 rows (queries) of a real head, with *all* the keys those
rows see: A_R is literally a row-submatrix of the head's attention A (no renormalisation: whole rows
are kept, so every row is still the head's own probability vector).  Keys no row of R sees (later
positions of a causal head) are zero columns of A_R and are dropped (a zero column changes neither
rank nor row errors).  The crop is a certkit Head: the rows' queries, the kept keys, the exact beta,
and (causal heads) per-key row intervals KeyRows (key j is seen by the crop rows at positions >= j),
so the kernel recomputes A_R from Q, K itself.  Why this crop and not a short input or renormalised
rows: r_eps(A_R) <= r_eps(A) and any lower certificate on A_R is one on A (its message rows are rows
of A), and both searches face the head's real row geometry (a diffuse row keeps its long tail over
hundreds of keys at L = 1024).  n = 24 rows at L = 128, 12 at L = 1024 (about 1000 columns: the
LPs are 10x larger).  Rows are chosen per head as
    diffuse: the n rows of largest entropy;
    sink:    the n rows with the most mass on the head's sink column (the column of largest mean mass);
    local:   the n rows with the most mass within 2 positions of their own position (the diagonal band);
    spread:  n rows at evenly spaced positions (a sample of the whole head).
Heads: the widest SmolLM2-135M heads of the committed summaries (data/models/smollm2-L1024-eps1_4,
data/models/smollm2-L128-eps1_4: largest upper/lower), and the widest MiniLM heads at L = 128
(data/models/minilm-L128-eps1_4; MPNet needs a wheel that is not installed here), each on
certkit's built-in text, window 0, multiplier 1, eps = 1/4.

Per crop:
* today: certkit.certify(crop, eps) with default settings (no budget, no peers);
* upper (ours): the smallest k at which a much stronger fixed-rank search finds B = C G with
  max_i ||A_i - B_i||_1 <= eps: restarts of the library's joint L-BFGS refinement
  (certkit.search.upper.refine, without its give-up points and with 5x the evaluations) from today's
  witness truncated to k, from A's SVD and from random row bases, then alternating exact LPs
  (HiGHS: the rows on a fixed basis, and the basis for fixed coefficients, min_V max_i ||A_i -
  C_i V^T||_1 as one LP); every rank claimed is an upper-factorization certificate VERIFIED by the
  kernel (certkit.choices.check);
* lower (ours): lower-decoding-inverse-norm with LP-optimal decoders (G = X / t*, t*(S) = min { max_j
  ||X_j||_1 : A_S X = I }, HiGHS) over message-row sets S: greedy growth (the row of smallest t*
  first, from today's messages and from two rows) and then a branch and bound over all subsets of the
  n rows (t* only grows with S; a set is a clique of the graph of passing pairs), exhaustive unless it
  hits its LP cap (settings(): 800 LPs after the pairs at L = 128, 12 at L = 1024, where one LP takes
  seconds; then the column says "LP cap"); the Frobenius tail of A_R; every bound claimed is VERIFIED
  by the kernel, and today's certificate stands where ours is lower;
* "decoding max": the largest |S| with eps t*(S) < 1 over all S when the branch and bound finished:
  no message-row decoding certificate (margin or inverse-norm, any cells or decoder) can certify
  more on this crop, a limit of the kernel's kinds, not a bound on r_eps;
* which end was off: today's lower minus ours (>= 0 means the lower end was loose by that much),
  today's upper minus ours (the same for the upper end).  When ours is exact (lower = upper) the
  gaps are today's distances to the true r_eps.
"""
import argparse
import csv
import itertools
import json
import os
import sys
import tempfile
import time
from fractions import Fraction

if __name__ == "__main__":      # one BLAS thread (before numpy loads); imported by a test, the process is left as it is
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

EPS = Fraction(1, 4)
POLISH_MAX = 1 << 13   # n N up to which a near miss gets the alternating exact LPs (the basis LP has n N + N k variables)
MARGIN = 1e-6          # our float tests: eps t* < 1 - MARGIN, row errors <= eps (1 - 1e-7)
SAFETY = 1e-7

# (model, length, head, crop kinds): the widest heads of the committed summaries (largest upper/lower)
CROPS = [
    ("smollm2", 1024, "l29-h0", ("diffuse", "spread", "local", "sink")),
    ("smollm2", 1024, "l19-h5", ("diffuse", "spread")),
    ("smollm2", 128, "l4-h0", ("diffuse", "spread", "local")),
    ("smollm2", 128, "l28-h3", ("diffuse", "spread")),
    ("smollm2", 128, "l29-h0", ("diffuse", "spread")),
    ("minilm", 128, "l2-h2", ("diffuse", "spread")),
    ("minilm", 128, "l0-h3", ("diffuse", "spread")),
]
HEADS = [c[:3] for c in CROPS]
KINDS = ("diffuse", "sink", "local", "spread")


def settings(L):
    """(rows per crop, decoding LPs cap, upper restarts) at length L: the L = 1024 crops have ~1000
    columns, where one decoding LP costs seconds."""
    return (12, 12, 2) if L > 256 else (24, 800, 6)


# ---------------------------------------------------------------- heads and crops

def extract(cache=None):
    """{(model, L, name): (Q, K, beta text, causal)} for HEADS, by one model capture per (model, L)."""
    if cache and os.path.exists(cache):
        z = np.load(cache, allow_pickle=False)
        meta = json.loads(str(z["meta"]))
        return {tuple(m[:3]): (z[f"Q{i}"], z[f"K{i}"], m[3], m[4]) for i, m in enumerate(meta)}
    from certkit.models.extract import capture, inputs, model_heads, prepare
    out = {}
    for model in sorted({m for m, _, _ in HEADS}):
        mdl, tok, info = prepare(model)
        for L in sorted({L for m, L, _ in HEADS if m == model}):
            names = [h for m, l, h in HEADS if m == model and l == L]
            layers = sorted({int(n.split("-")[0][1:]) for n in names})
            ids, sha, _ = inputs(tok, info, None, None, L, 0)
            c = capture(mdl, info, ids, layers=layers)
            for h in model_heads(c, layers, None, [1], sha):
                if h.name in names:
                    out[(model, L, h.name)] = (np.array(h.queries), np.array(h.keys), beta_text(h), h.mask is not None)
        del mdl
    if cache:
        meta = [list(k) + [v[2], v[3]] for k, v in out.items()]
        arrays = {}
        for i, v in enumerate(out.values()):
            arrays[f"Q{i}"], arrays[f"K{i}"] = v[0], v[1]
        np.savez(cache, meta=json.dumps(meta), **arrays)
    return out


def beta_text(h):
    """The head's exact beta as certkit.Head.from_arrays reads it ("c/sqrt(D)" or "p/q")."""
    b = h.beta_json()
    if isinstance(b, dict):
        c, D = b["over_sqrt"]
        return f"{c}/sqrt({D})"
    return b


def full_head(Q, K, beta, causal):
    import certkit
    from certkit.head import RowMask
    return certkit.Head.from_arrays(Q, K, beta=beta, mask=RowMask(0) if causal else None)


def pick_rows(A, kind, n, causal):
    """The crop's rows (sorted positions) of the given kind; deterministic (stable sorts)."""
    L = A.shape[0]
    first = 1 if causal else 0        # a causal head's row 0 is one-hot on key 0: never chosen
    idx = np.arange(first, L)
    if kind == "spread":
        return np.unique(np.linspace(first, L - 1, n).round().astype(int))
    if kind == "diffuse":
        score = -(A * np.log(np.where(A > 0, A, 1.0))).sum(axis=1)
    elif kind == "sink":
        score = A[:, int(np.argmax(A.mean(axis=0)))]
    elif kind == "local":
        band = np.abs(np.arange(L)[:, None] - np.arange(A.shape[1])[None, :]) <= 2
        score = (A * band).sum(axis=1)
    else:
        raise ValueError(kind)
    order = idx[np.argsort(-score[idx], kind="stable")]
    return np.sort(order[:n])


def crop_head(Q, K, beta, causal, rows, name):
    """The crop as a certkit Head (rows' queries, the keys they see, KeyRows for a causal head)."""
    import certkit
    from certkit.head import KeyRows
    if causal:
        N = int(rows.max()) + 1
        start = np.searchsorted(rows, np.arange(N), side="left")     # first crop row at position >= j
        mask = KeyRows(start.astype(np.int64), np.full(N, len(rows), dtype=np.int64), label="crop rows")
        return certkit.Head.from_arrays(Q[rows], K[:N], beta=beta, name=name, mask=mask)
    return certkit.Head.from_arrays(Q[rows], K, beta=beta, name=name)


# ---------------------------------------------------------------- certificates

def write_and_check(folder, tag, kind, bound, head, witness):
    """Write a certificate and return the kernel's verdict status (only VERIFIED counts)."""
    from certkit.choices import check
    from certkit.search.writer import certificate
    path = os.path.join(folder, f"{tag}.json")
    certificate(path, kind, bound, EPS, head, witness, provenance={"producer": "benchmarks/bench_crops.py"})
    return check(path).status


def witness_arrays(cert):
    """The float arrays of a Certificate's witness (inline hex numerals or sidecars)."""
    import io
    out = {}
    for k, v in cert.doc["witness"].items():
        if isinstance(v, dict) and "file" in v:
            out[k] = np.load(io.BytesIO(cert.sidecars[v["file"]]), allow_pickle=False)
        else:
            out[k] = np.array(_unhex(v))
    return out


def _unhex(v):
    if isinstance(v, list):
        return [_unhex(x) for x in v]
    return float.fromhex(v) if isinstance(v, str) and ("x" in v or "p" in v) else float(v)


# ---------------------------------------------------------------- the lower end

def tstar(Am):
    """t*(S) = min { max_j ||X_j||_1 : A_S X = I } by HiGHS: (t*, X, Lam), Lam (M x M) the dual of the
    equalities, signed so that tr(Lam) / sum_j max_b |(A_S^T Lam)_jb| is a lower bound on t* (weak
    duality: tr Lam = <A_S^T Lam, X> <= t sum_j max_b |(A_S^T Lam)_jb|); (inf, None, None) if infeasible."""
    from certkit.search.lower.soft import decoder_lp
    M, N = Am.shape
    if M > N:
        return np.inf, None, None
    r = decoder_lp(Am)
    if r.status != 0:
        return np.inf, None, None
    Lam = np.asarray(r.eqlin.marginals).reshape(M, M)
    if np.trace(Lam) < 0:
        Lam = -Lam
    return float(r.fun), (r.x[:N * M] - r.x[N * M:2 * N * M]).reshape(N, M), Lam


def extension_bound(W, T, c):
    """max over lam >= 0 of (T + lam) / sum_j max(W_j, lam c_j): the dual bound on t*(S + v) from a
    dual Lam of S (W_j = max_b |(A_S^T Lam)_jb|, T = tr Lam) extended by lam on the new row v (c = A_v)."""
    pos = c > 0
    lam = np.sort(W[pos] / c[pos])
    order = np.argsort(W[pos] / c[pos])
    Wp, cp = W[pos][order], c[pos][order]
    # at lam = lam_m: the columns with W_j / c_j < lam_m (indices < m) use lam c_j, the rest W_j
    base = W[~pos].sum()
    cum_c = np.r_[0.0, np.cumsum(cp)]
    rest_W = np.r_[np.cumsum(Wp[::-1])[::-1], 0.0]
    D = base + lam * cum_c[:-1] + rest_W[:-1]
    vals = (T + lam) / D
    return max(float(vals.max()) if vals.size else 0.0, T / max(W.sum(), 1e-300))


class Decoding:
    """Memoised t*(S) on the crop A (S a sorted tuple of rows); a set is decided without an LP when a
    cheap dual bound (the LP's dual at Y = I, or a subset's dual extended to the new row) already
    reaches 1 / eps."""

    def __init__(self, A, eps, cap):
        self.A, self.eps, self.cap = A, float(eps), cap
        self.memo, self.lps, self.dual_cuts = {}, 0, 0
        self.limit = 1.0 / self.eps * (1 - MARGIN)

    def t(self, S):
        S = tuple(sorted(S))
        if S in self.memo:
            return self.memo[S][0]
        Am = self.A[list(S)]
        if len(S) / Am.max(axis=0).sum() >= self.limit:     # Lam = I
            self.memo[S] = (np.inf, None, None)
            self.dual_cuts += 1
            return np.inf
        for v in S:
            sub = tuple(x for x in S if x != v)
            got = self.memo.get(sub)
            if got is None or got[2] is None:
                continue
            Lam = got[2]
            W = np.abs(self.A[list(sub)].T @ Lam).max(axis=1)
            if extension_bound(W, float(np.trace(Lam)), self.A[v]) >= self.limit:
                self.memo[S] = (np.inf, None, None)
                self.dual_cuts += 1
                return np.inf
        self.lps += 1
        self.memo[S] = tstar(Am)
        return self.memo[S][0]

    def ok(self, S):
        return self.t(S) < self.limit


def decoding_max(dec, n, start=(), target=None):
    """Branch and bound for the largest S (subset of range(n)) with eps t*(S) < 1: t* is monotone in S,
    so feasible sets are cliques of the graph of feasible pairs; (best S, finished?).  Stops at a set
    of size target (a known upper bound on r_eps: no message set can certify more), and after dec.cap
    LPs (then finished is False)."""
    import networkx as nx
    g = nx.Graph()
    g.add_nodes_from(i for i in range(n) if dec.ok((i,)))
    for a, b in itertools.combinations(sorted(g.nodes), 2):
        if dec.ok((a, b)):
            g.add_edge(a, b)
    best = tuple(sorted(start)) if start and dec.ok(start) else ()
    finished = True
    dec.cap += dec.lps                  # the cap counts the LPs after the graph of pairs

    def grow(S, cand):
        nonlocal best, finished
        if len(S) > len(best):
            best = S
        if target is not None and len(best) >= target:
            return
        if dec.lps >= dec.cap:
            finished = False
            return
        if len(S) + len(cand) <= len(best):
            return
        # colouring bound on the candidates' subgraph
        if cand:
            colours = nx.greedy_color(g.subgraph(cand), strategy="largest_first")
            if len(S) + (max(colours.values()) + 1) <= len(best):
                return
        for i, v in enumerate(cand):
            if len(S) + len(cand) - i <= len(best):
                return
            T = tuple(sorted(S + (v,)))
            if not dec.ok(T):
                continue
            grow(T, [w for w in cand[i + 1:] if g.has_edge(v, w)])
    # a greedy incumbent first: from each start, add the row (adjacent to all) with the smallest t*
    for seed in ([tuple(sorted(start))] if start else []) + [(v,) for v in sorted(g.nodes, key=lambda v: (-g.degree(v), v))[:2]]:
        S = seed if dec.ok(seed) else ()
        while dec.lps < dec.cap:
            cand = [v for v in g.nodes if v not in S and all(g.has_edge(v, w) for w in S)]
            ts = sorted((dec.t(S + (v,)), v) for v in cand)
            if not ts or ts[0][0] >= dec.limit:
                break
            S = tuple(sorted(S + (ts[0][1],)))
        if len(S) > len(best):
            best = S
        if target is not None and len(best) >= target:
            return best, True
    order = sorted(g.nodes, key=lambda v: (-g.degree(v), v))
    grow((), order)
    return best, finished


def lower_ours(A, head, folder, cap, today_msgs=None, target=None):
    """Our certified lower bound: (bound, kind, decoding max or None, finished, LPs)."""
    from certkit.search.basic import frobenius_bound
    dec = Decoding(A, EPS, cap)
    S, finished = decoding_max(dec, A.shape[0], tuple(today_msgs) if today_msgs is not None else (), target)
    best = (1, "one row", None)
    cands = []
    if len(S) >= 1:
        cands.append((len(S), "lower-decoding-inverse-norm", S))
    kf = frobenius_bound(A, float(EPS))
    if kf > 0:
        cands.append((kf, "lower-frobenius-tail", None))
    for M, kind, S1 in sorted(cands, key=lambda c: -c[0]):
        if kind == "lower-frobenius-tail":
            wit = {}
        else:
            # the decoder X / t* (row l1 norms <= 1); shrink S if the kernel rejects it (a rounding margin)
            t, X, _ = dec.memo[tuple(sorted(S1))]
            G = X / (np.abs(X).sum(axis=1).max() * (1 + 1e-12))
            wit = {"messages": (np.array(S1, dtype=np.int64), "int"), "decoder": (G, "float")}
        if write_and_check(folder, f"lower-{M}", kind, M, head, wit) == "VERIFIED":
            best = (M, kind, None)
            break
    return best[0], best[1], len(S) if finished else None, finished, dec.lps


# ---------------------------------------------------------------- the upper end

def v_step(A, C):
    """min_V max_i ||A_i - C_i V^T||_1 as one LP (HiGHS): (value, G = V^T)."""
    import scipy.sparse as sp
    from scipy.optimize import linprog
    n, N = A.shape
    k = C.shape[1]
    nv, nt = N * k, n * N
    ri, cj = np.repeat(np.arange(n), N), np.tile(np.arange(N), n)
    M = sp.csr_matrix((C[ri].ravel(), (np.repeat(np.arange(nt), k), (cj[:, None] * k + np.arange(k)).ravel())),
                      shape=(nt, nv))
    I = sp.identity(nt, format="csr")
    z = sp.csr_matrix((nt, 1))
    S = sp.csr_matrix((np.ones(nt), (ri, np.arange(nt))), shape=(n, nt))
    A_ub = sp.vstack([sp.hstack([M, -I, z]), sp.hstack([-M, -I, z]),
                      sp.hstack([sp.csr_matrix((n, nv)), S, -sp.csr_matrix(np.ones((n, 1)))])], format="csr")
    a = A.ravel()
    cost = np.zeros(nv + nt + 1)
    cost[-1] = 1
    r = linprog(cost, A_ub=A_ub, b_ub=np.r_[a, -a, np.zeros(n)],
                bounds=[(None, None)] * nv + [(0, None)] * (nt + 1), method="highs")
    if r.status != 0:
        return np.inf, None
    return r.fun, r.x[:nv].reshape(N, k).T


def polish(A, C, G, eps, rounds=4):
    """Alternating exact LPs: rows on the basis G, then the basis for the coefficients C."""
    from certkit.search.upper import factor_row_errors, fit_rows_lp
    target = eps * (1 - SAFETY)
    best = (factor_row_errors(A, C, G).max(), C, G)
    for _ in range(rounds):
        C, e = fit_rows_lp(A, G)
        e = factor_row_errors(A, C, G).max()
        if e < best[0]:
            best = (e, C, G)
        if e <= target:
            break
        v, G1 = v_step(A, C)
        if G1 is None:
            break
        e1 = factor_row_errors(A, C, G1).max()
        if e1 < best[0]:
            best = (e1, C, G1)
        if e1 <= target:
            break
        if e1 > best[0] * (1 - 1e-4) and e > best[0] * (1 - 1e-4):
            G = G1
            if min(e, e1) >= best[0]:
                break
        G = G1
    return best


def starts(A, k, rng, today, restarts):
    """Warm starts (C, G) at rank k: today's witness and A's SVD truncated to k, random row bases."""
    from certkit.search.upper import fit_rows_lp, truncate
    n = A.shape[0]
    out = []
    if today is not None:
        out.append(("today", *truncate(today[0], today[1], k)))
    U, s, Vt = np.linalg.svd(A, full_matrices=False)
    out.append(("svd", U[:, :k] * s[:k], Vt[:k]))
    for r in range(restarts):
        rows = np.sort(rng.choice(n, size=k, replace=False))
        G = A[rows] + 1e-3 * rng.standard_normal((k, A.shape[1])) * A[rows].max()
        out.append((f"rows{r}", fit_rows_lp(A, G)[0], G))
    return out


def fits_at(A, k, eps, rng, today, restarts):
    """A rank-k (C, G) with float max row error <= eps (1 - SAFETY), or the best error found."""
    from certkit.search.upper import factor_row_errors, refine
    target = eps * (1 - SAFETY)
    best = (np.inf, None, None)
    for name, C, G in starts(A, k, rng, today, restarts):
        for p, delta in ((64, 1e-4), (256, 1e-5)):
            C, G = refine(A, C, G, eps=eps, p=p, delta=delta, iters=2000, check_at=10 ** 9, early=(),
                          rescue_at=range(100, 2000, 100))
        e = factor_row_errors(A, C, G).max()
        if e <= target:
            return e, C, G
        if e <= 1.15 * target and A.size <= POLISH_MAX:
            e, C, G = polish(A, C, G, eps)
            if e <= target:
                return e, C, G
        if e < best[0]:
            best = (e, C, G)
    return best


def upper_ours(A, head, folder, today_up, today_UV, floor, restarts):
    """Our certified upper bound: the smallest k below today's with a VERIFIED factorisation (the
    search goes down from today's upper bound and stops at the first rank it cannot reach)."""
    rng = np.random.default_rng(0)
    best = today_up
    today = None if today_UV is None else (today_UV[0], today_UV[1].T)
    fails = {}
    k = today_up - 1
    while k >= max(floor, 1):
        e, C, G = fits_at(A, k, float(EPS), rng, today, restarts)
        if C is None or e > float(EPS) * (1 - SAFETY):
            fails[k] = e
            break
        status = write_and_check(folder, f"upper-{k}", "upper-factorization", k, head,
                                 {"U": (C, "float"), "V": (G.T, "float")})
        if status != "VERIFIED":
            fails[k] = e
            break
        best, today = k, (C, G)
        k -= 1
    return best, fails


# ---------------------------------------------------------------- one crop

def run_crop(name, head, restarts=6, cap=4000):
    import certkit
    A = head.attention()
    row = {"crop": name, "n": head.n, "N": head.N}
    t = time.perf_counter()
    s = certkit.certify(head, eps=EPS)
    row["today_seconds"] = round(time.perf_counter() - t, 1)
    row["today_lower"], row["today_upper"] = s.bounds
    row["today_lower_kind"] = s.lower.kind if s.lower else "-"
    UV = None
    if s.upper is not None:
        w = witness_arrays(s.upper)
        UV = (w["U"], w["V"])
    msgs = None
    if s.lower is not None and s.lower.kind.startswith("lower-decoding"):
        msgs = [int(x) for x in s.lower.doc["witness"]["messages"]]
    t = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="crops-") as folder:
        up, fails = upper_ours(A, head, folder, row["today_upper"], UV, row["today_lower"], restarts)
        row["upper"] = up
        row["next_rank_error"] = round(min(fails.values()), 4) if fails else ""
        row["upper_seconds"] = round(time.perf_counter() - t, 1)
        lo, kind, dmax, finished, lps = lower_ours(A, head, folder, cap, msgs, target=up)
        if lo < row["today_lower"]:          # our capped search found less: today's VERIFIED certificate stands
            lo, kind = row["today_lower"], "today's " + row["today_lower_kind"]
        row["lower"], row["lower_kind"], row["lower_lps"] = lo, kind, lps
        row["decoding_max"] = dmax if finished else ("= lower (met upper)" if lo == up else f">= {lo} (LP cap)")
    row["seconds"] = round(time.perf_counter() - t, 1)
    row["exact"] = row["lower"] if row["lower"] == row["upper"] else ""
    row["lower_off"] = row["lower"] - row["today_lower"]
    row["upper_off"] = row["today_upper"] - row["upper"]
    return row


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "benchmarks", "results", "crops.md"))
    ap.add_argument("--cache", default=None, help="keep the extracted heads in this .npz (reruns skip the models)")
    ap.add_argument("--only", default=None, help="comma-separated crop names (model-L-head-kind)")
    ap.add_argument("--quick", action="store_true", help="the first crop of each kind only")
    ap.add_argument("--from-csv", default=None, metavar="SECONDS",
                    help="rewrite crops.md from crops.csv beside --out (the run's seconds given), no search")
    args = ap.parse_args(argv)
    cached = bool(args.cache and os.path.exists(args.cache))
    if args.from_csv is not None:
        with open(os.path.splitext(args.out)[0] + ".csv") as f:
            rows = [{k: (int(v) if k in INTS else v) for k, v in r.items()} for r in csv.DictReader(f)]
        for r in rows:
            r["exact"] = int(r["exact"]) if r["exact"] != "" else ""
        write(rows, args.out, float(args.from_csv), cached=cached)
        return
    t0 = time.perf_counter()
    heads = extract(args.cache)
    rows = []
    for model, L, hname, kinds in CROPS:
        Q, K, beta, causal = heads[(model, L, hname)]
        full = full_head(Q, K, beta, causal)
        A = full.attention()
        n_rows, cap, restarts = settings(L)
        for kind in kinds[:1] if args.quick else kinds:
            name = f"{model}-L{L}-{hname}-{kind}"
            if args.only and name not in args.only.split(","):
                continue
            rsel = pick_rows(A, kind, n_rows, causal)
            head = crop_head(Q, K, beta, causal, rsel, name)
            assert np.abs(head.attention() - A[rsel][:, :head.N]).max() < 1e-12
            r = run_crop(name, head, restarts, cap)
            r["rows"] = " ".join(map(str, rsel))
            rows.append(r)
            print(json.dumps(r), flush=True)
    write(rows, args.out, time.perf_counter() - t0, cached=cached)


COLUMNS = ["crop", "n", "N", "exact", "lower", "upper", "today_lower", "today_upper", "lower_off", "upper_off",
           "decoding_max", "lower_kind", "today_lower_kind", "next_rank_error", "lower_lps", "today_seconds",
           "upper_seconds", "seconds", "rows"]


INTS = {"n", "N", "lower", "upper", "today_lower", "today_upper", "lower_off", "upper_off", "lower_lps"}


def write(rows, out, seconds, cached=False):
    """crops.csv (every column) and crops.md (the table, the totals and the conclusion they give)."""
    with open(os.path.splitext(out)[0] + ".csv", "w", newline="") as f:
        w = csv.DictWriter(f, COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    lines = ["# Which end is loose? Crops of real heads solved (nearly) exactly", "",
             "Made by `.venv/bin/python benchmarks/bench_crops.py` (its docstring: the crops, the searches, the columns); "
             "every number below is a kernel-VERIFIED certificate (upper-factorization, lower-decoding-inverse-norm, "
             f"lower-frobenius-tail) at eps = {EPS}. Run time {seconds / 60:.1f} min "
             + ("(heads from --cache: the model captures, ~2.5 min, not included)" if cached
                else "(the model captures included)") + ". Every column: crops.csv.", "",
             "| crop | n × N | r_eps (ours) | today | lower end off by | upper end off by | decoding max | "
             "best error at ours − 1 | s today / ours |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ours = f"**{r['exact']}** (exact)" if r["exact"] != "" else f"{r['lower']} ≤ r ≤ {r['upper']}"
        lines.append(f"| {r['crop']} | {r['n']} × {r['N']} | {ours} | {r['today_lower']} ≤ r ≤ {r['today_upper']} | "
                     f"{r['lower_off']} | {r['upper_off']} | {r['decoding_max']} | {r['next_rank_error'] or '-'} | "
                     f"{r['today_seconds']} / {r['seconds']} |")
    exact = [r for r in rows if r["exact"] != ""]
    lo = sum(r["lower_off"] for r in rows)
    up = sum(r["upper_off"] for r in rows)
    lo_e = sum(r["lower_off"] for r in exact)
    up_e = sum(r["upper_off"] for r in exact)
    tight = sum(1 for r in rows if r["today_lower"] == r["today_upper"])
    width_today = sum(r["today_upper"] - r["today_lower"] for r in rows)
    width_ours = sum(r["upper"] - r["lower"] for r in rows)
    ratio_t = np.median([r["today_upper"] / r["today_lower"] for r in rows])
    ratio_lo = np.median([r["upper"] / r["today_lower"] for r in exact]) if exact else float("nan")
    ratio_up = np.median([r["today_upper"] / r["upper"] for r in exact]) if exact else float("nan")
    lines += ["", "## Totals", "",
              f"* {len(rows)} crops; ours exact on {len(exact)} (lower = upper), today exact on {tight}; "
              f"summed widths upper − lower: today {width_today}, ours {width_ours}.",
              f"* Lower end: ours − today summed over all crops {lo} (over the exact crops {lo_e}); "
              f"upper end: today − ours {up} (exact crops {up_e}).",
              f"* Median over the exact crops of r_eps / today's lower {ratio_lo:.2f} and today's upper / r_eps "
              f"{ratio_up:.2f} (today's median upper/lower {ratio_t:.2f}).",
              "* 'decoding max': the largest message set S (any of the crop's rows) with eps t*(S) < 1 found by the "
              "branch and bound; exact where it finished or met the upper bound (no decoding certificate, "
              "margin or inverse-norm, cells or any decoder, can certify more); '(LP cap)' where it stopped on its "
              "LP budget.",
              "* 'best error at ours − 1': the smallest max row l1 error our upper search reached one rank below "
              "its certified rank (above eps = 0.25: the rank it could not reach).", "",
              "## Conclusion", ""]
    if exact:
        end = "lower" if lo_e > up_e else "upper" if up_e > lo_e else "lower and upper (equally)"
        lines.append(f"On the {len(exact)} crops solved exactly, today's sandwich missed r_eps by {lo_e} at the lower end "
                     f"and {up_e} at the upper end (summed): the gap is mostly at the **{end}** end there. "
                     f"Over all {len(rows)} crops the proven improvements are {lo} (lower) and {up} (upper).")
    open_rows = [r for r in rows if r["exact"] == ""]
    if open_rows:
        lines.append(f"{len(open_rows)} crops stay open ({', '.join(r['crop'] for r in open_rows)}): there the "
                     "remaining gap is unassigned (the branch and bound stopped on its LP cap, and the upper search "
                     "could not reach the next rank; its best error there is in the table).")
    if exact:
        kinds = sorted({r["lower_kind"] for r in exact if r["lower"] > 1})
        lines.append(f"On every exact crop above rank 1 the lower end is met by {' / '.join(kinds)}: the existing kind "
                     "suffices on these crops, and what today's lower search misses is the choice of message rows "
                     "(ours: greedy growth by the exact LP t*(S), then a branch and bound), not a certificate kind. "
                     + (f"Relative to r_eps the {'lower' if ratio_lo > ratio_up else 'upper'} end is the larger miss "
                        f"(median r_eps / today's lower {ratio_lo:.2f} against today's upper / r_eps {ratio_up:.2f})."))
    lines.append("")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"{len(rows)} crops in {seconds:.0f} s")


if __name__ == "__main__":
    main()
