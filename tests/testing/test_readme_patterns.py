"""The README's "Patterns" examples, run as a user would: every block between ``<!-- pattern:NAME:begin -->`` and
``<!-- pattern:NAME:end -->`` saved as its own test module in one empty directory (no conftest, no pytest
configuration: pytest-asyncio in its default strict mode) and all of them run by one pytest process in a fresh
interpreter, which finds the ``awsworld_env`` fixture through the package's entry point. So the blocks also
share a registry, as they would in one user's test session. The outcome is reported per pattern, so a failure
names the pattern that broke."""

from __future__ import annotations

import re
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCK = re.compile(r"<!-- pattern:([a-z0-9-]+):begin -->\s*```python\n(.*?)```\s*<!-- pattern:\1:end -->", re.S)
MARKER = re.compile(r"<!-- pattern:([a-z0-9-]+):(?:begin|end) -->")

TESTS_PER_PATTERN = {  # what each block holds: a block that silently lost a test fails here too
    "fan-out": 2,
    "saga": 2,
    "approval": 2,
    "child-workflows": 1,
    "polling": 2,
}


@dataclass(frozen=True)
class Outcome:
    test: str
    status: str  # passed, failed, error, skipped
    detail: str


@dataclass(frozen=True)
class Session:
    outcomes: dict[str, list[Outcome]]  # by pattern
    output: str


def module_of(pattern: str) -> str:
    return "test_pattern_" + pattern.replace("-", "_")


def blocks() -> dict[str, str]:
    text = README.read_text()
    found: dict[str, str] = {}
    for name, code in BLOCK.findall(text):
        assert name not in found, f"README.md has two pattern:{name} blocks"
        found[name] = code
    return found


@pytest.fixture(scope="module")
def session(tmp_path_factory: pytest.TempPathFactory) -> Session:
    """Every block saved and run by one pytest process; each test's outcome, grouped by pattern."""
    workdir = tmp_path_factory.mktemp("patterns")
    modules = {module_of(name): name for name in blocks()}
    for module, name in modules.items():
        (workdir / f"{module}.py").write_text(blocks()[name])
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=report.xml",
               "--continue-on-collection-errors",  # a block that fails to import leaves the others running
               *sorted(f"{module}.py" for module in modules)]
    done = subprocess.run(command, cwd=workdir, capture_output=True, text=True, timeout=300)
    output = done.stdout + done.stderr
    report = workdir / "report.xml"
    assert report.exists(), f"pytest wrote no report:\n{output}"
    outcomes: dict[str, list[Outcome]] = {name: [] for name in modules.values()}
    for case in ElementTree.parse(report).iter("testcase"):
        # A test's classname is its module; a module that failed to import is a case named after the module.
        name = modules.get(case.get("classname") or case.get("name", ""))
        assert name is not None, f"a test outside the patterns: {case.attrib}\n{output}"
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        status = "passed" if problem is None else {"failure": "failed"}.get(problem.tag, problem.tag)
        detail = "" if problem is None else (problem.get("message") or "") + "\n" + (problem.text or "")
        outcomes[name].append(Outcome(case.get("name", ""), status, detail))
    return Session(outcomes, output)


def test_the_readme_has_every_pattern_and_no_other() -> None:
    text = README.read_text()
    names = blocks()
    assert sorted(names) == sorted(TESTS_PER_PATTERN), "README.md's pattern blocks changed: update TESTS_PER_PATTERN"
    assert sorted(set(MARKER.findall(text))) == sorted(names), "a pattern marker without its matching block"


@pytest.mark.parametrize("pattern", list(TESTS_PER_PATTERN))
def test_the_pattern_passes_as_written(session: Session, pattern: str) -> None:
    outcomes = session.outcomes.get(pattern)
    assert outcomes is not None, f"README.md has no pattern:{pattern} block"
    broken = [o for o in outcomes if o.status != "passed"]
    assert not broken, f"pattern {pattern}:\n" + "\n\n".join(f"{o.test}: {o.status}\n{o.detail}" for o in broken)
    assert len(outcomes) == TESTS_PER_PATTERN[pattern], f"pattern {pattern} ran {[o.test for o in outcomes]}"


def test_all_patterns_ran_in_one_process(session: Session) -> None:
    summary = [line for line in session.output.splitlines() if re.search(r"\d+ (passed|failed|errors?) ", line)]
    assert summary, session.output
    assert re.fullmatch(rf"=* ?{sum(TESTS_PER_PATTERN.values())} passed(, \d+ warnings?)? in .*", summary[-1]), (
        session.output)
