"""The layout of certkit: its import graph has no cycle.

The graph has one node per module under certkit/ (a package is its __init__) and an edge a -> b
when a imports b anywhere in its file (at module level or inside a function), relative imports
resolved; `from p import x` is an edge to p.x when p.x is a module, else to p."""
import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parents[1]
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
    assert "certkit.search.sandwich" in graph["certkit.api"]          # imported inside certify()


def test_the_import_graph_has_no_cycle():
    cycle = find_cycle(import_graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)
