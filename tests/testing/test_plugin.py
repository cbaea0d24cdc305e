"""The pytest plugin as the package registers it: both fixtures, through the entry point."""

from __future__ import annotations

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
