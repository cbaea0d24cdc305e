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

A path outside this repository (a user's app, another project's source) is listed in ``NOT_OURS``.

The contributor pages (``docs/contributing/``, ``ARCHITECTURE.md``, ``CONTRIBUTING.md``) are checked the same way:
what they name in backticks (a module, a file, a class, a constant, a setting, a test) exists, and a bare file
name in a package's paragraph is in that package (``stale_page_citations``)."""

from __future__ import annotations

import ast
import io
import re
import tokenize
import tomllib
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "src"
PACKAGE = "awsworld"
PACKAGE_DIR = SRC / PACKAGE

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


def _defined_by(node: ast.AST) -> set[str]:
    """The names a definition or an assignment binds (none for any other node)."""
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    if isinstance(node, ast.Assign):
        return {target.id for target in node.targets if isinstance(target, ast.Name)}
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
        return {node.target.id}
    return set()


@cache
def _top_level_names(path: Path) -> frozenset[str]:
    names: set[str] = set()
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if defined := _defined_by(node):
            names.update(defined)
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


# ------------------------------------------------------------------------------------ the contributor pages

CONTRIBUTOR_PAGES = (*sorted((ROOT / "docs" / "contributing").glob("*.md")), ROOT / "ARCHITECTURE.md",
                     ROOT / "CONTRIBUTING.md")
"""The pages a contributor finds their way by: what they cite in backticks is checked like a docstring's citation."""
CODE_SPAN = re.compile(r"`([^`\n]+)`")
BOLD_LEAD = re.compile(r"^\*\*(.+?)\*\*")
NOT_OUR_NAMES = {
    # AWS's names: an SQS attribute, KMS's errors, a DynamoDB transaction's operation
    "DelaySeconds", "DisabledException", "InvalidCiphertextException", "ConditionCheck",
}
NOT_IN_THE_REPOSITORY = {"site/", "DynamoDBLocal.jar"}
"""What a command writes or installs (``mkdocs build``'s folder, ``npm ci``'s DynamoDB Local), cited but not here."""
SEARCHED = ("src", "tests", "bench", "docs/hooks")
"""Where a name a page cites (a class, a constant, a test) must be defined."""


@cache
def _package_dirs() -> dict[str, Path]:
    """``awsworld.world.rules`` -> its folder, for every package."""
    return {".".join(path.parent.relative_to(SRC).parts): path.parent for path in PACKAGE_DIR.rglob("__init__.py")}


@cache
def _defined_names() -> frozenset[str]:
    """Every class, function and assigned name in the repository's Python (at any depth: a class member counts)."""
    names: set[str] = set()
    for folder in SEARCHED:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names.update(_defined_by(node))
    return frozenset(names)


@cache
def _repository_text() -> str:
    """The code and scripts a setting or an environment variable can be named in."""
    files = [path for folder in (*SEARCHED, ".ci") for path in (ROOT / folder).rglob("*") if path.is_file()
             and path.suffix in {".py", ".txt", ".yaml", ""}]
    return "\n".join(path.read_text(encoding="utf-8", errors="ignore") for path in [*files, ROOT / "pyproject.toml"])


def _file_in(cited: str, folders: list[Path]) -> bool:
    return any((folder / cited).exists() or any(folder.rglob(cited)) for folder in folders)


def page_citation_resolves(cited: str, lead: list[Path]) -> bool | None:
    """Whether a page's code span names something that exists; None when it is not a citation (a command, a
    value, a word). ``lead``: the folders of the packages the paragraph is about (its bold lead, ``**`_engine`**``),
    where a bare file name must be; anywhere in the package when the paragraph has none."""
    cited = cited.strip()
    if cited in NOT_OUR_NAMES or cited in NOT_IN_THE_REPOSITORY:
        return True
    if re.fullmatch(r"awsworld(?:\.\w+)+", cited):
        return dotted_resolves(cited)
    if re.fullmatch(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+", cited) and not FILE.fullmatch(cited):
        # a name inside the package, from any package: ``schedules.model``, ``decision.refusals``
        return any(dotted_resolves(f"{package}.{cited}") for package in _package_dirs())
    if re.fullmatch(r"[\w./-]+", cited) and ("/" in cited or FILE.fullmatch(cited)):
        path = cited.rstrip("/")
        if "/" in cited:  # a path: from the root, the package, tests/ or the paragraph's package
            return any((base / path).exists() for base in (ROOT, SRC, PACKAGE_DIR, ROOT / "tests", *lead))
        return _file_in(path, lead or [PACKAGE_DIR, ROOT / "tests"]) or (not lead and (ROOT / path).exists())
    if re.fullmatch(r"test_\w+|[A-Z][a-z]+[A-Z]\w*", cited):  # a test, a CamelCase class (``MemoryWorld``)
        return cited in _defined_names()
    if re.fullmatch(r"\$?[A-Z][A-Z0-9]*_[A-Z0-9_]+|\$?[A-Z]+[0-9]+", cited):
        return cited.lstrip("$") in _repository_text()
    return None


def _lead_folders(paragraph: str) -> list[Path]:
    lead = BOLD_LEAD.match(paragraph)
    if lead is None:
        return []
    folders = []
    for name in CODE_SPAN.findall(lead.group(1)):
        dotted = f"{PACKAGE}.{name}"
        if dotted in _package_dirs():
            folders.append(_package_dirs()[dotted])
        elif (module := _module_file(dotted)) is not None:
            folders.append(module.parent)
    return folders


def stale_page_citations() -> list[str]:
    stale: list[str] = []
    for page in CONTRIBUTOR_PAGES:
        where = page.relative_to(ROOT)
        text = page.read_text(encoding="utf-8")
        line = 1
        for paragraph in re.split(r"(\n\s*\n)", text):
            lead = _lead_folders(paragraph)
            for offset, cited in _cited(paragraph, CODE_SPAN):
                if page_citation_resolves(cited, lead) is False:
                    stale.append(f"{where}:{line + offset}: {cited}")
            if "```mermaid" in paragraph:
                for offset, box in _cited(paragraph, re.compile(r"<br/>([^\"]+)\"\]")):
                    for entry in box.split("·"):
                        name = entry.split(" (")[0].strip()
                        if name != PACKAGE and _module_file(f"{PACKAGE}.{name}") is None:
                            stale.append(f"{where}:{line + offset}: {name} (the diagram)")
            line += paragraph.count("\n")
    return stale


def test_every_name_and_path_the_contributor_pages_cite_exists() -> None:
    """A module, a dotted name, a file or folder, a class, a constant, a setting or a test the contributing pages
    name in backticks exists, and a bare file name in a package's paragraph is in that package."""
    stale = stale_page_citations()
    assert stale == [], "the contributor pages cite what does not exist (moved or removed):\n" + "\n".join(stale)


def test_the_page_check_catches_what_moved() -> None:
    engine = [PACKAGE_DIR / "_engine"]
    assert page_citation_resolves("execution.py", engine) is True
    assert page_citation_resolves("delivery.py", engine) is False  # the worker's, not the engine's
    assert page_citation_resolves("world/_published.py", []) is False
    assert page_citation_resolves("awsworld.client.messages", []) is False
    assert page_citation_resolves("schedules.model", []) is True
    assert page_citation_resolves("NoSuchWorld", []) is False
    assert page_citation_resolves("LONGEST_FILES_FIRST", []) is True
    assert page_citation_resolves("pip install -e '.[test]'", []) is None


def test_every_path_the_type_checkers_configuration_names_exists() -> None:
    """pyproject's ``[tool.pyright]`` paths (``include``, ``strict``, each environment's root and ``extraPaths``): a
    renamed folder left there is not an error to pyright, it just stops checking it (``src/awsworld/engine`` kept
    the engine out of strict mode after it became ``_engine``)."""
    pyright = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["pyright"]
    named = [*pyright["include"], *pyright["strict"]]
    for environment in pyright.get("executionEnvironments", []):
        named += [environment["root"], *environment.get("extraPaths", [])]
    assert len(named) > 10 and [path for path in named if not (ROOT / path).exists()] == []
