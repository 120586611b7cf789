"""The upper-chain rule (proofs/chain-rule.md): the exact logit identity, soundness of every
geometric upper bound, the residual bound ||A_i - At_i||_1 <= tau, and the R = 1 cases."""
from fractions import Fraction

import numpy as np
import sympy as sp
from hypothesis import given, settings, strategies as st

from certkit import synthetic
from certkit.kernel.numerics import chain_enclosures as enclosures
from certkit.search.chain import chain_witness, witness_json


def test_exact_logit_identity():
    """<q,k> = (F^T q)^T (F^T k) + (F^T q)^T (I - F^T F)(F^T k) + <Mq, Mk>, M = I - F F^T, any F."""
    d, t = 3, 2
    F = sp.Matrix(d, t, sp.symbols(f"f0:{d * t}"))
    q = sp.Matrix(sp.symbols("q0:3"))
    k = sp.Matrix(sp.symbols("k0:3"))
    M = sp.eye(d) - F * F.T
    G = F.T * F
    rhs = (F.T * q).T * (F.T * k) + (F.T * q).T * (sp.eye(t) - G) * (F.T * k) + (M * q).T * (M * k)
    assert sp.expand(rhs[0] - (q.T * k)[0]) == 0


def _inst(h, beta):
    return h.replace(beta=beta).instance()


heads = st.builds(lambda fam, n, d, seed, b: (synthetic.head(fam, n, d, seed=seed), b),
                  st.sampled_from(["gaussian", "clustered", "key-only"]), st.integers(4, 20),
                  st.integers(1, 5), st.integers(0, 10 ** 6),
                  st.sampled_from([Fraction(1, 16), Fraction(1, 2), Fraction(2), Fraction(6)]))


@settings(max_examples=40, deadline=None)
@given(heads, st.integers(0, 5), st.booleans())
def test_geometry_bounds_and_tau_are_sound(hb, r, blocks2):
    h, beta = hb
    Q, K = h.queries, h.keys
    d = Q.shape[1]
    r = min(r, d)
    arrays = chain_witness(h, r, 2 if blocks2 else 1)
    inst = _inst(h, beta)
    g = enclosures(inst, Fraction(1, 2), witness_json(arrays), ".")
    W = arrays.get("basis", np.zeros((d, 0)))
    rr = W.shape[1]
    c = arrays.get("query_centre", np.zeros(rr))
    e = arrays.get("key_centre", np.zeros(rr))
    assert g["r"] == rr
    # radii are upper bounds of the float values (relative slack 1e-12)
    if rr:
        assert np.linalg.norm(Q @ W - c, axis=1).max() <= g["rho_Q"] * (1 + 1e-12) + 1e-300
        assert np.linalg.norm(K @ W - e, axis=1).max() <= g["rho_K"] * (1 + 1e-12) + 1e-300
    # tau bounds the actual residual ||A_i - At_i||_1 (Step 2), At built independently here
    E = arrays.get("residual_basis", np.zeros((d, 0)))
    c1 = arrays.get("residual_query_centre", np.zeros(E.shape[1]))
    c2 = arrays.get("complement_query_centre", np.zeros(d))
    Fm = np.hstack([W, E])
    M = np.eye(d) - Fm @ Fm.T
    b = float(beta)
    col = b * ((K @ W) @ c + (K @ E) @ c1 + (K @ M) @ c2)
    L = b * (Q @ W - c) @ (K @ W - e).T + col[None, :]

    def sm(L):
        L = L - L.max(axis=1, keepdims=True)
        P = np.exp(L)
        return P / P.sum(axis=1, keepdims=True)
    A, At = sm(b * Q @ K.T), sm(L)
    actual = np.abs(A - At).sum(axis=1).max()
    tau = float(g["tau"].upper())
    assert actual <= tau + 1e-12, (actual, tau)


@settings(max_examples=30, deadline=None)
@given(heads, st.sampled_from([Fraction(1, 4), Fraction(1, 2), Fraction(3, 4)]))
def test_rank_one_verdicts_hold(hb, eps):
    """When the rule certifies R = 1, a single row is within eps of every row (float check)."""
    h, beta = hb
    Q, K = h.queries, h.keys
    A = h.replace(beta=beta).attention()
    d = Q.shape[1]
    for r in range(0, d + 1):
        arrays = chain_witness(h, r)
        g = enclosures(_inst(h, beta), eps, witness_json(arrays), ".")
        if g["R_sym"] == 1:
            # the proof's single row p = softmax of the column-only logits g_j (Steps 2 and 4)
            W = arrays.get("basis", np.zeros((d, 0)))
            E = arrays.get("residual_basis", np.zeros((d, 0)))
            c = arrays.get("query_centre", np.zeros(W.shape[1]))
            c1 = arrays.get("residual_query_centre", np.zeros(E.shape[1]))
            c2 = arrays.get("complement_query_centre", np.zeros(d))
            Fm = np.hstack([W, E])
            gj = float(beta) * ((K @ W) @ c + (K @ E) @ c1 + (K @ (np.eye(d) - Fm @ Fm.T)) @ c2)
            p = np.exp(gj - gj.max())
            p /= p.sum()
            assert np.abs(A - p[None, :]).sum(axis=1).max() <= float(eps) + 1e-12


def test_non_orthonormal_basis_is_still_sound():
    """F scaled by 1.01 (F^T F != I): the orthogonality term keeps tau an upper bound."""
    h = synthetic.head("gaussian", 16, 3, seed=5)
    beta = Fraction(1, 2)
    arrays = chain_witness(h, 1)
    arrays["basis"] = arrays["basis"] * 1.01
    arrays["residual_basis"] = arrays["residual_basis"] * 0.98
    g = enclosures(_inst(h, beta), Fraction(1, 2), witness_json(arrays), ".")
    assert g["ortho"] > 0
    g0 = enclosures(_inst(h, beta), Fraction(1, 2), witness_json(chain_witness(h, 1)), ".")
    assert g["osc"] > g0["osc"]


def test_key_only_head_is_rank_one_at_any_eps():
    """Identical queries: with c' = q the residual is exactly 0 and r = 0 certifies rank 1."""
    h = synthetic.head("key-only", 24, 6, seed=2)
    arrays = chain_witness(h, 0)
    g = enclosures(_inst(h, Fraction(6)), Fraction(1, 10 ** 6), witness_json(arrays), ".")
    assert g["R_sym"] == 1 and g["decided"] == "r=0"
    assert float(g["tau"].upper()) < 1e-6


@settings(max_examples=10, deadline=None)
@given(family=st.sampled_from(["gaussian", "clustered"]), n=st.integers(6, 24), d=st.integers(1, 5),
       seed=st.integers(0, 9))
def test_best_chain_with_shared_geometry_and_cache_equals_the_plain_search(family, n, d, seed):
    """calibrate's sharing (profile geometry for the witnesses, the kernel geometry per r across
    eps) gives the same witness arrays and the same kernel R_sym as computing everything afresh."""
    from certkit import geometry
    from certkit.search.chain import best_chain
    h = synthetic.head(family, n, d, beta=Fraction(3), seed=seed)
    inst = h.instance()
    geo = geometry.profile_geometry(h.queries, h.keys)
    cache = {}
    for eps in (0.5, 0.3, 0.5):
        plain = best_chain(h, eps)
        fast = best_chain(h, eps, geo=geo, cache=cache, inst=inst)
        assert (plain is None) == (fast is None)
        if plain is not None:
            assert plain[:2] == fast[:2] and plain[2].keys() == fast[2].keys()
            assert all(np.array_equal(plain[2][k], fast[2][k]) for k in plain[2])
