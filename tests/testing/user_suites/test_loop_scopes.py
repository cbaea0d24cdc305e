"""A user's test file (run by tests/testing/test_user_suites.py with pytest in a fresh process, with
``asyncio_default_test_loop_scope = session`` in its configuration, as the docs suggest for a shared environment):
``awsworld_env`` starts on the loop each test runs in, whatever that loop's scope (the configured one, or a marker's),
so the runs it delivers move while the test waits (``awsworld_local`` dispatches the same way). Before, it started on
a function-scoped loop of its own, and a test on a module or session loop failed its first wait with "started on
another event loop"."""

import pytest

from awsworld import create_hook, sleep, workflow
from awsworld.testing import WorkflowTestEnv


@workflow(name="user.scoped")
async def scoped(order: str) -> str:
    await sleep("1d")
    async with create_hook(token=f"ok:{order}") as hook:
        return f"{order}: {await hook}"


async def approve(env: WorkflowTestEnv, order: str) -> str:
    client = env.client
    run = await client.start(scoped, order)
    await client.resume_hook(f"ok:{order}", "approved", wait=10)
    return await run.result(timeout=10)


@pytest.mark.asyncio
async def test_on_the_configured_loop(awsworld_env: WorkflowTestEnv) -> None:
    assert await approve(awsworld_env, "A-1") == "A-1: approved"


@pytest.mark.asyncio(loop_scope="module")
async def test_on_a_module_loop(awsworld_env: WorkflowTestEnv) -> None:
    assert await approve(awsworld_env, "A-2") == "A-2: approved"


@pytest.mark.asyncio(loop_scope="function")
async def test_on_a_function_loop(awsworld_env: WorkflowTestEnv) -> None:
    assert await approve(awsworld_env, "A-3") == "A-3: approved"
