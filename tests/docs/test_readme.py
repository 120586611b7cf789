"""The README is a front door: at most 200 lines, the two commands for a fresh machine (the second is
what .ci/run runs), one example per command whose output is what the command prints today, a short
"Hostile files" section, and links to the guide in docs/guide/, which lists every page it holds."""
import os
import re
import shlex
import subprocess
import sys

import pytest

from paths import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
GUIDE = ROOT / "docs" / "guide"


def section(text, title):
    """The body of the '## title' section of a markdown text."""
    m = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", text, re.S | re.M)
    assert m, f"no section '## {title}'"
    return m.group(1)


def test_the_readme_is_at_most_200_lines():
    assert len(README.splitlines()) <= 200, len(README.splitlines())


def test_the_two_commands_and_ci_run_the_same_test_command():
    commands = [line.strip() for line in section(README, "Two commands (fresh machine, Python ≥ 3.10)").splitlines()
                if line.startswith("    python3 -m venv")]
    assert len(commands) == 2, commands
    install, tests = commands
    assert install.endswith("certkit verify --manifest data/certificates/MANIFEST.sha256 data/certificates/*.json")
    assert tests.endswith("pytest -q")
    ci = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()
          if line.strip() and not line.lstrip().startswith(("#", "set ", "cd "))]
    assert tests in ci, f".ci/run runs {ci}, the README says {tests}"


def test_the_readme_names_the_verdicts_and_their_exit_codes():
    for verdict, code in (("VERIFIED", 0), ("REJECTED", 1), ("MALFORMED", 2), ("UNSUPPORTED", 3)):
        assert verdict in section(README, "Verdicts") and f"| {code} |" in README, verdict
    assert "r_ε(A) = min { rank B : max_i ‖A_i − B_i‖₁ ≤ ε }" in README


def test_hostile_files_is_short_and_points_to_the_full_page():
    body = section(README, "Hostile files").strip()
    assert len(body.splitlines()) <= 15
    assert "docs/guide/hostile-files.md" in body and "TRUST.md" in body
    for promise in ("allow_pickle=False", "trust_remote_code=False", "symbolic link", "outside `--out`"):
        assert promise in body, promise


def test_the_guide_index_lists_every_page_and_docs_lists_the_guide():
    index = (GUIDE / "README.md").read_text(encoding="utf-8")
    pages = sorted(p.name for p in GUIDE.glob("*.md") if p.name != "README.md")
    assert len(pages) >= 10
    unlisted = [p for p in pages if f"]({p})" not in index]
    assert not unlisted, f"docs/guide/README.md does not list {unlisted}"
    assert "](guide/README.md)" in (ROOT / "docs" / "README.md").read_text(encoding="utf-8")
    assert "](docs/guide/README.md)" in README
    for page in pages:
        assert (GUIDE / page).read_text(encoding="utf-8").startswith("# "), page


# ---------------------------------------------------------------- the examples and their output

COMMANDS = ("verify", "certify", "compare", "scale", "calibrate", "report", "audit", "tables")
NEEDS = {"calibrate": "transformers", "report": "matplotlib"}
EXAMPLES = re.findall(r"```console\n(.*?)```", README, re.S)
TIME = re.compile(r"\d+(?:\.\d+)? s\b")


def example(verb):
    found = [block for block in EXAMPLES if block.startswith(f"$ .venv/bin/certkit {verb} ")]
    assert len(found) == 1, f"the README should show one example of certkit {verb}"
    command, *expected = found[0].rstrip("\n").split("\n")
    return command[2:], expected


def test_one_example_per_command():
    assert [example(verb)[0].split()[1] for verb in COMMANDS] == list(COMMANDS)
    assert "```python\nimport numpy as np\nimport certkit\n" in README      # run by tests/api/test_api.py


def shown(line, actual):
    """Whether an expected README line matches an output line: times may differ, '...' cuts a line."""
    line = TIME.sub("T s", line.rstrip())
    if line.endswith("..."):
        return any(a.startswith(line[:-3]) for a in actual)
    return line in actual


@pytest.mark.parametrize("verb", COMMANDS)
def test_the_readme_example_prints_what_the_readme_shows(verb, tmp_path):
    if verb in NEEDS:
        pytest.importorskip(NEEDS[verb])
    command, expected = example(verb)
    if verb == "report":                                   # its input is the certify example's folder
        certify, _ = example("certify")
        subprocess.run([sys.executable, "-m", "certkit", *shlex.split(certify.replace("/tmp/", f"{tmp_path}/"))[1:]],
                       cwd=ROOT, capture_output=True, check=True, timeout=600)
    argv = shlex.split(command.replace("/tmp/", f"{tmp_path}/"))
    assert argv[0] == ".venv/bin/certkit"
    r = subprocess.run([sys.executable, "-m", "certkit", *argv[1:]], cwd=ROOT, capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert r.returncode == (1 if any(e.startswith("REJECTED") for e in expected) else 0), r.stderr
    actual = [TIME.sub("T s", a.rstrip()) for a in (r.stdout + r.stderr).replace(str(tmp_path), "/tmp").splitlines()]
    lines = [e.replace(str(tmp_path), "/tmp") for e in expected if e.strip() != "..."]
    assert lines, f"the README shows no output for certkit {verb}"
    missing = [e for e in lines if not shown(e, actual)]
    assert not missing, f"certkit {verb} no longer prints {missing}; it prints:\n" + "\n".join(actual)
