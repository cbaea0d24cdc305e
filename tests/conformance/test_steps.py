"""Steps: creation, starts and attempts, retry back-off, first terminal result wins, the terminal-run fence."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from awsworld.world import (
    EntityConflictError,
    RunGoneError,
    StepNotFoundError,
    TooEarlyError,
)

from .helpers import (
    AnyWorld,
    all_events,
    future,
    module_world,
    new_run,
    past,
    run_cancelled,
    run_completed,
    run_failed,
    step_completed,
    step_created,
    step_failed,
    step_retrying,
    step_started,
    stored,
    types,
)

module_local_aws, world = module_world()

RUN_ENDS = {"completed": run_completed, "failed": run_failed, "cancelled": run_cancelled}


async def test_step_created_makes_a_pending_step_with_its_input(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    result = await world.events.create(run_id, step_created("s1", "add", [1, 2]))
    assert result.event is not None and result.event.slot == 3
    assert result.event.correlation_id == "s1"
    assert result.event.event_data == {"stepName": "add", "input": [1, 2]}
    assert result.step is not None
    assert (result.step.step_id, result.step.step_name, result.step.status, result.step.attempt) == (
        "s1", "add", "pending", 0)
    step = await world.steps.get(run_id, "s1")
    assert (step.status, step.input, step.run_id) == ("pending", [1, 2], run_id)


async def test_duplicate_step_created_conflicts_and_writes_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1", input=[1]))
    before = await stored(world)
    with pytest.raises(EntityConflictError) as raised:
        await world.events.create(run_id, step_created("s1", input=[2]))
    assert raised.value.status == 409
    assert await stored(world) == before
    assert (await world.steps.get(run_id, "s1")).input == [1]


async def test_step_started_moves_a_pending_step_to_running_at_attempt_1(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    result = await world.events.create(run_id, step_started("s1"))
    assert result.event is not None and result.event.event_type == "step_started"
    assert result.event.event_data is not None and result.event.event_data["attempt"] == 1
    assert result.step is not None and result.step.status == "running" and result.step.attempt == 1
    step = await world.steps.get(run_id, "s1")
    assert (step.status, step.attempt) == ("running", 1) and step.started_at is not None


async def test_step_started_on_a_running_step_begins_the_next_attempt(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    result = await world.events.create(run_id, step_started("s1"))
    assert result.step is not None and (result.step.status, result.step.attempt) == ("running", 2)
    assert result.event is not None and result.event.event_data is not None
    assert result.event.event_data["attempt"] == 2
    assert (await world.steps.get(run_id, "s1")).attempt == 2


async def test_step_started_attempt_is_counted_by_the_world_not_the_caller(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    result = await world.events.create(run_id, {"eventType": "step_started", "correlationId": "s1",
                                                "eventData": {"attempt": 7}})
    assert result.event is not None and result.event.event_data is not None
    assert result.event.event_data["attempt"] == 1
    assert (await world.steps.get(run_id, "s1")).attempt == 1


async def test_unknown_event_data_fields_survive_the_round_trip(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, {"eventType": "step_created", "correlationId": "s1", "eventData": {
        "stepName": "add", "input": [1], "inline": False, "creatorMessageId": "msg_creator"}})
    await world.events.create(run_id, {"eventType": "step_started", "correlationId": "s1", "eventData": {
        "stepName": "add", "startReason": "first"}})
    created, started = (await all_events(world, run_id))[2:]
    assert created.event_data is not None and started.event_data is not None
    assert created.event_data == {"stepName": "add", "input": [1], "inline": False,
                                  "creatorMessageId": "msg_creator"}
    lease = started.event_data.pop("leaseUntil")  # the World's own: when this attempt's lease ends
    assert datetime.fromisoformat(lease) > started.created_at
    assert started.event_data == {"stepName": "add", "startReason": "first", "attempt": 1}


async def test_step_started_on_a_missing_step_is_not_found(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await stored(world)
    with pytest.raises(StepNotFoundError) as raised:
        await world.events.create(run_id, step_started("nope"))
    assert raised.value.status == 404
    assert await stored(world) == before


async def test_step_started_before_retry_after_is_too_early(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    retrying = await world.events.create(run_id, step_retrying("s1", future(120)))
    assert retrying.step is not None and retrying.step.status == "pending"
    assert retrying.step.retry_after is not None
    before = await stored(world)
    with pytest.raises(TooEarlyError) as raised:
        await world.events.create(run_id, step_started("s1"))
    assert raised.value.status == 425
    assert 1 <= raised.value.retry_after <= 121
    assert await stored(world) == before


async def test_step_started_after_retry_after_passed_begins_the_next_attempt(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    await world.events.create(run_id, step_retrying("s1", past(1)))
    result = await world.events.create(run_id, step_started("s1"))
    assert result.step is not None and (result.step.status, result.step.attempt) == ("running", 2)
    assert result.step.retry_after is None


async def test_step_retrying_without_retry_after_allows_an_immediate_start(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    retrying = await world.events.create(run_id, step_retrying("s1", message="flaky"))
    assert retrying.step is not None and retrying.step.error is not None
    assert retrying.step.error.message == "flaky"
    result = await world.events.create(run_id, step_started("s1"))
    assert result.step is not None and result.step.attempt == 2


async def test_step_completed_records_the_result(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    result = await world.events.create(run_id, step_completed("s1", {"sum": 3}))
    assert result.event is not None and result.event.event_data == {"result": {"sum": 3}}
    assert result.step is not None and result.step.status == "completed" and result.step.output == {"sum": 3}
    step = await world.steps.get(run_id, "s1")
    assert (step.status, step.output) == ("completed", {"sum": 3}) and step.completed_at is not None


async def test_step_failed_records_the_error(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    await world.events.create(run_id, step_failed("s1", "kaput"))
    step = await world.steps.get(run_id, "s1")
    assert step.status == "failed" and step.error is not None and step.error.message == "kaput"


@pytest.mark.parametrize(("first", "second"), [("completed", "completed"), ("completed", "failed"),
                                               ("failed", "completed"), ("failed", "failed")])
async def test_the_first_terminal_step_result_wins(world: AnyWorld, first: str, second: str) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    make = {"completed": lambda: step_completed("s1", "first"), "failed": lambda: step_failed("s1", "first")}
    await world.events.create(run_id, make[first]())
    before = await stored(world)
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, step_completed("s1", "second") if second == "completed"
                                  else step_failed("s1", "second"))
    assert await stored(world) == before
    step = await world.steps.get(run_id, "s1")
    assert step.status == first
    assert (step.output if first == "completed" else step.error.message) == "first"  # type: ignore[union-attr]


@pytest.mark.parametrize("event", [step_started, step_retrying])
async def test_a_finished_step_cannot_start_or_retry_again(world: AnyWorld, event) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    await world.events.create(run_id, step_completed("s1"))
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, event("s1"))
    assert (await world.steps.get(run_id, "s1")).status == "completed"


@pytest.mark.parametrize("event", [step_completed, step_failed, step_retrying])
async def test_a_result_for_a_missing_step_is_not_found(world: AnyWorld, event) -> None:
    run_id = await new_run(world, start=True)
    with pytest.raises(StepNotFoundError):
        await world.events.create(run_id, event("ghost"))


# ---------------------------------------------------------------- the terminal-run fence


@pytest.mark.parametrize("end", RUN_ENDS)
async def test_step_created_on_a_terminal_run_is_gone(world: AnyWorld, end: str) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, RUN_ENDS[end]())
    before = await stored(world)
    with pytest.raises(RunGoneError) as raised:
        await world.events.create(run_id, step_created("late"))
    assert raised.value.status == 410
    assert await stored(world) == before


@pytest.mark.parametrize("end", RUN_ENDS)
async def test_step_started_on_a_terminal_run_is_gone_even_when_the_step_reads_running(world: AnyWorld,
                                                                                       end: str) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    await world.events.create(run_id, RUN_ENDS[end]())
    before = await stored(world)
    with pytest.raises(RunGoneError):
        await world.events.create(run_id, step_started("s1"))  # a redelivery of the claimed step
    assert await stored(world) == before
    step = await world.steps.get(run_id, "s1")
    assert (step.status, step.attempt) == ("running", 1)


async def test_step_started_of_a_pending_step_on_a_terminal_run_is_gone(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, run_cancelled())
    with pytest.raises(RunGoneError):
        await world.events.create(run_id, step_started("s1"))
    assert (await world.steps.get(run_id, "s1")).status == "pending"


@pytest.mark.parametrize("event", [step_completed, step_failed])
async def test_an_in_flight_step_finishes_after_its_run_ended(world: AnyWorld, event) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    await world.events.create(run_id, run_cancelled())
    result = await world.events.create(run_id, event("s1"))
    assert result.event is not None and result.event.slot == 6
    expected = "completed" if event is step_completed else "failed"
    assert (await world.steps.get(run_id, "s1")).status == expected
    assert types(await all_events(world, run_id))[-2:] == ["run_cancelled", f"step_{expected}"]


# ---------------------------------------------------------------- reads


async def test_steps_get_of_a_missing_step_is_not_found(world: AnyWorld) -> None:
    run_id = await new_run(world)
    with pytest.raises(StepNotFoundError) as raised:
        await world.steps.get(run_id, "nope")
    assert raised.value.status == 404


async def test_steps_list_pages_through_every_step(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    ids = [f"s{i}" for i in range(5)]
    for step_id in ids:
        await world.events.create(run_id, step_created(step_id))
    seen: list[str] = []
    cursor = None
    while True:
        page = await world.steps.list(run_id, limit=2, cursor=cursor)
        seen.extend(s.step_id for s in page.data)
        if not page.has_more:
            break
        cursor = page.cursor
    assert sorted(seen) == ids and len(seen) == len(set(seen))


async def test_steps_read_with_resolve_none_leave_input_and_output_out(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1", input=["in"]))
    await world.events.create(run_id, step_started("s1"))
    await world.events.create(run_id, step_completed("s1", ["out"]))
    step = await world.steps.get(run_id, "s1", resolve_data="none")
    assert step.input is None and step.output is None and step.status == "completed"
    listed = (await world.steps.list(run_id, resolve_data="none")).data[0]
    assert listed.input is None and listed.output is None


async def test_a_second_delivery_cannot_start_a_step_running_under_another(world: AnyWorld) -> None:
    from awsworld.world import StepRunningElsewhereError

    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))

    def started(owner: str) -> dict[str, Any]:
        return {"eventType": "step_started", "correlationId": "s", "eventData": {"ownerMessageId": owner}}

    first = await world.events.create(run_id, started("m1"))
    assert first.step.attempt == 1  # type: ignore[union-attr]
    with pytest.raises(StepRunningElsewhereError):
        await world.events.create(run_id, started("m2"))
    again = await world.events.create(run_id, started("m1"))  # the same message, redelivered, may restart it
    assert again.step.attempt == 2  # type: ignore[union-attr]
    await world.events.create(run_id, step_retrying("s"))
    assert (await world.events.create(run_id, started("m2"))).step.attempt == 3  # type: ignore[union-attr]
