"""The published corpus: every certificate VERIFIED by both routes, the manifest matches, and
`python -m certkit.corpus` regenerates it byte for byte."""
import filecmp
import hashlib
import os
import pathlib

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


def test_regeneration_is_byte_identical(tmp_path):
    corpus.build(str(tmp_path))
    names = sorted(os.listdir(DATA))
    assert sorted(os.listdir(tmp_path)) == names
    match, mismatch, errors = filecmp.cmpfiles(DATA, tmp_path, names, shallow=False)
    assert not mismatch and not errors, (mismatch, errors)
