"""A user's test file as an httpx or FastAPI project has it (run by tests/testing/test_user_suites.py with pytest in a
fresh process, under several configurations): anyio's pytest plugin is installed, an ``anyio_backend`` fixture picks
asyncio, and some tests are ``@pytest.mark.anyio`` while others are pytest-asyncio's. ``awsworld_env`` and
``awsworld_local`` start on the loop whichever plugin runs the test runs it on. Before, under ``asyncio_mode =
"auto"`` (where pytest-asyncio runs the anyio-marked tests too, while anyio's plugin runs their async fixtures on
its own loop) every anyio-marked test failed its first wait with "started on another event loop"."""

from collections.abc import AsyncIterator

import pytest

from awsworld import Client, create_hook, sleep, step, workflow
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@workflow(name="user.anyio_approval")
async def approval(order: str) -> str:
    await sleep("1d")
    async with create_hook(token=f"ok:{order}") as hook:
        return f"{order}: {await hook}"


async def approve(client: Client, order: str) -> str:
    run = await client.start(approval, order)
    await client.resume_hook(f"ok:{order}", "approved", wait=10)
    return await run.result(timeout=10)


@step
async def double(n: int) -> int:
    return 2 * n


@workflow(name="user.anyio_doubled")
async def doubled(n: int) -> int:
    return await double(n)


@pytest.fixture
async def started(awsworld_env: WorkflowTestEnv) -> AsyncIterator[str]:
    """A user's own async fixture on top of awsworld_env (run by anyio's plugin for an anyio test): it starts a run
    the test finishes."""
    run = await awsworld_env.client.start(approval, "F-1")
    yield run.run_id


@pytest.mark.anyio
async def test_an_anyio_test(awsworld_env: WorkflowTestEnv) -> None:
    assert await approve(awsworld_env.client, "A-1") == "A-1: approved"


@pytest.mark.anyio
async def test_an_anyio_test_through_an_async_fixture(awsworld_env: WorkflowTestEnv, started: str) -> None:
    await awsworld_env.client.resume_hook("ok:F-1", "approved", wait=10)
    assert await awsworld_env.client.get_run(started).result(timeout=10) == "F-1: approved"


@pytest.mark.anyio
async def test_an_anyio_test_on_the_emulator(awsworld_local: LocalAWS) -> None:
    client = awsworld_local.client
    assert client is not None
    run = await client.start(doubled, 21)  # on the emulator time does not skip: no sleep here
    assert await run.result(timeout=30) == 42


@pytest.mark.asyncio
async def test_a_pytest_asyncio_test(awsworld_env: WorkflowTestEnv) -> None:
    assert await approve(awsworld_env.client, "P-1") == "P-1: approved"
