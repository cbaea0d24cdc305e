"""The public API's types, as a user's type checker sees them, in the strict modes a demanding user's CI runs:
pyright (``npx pyright``, pinned in package.json; the sample opts into strict itself) checks ``sample_usage.py``
and must reveal exactly the types its ``# reveal:`` comments name and report exactly the errors its
``# expected-error:`` comments list; ``mypy --strict`` (the ``test`` extra installs it) must reject exactly those
lines too and accept every other one, ``assert_type`` included."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tokenize
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = Path(__file__).with_name("sample_usage.py")

REVEAL = re.compile(r"^#\s*reveal:\s*(?P<type>.+?)\s*$")
EXPECTED_ERROR = re.compile(r"^#\s*expected-error:\s*(?P<rules>.+?)\s*$")
REVEALED = re.compile(r'^Type of "(?P<expression>.*)" is "(?P<type>.*)"$', re.DOTALL)
MYPY_ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<message>.*)$")


def _expectations() -> tuple[dict[int, str], Counter[tuple[int, str]]]:
    reveals: dict[int, str] = {}
    errors: Counter[tuple[int, str]] = Counter()
    with SAMPLE.open("rb") as source:
        comments = [(t.start[0], t.string) for t in tokenize.tokenize(source.readline) if t.type == tokenize.COMMENT]
    for number, comment in comments:
        if match := REVEAL.match(comment):
            reveals[number] = match["type"]
        if match := EXPECTED_ERROR.match(comment):
            for rule in match["rules"].split(","):
                errors[number, rule.strip()] += 1
    return reveals, errors


@pytest.fixture(scope="module")
def diagnostics() -> list[dict]:
    if shutil.which("node") is None or shutil.which("npx") is None:
        pytest.skip("node/npx not found: pyright (package.json devDependencies) runs on Node.js")
    if not (ROOT / "node_modules" / "pyright").is_dir():
        pytest.fail("pyright is not installed: run `npm ci` in the repository root (package.json pins it)")
    command = ["npx", "--no", "--", "pyright", "--outputjson", str(SAMPLE.relative_to(ROOT))]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    try:
        report = json.loads(done.stdout)
    except json.JSONDecodeError:
        pytest.fail(f"{' '.join(command)} exited {done.returncode} without a JSON report:\n"
                    f"{done.stdout[-2000:]}\n{done.stderr[-2000:]}")
    assert report["summary"]["filesAnalyzed"] == 1, report["summary"]
    return [d for d in report["generalDiagnostics"] if Path(d["file"]).resolve() == SAMPLE]


def _line(diagnostic: dict) -> int:
    return diagnostic["range"]["start"]["line"] + 1


def test_pyright_reveals_the_types_of_workflows_steps_runs_and_results(diagnostics: list[dict]) -> None:
    expected, _ = _expectations()
    assert len(expected) >= 8
    revealed: dict[int, str] = {}
    for diagnostic in diagnostics:
        if diagnostic["severity"] == "information" and (match := REVEALED.match(diagnostic["message"])):
            revealed[_line(diagnostic)] = match["type"]
    assert revealed == expected


def test_pyright_reports_exactly_the_expected_errors(diagnostics: list[dict]) -> None:
    _, expected = _expectations()
    assert sum(expected.values()) >= 6
    found = Counter((_line(d), d.get("rule", "")) for d in diagnostics if d["severity"] == "error")
    messages = "\n".join(f"{_line(d)}: [{d.get('rule')}] {d['message']}" for d in diagnostics
                         if d["severity"] in ("error", "warning"))
    assert found == expected, messages
    assert not [d for d in diagnostics if d["severity"] == "warning"], messages
    [wrong_argument] = [d for d in diagnostics if "not an int" in d["message"]]
    assert 'parameter "x" of type "int"' in wrong_argument["message"]
    # A step or a plain function where a workflow goes (Client.start, list_runs, schedules.create, start_child,
    # child_options().call, WorkflowTestEnv(schedules=)) is told so: Client.start's Workflow overload comes last,
    # the one pyright explains.
    not_workflows = {_line(d) for d in diagnostics if '"__awsworld_workflow__" is not present' in d["message"]}
    assert len(not_workflows) == 7, messages


def test_mypy_strict_rejects_exactly_the_lines_pyright_must(tmp_path_factory: pytest.TempPathFactory) -> None:
    """mypy's messages and codes are its own, so the lines are compared, not the rules: a mistake one checker
    misses, or a line only one rejects (a false positive a user would have to silence), fails here."""
    _, expected = _expectations()
    try:
        import mypy  # noqa: F401  (run as a process below: mypy's API is not typed for pyright)
    except ImportError:
        pytest.fail("mypy is not installed: pip install -e '.[test]' (pyproject.toml's test extra has it)")
    cache = tmp_path_factory.mktemp("mypy-cache")
    command = [sys.executable, "-m", "mypy", "--strict", "--no-error-summary", "--cache-dir", str(cache),
               "--config-file", str(cache / "none.ini"), SAMPLE.name]
    (cache / "none.ini").write_text("[mypy]\n", encoding="utf-8")  # the repository's settings are not a user's
    done = subprocess.run(command, cwd=SAMPLE.parent, capture_output=True, text=True, timeout=300, check=False)
    errors = [match for line in done.stdout.splitlines() if (match := MYPY_ERROR.match(line))]
    assert done.returncode in (0, 1) and (errors or done.returncode == 0), done.stdout[-2000:] + done.stderr[-2000:]
    assert {match["file"] for match in errors} <= {SAMPLE.name}
    found = {int(match["line"]) for match in errors}
    messages = "\n".join(match.string for match in errors)
    assert found == {line for line, _ in expected}, messages
