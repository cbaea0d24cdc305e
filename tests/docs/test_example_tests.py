"""The examples' test files (``examples/**/test_*.py``: the first test, the patterns, the replay check), run as a
user would: every example module copied into one empty directory (no conftest, no pytest configuration:
pytest-asyncio in its default strict mode) and all the tests run by one pytest process in a fresh interpreter,
which finds the ``awsworld_env`` fixture through the package's entry point. So the examples also share a registry,
as they would in one user's test session. Outcomes are reported per file, so a failure names the example."""

from __future__ import annotations

import ast
import asyncio
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import pytest

from .test_examples import EXAMPLES, load

TESTS_PER_FILE = {  # what each file holds: a file that silently lost a test fails here too
    "get_started/test_orders.py": 1,
    "patterns/test_invoices.py": 2,
    "patterns/test_trips.py": 4,
    "patterns/test_expenses.py": 2,
    "patterns/test_billing.py": 1,
    "patterns/test_exports.py": 2,
    "how_to/test_replay.py": 1,
    "how_to/test_upgrade.py": 1,
    "how_to/test_errors.py": 5,
    "get_started/test_shipping.py": 2,
}


@dataclass(frozen=True)
class Outcome:
    test: str
    status: str  # passed, failed, error, skipped
    detail: str


@dataclass(frozen=True)
class Session:
    outcomes: dict[str, list[Outcome]]  # by file, relative to examples/
    output: str


def example_test_files() -> list[str]:
    return sorted(str(p.relative_to(EXAMPLES)) for p in EXAMPLES.rglob("test_*.py"))


@pytest.fixture(scope="module")
async def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """Every example copied flat into one directory, with the history the replay example reads (a run of the
    patched checkout, as ``awsworld export`` writes it); every test file run by one pytest process."""
    workdir = tmp_path_factory.mktemp("examples")
    for path in EXAMPLES.rglob("*.py"):
        shutil.copy(path, workdir / path.name)
    lines = await load(EXAMPLES / "how_to" / "patched_checkout.py").main()
    (workdir / "histories").mkdir()
    (workdir / "histories" / "checkout.jsonl").write_text("".join(f"{line}\n" for line in lines))
    by_module = {Path(name).stem: name for name in example_test_files()}
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=report.xml",
               "--continue-on-collection-errors",  # a file that fails to import leaves the others running
               *sorted(f"{module}.py" for module in by_module)]
    done = await asyncio.to_thread(subprocess.run, command, cwd=workdir, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    report = workdir / "report.xml"
    assert report.exists(), f"pytest wrote no report:\n{output}"
    outcomes: dict[str, list[Outcome]] = {name: [] for name in by_module.values()}
    for case in ElementTree.parse(report).iter("testcase"):
        # A test's classname is its module; a module that failed to import is a case named after the module.
        name = by_module.get(case.get("classname") or case.get("name", ""))
        assert name is not None, f"a test outside the examples: {case.attrib}\n{output}"
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        status = "passed" if problem is None else {"failure": "failed"}.get(problem.tag, problem.tag)
        detail = "" if problem is None else (problem.get("message") or "") + "\n" + (problem.text or "")
        outcomes[name].append(Outcome(case.get("name", ""), status, detail))
    return Session(outcomes, output)


def test_every_example_test_file_is_counted() -> None:
    assert example_test_files() == sorted(TESTS_PER_FILE), "examples' test files changed: update TESTS_PER_FILE"


@pytest.mark.parametrize("name", list(TESTS_PER_FILE))
def test_the_example_passes_as_written(session: Session, name: str) -> None:
    outcomes = session.outcomes.get(name)
    assert outcomes is not None, f"examples/{name} did not run"
    broken = [o for o in outcomes if o.status != "passed"]
    assert not broken, f"examples/{name}:\n" + "\n\n".join(f"{o.test}: {o.status}\n{o.detail}" for o in broken)
    assert len(outcomes) == TESTS_PER_FILE[name], f"examples/{name} ran {[o.test for o in outcomes]}"


def test_all_ran_in_one_process(session: Session) -> None:
    summary = [line for line in session.output.splitlines() if re.search(r"\d+ (passed|failed|errors?) ", line)]
    assert summary, session.output
    assert re.fullmatch(rf"=* ?{sum(TESTS_PER_FILE.values())} passed(, \d+ warnings?)? in .*", summary[-1]), (
        session.output)


GET_STARTED_IMPORTS = {"awsworld", "pytest", "pytest_asyncio"}
"""What ``awsworld[local,testing]`` (Get started / Install) installs that the Get started examples may import."""


def test_the_get_started_examples_import_only_what_the_install_page_installs() -> None:
    """A newcomer copies a Get started file into a venv holding ``awsworld[local,testing]`` and runs it:
    ``shipping.py`` imported httpx, which no extra of that install brings (``ModuleNotFoundError`` at the first
    run). Every top-level module its files import is the standard library's, one of ``GET_STARTED_IMPORTS``, or
    another Get started file."""
    folder = EXAMPLES / "get_started"
    own = {path.stem for path in folder.glob("*.py")}
    found: dict[str, set[str]] = {}
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [alias.name for alias in node.names] if isinstance(node, ast.Import) else \
                [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else []
            for name in names:
                top = name.split(".")[0]
                if top not in sys.stdlib_module_names and top not in GET_STARTED_IMPORTS | own:
                    found.setdefault(path.name, set()).add(top)
    assert found == {}, f"Get started examples import what awsworld[local,testing] does not install: {found}"
