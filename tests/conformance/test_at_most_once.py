"""At-most-once steps on every backend (``world.rules.at_most_once``): a start that says ``atMostOnce`` is
refused while the step's current attempt is unfinished, whoever asks (the owner's redelivery, or anyone once
the lease has passed), and nothing is written; the interrupted attempt's end lands only while that attempt is
the running one, so of several deliveries that found it cut off exactly one records it. A start without the
mark keeps today's at-least-once rule (the owner's redelivery starts a new attempt).

Every step's last attempt, by the same rule: a start naming ``maxAttempts`` is refused over an unfinished
attempt that was already the last its policy allows (a cut-off attempt counts), so a 2-attempt step never gets
an attempt 3; below the last, the cut-off attempt is followed by the next one. ``maxAttempts`` is checked as
input and not kept in the log."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from awsworld.world import (
    EntityConflictError,
    InvalidInputError,
    RunGoneError,
    StepAttemptInterruptedError,
    StepRunningElsewhereError,
)
from awsworld.world.clock import clock_of

from .helpers import (
    AnyWorld,
    all_events,
    module_peers,
    module_world,
    new_run,
    run_cancelled,
    step_completed,
    step_created,
    step_failed,
)

module_local_aws, world = module_world()
peers = module_peers(2)


def started(step_id: str, owner: str, *, lease: float = 600, at_most_once: bool = True,
            max_attempts: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = {"ownerMessageId": owner, "leaseSeconds": lease}
    if at_most_once:
        data["atMostOnce"] = True
    if max_attempts is not None:
        data["maxAttempts"] = max_attempts
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


@pytest.mark.parametrize("mark", [{"at_most_once": True}, {"at_most_once": False, "max_attempts": 1}],
                         ids=["at-most-once", "last-attempt"])
async def test_a_start_on_an_ended_run_is_refused_as_gone_before_its_attempt_is_judged_cut_off(
        world: AnyWorld, mark: dict[str, Any]) -> None:
    """The terminal-run start fence comes first: the owner's redelivery of an unfinished attempt that may not be
    started again, on a run cancelled meanwhile, is refused as gone (the runtime records nothing), not as an
    interrupted attempt (the runtime would record that attempt's end, a step_failed after the run's end: `awsworld
    describe` of a cancelled run showed its stopped step failed "its delivery was cut off")."""
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1", **mark))
    await world.events.create(run_id, run_cancelled())
    before = await all_events(world, run_id)
    with pytest.raises(RunGoneError):
        await world.events.create(run_id, started("s", "m1", **mark))
    assert await all_events(world, run_id) == before


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


# ------------------------------------------------------------------------- every step's last attempt


async def test_a_cut_off_attempt_counts_and_the_last_one_is_never_followed_by_another(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1", at_most_once=False, max_attempts=2))
    # Attempt 1 was cut off (its message came back): at-least-once, it is started again as attempt 2.
    second = await world.events.create(run_id, started("s", "m1", at_most_once=False, max_attempts=2))
    assert second.step is not None and (second.step.status, second.step.attempt) == ("running", 2)
    before = await all_events(world, run_id)
    # Attempt 2, the last of 2, was cut off too: whoever asks (the owner's redelivery, a take-over), no attempt 3.
    with pytest.raises(StepAttemptInterruptedError) as refused:
        await world.events.create(run_id, started("s", "m1", at_most_once=False, max_attempts=2))
    assert refused.value.attempt == 2 and refused.value.status == 409
    assert await all_events(world, run_id) == before, "the refusal wrote nothing"
    failed = await world.events.create(run_id, interrupted("s", 2, "step_failed"))
    assert failed.step is not None and (failed.step.status, failed.step.attempt) == ("failed", 2)
    starts = [e.event_data for e in await all_events(world, run_id) if e.event_type == "step_started"]
    assert [d["attempt"] for d in starts] == [1, 2]
    assert all("maxAttempts" not in d for d in starts), "the policy's limit is a request field, not the log's"


async def test_a_take_over_past_the_lease_of_the_last_attempt_is_refused(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1", lease=0, at_most_once=False, max_attempts=1))
    with pytest.raises(StepAttemptInterruptedError) as refused:
        await world.events.create(run_id, started("s", "m2", at_most_once=False, max_attempts=1))
    assert refused.value.attempt == 1


async def test_the_limit_bounds_only_a_step_found_unfinished(world: AnyWorld) -> None:
    """A step that failed and is due to retry starts its next attempt (the runtime retried it only because
    attempts were left); another delivery's live attempt is refused as running elsewhere, not as cut off."""
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1", at_most_once=False, max_attempts=2))
    with pytest.raises(StepRunningElsewhereError):
        await world.events.create(run_id, started("s", "m2", at_most_once=False, max_attempts=1))
    at = (clock_of(world).now() - timedelta(seconds=1)).isoformat()
    await world.events.create(run_id, {"eventType": "step_retrying", "correlationId": "s", "eventData": {
        "error": {"message": "boom", "name": "ValueError"}, "retryAfter": at}})
    again = await world.events.create(run_id, started("s", "m2", at_most_once=False, max_attempts=2))
    assert again.step is not None and again.step.attempt == 2


@pytest.mark.parametrize("bad", [0, -1, "2", 2.0, True])
async def test_a_max_attempts_that_is_not_a_positive_int_is_refused_and_writes_nothing(world: AnyWorld,
                                                                                       bad: Any) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    before = await all_events(world, run_id)
    with pytest.raises(InvalidInputError) as refused:
        await world.events.create(run_id, started("s", "m1", at_most_once=False, max_attempts=bad))
    assert refused.value.field == "eventData.maxAttempts"
    # The born-running pair checks it as any start does: that unit of the batch is refused.
    batch = await world.events.create_batch(run_id, [step_created("t"),
                                                     started("t", "m1", at_most_once=False, max_attempts=bad)])
    assert [o.status for o in batch.results] == [400, 400]
    assert await all_events(world, run_id) == before


@pytest.mark.parametrize("kind", ["step_failed", "step_retrying"])
async def test_an_interrupted_end_on_an_ended_run_is_refused_as_gone_and_a_real_outcome_still_lands(
        world: AnyWorld, kind: str) -> None:
    """A cancel that lands between the runtime's finding an attempt cut off and its write of that attempt's end:
    the end (``interruptedAttempt``, the runtime's bookkeeping: no body ran for it) is refused as gone, and the
    run's end stays the last event of its log, on its own or in a batch. A real outcome of a body that ran still
    lands after the end (the terminal-run fence is on starting, not on finishing)."""
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1"))
    await world.events.create(run_id, run_cancelled())
    before = await all_events(world, run_id)
    at = (clock_of(world).now() + timedelta(seconds=5)).isoformat()
    end = interrupted("s", 1, kind, **({"retryAfter": at} if kind == "step_retrying" else {}))
    with pytest.raises(RunGoneError):
        await world.events.create(run_id, end)
    batch = await world.events.create_batch(run_id, [end])
    assert [o.status for o in batch.results] == [410]
    assert await all_events(world, run_id) == before
    assert before[-1].event_type == "run_cancelled"
    step = await world.steps.get(run_id, "s")
    assert (step.status, step.attempt) == ("running", 1)
    landed = await world.events.create(run_id, step_failed("s"))
    assert landed.step is not None and landed.step.status == "failed"
    assert [e.event_type for e in await all_events(world, run_id)][-2:] == ["run_cancelled", "step_failed"]


async def test_an_interrupted_end_is_refused_by_a_run_end_its_writer_has_not_seen(world: AnyWorld,
                                                                                   peers: list[AnyWorld]) -> None:
    """The commit re-checks that the run is alive: a writer whose knowledge of the run predates the cancel (another
    process ended it) is refused as gone too, and nothing follows the run's end."""
    run_id = await new_run(world, start=True)
    writer, other = peers[0], peers[1]
    await writer.events.create(run_id, step_created("s"))
    await writer.events.create(run_id, started("s", "m1"))
    await other.events.create(run_id, run_cancelled())
    with pytest.raises(RunGoneError):
        await writer.events.create(run_id, interrupted("s", 1, "step_failed"))
    assert [e.event_type for e in await all_events(world, run_id)][-1] == "run_cancelled"
