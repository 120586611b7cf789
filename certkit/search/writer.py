"""Writing certificates (formats 1.0 to 1.3, each document in the oldest version that states it): exact
numerals (hex floats) inline, or .npy sidecars pinned by sha256.  The only bridge from floats to certificate numbers is float.hex (exact)."""
import hashlib
import io
import os
from fractions import Fraction

import numpy as np

from ..choices import LAPACK, check
from ..kernel import KINDS
from ..kernel.numerics import FORMAT, Decoder, enclose_all, indices, instance as read_instance, read_json
from ..numbers import numeral
from ..outputs import write_atomic, write_json

INLINE_LIMIT = 4096
# Each document in the oldest format version that states it (version_of: the kind's since, then the head's
# mask), except the hints of the two kinds below (1.3), so that older readers keep reading everything else.
OUTPUT_VERSION = "1.3"
HINTED = {"lower-decoding-inverse-norm": ("inverse",), "lower-frobenius-tail": ("svd_u", "svd_s", "svd_vt")}


def version_of(kind, *heads):
    """The oldest format version that states a certificate of this kind on these heads: the kind's
    since (KINDS), a row mask 1.1, attention sinks 1.2, per-key row intervals (KeyRows) 1.3."""
    minor = KINDS[kind].since
    for h in heads:
        if h.mask is not None:
            minor = max(minor, 3 if not hasattr(h.mask, "sinks") else 2 if h.mask.sinks else 1)
    return f"1.{minor}"


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
            write_atomic(full, raw)
        write_json(self.path, doc)
        return self.path


def _nested(a, conv):
    if a.ndim == 0:
        return conv(a)
    return [_nested(x, conv) for x in a] if a.ndim > 1 else [conv(v) for v in a.tolist()]


def instance_json(w, head, prefix=""):
    """The instance object of head (a certkit.Head), arrays through the writer w (sidecars named
    <stem>.<prefix><field>.npy)."""
    inst = {"beta": head.beta_json(), "queries": w.array(prefix + "queries", head.queries),
            "keys": w.array(prefix + "keys", head.keys)}
    if head.weights is not None:
        inst["column_weights"] = w.array(prefix + "column_weights", head.weights)
    if head.bias is not None:
        inst["logit_bias"] = w.array(prefix + "logit_bias", head.bias)
    if head.mask is not None:
        inst["row_mask"] = head.mask.json()
    return inst


def certificate(path, kind, bound, eps, head, witness_arrays, provenance=None, inline_limit=INLINE_LIMIT,
                shared=False, replacement=None):
    """Write a certificate of kind (a kinds-table name) claiming r_eps(A) <relation> bound for head
    (a certkit.Head), or, with a replacement head (kind attention-distance, bound unused),
    max_i ||A_i - A'_i||_1 <= eps.  witness_arrays: {field: (array, "float" | "int")}.  inline_limit,
    shared: see CertificateWriter.  Returns the path."""
    w = CertificateWriter(path, inline_limit, shared)
    claim = {"quantity": "r_eps", "relation": KINDS[kind].relation, "bound": str(int(bound)), "eps": numeral(Fraction(eps))}
    inst = instance_json(w, head)
    if replacement is not None:
        claim = {"quantity": "max_row_l1_distance", "relation": "<=", "eps": claim["eps"]}
        inst["replacement"] = instance_json(w, replacement, "replacement.")
    witness = {k: w.array(k, a, t) for k, (a, t) in witness_arrays.items()}
    w.write(document(kind, version_of(kind, *(h for h in (head, replacement) if h is not None)), claim, inst,
                     witness, provenance))
    return add_hints(path, inline_limit, shared) if kind in HINTED else path


def add_hints(path, inline_limit=INLINE_LIMIT, shared=False):
    """Rewrite the certificate at path (a kind of HINTED) in format 1.3 with the float choice its rule bounds: for
    lower-decoding-inverse-norm X ~ T^-1 ("inverse"), for lower-frobenius-tail the thin SVD C ~ U diag(s) Vt
    ("svd_u", "svd_s", "svd_vt"), of the contraction exactly as the kernel's fast route forms it, chosen by LAPACK
    (certkit.choices).  Any choice is sound (a poor one can only be REJECTED); carried in the witness, it makes the
    verdict the same on every machine.  Replaces hints already there; upgrades a certificate of format 1.0-1.2
    (which has none) to 1.3.  Returns the path."""
    doc, _ = read_json(path)
    kind, base = doc["kind"], os.path.dirname(os.path.abspath(path))
    fields = HINTED[kind]
    doc["version"] = OUTPUT_VERSION
    wit = {k: v for k, v in doc["witness"].items() if k not in fields}
    inst = read_instance(doc, base)
    rows = wit.get("messages", wit.get("rows"))
    rows = None if rows is None else indices(rows, "$.witness.rows", base, inst.n)
    dec = None
    if "cells" in wit or "decoder" in wit:
        dec = Decoder(wit, "$.witness", base, inst.N, len(rows) if "messages" in wit else None)
    _, T, _ = enclose_all(inst, rows, "fast", dec)
    choice = [LAPACK.inverse(T) if T.size else np.zeros(T.shape)] if fields == ("inverse",) else LAPACK.svd(T)
    w = CertificateWriter(path, inline_limit, shared)
    doc["witness"] = wit | {f: w.array(f, a) for f, a in zip(fields, choice)}
    return w.write(doc)


def document(kind, version, claim, inst, witness, provenance):
    doc = {"format": FORMAT, "version": version, "kind": kind, "claim": claim, "instance": inst,
           "witness": witness, "assumptions": list(KINDS[kind].lemmas)}
    return doc | ({"provenance": provenance} if provenance else {})


def output_certificate(path, pairs, eps, norm, relative, provenance=None, shared=False, inline_limit=INLINE_LIMIT):
    """Write an attention-output-distance certificate (format 1.3) claiming max_i ||D_i|| <= eps (relative: over
    ||(A V W)_i||) in the row norm "inf" or "2", D = sum over pairs (head, replacement) of A V W - A' V' W:
    each head's values V and projection W (its replacement's values V', the head's W).  One pair: the head
    itself is the instance; several (a layer): {"heads": [...]}.  Returns the path."""
    w = CertificateWriter(path, inline_limit, shared)
    heads = []
    for i, (head, rep) in enumerate(pairs):
        p = "" if len(pairs) == 1 else f"heads.{i}."
        inst = instance_json(w, head, p) | {"values": w.array(p + "values", head.values)}
        if head.projection is not None:
            inst["projection"] = w.array(p + "projection", head.projection)
        inst["replacement"] = instance_json(w, rep, p + "replacement.") | {
            "values": w.array(p + "replacement.values", rep.values)}
        heads.append(inst)
    claim = {"quantity": f"max_row_{'relative_' * bool(relative)}output_distance_{norm}", "relation": "<=",
             "eps": numeral(Fraction(eps))}
    inst = heads[0] if len(heads) == 1 else {"heads": heads}
    return w.write(document("attention-output-distance", version_of("attention-output-distance"), claim, inst, {},
                            provenance))




def write_checked(path, kind, bound, eps, head, witness_arrays, provenance=None, **layout):
    """Write a certificate and return the kernel's Verdict on it; a file that is not VERIFIED is
    removed with its own sidecars (content-named sidecars another certificate may share stay).
    layout: inline_limit, shared (see CertificateWriter).  The searches keep what the fast route
    verifies: a candidate it rejects is replaced by the next one, not re-checked in Arb."""
    certificate(path, kind, bound, eps, head, witness_arrays, provenance, **layout)
    v = check(path, "fast")
    if v.status != "VERIFIED":
        remove(path)
    return v


def remove(path):
    """Remove the certificate at path and its <stem>.<field>.npy sidecars."""
    stem = os.path.splitext(path)[0]
    d = os.path.dirname(path) or "."
    for f in os.listdir(d):
        full = os.path.join(d, f)
        if full == path or (full.startswith(stem + ".") and f.endswith(".npy")):
            os.remove(full)
