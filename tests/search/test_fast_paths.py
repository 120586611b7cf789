"""The fast paths of the untrusted searches (certkit/search/lower/, upper.py) against the plain
definitions they replace: same candidates bit for bit where the fast path claims equality
(contraction, pruning, greedy growth, coordinate descent on cells), valid bounds where it
prunes with bounds, and the same mathematics where it reorganises floats (compact L-BFGS,
QR-based truncation)."""
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from certkit import synthetic
from certkit.search import upper
from certkit.search.lower.decoding import SAFETY, argmax_cells, contraction, inverse_norm_lower, inverse_ok, margins
from certkit.search.lower.descent import local_cells
from certkit.search.lower.growth import grow_inverse
from certkit.search.lower.messages import farthest_rows
from certkit.search.lower.pruning import prune_both, prune_many
from certkit.search.basic import row_errors


def attention(family, n, d, beta, seed, N=None):
    return synthetic.head(family, n, d, beta=Fraction(beta), N=N, seed=seed).attention()


# ---------------------------------------------------------------- reference (plain) versions

def ref_contraction(A, msgs, cells, M=None):
    M = len(msgs) if M is None else M
    T = np.zeros((len(msgs), M))
    sel = cells >= 0
    np.add.at(T.T, cells[sel], A[np.ix_(msgs, np.flatnonzero(sel))].T)
    return T


def ref_inverse_norm(T):
    try:
        X = np.linalg.inv(T)
    except np.linalg.LinAlgError:
        return np.inf
    v = np.abs(X).sum(axis=1).max()
    return float(v) if np.isfinite(v) else np.inf


def ref_prune(A, msgs, test):
    msgs = np.array(msgs, dtype=np.int64)
    while len(msgs):
        cells = argmax_cells(A, msgs)
        T = ref_contraction(A, msgs, cells)
        if test(T):
            return msgs, cells
        msgs = np.delete(msgs, int(np.argmin(margins(T))))
    return msgs, argmax_cells(A, msgs)


def ref_local_cells(A, msgs, cells, sweeps=2):
    M = len(msgs)
    cells = cells.copy()
    T = ref_contraction(A, msgs, cells, M)
    cur = ref_inverse_norm(T)
    for _ in range(sweeps):
        improved = False
        for j in range(A.shape[1]):
            col, old = A[msgs, j], int(cells[j])
            base = T.copy()
            if old >= 0:
                base[:, old] -= col
            best_v, best_b = cur, old
            for b in range(-1, M):
                if b != old:
                    T2 = base.copy()
                    if b >= 0:
                        T2[:, b] += col
                    v = ref_inverse_norm(T2)
                    if v < best_v * (1 - 1e-12):
                        best_v, best_b = v, b
            if best_b != old:
                cells[j], T, cur, improved = best_b, base, best_v, True
                if best_b >= 0:
                    T[:, best_b] += col
        if not improved:
            break
    return cells, cur


def ref_grow_inverse(A, eps, max_local=64):
    n = A.shape[0]
    ok = lambda v: eps * v * (1 + 1e-3) < 1 - 1e-9
    S = [int(np.argmax(A.max(axis=1)))]
    cells = argmax_cells(A, np.array(S))
    while len(S) < min(n, A.shape[1]):
        best = None
        for i in range(n):
            if i not in S:
                msgs = np.array(S + [i])
                v = ref_inverse_norm(ref_contraction(A, msgs, argmax_cells(A, msgs)))
                if best is None or v < best[0]:
                    best = (v, i)
        msgs = np.array(S + [best[1]])
        c = argmax_cells(A, msgs)
        if not ok(best[0]):
            if len(msgs) > max_local:
                break
            c, v = ref_local_cells(A, msgs, c)
            if not ok(v):
                break
        S, cells = list(msgs), c
    return np.array(S, dtype=np.int64), cells


HEADS = st.tuples(st.sampled_from(["gaussian", "clustered", "near-permutation"]), st.integers(6, 28),
                  st.integers(1, 6), st.sampled_from([1, 3, 8, 20]), st.integers(0, 5))


# ---------------------------------------------------------------- lower search

@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10 ** 6), n=st.integers(1, 30), N=st.integers(1, 30), M=st.integers(1, 9))
def test_contraction_is_bit_identical_to_add_at(seed, n, N, M):
    rng = np.random.default_rng(seed)
    A = rng.random((n, N)) ** 3
    msgs = rng.choice(n, int(rng.integers(0, n + 1)), replace=False)
    cells = rng.integers(-1, M, N)
    assert np.array_equal(contraction(A, msgs, cells, M), ref_contraction(A, msgs, cells, M))


@settings(max_examples=25, deadline=None)
@given(head=HEADS, eps=st.sampled_from([0.1, 0.25, 0.4]))
def test_one_pass_pruning_equals_pruning_per_test(head, eps):
    family, n, d, beta, seed = head
    A = attention(family, n, d, beta, seed)
    thr = eps * (1 + SAFETY) + 1e-12
    tests = [lambda T: bool(np.all(margins(T) > thr)), lambda T: inverse_ok(T, eps)]
    for msgs0 in (farthest_rows(A, n), np.arange(n)[::-1]):
        fast = prune_both(A, msgs0, eps, thr)
        many = prune_many(A, msgs0, tests)
        for (m1, c1), (m2, c2), (m3, c3), test in zip(fast, many, [ref_prune(A, msgs0, t) for t in tests], tests):
            assert np.array_equal(m1, m3) and np.array_equal(c1, c3)
            assert np.array_equal(m2, m3) and np.array_equal(c2, c3)


def test_one_pass_pruning_on_a_large_contraction():
    """n = 80: the LU / Hager rejections and the ||x|| / ||T x|| shortcut are all exercised."""
    A = attention("gaussian", 80, 8, 3, 1)
    eps = 0.2
    thr = eps * (1 + SAFETY) + 1e-12
    fast = prune_both(A, farthest_rows(A, 80), eps, thr)
    ref = [ref_prune(A, farthest_rows(A, 80), t) for t in
           (lambda T: bool(np.all(margins(T) > thr)),
            lambda T: eps * ref_inverse_norm(T) * (1 + 1e-3) < 1 - 1e-9)]
    for (m1, c1), (m2, c2) in zip(fast, ref):
        assert np.array_equal(m1, m2) and np.array_equal(c1, c2)


@settings(max_examples=15, deadline=None)
@given(head=HEADS, eps=st.sampled_from([0.1, 0.25, 0.4]))
def test_grow_inverse_equals_the_plain_greedy(head, eps):
    family, n, d, beta, seed = head
    A = attention(family, n, d, beta, seed)
    m1, c1 = grow_inverse(A, eps)
    m2, c2 = ref_grow_inverse(A, eps)
    assert np.array_equal(m1, m2) and np.array_equal(c1, c2)


@settings(max_examples=15, deadline=None)
@given(head=HEADS, order=st.permutations([0.1, 0.2, 0.3, 0.45]), max_local=st.sampled_from([0, 64]))
def test_grow_inverse_with_a_shared_growth_equals_the_plain_greedy(head, order, max_local):
    """The growth recorded at one eps, replayed at the others (in any order), changes nothing."""
    family, n, d, beta, seed = head
    A = attention(family, n, d, beta, seed)
    growth = []
    for eps in order:
        m1, c1 = grow_inverse(A, eps, max_local=max_local, growth=growth)
        m2, c2 = ref_grow_inverse(A, eps, max_local=max_local)
        assert np.array_equal(m1, m2) and np.array_equal(c1, c2)


@pytest.mark.parametrize("family, n, beta, eps", [("gaussian", 40, 4, 0.15), ("clustered", 36, 3, 0.25),
                                                  ("gaussian", 64, 8, 0.2)])
def test_local_cells_equals_the_plain_coordinate_descent(family, n, beta, eps):
    A = attention(family, n, 6, beta, 2)
    msgs, _ = grow_inverse(A, eps, max_local=-1)
    rest = [i for i in range(n) if i not in set(msgs.tolist())]
    for extra in rest[:3]:
        m = np.r_[msgs, extra]
        c0 = argmax_cells(A, m)
        c1, v1 = local_cells(A, m, c0)
        c2, v2 = ref_local_cells(A, m, c0)
        assert np.array_equal(c1, c2) and v1 == v2


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10 ** 6), m=st.integers(32, 90), shift=st.floats(0, 3))
def test_inverse_norm_lower_bounds_are_bounds(seed, m, shift):
    rng = np.random.default_rng(seed)
    T = rng.random((m, m)) ** 4 + shift * np.eye(m)
    lb, x = inverse_norm_lower(T)
    v = ref_inverse_norm(T)
    assert lb <= v * (1 + 1e-9)
    if x is not None:
        assert np.abs(x).max() / np.abs(T @ x).max() <= v * (1 + 1e-9)
    assert inverse_ok(T, 0.3) == (0.3 * v * (1 + 1e-3) < 1 - 1e-9)


def test_inverse_norm_lower_of_a_singular_matrix():
    assert inverse_norm_lower(np.ones((40, 40))) == (None, None)
    assert not inverse_ok(np.ones((40, 40)), 0.1)


# ---------------------------------------------------------------- upper search

def ref_lbfgs(f, x, iters, m=10):
    """The two-loop recursion (Nocedal & Wright Alg. 7.4) with the same line search."""
    F, g = f(x)
    S, Y = [], []
    for _ in range(iters):
        q = g.copy()
        alphas = []
        for s_, y_ in reversed(list(zip(S, Y))):
            a = s_ @ q / (y_ @ s_)
            alphas.append(a)
            q -= a * y_
        if S:
            q *= (S[-1] @ Y[-1]) / (Y[-1] @ Y[-1])
        for (s_, y_), a in zip(zip(S, Y), reversed(alphas)):
            q += (a - y_ @ q / (y_ @ s_)) * s_
        d = -q
        slope = g @ d
        if slope >= 0:
            S, Y, d, slope = [], [], -g, -(g @ g)
        t = 1.0 if S else min(1.0, 1.0 / max(np.sqrt(g @ g), 1e-300))
        for _ in range(30):
            F1, g1 = f(x + t * d)
            if F1 <= F + 1e-4 * t * slope:
                break
            t *= 0.5
        else:
            return x
        s_, y_ = t * d, g1 - g
        x, F, g = x + s_, F1, g1
        if y_ @ s_ > 1e-12 * (s_ @ s_):
            S.append(s_)
            Y.append(y_)
            if len(S) > m:
                S.pop(0)
                Y.pop(0)
    return x


@pytest.mark.parametrize("m", [3, 10])
def test_compact_lbfgs_follows_the_two_loop_recursion(m):
    """The same iterates (to rounding) as the two-loop recursion, the ring buffer wrapping."""
    rng = np.random.default_rng(3)
    D = 30
    Mx = rng.standard_normal((D, D))
    H = Mx @ Mx.T + np.diag(np.linspace(0.1, 10, D))
    b = rng.standard_normal(D)
    pts = {"new": [], "ref": []}

    def f_of(key):
        def f(x):
            pts[key].append(x.copy())
            return 0.5 * x @ H @ x - b @ x, H @ x - b
        return f

    upper.lbfgs(f_of("new"), np.zeros(D), 12, m=m)
    ref_lbfgs(f_of("ref"), np.zeros(D), 12, m=m)
    assert len(pts["new"]) == len(pts["ref"])
    scale = max(1.0, max(np.abs(p).max() for p in pts["ref"]))
    assert max(np.abs(p - q).max() for p, q in zip(pts["new"], pts["ref"])) < 1e-8 * scale


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_lbfgs_minimises_a_quadratic_in_either_memory_precision(dtype):
    rng = np.random.default_rng(1)
    M = rng.standard_normal((20, 20))
    H = M @ M.T + np.eye(20)
    b = rng.standard_normal(20)
    x = upper.lbfgs(lambda x: (0.5 * x @ H @ x - b @ x, H @ x - b), np.zeros(20), 500, dtype=dtype)
    assert np.allclose(x, np.linalg.solve(H, b), atol=1e-5)


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 10 ** 6), n=st.integers(3, 20), N=st.integers(3, 20), data=st.data())
def test_truncate_is_the_best_rank_k_product(seed, n, N, data):
    rng = np.random.default_rng(seed)
    k0 = data.draw(st.integers(1, min(n, N)))
    k = data.draw(st.integers(1, k0))
    C, G = rng.standard_normal((n, k0)), rng.standard_normal((k0, N))
    Ck, Gk = upper.truncate(C, G, k)
    U, s, Vt = np.linalg.svd(C @ G, full_matrices=False)
    assert Ck.shape == (n, k) and Gk.shape == (k, N)
    assert np.allclose(Ck @ Gk, (U[:, :k] * s[:k]) @ Vt[:k], atol=1e-8 * max(1, s[0]))
    assert np.allclose(Gk @ Gk.T, np.eye(k), atol=1e-10)


@settings(max_examples=20, deadline=None)
@given(head=HEADS, eps=st.sampled_from([0.05, 0.1, 0.25, 0.5]))
def test_svd_rank_is_the_first_k_that_fits(head, eps):
    family, n, d, beta, seed = head
    A = attention(family, n, d, beta, seed)
    Uf, s, Vt = np.linalg.svd(A, full_matrices=False)
    target = eps * (1 - upper.SAFETY)
    want = next((k for k in range(1, len(s) + 1)
                 if row_errors(A, (Uf[:, :k] * s[:k]) @ Vt[:k]).max() <= target), len(s))
    assert upper.svd_rank(A, Uf, s, Vt, target) == want


def test_row_rescue_refits_only_failing_rows():
    A = attention("gaussian", 24, 4, 2, 0)
    Uf, s, Vt = np.linalg.svd(A)
    k = 5
    G = Vt[:k]
    C = np.linalg.lstsq(G.T, A.T, rcond=None)[0].T                 # a cheap fit (least squares)
    e = row_errors(A, C @ G)
    C_lp, e_lp = upper.fit_rows_lp(A, G)
    eps = float(np.sort(e)[-2]) * 1.0000002            # all rows but the worst within target
    out = upper.row_rescue(A, C, G, eps, near=10)
    target = eps * (1 - upper.SAFETY)
    worst = int(np.argmax(e))
    if e_lp[worst] <= target * (1 - 1e-2):            # the best fit is well within target: found
        assert out is not None and row_errors(A, out @ G).max() <= target
        assert np.array_equal(np.delete(out, worst, axis=0), np.delete(C, worst, axis=0))
    if e_lp[worst] > target:                          # no fit is within target: none claimed
        assert out is None
    assert upper.row_rescue(A, C, G, float(e.max()) * 2) is None          # nothing to rescue
    assert upper.row_rescue(A, C, G, float(np.sort(e)[-4]), near=10) is None   # 4 rows above: too many


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 12), st.integers(20, 80), st.integers(0, 10**6))
def test_reweighted_row_fit_is_between_the_lp_optimum_and_its_start(k, N, seed):
    """min_c ||a - c G||_1 is the LP optimum (fit_rows_lp): no fit goes below it; the reweighted least
    squares never ends worse than its start and comes within 1% of the optimum (a search quality
    bound; measured within 1e-3 at 20 steps)."""
    rng = np.random.default_rng(seed)
    G, a = rng.standard_normal((k, N)), rng.standard_normal(N)
    c0 = np.zeros(k)
    _, e_lp = upper.fit_rows_lp(a[None, :], G)
    c, e = upper.fit_row_irls(a, G, c0, iters=40)
    assert e == pytest.approx(float(np.abs(a - c @ G).sum()), rel=1e-12)
    assert e <= float(np.abs(a).sum())
    assert e >= e_lp[0] * (1 - 1e-9)
    assert e <= e_lp[0] * 1.01


def test_descend_does_not_repeat_an_identical_refinement(monkeypatch):
    """At the floor, halving the step gives the same k again from the same start: one run."""
    A = attention("gaussian", 32, 8, 2, 0)
    calls = []
    real = upper.refine

    def counting(A_, C, G, **kw):
        calls.append(C.shape[1])
        return real(A_, C, G, **kw)

    monkeypatch.setattr(upper, "refine", counting)
    Uf, s, Vt = np.linalg.svd(A)
    k0 = 12
    list(upper.descend(A, 0.01, Uf[:, :k0] * s[:k0], Vt[:k0], floor=k0 - 1))  # eps too small: fails
    assert calls == [k0 - 1]


def test_search_is_deterministic():
    A = attention("clustered", 40, 4, 3, 1)
    judge = lambda U, V: row_errors(A, U @ V.T).max() + 1e-12
    r1, r2 = upper.search(A, 0.2, judge), upper.search(A, 0.2, judge)
    assert r1["k"] == r2["k"] and r1["method"] == r2["method"]
    assert r1["U"].tobytes() == r2["U"].tobytes() and r1["V"].tobytes() == r2["V"].tobytes()
    assert [t["certified_error"] for t in r1["tried"]] == [t["certified_error"] for t in r2["tried"]]


@pytest.mark.parametrize("gives_up, want, found", [
    (1.21, [56, 60, 56, 52, 48, 50, 49], [60, 56, 52, 50]),   # 56 given up near eps from 64: tried again from 60
    (1.8, [56, 60, 58, 57], [60, 58, 57]),                    # given up far from eps: not tried again
    (None, [56, 60, 58, 57], [60, 58, 57]),                   # 56 failed for good: never tried again
])
def test_descend_retries_a_rank_given_up_early_only_from_a_closer_start(monkeypatch, gives_up, want, found):
    """Scripted refinements: rank k1 fits iff k1 >= 50, except 56 from the first start (64)."""
    A = np.zeros((70, 70))
    calls, last = [], {}

    def scripted(A_, C, G, outcome=None, **kw):
        k1 = C.shape[1]
        first = not calls
        calls.append(k1)
        last["ok"] = k1 >= 50 and not (k1 == 56 and first)
        if k1 == 56 and first and gives_up:
            outcome["gave_up"] = gives_up
        return C, G

    monkeypatch.setattr(upper, "refine", scripted)
    monkeypatch.setattr(upper, "truncate", lambda C, G, k: (C[:, :k], G[:k]))
    monkeypatch.setattr(upper, "factor_row_errors", lambda A_, C, G: np.array([0.0 if last["ok"] else 1.0]))
    ranks = [k for k, _, _ in upper.descend(A, 0.5, np.zeros((70, 64)), np.zeros((64, 70)), rescue=False)]
    assert calls == want
    assert ranks == found
