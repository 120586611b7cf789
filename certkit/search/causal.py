"""Prefix averaging, the causal head at beta = 0 (docs/mathematics.md §8.5): row i of A is uniform on
{0..i}, so ||A_i - A_i'||_1 = 2 (i' - i)/(i' + 1) for i < i'.  Untrusted constructions of explicit
certificates for r_eps(A) (the kernel decides each):

* covering (upper): representatives r_0 = 0 < r_1 < ... with (r_{k-1} + 2)/(r_k + 1) >= 1 - eps/2;
  row i -> the smallest representative >= i; r_eps <= #representatives ~ ln n / -ln(1 - eps/2);
* decoding (lower): messages i_0 = 0 < i_1 < ... with cells C_0 = {0}, C_a = (i_{a-1}, i_a]: the
  contraction T[a, b] = A_{i_a}(C_b) is lower triangular.  Greedy on the margin test (Lemma 8.1:
  r_eps >= M ~ ln n / ln(2/(1 - eps))) or on the inverse-norm test (Lemma 8.2, more messages).
"""
from fractions import Fraction

import numpy as np

from ..head import Head, RowMask

SLACK = Fraction(1, 10 ** 6)       # kept from every exact test so that the kernel's enclosures pass


def prefix_head(n):
    """The n x n prefix-averaging head: beta = 0 and a causal mask (Q = K = 0, d = 1)."""
    return Head(np.zeros((n, 1)), np.zeros((n, 1)), 0, name=f"prefix-n{n}", mask=RowMask(0),
                provenance={"construction": "prefix averaging (causal, beta = 0)"})


def covering(n, eps):
    """(representatives, assignment) of the covering certificate."""
    reps, target = [0], 1 - Fraction(eps) / 2 + SLACK
    while reps[-1] < n - 1:
        r = reps[-1] + 1
        while r + 1 < n and Fraction(reps[-1] + 2, r + 2) >= target:
            r += 1
        reps.append(r)
    assign = np.searchsorted(np.array(reps), np.arange(n))      # the smallest representative >= i
    return reps, np.array(reps)[assign]


def contraction(msgs):
    """T[a, b] = A_{i_a}(C_b) for messages msgs (cells C_0 = {0}, C_b = (i_{b-1}, i_b])."""
    msgs = np.asarray(msgs)
    sizes = np.diff(np.concatenate([[-1], msgs]))
    return np.tril(np.outer(1.0 / (msgs + 1), sizes))


def cells(msgs, n):
    """Cell index of each column: C_a = (i_{a-1}, i_a]; columns after the last message in no cell."""
    c = np.full(n, -1)
    c[:msgs[-1] + 1] = np.searchsorted(np.asarray(msgs), np.arange(msgs[-1] + 1))
    return c


def margin_ok(msgs, eps):
    T = contraction(msgs)
    d = np.diag(T)
    return bool(np.all(2 * d - T.sum(axis=1) > float(Fraction(eps) + SLACK)))


def inverse_ok(msgs, eps):
    return float(eps) * np.abs(np.linalg.inv(contraction(msgs))).sum(axis=1).max() < 1 - 1e-6


def messages(n, eps, test="inverse"):
    """Greedy messages: each next i_a the smallest that keeps the test (margin or inverse) passing."""
    ok = inverse_ok if test == "inverse" else margin_ok
    msgs = [0]
    while True:
        i = msgs[-1] + 1
        while i < n and not ok(msgs + [i], eps):
            i += 1
        if i >= n:
            return msgs
        msgs.append(i)
