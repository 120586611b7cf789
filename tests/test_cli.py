import json
import pathlib
import subprocess
import sys

DATA = pathlib.Path(__file__).resolve().parents[1] / "data" / "certificates"
CERT = str(DATA / "perm-n40-margin.json")


def run(*args):
    return subprocess.run([sys.executable, "-m", "certkit", *args], capture_output=True, text=True, timeout=300)


def test_help_explains_verdicts():
    r = run("verify", "--help")
    assert r.returncode == 0 and "MALFORMED" in r.stdout and "exit" in r.stdout.lower()


def test_show_prints_claim_without_checking():
    r = run("show", CERT)
    assert r.returncode == 0
    assert "r_eps(A) >= 40 at eps = 1/4" in r.stdout and "not checked" in r.stdout


def test_verify_json_output():
    r = run("verify", "--json", CERT)
    assert r.returncode == 0
    out = json.loads(r.stdout)
    assert out[0]["verdict"] == "VERIFIED" and out[0]["details"]["messages"] == 40


def test_verify_missing_file_is_malformed_not_traceback(tmp_path):
    r = run("verify", str(tmp_path / "nope.json"))
    assert r.returncode == 2 and r.stdout.startswith("MALFORMED") and "Traceback" not in r.stderr


def test_manifest_mismatch_is_reported(tmp_path):
    man = tmp_path / "MANIFEST.sha256"
    (tmp_path / "x.json").write_text("{}")
    man.write_text("0" * 64 + "  x.json\n")
    r = run("verify", "--manifest", str(man), CERT)
    assert r.returncode == 2 and "does not match" in r.stdout


def test_no_command_prints_help():
    r = run()
    assert r.returncode == 2 and "verify" in r.stdout


def test_tables_command_regenerates_committed_tables_byte_for_byte(tmp_path):
    import filecmp
    import os
    r = run("tables", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    committed = pathlib.Path(__file__).resolve().parents[1] / "data" / "tables"
    names = sorted(os.listdir(committed))
    assert sorted(os.listdir(tmp_path)) == names and len(names) == 15
    match, mismatch, errors = filecmp.cmpfiles(committed, tmp_path, names, shallow=False)
    assert not mismatch and not errors
