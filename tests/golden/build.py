"""Build the golden corpora: valid/, invalid/, malformed/, unsupported/ and expected.json.

    .venv/bin/python tests/golden/build.py

Deterministic: every run rewrites identical bytes (the four folders are emptied first).
Every file written is checked by the kernel here; a case that does not come out as expected
stops the build.  Invalid variants are also checked against an independent, non-rigorous
float64 oracle (`oracle_violations`) so that each one is a genuine falsification of the
certificate, not a rejection caused only by enclosure slack.
"""
import copy
import hashlib
import io
import json
import math
import os
import re
import shutil
import sys
from fractions import Fraction as F

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402

from certkit import corpus  # noqa: E402
from certkit.choices import check  # noqa: E402
from certkit.kernel import KINDS  # noqa: E402
from certkit.kernel.numerics import array, indices, kind_and_claim, read_json  # noqa: E402
from certkit.kernel.numerics import instance as read_instance  # noqa: E402
from certkit.numbers import BetaInterval, OverSqrt, numeral  # noqa: E402
from certkit.search import writer  # noqa: E402
from certkit.search.lower.soft import soft_decoder  # noqa: E402

FOLDERS = ("valid", "invalid", "malformed", "unsupported")

# (name, family, n, d, beta, eps, kind, extras, inline_limit)
VALID = [
    ("gauss-n24-factor", "gaussian", 24, 8, F(2), F(1, 4), "upper-factorization", {}, 4096),
    ("gauss-n32-sqrt-factor", "gaussian", 32, 16, OverSqrt(6, 8), F(1, 4), "upper-factorization", {}, 4096),
    ("gauss-n32-interval-bias-factor", "gaussian", 32, 8,
     BetaInterval(F(1999999, 1000000), F(2000001, 1000000)), F(1, 4), "upper-factorization", {"bias": True}, 4096),
    ("clustered-n40-weights-factor", "clustered", 40, 8, F(2), F(1, 4), "upper-factorization", {"weights": True}, 4096),
    ("gauss-n40-sidecar-factor", "gaussian", 40, 8, F(4), F(3, 20), "upper-factorization", {}, 64),
    ("clustered-n40-cover", "clustered", 40, 8, F(3), F(7, 20), "upper-covering", {}, 4096),
    ("clustered-n32-weights-cover", "clustered", 32, 8, OverSqrt(12, 4), F(7, 20), "upper-covering",
     {"weights": True}, 4096),
    ("perm-n32-margin", "near-permutation", 32, 8, F(30), F(1, 4), "lower-decoding-margin", {}, 4096),
    ("perm-n40-sidecar-margin", "near-permutation", 40, 8, F(30), F(1, 4), "lower-decoding-margin", {}, 16),
    ("perm-n32-inverse", "near-permutation", 32, 8, F(12), F(1, 4), "lower-decoding-inverse-norm", {}, 4096),
    ("perm-n40-frobenius", "near-permutation", 40, 16, F(5), F(1, 4), "lower-frobenius-tail", {}, 4096),
    ("keyonly-n32-chain", "key-only", 32, 8, F(6), F(1, 10), "upper-chain", {}, 4096),
    ("gauss-n48-d1-chain", "gaussian", 48, 1, F(1, 2), F(1, 2), "upper-chain", {}, 4096),
    ("gauss-n48-d1-sidecar-chain", "gaussian", 48, 1, F(1, 4), F(3, 4), "upper-chain", {}, 8),
    ("gauss-n40-d2-weights-bias-chain", "gaussian", 40, 2, F(1, 64), F(1, 4), "upper-chain",
     {"weights": True, "bias": True}, 4096),
]
# written by editing perm-n32-margin: "cells" replaced by an explicit one-hot decoder matrix
DECODER_FROM = ("perm-n32-margin", "perm-n32-margin-decoder")
# written by editing perm-n32-inverse: "cells" replaced by the search's soft decoder for its messages
SOFT_FROM = ("perm-n32-inverse", "perm-n32-inverse-soft-decoder")
# written by removing the hints (format 1.3) of the two kinds that carry them: the format-1.0 document they upgrade,
# whose check takes the oracle's choice (certificate-1.3.md §5)
LEGACY_FROM = [("perm-n32-inverse", "perm-n32-inverse-legacy-1.0"), ("perm-n40-frobenius", "perm-n40-frobenius-legacy-1.0")]

EXPECTED = {}


# ---------------------------------------------------------------- helpers
def rel(path):
    return os.path.relpath(path, HERE).replace(os.sep, "/")


def load(path):
    with open(path) as f:
        return json.load(f)


def dump(doc, path):
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")


def write_bytes(path, raw):
    with open(path, "wb") as f:
        f.write(raw)


def npy(a, allow_pickle=False):
    buf = io.BytesIO()
    np.save(buf, a, allow_pickle=allow_pickle)
    return buf.getvalue()


def sha(raw):
    return hashlib.sha256(raw).hexdigest()


def sidecars_of(doc):
    """All sidecar objects (dicts with a "file") inside doc."""
    out = []

    def walk(x):
        if isinstance(x, dict):
            if "file" in x and "sha256" in x:
                out.append(x)
            else:
                for v in x.values():
                    walk(v)
        elif isinstance(x, list):
            for v in x:
                walk(v)
    walk(doc)
    return out


def numeral_below(x):
    """An exact p/q numeral string strictly below the positive float x (within ~0.1%)."""
    q = 1000
    p = math.floor(F(x) * q * F(999, 1000))
    return f"{p}/{q}", F(p, q)


def numeral_above(x):
    q = 1000
    p = math.ceil(F(x) * q * F(1001, 1000)) + 1
    return f"{p}/{q}", F(p, q)


def expect(path, verdict, contains):
    EXPECTED[rel(path)] = {"verdict": verdict, "contains": contains}


def assert_verdict(path, verdict, contains, routes=("fast",)):
    for r in routes:
        v = check(path, r)
        if v.status != verdict or contains not in v.message:
            raise SystemExit(f"{rel(path)} [{r}]: expected {verdict} containing {contains!r}, got {v.line()}")
    return v


# ---------------------------------------------------------------- independent float oracle
def float_attention(inst):
    L = inst.beta.mid * (inst.Q @ inst.K.T)
    if inst.weights is not None:
        with np.errstate(divide="ignore"):
            L = L + np.log(inst.weights)
    if inst.bias is not None:
        L = L + inst.bias
    L = L - L.max(axis=1, keepdims=True)
    E = np.exp(L)
    return E / E.sum(axis=1, keepdims=True)


def decoder_matrix(w, base, N, M=None):
    """(G as float N x M, exact max_j sum_b |G_jb|)."""
    if "cells" in w:
        c = array(w["cells"], "cells", base, (N,), kind="int")
        M = int(c.max(initial=-1)) + 1 if M is None else M
        G = np.zeros((N, M))
        for j, cj in enumerate(c.tolist()):
            if cj >= 0:
                G[j, cj] = 1.0
        return G, F(1) if (c >= 0).any() else F(0)
    G = array(w["decoder"], "decoder", base, (N, M))
    worst = max(sum(F(x) for x in np.abs(row).tolist()) for row in G)
    return G, worst


def oracle_violations(path):
    """Conditions of the certificate's lemma that fail in (non-rigorous) float64 arithmetic by a
    clear margin (relative 1e-6, or an integer / exact comparison).  [] = the float computation
    supports the claim."""
    doc, _ = read_json(path)
    kind, c = kind_and_claim(doc)
    kind = kind.name
    base = os.path.dirname(os.path.abspath(path))
    inst = read_instance(doc, base)
    A = float_attention(inst)
    w = doc["witness"]
    eps = float(c.eps)
    bad = []
    tol = 1e-6
    if kind == "upper-factorization":
        U = array(w["U"], "U", base, (inst.n, None))
        V = array(w["V"], "V", base, (inst.N, U.shape[1]))
        if U.shape[1] > c.bound:
            bad.append(f"k = {U.shape[1]} > bound {c.bound}")
        err = np.abs(A - U @ V.T).sum(axis=1).max()
        if err > eps * (1 + tol):
            bad.append(f"max row error {err:.6g} > eps {eps:.6g}")
    elif kind == "upper-covering":
        R = indices(w["representatives"], "R", base, inst.n)
        sig = indices(w["assignment"], "sig", base, inst.n, inst.n)
        if len(R) > c.bound:
            bad.append(f"|R| = {len(R)} > bound {c.bound}")
        err = np.abs(A - A[sig]).sum(axis=1).max()
        if err > eps * (1 + tol):
            bad.append(f"max ||A_i - A_sigma(i)|| {err:.6g} > eps {eps:.6g}")
    elif kind.startswith("lower-decoding"):
        msg = indices(w["messages"], "msg", base, inst.n)
        M = len(msg)
        G, colmax = decoder_matrix(w, base, inst.N, M)
        if colmax > 1:
            bad.append(f"decoder has sum_b |G_jb| = {float(colmax)!r} > 1 (exactly)")
        if c.bound > M:
            bad.append(f"bound {c.bound} > {M} messages")
        T = A[msg] @ G
        if kind == "lower-decoding-margin":
            marg = (2 * np.diag(T) - np.abs(T).sum(axis=1)).min()
            if not marg > eps * (1 + tol):
                bad.append(f"min margin {marg:.6g} <= eps {eps:.6g}")
        else:
            s = np.linalg.svd(T, compute_uv=False)
            if s.min() < 1e-12 * max(s.max(), 1e-300):
                bad.append("T singular")
            else:
                inv = np.abs(np.linalg.inv(T)).sum(axis=1).max()
                if not eps * inv < 1 - tol:
                    bad.append(f"eps * ||T^-1||_inf = {eps * inv:.6g} >= 1")
    elif kind == "lower-frobenius-tail":
        rows = indices(w["rows"], "rows", base, inst.n) if "rows" in w else np.arange(inst.n)
        C = A[rows]
        if "cells" in w or "decoder" in w:
            G, colmax = decoder_matrix(w, base, inst.N)
            if colmax > 1:
                bad.append("decoder column sum > 1")
            C = C @ G
        M = c.bound
        if M > min(C.shape):
            bad.append(f"bound {M} > min shape {C.shape}")
        else:
            s = np.linalg.svd(C, compute_uv=False)
            tail = float(np.sum(s[M - 1:] ** 2)) if M >= 1 else float(np.sum(s ** 2))
            if not tail > C.shape[0] * eps * eps * (1 + tol):
                bad.append(f"tail_{M} = {tail:.6g} <= n' eps^2 = {C.shape[0] * eps * eps:.6g}")
    elif kind == "upper-chain":
        bad += chain_oracle(inst, w, base, c)
    return bad


def chain_oracle(inst, w, base, c):
    """Float64 recomputation of the chain certificate (docs/mathematics.md §5, §7) with the mpmath route of
    certkit.symbolic (independent of the kernel): [] when it supports the claim."""
    from certkit.symbolic.arb_eval import chain_mpmath
    d = inst.Q.shape[1]
    g = lambda f, shape: array(w[f], f, base, shape) if f in w else None
    W = g("basis", (d, None))
    W = np.zeros((d, 0)) if W is None else W
    r = W.shape[1]
    E = g("residual_basis", (d, None))
    E = np.zeros((d, 0)) if E is None else E
    cq = g("query_centre", (r,)) if r else np.zeros(0)
    ck = g("key_centre", (r,)) if r else np.zeros(0)
    c1 = g("residual_query_centre", (E.shape[1],)) if E.shape[1] else np.zeros(0)
    c2 = g("complement_query_centre", (d,))
    c2 = np.zeros(d) if c2 is None else c2
    K = inst.K if inst.weights is None else inst.K[inst.weights > 0]
    Q, Fm = inst.Q, np.hstack([W, E])
    M = np.eye(d) - Fm @ Fm.T

    def diam(X):
        return float(np.sqrt(((X[:, None, :] - X[None, :, :]) ** 2).sum(-1)).max()) if X.size else 0.0
    rad = lambda X, ctr: float(np.linalg.norm(X - ctr, axis=1).max()) if X.size else 0.0
    osc = rad(Q @ E, c1) * diam(K @ E) + rad(Q @ M, c2) * diam(K @ M)
    beta = float(inst.beta.hi)
    ob = 0.0
    if inst.bias is not None:
        B = inst.bias if inst.weights is None else inst.bias[:, inst.weights > 0]
        ob = float((B.max(axis=1) - B.min(axis=1)).max())
    res = chain_mpmath(beta=1, eps=float(c.eps), n=inst.n, N=K.shape[0], r=r, rho_Q=rad(Q @ W, cq),
                       rho_K=rad(K @ W, ck) * beta, delta_Q=1, omega_K=beta * osc + ob)
    if c.bound >= min(inst.n, K.shape[0]):
        return []
    if not res["certified"]:
        return [f"tau = {float(res['tau']):.6g} >= eps {float(c.eps)}"]
    if res["R_sym"] > c.bound:
        return [f"float chain R_sym = {res['R_sym']} > bound {c.bound}"]
    return []


# ---------------------------------------------------------------- valid
def build_valid():
    out = os.path.join(HERE, "valid")
    made = {}
    for name, fam, n, d, beta, eps, kind, extras, il in VALID:
        assert n <= 48
        h = corpus.head_for(fam, n, d, beta, extras, name=name)
        if extras.get("weights"):
            assert (h.weights == 0).any(), f"{name}: no dropped column"
        path = corpus.produce(os.path.join(out, name + ".json"), kind, h, eps, inline_limit=il)
        made[name] = path
    src, dst = DECODER_FROM
    doc = load(made[src])
    cells = [int(x) for x in doc["witness"].pop("cells")]
    M = len(doc["witness"]["messages"])
    doc["witness"]["decoder"] = [["0x1.0p+0" if c == b else "0x0.0p+0" for b in range(M)] for c in cells]
    path = os.path.join(out, dst + ".json")
    dump(doc, path)
    made[dst] = path
    src, dst = SOFT_FROM
    doc = load(made[src])
    doc["witness"].pop("cells")
    msg = [int(x) for x in doc["witness"]["messages"]]
    A = float_attention(read_instance(doc, os.path.dirname(made[src])))
    _, G = soft_decoder(A[msg])
    doc["witness"]["decoder"] = [[numeral(float(x)) for x in row] for row in G]
    path = os.path.join(out, dst + ".json")
    dump(doc, path)
    made[dst] = writer.add_hints(path)          # the hint of the new contraction
    for src, dst in LEGACY_FROM:
        doc = load(made[src])
        doc["version"] = "1.0"
        doc["witness"] = {k: v for k, v in doc["witness"].items() if k not in writer.HINTED[doc["kind"]]}
        made[dst] = os.path.join(out, dst + ".json")
        dump(doc, made[dst])
    details = {}
    for name, path in made.items():
        v = assert_verdict(path, "VERIFIED", "r_eps(A)", routes=("fast", "arb"))
        assert oracle_violations(path) == [], name
        details[name] = v.details
        expect(path, "VERIFIED", load(path)["claim"]["relation"] + " " + load(path)["claim"]["bound"])
    # feature coverage
    docs = {k: load(p) for k, p in made.items()}
    kinds = {d["kind"] for d in docs.values()}
    assert kinds == {k.name for k in KINDS.values() if k.shape == "matrix"}, kinds   # lower-lattice: golden/lattice
    betas = [d["instance"]["beta"] for d in docs.values()]
    assert any(isinstance(b, str) for b in betas)
    assert any(isinstance(b, dict) and "over_sqrt" in b for b in betas)
    assert any(isinstance(b, dict) and "interval" in b for b in betas)
    assert any("logit_bias" in d["instance"] for d in docs.values())
    assert any("column_weights" in d["instance"] for d in docs.values())
    assert any(sidecars_of(d) for d in docs.values())
    assert any("decoder" in d["witness"] for d in docs.values())
    return made, details


# ---------------------------------------------------------------- invalid
def mutations(name, doc, det, base):
    """[(mutation, new doc, {sidecar field path: new array}, expected step)]."""
    kind = doc["kind"]
    out = []
    A = float_attention(read_instance(doc, base))

    def variant(tag, step, edit, side=None):
        d = copy.deepcopy(doc)
        edit(d)
        out.append((tag, d, side or {}, step))

    def set_eps(v):
        return lambda d: d["claim"].__setitem__("eps", v)

    def set_bound(v):
        return lambda d: d["claim"].__setitem__("bound", str(v))

    bound = int(doc["claim"]["bound"])
    w = doc["witness"]
    if kind == "upper-factorization":
        U = array(w["U"], "U", base, (None, None))
        V = array(w["V"], "V", base, (None, U.shape[1]))
        actual = np.abs(A - U @ V.T).sum(axis=1).max()
        assert actual <= det["certified_max_row_error"]
        e, _ = numeral_below(actual * 0.9)
        variant("eps-below-error", "upper-factorization/row-error", set_eps(e))
        variant("bound-below-width", "upper-factorization/width", set_bound(U.shape[1] - 1))
        row = int(np.argmax(np.abs(U).sum(axis=1)))
        if isinstance(w["U"], dict):
            U2 = U.copy()
            U2[row] = 0.0
            variant("zero-U-row", "upper-factorization/row-error", lambda d: None, {("witness", "U"): U2})
        else:
            def zero(d):
                d["witness"]["U"][row] = ["0x0.0p+0"] * U.shape[1]
            variant("zero-U-row", "upper-factorization/row-error", zero)
    elif kind == "upper-covering":
        R = [int(x) for x in w["representatives"]]
        sig = [int(x) for x in w["assignment"]]
        actual = np.abs(A - A[sig]).sum(axis=1).max()
        e, _ = numeral_below(actual * 0.9)
        variant("eps-below-distance", "upper-covering/row-distance", set_eps(e))
        variant("bound-below-representatives", "upper-covering/size", set_bound(len(R) - 1))
        # the (row, representative) pair farthest apart
        D = np.abs(A[:, None, :] - A[None, R, :]).sum(axis=2)
        i, t = np.unravel_index(np.argmax(D), D.shape)
        assert D[i, t] > 2 * float(F(doc["claim"]["eps"]))

        def far(d):
            d["witness"]["assignment"][int(i)] = str(R[int(t)])
        variant("reassign-far", "upper-covering/row-distance", far)
    elif kind.startswith("lower-decoding"):
        msg = array(w["messages"], "m", base, (None,), kind="int")
        M = len(msg)
        step = kind
        variant("bound-above-messages", f"{step}/size", set_bound(M + 1))
        if kind == "lower-decoding-margin":
            e, q = numeral_above(det["certified_min_margin"] * 1.05)
            if q >= 1:
                e = "999/1000"
            variant("eps-above-margin", f"{step}/margin", set_eps(e))
            if "cells" in w:
                if isinstance(w["cells"], dict):
                    c = array(w["cells"], "c", base, (None,), kind="int").copy()
                    j0, j1 = (int(np.flatnonzero(c == b)[0]) for b in (0, 1))
                    c[j0], c[j1] = c[j1], c[j0]
                    variant("swap-cells", f"{step}/margin", lambda d: None, {("witness", "cells"): c})
                else:
                    def swap(d):
                        c = d["witness"]["cells"]
                        j0, j1 = c.index("0"), c.index("1")
                        c[j0], c[j1] = c[j1], c[j0]
                    variant("swap-cells", f"{step}/margin", swap)
            else:
                def swapcols(d):
                    for r in d["witness"]["decoder"]:
                        r[0], r[1] = r[1], r[0]
                variant("swap-decoder-columns", f"{step}/margin", swapcols)

                def heavy(d):   # sum_b |G_jb| = 1 + 2^-60: the float sum rounds to 1, the exact check must see it
                    r = d["witness"]["decoder"][0]
                    b = 1 if r[0] == "0x1.0p+0" else 0
                    r[b] = "0x1.0p-60"
                variant("decoder-column-over-1", "decoder", heavy)

                def heavy2(d):
                    r = d["witness"]["decoder"][1]
                    r[:] = ["0x1.0p-1"] * len(r)
                variant("decoder-column-sum-16", "decoder", heavy2)
        else:
            inv = det["certified_inverse_norm"]
            e, q = numeral_above(1.05 / inv)
            assert q < 1
            variant("eps-above-inverse-norm", f"{step}/norm", set_eps(e))

            def dup(d):
                d["witness"]["messages"][1] = d["witness"]["messages"][0]
            variant("duplicate-message", f"{step}/", dup)

            if "cells" in w:
                def nocell(d):   # a message's cell emptied: column of T zero, T singular
                    c = d["witness"]["cells"]
                    c[c.index("0")] = "-1"
                variant("empty-cell", f"{step}/", nocell)
            else:
                def nocolumn(d):   # decoder column 0 zeroed: column of T zero, T singular
                    for r in d["witness"]["decoder"]:
                        r[0] = "0x0.0p+0"
                variant("zero-decoder-column", f"{step}/", nocolumn)
    elif kind == "upper-chain":
        variant("bound-below-chain", "upper-chain/bound", set_bound(bound - 1))
        if "basis" in w:
            def far(d):   # query centre moved by 4 in every coordinate: Gamma grows
                qc = d["witness"]["query_centre"]
                d["witness"]["query_centre"] = [numeral(float.fromhex(x) + 4.0) if "x" in x
                                                else numeral(float(F(x)) + 4.0) for x in qc]
            if not isinstance(w["query_centre"], dict):
                variant("query-centre-far", "upper-chain/bound", far)

            def drop(d):  # r = 0: the whole interaction becomes residual, tau >= eps
                for f in ("basis", "query_centre", "key_centre"):
                    d["witness"].pop(f)
            if bound > 1:
                variant("basis-dropped", "upper-chain/tau", drop)
        else:
            field = next(f for f in ("complement_query_centre", "residual_query_centre") if f in w)

            def shifted(d):  # residual query centre moved: delta ~ 50, tau ~ 2 > eps
                d["witness"][field] = [numeral(50.0)] * len(d["witness"][field])
            variant("residual-centre-far", "upper-chain/tau", shifted)
    elif kind == "lower-frobenius-tail":
        variant("bound-plus-1", "lower-frobenius-tail/tail", set_bound(bound + 1))
        s = np.linalg.svd(A, compute_uv=False)
        tail = float(np.sum(s[bound - 1:] ** 2))
        e, q = numeral_above(math.sqrt(tail / A.shape[0]) * 1.05)
        assert q < 1
        variant("eps-above-tail", "lower-frobenius-tail/tail", set_eps(e))
        variant("bound-above-size", "lower-frobenius-tail/size", set_bound(A.shape[0] + 1))
    return out


def build_invalid(made, details):
    out = os.path.join(HERE, "invalid")
    count = {}
    legacy = {dst for _, dst in LEGACY_FROM}        # their variants would repeat the 1.3 ones
    for name, vpath in made.items():
        if name in legacy:
            continue
        doc = load(vpath)
        vdir = os.path.dirname(vpath)
        for sc in sidecars_of(doc):      # unmodified sidecars shared by the variants of `name`
            shutil.copyfile(os.path.join(vdir, sc["file"]), os.path.join(out, sc["file"]))
        for tag, d, side, step in mutations(name, doc, details[name], vdir):
            stem = f"{name}--{tag}"
            for keys, a in side.items():
                obj = d
                for k in keys:
                    obj = obj[k]
                field = keys[-1]
                raw = npy(np.ascontiguousarray(a))
                obj["file"] = f"{stem}.{field}.npy"
                obj["sha256"] = sha(raw)
                write_bytes(os.path.join(out, obj["file"]), raw)
            path = os.path.join(out, stem + ".json")
            dump(d, path)
            assert_verdict(path, "REJECTED", step)
            bad = oracle_violations(path)
            if not bad:
                raise SystemExit(f"{rel(path)}: REJECTED, but the float oracle finds no violated condition")
            expect(path, "REJECTED", step)
            count[name] = count.get(name, 0) + 1
    for name in set(made) - legacy:
        assert count.get(name, 0) >= 2, name


# ---------------------------------------------------------------- malformed / unsupported
def build_malformed(made):
    out = os.path.join(HERE, "malformed")
    base = load(made["gauss-n24-factor"])                 # inline factorization
    lower = load(made["perm-n32-margin"])                 # inline decoding (cells)
    cover = load(made["clustered-n40-cover"])
    side = load(made["gauss-n40-sidecar-factor"])         # queries, keys, U, V sidecars
    side_dir = os.path.dirname(made["gauss-n40-sidecar-factor"])
    sdoc_margin = load(made["perm-n40-sidecar-margin"])   # int sidecars (messages, cells)
    for sc in sidecars_of(side) + sidecars_of(sdoc_margin):
        shutil.copyfile(os.path.join(side_dir, sc["file"]), os.path.join(out, sc["file"]))

    def case(name, contains, doc=None, text=None, raw=None):
        path = os.path.join(out, name + ".json")
        if raw is not None:
            write_bytes(path, raw)
        elif text is not None:
            with open(path, "w") as f:
                f.write(text)
        else:
            dump(doc, path)
        assert_verdict(path, "MALFORMED", contains)
        expect(path, "MALFORMED", contains)

    def mod(src, fn):
        d = copy.deepcopy(src)
        fn(d)
        return d

    def with_sidecar(name, src, field_keys, array_or_raw, declare=None):
        """src with the sidecar at field_keys replaced by a new file <name>.<field>.npy."""
        d = copy.deepcopy(src)
        o = d
        for k in field_keys:
            o = o[k]
        raw = array_or_raw if isinstance(array_or_raw, bytes) else npy(array_or_raw)
        o["file"] = f"{name}.{field_keys[-1]}.npy"
        o["sha256"] = sha(raw)
        if declare:
            o.update(declare)
        write_bytes(os.path.join(out, o["file"]), raw)
        return d

    btext = json.dumps(base, indent=1) + "\n"
    Qs = array(side["instance"]["queries"], "q", side_dir, (None, None))
    Ks = array(side["instance"]["keys"], "k", side_dir, (None, None))
    cells_s = array(sdoc_margin["witness"]["cells"], "c", side_dir, (None,), kind="int")

    # syntax
    case("not-json", "$: not valid JSON", text="certkit-certificate version 1.0: r_eps(A) <= 8\n")
    case("truncated", "$: not valid JSON", text=btext[: len(btext) // 2])
    case("duplicate-keys", "duplicate key 'eps'",
         text=btext.replace('"claim": {', '"claim": {\n  "eps": "1/4",', 1))
    case("top-level-array", "$: expected a JSON object at top level", doc=[base])
    case("not-utf8", "$: not UTF-8", raw=btext.encode("utf-8").replace(b'"provenance"', b'"prov\xffenance"'))
    case("bare-nan-constant", "non-standard JSON constant NaN",
         text=re.sub(r'"-?0x[0-9a-f.]+p[-+][0-9]+"', "NaN", btext, count=1))
    case("bare-infinity-constant", "non-standard JSON constant Infinity",
         text=btext.replace('"eps": "1/4"', '"eps": Infinity', 1))
    # structure
    case("unknown-top-key", "$.signature: unknown key", mod(base, lambda d: d.__setitem__("signature", "x")))
    case("unknown-claim-key", "$.claim.confidence: unknown key",
         mod(base, lambda d: d["claim"].__setitem__("confidence", "1")))
    case("unknown-instance-key", "$.instance.temperature: unknown key",
         mod(base, lambda d: d["instance"].__setitem__("temperature", "1")))
    case("unknown-witness-key", "$.witness.S: unknown key",
         mod(base, lambda d: d["witness"].__setitem__("S", ["1"])))
    case("unknown-sidecar-key", "$.instance.queries.compression: unknown key",
         mod(side, lambda d: d["instance"]["queries"].__setitem__("compression", "none")))
    case("unknown-beta-key", "$.instance.beta.scale: unknown key",
         mod(base, lambda d: d["instance"].__setitem__("beta", {"interval": ["1", "2"], "scale": "1"})))
    case("missing-witness", "$.witness: required key is missing", mod(base, lambda d: d.pop("witness")))
    case("missing-claim-eps", "$.claim.eps: required key is missing", mod(base, lambda d: d["claim"].pop("eps")))
    case("missing-witness-V", "$.witness.V: required key is missing", mod(base, lambda d: d["witness"].pop("V")))
    case("missing-sidecar-sha256", "$.witness.U.sha256: required key is missing",
         mod(side, lambda d: d["witness"]["U"].pop("sha256")))
    case("wrong-format", "$.format:", mod(base, lambda d: d.__setitem__("format", "certkit-cert")))
    case("version-not-string", "$.version:", mod(base, lambda d: d.__setitem__("version", 1.0)))
    case("assumptions-wrong-kind", "$.assumptions: kind upper-factorization relies on exactly",
         mod(base, lambda d: d.__setitem__("assumptions", ["cover-rank"])))
    case("assumptions-missing-one", "$.assumptions:",
         mod(load(made["perm-n40-frobenius"]), lambda d: d.__setitem__("assumptions", ["frobenius-tail"])))
    case("relation-le-on-lower", "$.claim.relation: kind lower-decoding-margin proves '>='",
         mod(lower, lambda d: d["claim"].__setitem__("relation", "<=")))
    case("quantity-wrong", "$.claim.quantity:", mod(base, lambda d: d["claim"].__setitem__("quantity", "rank")))
    # numerals
    case("eps-json-float", "$.claim.eps: expected an exact numeral string, got a JSON float",
         mod(base, lambda d: d["claim"].__setitem__("eps", 0.25)))
    case("bound-json-int", "$.claim.bound: expected an exact numeral string, got a JSON int",
         mod(base, lambda d: d["claim"].__setitem__("bound", 8)))
    case("inline-json-float", "$.instance.queries[0][0]: expected an exact numeral string, got a JSON float",
         mod(base, lambda d: d["instance"]["queries"][0].__setitem__(0, 0.5)))
    case("eps-nan-string", "$.claim.eps: not an exact numeral", mod(base, lambda d: d["claim"].__setitem__("eps", "NaN")))
    case("inline-infinity-string", "$.instance.keys[2][3]: not an exact numeral",
         mod(base, lambda d: d["instance"]["keys"][2].__setitem__(3, "Infinity")))
    case("eps-exponent-huge", "$.claim.eps: decimal exponent out of range",
         mod(base, lambda d: d["claim"].__setitem__("eps", "1e99999")))
    case("inline-exponent-huge", "$.instance.queries[1][1]: decimal exponent out of range",
         mod(base, lambda d: d["instance"]["queries"][1].__setitem__(1, "1e99999")))
    case("bound-3000-digits", "$.claim.bound: numeral longer than",
         mod(base, lambda d: d["claim"].__setitem__("bound", "9" * 3000)))
    case("inline-hex-overflow", "$.instance.queries[0][1]: ",
         mod(base, lambda d: d["instance"]["queries"][0].__setitem__(1, "0x1p1024")))
    case("eps-zero", "$.claim.eps: eps must lie in (0, 1)", mod(base, lambda d: d["claim"].__setitem__("eps", "0")))
    case("eps-one", "$.claim.eps: eps must lie in (0, 1)", mod(base, lambda d: d["claim"].__setitem__("eps", "1")))
    case("eps-zero-denominator", "$.claim.eps: zero denominator",
         mod(base, lambda d: d["claim"].__setitem__("eps", "1/0")))
    case("bound-fraction", "$.claim.bound: expected an integer",
         mod(base, lambda d: d["claim"].__setitem__("bound", "17/2")))
    case("bound-negative", "$.claim.bound: integer -1 out of range",
         mod(base, lambda d: d["claim"].__setitem__("bound", "-1")))
    case("inline-decimal-not-binary64", "$.instance.keys[0][0]: 1/10 is not exactly representable in binary64",
         mod(base, lambda d: d["instance"]["keys"][0].__setitem__(0, "0.1")))
    case("beta-negative", "$.instance.beta: beta must be >= 0",
         mod(base, lambda d: d["instance"].__setitem__("beta", "-2")))
    case("beta-interval-reversed", "$.instance.beta.interval: lo",
         mod(base, lambda d: d["instance"].__setitem__("beta", {"interval": ["3", "2"]})))
    case("beta-over-sqrt-zero", "$.instance.beta.over_sqrt[1]: D must be positive",
         mod(base, lambda d: d["instance"].__setitem__("beta", {"over_sqrt": ["1", "0"]})))
    # arrays, shapes
    case("keys-wrong-d", "$.instance.keys: shape 24×7 where ?×8 is required",
         mod(base, lambda d: d["instance"].__setitem__("keys", [r[:7] for r in d["instance"]["keys"]])))
    case("U-wrong-rows", "$.witness.U: shape 23×",
         mod(base, lambda d: d["witness"].__setitem__("U", d["witness"]["U"][:23])))
    case("ragged-inline", "$.instance.queries: ragged inline array",
         mod(base, lambda d: d["instance"]["queries"][3].pop()))
    case("empty-queries", "$.instance.queries: shape",
         mod(base, lambda d: d["instance"].__setitem__("queries", [])))
    case("queries-not-array", "$.instance.queries: expected an array",
         mod(base, lambda d: d["instance"].__setitem__("queries", "Q")))
    case("weights-negative", "$.instance.column_weights[3]: negative weight",
         mod(base, lambda d: d["instance"].__setitem__("column_weights",
                                                       ["1"] * 3 + ["-1"] + ["1"] * 20)))
    case("weights-all-zero", "$.instance.column_weights: every column is dropped",
         mod(base, lambda d: d["instance"].__setitem__("column_weights", ["0"] * 24)))
    # indices
    case("message-row-n", "$.witness.messages[5]: index 32 out of range [0, 32)",
         mod(lower, lambda d: d["witness"]["messages"].__setitem__(5, "32")))
    case("assignment-minus-1", "$.witness.assignment[7]: index -1 out of range",
         mod(cover, lambda d: d["witness"]["assignment"].__setitem__(7, "-1")))
    case("assignment-not-representative", "$.witness.assignment[0]: row",
         mod(cover, lambda d: d["witness"]["assignment"].__setitem__(
             0, str(next(r for r in range(40) if str(r) not in d["witness"]["representatives"])))))
    case("cell-equals-M", "$.witness.cells[",
         mod(lower, lambda d: d["witness"]["cells"].__setitem__(
             d["witness"]["cells"].index("0"), str(len(d["witness"]["messages"])))))
    case("index-not-integer", "$.witness.messages[0]: expected an integer index",
         mod(lower, lambda d: d["witness"]["messages"].__setitem__(0, "1/2")))
    case("duplicate-representative", "$.witness.representatives: duplicate representative",
         mod(cover, lambda d: d["witness"]["representatives"].append(d["witness"]["representatives"][0])))
    case("cells-and-decoder", "$.witness: give exactly one of",
         mod(lower, lambda d: d["witness"].__setitem__("decoder", [["0"] * 32] * 32)))
    # upper-chain witnesses
    chain = load(made["gauss-n48-d1-chain"])
    chain_k = load(made["keyonly-n32-chain"])
    case("chain-basis-without-centres", "$.witness: basis, query_centre and key_centre go together",
         mod(chain, lambda d: d["witness"].pop("key_centre")))
    case("chain-centres-without-basis", "$.witness: basis, query_centre and key_centre go together",
         mod(chain, lambda d: d["witness"].pop("basis")))
    case("chain-residual-without-centre", "$.witness: residual_basis and residual_query_centre go together",
         mod(chain, lambda d: d["witness"].__setitem__("residual_basis", [["0x1.0p+0"]])))
    case("chain-basis-wrong-d", "$.witness.basis: shape",
         mod(chain, lambda d: d["witness"].__setitem__("basis", [["0x1.0p+0"], ["0x0.0p+0"]])))
    case("chain-too-many-columns", "> d = 1 columns",
         mod(chain, lambda d: d["witness"].update(residual_basis=[["0x1.0p+0"]],
                                                  residual_query_centre=["0x0.0p+0"])))
    case("chain-complement-centre-wrong-length", "$.witness.complement_query_centre: shape",
         mod(chain_k, lambda d: d["witness"].__setitem__("complement_query_centre", ["0x0.0p+0"])))
    # sidecars
    case("sidecar-parent-path", "$.instance.keys.file: sidecar path must be relative",
         mod(side, lambda d: d["instance"]["keys"].__setitem__("file", "../valid/" + d["instance"]["keys"]["file"])))
    case("sidecar-absolute-path", "$.instance.keys.file: sidecar path must be relative",
         mod(side, lambda d: d["instance"]["keys"].__setitem__("file", "/etc/passwd")))
    case("sidecar-missing", "$.witness.V.file: cannot read sidecar 'malformed-nowhere.V.npy'",
         mod(side, lambda d: d["witness"]["V"].__setitem__("file", "malformed-nowhere.V.npy")))
    case("sidecar-sha256-mismatch", "$.witness.V.sha256: sidecar",
         mod(side, lambda d: d["witness"]["V"].__setitem__("sha256", "0" * 64)))
    case("sidecar-sha256-uppercase", "$.witness.V.sha256: expected 64 lowercase hex digits",
         mod(side, lambda d: d["witness"]["V"].__setitem__("sha256", d["witness"]["V"]["sha256"].upper())))
    case("sidecar-shape-declared-wrong", "$.instance.queries.shape: sidecar has shape",
         mod(side, lambda d: d["instance"]["queries"].__setitem__("shape", [40, 4, 2])))
    Qn = Qs.copy()
    Qn[3, 2] = np.nan
    case("sidecar-nan", "$.instance.queries[3, 2]: non-finite value nan",
         with_sidecar("sidecar-nan", side, ("instance", "queries"), Qn))
    Ki = Ks.copy()
    Ki[5, 1] = -np.inf
    case("sidecar-inf", "$.instance.keys[5, 1]: non-finite value -inf",
         with_sidecar("sidecar-inf", side, ("instance", "keys"), Ki))
    case("sidecar-float64-holds-int64", "$.instance.queries.dtype: sidecar holds int64, certificate says float64",
         with_sidecar("sidecar-float64-holds-int64", side, ("instance", "queries"),
                      np.round(Qs * 4).astype(np.int64)))
    case("sidecar-int32-file", "$.witness.cells.dtype: sidecar holds int32, certificate says int64",
         with_sidecar("sidecar-int32-file", sdoc_margin, ("witness", "cells"), cells_s.astype(np.int32)))
    case("sidecar-int-dtype-for-floats", "$.instance.keys.dtype: dtype 'int32' not allowed here",
         mod(side, lambda d: d["instance"]["keys"].__setitem__("dtype", "int32")))
    case("sidecar-float32-file", "$.instance.keys.dtype: sidecar holds float32",
         with_sidecar("sidecar-float32-file", side, ("instance", "keys"), Ks.astype(np.float32)))
    obj_arr = np.empty(Qs.shape, dtype=object)
    obj_arr[...] = Qs.tolist()
    case("sidecar-object-array-pickle", "$.instance.queries.file: unreadable .npy: needs pickle",
         with_sidecar("sidecar-object-array-pickle", side, ("instance", "queries"), npy(obj_arr, allow_pickle=True)))
    case("sidecar-garbage", "$.witness.U.file: unreadable .npy",
         with_sidecar("sidecar-garbage", side, ("witness", "U"), b"\x93NUMPY garbage, not an array\n"))
    case("sidecar-truncated", "$.witness.U.file: unreadable .npy",
         with_sidecar("sidecar-truncated", side, ("witness", "U"),
                      npy(array(side["witness"]["U"], "U", side_dir, (None, None)))[:200]))
    case("sidecar-wrong-extension", "$.witness.U.file: sidecar must be .npy",
         _ext_case(out, side))
    # regressions (kernel bugs found while building this corpus)
    huge = {"format": "certkit-certificate", "version": "1.0", "kind": "upper-factorization",
            "claim": {"quantity": "r_eps", "relation": "<=", "bound": "0", "eps": "1/2"},
            "instance": {"beta": "1073741824", "queries": [["0x1p500"], ["0x1p500"]],
                         "keys": [["0x1p500"], ["-0x1p500"]]},
            "witness": {"U": [[], []], "V": [[], []]}, "assumptions": ["factor-rank"]}
    case("regression-overflowing-logits-were-verified", "$.instance: query/key entries larger than 2^64", huge)
    case("regression-mixed-type-assumptions", "$.assumptions",
         mod(base, lambda d: d.__setitem__("assumptions", ["factor-rank", 1])))
    case("regression-non-ascii-version-digits", "$.version", mod(base, lambda d: d.__setitem__("version", "1.\u00b2")))
    for name, v in (("minor", "1.01"), ("major", "01.0"), ("both", "01.00")):     # "1.01" was read as 1.1
        case(f"regression-version-leading-zero-{name}", "$.version: expected canonical",
             mod(base, lambda d, v=v: d.__setitem__("version", v)))
    case("regression-nul-in-sidecar-path", "$.instance.keys.file",
         mod(side, lambda d: d["instance"]["keys"].__setitem__("file", "a\u0000b.npy")))
    case("regression-provenance-not-object", "$.provenance", mod(base, lambda d: d.__setitem__("provenance", "x")))


def _ext_case(out, side):
    d = copy.deepcopy(side)
    raw = b"U as text\n"
    d["witness"]["U"]["file"] = "sidecar-wrong-extension.U.txt"
    d["witness"]["U"]["sha256"] = sha(raw)
    write_bytes(os.path.join(out, "sidecar-wrong-extension.U.txt"), raw)
    return d


def prune_sidecars(folder):
    """Remove copied sidecars that no certificate of the folder names (keeps the folder exact)."""
    out = os.path.join(HERE, folder)
    names = set()
    for f in os.listdir(out):
        if f.endswith(".json"):
            with open(os.path.join(out, f), "rb") as fh:
                text = fh.read().decode("utf-8", "replace")
            names.update(n for n in os.listdir(out) if not n.endswith(".json") and f'"{n}"' in text)
    for f in os.listdir(out):
        if not f.endswith(".json") and f not in names:
            os.remove(os.path.join(out, f))


def build_regressions():
    """Largest logits the loader admits (|q|, |k| <= 2^64, beta = 10^12): finite, so REJECTED."""
    out = os.path.join(HERE, "invalid")
    for kind, wit, bound, step in [
            ("upper-factorization", {"U": [[], []], "V": [[], []]}, "0", "upper-factorization/row-error"),
            ("upper-covering", {"representatives": ["0"], "assignment": ["0", "0"]}, "1", "upper-covering/row-distance")]:
        doc = {"format": "certkit-certificate", "version": "1.0", "kind": kind,
               "claim": {"quantity": "r_eps", "relation": "<=", "bound": bound, "eps": "1/2"},
               "instance": {"beta": "1000000000000", "queries": [["0x1p64"], ["-0x1p64"]],
                            "keys": [["0x1p64"], ["-0x1p64"]]},
               "witness": wit, "assumptions": ["factor-rank"] if kind == "upper-factorization" else ["cover-rank"]}
        path = os.path.join(out, f"regression-huge-logits--{kind}.json")
        dump(doc, path)
        assert_verdict(path, "REJECTED", step, routes=("fast", "arb"))
        expect(path, "REJECTED", step)


def build_unsupported(made):
    out = os.path.join(HERE, "unsupported")
    base = load(made["gauss-n24-factor"])
    for name, key, val, contains in [
        ("version-2.0", "version", "2.0", "format version 2.0"),
        ("version-1.4", "version", "1.4", "format version 1.4"),
        ("version-0.9", "version", "0.9", "format version 0.9"),
        ("kind-upper-chain-v9", "kind", "upper-chain-v9", "certificate kind 'upper-chain-v9'"),
    ]:
        d = copy.deepcopy(base)
        d[key] = val
        path = os.path.join(out, name + ".json")
        dump(d, path)
        assert_verdict(path, "UNSUPPORTED", contains)
        expect(path, "UNSUPPORTED", contains)
    # a .safetensors sidecar is well-formed 1.0 (format spec: sidecars) but this checker reads .npy only;
    # the file is a genuine safetensors file holding U, pinned by its sha256, with its tensor name
    from safetensors.numpy import save as safetensors_bytes
    side = load(made["gauss-n40-sidecar-factor"])
    side_dir = os.path.dirname(made["gauss-n40-sidecar-factor"])
    for sc in sidecars_of(side):
        if sc is not side["witness"]["U"]:
            shutil.copyfile(os.path.join(side_dir, sc["file"]), os.path.join(out, sc["file"]))
    U = array(side["witness"]["U"], "U", side_dir, (None, None))
    raw = safetensors_bytes({"U": np.ascontiguousarray(U)})
    d = copy.deepcopy(side)
    d["witness"]["U"] = {"file": "sidecar-safetensors.U.safetensors", "sha256": sha(raw), "dtype": "float64",
                         "shape": list(U.shape), "tensor": "U"}
    write_bytes(os.path.join(out, d["witness"]["U"]["file"]), raw)
    path = os.path.join(out, "sidecar-safetensors.json")
    dump(d, path)
    contains = "$.witness.U.file: safetensors sidecars"
    assert_verdict(path, "UNSUPPORTED", contains)
    expect(path, "UNSUPPORTED", contains)


# ---------------------------------------------------------------- file-system cases
FS_BASE = "gauss-n40-sidecar-factor"          # a valid certificate with four .npy sidecars


def sparse(path, size):
    """A file of size bytes that takes no disk space (a hole)."""
    with open(path, "wb") as f:
        f.truncate(size)


def build_filesystem(dest):
    """The hostile file-system cases, made under dest at test time (FIFOs, symlinks to devices and
    sparse oversize files cannot be committed): {name: (path to check, verdict, message part)}.
    dest/cert/ holds the certificates; dest/outside/ is a folder they must not reach."""
    src = os.path.join(HERE, "valid")
    cert, out = os.path.join(dest, "cert"), os.path.join(dest, "outside")
    os.makedirs(os.path.join(cert, "inner"))
    os.makedirs(out)
    doc = load(os.path.join(src, FS_BASE + ".json"))
    for x in sidecars_of(doc):
        shutil.copy(os.path.join(src, x["file"]), os.path.join(cert, x["file"]))
    V = doc["witness"]["V"]["file"]
    cases = {}

    def case(name, verdict, contains, make=None, file=None):
        """A copy of the certificate whose V sidecar is `file` (made by make(path)), or make alone."""
        d = copy.deepcopy(doc)
        if file is not None:
            d["witness"]["V"]["file"] = file
            make(os.path.join(cert, file))
        path = os.path.join(cert, name + ".json")
        dump(d, path)
        cases[name] = (path, verdict, contains)

    where = "$.witness.V.file: "
    case("plain", "VERIFIED", "r_eps(A) <=")
    shutil.copy(os.path.join(cert, V), os.path.join(cert, "inner", V))
    case("symlink-inside", "VERIFIED", "r_eps(A) <=",
         lambda p: os.symlink(os.path.join("inner", V), p), "V-link.npy")
    shutil.copy(os.path.join(cert, V), os.path.join(out, V))
    case("symlink-outside", "MALFORMED", where + "sidecar 'V-out.npy' resolves outside",
         lambda p: os.symlink(os.path.join(out, V), p), "V-out.npy")
    case("symlinked-folder-outside", "MALFORMED", where + f"sidecar 'linked/{V}' resolves outside",
         lambda p: None, f"linked/{V}")
    os.symlink(out, os.path.join(cert, "linked"))
    case("symlink-system-file", "MALFORMED", "resolves outside",
         lambda p: os.symlink("/etc/passwd", p), "V-passwd.npy")
    case("symlink-dev-zero", "MALFORMED", "resolves outside",
         lambda p: os.symlink("/dev/zero", p), "V-zero.npy")
    case("fifo-sidecar", "MALFORMED", where + "sidecar 'V-fifo.npy' is not a regular file", os.mkfifo, "V-fifo.npy")
    case("folder-sidecar", "MALFORMED", where + "cannot read sidecar 'V-dir.npy': Is a directory", os.mkdir, "V-dir.npy")
    case("oversize-sidecar", "MALFORMED", where + f"sidecar 'V-big.npy' is {(1 << 32) + 1} bytes (limit {1 << 32})",
         lambda p: sparse(p, (1 << 32) + 1), "V-big.npy")
    fifo = os.path.join(cert, "fifo-certificate.json")
    os.mkfifo(fifo)
    cases["fifo-certificate"] = (fifo, "MALFORMED", "$: " + fifo + " is not a regular file")
    cases["folder-certificate"] = (os.path.join(cert, "inner"), "MALFORMED", "inner: Is a directory")
    cases["device-certificate"] = ("/dev/zero", "MALFORMED", "$: /dev/zero is not a regular file")
    big = os.path.join(cert, "oversize-certificate.json")
    sparse(big, (1 << 26) + 1)
    cases["oversize-certificate"] = (big, "MALFORMED", f"is {(1 << 26) + 1} bytes (limit {1 << 26})")
    return cases


def main():
    for f in FOLDERS:
        p = os.path.join(HERE, f)
        if os.path.isdir(p):
            shutil.rmtree(p)
        os.makedirs(p)
    made, details = build_valid()
    build_invalid(made, details)
    build_malformed(made)
    build_regressions()
    build_unsupported(made)
    for f in ("invalid", "malformed"):
        prune_sidecars(f)
    for rel_path, want in EXPECTED.items():      # nothing pruned that a case needs
        assert_verdict(os.path.join(HERE, rel_path), want["verdict"], want["contains"])
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(dict(sorted(EXPECTED.items())), f, indent=1, ensure_ascii=False)
        f.write("\n")
    counts = {}
    for k, v in EXPECTED.items():
        counts[k.split("/")[0]] = counts.get(k.split("/")[0], 0) + 1
    print(f"{len(EXPECTED)} cases: {counts}")


if __name__ == "__main__":
    main()
