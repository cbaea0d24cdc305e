"""``child_options(priority=, concurrency_key=)``: a workflow that starts limited children sets where each waits
and under which key, as ``client.options(priority=, concurrency_key=)`` does for a client's start (DBOS's
``SetEnqueueOptions`` around ``queue.enqueue`` in a workflow). Before, a child always waited at priority 0 under
its key function's key: ``child_options`` took neither. In memory (WorkflowTestEnv): the order children enter
their slot is a count, not a timing."""

from __future__ import annotations

import pytest

from awsworld import Concurrency, child_options, create_hook, start_child, step, workflow
from awsworld.testing import WorkflowTestEnv
from awsworld.world.rules.limiters import LimitInputError

ENTERED: list[str] = []


@step(name="child_limits.enter")
async def enter(task: str) -> None:
    ENTERED.append(task)


@workflow(name="child_limits.task", concurrency=Concurrency(1))
async def task(name: str) -> str:
    await enter(name)
    async with create_hook(token=f"child-limits:{name}") as done:
        await done
    return name


@workflow(name="child_limits.enqueue")
async def enqueue(urgent: str) -> list[str]:
    first = await start_child(task, "first")  # takes the one slot
    handles = [first, await start_child(task, "normal-1"), await start_child(task, "normal-2"),
               await child_options(priority=10).start(task, urgent)]  # started last, waits first
    return [await handle for handle in handles]


@workflow(name="child_limits.keyed")
async def keyed() -> list[str]:
    first = await start_child(task, "k-first")
    other = await child_options(concurrency_key="tenant-2").start(task, "k-other")  # its own key: no wait
    return [await first, await other]


@workflow(name="child_limits.bad")
async def bad(priority: int) -> str:
    return await child_options(priority=priority).call(task, "never")


@workflow(name="child_limits.unlimited")
async def unlimited() -> list[str]:
    return await child_options(concurrency_key="k").call(enqueue, "never")


async def test_a_childs_priority_puts_it_first_among_the_waiters() -> None:
    ENTERED.clear()
    async with WorkflowTestEnv() as env:
        run = await env.client.start(enqueue, "urgent")
        await env.idle()
        assert ENTERED == ["first"]  # the others wait for the slot
        for name in ("first", "urgent", "normal-1", "normal-2"):
            await env.client.resume_hook(f"child-limits:{name}", None, wait=30)
        assert await run.result() == ["first", "normal-1", "normal-2", "urgent"]
    assert ENTERED == ["first", "urgent", "normal-1", "normal-2"]


async def test_a_childs_key_is_its_slot() -> None:
    ENTERED.clear()
    async with WorkflowTestEnv() as env:
        run = await env.client.start(keyed)
        await env.idle()
        assert sorted(ENTERED) == ["k-first", "k-other"]  # both hold a slot: two keys
        for name in ("k-first", "k-other"):
            await env.client.resume_hook(f"child-limits:{name}", None)
        assert await run.result() == ["k-first", "k-other"]


@pytest.mark.parametrize("workflow_fn, args, said", [
    (bad, (2_000_000,), "a priority is a whole number from -1000000 to 1000000"),
    (unlimited, (), "concurrency_key= needs a workflow with concurrency=: child_limits.enqueue has none"),
])
async def test_a_bad_option_fails_the_call_saying_why(workflow_fn: object, args: tuple[object, ...],
                                                       said: str) -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(workflow_fn, *args)  # type: ignore[arg-type]
        with pytest.raises(Exception) as failed:
            await run.result()
        [error] = [event.event_data["error"] for event in await run.events() if event.event_type == "run_failed"]
    assert said in str(failed.value), failed.value
    assert error["type"].endswith(LimitInputError.__name__), error  # the call's own error, typed
