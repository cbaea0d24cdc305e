"""At-most-once steps on every backend (``world.rules.at_most_once``): a start that says ``atMostOnce`` is
refused while the step's current attempt is unfinished, whoever asks (the owner's redelivery, or anyone once
the lease has passed), and nothing is written; the interrupted attempt's end lands only while that attempt is
the running one, so of several deliveries that found it cut off exactly one records it. A start without the
mark keeps today's at-least-once rule (the owner's redelivery starts a new attempt)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from awsworld.world import EntityConflictError, StepAttemptInterruptedError, StepRunningElsewhereError
from awsworld.world.clock import clock_of

from .helpers import AnyWorld, all_events, module_world, new_run, step_completed, step_created

module_local_aws, world = module_world()


def started(step_id: str, owner: str, *, lease: float = 600, at_most_once: bool = True) -> dict[str, Any]:
    data: dict[str, Any] = {"ownerMessageId": owner, "leaseSeconds": lease}
    if at_most_once:
        data["atMostOnce"] = True
    return {"eventType": "step_started", "correlationId": step_id, "eventData": data}


def interrupted(step_id: str, attempt: int, kind: str = "step_retrying", **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {"error": {"message": "cut off", "name": "StepInterruptedError"},
                            "interruptedAttempt": attempt, **extra}
    return {"eventType": kind, "correlationId": step_id, "eventData": data}


async def test_the_owners_redelivery_is_refused_over_an_unfinished_attempt_and_writes_nothing(
        world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    first = await world.events.create(run_id, started("s", "m1"))
    assert first.step is not None and first.step.attempt == 1
    before = await all_events(world, run_id)
    with pytest.raises(StepAttemptInterruptedError) as refused:
        await world.events.create(run_id, started("s", "m1"))
    assert refused.value.attempt == 1 and refused.value.status == 409
    assert await all_events(world, run_id) == before
    step = await world.steps.get(run_id, "s")
    assert (step.status, step.attempt) == ("running", 1)


async def test_a_start_without_the_mark_is_still_at_least_once(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1", at_most_once=False))
    again = await world.events.create(run_id, started("s", "m1", at_most_once=False))
    assert again.step is not None and again.step.attempt == 2


async def test_another_delivery_is_refused_as_running_elsewhere_while_the_lease_runs(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1"))
    with pytest.raises(StepRunningElsewhereError):  # the owner may still be running it: not interrupted
        await world.events.create(run_id, started("s", "m2"))


async def test_a_take_over_past_the_lease_finds_the_attempt_interrupted(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1", lease=0))
    with pytest.raises(StepAttemptInterruptedError) as refused:
        await world.events.create(run_id, started("s", "m2"))
    assert refused.value.attempt == 1


async def test_the_interrupted_end_lands_once_and_the_retry_is_a_new_durable_start(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1"))
    at = (clock_of(world).now() - timedelta(seconds=1)).isoformat()
    retrying = await world.events.create(run_id, interrupted("s", 1, retryAfter=at))
    assert retrying.step is not None and retrying.step.status == "pending"
    # A second delivery that found attempt 1 cut off too: its end is refused, nothing is written twice.
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, interrupted("s", 1, retryAfter=at))
    second = await world.events.create(run_id, started("s", "m2"))
    assert second.step is not None and (second.step.status, second.step.attempt) == ("running", 2)
    with pytest.raises(EntityConflictError):  # an end naming attempt 1 is stale while attempt 2 runs
        await world.events.create(run_id, interrupted("s", 1, "step_failed"))
    done = await world.events.create(run_id, step_completed("s", 7))
    assert done.step is not None and (done.step.status, done.step.output) == ("completed", 7)
    types = [e.event_type for e in await all_events(world, run_id) if e.correlation_id == "s"]
    assert types == ["step_created", "step_started", "step_retrying", "step_started", "step_completed"]


async def test_an_interrupted_end_may_fail_the_step_for_good(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1"))
    failed = await world.events.create(run_id, interrupted("s", 1, "step_failed"))
    assert failed.step is not None and failed.step.status == "failed"
    assert failed.event is not None and failed.event.event_data is not None
    assert failed.event.event_data["error"]["name"] == "StepInterruptedError"
