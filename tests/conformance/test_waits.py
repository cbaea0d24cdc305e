"""Waits: created once, completed exactly once."""

from __future__ import annotations

from datetime import datetime

import pytest

from awsworld.world import EntityConflictError, EventNotFoundError, RunGoneError

from .helpers import (
    AnyWorld,
    future,
    module_world,
    new_run,
    run_completed,
    stored,
    wait_completed,
    wait_created,
)

module_local_aws, world = module_world()


async def test_wait_created_makes_a_waiting_wait(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    resume_at = future(300)
    result = await world.events.create(run_id, wait_created("w1", resume_at))
    assert result.event is not None and result.event.event_type == "wait_created" and result.event.slot == 3
    assert result.event.correlation_id == "w1"
    assert result.wait is not None
    assert (result.wait.wait_id, result.wait.run_id, result.wait.status) == ("w1", run_id, "waiting")
    assert result.wait.resume_at is not None and abs((result.wait.resume_at - resume_at).total_seconds()) < 0.001
    assert result.event.event_data is not None
    assert datetime.fromisoformat(result.event.event_data["resumeAt"]) == resume_at


async def test_duplicate_wait_created_conflicts_and_writes_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, wait_created("w1"))
    before = await stored(world)
    with pytest.raises(EntityConflictError) as raised:
        await world.events.create(run_id, wait_created("w1"))
    assert raised.value.status == 409
    assert await stored(world) == before


async def test_wait_completed_completes_the_wait(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, wait_created("w1"))
    result = await world.events.create(run_id, wait_completed("w1"))
    assert result.event is not None and result.event.event_type == "wait_completed" and result.event.slot == 4
    assert result.wait is not None and result.wait.status == "completed" and result.wait.completed_at is not None


async def test_wait_completed_twice_conflicts_and_writes_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, wait_created("w1"))
    await world.events.create(run_id, wait_completed("w1"))
    before = await stored(world)
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, wait_completed("w1"))
    assert await stored(world) == before


async def test_wait_completed_for_a_missing_wait_is_not_found(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await stored(world)
    with pytest.raises(EventNotFoundError) as raised:
        await world.events.create(run_id, wait_completed("ghost"))
    assert raised.value.status == 404
    assert await stored(world) == before


async def test_wait_created_on_a_terminal_run_is_gone(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, run_completed())
    before = await stored(world)
    with pytest.raises(RunGoneError):
        await world.events.create(run_id, wait_created("late"))
    assert await stored(world) == before
