"""The import contract of src/awsworld: the layers import one way only, and no import cycle anywhere.

Every import counts: at module level, inside a function (it still runs) and under ``if TYPE_CHECKING:`` (it never
runs, but a type that names a module above is a dependency a reader has to follow all the same). Two graphs are
checked for cycles: the run-time one (without ``TYPE_CHECKING`` imports) and the type-level one (with them). The
graph is built from the source (an ast walk), so it sees every import, including the ones a test run never reaches.

The layers (``LAYERS``, bottom first, one line each) are module prefixes; a module belongs to the layer of its
most specific prefix, so a module can sit below its package (``authoring.errors``: the error types' module path is
recorded in logs, as an error's ``type``, so it stays where it is, below the durable format that raises them).
A module may import its own layer and the layers below, never one above. Why not import-linter's layers contract:
it refuses a layer inside another layer, which is exactly what ``authoring.errors`` needs.

Run ``python tests/test_import_graph.py`` for the contract's report."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src"
PACKAGE = "awsworld"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("vocabulary: settings, the public error types, durations", (
        "awsworld.settings", "awsworld.authoring.errors", "awsworld.authoring.durations")),
    ("the durable format: values, calls, codecs, child ids as the log stores them", ("awsworld.durable",)),
    ("the World contract: entities, events, protocol, the rulebook, the queue's wire message, schedules', "
     "publications' and deployments' records, schedules' timing and policies, every World's storage and streams", (
        "awsworld.world", "awsworld._http.wire", "awsworld.schedules.policies")),
    ("schedules' model: Schedule, declarations in code", ("awsworld.schedules.model", "awsworld.schedules.declared")),
    ("authoring: what workflow code is written with, and its seam to the engine", (
        "awsworld.authoring", "awsworld.schedules.info")),
    ("the engine: replay without I/O", ("awsworld._engine",)),
    ("published names: what a deployment publishes, and when a start may refuse a name; deployments: a run's pin, the "
     "routing decision, the registry of deployments", ("awsworld._published", "awsworld._deployments")),
    ("the Worlds: in memory and on AWS, with their schedule, publication and deployment stores", (
        "awsworld._memory", "awsworld.aws")),
    ("the worker: a delivery, steps, child runs, starts and wakes, the tick and its schedules job", (
        "awsworld._worker", "awsworld.schedules", "awsworld._http.push", "awsworld._deployments.local_host")),
    ("the client: Client and Run, replay tools, the timeline both viewers draw", (
        "awsworld.client", "awsworld._timeline", "awsworld._deployments.upgrade")),
    ("hosts: the CLI, the Lambda handlers, the emulator, the test environment, the viewer, awsworld serve, the API", (
        "awsworld.cli", "awsworld.lambda_host", "awsworld.local", "awsworld.testing", "awsworld.ui", "awsworld._http",
        "awsworld.lambda_",  # names: keep (old handler paths: aliases)
        "awsworld.deploy",
        "awsworld.examples", "awsworld.__main__", "awsworld.world.conformance_check", "=awsworld")),
]
"""Bottom first. ``=name``: that module only (the package's ``__init__``, which re-exports the public API).
``world.conformance_check`` is a static check over both Worlds (read by pyright, never imported)."""

KNOWN_TYPE_LEVEL_CYCLES: set[frozenset[str]] = set()


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


def _imports(tree: ast.Module, *, type_level: bool = False) -> list[ast.Import | ast.ImportFrom]:
    """Every import statement that runs: at module level, in functions and classes; with ``type_level``, those
    under ``if TYPE_CHECKING:`` too."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node) and not type_level:
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(*, type_level: bool = False) -> dict[str, set[str]]:
    """Module -> the modules of this package it imports (a ``from package import name`` that names a submodule
    counts as importing that submodule); ``type_level``: ``TYPE_CHECKING`` imports included. Built once per session
    and kind (the checks below ask for it seven times); each caller gets its own copy."""
    return {name: set(targets) for name, targets in _import_graph(type_level).items()}


@functools.cache
def _import_graph(type_level: bool) -> dict[str, set[str]]:
    modules = _modules()

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, (path, is_package) in modules.items():
        package = name if is_package else name.rpartition(".")[0]
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), type_level=type_level):
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


def layer_of(module: str) -> int | None:
    """The index in ``LAYERS`` of the layer ``module`` belongs to: its most specific prefix's."""
    best: tuple[int, int] | None = None
    for index, (_, prefixes) in enumerate(LAYERS):
        for prefix in prefixes:
            if prefix.startswith("="):
                if module == prefix[1:]:
                    return index
            elif (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    return None if best is None else best[0]


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a module from a layer above its own."""
    found = []
    for name, targets in graph.items():
        here = layer_of(name)
        for target in targets:
            there = layer_of(target)
            if here is not None and there is not None and there > here:
                found.append(f"{name} ({LAYERS[here][0].split(':')[0]}) -> {target} ({LAYERS[there][0].split(':')[0]})")
    return sorted(found)


def test_the_graph_sees_function_local_and_type_level_imports() -> None:
    graph, typed = import_graph(), import_graph(type_level=True)
    # engine.execution imports authoring.runtime at module level; the CLI's main imports commands lazily;
    # the poller names the AWS World under TYPE_CHECKING only
    assert "awsworld.authoring.runtime" in graph["awsworld._engine.execution"]
    assert "awsworld.cli.runs" in graph["awsworld.cli"]
    assert "awsworld.aws.world" not in graph["awsworld.local.poller"]
    assert "awsworld.aws.world" in typed["awsworld.local.poller"]
    assert len(graph) > 100 and sum(len(targets) for targets in graph.values()) > 300


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_at_run_time() -> None:
    found = cycles(import_graph())
    assert found == [], "import cycles: " + "; ".join(" <-> ".join(sorted(cycle)) for cycle in found)


def test_no_import_cycle_at_type_level() -> None:
    found = [cycle for cycle in cycles(import_graph(type_level=True)) if cycle not in KNOWN_TYPE_LEVEL_CYCLES]
    assert found == [], "type-level import cycles: " + "; ".join(" <-> ".join(sorted(cycle)) for cycle in found)


def test_every_module_has_a_layer_and_every_layer_entry_names_modules() -> None:
    modules = _modules()
    assert sorted(name for name in modules if layer_of(name) is None) == []
    stale = [prefix for _, prefixes in LAYERS for prefix in prefixes
             if not any(name == prefix.lstrip("=") or name.startswith(prefix + ".") for name in modules)]
    assert stale == [], f"layer entries that name no module (moved or removed): {stale}"


def test_the_layers_import_one_way_only() -> None:
    """Authoring never imports the engine, the engine never the worker, the worker never the client...: each layer
    imports its own and the ones below (``LAYERS``), type-level and function-local imports included."""
    assert upward_imports(import_graph(type_level=True)) == []


def test_the_layer_check_catches_an_upward_import() -> None:
    assert upward_imports({"awsworld.authoring.calls": {"awsworld._engine.execution"}}) == [
        "awsworld.authoring.calls (authoring) -> awsworld._engine.execution (the engine)"]
    assert upward_imports({"awsworld._engine.execution": {"awsworld.authoring.calls"}}) == []


def private_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every import of a private module (one whose path has a part starting with ``_``, ``awsworld._engine.x`` or
    ``awsworld._worker._flow``) from outside the package that holds it: the public modules are the documented API,
    and a package's ``_`` modules are its own business, so a cross-package use of one stands out here."""
    found = []
    for name, targets in graph.items():
        for target in targets:
            parts = target.split(".")
            private = [index for index, part in enumerate(parts) if part.startswith("_") and not part.startswith("__")]
            if not private:
                continue
            private_at = private[-1]  # the innermost: ``_engine._loop`` is private to ``_engine``
            owner = ".".join(parts[:private_at])  # the package that holds the private name
            if not (name == owner or name.startswith(owner + ".")):
                found.append(f"{name} -> {target} (private to {owner})")
    return sorted(found)


def test_a_private_module_is_imported_only_from_its_own_package() -> None:
    assert private_imports(import_graph(type_level=True)) == []


ARCHITECTURE_NOTE = SRC.parent / "docs" / "contributing" / "architecture.md"


def test_the_architecture_note_places_every_layer_entry() -> None:
    """The note's diagram lists each layer's entries in a box of its own: every ``LAYERS`` prefix appears in the
    diagram's box of its layer (``awsworld.`` dropped), so a layer entry added, moved or renamed shows up here."""
    diagram = ARCHITECTURE_NOTE.read_text(encoding="utf-8").split("```mermaid", 1)[1].split("```", 1)[0]
    boxes = [line for line in diagram.splitlines() if "<b>" in line]
    assert len(boxes) == len(LAYERS), "one box per layer"
    missing = []
    for box, (title, prefixes) in zip(reversed(boxes), LAYERS, strict=True):
        entries = {entry.strip() for entry in box.split("<br/>", 1)[1].split('"]')[0].split("·")}
        entries = {entry.split(" (")[0] for entry in entries}
        for prefix in prefixes:
            short = prefix.lstrip("=").removeprefix("awsworld.") if prefix != "=awsworld" else "awsworld"
            if short not in entries and not any(short.startswith(entry + ".") for entry in entries):
                missing.append(f"{prefix} ({title.split(':')[0]})")
    assert missing == [], f"layer entries the architecture note's diagram does not place: {missing}"


USER_FACING = ("examples", "handlers", "docs")
"""What a user reads and copies: the docs' snippets, and the handlers ``awsworld init`` writes. They import the
documented API only (``bench/`` and ``tests/`` may reach inside: they measure and test the internals)."""


def test_what_users_copy_imports_only_public_modules() -> None:
    root = SRC.parent
    found = []
    for folder in USER_FACING:
        for path in sorted((root / folder).rglob("*.py")):
            for node in _imports(ast.parse(path.read_text(encoding="utf-8")), type_level=True):
                names = ([alias.name for alias in node.names] if isinstance(node, ast.Import)
                         else [node.module or ""])
                found += [f"{path.relative_to(root)}: {name}" for name in names
                          if name.split(".")[0] == PACKAGE and any(
                              part.startswith("_") and not part.startswith("__") for part in name.split("."))]
    assert found == [], "user-facing code importing a private module: " + "; ".join(found)


def test_the_private_check_catches_a_cross_package_import() -> None:
    assert private_imports({"awsworld.client.client": {"awsworld._worker._flow.loop"}}) == [
        "awsworld.client.client -> awsworld._worker._flow.loop (private to awsworld._worker)"]
    assert private_imports({"awsworld._worker.tick": {"awsworld._worker._flow.loop"},
                            "awsworld.testing": {"awsworld.__main__"}}) == []
    assert private_imports({"awsworld.client.client": {"awsworld._worker.dispatch"}}) == []  # private to awsworld
    assert private_imports({"awsworld.client.client": {"awsworld._worker._flow.loop"}}) == [
        "awsworld.client.client -> awsworld._worker._flow.loop (private to awsworld._worker)"]


if __name__ == "__main__":
    typed_graph = import_graph(type_level=True)
    counts = {index: 0 for index in range(len(LAYERS))}
    for module_name in typed_graph:
        index_of = layer_of(module_name)
        if index_of is not None:
            counts[index_of] += 1
    for index_of in reversed(range(len(LAYERS))):
        print(f"{index_of:2d} {counts[index_of]:3d} modules  {LAYERS[index_of][0]}")
    upward = upward_imports(typed_graph)
    run_time, type_level = cycles(import_graph()), cycles(typed_graph)
    print(f"{len(typed_graph)} modules, {sum(len(t) for t in typed_graph.values())} imports (type-level and "
          f"function-local included): {len(upward)} upward, {len(run_time)} cycles at run time, {len(type_level)} "
          f"at type level ({len([c for c in type_level if c in KNOWN_TYPE_LEVEL_CYCLES])} known)")
    for line in upward:
        print("  upward:", line)
