"""No import cycle anywhere in src/awsworld, function-local imports counted (an import inside a function still
runs, and a circle between modules is a circle a newcomer has to untangle). Imports under ``if TYPE_CHECKING:``
are not counted: they never run. The graph is built from the source (an ast walk), so it sees every import,
including the ones a test run never reaches."""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "awsworld"

KNOWN_CYCLES: set[frozenset[str]] = set()


def _modules() -> dict[str, tuple[Path, bool]]:
    found: dict[str, tuple[Path, bool]] = {}
    for path in (SRC / PACKAGE).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        found[".".join(parts)] = (path, is_package)
    return found


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _imports(tree: ast.Module, *, typing: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that runs: at module level, in functions and classes, not under TYPE_CHECKING
    (``typing``: those too)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not typing:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(*, typing: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of this package it imports (a ``from package import name`` that names a submodule
    counts as importing that submodule); ``typing``: the imports under ``TYPE_CHECKING`` too."""
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), typing=typing):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                if node.level:
                    base_parts = package.split(".")
                    base_parts = base_parts[:len(base_parts) - node.level + 1]
                    base = ".".join(base_parts + ([node.module] if node.module else []))
                else:
                    base = node.module or ""
                targets = [f"{base}.{alias.name}" for alias in node.names]
                targets = [target if target in modules else base for target in targets]
            for target in targets:
                resolved = owner(target)
                if resolved is not None and resolved != name:
                    graph[name].add(resolved)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan's, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, list[str]]] = [(root, sorted(graph[root]))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, pending = work[-1]
            if pending:
                target = pending.pop()
                if target not in index:
                    index[target] = low[target] = counter
                    counter += 1
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, sorted(graph[target])))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: set[str] = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(frozenset(component))
    return found


def test_the_graph_sees_function_local_imports() -> None:
    graph = import_graph()
    # engine.execution imports authoring.children at module level; the CLI's main imports commands lazily
    assert "awsworld.authoring.children" in graph["awsworld.engine.execution"]
    assert len(graph) > 100 and sum(len(targets) for targets in graph.values()) > 300


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_in_src() -> None:
    found = [cycle for cycle in cycles(import_graph()) if cycle not in KNOWN_CYCLES]
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(sorted(cycle)) for cycle in found)


def test_no_type_level_cycle_in_the_worlds() -> None:
    """The contract and the two Worlds import one way even at type level: a module that names another's type
    under ``TYPE_CHECKING`` takes a protocol of what it needs instead (``aws/encryption/run_keys.KeyClients``,
    ``aws/queue/deliveries.Sender``), so no circle hides behind annotations."""
    worlds = ("awsworld.world", "awsworld.memory", "awsworld.aws")
    found = [cycle for cycle in cycles(import_graph(typing=True))
             if any(module.startswith(worlds) for module in cycle)]
    assert found == [], "type-level cycles: " + "; ".join(" <-> ".join(sorted(cycle)) for cycle in found)


def test_the_worker_and_client_are_not_imported_by_the_engine_or_authoring() -> None:
    """The layers' direction: authoring and the engine never import the worker or the client (the engine
    declares what needs I/O, the worker does it)."""
    graph = import_graph()
    wrong = sorted(f"{name} -> {target}" for name, targets in graph.items() for target in targets
                   if name.startswith(("awsworld.engine", "awsworld.authoring"))
                   and target.startswith(("awsworld.worker", "awsworld.client")))
    assert wrong == []
