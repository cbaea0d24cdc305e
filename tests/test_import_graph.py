"""No import cycle in src/: the graph counts every import that runs, function-local ones included.

A cycle hidden in a function (``def f(): from .b import g``) still couples two modules both ways; it only moves
the failure from import time to call time. The graph is built from the source with ``ast`` (nothing is
imported): an edge ``a -> b`` for each ``import b`` / ``from b import x`` in ``a`` (to ``b.x`` when that is a
module), wherever it stands, except under ``if TYPE_CHECKING:`` (an annotation's import never runs: the issue
counts those edges apart). Issue 22 item 4.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "awsworld"

OWNED = ("awsworld.world", "awsworld.memory", "awsworld.aws", "awsworld.testing")
"""The packages whose cycles issue 22's rulebook work removed; ``runtime`` is helper ``layers``' part."""


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in (SRC / ROOT).rglob("*.py"):
        parts = list(path.relative_to(SRC).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _runtime_nodes(tree: ast.AST) -> Iterator[ast.AST]:
    """Every node but the bodies of ``if TYPE_CHECKING:`` blocks."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for other in node.orelse:
                yield other
                yield from _runtime_nodes(other)
            continue
        yield node
        yield from _runtime_nodes(node)


def _imports(name: str, path: Path, modules: dict[str, Path]) -> Iterator[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in _runtime_nodes(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # ``import a.b.c`` of a name: its module
                target = target.rpartition(".")[0]
            if target.startswith(ROOT) and target != name:
                yield target


def graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: set(_imports(name, path, modules)) for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(edges.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def _owned(module: str) -> bool:
    return any(module == p or module.startswith(p + ".") for p in OWNED)


def test_the_graph_sees_function_local_and_relative_imports() -> None:
    """The walk must see what the test is for, or it proves nothing."""
    edges = graph()
    assert "awsworld.world.rules.hooks" in edges["awsworld.memory.storage"]  # ``from ..world.rules.hooks``
    assert "awsworld.world.rules.decision" in edges["awsworld.world.rules.hooks"]  # ``from .decision``
    assert "awsworld.runtime.children" in edges["awsworld.runtime.registry"]  # inside a function
    assert "awsworld.world.events" not in edges["awsworld.world.errors"]  # only under TYPE_CHECKING
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycle_touches_the_world_memory_or_aws_packages() -> None:
    bad = [c for c in cycles(graph()) if any(_owned(m) for m in c)]
    assert bad == []


@pytest.mark.xfail(strict=True, reason="layers issue 22 item 2: runtime/'s cycle goes when its split lands")
def test_no_import_cycle_anywhere_in_src() -> None:
    assert cycles(graph()) == []
