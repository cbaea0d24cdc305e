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


def run_user_suite(tmp_path: Path, name: str, ini: str | None = None) -> tuple[dict[str, str], str]:
    """Each test's outcome (``PASSED``, ``FAILED``, ``ERROR``...) by its name with parameters, from ``pytest -rA`` on
    the suite copied alone into ``tmp_path`` (with ``ini``, the body of its ``pytest.ini``), and pytest's output."""
    shutil.copy(SUITES / name, tmp_path / name)
    if ini is not None:
        (tmp_path / "pytest.ini").write_text(f"[pytest]\n{ini}\n")
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-rA", "-p", "no:cacheprovider", "-p", "no:xdist",
                           name], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    outcomes = {m[2]: m[1] for m in re.finditer(r"^(PASSED|FAILED|ERROR|SKIPPED) \S+::(\S+)", done.stdout, re.M)}
    assert outcomes, done.stdout + done.stderr
    return outcomes, done.stdout + done.stderr


def assert_all_pass(tmp_path: Path, name: str, ini: str | None = None) -> None:
    outcomes, output = run_user_suite(tmp_path, name, ini)
    source = (SUITES / name).read_text()
    defined = {a or b for a, b in re.findall(r"^async def (test_\w+)|^def (test_\w+)", source, re.M)}
    assert {test.split("[")[0] for test in outcomes} == defined and set(outcomes.values()) == {"PASSED"}, output


@pytest.mark.timeout(300)
def test_waits_nothing_can_end_fail_naming_what_the_run_waits_on(tmp_path: Path) -> None:
    assert_all_pass(tmp_path, "test_stalls.py")


@pytest.mark.timeout(300)
def test_a_failed_runs_result_raises_the_type_it_failed_with_on_memory_and_moto(tmp_path: Path) -> None:
    assert_all_pass(tmp_path, "test_typed_errors.py")


@pytest.mark.timeout(300)
def test_a_sync_test_asking_for_the_async_fixtures_errors_saying_what_to_do(tmp_path: Path) -> None:
    outcomes, output = run_user_suite(tmp_path, "test_sync_tests.py")
    assert outcomes == {
        "test_a_sync_test_asking_for_awsworld_env": "ERROR", "test_a_sync_test_asking_for_awsworld_local": "ERROR",
        "test_a_sync_test_with_its_own_env": "PASSED", "test_an_async_test_through_a_sync_fixture[memory]": "PASSED",
        "test_an_async_test_through_a_sync_fixture[moto]": "PASSED"}, output
    for fixture in ("awsworld_env", "awsworld_local"):
        assert f"{fixture} needs an async test: test_a_sync_test_asking_for_{fixture} is a plain def" in output, output


@pytest.mark.timeout(300)
def test_an_unmarked_async_test_in_strict_mode_errors_saying_to_mark_it(tmp_path: Path) -> None:
    outcomes, output = run_user_suite(tmp_path, "test_unmarked.py")
    assert outcomes == {"test_an_unmarked_async_test": "ERROR", "test_a_marked_async_test": "PASSED"}, output
    assert ("awsworld_env: no plugin runs test_an_unmarked_async_test, an async def test: pytest-asyncio (installed) "
            "runs only the tests marked @pytest.mark.asyncio") in output, output


@pytest.mark.timeout(300)
def test_a_resume_waiting_for_its_hook_skips_time_as_wait_for_hook_does(tmp_path: Path) -> None:
    assert_all_pass(tmp_path, "test_resume_waits.py")


@pytest.mark.timeout(300)
def test_two_tests_defining_one_workflow_name_are_told_apart(tmp_path: Path) -> None:
    assert_all_pass(tmp_path, "test_local_definitions.py")


@pytest.mark.timeout(300)
def test_an_env_shared_across_tests_works_on_one_loop_and_says_so_on_two(tmp_path: Path) -> None:
    assert_all_pass(tmp_path, "test_shared_env.py")


@pytest.mark.timeout(300)
def test_an_emulator_shared_across_tests_works_on_one_loop_and_says_so_on_two(tmp_path: Path) -> None:
    assert_all_pass(tmp_path, "test_shared_local.py")


@pytest.mark.timeout(300)
def test_the_fixture_starts_on_the_loop_the_test_runs_in_whatever_its_scope(tmp_path: Path) -> None:
    assert_all_pass(tmp_path, "test_loop_scopes.py", "asyncio_default_test_loop_scope = session")


@pytest.mark.timeout(300)
@pytest.mark.parametrize("ini", ["asyncio_mode = auto", "asyncio_mode = strict",
                                 "asyncio_mode = auto\nasyncio_default_test_loop_scope = session",
                                 "asyncio_mode = strict\nanyio_mode = auto"])
def test_the_fixtures_start_on_the_loop_of_anyio_marked_tests_too(tmp_path: Path, ini: str) -> None:
    assert_all_pass(tmp_path, "test_anyio.py", ini)


@pytest.mark.timeout(300)
def test_an_async_fixture_on_another_loop_than_the_environment_is_told_which_setting(tmp_path: Path) -> None:
    assert_all_pass(tmp_path, "test_fixture_loop_scope.py", "asyncio_default_fixture_loop_scope = session")
