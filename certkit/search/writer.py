"""Writing format-1.0 certificates: exact numerals (hex floats) inline, or .npy sidecars pinned
by sha256.  The only bridge from floats to certificate numbers is float.hex (exact)."""
import hashlib
import io
import json
import os
from fractions import Fraction

import numpy as np

FORMAT, VERSION = "certkit-certificate", "1.0"
from ..kernel.load import KINDS

ASSUMPTIONS = {kind: lemmas for kind, (_, lemmas) in KINDS.items()}
INLINE_LIMIT = 4096


def numeral(x):
    """Exact numeral string for an int, Fraction or binary64."""
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, Fraction):
        return str(x.numerator) if x.denominator == 1 else f"{x.numerator}/{x.denominator}"
    return float(x).hex()


def npy_bytes(a):
    buf = io.BytesIO()
    np.save(buf, np.ascontiguousarray(a), allow_pickle=False)
    return buf.getvalue()


class CertificateWriter:
    """Collects arrays for one certificate; arrays above inline_limit entries go to sidecars
    beside the JSON file, named <stem>.<field>.npy, or with shared=True named by content
    (<sha256[:24]>.npy) so that certificates in one folder store an equal array (the same
    head's queries and keys, say) once."""

    def __init__(self, path, inline_limit=INLINE_LIMIT, shared=False):
        self.path = path
        self.stem = os.path.splitext(os.path.basename(path))[0]
        self.dir = os.path.dirname(os.path.abspath(path))
        self.inline_limit = inline_limit
        self.shared = shared
        self.sidecars = {}

    def array(self, name, a, kind="float"):
        a = np.asarray(a, dtype=np.int64 if kind == "int" else np.float64)
        if a.size <= self.inline_limit:
            conv = (lambda v: str(int(v))) if kind == "int" else (lambda v: float(v).hex())
            return _nested(a, conv)
        raw = npy_bytes(a)
        sha = hashlib.sha256(raw).hexdigest()
        fname = f"{sha[:24]}.npy" if self.shared else f"{self.stem}.{name}.npy"
        self.sidecars[fname] = raw
        return {"file": fname, "sha256": sha,
                "dtype": str(a.dtype), "shape": list(a.shape)}

    def write(self, doc):
        os.makedirs(self.dir, exist_ok=True)
        for fname, raw in self.sidecars.items():
            full = os.path.join(self.dir, fname)
            if self.shared and os.path.exists(full) and os.path.getsize(full) == len(raw):
                continue                    # content-named: already there (the checker re-hashes it)
            with open(full, "wb") as f:
                f.write(raw)
        with open(self.path, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
        return self.path


def _nested(a, conv):
    if a.ndim == 0:
        return conv(a)
    return [_nested(x, conv) for x in a] if a.ndim > 1 else [conv(v) for v in a.tolist()]


def beta_json(beta):
    """beta: Fraction/int (exact), ("over_sqrt", c, D) or ("interval", lo, hi) -> format 1.0 JSON."""
    if isinstance(beta, tuple) and beta[0] == "over_sqrt":
        return {"over_sqrt": [numeral(beta[1]), numeral(beta[2])]}
    if isinstance(beta, tuple) and beta[0] == "interval":
        return {"interval": [numeral(beta[1]), numeral(beta[2])]}
    return numeral(beta)


def kernel_instance(h):
    """The kernel's in-memory Instance of head h (the same exact numbers a certificate states)."""
    from ..kernel.load import Instance, beta as read_beta
    return Instance(read_beta(beta_json(h["beta"]), "$.instance.beta"), h["Q"], h["K"],
                    h.get("weights"), h.get("bias"))


def instance_json(w, Q, K, beta, weights=None, bias=None):
    """beta: Fraction/int (exact), ("over_sqrt", c, D) or ("interval", lo, hi)."""
    inst = {"beta": beta_json(beta), "queries": w.array("queries", Q), "keys": w.array("keys", K)}
    if weights is not None:
        inst["column_weights"] = w.array("column_weights", weights)
    if bias is not None:
        inst["logit_bias"] = w.array("logit_bias", bias)
    return inst


def certificate(path, kind, bound, eps, head, witness_arrays, provenance=None, inline_limit=INLINE_LIMIT,
                shared=False):
    """Write a certificate.  head: dict(Q=, K=, beta=, weights=, bias=).  witness_arrays:
    {field: (array, kind)}.  inline_limit, shared: see CertificateWriter.  Returns the path."""
    w = CertificateWriter(path, inline_limit, shared)
    doc = {
        "format": FORMAT, "version": VERSION, "kind": kind,
        "claim": {"quantity": "r_eps", "relation": "<=" if kind.startswith("upper") else ">=",
                  "bound": str(int(bound)), "eps": numeral(Fraction(eps))},
        "instance": instance_json(w, head["Q"], head["K"], head["beta"], head.get("weights"), head.get("bias")),
        "witness": {k: w.array(k, a, t) for k, (a, t) in witness_arrays.items()},
        "assumptions": ASSUMPTIONS[kind],
    }
    if provenance:
        doc["provenance"] = provenance
    return w.write(doc)
