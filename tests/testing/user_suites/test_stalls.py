"""A user's test file (run by tests/testing/test_user_suites.py with pytest in a fresh process): waits that nothing
in the test environment can end fail at once, saying what the run waits on (a hook, a slot another run holds); waits
that the test itself ends (from another task, after real time) are not cut off."""

import asyncio
from datetime import timedelta

import pytest

from awsworld import Concurrency, create_hook, workflow
from awsworld.testing import RunStalledError, WorkflowTestEnv
from awsworld.world.errors import HookNotFoundError

pytestmark = pytest.mark.asyncio


@workflow(name="user.approval")
async def approval(order: str) -> str:
    async with create_hook(token=f"approve:{order}") as hook:
        return str(await hook)


async def test_a_hook_never_resumed_fails_the_result_naming_the_hook(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(approval, "A-1")
    with pytest.raises(RunStalledError, match=r"is running, and nothing in this test environment can move it") as info:
        await run.result()
    assert "It waits on: hook approve:A-1 (no payload yet)" in str(info.value)
    assert isinstance(info.value, TimeoutError)  # what result()'s own timeout raises, so except TimeoutError holds
    assert await run.status() == "running"  # the run is left as it was: the test may still resume it
    await awsworld_env.client.resume_hook("approve:A-1", "yes")
    assert await run.result() == "yes"


async def test_a_mistyped_hook_token_fails_naming_the_hook_the_run_holds(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(approval, "A-2")
    with pytest.raises(RunStalledError, match=r"does not hold hook 'approve:A-3'") as info:
        await run.wait_for_hook("approve:A-3")
    assert "It waits on: hook approve:A-2 (no payload yet)" in str(info.value)


async def test_a_resume_waiting_for_a_token_no_run_creates_fails_naming_what_runs_wait_on(
        awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(approval, "A-8")
    with pytest.raises(RunStalledError, match=r"no run holds hook 'approve:A-9', and nothing") as info:
        await awsworld_env.client.resume_hook("approve:A-9", "yes", wait=60)  # its wait ran out in real seconds
    assert f"run {run.run_id} (user.approval): hook approve:A-8 (no payload yet)" in str(info.value)
    assert isinstance(info.value, HookNotFoundError)  # what the wait running out raises: except clauses still hold
    await awsworld_env.client.resume_hook("approve:A-8", "yes", wait=60)
    assert await run.result() == "yes"


@workflow(name="user.parent")
async def parent(order: str) -> str:
    return "parent: " + await approval(order)


async def test_waiting_on_the_parent_for_its_childs_hook_names_the_child(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(parent, "A-7")
    with pytest.raises(RunStalledError) as info:
        await run.wait_for_hook("approve:A-7")
    [child] = await run.children()
    assert f"does not hold hook 'approve:A-7' (run {child.run_id} (user.approval) holds it" in str(info.value)
    await child.wait_for_hook("approve:A-7")
    await awsworld_env.client.resume_hook("approve:A-7", "ok")
    assert await run.result() == "parent: ok"


async def test_a_hook_resumed_from_another_task_after_real_time_is_waited_for(awsworld_env: WorkflowTestEnv) -> None:
    env = WorkflowTestEnv(stall_timeout=5.0)
    async with env:
        run = await env.client.start(approval, "A-4")

        async def webhook() -> None:  # an outside system answering a little later, in real time
            await run.wait_for_hook("approve:A-4")
            await asyncio.sleep(0.5)
            await env.client.resume_hook("approve:A-4", "late")

        answer = asyncio.create_task(webhook())
        assert await run.result() == "late"
        await answer


async def test_a_result_awaited_in_the_background_while_the_test_resumes(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(approval, "A-5")
    result = asyncio.create_task(run.result())
    await run.wait_for_hook("approve:A-5")
    await awsworld_env.client.resume_hook("approve:A-5", "ok")
    assert await result == "ok"


async def test_stall_timeout_none_waits_out_the_waits_own_timeout() -> None:
    async with WorkflowTestEnv(stall_timeout=None) as env:
        run = await env.client.start(approval, "A-6")
        with pytest.raises(TimeoutError) as info:
            await run.result(timeout=0.5)
        assert not isinstance(info.value, RunStalledError)


@workflow(name="user.one_per_customer", concurrency=Concurrency(1, key=lambda customer, n: customer))
async def one_per_customer(customer: str, n: int) -> int:
    async with create_hook(token=f"go:{customer}:{n}") as hook:
        await hook
    return n


async def test_a_run_waiting_for_a_slot_another_run_holds_fails_naming_the_slot(awsworld_env: WorkflowTestEnv) -> None:
    start = awsworld_env.now()
    first = await awsworld_env.client.start(one_per_customer, "acme", 1)
    second = await awsworld_env.client.start(one_per_customer, "acme", 2)
    with pytest.raises(RunStalledError, match=r"is pending, and nothing in this test environment can move it") as info:
        await second.result()
    assert f"a slot of workflow:user.one_per_customer key 'acme' (place 1 of 1; held by run {first.run_id})" in str(
        info.value)
    # The watchdog's fruitless wakes of the waiting run do not run the clock ahead (they ran it ~3,000 days a second).
    assert awsworld_env.now() - start < timedelta(days=1)
    await awsworld_env.client.resume_hook("go:acme:1", None)
    await second.wait_for_hook("go:acme:2")
    await awsworld_env.client.resume_hook("go:acme:2", None)
    assert (await first.result(), await second.result()) == (1, 2)
