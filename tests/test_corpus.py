"""The published corpus: every certificate VERIFIED by both routes, the manifest matches, and
`python -m certkit.corpus` regenerates it: byte for byte run to run on one machine, and with the
same claims, instances and file set as the committed corpus.  Witness factors come from LAPACK,
whose last bits depend on the CPU's kernels (the committed corpus was built on another machine),
so across machines the witness floats are compared to 1e-10 absolute (entries are O(1)), not bit for bit."""
import filecmp
import hashlib
import json
import os
import pathlib
from fractions import Fraction

import numpy as np

import pytest

from certkit import corpus
from certkit.kernel import check

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "certificates"
CERTS = sorted(DATA.glob("*.json"))


def test_corpus_covers_every_kind_and_both_directions():
    import json
    kinds = {json.loads(p.read_text())["kind"] for p in CERTS}
    from certkit.kernel.load import KINDS
    assert kinds == set(KINDS)


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
