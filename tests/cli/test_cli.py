"""The command line: exit codes, one error layer (never a traceback for a user error), verify's
inputs (files, folders, stdin) and outputs (lines, --quiet, --json against its published schema),
and a verify that imports no producer."""
import errno
import hashlib
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import certkit
from certkit import cli
from certkit.errors import InputError, OutputError, UserError

from paths import ROOT

DATA = ROOT / "data" / "certificates"
GOLDEN = ROOT / "tests" / "golden"
CERT = str(DATA / "perm-n40-margin.json")                  # inline arrays, VERIFIED r >= 40 at 1/4
SIDECAR_CERT = str(DATA / "gauss-n256-d64-factor.json")    # .npy sidecars
REJECTED = str(next((GOLDEN / "invalid").glob("perm-n32-margin--*.json")))
SCHEMA = ROOT / "certkit" / "format" / "verify-output.schema.json"
HEAVY = ("scipy", "sympy", "matplotlib", "torch", "transformers", "jsonschema", "tqdm")


def run(*args, stdin=None, env=None):
    return subprocess.run([sys.executable, "-m", "certkit", *args], capture_output=True, text=True, timeout=300,
                          input=stdin, env=env, cwd=ROOT)


def validator():
    from jsonschema import Draft202012Validator
    schema = json.loads(SCHEMA.read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


# ---------------------------------------------------------------- help and usage errors (64, never 2)

def test_help_explains_verdicts():
    r = run("verify", "--help")
    assert r.returncode == 0 and "MALFORMED" in r.stdout and "exit" in r.stdout.lower()
    assert "66" in r.stdout and "stdin" in r.stdout


def test_top_level_help_lists_commands_and_exit_codes():
    r = run("--help")
    assert r.returncode == 0
    for name in cli.COMMANDS:
        assert name in r.stdout
    for code in ("64", "66", "69", "73", "130"):
        assert f"\n  {code} " in r.stdout, code


def test_every_subcommand_epilog_states_its_exit_status():
    for name, cmd in cli.COMMANDS.items():
        assert "Exit status:" in cmd.epilog and "64" in cmd.epilog, name


def test_version(capsys):
    assert cli.main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"certkit {__import__('certkit').__version__}"


def test_no_command_prints_help_and_exits_64():
    r = run()
    assert r.returncode == 64 and "verify" in r.stderr and "a command is required" in r.stderr
    assert r.stdout == ""


@pytest.mark.parametrize("args, needle", [
    (["verify", "--bogus", CERT], "unrecognized arguments: --bogus"),
    (["verify", "--route", "slow", CERT], "invalid choice: 'slow'"),
    (["verify"], "the following arguments are required"),
    (["verify", "--json", "--quiet", CERT], "not allowed with argument"),
    (["frobnicate"], "invalid choice: 'frobnicate'"),
    (["tables", "--format", "pdf"], "invalid choice: 'pdf'"),
    (["show"], "the following arguments are required"),
])
def test_usage_errors_exit_64_without_traceback(args, needle):
    r = run(*args)
    assert r.returncode == 64, (r.returncode, r.stderr)
    assert needle in r.stderr and "usage:" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == ""


def test_usage_error_names_the_command(capsys):
    with pytest.raises(SystemExit) as e:       # the parser alone exits 64 ...
        cli.build_parser(["verify"]).parse_args(["verify", "--route", "x", CERT])
    assert e.value.code == 64
    assert "certkit verify: error: argument --route" in capsys.readouterr().err
    assert cli.main(["verify", "--route", "x", CERT]) == 64      # ... and main() returns it


# ---------------------------------------------------------------- show

def test_show_prints_claim_without_checking():
    r = run("show", CERT)
    assert r.returncode == 0
    assert "r_eps(A) >= 40 at eps = 1/4" in r.stdout and "not checked" in r.stdout
    assert "kind        lower-decoding-margin" in r.stdout


def test_show_missing_file_exits_66(tmp_path):
    r = run("show", str(tmp_path / "nope.json"))
    assert r.returncode == 66 and "nope.json" in r.stderr and "certkit show: error:" in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_show_malformed_and_unsupported_codes_unchanged(capsys):
    assert cli.main(["show", str(GOLDEN / "malformed" / "not-json.json")]) == 2
    assert capsys.readouterr().out.startswith("MALFORMED")
    assert cli.main(["show", str(GOLDEN / "unsupported" / "version-2.0.json")]) == 3
    assert capsys.readouterr().out.startswith("UNSUPPORTED")


# ---------------------------------------------------------------- verify: files, missing files, manifest

def test_verify_missing_file_exits_66_not_malformed(tmp_path):
    r = run("verify", CERT, str(tmp_path / "nope.json"))
    assert r.returncode == 66 and r.stdout == ""
    assert f"certkit verify: error: {tmp_path / 'nope.json'}: no such file" in r.stderr
    assert "Traceback" not in r.stderr


def test_verify_missing_manifest_exits_66(tmp_path):
    r = run("verify", "--manifest", str(tmp_path / "MANIFEST"), CERT)
    assert r.returncode == 66 and "MANIFEST" in r.stderr and "Traceback" not in r.stderr


def test_manifest_mismatch_is_reported(tmp_path):
    man = tmp_path / "MANIFEST.sha256"
    (tmp_path / "x.json").write_text("{}")
    man.write_text("0" * 64 + "  x.json\n")
    r = run("verify", "--manifest", str(man), CERT)
    assert r.returncode == 2 and "does not match" in r.stdout


def test_manifest_mismatch_in_json_mode_stays_json(tmp_path, capsys):
    man = tmp_path / "MANIFEST.sha256"
    (tmp_path / "x.json").write_text("{}")
    man.write_text("0" * 64 + "  x.json\n")
    assert cli.main(["verify", "--json", "--manifest", str(man), CERT]) == 2
    out = json.loads(capsys.readouterr().out)
    validator().validate(out)
    assert [r["status"] for r in out] == ["MALFORMED", "VERIFIED"] and out[0]["file"] == str(man)


def test_committed_corpus_verifies_against_its_manifest(capsys):
    files = sorted(str(p) for p in DATA.glob("*.json"))
    assert cli.main(["verify", "--manifest", str(DATA / "MANIFEST.sha256"), *files]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(files) >= 17 and all(line.startswith("VERIFIED ") for line in lines)


# ---------------------------------------------------------------- verify -: stdin

def test_verify_stdin_inline_certificate():
    r = run("verify", "-", stdin=pathlib.Path(CERT).read_text())
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("VERIFIED    r_eps(A) >= 40 at eps = 1/4") and r.stdout.rstrip().endswith("(<stdin>)")


def test_verify_stdin_with_sidecars_is_malformed_not_a_crash(capsys, monkeypatch):
    import io
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(pathlib.Path(SIDECAR_CERT).read_bytes())))
    assert cli.main(["verify", "--json", "-"]) == 2
    out = json.loads(capsys.readouterr().out)
    validator().validate(out)
    (r,) = out
    assert r["file"] == "-" and r["status"] == "MALFORMED" and "sidecar" in r["message"]
    assert "a certificate read from stdin has no folder" in r["message"]
    assert r["kind"] == "upper-factorization" and r["bound"] == 18 and r["eps"] == "7/20"


def test_verify_creates_nothing_even_when_it_reads_stdin(tmp_path):
    """verify creates no temporary file or folder, for files, folders or stdin (held in memory): a
    kill -9 during a slow stdin check can leave nothing behind.  TMPDIR stays empty."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, TMPDIR=str(tmp))
    assert run("verify", CERT, env=env).returncode == 0
    assert run("verify", str(DATA), "--quiet", env=env).returncode == 0
    assert list(tmp.iterdir()) == []
    assert run("verify", "-", stdin=pathlib.Path(CERT).read_text(), env=env).returncode == 0
    assert run("verify", "-j", "2", "-", CERT, stdin=pathlib.Path(CERT).read_text(), env=env).returncode == 0
    assert list(tmp.iterdir()) == []


def test_verify_stdin_makes_no_temporary_file_or_folder(monkeypatch, capsys):
    import io
    import tempfile
    made = []
    for name in ("mkdtemp", "mkstemp"):
        real = getattr(tempfile, name)
        monkeypatch.setattr(tempfile, name, lambda *a, real=real, **k: made.append(real(*a, **k)) or made[-1])
    assert cli.main(["verify", "--quiet", CERT, str(DATA)]) == 0 and made == []
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(pathlib.Path(CERT).read_bytes())))
    assert cli.main(["verify", "--json", "-"]) == 0 and made == []
    (r,) = json.loads(capsys.readouterr().out)
    assert r["status"] == "VERIFIED" and r["sha256"] == hashlib.sha256(pathlib.Path(CERT).read_bytes()).hexdigest()


def test_verify_stdin_larger_than_the_kernels_limit_is_malformed(monkeypatch, capsys):
    """stdin is read up to the kernel's 64 MiB + 1 bytes, never further, and then refused."""
    import io
    from certkit.kernel.numerics import MAX_FILE
    body = b'{"format": "certkit-certificate", "pad": "' + b"x" * MAX_FILE + b'"}'
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(body)))
    assert cli.main(["verify", "-"]) == 2
    assert "more than 67108864 bytes" in capsys.readouterr().out


def test_verify_stdin_garbage_is_malformed():
    r = run("verify", "-", stdin="not json at all")
    assert r.returncode == 2 and r.stdout.startswith("MALFORMED") and "Traceback" not in r.stderr


def test_verify_stdin_twice_is_a_usage_error():
    r = run("verify", "-", "-", stdin="{}")
    assert r.returncode == 64 and "only once" in r.stderr


# ---------------------------------------------------------------- verify DIR

def _folder(tmp_path):
    d = tmp_path / "certs"
    (d / "sub" / "deeper").mkdir(parents=True)
    shutil.copy(CERT, d / "b.json")
    shutil.copy(DATA / "sphere-d3-lattice.json", d / "sub" / "a.json")
    shutil.copy(REJECTED, d / "sub" / "deeper" / "z.json")
    for f in DATA.glob("gauss-n256-d64-factor*"):          # a certificate with its sidecars
        shutil.copy(f, d / "sub" / f.name)
    (d / "summary.json").write_text('{"rows": []}')          # JSON, but not a certificate: skipped
    (d / "sub" / "broken.json").write_text('{"format": "certkit-certificate", ')   # truncated: MALFORMED
    (d / "notes.txt").write_text("not json")
    return d


def test_verify_folder_recursive_sorted_and_skips_other_json(tmp_path):
    d = _folder(tmp_path)
    r = run("verify", str(d))
    assert r.returncode == 2, r.stdout + r.stderr               # max(0, 1 REJECTED, 2 MALFORMED)
    lines = r.stdout.splitlines()
    names = [line.rsplit("(", 1)[1].rstrip(")") for line in lines]
    sep = os.sep
    assert names == ["b.json", f"sub{sep}a.json", f"sub{sep}broken.json", f"sub{sep}deeper{sep}z.json",
                     f"sub{sep}gauss-n256-d64-factor.json"]
    assert [line.split()[0] for line in lines] == ["VERIFIED", "VERIFIED", "MALFORMED", "REJECTED", "VERIFIED"]
    assert "skipping" in r.stderr and "summary.json" in r.stderr and "1 other .json files skipped" in r.stderr
    assert "Traceback" not in r.stderr
    again = run("verify", str(d))
    assert again.stdout == r.stdout                            # deterministic


def test_verify_empty_folder_exits_66(tmp_path):
    (tmp_path / "only.json").write_text('{"not": "a certificate"}')
    r = run("verify", str(tmp_path))
    assert r.returncode == 66 and "no certkit certificate" in r.stderr and str(tmp_path) in r.stderr


# ---------------------------------------------------------------- --quiet and --json

def test_quiet_prints_nothing_and_keeps_the_exit_code(tmp_path):
    ok = run("verify", "--quiet", CERT, str(DATA / "sphere-d3-lattice.json"))
    assert ok.returncode == 0 and ok.stdout == "" and ok.stderr == ""
    bad = run("verify", "-q", CERT, REJECTED)
    assert bad.returncode == 1 and bad.stdout == ""
    assert "rejected" in bad.stderr                           # diagnostics still on stderr
    missing = run("verify", "-q", str(tmp_path / "gone.json"))
    assert missing.returncode == 66 and missing.stdout == "" and "gone.json" in missing.stderr


def test_verify_json_output():
    r = run("verify", "--json", CERT)
    assert r.returncode == 0
    out = json.loads(r.stdout)
    assert out[0]["status"] == "VERIFIED" and out[0]["details"]["messages"] == 40
    assert set(out[0]) == {"file", "status", "exit_code", "kind", "relation", "bound", "eps", "message",
                           "sha256", "seconds", "details"}
    assert (out[0]["kind"], out[0]["relation"], out[0]["bound"], out[0]["eps"]) == \
        ("lower-decoding-margin", ">=", 40, "1/4")
    assert len(out[0]["sha256"]) == 64 and out[0]["exit_code"] == 0


def test_verify_json_validates_against_published_schema_for_every_status(capsys):
    code = cli.main(["verify", "--json", str(GOLDEN)])
    out = json.loads(capsys.readouterr().out)
    v = validator()
    errors = list(v.iter_errors(out))
    assert not errors, errors[:3]
    assert {r["status"] for r in out} == {"VERIFIED", "REJECTED", "MALFORMED", "UNSUPPORTED"}
    assert code == max(r["exit_code"] for r in out) == 3
    by_file = {pathlib.Path(r["file"]).name: r for r in out}
    assert by_file["not-json.json"]["kind"] is None and by_file["not-json.json"]["sha256"] is not None
    assert by_file["version-2.0.json"]["kind"] is None and by_file["version-2.0.json"]["status"] == "UNSUPPORTED"


def test_schema_rejects_what_verify_never_prints():
    v = validator()
    good = {"file": "x.json", "status": "VERIFIED", "exit_code": 0, "kind": "upper-covering", "relation": "<=",
            "bound": 3, "eps": "1/4", "message": "m", "sha256": "0" * 64, "seconds": 0.1,
            "details": {"kind": "upper-covering", "sha256": "0" * 64, "route": "fast"}}
    assert v.is_valid([good])
    for bad in ({"exit_code": 1}, {"eps": 0.25}, {"verdict": "VERIFIED"}, {"status": "OK"}, {"sha256": "abc"},
                {"kind": None}):
        assert not v.is_valid([{**good, **bad}]), bad


def test_schema_kind_enum_is_the_kinds_table():
    from certkit.kernel import KINDS
    kinds = json.loads(SCHEMA.read_text())["$defs"]["result"]["properties"]["kind"]["enum"]
    assert set(kinds) == set(KINDS) | {None}


# ---------------------------------------------------------------- one error layer in main()

def _fake_command(monkeypatch, exc):
    """A command `certkit boom --out DIR` whose run raises exc (a module like certkit/commands/verify.py)."""
    import types
    module = types.ModuleType("certkit_fake_boom")
    module.add_arguments = lambda p: p.add_argument("--out", required=True)

    def run(args):
        assert args.out
        raise exc
    module.run = run
    monkeypatch.setitem(sys.modules, "certkit_fake_boom", module)
    monkeypatch.setitem(cli.COMMANDS, "boom", cli.Command(
        "raise", "raise an exception", "Exit status: 64", "certkit_fake_boom", extras=("search",)))


@pytest.mark.parametrize("exc, code, needle", [
    (UserError("--eps: 2 is outside (0, 1)"), 64, "certkit boom: error: --eps: 2 is outside (0, 1)"),
    (InputError("heads/x.npz: no such file"), 66, "certkit boom: error: heads/x.npz: no such file"),
    (OutputError("--out /tmp/f: exists and is not a folder"), 73, "certkit boom: error: --out /tmp/f: exists and is not a folder"),
    (OSError(errno.EACCES, "Permission denied", "/ro/summary.md"), 73,
     "certkit boom: error: cannot write /ro/summary.md: Permission denied"),
    (KeyboardInterrupt(), 130, "certkit boom: interrupted"),
    (RuntimeError("boom"), 4, "certkit boom: internal error: RuntimeError: boom"),
    (ModuleNotFoundError("No module named 'sympy'", name="sympy"), 69, "pip install 'certkit[search]'"),
    (ModuleNotFoundError("No module named 'matplotlib'", name="matplotlib"), 69, "'plots' extra"),
    (ModuleNotFoundError("No module named 'certkit.gone'", name="certkit.gone"), 4, "internal error"),
])
def test_main_maps_exceptions_to_exit_codes(monkeypatch, capsys, tmp_path, exc, code, needle):
    _fake_command(monkeypatch, exc)
    monkeypatch.delenv("CERTKIT_DEBUG", raising=False)
    assert cli.main(["boom", "--out", str(tmp_path)]) == code
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_internal_error_traceback_only_with_certkit_debug(monkeypatch, capsys, tmp_path):
    _fake_command(monkeypatch, ZeroDivisionError("bug"))
    monkeypatch.setenv("CERTKIT_DEBUG", "1")
    assert cli.main(["boom", "--out", str(tmp_path)]) == 4
    err = capsys.readouterr().err
    assert "Traceback" in err and "internal error: ZeroDivisionError: bug" in err


def test_certify_out_is_a_regular_file_exits_73(tmp_path):
    out = tmp_path / "a-file"
    out.write_text("")
    r = run("certify", "--synthetic", "gaussian:n=8,d=2", "--eps", "1/2", "--peers", "none", "--out", str(out))
    assert r.returncode == 73, r.stderr
    assert "certkit certify: error:" in r.stderr and str(out) in r.stderr and "Traceback" not in r.stderr


def test_tables_out_is_a_regular_file_exits_73(tmp_path):
    out = tmp_path / "a-file"
    out.write_text("")
    r = run("tables", "--out", str(out), "--format", "csv")
    assert r.returncode == 73, r.stderr
    assert str(out) in r.stderr and "Traceback" not in r.stderr


def test_missing_extra_names_the_extra_to_install(tmp_path):
    code = ("import sys\n"
            "for m in ('scipy', 'sympy', 'mpmath', 'tqdm', 'safetensors'): sys.modules[m] = None\n"
            "from certkit.cli import main\n"
            f"sys.exit(main(['certify', '--synthetic', 'gaussian:n=8,d=2', '--out', {str(tmp_path)!r}]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 69, r.stderr
    assert "certkit certify needs the 'search' extra: pip install 'certkit[search]'" in r.stderr
    assert "Traceback" not in r.stderr


# ---------------------------------------------------------------- a light verify

def _modules_after(argv):
    code = ("import json, sys\n"
            "from certkit.cli import main\n"
            f"rc = main({argv!r})\n"
            "print(json.dumps([rc, sorted(sys.modules)]))\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    rc, mods = json.loads(r.stdout.splitlines()[-1])
    return rc, {m.split(".")[0] for m in mods}, set(mods)


def test_verify_imports_no_heavy_dependency_and_no_producer():
    rc, top, mods = _modules_after(["verify", "--quiet", CERT, str(DATA / "gauss-n128-d1-chain.json")])
    assert rc == 0
    assert not top & set(HEAVY), sorted(top & set(HEAVY))
    assert {m for m in mods if m.startswith("certkit.commands.")} == {"certkit.commands.verify"}
    assert not {"certkit.search", "certkit.symbolic", "certkit.api", "certkit.certificate"} & mods


def test_help_imports_no_command_module():
    rc, top, mods = _modules_after(["--help"])
    assert rc == 0
    assert not top & set(HEAVY) and "certkit.kernel" not in mods and "certkit.driver" not in mods


def test_cold_start_import_time_of_verify():
    """python -X importtime: the whole import tree of `certkit verify` has no heavy package."""
    r = subprocess.run([sys.executable, "-X", "importtime", "-m", "certkit", "verify", "--quiet", CERT],
                       capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert r.returncode == 0
    imported = {line.split("|")[-1].strip().split(".")[0] for line in r.stderr.splitlines()
                if line.startswith("import time:") and "|" in line}
    assert "numpy" in imported and "flint" in imported           # the parse is real
    assert not imported & set(HEAVY), sorted(imported & set(HEAVY))


def test_tables_command_regenerates_committed_tables_byte_for_byte(tmp_path):
    import filecmp
    r = run("tables", "--out", str(tmp_path))
    assert r.returncode == 0, r.stderr
    committed = ROOT / "data" / "tables"
    names = sorted(os.listdir(committed))
    assert sorted(os.listdir(tmp_path)) == names and len(names) == 16 and "producer.json" in names
    tables = [n for n in names if n != "producer.json"]       # the producer names today's commit
    _match, mismatch, errors = filecmp.cmpfiles(committed, tmp_path, tables, shallow=False)
    assert not mismatch and not errors
    assert json.loads((tmp_path / "producer.json").read_text())["producer"]["certkit"] == certkit.__version__


def test_readme_exit_code_table_matches_the_cli():
    readme = (ROOT / "README.md").read_text()
    for line in cli.EXIT_TABLE.splitlines():
        code = line.split()[0] if line.startswith("  ") and line.split()[0].isdigit() else None
        if code:
            assert f"| {code} |" in readme, code



def test_command_module_and_missing_dependency(tmp_path, monkeypatch):
    """A command is its module; a missing dependency inside it is raised (-> 69 naming the extra)."""
    import certkit.errors
    assert cli.Command("h", "d", "e", "certkit.errors").load() is certkit.errors
    with pytest.raises(ModuleNotFoundError):
        cli.Command("h", "d", "e", "certkit.no_such_module").load()
    pkg = tmp_path / "certkit_fake_cmd"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("import scipy_not_installed_here\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError) as e:
        cli.Command("h", "d", "e", "certkit_fake_cmd").load()
    assert e.value.name == "scipy_not_installed_here"
