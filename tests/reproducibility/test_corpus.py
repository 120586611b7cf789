"""The published corpus: every certificate VERIFIED by both routes, the manifest matches, and
`python -m certkit.corpus` regenerates it: byte for byte run to run on one machine, and with the
same claims, instances and file set as the committed corpus.  Witness factors come from LAPACK,
whose last bits depend on the CPU's kernels (the committed corpus was built on another machine),
so across machines the witness floats are compared to 1e-10 absolute (entries are O(1)), not bit for bit."""
import filecmp
import hashlib
import json
import os
from fractions import Fraction

import numpy as np

import pytest

from certkit import corpus
from certkit.head import Head
from certkit.choices import check
from certkit.kernel import KINDS
from certkit.numbers import BetaInterval, OverSqrt

from paths import ROOT

DATA = ROOT / "data" / "certificates"
HEADS = ROOT / "data" / "heads"
CERTS = sorted(DATA.glob("*.json"))


def test_corpus_covers_every_kind_and_both_directions():
    """Every rank kind (the corpus states heads, certkit.corpus "every kind of format 1.0"); the
    format-1.2 kind attention-distance and the format-1.3 kind attention-output-distance compare a
    head with a replacement and have their golden corpora in tests/golden/distance and tests/golden/output."""
    kinds = {json.loads(p.read_text())["kind"] for p in CERTS}
    assert kinds == {k for k in KINDS if KINDS[k].shape not in ("pair", "output")}
    assert {KINDS[k].relation for k in kinds} == {"<=", ">="}


@pytest.mark.parametrize("path", CERTS, ids=lambda p: p.name)
@pytest.mark.parametrize("route", ["fast", "arb"])
def test_published_certificates_verify(path, route):
    v = check(str(path), route)
    assert v.status == "VERIFIED", v.line()


def test_manifest_matches():
    lines = (DATA / "MANIFEST.sha256").read_text().splitlines()
    listed = {}
    for line in lines:
        sha, name = line.split(None, 1)
        listed[name] = sha
    files = {p.name for p in DATA.iterdir() if p.suffix in (".json", ".npy")}
    assert set(listed) == files
    for name, sha in listed.items():
        assert hashlib.sha256((DATA / name).read_bytes()).hexdigest() == sha, name


def _floats(x):
    """Witness content as a flat float array (inline numerals or an .npy sidecar)."""
    if isinstance(x, dict):
        return None
    return np.array([float.fromhex(v) if "x" in v else float(Fraction(v)) for v in np.ravel(x).tolist()])


def test_regeneration_is_deterministic_and_matches_the_committed_corpus(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    corpus.build(str(a))
    corpus.build(str(b))
    names = sorted(os.listdir(DATA))
    assert sorted(os.listdir(a)) == names
    match, mismatch, errors = filecmp.cmpfiles(a, b, names, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)       # run to run: byte for byte
    for name in names:
        if name.endswith(".npy"):
            x = np.load(DATA / name, allow_pickle=False)
            y = np.load(a / name, allow_pickle=False)
            assert x.shape == y.shape and x.dtype == y.dtype, name
            assert np.allclose(x, y, rtol=0, atol=1e-10), name
        elif name.endswith(".json"):
            old, new = json.loads((DATA / name).read_text()), json.loads((a / name).read_text())
            for key in ("format", "version", "kind", "claim", "instance", "assumptions"):
                assert old[key] == new[key], (name, key)
            assert old["witness"].keys() == new["witness"].keys(), name
            for f, x in old["witness"].items():
                fx, fy = _floats(x), _floats(new["witness"][f])
                if fx is None:
                    assert x["shape"] == new["witness"][f]["shape"], (name, f)
                else:
                    assert fx.shape == fy.shape and np.allclose(fx, fy, rtol=0, atol=1e-10), (name, f)


def test_head_files_regenerate_byte_for_byte(tmp_path):
    """`python -m certkit.corpus heads DIR` rewrites data/heads exactly (no LAPACK involved), and
    each file reads back as the synthetic head of its HEADS row with its exact beta."""
    written = corpus.write_heads(str(tmp_path))
    assert sorted(os.path.basename(p) for p in written) == sorted(os.listdir(HEADS))
    match, mismatch, errors = filecmp.cmpfiles(tmp_path, HEADS, sorted(os.listdir(HEADS)), shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
    for name, fam, n, d, beta in corpus.HEADS:
        h = Head.from_file(str(HEADS / name))
        assert (h.n, h.N, h.d, h.beta) == (n, n, d, beta), name
        assert h.name == name.rsplit(".", 1)[0] and h.weights is None and h.bias is None


def test_published_betas_use_every_exact_form():
    """The corpus states beta as a plain numeral, c/sqrt(D) and an interval (format 1.0, §instance)."""
    betas = [e[4] for e in corpus.PUBLISHED]
    assert any(isinstance(b, OverSqrt) for b in betas) and any(isinstance(b, BetaInterval) for b in betas)
    docs = {p.name: json.loads(p.read_text()) for p in CERTS}
    assert docs["gauss-n256-d64-factor.json"]["instance"]["beta"] == {"over_sqrt": ["32", "64"]}
    assert docs["gauss-n48-bias-factor.json"]["instance"]["beta"] == {"interval": ["1999999/1000000", "2000001/1000000"]}


def test_head_for_matches_the_published_instance():
    """corpus.head_for rebuilds exactly the instance a published certificate states (weights, bias)."""
    from certkit.kernel.numerics import instance, read_json
    for name, fam, n, d, beta, eps, kind, extras in corpus.PUBLISHED:
        if not extras:
            continue
        h = corpus.head_for(fam, n, d, beta, extras)
        doc, _ = read_json(str(DATA / (name + ".json")))
        inst = instance(doc, str(DATA))
        assert np.array_equal(inst.Q, h.queries) and np.array_equal(inst.K, h.keys), name
        if extras.get("weights"):
            assert np.array_equal(inst.weights, h.weights) and (h.weights == 0).any(), name
        if extras.get("bias"):
            assert np.array_equal(inst.bias, h.bias), name


def test_synthetic_heads_are_seeded_dyadic_heads_of_their_family():
    from certkit import synthetic
    from certkit.errors import UserError
    for fam in synthetic.SYNTHETIC_FAMILIES:
        h = synthetic.head(fam, 6, 3, beta="1/2", N=5, seed=2)
        assert isinstance(h, Head) and (h.n, h.N, h.d) == (6, 5, 3) and h.beta == Fraction(1, 2)
        assert h.provenance == {"family": fam, "seed": 2} and h.name == f"{fam}-n6-d3"
        for a in (h.queries, h.keys):
            assert np.array_equal(a * 2.0 ** 30, np.round(a * 2.0 ** 30))     # multiples of 2^-30: short numerals
        again = synthetic.head(fam, 6, 3, beta="1/2", N=5, seed=2, name="x")
        assert again.name == "x" and np.array_equal(again.queries, h.queries) and np.array_equal(again.keys, h.keys)
    assert not np.array_equal(synthetic.head("gaussian", 6, 3, seed=3).queries, synthetic.head("gaussian", 6, 3).queries)
    with pytest.raises(UserError, match="unknown family 'torus'"):
        synthetic.head("torus", 4, 2)
