"""The Coq formalisation of the kernel's lemmas (proofs/coq/) compiles, with no
admitted step and no axiom beyond the Coq standard library's real-number axioms.

Every proofs/coq/*.v file is listed in proofs/coq/_CoqProject in dependency order; each is compiled
with coqc (in a copy, so the tree gets no .vo files) under the logical name Certkit, then
`Print Assumptions` runs on every main theorem of MAIN_THEOREMS and may list only ALLOWED_AXIOMS.
The sources are also scanned (comments removed) for Admitted / admit / Axiom / Parameter /
Conjecture.  Skipped, with the reason as a warning, where coqc is absent; CI installs it (.ci/run)."""
import re
import shutil
import subprocess
import warnings

import pytest

from paths import ROOT

COQ_DIR = ROOT / "proofs" / "coq"
LIBRARY = "Certkit"
COQC_FLAGS = ["-w", "-notation-overridden,-ambiguous-paths"]
COQC = shutil.which("coqc")

# The axioms the Coq 8.16 standard library's real numbers (Reals, built on ClassicalDedekindReals)
# rest on, as Print Assumptions names them; nothing else may appear.  The MathComp files (every
# lemma over an arbitrary realFieldType) use none; the Flocq file uses these four through Reals.
ALLOWED_AXIOMS = {
    "ClassicalDedekindReals.sig_not_dec",
    "ClassicalDedekindReals.sig_forall_dec",
    "FunctionalExtensionality.functional_extensionality_dep",
    "Classical_Prop.classic",
}

# file -> the theorems that state the kernel's lemmas (proofs/INDEX.md, column machine-checked)
MAIN_THEOREMS = {
    "OpIdentity": ["op_identity", "op_identity_le", "op_identity_attained", "attention_output_error"],
    "AttentionDistance": ["distance_triangle", "distance_triangle_converse", "attention_distance_rule"],
    "UpperRank": ["factor_rank", "factor_rank_rule", "cover_rank", "cover_rank_le", "cover_rank_rule"],
    "Decode": ["contraction", "margin_perturb", "decode_margin", "decode_margin_rule", "inverse_norm_rank",
               "approx_inverse", "residual_perturb", "inverse_norm_rule", "varah"],
    "FpSum": ["sum_error", "rec_sum_error", "sum_nonneg_up"],
    "FpInflate": ["formula_bound", "inflate_final", "inflate_sound"],
}

FORBIDDEN = re.compile(r"\b(Admitted|admit|Admit|Axiom|Axioms|Parameter|Parameters|Conjecture)\b")


def project_files(coq_dir=COQ_DIR):
    """The .v files of _CoqProject, in its (dependency) order."""
    lines = (coq_dir / "_CoqProject").read_text(encoding="utf-8").split()
    return [w for w in lines if w.endswith(".v")]


def strip_comments(text):
    """Coq source without its (nested) comments and string literals."""
    out, depth, i = [], 0, 0
    while i < len(text):
        if text.startswith("(*", i):
            depth, i = depth + 1, i + 2
        elif depth and text.startswith("*)", i):
            depth, i = depth - 1, i + 2
        elif not depth and text[i] == '"':
            j = text.index('"', i + 1)
            out.append(" " + "\n" * text.count("\n", i, j))
            i = j + 1
        else:
            if not depth:
                out.append(text[i])
            i += 1
    return "".join(out)


def forbidden_words(path):
    """[(line, word)] of Admitted/admit/Axiom/Parameter/... outside comments."""
    text = strip_comments(path.read_text(encoding="utf-8"))
    return [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in FORBIDDEN.finditer(text)]


def coqc(args, cwd):
    return subprocess.run([COQC, *COQC_FLAGS, "-Q", ".", LIBRARY, *args], cwd=cwd,
                          capture_output=True, text=True, timeout=300)


def compile_all(src_dir, work):
    """Copy src_dir's project into work and compile it in order; AssertionError naming the file."""
    for f in [*src_dir.glob("*.v"), src_dir / "_CoqProject"]:
        shutil.copy(f, work / f.name)
    for name in project_files(work):
        r = coqc([name], work)
        assert r.returncode == 0, f"coqc {name} failed:\n{r.stdout}\n{r.stderr}"


def assumptions(work, theorems):
    """{theorem: set of axiom names} from Print Assumptions, for {module: [theorem]}."""
    lines = [f"From {LIBRARY} Require {' '.join(theorems)}."]
    for mod, names in theorems.items():
        lines += [f'Print Assumptions {mod}.{n}.\nGoal True. idtac "@@END {mod}.{n}". Abort.' for n in names]
    (work / "CheckAssumptions.v").write_text("\n".join(lines) + "\n", encoding="utf-8")
    r = coqc(["CheckAssumptions.v"], work)
    assert r.returncode == 0, f"Print Assumptions failed:\n{r.stdout}\n{r.stderr}"
    found, current = {}, set()
    for line in r.stdout.splitlines():
        if line.startswith("@@END "):
            found[line[6:].strip()], current = current, set()
        else:
            m = re.match(r"^([A-Za-z_][\w.']*)(?:\s+:|$)", line)     # unindented: an axiom's name
            if m and m.group(1) not in ("Axioms", "Closed"):
                current.add(m.group(1))
    return found


def check_tree(src_dir, work, theorems):
    """Problems (strings) of a Coq project: forbidden words, compile errors, disallowed axioms."""
    problems = [f"{p.name}:{line}: {w}" for p in sorted(src_dir.glob("*.v")) for line, w in forbidden_words(p)]
    listed = set(project_files(src_dir))
    problems += [f"{p.name} is not listed in _CoqProject" for p in src_dir.glob("*.v") if p.name not in listed]
    compile_all(src_dir, work)
    found = assumptions(work, theorems)
    for thm in (f"{m}.{n}" for m, names in theorems.items() for n in names):
        extra = found.get(thm, {"<no output>"}) - ALLOWED_AXIOMS
        if extra:
            problems.append(f"{thm} rests on {sorted(extra)}")
    return problems


@pytest.fixture
def need_coqc():
    if COQC is None:
        reason = ("coqc not found: the Coq proofs in proofs/coq/ were not checked (apt-get install coq "
                  "libcoq-mathcomp-algebra libcoq-flocq libcoq-interval libcoq-coquelicot)")
        warnings.warn(reason)
        pytest.skip(reason)


def test_sources_have_no_admitted_step_or_axiom():
    """Runs without coqc too: the text scan and the project listing."""
    files = sorted(COQ_DIR.glob("*.v"))
    assert files, "no Coq file in proofs/coq"
    assert [f for f in files if forbidden_words(f)] == []
    assert sorted(project_files()) == sorted(f.name for f in files)
    assert set(MAIN_THEOREMS) <= {f.stem for f in files}


def test_proofs_compile_with_only_real_number_axioms(need_coqc, tmp_path):
    assert check_tree(COQ_DIR, tmp_path, MAIN_THEOREMS) == []


def test_checker_catches_admitted_and_axioms(need_coqc, tmp_path):
    """The checks can fail: an Admitted lemma, an admit, and an Axiom are each reported."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "_CoqProject").write_text("-Q . Certkit\nBad.v\n", encoding="utf-8")
    (src / "Bad.v").write_text(
        "From Coq Require Import Reals.\nOpen Scope R_scope.\n"
        "Axiom two_is_three : 2 = 3.\n"
        "Lemma uses_axiom : 2 = 3. Proof. exact two_is_three. Qed.\n"
        "Lemma admitted : 1 = 2. Proof. Admitted.\n"
        "Lemma admits : 0 = 1. Proof. admit. Admitted.\n"
        "Lemma honest : 1 + 1 = 2. Proof. ring. Qed.\n"
        "(* Admitted in a comment is fine *)\n", encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    problems = check_tree(src, work, {"Bad": ["uses_axiom", "admitted", "admits", "honest"]})
    text = "\n".join(problems)
    assert "Bad.v:3: Axiom" in text and "Bad.v:5: Admitted" in text and "Bad.v:6: admit" in text
    assert "Bad.v:8" not in text                                   # the comment is not a finding
    assert "Bad.uses_axiom rests on ['Bad.two_is_three']" in text
    assert "Bad.admitted rests on ['Bad.admitted']" in text      # Print Assumptions names it
    assert "Bad.honest" not in text                              # ring over R: only the allowed axioms
    honest = assumptions(work, {"Bad": ["honest"]})["Bad.honest"]
    assert honest and honest <= ALLOWED_AXIOMS                   # the parser sees the real-number axioms
