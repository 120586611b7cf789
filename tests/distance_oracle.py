"""An oracle for attention-distance certificates, written independently of the kernel: both
softmax attentions of a certificate, A of its instance and A' of instance.replacement, computed in
mpmath at DIGITS decimal digits straight from the document's numerals, and the true
max_i ||A_i - A'_i||_1.

Nothing of certkit is used: numerals are read here (hex floats by float.fromhex, exact; integers,
p/q and decimals by Fraction), inner products are exact rationals, and only exp, log and sqrt are
rounded (at DIGITS digits, so the result is good to far more digits than any claim states).  Row i
sees the keys j with positive column weight inside its row mask: j <= i + o and (i + o - w < j or
j < sinks), or (format 1.3) from_j <= i < until_j; A_ij = 0 for every other key.  A layer ({"heads": [...]})
sums its heads' outputs."""
import json
from fractions import Fraction

import mpmath

DIGITS = 60


def number(s):
    """The exact value of a certificate numeral (a JSON string)."""
    assert isinstance(s, str), s
    t = s.strip().lower()
    if "0x" in t:
        return Fraction(float.fromhex(t))        # the writer's hex floats are binary64 numbers
    return Fraction(t)                            # integer, p/q or decimal


def matrix(x):
    return [[number(v) for v in row] for row in x]


def beta_of(x):
    """beta as an mpf: a numeral or {"over_sqrt": [c, D]} (an interval has no single attention)."""
    if isinstance(x, str):
        return mpf(number(x))
    c, D = (number(v) for v in x["over_sqrt"])
    return mpf(c) / mpmath.sqrt(mpf(D))


def mpf(q):
    return mpmath.mpf(q.numerator) / q.denominator


def attention(head):
    """The rows of softmax attention of one head object of a certificate, as lists of mpf."""
    Q, K = matrix(head["queries"]), matrix(head["keys"])
    n, N = len(Q), len(K)
    w = [number(v) for v in head["column_weights"]] if "column_weights" in head else [Fraction(1)] * N
    bias = matrix(head["logit_bias"]) if "logit_bias" in head else [[Fraction(0)] * N for _ in range(n)]
    mask = head.get("row_mask")
    b = beta_of(head["beta"])
    rows = []
    for i in range(n):
        seen = [j for j in range(N) if w[j] > 0]
        if mask is not None and "from" in mask:
            seen = [j for j in seen if int(number(mask["from"][j])) <= i < int(number(mask["until"][j]))]
        elif mask is not None:
            hi = i + int(number(mask["offset"]))
            lo = hi - int(number(mask["window"])) if "window" in mask else -1
            sinks = int(number(mask.get("sinks", "0")))
            seen = [j for j in seen if j <= hi and (j > lo or j < sinks)]
        assert seen, f"row {i} sees no key"
        logit = {j: b * mpf(sum((q * k for q, k in zip(Q[i], K[j])), Fraction(0))) + mpmath.log(mpf(w[j]))
                 + mpf(bias[i][j]) for j in seen}
        top = max(logit.values())
        e = {j: mpmath.exp(x - top) for j, x in logit.items()}
        Z = mpmath.fsum(e.values())
        rows.append([e[j] / Z if j in e else mpmath.mpf(0) for j in range(N)])
    return rows


def distances(doc):
    """[||A_i - A'_i||_1 for every row i] of an attention-distance document (a dict)."""
    with mpmath.workdps(DIGITS):
        A, B = attention(doc["instance"]), attention(doc["instance"]["replacement"])
        return [mpmath.fsum(abs(a - b) for a, b in zip(ra, rb)) for ra, rb in zip(A, B)]


def truth(doc):
    """The true max_i ||A_i - A'_i||_1 of a document (a dict or a path), as an mpf."""
    if not isinstance(doc, dict):
        with open(doc) as f:
            doc = json.load(f)
    return max(distances(doc))


def fraction(x):
    """The exact rational value of an mpf."""
    m, e = mpmath.mpf(x).man_exp
    return Fraction(int(m)) * Fraction(2) ** int(e)


def claim_is_false(doc, margin=Fraction(1, 10 ** 30)):
    """True when the document's claimed eps is below the true distance by more than margin
    (far beyond the oracle's own rounding at DIGITS digits)."""
    return fraction(truth(doc)) > number(doc["claim"]["eps"]) + margin


# ---------------------------------------------------------------- output distances (format 1.3)
def output_rows(doc):
    """[(||D_i||, ||(A V W)_i||)] of an attention-output-distance document, D = A V W - A' V' W, in the
    claim's norm (the quantity's suffix _inf or _2), W the projection (the identity when absent); a layer
    sums A V W and A' V' W over its heads.  V, V' and W are exact rationals; every product and sum is
    exact but for the mpf attention rows."""
    inst = doc["instance"]
    norm = doc["claim"]["quantity"].rsplit("_", 1)[1]

    def size(x):
        return max(abs(t) for t in x) if norm == "inf" else mpmath.sqrt(mpmath.fsum(t * t for t in x))
    with mpmath.workdps(DIGITS):
        total = None
        for head in inst.get("heads", [inst]):
            outs = head_outputs(head)
            total = outs if total is None else [[[x + y for x, y in zip(r, t)] for r, t in zip(R, T)]
                                                for R, T in zip(total, outs)]
        return [(size([x - y for x, y in zip(o, o2)]), size(o)) for o, o2 in zip(*total)]


def head_outputs(head):
    """(rows of A V W, rows of A' V' W) of one head object with its replacement, values and projection."""
    A, B = attention(head), attention(head["replacement"])
    V, V2 = matrix(head["values"]), matrix(head["replacement"]["values"])
    if "projection" in head:
        W = matrix(head["projection"])
        V, V2 = ([[sum((v[a] * W[a][c] for a in range(len(W))), Fraction(0)) for c in range(len(W[0]))]
                  for v in M] for M in (V, V2))
    P, P2 = ([[mpf(x) for x in row] for row in M] for M in (V, V2))
    return tuple([[mpmath.fsum(a[j] * M[j][c] for j in range(len(M))) for c in range(len(M[0]))] for a in X]
                 for X, M in ((A, P), (B, P2)))


def output_truth(doc):
    """The true left side of an attention-output-distance claim: max_i ||D_i||, or max_i ||D_i|| /
    ||(A V W)_i|| for a relative quantity (inf where a row's output is 0)."""
    if not isinstance(doc, dict):
        with open(doc) as f:
            doc = json.load(f)
    relative = "relative" in doc["claim"]["quantity"]
    with mpmath.workdps(DIGITS):
        return max((d / o if o else mpmath.inf) if relative else d for d, o in output_rows(doc))
