"""``Client.skip_wait``: an operator ends a run's wait now (a 1-day sleep, a 1-hour retry back-off, a hook's 1-day
timeout), on the in-memory World and on the emulator. The run goes on at once, the log records the skip as an
operator's with the time the wait was due, and a replay of that log agrees with the code."""

from __future__ import annotations

import asyncio
import time
import uuid
from datetime import datetime, timedelta
from typing import Any

import pytest

from awsworld import HookTimeoutError, RetryableError, create_hook, sleep, step, workflow
from awsworld._timeline import timeline_rows
from awsworld.client.replay import replay_run
from awsworld.client.skips import AmbiguousWaitError, WaitNotFoundError
from awsworld.ui.model import picture
from awsworld.world.errors import RunGoneError

from .conftest import BOTH, E2E, on_backends

e2e_backend = on_backends(BOTH)

DAY = timedelta(days=1)


@workflow(name="skip_e2e.nap")
async def nap(order: str) -> str:
    await sleep(DAY, name="cool-off")
    return f"shipped {order}"


CALLS: dict[str, int] = {}


@step(name="skip_e2e.charge", max_retries=3)
async def charge(order: str) -> str:
    CALLS[order] = CALLS.get(order, 0) + 1
    if CALLS[order] == 1:
        raise RetryableError("card service down", retry_after="1h")
    return f"receipt {order}"


@workflow(name="skip_e2e.pay")
async def pay(order: str) -> str:
    return await charge(order)


@workflow(name="skip_e2e.approve")
async def approve(order: str) -> str:
    try:
        async with create_hook(token=f"skip-approve:{order}", timeout="1d") as hook:
            return f"approved {await hook}"
    except HookTimeoutError:
        return "no answer: cancelled"


@workflow(name="skip_e2e.answered_then_nap")
async def answered_then_nap(order: str) -> str:
    async with create_hook(token=f"skip-answered:{order}", timeout="1d") as hook:
        answer = await hook
    await sleep("1d")
    return f"{answer}, rested"


@workflow(name="skip_e2e.two_naps")
async def two_naps() -> str:
    import asyncio

    await asyncio.gather(sleep("1d", name="first"), sleep("2d", name="second"))
    return "rested"


async def _until_count(run: Any, event_type: str, count: int, timeout: float = 15.0) -> None:
    """Wait (in real time: time does not skip) until the run's log holds ``count`` events of ``event_type``."""
    deadline = time.monotonic() + timeout
    while [e.event_type for e in await run.events()].count(event_type) < count:
        assert time.monotonic() < deadline, f"run {run.run_id} has fewer than {count} {event_type}"
        await asyncio.sleep(0.01)


def _order() -> str:
    return f"O-{uuid.uuid4().hex[:6]}"


async def _skipped(e2e: E2E, run_id: str, kind: str) -> Any:
    [event] = [e for e in await e2e.client.get_run(run_id).events()
               if e.event_type == kind and (e.event_data or {}).get("skipped")]
    return event


async def test_a_skipped_day_long_sleep_ends_now_and_replays(e2e: E2E) -> None:
    order = _order()
    run = await e2e.start(nap, order)
    await e2e.wait_for_event(run, "wait_created")
    done = await e2e.client.skip_wait(run.run_id)  # the run's only wait
    assert done.event is not None and (done.wait.kind, done.wait.id, done.wait.display_name) == \
        ("wait", "wait_1", "cool-off")
    assert await run.result(timeout=30) == f"shipped {order}"
    event = await _skipped(e2e, run.run_id, "wait_completed")
    created = next(e for e in await run.events() if e.event_type == "wait_created")
    due = datetime.fromisoformat((event.event_data or {})["skipped"]["dueAt"])
    assert (event.event_data or {})["skipped"]["by"] == "operator"
    assert due == datetime.fromisoformat((created.event_data or {})["resumeAt"])
    assert event.created_at < due - timedelta(hours=23)  # it did not wait the day
    assert (await replay_run(e2e.world, run.run_id)).ok


async def test_a_skipped_retry_back_off_starts_the_next_attempt_now(e2e: E2E) -> None:
    order = _order()
    run = await e2e.start(pay, order)
    await e2e.wait_for_event(run, "step_retrying")
    done = await e2e.client.skip_wait(run.run_id, "skip_e2e.charge")  # named by the step's name
    assert done.event is not None and (done.wait.kind, done.wait.id, done.wait.attempt) == ("retry", "step_1", 2)
    assert await run.result(timeout=30) == f"receipt {order}"
    events = await run.events()
    event = await _skipped(e2e, run.run_id, "step_retrying")
    due = datetime.fromisoformat((event.event_data or {})["skipped"]["dueAt"])
    [second] = [e for e in events if e.event_type == "step_started" and (e.event_data or {}).get("attempt") == 2]
    assert second.created_at < due - timedelta(minutes=59)  # the hour's back-off was skipped
    assert [e.event_type for e in events].count("step_retrying") == 2  # the failure, and its skip
    assert CALLS[order] == 2
    [lane] = [lane for lane in picture(run.run_id, events).lanes if lane.key == "step_1"]
    assert [a.number for a in lane.attempts] == [1, 2] and "skipped by operator" in lane.detail  # no phantom attempt
    [row] = [r for r in timeline_rows(events) if r.event_id == event.event_id]
    assert row.detail.startswith("back-off skipped by operator (was due ") and row.error is None
    assert (await replay_run(e2e.world, run.run_id)).ok


async def test_a_skipped_hook_timeout_times_the_hook_out(e2e: E2E) -> None:
    order = _order()
    run = await e2e.start(approve, order)
    await e2e.wait_for_event(run, "hook_created")
    await e2e.wait_for_event(run, "wait_created")
    done = await e2e.client.skip_wait(run.run_id, "wait_2")  # the hook's timeout, by its id
    assert done.event is not None
    assert await run.result(timeout=30) == "no answer: cancelled"
    await _skipped(e2e, run.run_id, "wait_completed")
    assert (await replay_run(e2e.world, run.run_id)).ok


async def test_several_waits_are_not_skipped_by_default_and_a_name_picks_one(e2e: E2E) -> None:
    run = await e2e.start(two_naps)
    await _until_count(run, "wait_created", 2)
    before = len(await run.events())
    with pytest.raises(AmbiguousWaitError) as several:
        await e2e.client.skip_wait(run.run_id)
    assert [w.id for w in several.value.waits] == ["wait_1", "wait_2"]
    with pytest.raises(WaitNotFoundError) as missing:
        await e2e.client.skip_wait(run.run_id, "third")
    assert "first" in str(missing.value) and "second" in str(missing.value)  # the run's waits, listed
    assert len(await run.events()) == before  # nothing written
    await e2e.client.skip_wait(run.run_id, "first")
    await e2e.client.skip_wait(run.run_id, "second")
    assert await run.result(timeout=30) == "rested"
    with pytest.raises(RunGoneError):
        await e2e.client.skip_wait(run.run_id)


async def test_the_timeout_of_a_hook_already_answered_is_not_a_wait_to_skip(e2e: E2E) -> None:
    """The answered hook is disposed: its timeout wait (never completed in the log) is void, as ``describe`` shows
    it. ``skip`` once listed it beside the sleep and refused to choose (``AmbiguousWaitError``: "has 2 waits")."""
    order = _order()
    run = await e2e.start(answered_then_nap, order)
    await e2e.hook_ready(f"skip-answered:{order}", run)
    await e2e.client.resume_hook(f"skip-answered:{order}", "yes")
    await _until_count(run, "wait_created", 2)
    with pytest.raises(WaitNotFoundError):
        await e2e.client.skip_wait(run.run_id, "wait_2")
    assert (await e2e.client.skip_wait(run.run_id)).wait.id == "wait_3"  # the run's one wait: its sleep
    assert await run.result(timeout=30) == "yes, rested"
    assert (await replay_run(e2e.world, run.run_id)).ok


@pytest.mark.parametrize(("flow", "waits_for", "expected"), [
    (nap, "wait_created", "shipped"), (pay, "step_retrying", "receipt"), (approve, "wait_created", "no answer")])
async def test_the_old_delayed_message_finds_nothing_to_do(e2e: E2E, flow: Any, waits_for: str, expected: str) -> None:
    if not e2e.memory:
        pytest.skip("needs a day to pass: virtual time (the memory World's clock)")
    order = _order()
    run = await e2e.start(flow, order)
    await e2e.wait_for_event(run, waits_for)
    await e2e.client.skip_wait(run.run_id)
    assert str(await run.result(timeout=30)).startswith(expected)
    events = await run.events()
    async with e2e.counting() as later:
        await e2e.sleep(DAY.total_seconds() + 3600)  # the wait's own delayed message comes, and more
    assert later.count >= 1 and later.errors == []
    assert await run.events() == events  # nothing more was written
    assert await run.status() == "completed"
