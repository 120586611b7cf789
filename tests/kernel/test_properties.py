"""Property tests that state the mathematics the kernel relies on (docs/mathematics.md §1.2, §2, §8, docs/numerics.md §3-4).

References are Arb at >= 200 bits or mpmath at 60 digits (for the non-rigorous lemmas), never the
code under test."""
import math

import flint
import mpmath
import numpy as np
import pytest
from hypothesis import given, assume, strategies as st
from hypothesis.extra.numpy import arrays

from certkit.choices import LAPACK
from certkit.kernel.numerics import EXP_ABS, EXP_REL, arb_of, enclose_all, exp_nonpos, make_instance, singular_value_bounds

finite = st.floats(-10, 10, allow_nan=False, allow_infinity=False)


def mat(rows, cols, elems=finite):
    return arrays(np.float64, (rows, cols), elements=elems)


# ---------------------------------------------------------------- Lemma 1.1
@given(st.integers(1, 5), st.integers(1, 6), st.data(), st.sampled_from([1, 2, np.inf]))
def test_operator_identity_row_l1_is_worst_output_error(n, N, data, p):
    """max_i ||D_i||_1 = sup over v_j in E with ||v_j|| <= 1 of max_i ||sum_j D_ij v_j||, in the
    l1, l2 and l-inf norms of R^3; attained at v_j = sign(D_{i*j}) e."""
    D = data.draw(mat(n, N))
    lhs = np.abs(D).sum(axis=1).max()
    V = data.draw(mat(N, 3, st.floats(-1, 1)))
    V /= np.maximum(1.0, np.linalg.norm(V, ord=p, axis=1, keepdims=True))
    out = np.linalg.norm(D @ V, ord=p, axis=1).max()
    assert out <= lhs * (1 + 1e-12) + 1e-12
    i = int(np.argmax(np.abs(D).sum(axis=1)))
    e = np.array([1.0, 0.0, 0.0])
    Vs = np.sign(D[i])[:, None] * e[None, :]
    assert math.isclose(np.linalg.norm(D[i] @ Vs, ord=p), lhs, rel_tol=1e-12, abs_tol=1e-12)


# ---------------------------------------------------------------- Pinsker, Cohen–Fausti
def _mp_softmax(x):
    m = max(x)
    e = [mpmath.exp(v - m) for v in x]
    Z = mpmath.fsum(e)
    return [v / Z for v in e]


probs = st.lists(st.floats(0.01, 1.0), min_size=2, max_size=8)


@given(probs, st.data())
def test_pinsker(p, data):
    mpmath.mp.dps = 50
    q = data.draw(st.lists(st.floats(0.01, 1.0), min_size=len(p), max_size=len(p)))
    P = [mpmath.mpf(v) / mpmath.fsum(p) for v in p]
    Q = [mpmath.mpf(v) / mpmath.fsum(q) for v in q]
    kl = mpmath.fsum(a * mpmath.log(a / b) for a, b in zip(P, Q))
    assert mpmath.fsum(abs(a - b) for a, b in zip(P, Q)) <= mpmath.sqrt(2 * kl) + mpmath.mpf(10) ** -40


@given(st.lists(st.floats(-50, 50), min_size=2, max_size=8), st.data())
def test_cohen_fausti(x, data):
    """||softmax(x + h) - softmax(x)||_1 <= 2 tanh(osc(h)/4)  (docs/mathematics.md Cor. 2.2)."""
    mpmath.mp.dps = 60
    h = data.draw(st.lists(st.floats(-20, 20), min_size=len(x), max_size=len(x)))
    a, b = _mp_softmax([mpmath.mpf(v) + mpmath.mpf(w) for v, w in zip(x, h)]), _mp_softmax([mpmath.mpf(v) for v in x])
    lhs = mpmath.fsum(abs(s - t) for s, t in zip(a, b))
    rhs = 2 * mpmath.tanh((mpmath.mpf(max(h)) - mpmath.mpf(min(h))) / 4)
    assert lhs <= rhs * (1 + mpmath.mpf(10) ** -40) + mpmath.mpf(10) ** -50


@pytest.mark.parametrize("H", [0.01, 1.0, 7.5, 40.0])
def test_cohen_fausti_sharp_pair(H):
    """Equality at J = {1,2}, x = (0, H/2), h = (H, 0)."""
    mpmath.mp.dps = 60
    H = mpmath.mpf(H)
    a, b = _mp_softmax([H, H / 2]), _mp_softmax([mpmath.mpf(0), H / 2])
    lhs = mpmath.fsum(abs(s - t) for s, t in zip(a, b))
    assert abs(lhs - 2 * mpmath.tanh(H / 4)) < mpmath.mpf(10) ** -50


# ---------------------------------------------------------------- the kernel's exp
SPECIAL = [0.0, -0.0, -2.0 ** -40, -2.0 ** -1074, -2.0 ** -1022, -5e-324, -1e-300, -0.5 * math.log(2),
           -math.log(2), -708.3964185322641, -709.0, -744.44, -745.1332191019411, -745.5, -746.0, -800.0, -1e300]


def _exp_contains(y):
    E = exp_nonpos(np.array(y, dtype=np.float64))
    with flint.ctx.workprec(220):
        for yi, ei in zip(np.atleast_1d(y).tolist(), np.atleast_1d(E).tolist()):
            true = flint.arb(yi).exp()
            bound = flint.arb(EXP_REL) * true + flint.arb(EXP_ABS)
            assert abs(flint.arb(ei) - true) < bound, (yi, ei)


def test_exp_special_points():
    _exp_contains(SPECIAL)


@given(arrays(np.float64, 64, elements=st.floats(-745.5, 0.0)))
def test_exp_inclusion_principle(y):
    _exp_contains(y)


@given(arrays(np.float64, 32, elements=st.floats(-1e-300, 0.0) | st.floats(-2.0 ** -30, 0.0) | st.floats(-760, -700)))
def test_exp_inclusion_tiny_and_underflow(y):
    _exp_contains(y)


_STEP = math.log(2) / 1024          # the reduction step ln2/2^S of proofs/ieee-exp.md (S = 10), approximately


def _near_step(m, half, ulps):
    """A few ulps around -(m + half) * step: where k = rint(y 2^S/ln2), the table index and the exponent change."""
    y = -(m + half) * _STEP
    return -abs(y + ulps * math.ulp(y))


EXP_ARGS = (st.builds(_near_step, st.integers(0, 1077 * 1024), st.sampled_from([0.0, 0.5]), st.integers(-3, 3))
            | st.floats(-745.2, -708.0) | st.floats(-760.0, -740.0) | st.floats(-2.0 ** -1000, 0.0)
            | st.sampled_from([0.0, -0.0, -5e-324, -2.0 ** -1022, -708.3964185322641, -745.1332191019411,
                               -746.0, -746.0000000000001, -1e6, -1e308])
            | st.floats(max_value=0.0, allow_nan=False, allow_infinity=False))


@given(st.lists(EXP_ARGS, min_size=1, max_size=80))
def test_exp_error_bound_property(ys):
    """|E(y) - e^y| <= EXP_REL e^y + EXP_ABS against Arb e^y, for y <= 0 at the reduction's rounding
    boundaries, with subnormal results, near the clamp, at 0 and -0.0, tiny and huge |y|; evaluated in
    place on a 2-D array (as the kernel does) it gives the same floats; E(-inf) = 0."""
    _exp_contains(ys)
    Y = np.array(ys + ys).reshape(2, -1)
    assert np.array_equal(exp_nonpos(Y, out=Y), exp_nonpos(np.array(ys + ys)).reshape(2, -1))
    assert exp_nonpos(np.array([-np.inf]))[0] == 0.0


def test_exp_enclosure_is_not_mpmath_iv():
    """docs/numerics.md §1: mpmath's iv.exp(2^-40) misses e^(2^-40); ours must contain e^(-2^-40) and
    e^(-x) around it."""
    _exp_contains([-2.0 ** -40, -(2.0 ** -40) * (1 + 2.0 ** -30)])


# ---------------------------------------------------------------- softmax enclosures
@st.composite
def heads(draw):
    n, N, d = draw(st.integers(1, 6)), draw(st.integers(1, 7)), draw(st.integers(1, 4))
    Q = draw(mat(n, d, st.floats(-3, 3)))
    K = draw(mat(N, d, st.floats(-3, 3)))
    beta = draw(st.sampled_from(["0", "1/3", "7", "300", "10000", {"over_sqrt": ["1", "32"]},
                                 {"interval": ["299/100", "301/100"]}]))
    w = draw(st.none() | arrays(np.float64, N, elements=st.sampled_from([0.0, 0.5, 1.0, 3.0, 1e-30, 1e30])))
    if w is not None and not np.any(w > 0):
        w[0] = 2.0
    bias = draw(st.none() | mat(n, N, st.floats(-40, 40)))
    return Q, K, beta, w, bias


@given(heads())
def test_fast_route_encloses_attention(h):
    """||A_i - m_i||_1 <= rho_i with A from Arb at 200 bits for every beta in the stated set,
    with column weights (zeros = dropped), logit bias, logits up to ~1e5 apart."""
    Q, K, b, w, bias = h
    inst = make_instance(b, Q, K, w, bias)
    B = inst.beta
    _, m, rho = enclose_all(inst, None, "fast")
    with flint.ctx.workprec(200):
        S = flint.arb_mat(Q.tolist()) * flint.arb_mat(K.T.tolist())
        kept = range(K.shape[0]) if w is None else [j for j in range(K.shape[0]) if w[j] > 0]
        for bpt in {B.lo, B.hi}:                      # both ends of the set
            for i in range(Q.shape[0]):
                L = {j: arb_of(bpt) * S[i, j] + (0 if w is None else flint.arb(float(w[j])).log())
                     + (0 if bias is None else flint.arb(float(bias[i, j]))) for j in kept}
                c = next(iter(L.values()))
                e = {j: (x - c).exp() for j, x in L.items()}
                Z = sum(e.values(), flint.arb(0))
                tot = flint.arb(0)
                for j in range(K.shape[0]):
                    a = e[j] / Z if j in e else flint.arb(0)
                    tot += abs(a - flint.arb(float(m[i, j])))
                assert tot < flint.arb(float(rho[i])), (i, tot, rho[i])


# ---------------------------------------------------------------- verified singular values
@given(st.integers(1, 6), st.integers(1, 6), st.data(), st.sampled_from([0.0, 1e-9, 1e-3, 0.3]))
def test_verified_singular_values_contain_arb_eigenvalues(m, n, data, noise):
    """From LAPACK's SVD or any perturbation of it (the SVD only chooses): the bounds contain the truth,
    or the SVD is refused (ArithmeticError), never a wrong enclosure."""
    X = data.draw(mat(m, n, st.floats(-5, 5)))
    U, s, Vt = LAPACK.svd(X)
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    U, Vt = U + noise * rng.standard_normal(U.shape), Vt + noise * rng.standard_normal(Vt.shape)
    s = np.sort(np.abs(s + noise * rng.standard_normal(s.shape)))[::-1]
    try:
        lo, hi = singular_value_bounds(X, U, s, Vt)
    except ArithmeticError:
        if noise == 0:          # LAPACK's own SVD of these small matrices is always good enough
            raise
        return
    A = flint.arb_mat(X.tolist())
    gram = A.transpose() * A if m >= n else A * A.transpose()
    with flint.ctx.workprec(256):
        try:
            ev = [e.real for e in flint.acb_mat(gram).eig()]
        except (ValueError, ZeroDivisionError):
            assume(False)
    # the true sigma_i^2 lies in an Arb ball and (claimed) in [lo_i^2, hi_i^2]: they must meet
    ev.sort(key=lambda e: -float(e.mid()))
    for i, e in enumerate(ev[:len(lo)]):
        assert not (e > flint.arb(hi[i]) ** 2), (i, e, hi[i])
        assert not (e < flint.arb(lo[i]) ** 2), (i, e, lo[i])


# ---------------------------------------------------------------- Lemma 8.1 / 8.2 (mathematics)
@given(st.integers(2, 6), st.data())
def test_margin_lemma_perturbations_keep_full_rank(M, data):
    """If margin_a(T) > eps for all a, every E with row-l1 <= eps leaves T + E nonsingular."""
    T = np.eye(M) * 0.9 + data.draw(mat(M, M, st.floats(0, 0.1 / M)))
    margin = 2 * np.diag(T) - np.abs(T).sum(axis=1)
    eps = 0.999 * margin.min()
    E = data.draw(mat(M, M, st.floats(-1, 1)))
    E *= eps / np.maximum(np.abs(E).sum(axis=1, keepdims=True), 1e-300)
    assert np.linalg.matrix_rank(T + E) == M


def test_varah_bound_margin_implies_inverse_norm():
    rng = np.random.default_rng(1)
    for _ in range(200):
        M = rng.integers(2, 8)
        T = np.eye(M) + rng.uniform(-0.4 / M, 0.4 / M, (M, M))
        margin = (2 * np.abs(np.diag(T)) - np.abs(T).sum(axis=1)).min()
        assert np.abs(np.linalg.inv(T)).sum(axis=1).max() <= 1 / margin * (1 + 1e-12)
