"""A timer further away than one SQS message reaches (a 30-day sleep, a week's hook timeout, a retry in hours, a
poll's next check) costs one watchdog wake shortly before it, not a hop every 15 minutes; and its run still ends when
a message is lost.

On the emulator (``LocalAWS``: moto's SQS, the poller that runs the Lambda handler's delivery code) with time made
small: one message reaches 1 s (``SqsQueue.max_hop_seconds``, SQS's 900 s), the watch horizon is 2 s and its bucket
0.1 s (as ``bench/bill.py``'s long waits), and the tick (the watchdog, every minute in the stack) runs every 0.2 s. A
timer 5 s away is then five reaches away: before the fix it cost five hops (each a delivery that re-sends the message)
on top of the run's own deliveries; now the run's due brings one wake (``world.watch.timer_due``) whose flow sends the
exact delayed message. The counts are the poller's deliveries, not timings.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from datetime import datetime, timedelta

import pytest

from awsworld import HookTimeoutError, RetryableError, create_hook, poll_until, sleep, step, step_metadata, workflow
from awsworld.local import LocalAWS
from awsworld.world.messages import WATCHDOG_WAKE

from .conftest import ticking

pytestmark = pytest.mark.asyncio

REACH_SECONDS = 1
TIMER_SECONDS = 5.0


@step(name="far.add")
async def add(x: int) -> int:
    return x + 1


@step(name="far.busy_once", retry_delay=TIMER_SECONDS)
async def busy_once(x: int) -> int:
    if step_metadata().attempt == 1:
        raise RetryableError("busy: try again later")
    return x + 1


@step(name="far.ready_second_time")
async def ready_second_time(x: int) -> bool:
    return step_metadata().attempt >= 2


@workflow(name="far.poller")
async def poller(x: int) -> bool:
    return await poll_until(ready_second_time, x, interval=TIMER_SECONDS, backoff=1, timeout=TIMER_SECONDS * 10)


@workflow(name="far.sleeper")
async def sleeper(x: int) -> int:
    await sleep(timedelta(seconds=TIMER_SECONDS))
    return await add(x)


@workflow(name="far.approval")
async def approval(token: str) -> str:
    try:
        async with create_hook(token=token, timeout=timedelta(seconds=TIMER_SECONDS)) as hook:
            return str(await hook)
    except HookTimeoutError:
        return "timed out"


@workflow(name="far.retried")
async def retried(x: int) -> int:
    return await busy_once(x)


WAKES: dict[int, int] = {}
"""The watchdog's wakes each test's World sent (by ``id`` of its LocalAWS): counted at the World's ``queue``."""


@pytest.fixture
async def local(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LocalAWS]:
    monkeypatch.setenv("AWSWORLD_WATCH_HORIZON_SECONDS", "2")
    monkeypatch.setenv("AWSWORLD_WATCH_BUCKET_SECONDS", "0.1")
    async with LocalAWS() as made:
        made.world.sqs_queue.max_hop_seconds = REACH_SECONDS
        send = made.world.queue
        WAKES[id(made)] = 0

        async def counting(queue_name: str, payload: object, **options: object) -> object:
            if isinstance(payload, dict) and payload.get("wake") == WATCHDOG_WAKE:
                WAKES[id(made)] += 1
            return await send(queue_name, payload, **options)  # type: ignore[arg-type]

        made.world.queue = counting  # type: ignore[method-assign,assignment]
        try:
            async with ticking(made, 0.2):
                yield made
        finally:
            del WAKES[id(made)]


def deliveries(local: LocalAWS) -> int:
    assert local.poller is not None
    return local.poller.deliveries


LATE_WAKE_DELIVERIES = 3
"""What each watchdog wake beyond the timer's one can cost. On a machine so loaded that a message arrives later than
the 2 s horizon after the run's due (a minute in the stack), the watchdog wakes the run again: that wake's delivery;
and where the late message was the flow's continuation, both flows queue the step (a retry's step message has no
dedup key: ``_worker/flow_messages.queue_step``), the copy's delivery is superseded, and a flow message after the
end finds the run gone. Seen under ``-n 3`` and two busy processes: the retry's 4 deliveries were 7, with 2 wakes
(the continuation delivered 2.3 s after it was sent), where a flat slack of one delivery was allowed. With no late
wake, the shape's own count is the bound. A hop is never allowed (``assert_no_hop``)."""


def assert_deliveries(local: LocalAWS, shape: int) -> None:
    """At most ``shape`` deliveries (the timer's one wake included), plus ``LATE_WAKE_DELIVERIES`` for each wake more
    that the watchdog sent, as counted, not guessed from the time taken."""
    late_wakes = max(0, WAKES[id(local)] - 1)
    assert local.poller is not None
    statuses = [r.status for r in local.poller.results]
    assert deliveries(local) <= shape + LATE_WAKE_DELIVERIES * late_wakes, (WAKES[id(local)], statuses)


def assert_no_hop(local: LocalAWS) -> None:
    """No delivery was a hop (a message re-sent because its delay was beyond one message's reach: the cost this
    file is about). Before the fix, one per reach: five for each timer here."""
    assert local.poller is not None
    hops = [r.status for r in local.poller.results].count("deferred")
    assert hops == 0, f"{hops} hop(s)"


async def test_a_sleep_five_reaches_away_takes_one_wake_not_five_hops(local: LocalAWS) -> None:
    assert local.client is not None
    run = await local.client.start(sleeper, 1)
    assert await run.result(timeout=60) == 2
    # the start's delivery (it sleeps), the watchdog's wake shortly before the end (it sends the delayed
    # message), the end's delivery (the step runs inline): 3. Before: 2 plus one hop per reach, 7.
    assert_no_hop(local)
    assert_deliveries(local, 3)
    events = await run.events()
    [created] = [e for e in events if e.event_type == "wait_created"]
    [completed] = [e for e in events if e.event_type == "wait_completed"]
    # Never early: not before the time the sleep ends at (the workflow's now at the call plus the duration; the
    # wait_created event itself commits a moment after that now, so its own time is no reference).
    resume_at = datetime.fromisoformat(str((created.event_data or {})["resumeAt"]))
    assert completed.created_at >= resume_at, (completed.created_at, resume_at)
    # The whole duration, not one reach of it (the commit may trail the workflow's now by a loaded second or two).
    assert resume_at - created.created_at >= timedelta(seconds=TIMER_SECONDS - 2 * REACH_SECONDS)


async def test_a_hook_timeout_five_reaches_away_takes_one_wake(local: LocalAWS) -> None:
    assert local.client is not None
    run = await local.client.start(approval, f"far-{uuid.uuid4().hex}")
    assert await run.result(timeout=60) == "timed out"
    assert_no_hop(local)
    assert_deliveries(local, 3)


async def test_a_retry_five_reaches_away_takes_no_hop(local: LocalAWS) -> None:
    assert local.client is not None
    run = await local.client.start(retried, 1)
    assert await run.result(timeout=60) == 2
    [step_view] = await run.steps()
    assert step_view.attempt == 2
    # the start's (the first attempt runs inline and fails), the wake's (it sends a flow continuation for the
    # retry's time), that continuation's (it queues the step), the step's: 4. Before: 2 plus one hop per reach.
    assert_no_hop(local)
    assert_deliveries(local, 4)


async def test_a_poll_five_reaches_apart_takes_one_wake(local: LocalAWS) -> None:
    assert local.client is not None
    run = await local.client.start(poller, 1)
    assert await run.result(timeout=60) is True
    # the start's (the first poll, rejected), the wake's (it sends the next poll's continuation), the poll's: 3
    assert_no_hop(local)
    assert_deliveries(local, 3)


@pytest.mark.parametrize("lose", ["the delayed message", "the watchdog's wake"])
async def test_a_far_sleep_whose_message_is_lost_still_ends(local: LocalAWS, lose: str) -> None:
    """A message that should bring the sleep's end is lost on its way (dropped at the World's ``queue``, as a purge
    or a recreated queue loses it): the delayed one (before the fix the first hop, now the one the watchdog's wake
    sends), or the watchdog's wake itself. The watchdog still brings the run: at the timer plus the horizon, or at
    the due it snoozed the run to before waking it."""
    assert local.client is not None
    world = local.world
    send = world.queue
    lost: list[object] = []

    def lost_here(payload: object, options: dict[str, object]) -> bool:
        if lose == "the delayed message":
            return bool(options.get("delay_seconds"))
        return isinstance(payload, dict) and payload.get("wake") == WATCHDOG_WAKE

    async def losing(queue_name: str, payload: object, **options: object) -> object:
        if not lost and lost_here(payload, options):
            lost.append(payload)
            return None  # dropped: never reaches SQS
        return await send(queue_name, payload, **options)  # type: ignore[arg-type]

    world.queue = losing  # type: ignore[method-assign,assignment]
    try:
        run = await local.client.start(sleeper, 5)
        assert await run.result(timeout=60) == 6
    finally:
        world.queue = send  # type: ignore[method-assign]
    assert len(lost) == 1
