"""A user's test file (run by tests/testing/test_user_suites.py with pytest in a fresh process): one environment shared
by several tests, as Temporal's docs share theirs. On one event loop it works; a session fixture on its own loop with
tests on theirs (pytest-asyncio's defaults) fails at the first wait saying how to give them one loop, instead of every
run timing out "still pending"."""

from datetime import timedelta

import pytest
import pytest_asyncio

from awsworld import sleep, workflow
from awsworld.testing import WorkflowTestEnv


@workflow(name="user.month")
async def month(tag: str) -> str:
    await sleep(timedelta(days=30))
    return tag


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shared_env():
    async with WorkflowTestEnv() as env:
        yield env


@pytest_asyncio.fixture(scope="session")
async def env_on_its_own_loop():
    async with WorkflowTestEnv() as env:
        yield env


@pytest.mark.asyncio(loop_scope="session")
async def test_one_on_the_shared_env(shared_env: WorkflowTestEnv) -> None:
    assert await (await shared_env.client.start(month, "one")).result() == "one"


@pytest.mark.asyncio(loop_scope="session")
async def test_another_on_the_shared_env(shared_env: WorkflowTestEnv) -> None:
    assert await (await shared_env.client.start(month, "two")).result() == "two"


@pytest.mark.asyncio
async def test_an_env_started_on_another_loop_says_so(env_on_its_own_loop: WorkflowTestEnv) -> None:
    run = await env_on_its_own_loop.client.start(month, "three")
    with pytest.raises(RuntimeError, match=r"this WorkflowTestEnv was started on another event loop: .* "
                                           r"@pytest_asyncio.fixture\(scope=\"session\", loop_scope=\"session\"\)"):
        await run.result(timeout=10)
    with pytest.raises(RuntimeError, match="started on another event loop"):
        await env_on_its_own_loop.sleep("1d")
