"""A wait may not end after the longest a run may stay running (``MaxRunDays``, ``AWSWORLD_MAX_RUN_DAYS``, 365 days
from the run's creation): on AWS every record of a run expires ``retention + MaxRunDays`` after it was written
(``aws/retention.py``), so a ``sleep(timedelta(days=400))`` was accepted, and the run lost its oldest records while it
slept and failed when it woke, with nothing left to say why. Now the call raises ``RunLifetimeError`` where the
workflow makes it and writes nothing (``_engine/execution.py``, ``WorkflowExecution._within_lifetime``). On the
in-memory World through the test environment's delivery path, on its skipping clock: nothing expires there, but the
same code would break once deployed."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from awsworld import (
    ChildWorkflowError,
    Concurrency,
    RunLifetimeError,
    WorkflowRunFailedError,
    create_hook,
    sleep,
    step,
    workflow,
)
from awsworld._worker.flow_state import KeptReplays
from awsworld.client.replay import replay_run
from awsworld.testing import RunStalledError, WorkflowTestEnv
from awsworld.world.watch import due_key

from .conftest import RESULT_TIMEOUT

pytestmark = pytest.mark.asyncio


@workflow(name="lifetime.long_sleep")
async def long_sleep(days: float) -> str:
    await sleep(timedelta(days=days))
    return "woke"


@workflow(name="lifetime.monthly")
async def monthly(months: int) -> dict[str, Any]:
    """A loop of 100-day sleeps: each is short, the run is not; the one that would cross the limit is refused."""
    slept = 0
    try:
        for _ in range(months):
            await sleep(timedelta(days=100))
            slept += 1
    except RunLifetimeError as refused:
        return {"slept": slept, "refused": str(refused)}
    return {"slept": slept}


@workflow(name="lifetime.hook_timeout")
async def hook_timeout(timeout: str) -> str:
    hook = create_hook(token="lifetime:approval", timeout=timeout)
    return str(await hook)


async def events_of(env: WorkflowTestEnv, run_id: str) -> list[tuple[str, str | None]]:
    page = await env.world.events.list(run_id, limit=1000)
    return [(e.event_type, e.correlation_id) for e in page.data]


async def test_a_sleep_past_the_runs_lifetime_fails_the_run_where_it_was_made_and_writes_nothing() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(long_sleep, 400)
        with pytest.raises(RunLifetimeError) as failed:
            await asyncio.wait_for(run.result(), RESULT_TIMEOUT)
        assert isinstance(failed.value, WorkflowRunFailedError)
        message = str(failed.value)
        assert "sleep() would end at " in message and "400 d after run" in message, message
        assert "365 d: the stack's MaxRunDays, AWSWORLD_MAX_RUN_DAYS" in message, message
        assert failed.value.error_type == "RunLifetimeError"
        assert "test_run_lifetime.py" in str(failed.value.details.get("stack")), "the user's line is its traceback's"
        assert not [kind for kind, _ in await events_of(env, run.run_id) if kind.startswith("wait_")]
        assert (await replay_run(env.world, run.run_id)).ok

        within = await env.client.start(long_sleep, 364.9)  # (the old code refused nothing either way)
        assert await asyncio.wait_for(within.result(), RESULT_TIMEOUT) == "woke"


async def test_the_limit_is_counted_from_the_runs_creation_and_the_refusal_is_caught() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(monthly, 12)
        result = await asyncio.wait_for(run.result(), RESULT_TIMEOUT)
        assert result["slept"] == 3, result  # day 300 -> 400 is refused (the old code slept all 12: 1,200 days)
        assert "400 d after run" in result["refused"], result
        waits = [cid for kind, cid in await events_of(env, run.run_id) if kind == "wait_created"]
        assert len(waits) == 3, waits
        assert (await replay_run(env.world, run.run_id)).ok


async def test_a_hook_whose_timeout_ends_past_the_lifetime_is_refused_before_anything_is_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(hook_timeout, "500d")
        with pytest.raises(RunLifetimeError) as failed:
            await asyncio.wait_for(run.result(), RESULT_TIMEOUT)
        assert "create_hook(timeout=...) would end at " in str(failed.value)
        assert [kind for kind, _ in await events_of(env, run.run_id)
                if kind.startswith(("hook_", "wait_"))] == [], "no hook, no wait"
        monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "730")
        allowed = await env.client.start(hook_timeout, "500d")
        await env.client.resume_hook("lifetime:approval", "yes", wait=RESULT_TIMEOUT)
        assert await asyncio.wait_for(allowed.result(), RESULT_TIMEOUT) == "yes"


async def test_a_wait_written_under_a_larger_limit_replays_and_ends_under_a_smaller_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit is read when a wait is made: lowering it refuses new waits only, never one the log records (a
    replay that refused it would diverge from its own log)."""
    monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "500")
    async with WorkflowTestEnv() as env:
        started = env.now()
        run = await env.client.start(long_sleep, 400)
        await env.idle()  # its wait is written
        assert [kind for kind, _ in await events_of(env, run.run_id)][-1] == "wait_created"
        monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "365")
        assert (await replay_run(env.world, run.run_id)).ok
        assert await asyncio.wait_for(run.result(), RESULT_TIMEOUT) == "woke"  # (the clock skips to its end)
        assert env.now() - started >= timedelta(days=400)



# -- a run still running at its lifetime's end is ended by awsworld (world/rules/lifetime.py) ------------------------
# Before, a run waiting on a hook with no timeout (or going on by other means) stayed running past its lifetime: on
# AWS its first items expired under it, and it failed at its next delivery with nothing left to say why.

TIDIED: list[str] = []


@step(name="lifetime.tidy")
async def tidy(what: str) -> str:
    TIDIED.append(what)
    return what


@workflow(name="lifetime.approval")
async def approval(token: str = "lifetime:forever") -> str:
    try:
        return str(await create_hook(token=token))
    finally:
        await tidy("approval")


async def test_a_run_waiting_on_a_hook_past_its_lifetime_is_failed_at_its_end_with_the_typed_error() -> None:
    TIDIED.clear()
    async with WorkflowTestEnv() as env:
        started = env.now()
        run = await env.client.start(approval)
        await run.wait_for_hook("lifetime:forever", timeout=RESULT_TIMEOUT)
        # its due is its lifetime's end: the watchdog's one wake for it (the old code: no due at all)
        entry = env.world.storage.state.watch[run.run_id]
        assert entry.due == due_key(started + timedelta(days=365)), entry
        deliveries = env.driver.deliveries
        await env.sleep(timedelta(days=366))
        with pytest.raises(RunLifetimeError) as failed:
            await asyncio.wait_for(run.result(), RESULT_TIMEOUT)
        message = str(failed.value)
        assert f"run {run.run_id} was still running at the end of its lifetime" in message, message
        assert "365 d: the stack's MaxRunDays, AWSWORLD_MAX_RUN_DAYS, when the run was created" in message
        assert "child_options(successor=True)" in message, message
        assert isinstance(failed.value, WorkflowRunFailedError) and failed.value.error_type == "RunLifetimeError"
        assert env.driver.deliveries - deliveries == 1, "one watchdog wake ended it"
        assert TIDIED == [], "ended as a cancel ends a run: its finally did not run"
        ended = await env.world.runs.get(run.run_id)
        assert (ended.status, ended.error_code) == ("failed", "RUN_LIFETIME_EXCEEDED"), ended
        assert run.run_id not in env.world.storage.state.watch


async def test_a_run_under_its_lifetime_is_untouched_and_result_still_says_what_it_waits_on() -> None:
    TIDIED.clear()
    async with WorkflowTestEnv() as env:
        run = await env.client.start(approval)
        with pytest.raises(RunStalledError, match="lifetime:forever"):  # (no skip of a year to its lifetime's end)
            await asyncio.wait_for(run.result(), RESULT_TIMEOUT)
        await env.sleep(timedelta(days=364))
        await env.client.resume_hook("lifetime:forever", "approved", wait=RESULT_TIMEOUT)
        assert await asyncio.wait_for(run.result(), RESULT_TIMEOUT) == "approved"
        assert TIDIED == ["approval"]


async def test_changing_the_limit_later_neither_ends_a_running_run_sooner_nor_lets_it_run_longer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A run's lifetime is the limit its first items were written under (recorded in its run_created): lowering
    AWSWORLD_MAX_RUN_DAYS does not end a run created under a larger one, and raising it does not keep one created
    under a smaller one running past what its first items were written for."""
    monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "500")
    async with WorkflowTestEnv() as env:
        longer = await env.client.start(approval, "lifetime:longer")
        await longer.wait_for_hook("lifetime:longer", timeout=RESULT_TIMEOUT)
        monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "365")
        await env.sleep(timedelta(days=400))
        await env.client.resume_hook("lifetime:longer", "late", wait=RESULT_TIMEOUT)
        assert await asyncio.wait_for(longer.result(), RESULT_TIMEOUT) == "late"

        shorter = await env.client.start(approval, "lifetime:shorter")  # created under 365
        await shorter.wait_for_hook("lifetime:shorter", timeout=RESULT_TIMEOUT)
        monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "730")
        await env.sleep(timedelta(days=366))
        with pytest.raises(RunLifetimeError, match="365 d: "):
            await asyncio.wait_for(shorter.result(), RESULT_TIMEOUT)


@workflow(name="lifetime.parent")
async def parent() -> str:
    await create_hook(token="lifetime:go")  # (the test lowers the limit meanwhile: the child is created under 365)
    try:
        return await approval("lifetime:child")
    except ChildWorkflowError as ended:
        return f"child {ended.status}: {ended.original.get('name') if ended.original else None}"


async def test_a_child_ended_at_its_lifetime_by_a_fresh_container_reports_to_its_parent(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The wake that ends the run comes to a worker that kept no replay of it (a fresh Lambda container): the end is
    written to the replay of its log, and reported from it, as any end is (a flow that failed the run before it had a
    replay could neither write the end, ``FlowLog.write``, nor report it, ``child_runs.on_run_end``)."""
    monkeypatch.setattr(KeptReplays, "take", lambda self, run_id: None)
    monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "500")
    async with WorkflowTestEnv() as env:
        run = await env.client.start(parent)
        await run.wait_for_hook("lifetime:go", timeout=RESULT_TIMEOUT)
        monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "365")
        await env.client.resume_hook("lifetime:go", "go", wait=RESULT_TIMEOUT)
        await env.idle()
        await env.sleep(timedelta(days=366))
        assert await asyncio.wait_for(run.result(), RESULT_TIMEOUT) == "child failed: RunLifetimeError"


@workflow(name="lifetime.one_at_a_time", concurrency=Concurrency(1))
async def one_at_a_time(token: str) -> str:
    return str(await create_hook(token=token))


async def test_a_run_waiting_for_a_concurrency_slot_is_ended_at_its_lifetime_not_at_the_watchdogs_next_snooze(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A pending run waiting for a slot cannot rest (it has no due of its own): the watchdog wakes it on its doubling
    snoozes, up to a day apart. Each snooze stops at the end of the run's lifetime (``world.watch.snooze_due``).
    Before, a 3-day lifetime was ended at the snooze after it: 18.6 hours late (5 min, 10, 20, ... then daily)."""
    monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "500")
    async with WorkflowTestEnv() as env:
        holder = await env.client.start(one_at_a_time, "lifetime:holder")  # holds the slot, under a longer lifetime
        await holder.wait_for_hook("lifetime:holder", timeout=RESULT_TIMEOUT)
        monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "3")
        started = env.now()
        waiter = await env.client.start(one_at_a_time, "lifetime:waiter")
        await env.idle()
        assert (await env.world.runs.get(waiter.run_id)).status == "pending"
        await env.sleep(timedelta(days=4))
        ended = await env.world.runs.get(waiter.run_id)
        assert (ended.status, ended.error_code) == ("failed", "RUN_LIFETIME_EXCEEDED"), ended
        assert ended.completed_at is not None
        late = ended.completed_at - (started + timedelta(days=3))
        assert timedelta(0) <= late <= timedelta(minutes=2), late
        with pytest.raises(RunLifetimeError):
            await asyncio.wait_for(waiter.result(), RESULT_TIMEOUT)
        assert (await env.world.runs.get(holder.run_id)).status == "running", "the holder keeps its slot"
