"""A user's test file (run by tests/testing/test_user_suites.py with pytest in a fresh process): a resume that waits
for its hook (``resume_hook(..., wait=)``, ``fail_hook``, ``heartbeat_hook``) skips time as ``run.wait_for_hook``
does, so a hook created after a day's sleep is resumed at once instead of the wait running out in real seconds."""

from datetime import timedelta

import pytest

from awsworld import HookFailedError, create_hook, sleep, workflow
from awsworld.world.errors import HookNotFoundError

pytestmark = pytest.mark.asyncio


@workflow(name="user.approve_tomorrow")
async def approve_tomorrow(order: str) -> str:
    await sleep(timedelta(days=1))
    async with create_hook(token=f"approve:{order}", heartbeat_timeout=timedelta(hours=1)) as hook:
        try:
            return str(await hook)
        except HookFailedError as failed:
            return f"refused: {failed}"


async def test_resume_with_wait_skips_to_the_hook(awsworld_env) -> None:
    start = awsworld_env.now()
    run = await awsworld_env.client.start(approve_tomorrow, "B-1")
    await awsworld_env.client.resume_hook("approve:B-1", "yes", wait=20)
    assert await run.result() == "yes"
    assert awsworld_env.now() - start >= timedelta(days=1)


async def test_fail_hook_with_wait_skips_to_the_hook(awsworld_env) -> None:
    run = await awsworld_env.client.start(approve_tomorrow, "B-2")
    await awsworld_env.client.fail_hook("approve:B-2", "out of stock", wait=20)
    assert (await run.result()).startswith("refused: ")


async def test_heartbeat_with_wait_skips_to_the_hook(awsworld_env) -> None:
    run = await awsworld_env.client.start(approve_tomorrow, "B-3")
    await awsworld_env.client.heartbeat_hook("approve:B-3", wait=20)
    await awsworld_env.client.resume_hook("approve:B-3", "later")
    assert await run.result() == "later"


async def test_a_token_no_run_will_hold_still_raises_hook_not_found_after_its_wait(awsworld_env) -> None:
    with pytest.raises(HookNotFoundError):  # as documented for wait=; a wait longer than stall_timeout ends sooner
        await awsworld_env.client.resume_hook("approve:nobody", "yes", wait=0.5)  # (test_stalls.py), as this type


async def test_a_resume_sent_before_the_run_reaches_the_hook_says_how_to_wait(awsworld_env) -> None:
    run = await awsworld_env.client.start(approve_tomorrow, "B-6")
    with pytest.raises(HookNotFoundError, match=r"no hook owns that token: no run has reached create_hook with it yet; "
                                                r"if its run has not reached it yet, wait for the hook before resuming "
                                                r"it \(await run.wait_for_hook"):
        await awsworld_env.client.resume_hook("approve:B-6", "too early")
    await run.wait_for_hook("approve:B-6")
    await awsworld_env.client.resume_hook("approve:B-6", "on time")
    assert await run.result() == "on time"
