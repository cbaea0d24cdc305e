"""Skips (``world/rules/skips.py``): an operator ends a wait, or a step's retry back-off, before its time, on every
World, and the log records it as an operator's act with the time it was due."""

from __future__ import annotations

from datetime import datetime

import pytest

from awsworld.world import EntityConflictError, InvalidInputError, RunGoneError, TooEarlyError
from awsworld.world.rules.skips import skip_request

from .helpers import (
    AnyWorld,
    all_events,
    future,
    module_world,
    new_run,
    run_cancelled,
    step_completed,
    step_created,
    step_retrying,
    step_started,
    stored,
    wait_completed,
    wait_created,
)

module_local_aws, world = module_world()


def skip_wait(wait_id: str) -> dict[str, object]:
    return {**wait_completed(wait_id), "eventData": skip_request()}


def skip_retry(step_id: str, message: str = "retry me") -> dict[str, object]:
    return {"eventType": "step_retrying", "correlationId": step_id,
            "eventData": {"error": {"message": message}, **skip_request()}}


async def test_a_skipped_wait_completes_now_and_records_who_and_when_it_was_due(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    due = future(86_400)
    await world.events.create(run_id, wait_created("w1", due))
    result = await world.events.create(run_id, skip_wait("w1"))
    assert result.wait is not None and result.wait.status == "completed"
    assert result.wait.completed_at is not None and result.wait.completed_at < due
    event = result.event
    assert event is not None and event.event_type == "wait_completed"
    assert event.event_data is not None
    skipped = event.event_data["skipped"]
    assert skipped["by"] == "operator" and datetime.fromisoformat(skipped["dueAt"]) == due
    [logged] = [e for e in await all_events(world, run_id) if e.event_type == "wait_completed"]
    assert logged.event_data == event.event_data  # as read back, the same record


async def test_a_wait_is_skipped_once(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, wait_created("w1"))
    await world.events.create(run_id, wait_completed("w1"))  # it ended on its own first
    before = await stored(world)
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, skip_wait("w1"))
    assert await stored(world) == before


async def test_a_skip_on_an_ended_run_is_gone(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, wait_created("w1"))
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    await world.events.create(run_id, step_retrying("s1", future(3600)))
    await world.events.create(run_id, run_cancelled())
    before = await stored(world)
    for request in (skip_wait("w1"), skip_retry("s1")):
        with pytest.raises(RunGoneError):
            await world.events.create(run_id, request)
    assert await stored(world) == before


@pytest.mark.parametrize("skipped", [{"by": "someone"}, "operator", {"by": None}])
async def test_a_malformed_skip_is_refused_before_anything_is_written(world: AnyWorld, skipped: object) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, wait_created("w1"))
    before = await stored(world)
    with pytest.raises(InvalidInputError) as refused:
        await world.events.create(run_id, {**wait_completed("w1"), "eventData": {"skipped": skipped}})
    assert refused.value.field == "eventData.skipped"
    assert await stored(world) == before


async def test_a_skipped_back_off_lets_the_next_attempt_start_at_once(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    due = future(3600)
    await world.events.create(run_id, step_retrying("s1", due, message="card declined"))
    with pytest.raises(TooEarlyError):  # the back-off holds
        await world.events.create(run_id, step_started("s1"))
    result = await world.events.create(run_id, skip_retry("s1", "card declined"))
    step = result.step
    assert step is not None and (step.status, step.attempt, step.retry_after) == ("pending", 1, None)
    assert step.error is not None and step.error.message == "card declined"  # the error stays the attempt's
    assert result.event is not None and result.event.event_data is not None
    assert "retryAfter" not in result.event.event_data
    skipped = result.event.event_data["skipped"]
    assert skipped["by"] == "operator" and datetime.fromisoformat(skipped["dueAt"]) == due
    started = await world.events.create(run_id, step_started("s1"))  # no longer too early
    assert started.step is not None and (started.step.status, started.step.attempt) == ("running", 2)
    assert (await world.steps.get(run_id, "s1")).retry_after is None


@pytest.mark.parametrize("state", ["running", "queued", "completed"])
async def test_a_back_off_skip_of_a_step_not_waiting_to_retry_conflicts(world: AnyWorld, state: str) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    if state != "queued":
        await world.events.create(run_id, step_started("s1"))
    if state == "completed":
        await world.events.create(run_id, step_completed("s1"))
    before = await stored(world)
    with pytest.raises(EntityConflictError) as refused:
        await world.events.create(run_id, skip_retry("s1"))
    assert "no back-off to skip" in refused.value.message or state == "completed"
    assert await stored(world) == before


async def test_a_back_off_is_skipped_once(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    await world.events.create(run_id, step_retrying("s1", future(3600)))
    await world.events.create(run_id, skip_retry("s1"))
    before = await stored(world)
    with pytest.raises(EntityConflictError):  # the back-off is gone: nothing left to skip
        await world.events.create(run_id, skip_retry("s1"))
    assert await stored(world) == before
