"""The in-memory queue on its own: clock-driven visibility, the hooks a time-skipping driver uses, dedup
lapses, deep copies, speed, and the one delivery path running over its records unchanged.

The contract rules it shares with the SQS queue are in tests/conformance/test_queue*.py (``[memory]``).
"""

from __future__ import annotations

import asyncio
import sys
import time
from datetime import timedelta
from typing import Any, cast

import pytest

from awsworld._memory.clock import VirtualClock
from awsworld._memory.queue import RETENTION_SECONDS, VISIBILITY_TIMEOUT_SECONDS, MemoryConsumer, MemoryQueue
from awsworld._memory.world import MemoryWorld
from awsworld._worker.delivery import DeliveryPath, backoff_seconds
from awsworld._worker.dispatch import Worker, budget_deadline
from awsworld._worker.invoker import Invoker
from awsworld.aws.queue.dedup import DedupMarkers
from awsworld.settings import Settings
from awsworld.world import Delivery
from awsworld.world.queue import QUEUE_RETENTION_SECONDS, Refused, key_horizon_seconds

QUEUE = "__wkf_workflow_mem"
PREFIX = "__wkf_workflow_"


@pytest.fixture
def clock() -> VirtualClock:
    return VirtualClock()


@pytest.fixture
def queue(clock: VirtualClock) -> MemoryQueue:
    return MemoryQueue(clock)


async def one(consumer: MemoryConsumer) -> Delivery:
    [outcome] = await consumer.poll(10, 0)
    assert isinstance(outcome, Delivery)
    return outcome


async def test_the_visibility_timeout_the_budget_and_the_invocation_follow_the_flow_timeout(
        clock: VirtualClock, monkeypatch: pytest.MonkeyPatch) -> None:
    """``AWSWORLD_FLOW_TIMEOUT_SECONDS`` (the template's ``FlowTimeoutSeconds``) at 300: a received message stays
    hidden 1,800 s (six times it, as the template's FlowTimeouts mapping gives the stack's queue), the dedup keys'
    horizon counts that visibility, a delivery with no invocation deadline gets 290 s of budget, and the emulators'
    stand-in for Lambda stops a delivery after 300 s. The default stays 120 s and 720 s."""
    assert VISIBILITY_TIMEOUT_SECONDS == 720.0 == MemoryQueue(clock).visibility_timeout
    monkeypatch.setenv(Settings.flow_timeout_seconds.env, "300")
    queue = MemoryQueue(clock)
    consumer = queue.consumer(PREFIX)
    await queue.queue(QUEUE, {"n": 1})
    await one(consumer)
    hidden_until = queue.next_visible_at()
    assert hidden_until is not None and abs((hidden_until - clock.now()).total_seconds() - 1800) < 1
    clock.advance(1799)
    assert await consumer.poll(10, 0) == [], "still in flight: its delivery may run 300 s"
    clock.advance(1)
    assert (await one(consumer)).attempt == 2
    assert DedupMarkers(cast(Any, None)).horizon == key_horizon_seconds(QUEUE_RETENTION_SECONDS, 1800)
    left = budget_deadline(None) - time.monotonic()
    assert 289 < left <= 290
    assert Invoker(Worker(MemoryWorld()), queue.consumer(PREFIX)).timeout == 300.0


async def test_delays_follow_the_clock(queue: MemoryQueue, clock: VirtualClock) -> None:
    consumer = queue.consumer(PREFIX)
    sent = clock.now()
    message_id = await queue.queue(QUEUE, "wake", delay_seconds=30 * 24 * 3600)  # 30 days: one scheduled time
    assert (queue.visible_count(), queue.pending_count()) == (0, 1)
    due = queue.next_visible_at()
    assert due is not None and timedelta(days=30) <= due - sent < timedelta(days=30, seconds=1)
    assert await consumer.poll(10, 0) == []
    clock.advance(timedelta(days=30) - timedelta(seconds=5))
    assert await consumer.poll(10, 0) == [], "never early"
    clock.advance_to(due)
    assert queue.visible_count() == 1 and queue.next_visible_at() is None
    delivery = await one(consumer)
    assert (delivery.message_id, delivery.attempt) == (message_id, 1)
    assert timedelta(0) <= delivery.created_at - sent < timedelta(seconds=1), "the send's time, not the delivery's"


async def test_an_unacknowledged_delivery_comes_back_after_the_visibility_timeout(
        queue: MemoryQueue, clock: VirtualClock) -> None:
    consumer = queue.consumer(PREFIX)
    message_id = await queue.queue(QUEUE, {"n": 1})
    first = await one(consumer)
    assert (queue.visible_count(), queue.pending_count()) == (0, 1), "in flight: invisible, not deleted"
    hidden_until = queue.next_visible_at()
    assert hidden_until is not None
    assert abs((hidden_until - clock.now()).total_seconds() - VISIBILITY_TIMEOUT_SECONDS) < 1
    clock.advance(VISIBILITY_TIMEOUT_SECONDS)
    second = await one(consumer)
    assert (second.message_id, second.attempt, second.delivery_count) == (message_id, 2, 2)
    assert second.receipt_handle != first.receipt_handle
    await consumer.ack(first)  # a stale receipt: the message stays
    assert queue.pending_count() == 1
    await consumer.ack(second)
    assert queue.pending_count() == 0 and queue.next_visible_at() is None


async def test_back_off_and_redelivery_are_in_clock_time(queue: MemoryQueue, clock: VirtualClock) -> None:
    consumer = queue.consumer(PREFIX)
    await queue.queue(QUEUE, "x", idempotency_key="k")
    [record] = await consumer.receive()
    await consumer.back_off(record, 10)
    assert await consumer.receive() == []
    clock.advance(10)
    [record] = await consumer.receive()
    assert consumer.receive_count(record) == 2
    delivery = await consumer.open(record)
    assert isinstance(delivery, Delivery) and delivery.attempt == 2
    await consumer.redeliver_after(delivery, 3600)
    await consumer.delete(record)  # what the poller does after a redelivery: harmless, the record is stale
    assert queue.pending_count() == 1
    clock.advance(3599)
    assert queue.visible_count() == 0
    clock.advance(1)
    again = await one(consumer)
    assert (again.message_id, again.attempt) == (delivery.message_id, 3)
    assert again.transport_message_id != delivery.transport_message_id, "re-sent, as the AWS World does"
    assert await queue.queue(QUEUE, "dup", idempotency_key="k") == delivery.message_id


async def test_wait_for_visible_wakes_on_a_send_without_polling(queue: MemoryQueue) -> None:
    assert await queue.wait_for_visible(0.05) is False
    waiter = asyncio.create_task(queue.wait_for_visible(10))
    await asyncio.sleep(0.01)
    assert not waiter.done()
    started = time.monotonic()
    await queue.queue(QUEUE, 1)
    assert await asyncio.wait_for(waiter, 1) is True
    assert time.monotonic() - started < 0.1
    assert await queue.wait_for_visible(None) is True, "already visible: at once"


async def test_wait_for_visible_wakes_on_a_redelivery_and_on_wake(queue: MemoryQueue, clock: VirtualClock) -> None:
    consumer = queue.consumer(PREFIX)
    await queue.queue(QUEUE, 1)
    delivery = await one(consumer)
    waiter = asyncio.create_task(queue.wait_for_visible(10))
    await asyncio.sleep(0.01)
    await consumer.redeliver_after(delivery, 0)
    assert await asyncio.wait_for(waiter, 1) is True
    delivery = await one(consumer)
    await consumer.redeliver_after(delivery, 600)
    waiter = asyncio.create_task(queue.wait_for_visible(10))
    await asyncio.sleep(0.01)
    clock.advance(600)
    queue.wake()  # a clock jump tells no one: the driver says so
    assert await asyncio.wait_for(waiter, 1) is True


async def test_receive_waits_for_a_send_in_real_time(queue: MemoryQueue) -> None:
    consumer = queue.consumer(PREFIX)
    receiving = asyncio.create_task(consumer.receive(10, 5))
    await asyncio.sleep(0.02)
    started = time.monotonic()
    await queue.queue(QUEUE, "now")
    records = await asyncio.wait_for(receiving, 1)
    assert len(records) == 1 and time.monotonic() - started < 0.1
    assert await consumer.receive(10, 0.05) == [], "nothing more: returns after the wait"


async def test_receive_waits_for_a_short_delay_to_run_out(queue: MemoryQueue) -> None:
    consumer = queue.consumer(PREFIX)
    await queue.queue(QUEUE, "soon", delay_seconds=0.2)
    started = time.monotonic()
    records = await consumer.receive(10, 5)
    assert len(records) == 1 and 0.15 <= time.monotonic() - started < 1


async def test_a_key_lapses_after_its_horizon_without_an_ack(queue: MemoryQueue, clock: VirtualClock) -> None:
    first = await queue.queue(QUEUE, 1, idempotency_key="orphan")
    clock.advance(RETENTION_SECONDS + VISIBILITY_TIMEOUT_SECONDS - 1)
    assert await queue.queue(QUEUE, 2, idempotency_key="orphan") == first
    clock.advance(2)
    assert await queue.queue(QUEUE, 3, idempotency_key="orphan") != first


async def test_payloads_are_copies(queue: MemoryQueue) -> None:
    consumer = queue.consumer(PREFIX)
    payload: dict[str, Any] = {"list": [1, 2], "pair": (3, 4)}
    await queue.queue(QUEUE, payload)
    payload["list"].append("changed by the sender")
    delivery = await one(consumer)
    assert delivery.payload == {"list": [1, 2], "pair": [3, 4]}, "JSON values, as on the AWS World"
    delivery.payload["list"].append("changed by a handler")
    await consumer.release(delivery)
    assert (await one(consumer)).payload == {"list": [1, 2], "pair": [3, 4]}


async def test_the_delivery_path_runs_over_memory_records(queue: MemoryQueue, clock: VirtualClock) -> None:
    """Refused and poison records take the path's own branches; a real delivery is covered end to end by the
    runtime tests on the in-memory World."""
    path = DeliveryPath(cast(Any, None), queue.consumer(PREFIX))
    await queue.queue("__agent_wkf_workflow_x", {"turn": 1})
    [record] = await queue.consumer(PREFIX).receive()
    result = await path.handle(record, time.monotonic() + 10)
    assert result.failed and result.status == "refused"
    clock.advance(backoff_seconds(1) - 1)
    assert queue.visible_count() == 0, "backed off for the path's back-off, in clock time"
    clock.advance(1)
    [record] = await queue.consumer("__agent_wkf_workflow_").receive()
    assert isinstance(await queue.consumer(PREFIX).open(record), Refused)

    await queue.queue(QUEUE, {"not": "a flow message"})
    [record] = await queue.consumer(PREFIX).receive()
    result = await path.handle(record, time.monotonic() + 10)
    assert (result.status, result.failed) == ("dead-lettered", False)
    assert queue.dead_letters == [({"not": "a flow message"}, queue.dead_letters[0][1])]
    assert "runId" in queue.dead_letters[0][1]


async def _send_and_receive(count: int) -> int:
    """Send ``count`` delayed messages in one batch and ``count`` keyed ones, receive and ack all of them: the
    Python calls it takes (``sys.setprofile``: a count, the same on every machine and under any load)."""
    queue = MemoryQueue(VirtualClock())
    consumer = queue.consumer(PREFIX)
    calls = 0

    def counted(_frame: object, event: str, _arg: object) -> None:
        nonlocal calls
        if event in ("call", "c_call"):
            calls += 1

    sys.setprofile(counted)
    try:
        results = await queue.queue_batch(QUEUE, [{"payload": {"i": i}, "delaySeconds": i % 7}
                                                  for i in range(count)])
        for i in range(count):
            await queue.queue(QUEUE, {"j": i}, idempotency_key=f"k{i}")
        received = 0
        queue.clock.advance(7)  # type: ignore[attr-defined]
        while records := await consumer.receive(10):
            for record in records:
                delivery = await consumer.open(record)
                assert isinstance(delivery, Delivery)
                await consumer.ack(delivery)
            received += len(records)
    finally:
        sys.setprofile(None)
    assert all(r.ok for r in results)
    assert received == 2 * count and queue.pending_count() == 0
    return calls


async def test_send_and_receive_stay_cheap() -> None:
    """Sending, promoting delayed messages and receiving cost about the same per message at any depth (a heap and a
    FIFO, never a scan of what waits): twice the messages take at most 2.2 times the calls (linear is 2, a heap's
    log factor adds a little; a scan per receive would be 4). Counted, not timed: a timed bound fails on a loaded
    machine and proves nothing on a fast one."""
    small, large = await _send_and_receive(1_000), await _send_and_receive(2_000)
    assert large / small < 2.2, f"1,000 messages took {small:,} calls, 2,000 took {large:,}"


async def test_a_message_that_keeps_failing_goes_to_the_dead_letters(clock: VirtualClock) -> None:
    queue = MemoryQueue(clock, max_receive_count=3)
    consumer = queue.consumer(PREFIX)
    await queue.queue(QUEUE, {"poison": True})
    for attempt in (1, 2, 3):  # the handler fails: no ack, the visibility timeout runs out
        assert (await one(consumer)).attempt == attempt
        clock.advance(VISIBILITY_TIMEOUT_SECONDS)
    assert await consumer.receive() == []
    assert queue.pending_count() == 0 and queue.next_visible_at() is None
    assert [payload for payload, _ in queue.dead_letters] == [{"poison": True}]

    await queue.queue(QUEUE, "keeps retrying")
    for attempt in (1, 2, 3, 4):  # redeliveries are re-sends: they never walk a message into the dead letters
        delivery = await one(consumer)
        assert delivery.attempt == attempt
        await consumer.redeliver_after(delivery, 0)
    assert len(queue.dead_letters) == 1


async def test_a_wait_cancelled_in_the_turn_a_send_notified_it_ends(queue: MemoryQueue) -> None:
    """The test driver waits for a visible message as a task it cancels once anything wakes it. A send that
    notified the wait in the same turn as the cancel (its message taken meanwhile) left the task waiting on
    (3.11's ``asyncio.wait_for`` swallowed the cancel), woken by every later send: one more per delivery, so a
    1-minute schedule over a simulated day took quadratic time and ran out the driver's 30 s."""
    waiter = asyncio.create_task(queue.wait_for_visible(60))
    await asyncio.sleep(0)  # it waits
    await queue.queue(QUEUE, {"n": 1})  # notifies it (no await inside: all in this turn)
    assert len(queue.take(10, None)) == 1  # nothing visible any more
    waiter.cancel()
    for _ in range(5):
        await asyncio.sleep(0)
    assert waiter.cancelled(), "the cancelled wait went on waiting"
