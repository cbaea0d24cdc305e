"""What only the in-memory World's storage promises (the contract itself is tests/conformance/, run on it too):
user values are copied when written and when read, every timestamp follows the World's clock, waiting for a
state is woken by the commit that makes it (no polling), and a serial workflow's storage work stays cheap."""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from awsworld._memory import MemoryWorld
from awsworld._memory.clock import VirtualClock
from awsworld._memory.storage import MemoryStorage
from awsworld.world import InvalidInputError, TooEarlyError

START = datetime(2030, 1, 1, tzinfo=UTC)


def run_created(input: Any = None) -> dict[str, Any]:
    return {"eventType": "run_created", "eventData": {"workflowName": "wf", "input": input}}


def step(kind: str, step_id: str, **data: Any) -> dict[str, Any]:
    return {"eventType": kind, "correlationId": step_id, "eventData": data}


async def new_run(world: MemoryWorld, input: Any = None) -> str:
    result = await world.events.create(None, run_created(input))
    assert result.run is not None
    await world.events.create(result.run.run_id, {"eventType": "run_started"})
    return result.run.run_id


class CountingPredicate:
    """A predicate that counts how often it is asked: a waiter that polled would ask it again and again."""

    def __init__(self, check: Any) -> None:
        self.check = check
        self.calls = 0

    def __call__(self) -> bool:
        self.calls += 1
        return bool(self.check())


# ---------------------------------------------------------------- copies


async def test_a_value_mutated_by_its_writer_after_the_write_does_not_change_the_log() -> None:
    world = MemoryWorld()
    given = {"items": [1, 2], "nested": {"k": "v"}}
    run_id = await new_run(world, input=given)
    await world.events.create(run_id, step("step_created", "s1", stepName="add", input=given))
    given["items"].append(3)
    given["nested"]["k"] = "changed"
    assert (await world.runs.get(run_id)).input == {"items": [1, 2], "nested": {"k": "v"}}
    assert (await world.steps.get(run_id, "s1")).input == {"items": [1, 2], "nested": {"k": "v"}}
    events = (await world.events.list(run_id)).data
    assert events[2].event_data is not None and events[2].event_data["input"]["items"] == [1, 2]


async def test_a_value_mutated_by_its_reader_does_not_change_the_log() -> None:
    world = MemoryWorld()
    run_id = await new_run(world, input={"a": [1]})
    context = {"trace": {"id": "t1"}}
    await world.events.create(run_id, step("step_created", "s1", stepName="add", input={"b": [2]},
                                           extra={"deep": [1]}))
    created = await world.events.create(None, {"eventType": "run_created", "eventData": {
        "workflowName": "wf", "executionContext": context}})
    assert created.run is not None and created.run.execution_context is not None
    created.run.execution_context["trace"]["id"] = "changed"
    run = await world.runs.get(run_id)
    run.input["a"].append(99)
    run.attributes["x"] = "y"
    step_read = await world.steps.get(run_id, "s1")
    step_read.input["b"].append(99)
    page = await world.events.list(run_id)
    assert page.data[2].event_data is not None
    page.data[2].event_data["input"]["b"].append(99)
    page.data[2].event_data["extra"]["deep"].append(99)
    assert (await world.runs.get(run_id)).input == {"a": [1]}
    assert (await world.runs.get(run_id)).attributes == {}
    assert (await world.steps.get(run_id, "s1")).input == {"b": [2]}
    again = (await world.events.list(run_id)).data[2].event_data
    assert again == {"stepName": "add", "input": {"b": [2]}, "extra": {"deep": [1]}}
    assert (await world.runs.get(created.run.run_id)).execution_context == {"trace": {"id": "t1"}}


async def test_a_value_that_is_not_json_is_refused_and_tuples_read_back_as_lists() -> None:
    world = MemoryWorld()
    run_id = await new_run(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(run_id, step("step_created", "s1", stepName="add", input={1, 2}))
    assert raised.value.field == "eventData.input"
    await world.events.create(run_id, step("step_created", "s2", stepName="add", input=(1, {2: "two"})))
    assert (await world.steps.get(run_id, "s2")).input == [1, {"2": "two"}]  # what JSON (and AWS) give back


# ---------------------------------------------------------------- the clock


async def test_every_timestamp_follows_the_worlds_clock() -> None:
    clock = VirtualClock(start=START)
    world = MemoryWorld(clock=clock)
    created = await world.events.create(None, run_created())
    assert created.run is not None and created.event is not None
    run_id = created.run.run_id
    assert START <= created.event.created_at < START + timedelta(seconds=5)
    assert created.run.created_at == created.event.created_at
    clock.advance(timedelta(days=3))
    started = await world.events.create(run_id, {"eventType": "run_started"})
    assert started.run is not None and started.event is not None
    assert started.event.created_at >= START + timedelta(days=3)
    assert started.run.started_at == started.run.updated_at == started.event.created_at
    assert started.run.created_at == created.run.created_at


async def test_a_retry_falls_due_when_the_clock_is_advanced() -> None:
    clock = VirtualClock(start=START)
    world = MemoryWorld(clock=clock)
    run_id = await new_run(world)
    await world.events.create(run_id, step("step_created", "s1", stepName="add"))
    await world.events.create(run_id, step("step_started", "s1"))
    due = clock.now() + timedelta(hours=1)
    await world.events.create(run_id, step("step_retrying", "s1", error={"message": "later"},
                                           retryAfter=due.isoformat()))
    with pytest.raises(TooEarlyError) as raised:
        await world.events.create(run_id, step("step_started", "s1"))
    assert 3500 <= raised.value.retry_after <= 3601
    clock.advance(timedelta(hours=1, seconds=1))
    result = await world.events.create(run_id, step("step_started", "s1"))
    assert result.step is not None and result.step.attempt == 2


async def test_a_stamp_may_not_run_ahead_of_the_worlds_clock() -> None:
    clock = VirtualClock(start=START)
    world = MemoryWorld(clock=clock)
    run_id = await new_run(world)
    in_band = (await world.events.list(run_id)).snapshot.seq_in_band  # type: ignore[union-attr]
    clock.advance(timedelta(days=1))
    at = clock.now() - timedelta(milliseconds=100)  # a day ahead of the wall clock, but not of this World's
    batch = await world.events.create_batch(run_id, [step("step_created", "s1", stepName="add")], in_band=True,
                                            expected_seq_in_band=in_band, stamp=at)
    assert batch.results[0].result is not None and batch.results[0].result.event is not None
    assert batch.results[0].result.event.created_at == at
    with pytest.raises(InvalidInputError):
        await world.events.create_batch(run_id, [step("step_created", "s2", stepName="add")], in_band=True,
                                        expected_seq_in_band=in_band + 1, stamp=clock.now() + timedelta(seconds=5))


# ---------------------------------------------------------------- waiting


async def test_changed_until_is_woken_by_the_commit_not_by_polling() -> None:
    world = MemoryWorld()
    run_id = await new_run(world)
    ended = CountingPredicate(lambda: world.storage.run_status(run_id) == "completed")

    async def finish_later() -> None:
        await asyncio.sleep(0.3)
        await world.events.create(run_id, {"eventType": "run_completed", "eventData": {"output": 1}})

    started = time.monotonic()
    woke, _ = await asyncio.gather(world.storage.changed.until(ended, timeout=10), finish_later())
    assert woke is True
    assert time.monotonic() - started < 1.0
    assert ended.calls == 2, "asked once at the start and once after the one commit"


async def test_changed_until_times_out_false_and_true_at_once_when_it_already_holds() -> None:
    world = MemoryWorld()
    run_id = await new_run(world)
    assert world.storage.run_status(run_id) == "running"
    assert world.storage.run_status("wrun_missing") is None
    never = CountingPredicate(lambda: world.storage.run_status(run_id) == "completed")
    started = time.monotonic()
    assert await world.storage.changed.until(never, timeout=0.2) is False
    assert 0.15 < time.monotonic() - started < 1.0
    assert never.calls <= 2
    assert await world.storage.changed.until(lambda: True, timeout=0) is True


async def test_wait_for_terminal_status_returns_when_a_peer_ends_the_run() -> None:
    world = MemoryWorld()
    peer = MemoryWorld(storage=world.storage)
    run_id = await new_run(world)

    async def finish_later() -> None:
        await asyncio.sleep(0.2)
        await peer.events.create(run_id, {"eventType": "run_completed", "eventData": {"output": "done"}})

    run, _ = await asyncio.gather(world.runs.wait_for_terminal_status(run_id, timeout=10), finish_later())
    assert run.status == "completed" and run.output == "done"


async def test_worlds_sharing_storage_share_its_clock_and_its_runs() -> None:
    storage = MemoryStorage(VirtualClock(start=START))
    first, second = MemoryWorld(storage=storage), MemoryWorld(storage=storage)
    assert first.clock is second.clock is storage.clock
    run_id = await new_run(first)
    assert (await second.runs.get(run_id)).status == "running"


# ---------------------------------------------------------------- speed


async def test_a_serial_thousand_step_workflows_storage_work_stays_well_under_a_millisecond_a_step() -> None:
    """What a serial workflow asks of storage per step: declare it and start it (one batch), record its
    result, read the new events from its cursor, and read the run. Measured in this process's CPU time, so a
    machine busy with other work does not fail it; it is a fraction of the whole runtime's 1 ms budget."""
    world = MemoryWorld()
    run_id = await new_run(world)
    cursor = (await world.events.list(run_id)).cursor
    steps = 1000
    started = time.process_time()
    for i in range(steps):
        step_id = f"s{i}"
        await world.events.create_batch(run_id, [step("step_created", step_id, stepName="add", input=[i, 1]),
                                                 step("step_started", step_id)])
        await world.events.create(run_id, step("step_completed", step_id, result=i + 1), after_step_body=True)
        page = await world.events.list(run_id, cursor=cursor)
        cursor = page.cursor
        await world.runs.get(run_id)
    per_step = (time.process_time() - started) / steps
    assert (await world.runs.get(run_id)).seq == 2 + 3 * steps
    assert per_step < 0.001, f"{per_step * 1e6:.0f} µs a step"
