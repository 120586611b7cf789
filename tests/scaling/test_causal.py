"""Causal attention at beta = 0 (prefix averaging, docs/mathematics.md §8.5): the constructions
are kernel-VERIFIED for any n and eps, the counts follow the stated laws, and `certkit scale
--families causal` writes the law with its certificates."""
import csv
import math
import os
import subprocess
import sys
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from certkit.choices import check
from certkit.search import causal, writer

EPS = st.sampled_from([Fraction(1, 10), Fraction(1, 4), Fraction(7, 20), Fraction(1, 2), Fraction(9, 10)])


def test_rows_are_prefix_averages():
    A = causal.prefix_head(5).attention()
    want = np.tril(np.ones((5, 5))) / np.arange(1, 6)[:, None]
    assert np.array_equal(A == 0, want == 0) and np.allclose(A, want, rtol=0, atol=1e-15)


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 300), eps=EPS)
def test_covering_is_verified_and_within_the_stated_count(tmp_path_factory, n, eps):
    reps, assign = causal.covering(n, eps)
    A = causal.prefix_head(n).attention()
    assert np.abs(A - A[assign]).sum(axis=1).max() <= eps               # float check of the cover itself
    assert len(reps) <= math.ceil(math.log(n) / -math.log(1 - float(eps) / 2)) + 1
    p = str(tmp_path_factory.mktemp("c") / "cover.json")
    v = writer.write_checked(p, "upper-covering", len(reps), eps, causal.prefix_head(n),
                             {"representatives": (reps, "int"), "assignment": (assign, "int")})
    assert v.status == "VERIFIED", v.line()


@settings(max_examples=25, deadline=None)
@given(n=st.integers(2, 300), eps=EPS, test=st.sampled_from(["margin", "inverse"]))
def test_decoding_messages_are_verified(tmp_path_factory, n, eps, test):
    msgs = causal.messages(n, eps, test)
    T = causal.contraction(msgs)
    A = causal.prefix_head(n).attention()
    c = causal.cells(msgs, n)
    T_float = np.stack([[A[i, c == b].sum() for b in range(len(msgs))] for i in msgs])
    assert np.allclose(T, T_float, atol=1e-12)                            # the closed form of the contraction
    kind = "lower-decoding-margin" if test == "margin" else "lower-decoding-inverse-norm"
    p = str(tmp_path_factory.mktemp("d") / "lower.json")
    v = writer.write_checked(p, kind, len(msgs), eps, causal.prefix_head(n),
                             {"messages": (msgs, "int"), "cells": (c, "int")})
    assert v.status == "VERIFIED", v.line()
    if test == "margin" and n >= 16:       # geometric messages: about ln n / ln(2/(1 - eps)) of them
        assert len(msgs) >= math.floor(math.log((n + 1) / 2) / math.log(2 / (1 - float(eps)) + 0.05))


def test_scale_causal_family(tmp_path):
    r = subprocess.run([sys.executable, "-m", "certkit", "scale", "--families", "causal", "--causal-lengths",
                        "16,32,64", "--no-crosscheck", "--out", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = list(csv.DictReader(open(tmp_path / "causal.csv")))
    assert [int(x["n"]) for x in rows] == [16, 32, 64]
    for x in rows:
        assert 1 <= int(x["lower"]) <= int(x["upper"]) <= int(x["cover"])
        for key in ("lower_certificate", "upper_certificate"):
            assert check(str(tmp_path / x[key])).status == "VERIFIED"
    assert (tmp_path / "causal.png").stat().st_size > 10000
    assert "Θ(log n)" in (tmp_path / "causal.md").read_text()


@pytest.mark.parametrize("text", ["64", "1,2,x", "1,2,3", "64,128,99999"])
def test_bad_causal_lengths_exit_64(text, tmp_path):
    r = subprocess.run([sys.executable, "-m", "certkit", "scale", "--families", "causal", "--causal-lengths", text,
                        "--out", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 64 and "--causal-lengths" in r.stderr and "Traceback" not in r.stderr


# ---------------------------------------------------------------- the staircase lower search (any causal head)

def causal_head(n, d, beta, seed, window=None):
    from certkit.head import Head, RowMask
    rng = np.random.default_rng(seed)
    return Head(rng.standard_normal((n, d)), rng.standard_normal((n, d)), beta, name=f"causal-{seed}",
                mask=RowMask(0, window))


@settings(max_examples=30, deadline=None)
@given(n=st.integers(2, 120), d=st.integers(1, 8), beta=st.sampled_from([0, 1, 3, 10]), seed=st.integers(0, 10 ** 6),
       window=st.sampled_from([None, 1, 3, 16]), eps=EPS, theta=st.sampled_from([0.0, 0.1, 0.2]))
def test_staircase_contraction_is_lower_triangular_with_a_small_inverse(tmp_path_factory, n, d, beta, seed, window,
                                                                         eps, theta):
    """Lemma 8.2 on the staircase: cells C_a inside (e_{i_(a-1)}, e_{i_a}], so row i_a has no mass on later
    cells (T lower triangular) and eps ||T^-1||_inf < 1, computed here from scratch in exact rationals of
    the float matrix; the kernel VERIFIES r_eps >= M."""
    from certkit.search.lower.decoding import contraction
    from certkit.search.lower.staircase import staircase
    head = causal_head(n, d, beta, seed, window)
    A = head.attention()
    msgs, cells = staircase(A, float(eps), theta)
    M = len(msgs)
    assert M >= 1 and np.all(np.diff(msgs) > 0)
    assert len(np.unique(cells[cells >= 0])) == M
    T = contraction(A, msgs, cells)
    assert np.array_equal(np.triu(T, 1), np.zeros((M, M)))
    Tq = [[Fraction(x) for x in row] for row in T.tolist()]
    X = [[Fraction(0)] * M for _ in range(M)]                 # exact inverse of the triangular T
    for a in range(M):
        X[a][a] = 1 / Tq[a][a]
        for b in range(a):
            X[a][b] = -sum(Tq[a][c] * X[c][b] for c in range(b, a)) / Tq[a][a]
    assert eps * max(sum(abs(x) for x in row) for row in X) < 1
    if M > 1:
        p = str(tmp_path_factory.mktemp("s") / "stair.json")
        v = writer.write_checked(p, "lower-decoding-inverse-norm", M, eps, head,
                                 {"messages": (msgs, "int"), "cells": (cells, "int")})
        assert v.status == "VERIFIED", v.line()


def test_staircase_on_prefix_averaging_finds_the_constructed_messages():
    """At beta = 0 the staircase with whole intervals is the prefix-averaging construction's greedy."""
    from certkit.search.lower.staircase import staircase
    for n, eps in ((64, Fraction(1, 4)), (300, Fraction(1, 10)), (500, Fraction(1, 2))):
        msgs, cells = staircase(causal.prefix_head(n).attention(), float(eps), 0.0)
        want = causal.messages(n, eps, "inverse")
        assert abs(len(msgs) - len(want)) <= 1 and len(msgs) >= 2


def test_staircase_needs_prefixes_that_never_shrink():
    from certkit.search.lower.staircase import staircase
    A = causal.prefix_head(6).attention()[::-1].copy()         # row 0 sees all, row 5 only column 0
    assert staircase(A, 0.25) is None
    full = np.full((5, 5), 0.2)                                 # an encoder: one cell holds everything
    msgs, cells = staircase(full, 0.25)
    assert len(msgs) == 1
