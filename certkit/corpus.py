"""The published certificate corpus (data/certificates) and its sha256 manifest.

    python -m certkit.corpus data/certificates
    python -m certkit.corpus heads data/heads        (the committed head files)

Synthetic heads of several sizes, every kind of format 1.0, both bound directions; arrays
above the inline limit go to .npy sidecars.  Deterministic: a rerun writes identical bytes.
Every certificate written is checked by the kernel before it is kept.
"""
import hashlib
import os
import sys
from fractions import Fraction

import numpy as np

from . import synthetic
from .choices import check
from .numbers import BetaInterval, OverSqrt
from .outputs import write_atomic
from .search import basic, writer


def search_beta(h):
    """The float temperature the corpus searches the attention at: beta's lower end for an interval
    (where the published corpus was searched; the kernel then checks every beta in it), else
    h.beta_float."""
    return float(h.beta.lo) if isinstance(h.beta, BetaInterval) else h.beta_float


def produce(path, kind, h, eps, inline_limit=writer.INLINE_LIMIT):
    """Search (untrusted, on float attention) and write a certificate of `kind` for the Head h."""
    A = h.attention(search_beta(h))
    e = float(eps)
    if kind == "upper-factorization":
        k, U, V = basic.svd_factor(A, e)
        wit, bound = {"U": (U, "float"), "V": (V, "float")}, k
    elif kind == "upper-covering":
        reps, asg = basic.greedy_cover(A, e)
        wit, bound = {"representatives": (reps, "int"), "assignment": (asg, "int")}, len(reps)
    elif kind in ("lower-decoding-margin", "lower-decoding-inverse-norm"):
        msgs, cells = basic.peaked_decoding(A, e)
        wit, bound = {"messages": (msgs, "int"), "cells": (cells, "int")}, len(msgs)
    elif kind == "lower-frobenius-tail":
        wit, bound = {}, basic.frobenius_bound(A, e)
    elif kind == "upper-chain":
        from .search.chain import best_chain
        found = best_chain(h, eps)
        if found is None:
            raise ValueError(f"{path}: no r with tau < eps")
        bound, _, arrays, _ = found
        wit = {k: (v, "float") for k, v in arrays.items()}
    else:
        raise ValueError(kind)
    prov = {"producer": "certkit.corpus", "family": h.provenance["family"], "n": h.n, "N": h.N, "d": h.d}
    if bound == 0:
        raise ValueError(f"{path}: the search found no {kind} certificate")
    return writer.certificate(path, kind, bound, eps, h, wit, provenance=prov, inline_limit=inline_limit)


# (name, family, n, d, beta, eps, kind, extras)
PUBLISHED = [
    ("gauss-n32-factor", "gaussian", 32, 8, Fraction(2), Fraction(1, 4), "upper-factorization", {}),
    ("gauss-n64-factor", "gaussian", 64, 16, Fraction(4), Fraction(3, 20), "upper-factorization", {}),
    ("gauss-n256-d64-factor", "gaussian", 256, 64, OverSqrt(32, 64), Fraction(7, 20), "upper-factorization", {}),
    ("clustered-n48-cover", "clustered", 48, 8, Fraction(3), Fraction(7, 20), "upper-covering", {}),
    ("clustered-n64-weights-factor", "clustered", 64, 8, Fraction(2), Fraction(1, 4), "upper-factorization", {"weights": True}),
    ("gauss-n48-bias-factor", "gaussian", 48, 8, BetaInterval(Fraction(1999999, 1000000), Fraction(2000001, 1000000)), Fraction(1, 4), "upper-factorization", {"bias": True}),
    ("perm-n40-margin", "near-permutation", 40, 8, Fraction(30), Fraction(1, 4), "lower-decoding-margin", {}),
    ("perm-n128-margin", "near-permutation", 128, 16, Fraction(40), Fraction(7, 20), "lower-decoding-margin", {}),
    ("perm-n40-inverse", "near-permutation", 40, 8, Fraction(12), Fraction(1, 4), "lower-decoding-inverse-norm", {}),
    ("perm-n64-frobenius", "near-permutation", 64, 16, Fraction(20), Fraction(3, 20), "lower-frobenius-tail", {}),
    ("keyonly-n32-factor", "key-only", 32, 8, Fraction(5), Fraction(3, 20), "upper-factorization", {}),
    ("keyonly-n64-chain", "key-only", 64, 16, Fraction(8), Fraction(1, 10), "upper-chain", {}),
    ("gauss-n128-d1-chain", "gaussian", 128, 1, Fraction(1, 2), Fraction(1, 2), "upper-chain", {}),
    ("gauss-n64-d2-small-beta-chain", "gaussian", 64, 2, Fraction(1, 64), Fraction(1, 4), "upper-chain", {}),
]


# (name, construction, parameters, eps): parametric lower-lattice certificates (docs/mathematics.md §8.2-8.4)
PUBLISHED_LATTICE = [
    ("ball-65x4-beta640sq-tokens", "ball", dict(d=4, beta=640 ** 2, L=9, K=32, mode="tokens"), Fraction(7, 20)),
    ("sphere-d3-lattice", "sphere", dict(d=3, mu=Fraction(9, 2), R2=10 ** 4), Fraction(7, 20)),
    ("interaction-r2-lattice", "interaction", dict(r=2, rho2=10 ** 4, L=5, K=13), Fraction(7, 20)),
]


def produce_lattice(path, construction, p, eps):
    from .search import lattice
    prov = {"producer": "certkit.corpus", "construction": construction}
    if construction == "ball":
        return lattice.ball_certificate(path, p["d"], p["beta"], p["L"], p["K"], eps, mode=p["mode"], provenance=prov)
    if construction == "sphere":
        return lattice.sphere_certificate(path, p["d"], p["mu"], p["R2"], eps, provenance=prov)
    return lattice.interaction_certificate(path, p["r"], p["rho2"], p["L"], p["K"], eps, provenance=prov)


def head_for(family, n, d, beta, extras, seed=0, name=None):
    """The synthetic Head of a corpus entry: beta exact; extras {"weights": True} adds integer column
    weights with about 20 % dropped columns, {"bias": True} a dyadic logit bias (seeded by seed + 1)."""
    rng = np.random.default_rng(seed + 1)
    h = synthetic.head(family, n, d, beta=beta, seed=seed, name=name)
    w = bias = None
    if extras.get("weights"):
        w = rng.integers(1, 4, h.N).astype(float)
        w[rng.random(len(w)) < 0.2] = 0.0                  # padding: dropped columns
    if extras.get("bias"):
        bias = np.round(rng.standard_normal((n, h.N)) * 2 ** 20) / 2 ** 30
    return h.replace(weights=w, bias=bias)


def write_manifest(outdir):
    files = sorted(f for f in os.listdir(outdir) if f.endswith((".json", ".npy")))
    lines = []
    for name in files:
        with open(os.path.join(outdir, name), "rb") as f:
            lines.append(f"{hashlib.sha256(f.read()).hexdigest()}  {name}\n")
    write_atomic(os.path.join(outdir, "MANIFEST.sha256"), "".join(lines))


def build(outdir, entries=PUBLISHED):
    os.makedirs(outdir, exist_ok=True)
    written = []
    for name, fam, n, d, beta, eps, kind, extras in entries:
        written.append(produce(os.path.join(outdir, name + ".json"), kind, head_for(fam, n, d, beta, extras, name=name),
                               eps))
    if entries is PUBLISHED:
        for name, con, p, eps in PUBLISHED_LATTICE:
            written.append(produce_lattice(os.path.join(outdir, name + ".json"), con, p, eps))
    for path in written:
        v = check(path, "fast")
        if v.status != "VERIFIED":
            raise SystemExit(f"{path}: {v.line()}")
    write_manifest(outdir)
    return written


# (file name, family, n, d, beta): the committed head files (data/heads), inputs of
# `certkit audit --head` / `certkit certify --head` and of benchmarks/.
HEADS = [
    ("gauss-n96-d1-beta1_2.npz", "gaussian", 96, 1, Fraction(1, 2)),
    ("gauss-n32-d8-beta2.safetensors", "gaussian", 32, 8, Fraction(2)),
    ("gauss-n64-d4-beta1.safetensors", "gaussian", 64, 4, Fraction(1)),
    ("gauss-n128-d16-beta4.safetensors", "gaussian", 128, 16, Fraction(4)),
    ("gauss-n128-d64-beta1.safetensors", "gaussian", 128, 64, Fraction(1)),
    ("clustered-n128-d8-beta3.safetensors", "clustered", 128, 8, Fraction(3)),
    ("perm-n128-d16-beta40.safetensors", "near-permutation", 128, 16, Fraction(40)),
    ("keyonly-n64-d8-beta5.safetensors", "key-only", 64, 8, Fraction(5)),
]


def write_heads(outdir):
    """The head files of HEADS: arrays Q, K (float64) and beta (float64, shape (1,), exact)."""
    os.makedirs(outdir, exist_ok=True)
    out = []
    for name, fam, n, d, beta in HEADS:
        h = synthetic.head(fam, n, d, beta=beta, seed=0)
        arrays = {"Q": h.queries, "K": h.keys, "beta": np.array([float(beta)])}
        assert Fraction(float(beta)) == beta
        path = os.path.join(outdir, name)
        if name.endswith(".npz"):
            import zipfile
            with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:   # fixed timestamps: byte-identical
                for k, a in arrays.items():
                    z.writestr(zipfile.ZipInfo(k + ".npy", date_time=(1980, 1, 1, 0, 0, 0)), writer.npy_bytes(a))
        else:
            from safetensors.numpy import save_file
            save_file({k: np.ascontiguousarray(a) for k, a in arrays.items()}, path)
        out.append(path)
    return out


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "heads":
        for p in write_heads(sys.argv[2] if len(sys.argv) > 2 else "data/heads"):
            print(p)
        sys.exit(0)
    out = sys.argv[1] if len(sys.argv) > 1 else "data/certificates"
    for p in build(out):
        print(p)
