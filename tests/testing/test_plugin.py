"""The pytest plugin as the package registers it: both fixtures, through the entry point, and a user's project
that never set pytest-asyncio's ``asyncio_default_fixture_loop_scope`` sees no warning about it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from awsworld import step, workflow
from awsworld.aws import AWSWorld
from awsworld.local import LocalAWS
from awsworld.testing import MemoryWorld, WorkflowTestEnv


@step
async def double(n: int) -> int:
    return 2 * n


@workflow
async def doubled(n: int) -> int:
    return await double(n)


def test_the_plugin_is_registered_by_the_entry_point(pytestconfig: pytest.Config) -> None:
    plugin = pytestconfig.pluginmanager.get_plugin("awsworld")
    assert plugin is not None and plugin.__name__ == "awsworld.testing.pytest_plugin"


async def test_awsworld_env_is_in_memory(awsworld_env: WorkflowTestEnv) -> None:
    assert isinstance(awsworld_env.world, MemoryWorld)
    run = await awsworld_env.client.start(doubled, 21)
    assert await run.result() == 42


async def test_awsworld_local_runs_on_the_emulator(awsworld_local: LocalAWS) -> None:
    assert isinstance(awsworld_local.world, AWSWorld)
    assert awsworld_local.world.config.endpoint_url.startswith("http://127.0.0.1:")
    assert awsworld_local.client is not None
    run = await awsworld_local.client.start(doubled, 4)
    assert await run.result(timeout=30) == 8


USER_TESTS = """
import asyncio

import pytest
import pytest_asyncio

from awsworld import step, workflow


@step
async def add_one(n: int) -> int:
    return n + 1


@workflow(name="user.plus_one")
async def plus_one(n: int) -> int:
    return await add_one(n)


@pytest_asyncio.fixture(scope="module")
async def module_loop():
    # A module-scoped async fixture of the user's own, with no loop_scope: it runs on a loop of its own scope, as
    # pytest-asyncio does while the option is unset (had the plugin set the option to "function", this fixture
    # would fail with ScopeMismatch).
    yield asyncio.get_running_loop()


@pytest.mark.asyncio
async def test_plus_one(awsworld_env, module_loop):
    run = await awsworld_env.client.start(plus_one, 1)
    assert await run.result() == 2
    assert module_loop is not None
"""


def test_a_user_project_without_the_option_sees_no_loop_scope_warning(tmp_path: Path) -> None:
    # An empty project (no configuration at all: pytest-asyncio in strict mode), run by pytest in a fresh process.
    (tmp_path / "test_user.py").write_text(USER_TESTS)
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_user.py"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=120)
    output = done.stdout + done.stderr
    assert done.returncode == 0 and "1 passed" in done.stdout, output
    assert "asyncio_default_fixture_loop_scope" not in output and "Warning" not in output, output
