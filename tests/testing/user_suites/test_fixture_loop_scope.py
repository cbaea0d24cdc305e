"""A user's test file (run by tests/testing/test_user_suites.py with ``asyncio_default_fixture_loop_scope = session``
in its configuration, as many projects set it to silence pytest-asyncio's warning, and tests on function loops): an
async fixture of the user's that waits on ``awsworld_env`` runs on the session's loop while the environment runs on
the test's. The wait cannot work there; the error says which setting makes it work, where it spoke only of
session-scoped fixtures (the user's is function-scoped)."""

import pytest
import pytest_asyncio

from awsworld import Run, create_hook, workflow
from awsworld.testing import WorkflowTestEnv


@workflow(name="user.fixture_loop")
async def approval(order: str) -> str:
    async with create_hook(token=f"ok:{order}") as hook:
        return f"{order}: {await hook}"


@pytest_asyncio.fixture
async def waiting(awsworld_env: WorkflowTestEnv) -> Run[str]:
    run = await awsworld_env.client.start(approval, "A-1")
    with pytest.raises(RuntimeError, match=r"an async fixture of yours that waits on them needs that loop too: a "
                                           r"loop scope equal to the tests' \(asyncio_default_fixture_loop_scope as "
                                           r"asyncio_default_test_loop_scope"):
        await run.wait_for_hook("ok:A-1")
    return run


@pytest_asyncio.fixture(loop_scope="function")
async def waited(awsworld_env: WorkflowTestEnv) -> Run[str]:
    run = await awsworld_env.client.start(approval, "A-2")
    await run.wait_for_hook("ok:A-2")
    return run


@pytest.mark.asyncio
async def test_a_fixture_on_another_loop_is_told_which_setting(waiting: Run[str]) -> None:
    assert waiting.run_id


@pytest.mark.asyncio
async def test_a_fixture_on_the_tests_loop_waits(awsworld_env: WorkflowTestEnv, waited: Run[str]) -> None:
    await awsworld_env.client.resume_hook("ok:A-2", "approved")
    assert await waited.result() == "A-2: approved"
