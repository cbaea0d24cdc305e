"""Every path a docstring or a comment in src/awsworld cites exists, so a reader who follows one lands somewhere.

Three kinds of citation are checked (in docstrings, attribute docstrings and ``#`` comments; string values a
program uses are not citations):

- a dotted path ``awsworld.x.y``: a module, or an attribute of one (``awsworld.client.replay.replay_history``);
  resolved from the source (an ast walk of the module's top-level names), so nothing is imported;
- a file path with a folder, ``src/awsworld/_worker/dispatch.py``, ``tests/...``, ``bench/...``, ``docs/...``, or a
  path inside the package (``_worker/dispatch.py``, ``world/rules/``): found from the repository's root, from
  ``src/``, from ``src/awsworld/`` or from the citing module's folder;
- a bare file name, ``dispatch.py``: found in the citing module's own folder, one of its subfolders, or its parent
  package's folder.

A path outside this repository (a user's app, another project's source) is listed in ``NOT_OURS``."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE_DIR = SRC / "awsworld"

DOTTED = re.compile(r"(?<![\w.$])awsworld(?:\.[A-Za-z_]\w*)+(?![\w:])")
"""``awsworld.x.y``; not ``$awsworld.parked`` (a reserved run attribute) nor ``awsworld.child:`` (a token prefix)."""
SUBPACKAGES = sorted(path.parent.name for path in (Path(__file__).resolve().parent.parent / "src" / "awsworld").glob(
    "*/__init__.py"))
RELATIVE_DOTTED = re.compile(r"``((?:" + "|".join(SUBPACKAGES) + r")(?:\.[A-Za-z_]\w*)+)``")
"""A path inside the package in double backticks, ``_worker.dispatch.Worker``: cited as ``awsworld.`` + it."""
FILE = re.compile(r"(?<![\w./-])((?:[\w.-]+/)*[\w-]+\.(?:py|md|yaml|yml|toml|json|jsonl|txt|ts|mjs|sh|cfg))\b")
FOLDER = re.compile(r"(?<![\w./-])((?:src|tests|bench|docs|examples|handlers|infra|packages)(?:/[\w-]+)+)(?![\w.-])")
"""A folder: ``tests/deploy``; not a SAM handler string (``handlers/flow.handler``)."""

NOT_OURS = {
    # other projects' sources, cited as models
    "temporalio/workflow.py",
    # a user's app, in examples of what `awsworld init` and the CLI read
    "src/webhook.py", "src/flow.py", "src/myapp/orders.py", "myapp/workflows.py", "orders.py", "tasks.py",
    "hooks.py", "script.py", "flow.py", "webhook.py", "serve.py", "app.py",
    # files a program writes or reads at run time, not in this repository
    "pyproject.toml", "samconfig.toml", "requirements.txt", "package.json", "template.yaml", "config.json",
    "src/requirements.txt", "direct_url.json", "tests/histories", "tests/histories/checkout.jsonl",
}


def _sources() -> list[Path]:
    return sorted(PACKAGE_DIR.rglob("*.py"))


def _yaml_comments() -> list[tuple[Path, int, str]]:
    """The ``#`` comments of the SAM templates shipped in the package (they cite the modules each function runs)."""
    return [(path, number, line) for path in sorted(PACKAGE_DIR.rglob("*.yaml"))
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if line.lstrip().startswith("#")]


def citations(source: str) -> list[tuple[int, str]]:
    """(line, text) of every docstring and comment in ``source``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.append((node.lineno, node.value.value))
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            found.append((token.start[0], token.string))
    return found


@cache
def _module_file(module: str) -> Path | None:
    base = SRC.joinpath(*module.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


@cache
def _top_level_names(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((alias.asname or alias.name).split(".")[0] for alias in node.names)
        elif isinstance(node, ast.If | ast.Try):
            for child in ast.walk(node):
                if isinstance(child, ast.ImportFrom | ast.Import):
                    names.update((alias.asname or alias.name).split(".")[0] for alias in child.names)
                elif isinstance(child, ast.FunctionDef | ast.ClassDef):
                    names.add(child.name)
    return frozenset(names)


@cache
def _class_members(path: Path, class_name: str) -> frozenset[str]:
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            members: set[str] = set()
            for child in ast.walk(node):
                if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                    members.add(child.name)
                elif isinstance(child, ast.AnnAssign) and isinstance(child.target, ast.Name):
                    members.add(child.target.id)
                elif isinstance(child, ast.Assign):
                    members.update(target.id for target in child.targets if isinstance(target, ast.Name))
                elif (isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name)
                      and child.value.id == "self"):
                    members.add(child.attr)
            return frozenset(members)
    return frozenset()


def dotted_resolves(dotted: str) -> bool:
    """A module, or a module's top-level name, or (one level further) a member of a class of a module."""
    parts = dotted.rstrip(".").split(".")
    for cut in range(len(parts), 0, -1):
        path = _module_file(".".join(parts[:cut]))
        if path is None:
            continue
        rest = parts[cut:]
        if not rest:
            return True
        if rest[0] not in _top_level_names(path):
            return False
        return len(rest) == 1 or (len(rest) == 2 and rest[1] in _class_members(path, rest[0]))
    return False


def file_resolves(cited: str, citing: Path) -> bool:
    cited = cited.rstrip("/")
    if cited in NOT_OURS:
        return True
    if "/" in cited:
        return any((base / cited).exists() for base in (ROOT, SRC, PACKAGE_DIR, citing.parent))
    folder = citing.parent
    return (folder / cited).exists() or any(folder.rglob(cited)) or (folder.parent / cited).exists()


@cache
def logger_names() -> frozenset[str]:
    """The loggers the package logs on (``logging.getLogger("awsworld.queue")``): a docstring names them as such."""
    found = set()
    for path in _sources():
        found.update(re.findall(r"getLogger\(\"(awsworld[\w.]*)\"\)", path.read_text(encoding="utf-8")))
    return frozenset(found)


ATTRIBUTES_NOT_MODULES = {
    # a World's members (``world.runs``, ``world.memory_queue``), a Client's (``client.schedules``) or a boto3
    # client's (``client.put_item``), ``LocalAWS``'s (``local.client``), an ASGI message type (``http.disconnect``)
    "world.runs", "world.steps", "world.hooks", "world.schedules", "world.deployments", "world.published",
    "world.published.read", "world.memory_queue", "client.options", "client.put_item", "client.resume_hook",
    "client.schedules", "local.client", "http.disconnect",
}


def _cited(text: str, pattern: re.Pattern[str]) -> list[tuple[int, str]]:
    """(line offset within ``text``, citation) of each match."""
    return [(text.count("\n", 0, match.start()), match.group(1) if pattern.groups else match.group(0))
            for match in pattern.finditer(text)]


def stale_citations() -> list[str]:
    stale: list[str] = []
    for path in _sources():
        where = path.relative_to(ROOT)
        package = ".".join(path.relative_to(SRC).parts[:2])
        for line, text in citations(path.read_text(encoding="utf-8")):
            for offset, dotted in _cited(text, DOTTED):
                if dotted not in logger_names() and not dotted_resolves(dotted):
                    stale.append(f"{where}:{line + offset}: {dotted}")
            for offset, relative in _cited(text, RELATIVE_DOTTED):
                if relative not in ATTRIBUTES_NOT_MODULES and not (
                        dotted_resolves("awsworld." + relative) or dotted_resolves(f"{package}.{relative}")):
                    stale.append(f"{where}:{line + offset}: {relative}")
            for offset, cited in _cited(text, FILE) + _cited(text, FOLDER):
                if not file_resolves(cited, path):
                    stale.append(f"{where}:{line + offset}: {cited}")
    for path, line, text in _yaml_comments():
        for _, cited in _cited(text, FILE) + _cited(text, FOLDER):
            if "/" in cited and not file_resolves(cited, path):
                stale.append(f"{path.relative_to(ROOT)}:{line}: {cited}")
    return stale


def test_every_path_a_docstring_or_comment_cites_exists() -> None:
    stale = stale_citations()
    assert stale == [], "citations of paths that do not exist (moved or removed):\n" + "\n".join(stale)


def test_the_check_catches_a_moved_module_a_missing_name_and_a_missing_file() -> None:
    here = PACKAGE_DIR / "client" / "replay.py"
    assert dotted_resolves("awsworld.client.replay") and dotted_resolves("awsworld.client.replay.replay_run")
    assert not dotted_resolves("awsworld.client.no_such_module")
    assert not dotted_resolves("awsworld.client.replay.no_such_name")
    assert file_resolves("src/awsworld/client/replay.py", here)
    assert file_resolves("client/replay.py", here) and file_resolves("http_client.py", here)
    assert not file_resolves("client/no_such_module.py", here)
    assert not file_resolves("no_such_module.py", here)
    assert [cited for _, cited in _cited("see ``client.no_such_module`` and ``client.replay``", RELATIVE_DOTTED)] == [
        "client.no_such_module", "client.replay"]
    assert [text for _, text in citations('"""doc awsworld.x"""\nx = 1  # see a/b.py\n')] == [
        "doc awsworld.x", "# see a/b.py"]


if __name__ == "__main__":
    print("\n".join(stale_citations()))
