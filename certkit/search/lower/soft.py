"""Soft decoders (docs/mathematics.md §8.1): Lemma 8.2 holds for any decoder G with row l1 norms <= 1.

For message rows Am (M x N), the best decoder solves an LP:
    min_G ||(Am G)^{-1}||_inf = t* = min { max_j ||X_j||_1 : Am X = I }
(given G, X = G (Am G)^{-1} is feasible; given X, G = X / t* gives Am G = I / t*).  soft_decoder
comes within a few per cent of t* by L-BFGS on a smoothed norm; best_decoder_lp solves the LP
(the reference).  Y = I in the LP's dual gives the cheap necessary test t* >= M / sum_j max_a
Am[a, j].  soft_extend and soft_prune reach message sets beyond those the argmax cells pass on.
"""
import numpy as np

from ..budget import tick
from ..upper import lbfgs
from .decoding import inverse_norm, passes
from .growth import grow_step
from .pruning import prune_both_last


def soft_prune(A, eps, start, dropped, M0, probes=3, reach=1.3):
    """Larger message sets than the pruning's, with soft decoders: (messages, G) or None.

    The pruning drops messages one at a time (dropped, in order; at least len(start) - M0) until
    the argmax cells pass the inverse-norm test at M0 messages; the sets it passed on the
    way (start without the first len(start) - M dropped, M > M0) may still pass with a better
    decoder (Lemma 8.2 holds for any decoder G with row l1 norms <= 1; soft_decoder comes within
    a few per cent of the LP-optimal one, docs/mathematics.md §8.1).  Bisection on M in
    (M0, min(len(start), reach M0)] with at most `probes` soft decoders (each O(N^2 M) per
    L-BFGS step), as if passing were monotone in M (it nearly is: a subset's optimal decoder
    value is no larger); only sets that pass in floats are returned, and the kernel decides.
    For heads with N > 512, where the greedy growth (grow_inverse) is not run: at L = 1024 on
    SmolLM2 heads, 249 -> 282 messages (benchmarks/bench_real_heads.py)."""
    start = np.asarray(start, dtype=np.int64)
    lo, hi, best = M0, min(len(start), int(reach * M0)), None
    for _ in range(probes):
        tick()
        if hi <= lo:
            break
        M = (lo + hi + 1) // 2
        msgs = prune_both_last(start, dropped[:len(start) - M])
        Am = A[msgs]
        ok = passes(M / Am.max(axis=0).sum(), eps)          # t* >= M / sum_j max_a Am[a, j] (soft_extend)
        if ok:
            v, G = soft_decoder(Am)
            ok = G is not None and passes(v, eps)
        if ok:
            lo, best = M, (msgs, G)
        else:
            hi = M - 1
    return best


def soft_decoder(Am, iters=200, p=32, delta=1e-3):
    """(t, G): a decoder G (N x M, every row l1 norm <= 1) for the message rows Am (M x N) with
    t ~ ||(Am G)^{-1}||_inf close to the best any decoder reaches (inf if none is found).

    The best decoder solves an LP: min_G ||(Am G)^{-1}||_inf over G with row l1 norms <= 1 equals
    t* = min { max_j ||X_j||_1 : Am X = I } (given G, X = G (Am G)^{-1} is feasible with row norms
    <= ||(Am G)^{-1}||_inf; given X, G = X / t* gives Am G = I / t*; docs/mathematics.md §8.1).
    Exact LPs cost seconds at M ~ 20, N = 256, so X = X0 + W with W in ker Am is found by L-BFGS
    on the smoothed p-norm (sum_j s_j^p)^(1/p) of the row norms s_j = sum_b sqrt(X_jb^2 +
    delta'^2): within a few per cent of t* on real heads, 3-30 times faster than HiGHS.  With
    [Q Z] an orthonormal basis of R^N, Q spanning the rows of Am: W = Z C (coordinates, the
    gradient Z^T times that in X; 4 N (N - M) M per evaluation), or, when M <= N / 3, W = P Y
    with P = I - Q Q^T (the gradient P times that in X; 4 N M^2): from Y = 0 every iterate is
    Z C for the C of the coordinate run (Z is an isometry), so both take the same steps.  The
    search runs in float32 (twice the GEMM speed, half the bytes) and X is formed from its result
    in float64, so Am X = I to float64 rounding.  The kernel decides on the returned G (T =
    fl(Am G) is then near I / t)."""
    M, N = Am.shape
    if M == 0 or M > N:
        return np.inf, None
    Q, _ = np.linalg.qr(Am.T, mode="complete")
    try:
        X0 = np.linalg.solve(Am @ Am.T, Am).T                # the least-norm solution, N x M
    except np.linalg.LinAlgError:
        return np.inf, None
    if not np.all(np.isfinite(X0)):
        return np.inf, None
    if N == M:                                                # X = Am^-1
        X = X0
    else:
        rows = 3 * M <= N
        B = Q[:, :M] if rows else Q[:, M:]

        def lift(v, B):                                       # v -> W in ker Am
            return v - B @ (B.T @ v) if rows else B @ v

        def pull(gX, B):                                      # the gradient in X -> in v
            return gX - B @ (B.T @ gX) if rows else B.T @ gX

        X0_32, B32 = X0.astype(np.float32), B.astype(np.float32)
        d2 = np.float32((delta * np.abs(X0).sum(axis=1).max() / M) ** 2)
        shape = (N if rows else N - M, M)

        def f(v):
            X = X0_32 + lift(v.reshape(shape), B32)
            r = np.sqrt(X * X + d2)
            s = r.sum(axis=1, dtype=np.float64)
            z = s / s.max()
            zp = z ** p
            tot = zp.sum()
            gs = (zp / z) * tot ** (1 / p - 1)
            gs = np.where(gs < 2.0 ** -100, 0.0, gs).astype(np.float32)   # no subnormal float32 products
            X /= r
            X *= gs[:, None]
            return s.max() * tot ** (1 / p), pull(X, B32).ravel()

        v = lbfgs(f, np.zeros(shape[0] * M, dtype=np.float32), iters, dtype=np.float32)
        X = X0 + lift(v.reshape(shape).astype(np.float64), B)
    t = float(np.abs(X).sum(axis=1).max())
    if not (np.isfinite(t) and t > 0):
        return np.inf, None
    G = X / (t * (1 + 1e-12))                                    # row norms < 1 after rounding
    return inverse_norm(Am @ G), G


def best_decoder_lp(Am):
    """(t*, X): t* = min { max_j ||X_j||_1 : Am X = I } by HiGHS (X = P - Q, P, Q >= 0), the
    smallest ||(Am G)^{-1}||_inf over all decoders G (soft_decoder's docstring); (inf, None) if the
    LP fails.  Seconds at M ~ 20: the reference for benchmarks and tests, not used by the search."""
    r = decoder_lp(Am)
    if r.status != 0:
        return np.inf, None
    M, N = Am.shape
    return float(r.fun), (r.x[:N * M] - r.x[N * M:2 * N * M]).reshape(N, M)


def decoder_lp(Am):
    """HiGHS's result (scipy.optimize.linprog) of the LP of best_decoder_lp over the variables (P, Q, t), with the
    duals of its M x M equalities Am (P - Q) = I in .eqlin.marginals (row a M + b)."""
    import scipy.sparse as sp
    from scipy.optimize import linprog
    M, N = Am.shape
    E = sp.kron(sp.csr_matrix(Am), sp.identity(M))          # row a*M + b, column j*M + b
    A_eq = sp.hstack([E, -E, sp.csr_matrix((M * M, 1))]).tocsr()
    R = sp.kron(sp.identity(N), np.ones((1, M)))
    A_ub = sp.hstack([R, R, -np.ones((N, 1))]).tocsr()
    c = np.zeros(2 * N * M + 1)
    c[-1] = 1
    return linprog(c, A_ub=A_ub, b_ub=np.zeros(N), A_eq=A_eq, b_eq=np.eye(M).ravel(), bounds=(0, None), method="highs")


def soft_extend(A, eps, msgs, growth, steps=8, limit=None):
    """Messages beyond the greedy growth's, with soft decoders: the next rows of the growth
    order (the growth record, extended by grow_step), each prefix kept while its soft
    decoder passes the inverse-norm test; (messages, G) of the longest passing prefix, or
    (msgs, None).  A cheap necessary test stops first: Y = I in the LP's dual gives
    t* >= M / sum_j max_a Am[a, j].  The decoders are eps-free and kept in the growth record;
    limit: the growth's (grow_step)."""
    S, best = np.asarray(msgs, dtype=np.int64), None
    for _ in range(steps):
        tick()
        if len(S) >= min(A.shape):                          # every row (or column) is a message already
            break
        t = len(S) - 1                                      # growth[t] holds S + [next row]
        if t > len(growth) or (t < len(growth) and not np.array_equal(growth[t][0][:-1], S)):
            break                                           # S is not a growth prefix
        if t == len(growth):
            growth.append(grow_step(A, list(S), limit, growth[t - 1][2] if t else None) + [None])
        step = growth[t]
        nxt = step[0]
        Am = A[nxt]
        if not passes(len(nxt) / Am.max(axis=0).sum(), eps):
            break
        if len(step) < 5:
            step.append(soft_decoder(Am))
        v, G = step[4]
        if G is None or not passes(v, eps):
            break
        S, best = nxt, G
    return S, best
