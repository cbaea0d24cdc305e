"""Test files written as a user writes them (``tests/testing/user_suites/``), each run by pytest in a fresh process in
an empty directory, as a user's project runs them: the plugin comes from the entry point, pytest-asyncio is in its
default strict mode, and what a test asserts is what the user sees (a wait that raises instead of hanging, an error
that keeps its type)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SUITES = Path(__file__).parent / "user_suites"


def run_user_suite(tmp_path: Path, name: str) -> dict[str, str]:
    """Each test's outcome (``PASSED``, ``FAILED``...), by name, from ``pytest -rA`` on the suite copied alone into
    ``tmp_path``."""
    shutil.copy(SUITES / name, tmp_path / name)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist",
                           name], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    outcomes = dict((m[2], m[1]) for m in re.finditer(r"^(PASSED|FAILED|ERROR|SKIPPED) \S+::(\w+)", done.stdout, re.M))
    assert outcomes, done.stdout + done.stderr
    return outcomes


def assert_all_pass(tmp_path: Path, name: str) -> None:
    outcomes = run_user_suite(tmp_path, name)
    source = (SUITES / name).read_text()
    expected = set(re.findall(r"^async def (test_\w+)|^def (test_\w+)", source, re.M))
    names = {a or b for a, b in expected}
    assert outcomes == dict.fromkeys(names, "PASSED"), outcomes


@pytest.mark.timeout(300)
def test_waits_nothing_can_end_fail_naming_what_the_run_waits_on(tmp_path: Path) -> None:
    assert_all_pass(tmp_path, "test_stalls.py")


@pytest.mark.timeout(300)
def test_a_failed_runs_result_raises_the_type_it_failed_with_on_memory_and_moto(tmp_path: Path) -> None:
    assert_all_pass(tmp_path, "test_typed_errors.py")
