"""No import circle in the package, lazy (function-level) imports included.

A circle means neither module can be read, tested or replaced without the other. The walk
parses every module (nothing is imported), resolves relative imports, and finds the
strongly connected components of the import graph (Tarjan). A function-level import is an
edge like any other: moving an import into a function to dodge a circle does not pass.
KNOWN (circles tolerated while they are untangled) is empty; add no entry to it.
"""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "evalstop_gym"

KNOWN: list[set[str]] = []


def module_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """Module name -> the package's modules it imports anywhere in its source."""
    files = {}
    for p in root.rglob("*.py"):
        parts = list(p.relative_to(root.parent).with_suffix("").parts)
        files[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = p
    graph = {}
    for name, path in files.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        deps = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                deps |= {a.name for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                target = (".".join(package[:len(package) - node.level + 1] + [node.module or ""]).rstrip(".")
                          if node.level else node.module or "")
                deps |= {f"{target}.{a.name}" if f"{target}.{a.name}" in files else target for a in node.names}
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan, iterative)."""
    index, low, stack, on, out = {}, {}, [], set(), []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def test_the_finder_on_a_hand_made_graph():
    g = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a", "e"}, "e": {"d"}, "f": set()}
    assert sorted(map(sorted, circles(g))) == [["a", "b", "c"], ["d", "e"]]


def test_the_walk_sees_lazy_and_relative_imports():
    g = module_graph()
    assert "evalstop_gym.cluster" in g["evalstop_gym.config"]       # `from .cluster import ...` in a method
    assert "evalstop_gym.checks" in g["evalstop_gym.cluster"]


def test_the_walk_sees_function_level_imports_as_edges():
    g = module_graph()
    assert "evalstop_gym.agents.run_selection" in g["evalstop_gym.agents.train"]   # imported inside train()


def test_no_import_circle_but_the_known_ones():
    new = [sorted(c) for c in circles(module_graph()) if not any(c <= known for known in KNOWN)]
    assert new == [], f"new import circles: {new}"
