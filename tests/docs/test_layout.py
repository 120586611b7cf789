"""The layout of certkit: its import graph has no cycle.

The graph has one node per module under certkit/ (a package is its __init__) and an edge a -> b
when a imports b anywhere in its file (at module level or inside a function), relative imports
resolved; `from p import x` is an edge to p.x when p.x is a module, else to p."""
import ast
import re
import tokenize

from paths import ROOT

PACKAGE = ROOT / "certkit"


def module_name(path):
    """certkit/search/lower.py -> certkit.search.lower; certkit/search/__init__.py -> certkit.search."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules():
    """{dotted name: path} of every module under certkit/."""
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imported(name, path, known):
    """The certkit modules that module `name` (at path) imports, in any scope."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def import_graph():
    """{module: set of the certkit modules it imports}."""
    known = modules()
    return {name: imported(name, path, known) for name, path in known.items()}


def find_cycle(graph):
    """A list of modules [a, b, ..., a] around a cycle of graph, or None."""
    state, stack = {}, []

    def visit(a):
        state[a] = "open"
        stack.append(a)
        for b in sorted(graph[a]):
            if state.get(b) == "open":
                return stack[stack.index(b):] + [b]
            if b not in state:
                cycle = visit(b)
                if cycle:
                    return cycle
        state[a] = "done"
        stack.pop()
        return None

    for a in sorted(graph):
        if a not in state:
            cycle = visit(a)
            if cycle:
                return cycle
    return None


def longest_chain(graph):
    """The longest path a -> b -> ... of the (acyclic) graph, as a list of modules."""
    best = {}

    def from_(a):
        if a not in best:
            best[a] = [a] + max((from_(b) for b in sorted(graph[a])), key=len, default=[])
        return best[a]
    return max((from_(a) for a in sorted(graph)), key=len)


def test_the_graph_sees_every_module_and_function_level_imports():
    graph = import_graph()
    assert "certkit.kernel" in graph and "certkit.kernel.check" in graph["certkit.kernel"]
    assert "certkit.driver" in graph["certkit.api"]                   # imported inside certify()


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def command_imports(graph):
    """The edges that break "library below, CLI on top": a command (certkit.commands.<name>) importing
    another, and any module but certkit.cli and the commands importing certkit.commands or a command."""
    def command(m):
        return m == "certkit.commands" or m.startswith("certkit.commands.")
    return sorted(f"{a} -> {b}" + (" (a command imports another)" if command(a) else "")
                  for a, targets in graph.items() for b in targets
                  if command(b) and a != "certkit.cli" and (command(a) and b != "certkit.commands" or not command(a)))


def test_only_the_cli_imports_a_command_and_no_command_another():
    assert command_imports({"certkit.cli": {"certkit.commands.scale"}, "certkit.commands.scale": {"certkit.scaling"},
                            "certkit.commands.compare": {"certkit.driver"}}) == []
    assert command_imports({"certkit.commands.compare": {"certkit.commands.certify"},
                            "certkit.api": {"certkit.commands.calibrate"}, "certkit.driver": {"certkit.commands"}}) == [
        "certkit.api -> certkit.commands.calibrate",
        "certkit.commands.compare -> certkit.commands.certify (a command imports another)",
        "certkit.driver -> certkit.commands"]
    graph = import_graph()
    assert "certkit.driver" in graph["certkit.commands.compare"]      # the graph sees a command's library imports
    bad = command_imports(graph)
    assert not bad, "the library below, the commands on top (docs/design.md):\n" + "\n".join(bad)


# ---------------------------------------------------------------- references

SCANNED = ["README.md", "CHANGELOG.md", "TRUST.md", "CONTRIBUTING.md", "docs", "proofs", "certkit", "tests", "benchmarks"]
PATHS_CHECKED = ["README.md", "CHANGELOG.md", "TRUST.md", "CONTRIBUTING.md", "docs", "proofs", "certkit",
                 "benchmarks/README.md"]   # tests name made-up paths
FOREIGN = {                                    # what only a tracker or a file outside the repository holds
    "an issue number": re.compile(r"\bissues?[ -]#?\d+|(?:^|[\s(\[])#\d+(?=[\s,.;)\]]|$)", re.I | re.M),
    "a card": re.compile(r"design\s+card", re.I),
    "a section of a spec": re.compile(r"\bSPEC\s+§"),
    "a folder beside the repository": re.compile(r"\.\./shared"),
}
TOP = r"(?:docs|proofs|certkit|tests|benchmarks|data)/"
PATH = re.compile(r"(?<![\w./-])(" + TOP + r"[\w.-]+(?:/[\w.-]+)*(?:::\w+)?)(/?)(?![\w*<{\[])")
QUOTED = re.compile(r"`(" + TOP + r"[^`\s*<>{}]*?)/?`")
LINK = re.compile(r"\]\(([^)\s#\\\[*+]+)(?:#[^)]*)?\)")


def scanned_text():
    """(path, text) of every scanned file: a .py file's comments and strings, other files whole."""
    for top in SCANNED:
        base = ROOT / top
        files = [base] if base.is_file() else sorted(p for p in base.rglob("*") if p.is_file())
        for f in files:
            if f.suffix == ".py":
                with open(f, "rb") as fh:
                    toks = tokenize.tokenize(fh.readline)
                    yield f, "\n".join(t.string for t in toks if t.type in (tokenize.COMMENT, tokenize.STRING))
            elif f.suffix in (".md", ".yaml", ".txt") or f.name.endswith(".schema.json"):
                yield f, f.read_text(encoding="utf-8")


def exists(name):
    """Whether the repository holds name: a path, or path::function of a test file (defined in it)."""
    name, _, function = name.partition("::")
    path = ROOT / name
    if not path.exists():
        return False
    return not function or re.search(rf"^\s*(def|class)\s+{function}\b|^{function}\s*=", path.read_text(), re.M)


def missing_references(path, text):
    """The paths text names (a file path with an extension, a `quoted` path, a markdown link) that
    the repository does not hold."""
    named = {m.group(1) for m in PATH.finditer(text) if "." in m.group(1).rsplit("/", 1)[-1] and not m.group(2)}
    named |= set(QUOTED.findall(text))
    bad = sorted(n for n in {n.rstrip(".,;:") for n in named} if not exists(n))
    if path.suffix == ".md":
        bad += [t for t in LINK.findall(text) if "://" not in t and not (path.parent / t).exists()]
    return bad


def test_no_reference_to_an_issue_a_card_or_a_missing_file():
    found = []
    for path, text in scanned_text():
        rel = path.relative_to(ROOT)
        for what, pattern in FOREIGN.items():
            found += [f"{rel}: {what}: {m.group(0).strip()!r}" for m in pattern.finditer(text)]
        if rel.parts[0] in PATHS_CHECKED or rel.as_posix() in PATHS_CHECKED:
            found += [f"{rel}: names {target}, which the repository does not hold"
                      for target in missing_references(path, text)]
    assert not found, "\n".join(found)


# ---------------------------------------------------------------- docs/design.md's layout

def layout_block():
    """The code block of docs/design.md's "## Layout" section."""
    text = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    section = text.split("\n## Layout", 1)[1].split("\n## ", 1)[0]
    return section.split("```", 2)[1]


def test_the_layout_of_docs_design_md_names_every_module_and_holds_every_name():
    block = layout_block()
    words = {w.rstrip(".:") for w in re.split(r"[\s,;()]+", block)}
    words = {w for w in words if re.fullmatch(r"[A-Za-z0-9_.-]+(/[A-Za-z0-9_.-]+)*/?", w)}
    package = ROOT / "certkit"
    modules = [p.name for p in package.glob("*.py") if p.name != "__init__.py"]
    packages = [p.name + "/" for p in package.iterdir() if (p / "__init__.py").exists()]
    commands = [p.name for p in (package / "commands").glob("*.py") if p.name != "__init__.py"]
    unnamed = [m for m in modules + packages + commands if m not in words] + \
              [f"certkit/{m}" for m in ("format/",) if "format/" not in words]
    assert not unnamed, f"docs/design.md's layout does not name {unnamed}"
    tree = {p.name for p in ROOT.rglob("*") if ".git" not in p.parts and "__pycache__" not in p.parts}
    named = {w.rstrip("/") for w in words if re.search(r"\.(py|md|json|sha256|toml|yaml)$|/$", w)}
    paths = {n for n in named if "/" in n}
    absent = sorted(n for n in named - paths if n not in tree) + sorted(p for p in paths if not (ROOT / p).exists())
    assert not absent, f"docs/design.md's layout names what the tree does not hold: {absent}"


# ---------------------------------------------------------------- function length

LONGEST = 80       # lines of a function (its def line to its last line, docstring included)


def long_functions(tree, limit=LONGEST):
    """'name (n lines)' for each function or method of an ast tree longer than limit lines, nested ones
    included (a nested function counts inside its parent too)."""
    return [f"{n.name} ({n.end_lineno - n.lineno + 1} lines)" for n in ast.walk(tree)
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.end_lineno - n.lineno + 1 > limit]


def test_no_function_is_longer_than_80_lines():
    src = "def short():\n    return 1\n\n\ndef long():\n" + "    x = 1\n" * 80 + "    return x\n"
    assert long_functions(ast.parse(src)) == ["long (82 lines)"]
    found = [f"{p.relative_to(ROOT)}: {f}" for p in sorted(PACKAGE.rglob("*.py"))
             for f in long_functions(ast.parse(p.read_text(encoding="utf-8")))]
    assert not found, f"functions over {LONGEST} lines (split them into named steps):\n" + "\n".join(found)
