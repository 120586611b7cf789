"""Build the row-mask golden corpus (format 1.1, proofs/row-masks.md): valid certificates for
causal and sliding-window heads, and one-mutation variants with the verdict each must get.

    .venv/bin/python tests/golden/masks/build.py

Deterministic (the folder's *.json are rewritten); every file is checked here and a case that
does not come out as expected stops the build.  Each REJECTED variant is also checked against a
float64 oracle: its claim is false by a clear margin, not rejected for enclosure slack alone."""
import copy
import json
import math
import os
import sys
from fractions import Fraction as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(HERE))))

import numpy as np  # noqa: E402

from certkit import synthetic  # noqa: E402
from certkit.head import RowMask  # noqa: E402
from certkit.choices import check  # noqa: E402
from certkit.search import causal, writer  # noqa: E402

EXPECTED = {}


def svd_factor(A, eps):
    """The smallest-rank truncated SVD with float row-l1 error <= eps / 2."""
    U, s, Vt = np.linalg.svd(A)
    for k in range(1, len(s) + 1):
        B = (U[:, :k] * s[:k]) @ Vt[:k]
        if np.abs(A - B).sum(axis=1).max() <= eps / 2:
            return U[:, :k] * s[:k], Vt[:k].T
    raise AssertionError("no factor")


def float_error(head, U, V):
    return float(np.abs(head.attention() - U @ V.T).sum(axis=1).max())


def write(name, head, kind, bound, eps, witness, verdict, contains):
    path = os.path.join(HERE, f"{name}.json")
    writer.certificate(path, kind, bound, eps, head, witness, {"producer": "tests/golden/masks/build.py"},
                       inline_limit=1 << 16)
    return expect(name, verdict, contains)


def mutate(src, name, edit, verdict, contains):
    doc = json.load(open(os.path.join(HERE, f"{src}.json")))
    doc = copy.deepcopy(doc)
    edit(doc)
    with open(os.path.join(HERE, f"{name}.json"), "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    return expect(name, verdict, contains)


def expect(name, verdict, contains):
    v = check(os.path.join(HERE, f"{name}.json"))
    assert v.status == verdict and contains in v.message, (name, v.line())
    EXPECTED[f"{name}.json"] = {"verdict": verdict, "contains": contains}
    return v


def main():
    for f in os.listdir(HERE):
        if f.endswith(".json"):
            os.remove(os.path.join(HERE, f))
    eps = F(1, 4)
    # prefix averaging: the covering upper bound and the decoding lower bound of §8.5
    h = causal.prefix_head(48)
    reps, assign = causal.covering(48, eps)
    assert len(reps) <= math.ceil(math.log(48) / -math.log(1 - float(eps) / 2)) + 1
    write("prefix-n48-cover", h, "upper-covering", len(reps), eps,
          {"representatives": (reps, "int"), "assignment": (assign, "int")}, "VERIFIED", f"<= {len(reps)}")
    msgs = causal.messages(48, eps, "margin")
    write("prefix-n48-margin", h, "lower-decoding-margin", len(msgs), eps,
          {"messages": (msgs, "int"), "cells": (causal.cells(msgs, 48), "int")}, "VERIFIED", f">= {len(msgs)}")
    # the same messages without the mask: row i_a then sees every key (beta = 0: uniform), margins vanish
    mutate("prefix-n48-margin", "prefix-n48-margin-mask-dropped", lambda d: d["instance"].pop("row_mask"),
           "REJECTED", "lower-decoding-margin/margin")

    # causal and sliding-window gaussian heads: truncated-SVD factorisations of the masked matrix
    g = synthetic.head("gaussian", 32, 4, beta=F(2), seed=7)
    causal_head = g.replace(mask=RowMask(0), name="gauss-n32-causal")
    U, V = svd_factor(causal_head.attention(), float(eps))
    k = U.shape[1]
    wit = {"U": (U, "float"), "V": (V, "float")}
    write("gauss-n32-causal-factor", causal_head, "upper-factorization", k, eps, wit, "VERIFIED", f"<= {k}")
    for name, edit, other in [
            ("mask-dropped", lambda d: d["instance"].pop("row_mask"), g),
            ("offset-shifted", lambda d: d["instance"]["row_mask"].__setitem__("offset", "1"), causal_head.replace(mask=RowMask(1)))]:
        assert float_error(other, U, V) > float(eps) + 0.05, name       # the mutated claim is false
        mutate("gauss-n32-causal-factor", f"gauss-n32-causal-factor-{name}", edit, "REJECTED",
               "upper-factorization/row-error")
    window = g.replace(mask=RowMask(0, 4), name="gauss-n32-window4")
    U, V = svd_factor(window.attention(), float(eps))
    k = U.shape[1]
    write("gauss-n32-window4-factor", window, "upper-factorization", k, eps, {"U": (U, "float"), "V": (V, "float")},
          "VERIFIED", f"<= {k}")
    assert float_error(window.replace(mask=RowMask(0, 5)), U, V) > float(eps) + 0.05
    mutate("gauss-n32-window4-factor", "gauss-n32-window4-factor-window-widened",
           lambda d: d["instance"]["row_mask"].__setitem__("window", "5"), "REJECTED", "upper-factorization/row-error")
    # padding (zero column weights) together with a causal mask; the first key is kept so row 0 sees one
    w = np.ones(32)
    w[[3, 10, 11, 20]] = 0.0
    padded = g.replace(weights=w, mask=RowMask(0), name="gauss-n32-causal-padded")
    U, V = svd_factor(padded.attention(), float(eps))
    write("gauss-n32-causal-padded-factor", padded, "upper-factorization", U.shape[1], eps,
          {"U": (U, "float"), "V": (V, "float")}, "VERIFIED", f"<= {U.shape[1]}")
    # the chain refuses a masked instance
    write("gauss-n32-causal-chain", causal_head, "upper-chain", 32, eps, {}, "UNSUPPORTED",
          "upper-chain on a row-masked instance")
    # malformed masks
    src = "gauss-n32-causal-factor"
    mutate(src, "row-mask-in-version-1.0", lambda d: d.__setitem__("version", "1.0"), "MALFORMED",
           "$.instance.row_mask: unknown key")
    mutate(src, "row-mask-empty-row", lambda d: d["instance"]["row_mask"].__setitem__("offset", "-1"), "MALFORMED",
           "$.instance.row_mask: query 0 sees no key")
    mutate(src, "row-mask-window-0", lambda d: d["instance"]["row_mask"].__setitem__("window", "0"), "MALFORMED",
           "$.instance.row_mask.window")
    mutate(src, "row-mask-unknown-key", lambda d: d["instance"]["row_mask"].__setitem__("kind", "causal"),
           "MALFORMED", "$.instance.row_mask.kind: unknown key")
    mutate(src, "row-mask-float-offset", lambda d: d["instance"]["row_mask"].__setitem__("offset", "1/2"),
           "MALFORMED", "$.instance.row_mask.offset")
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(EXPECTED, f, indent=1, sort_keys=True)
        f.write("\n")
    print(f"{len(EXPECTED)} cases written to {HERE}")


if __name__ == "__main__":
    main()
