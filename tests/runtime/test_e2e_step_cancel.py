"""Cancelling a step from its workflow end to end: the body is cancelled where it runs (inline in the flow, or
queued in another delivery, which finds out at its next status check), the step's one end in the log is a
``step_failed`` marked cancelled (``STEP_CANCELLED``) that no late outcome overwrites, a step cancelled before it
starts never runs, ``first_successful`` returns without waiting for a losing step's body, and every replay sees
the same ``CancelledError`` — in memory and on ``LocalAWS``.

Bodies block on an ``asyncio.Event`` nobody sets (capped, so a regression fails instead of hanging): only a
cancellation ends them early. ``AWSWORLD_STEP_CHECK_SECONDS`` is shortened so a stopped body is seen in
milliseconds."""

from __future__ import annotations

import asyncio
import logging
import uuid
from collections import Counter, defaultdict
from datetime import timedelta
from typing import Any

import pytest

from awsworld import RetryPolicy, create_hook, first_successful, map, sleep, step, workflow
from awsworld.authoring.errors import STEP_CANCELLED
from awsworld.client.replay import replay_run
from awsworld.world.events import Event

from .conftest import BOTH, E2E, with_env

BODY_CAP = 60.0  # seconds a blocked body waits before giving up (only reached if cancellation is broken)

STARTED: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
STOPPED: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)
GATE: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)  # never set: only a cancellation ends a body
CALLS: Counter[str] = Counter()


local_env = with_env({"AWSWORLD_STEP_CHECK_SECONDS": "0.05"})


@step
async def blocked(tag: str) -> str:
    CALLS[tag] += 1
    STARTED[tag].set()
    try:
        async with asyncio.timeout(BODY_CAP):
            await GATE[tag].wait()
    except asyncio.CancelledError:
        STOPPED[tag].set()
        raise
    except TimeoutError:
        return "ran to its end"
    return "released"


@step
async def quick(tag: str) -> str:
    CALLS[tag] += 1
    return tag


# No jitter: with the default full jitter, the first retry falls anywhere in the hour, and in 1 run of 60 it came
# before cancel_before_retry's 1-minute sleep ended (a second attempt ran: the test failed).
@step(retry=RetryPolicy(max_attempts=3, initial_delay="1h", jitter=0))
async def fails_first(tag: str) -> str:
    CALLS[tag] += 1
    raise RuntimeError("not yet")


def step_ends(events: list[Event]) -> Counter[str]:
    return Counter(e.correlation_id or "" for e in events if e.event_type in ("step_completed", "step_failed"))


def cancelled_steps(events: list[Event]) -> list[str]:
    return [e.correlation_id or "" for e in events if e.event_type == "step_failed" and e.event_data
            and e.event_data["error"].get("code") == STEP_CANCELLED]


def one_end_per_step(events: list[Event]) -> None:
    declared = [e.correlation_id for e in events if e.event_type == "step_created"]
    ends = step_ends(events)
    assert all(ends[s or ""] == 1 for s in declared), f"not one end per step: {dict(ends)} for {declared}"


async def stopped(tag: str) -> None:
    await asyncio.wait_for(STOPPED[tag].wait(), 15)


# ----------------------------------------------------------------------------------------- inline


@workflow
async def cancel_inline(tag: str) -> str:
    slow = asyncio.ensure_future(blocked(tag))  # step_1: declared first, so born running and run inline
    fast = asyncio.ensure_future(quick(f"{tag}:q"))  # step_2: queued, ends in another delivery meanwhile
    value = await fast
    slow.cancel()
    try:
        await slow
    except asyncio.CancelledError:
        return f"{value} then cancelled"
    return "not cancelled"


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_an_inline_step_is_cancelled_mid_body(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(cancel_inline, tag)
    assert await run.result(timeout=30) == f"{tag}:q then cancelled"
    await stopped(tag)  # the body itself saw CancelledError
    events = await run.events()
    assert cancelled_steps(events) == ["step_1"]
    assert [e.event_type for e in events if e.correlation_id == "step_1"] == [
        "step_created", "step_started", "step_failed"]
    one_end_per_step(events)


# ----------------------------------------------------------------------------------------- queued


@workflow
async def cancel_queued(tag: str, token: str) -> str:
    first = asyncio.ensure_future(quick(f"{tag}:q"))  # step_1: inline
    slow = asyncio.ensure_future(blocked(tag))  # step_2: queued, runs in another delivery
    await first
    await create_hook(token=token)  # resumed by the test once the queued body runs
    slow.cancel()
    try:
        await slow
    except asyncio.CancelledError:
        return "cancelled"
    return "not cancelled"


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_a_queued_step_is_stopped_in_its_delivery_and_its_outcome_never_recorded(e2e: E2E) -> None:
    tag, token = uuid.uuid4().hex, f"t-{uuid.uuid4().hex}"
    run = await e2e.start(cancel_queued, tag, token)
    await e2e.hook_ready(token, run)
    await asyncio.wait_for(STARTED[tag].wait(), 15)
    await e2e.client.resume_hook(token, "go")
    assert await run.result(timeout=30) == "cancelled"
    await stopped(tag)  # the queued delivery's status check found the step ended and cancelled the body
    await e2e.idle()
    events = await run.events()
    assert [e.event_type for e in events if e.correlation_id == "step_2"] == [
        "step_created", "step_started", "step_failed"]
    assert cancelled_steps(events) == ["step_2"]
    one_end_per_step(events)
    assert CALLS[tag] == 1


# ----------------------------------------------------------------------------------------- not started


@workflow
async def cancel_before_retry(tag: str) -> str:
    task = asyncio.ensure_future(fails_first(tag))  # its first attempt fails; the next is an hour away
    await sleep("1m")
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return "cancelled"
    return "not cancelled"


async def test_a_step_cancelled_before_its_attempt_starts_never_runs_it(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(cancel_before_retry, tag)
    assert await run.result(timeout=30) == "cancelled"
    assert e2e.env is not None
    await e2e.env.sleep(timedelta(hours=2))  # the retry's message arrives, finds the step ended, runs nothing
    assert CALLS[tag] == 1
    events = await run.events()
    assert [e.event_type for e in events if e.correlation_id == "step_2"] == [  # (wait_1 is the sleep)
        "step_created", "step_started", "step_retrying", "step_failed"]
    one_end_per_step(events)


@workflow
async def cancel_at_once(tag: str) -> str:
    task = asyncio.ensure_future(quick(tag))
    await asyncio.sleep(0)  # the task runs once: it declares its step, which is cancelled before the flow writes it
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return await quick(f"{tag}:after")
    return "not cancelled"


async def test_a_step_cancelled_where_it_is_declared_is_never_written_nor_run(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(cancel_at_once, tag)
    assert await run.result(timeout=30) == f"{tag}:after"
    assert CALLS[tag] == 0
    events = await run.events()
    assert [e.correlation_id for e in events if e.event_type == "step_created"] == ["step_2"]


@workflow
async def sleep_cancelled_at_once(tag: str) -> str:
    task = asyncio.ensure_future(sleep(timedelta(hours=1)))
    await asyncio.sleep(0)  # the task runs once: it declares its wait, which is cancelled before the flow writes it
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        return await quick(tag)
    return "not cancelled"


@workflow
async def ends_while_its_task_sleeps(tag: str) -> str:
    first = await quick(tag)
    sleeper = asyncio.ensure_future(sleep(timedelta(hours=1)))  # never awaited: the body's end cancels it
    await asyncio.sleep(0)  # the task runs once: it declares its wait in the replay that ends the body
    assert not sleeper.done()
    return first


@workflow
async def ends_while_its_task_awaits_a_hook(tag: str) -> str:
    first = await quick(tag)

    async def first_payload() -> object:
        async with create_hook(token=f"ends-with-a-hook:{tag}") as hook:
            async for payload in hook:
                return payload
        return None

    waiter = asyncio.ensure_future(first_payload())  # created as the body returns: the body's end cancels it
    await asyncio.sleep(0)  # the task runs once: it creates its hook in the replay that ends the body
    assert not waiter.done()
    return first


@pytest.mark.parametrize("e2e_backend", BOTH)
@pytest.mark.parametrize("workflow_fn", [sleep_cancelled_at_once, ends_while_its_task_sleeps,
                                         ends_while_its_task_awaits_a_hook],
                         ids=["sleep-cancelled-at-once", "sleep-at-the-end", "hook-at-the-end"])
async def test_a_call_cancelled_before_the_flow_writes_it_is_never_written_and_the_run_replays(
        e2e: E2E, workflow_fn: Any) -> None:
    # The second is a ``map`` item that started in the replay where its batch decided, and slept (test_e2e_batches):
    # the flow writes the run's end, not the wait or the hook, and the replay check sees the same code end there.
    tag = uuid.uuid4().hex
    run = await e2e.start(workflow_fn, tag)
    assert await run.result(timeout=30) == tag
    events = await run.events()
    assert [e.event_type for e in events if e.event_type.startswith(("wait_", "hook_"))] == []
    assert events[-1].event_type == "run_completed" and CALLS[tag] == 1
    result = await replay_run(e2e.world, run.run_id)
    assert result.ok, result.describe()


# ----------------------------------------------------------------------------------------- first_successful, map


@workflow
async def race(tag: str, slow_first: bool) -> str:
    if slow_first:  # the loser runs inline in the flow
        return await first_successful(blocked(tag), quick(f"{tag}:q"))
    return await first_successful(quick(f"{tag}:q"), blocked(tag))  # the loser runs queued


@pytest.mark.parametrize("e2e_backend", BOTH)
@pytest.mark.parametrize("slow_first", [True, False], ids=["inline-loser", "queued-loser"])
async def test_first_successful_returns_without_waiting_for_a_losing_step(e2e: E2E, slow_first: bool) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(race, tag, slow_first)
    assert await run.result(timeout=30) == f"{tag}:q"
    if STARTED[tag].is_set():  # a queued loser may not have started before its cancellation: then it never does
        await stopped(tag)
    else:
        assert not slow_first
    await e2e.idle()
    assert CALLS[tag] <= 1
    events = await run.events()
    assert len(cancelled_steps(events)) == 1
    one_end_per_step(events)


@workflow
async def map_then_cancel(tag: str, token: str) -> str:
    batch = asyncio.ensure_future(map(blocked, [f"{tag}:0", f"{tag}:1"]))  # one item inline, one queued
    await create_hook(token=token)  # resumed by the test once both bodies run; another delivery handles it
    batch.cancel()
    try:
        await batch
    except asyncio.CancelledError:
        return "cancelled"
    return "not cancelled"


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_cancelling_a_map_stops_its_items_where_they_run(e2e: E2E) -> None:
    tag, token = uuid.uuid4().hex, f"t-{uuid.uuid4().hex}"
    run = await e2e.start(map_then_cancel, tag, token)
    await e2e.hook_ready(token, run)
    await asyncio.wait_for(asyncio.gather(STARTED[f"{tag}:0"].wait(), STARTED[f"{tag}:1"].wait()), 15)
    await e2e.client.resume_hook(token, "go")  # a new delivery records both cancellations
    assert await run.result(timeout=30) == "cancelled"
    # One body runs inline in the first delivery (which finds its step ended in the log), the other queued
    # (its status check finds it ended): both are stopped.
    await stopped(f"{tag}:0")
    await stopped(f"{tag}:1")
    await e2e.idle()
    events = await run.events()
    assert sorted(cancelled_steps(events)) == ["step_2", "step_3"]
    one_end_per_step(events)


# ----------------------------------------------------------------------------------------- replays


@workflow
async def rounds(tag: str, n: int) -> list[str]:
    seen: list[str] = []
    for i in range(n):
        seen.append(await first_successful(blocked(f"{tag}:{i}"), quick(f"{tag}:{i}:q")))
        task = asyncio.ensure_future(blocked(f"{tag}:{i}:t"))
        await quick(f"{tag}:{i}:after")
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            seen.append("cancelled")
    return seen


async def test_replays_across_deliveries_see_the_same_cancellations(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_FLOW_BUDGET_MS", "1")  # every iteration a new delivery: replayed from the start
    tag = uuid.uuid4().hex
    run = await e2e.start(rounds, tag, 3)
    assert await run.result(timeout=60) == [f"{tag}:0:q", "cancelled", f"{tag}:1:q", "cancelled",
                                            f"{tag}:2:q", "cancelled"]
    await e2e.idle()
    events = await run.events()
    assert len(cancelled_steps(events)) == 6
    one_end_per_step(events)
    assert (await replay_run(e2e.world, run.run_id)).ok  # the whole log replays against the code, unchanged


# ----------------------------------------------------------------------------------------- child workflows


@workflow
async def echo_child(value: str) -> str:
    return value


@workflow
async def cancel_child_call(tag: str) -> str:
    call = asyncio.ensure_future(echo_child(tag))
    await asyncio.sleep(0)  # the call declares its start step (and its hook); cancelled before the flow writes it
    call.cancel()
    try:
        await call
    except asyncio.CancelledError:
        return await echo_child(f"{tag}:after")  # a later call still starts its own child
    return "not cancelled"


async def test_a_child_call_cancelled_before_its_start_starts_no_child(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(cancel_child_call, tag)
    assert await run.result(timeout=30) == f"{tag}:after"
    steps = await run.steps()
    assert [s.step_id for s in steps] == ["step_3"]  # step_1 (the cancelled start) was never written
    one_end_per_step(await run.events())


# ----------------------------------------------------------------------------------------- the run cancelled


@workflow
async def runs_one(tag: str) -> str:
    return await blocked(tag)  # alone: run inline, nothing else in the workflow to watch


@workflow
async def runs_two(tag: str) -> list[str]:
    return list(await asyncio.gather(blocked(f"{tag}:inline"), blocked(f"{tag}:queued")))  # one inline, one queued


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_cancelling_the_run_stops_its_running_steps_and_records_nothing_after_it(e2e: E2E) -> None:
    """The docs: cancelling a run ends its steps. A step body running when the run was cancelled went on to its end,
    and its outcome was recorded after ``run_cancelled`` (a charge the customer had cancelled went through)."""
    tag = uuid.uuid4().hex
    alone = await e2e.start(runs_one, tag)
    pair = await e2e.start(runs_two, tag)
    for started in (tag, f"{tag}:inline", f"{tag}:queued"):
        await asyncio.wait_for(STARTED[started].wait(), 15)
    await e2e.client.cancel(alone.run_id, reason="customer left")
    await e2e.client.fail(pair.run_id, reason="operator")
    for body in (tag, f"{tag}:inline", f"{tag}:queued"):
        await stopped(body)  # each body saw CancelledError at its await
    await e2e.idle()
    for run, end in ((alone, "run_cancelled"), (pair, "run_failed")):
        kinds = [e.event_type for e in await run.events()]
        assert end in kinds and kinds[kinds.index(end) + 1:] == [], kinds  # nothing written after the end
    assert CALLS[tag] == CALLS[f"{tag}:inline"] == CALLS[f"{tag}:queued"] == 1


@step(concurrency=1, max_retries=0)
async def blocked_in_a_slot(tag: str) -> str:
    """``blocked``, one at a time across runs, and with no attempt after its first: a start over that attempt is
    refused as cut off unless the run's end is judged first."""
    return await blocked(tag)


@workflow
async def runs_one_in_a_slot(tag: str) -> str:
    return await blocked_in_a_slot(tag)  # alone: run inline


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_a_flow_whose_inline_step_its_runs_end_stopped_ends_too_and_records_nothing_more(
        e2e: E2E, caplog: pytest.LogCaptureFixture) -> None:
    """The step a run's cancel stopped inline was started again by the same delivery (the "redelivery" of a step of
    a live owner seen under load: no message was delivered twice): the flow's replay, which the watch had not read
    the end into, still held the step as this message's own unfinished attempt. The World refuses such a start
    (the terminal-run fence, 7c6e59f), but a limited step asks its limit first: with the slot given to a waiting run,
    its turn ended as a cut-off attempt, a ``step_failed`` "its delivery was cut off" recorded after
    ``run_cancelled`` (seen on moto). Now the stopped attempt is the flow's last: one inline attempt per delivery."""
    caplog.set_level(logging.INFO, logger="awsworld.delivery")
    first, second = uuid.uuid4().hex, uuid.uuid4().hex
    holder = await e2e.start(runs_one_in_a_slot, first)
    await asyncio.wait_for(STARTED[first].wait(), 15)
    waiter = await e2e.start(runs_one_in_a_slot, second)  # waits for the slot the first holds
    await e2e.client.cancel(holder.run_id, reason="customer left")
    await stopped(first)
    await asyncio.wait_for(STARTED[second].wait(), 15)  # the slot went to the waiting run
    await e2e.client.cancel(waiter.run_id)
    await stopped(second)
    await e2e.idle()
    for run in (holder, waiter):
        kinds = [e.event_type for e in await run.events()]
        assert kinds[-1] == "run_cancelled" and kinds.count("step_started") == 1, kinds
    handled = [r for r in caplog.records if r.getMessage().endswith("delivery handled")
               and getattr(r, "runId", None) == holder.run_id and getattr(r, "inlineSteps", 0)]
    assert [(r.outcome, r.inlineSteps) for r in handled] == [("gone", 1)]  # type: ignore[attr-defined]
    assert CALLS[first] == CALLS[second] == 1
