"""Golden corpora (tests/golden, built by tests/golden/build.py): every file's verdict and
message, both routes where they must agree, the CLI's exit codes and output discipline."""
import json
import os
import subprocess
import sys

import pytest

from certkit.choices import check

import paths

GOLDEN = str(paths.GOLDEN)
FOLDERS = ("valid", "invalid", "malformed", "unsupported")
CLASS_OF = {"valid": "VERIFIED", "invalid": "REJECTED", "malformed": "MALFORMED", "unsupported": "UNSUPPORTED"}
EXIT = {"VERIFIED": 0, "REJECTED": 1, "MALFORMED": 2, "UNSUPPORTED": 3}

with open(os.path.join(GOLDEN, "expected.json")) as f:
    EXPECTED = json.load(f)
CASES = sorted(EXPECTED)


def path_of(rel):
    return os.path.join(GOLDEN, *rel.split("/"))


@pytest.mark.parametrize("rel", CASES)
def test_fast_route(rel):
    want = EXPECTED[rel]
    v = check(path_of(rel), "fast")
    assert v.status == want["verdict"], v.line()
    assert want["contains"] in v.message, v.line()
    assert v.status == CLASS_OF[rel.split("/")[0]]


@pytest.mark.parametrize("rel", [r for r in CASES if r.split("/")[0] in ("valid", "invalid")])
def test_arb_route(rel):
    v = check(path_of(rel), "arb")
    assert v.status == EXPECTED[rel]["verdict"], v.line()
    if v.status == "REJECTED":
        assert EXPECTED[rel]["contains"] in v.message, v.line()


def test_expected_lists_every_file():
    on_disk = set()
    referenced = set()
    others = set()
    for folder in FOLDERS:
        for name in os.listdir(os.path.join(GOLDEN, folder)):
            rel = f"{folder}/{name}"
            if name.endswith(".json"):
                on_disk.add(rel)
            else:
                others.add(rel)
    assert on_disk == set(EXPECTED), (sorted(on_disk - set(EXPECTED)), sorted(set(EXPECTED) - on_disk))
    assert all(rel.split("/")[0] in FOLDERS for rel in EXPECTED)
    assert {rel.split("/")[0] for rel in EXPECTED} == set(FOLDERS)
    # every other file is a sidecar named by some certificate of its folder
    for rel in on_disk:
        try:
            with open(path_of(rel), "rb") as f:
                text = f.read().decode("utf-8", "replace")
        except OSError:
            continue
        folder = rel.split("/")[0]
        for other in others:
            if other.startswith(folder + "/") and f'"{other.split("/", 1)[1]}"' in text:
                referenced.add(other)
    assert others == referenced, sorted(others - referenced)


def _cli(*files):
    return subprocess.run([sys.executable, "-m", "certkit", "verify", *files],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("folder", FOLDERS)
def test_cli_one_file_per_class(folder):
    rel = next(r for r in CASES if r.startswith(folder + "/"))
    verdict = EXPECTED[rel]["verdict"]
    p = _cli(path_of(rel))
    assert p.returncode == EXIT[verdict], (p.stdout, p.stderr)
    lines = p.stdout.splitlines()
    assert len(lines) == 1, p.stdout
    assert lines[0].split()[0] == verdict, lines[0]
    assert "Traceback" not in p.stderr


def test_cli_all_malformed_no_traceback():
    files = [path_of(r) for r in CASES if r.startswith("malformed/")]
    p = _cli(*files)
    assert "Traceback" not in p.stderr, p.stderr
    assert p.returncode == EXIT["MALFORMED"], (p.stdout[-2000:], p.stderr[-2000:])
    lines = p.stdout.splitlines()
    assert len(lines) == len(files), p.stdout
    for line, f in zip(lines, files):
        assert line.startswith("MALFORMED "), line
        assert line.endswith(f"({os.path.basename(f)})"), line


# ---------------------------------------------------------------- hostile file systems
sys.path.insert(0, GOLDEN)
from build import build_filesystem  # noqa: E402


@pytest.fixture(scope="module")
def filesystem_cases(tmp_path_factory):
    return build_filesystem(str(tmp_path_factory.mktemp("fs")))


FS_NAMES = ["plain", "symlink-inside", "symlink-outside", "symlinked-folder-outside", "symlink-system-file",
            "symlink-dev-zero", "fifo-sidecar", "folder-sidecar", "oversize-sidecar", "fifo-certificate",
            "folder-certificate", "device-certificate", "oversize-certificate"]


def test_filesystem_cases_are_all_listed(filesystem_cases):
    assert sorted(filesystem_cases) == sorted(FS_NAMES)


@pytest.mark.parametrize("name", FS_NAMES)
@pytest.mark.parametrize("route", ["fast", "arb"])
def test_filesystem_case(filesystem_cases, name, route):
    """Only regular files inside the certificate's folder are read; nothing hangs, nothing is exit 4."""
    path, verdict, contains = filesystem_cases[name]
    v = check(path, route)
    assert (v.status, contains in v.message) == (verdict, True), v.line()


def test_filesystem_cases_by_cli(filesystem_cases):
    """The CLI gives each its verdict's exit code, within the subprocess timeout (a FIFO would hang)."""
    for name in ("symlink-outside", "fifo-sidecar", "fifo-certificate", "symlink-dev-zero", "symlink-inside"):
        path, verdict, contains = filesystem_cases[name]
        p = _cli(path)
        assert p.returncode == EXIT[verdict], (name, p.stdout, p.stderr)
        assert contains in p.stdout, (name, p.stdout)


def test_inline_limit_is_enforced_while_parsing(tmp_path):
    """An inline array of 2^20 + 1 entries is MALFORMED by its size before any numeral is parsed (a bad
    numeral in it is not the reason given)."""
    with open(path_of("valid/gauss-n24-factor.json")) as f:
        doc = json.load(f)
    doc["instance"]["queries"] = [["not-a-numeral"] + ["0x1p+0"] * 1023] * 1024 + [["0x1p+0"]]
    p = tmp_path / "big-inline.json"
    p.write_text(json.dumps(doc))
    v = check(str(p))
    assert v.status == "MALFORMED", v.line()
    assert "$.instance.queries: inline array of more than 1048576 entries" in v.message, v.line()


def test_fifo_certificate_with_json_and_manifest_does_not_hang(filesystem_cases, tmp_path):
    """--json hashes a file the kernel could not parse, and --manifest hashes the files it names:
    neither may block on a FIFO."""
    fifo = filesystem_cases["fifo-certificate"][0]
    p = subprocess.run([sys.executable, "-m", "certkit", "verify", "--json", fifo],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and json.loads(p.stdout)[0]["sha256"] is None, (p.stdout, p.stderr)
    manifest = tmp_path / "MANIFEST.sha256"
    manifest.write_text("0" * 64 + "  " + fifo + "\n")
    p = subprocess.run([sys.executable, "-m", "certkit", "verify", "--manifest", str(manifest),
                        path_of("valid/gauss-n24-factor.json")], capture_output=True, text=True, timeout=120)
    assert p.returncode == 2 and "not a regular file" in p.stdout, (p.stdout, p.stderr)
