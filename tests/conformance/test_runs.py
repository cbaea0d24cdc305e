"""Run lifecycle: run_created, run_started (incl. resilient start), terminal events, reads and listing."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable

import pytest

from awsworld.world import (
    SPEC_VERSION_CURRENT,
    EntityConflictError,
    InvalidInputError,
    RunGoneError,
    RunNotFoundError,
    new_run_id,
    slot_to_event_id,
)

from .helpers import (
    AnyWorld,
    all_events,
    attr_set,
    module_world,
    new_run,
    run_cancelled,
    run_completed,
    run_created,
    run_failed,
    run_started,
    stored,
    types,
)

module_local_aws, world = module_world()

WorldFactory = Callable[[], Awaitable[AnyWorld]]
TERMINAL_EVENTS = {"completed": run_completed, "failed": run_failed, "cancelled": run_cancelled}


async def end_run(world: AnyWorld, run_id: str, status: str) -> None:
    result = await world.events.create(run_id, TERMINAL_EVENTS[status]())
    assert result.run is not None and result.run.status == status


# ---------------------------------------------------------------- run_created


async def test_run_created_without_id_mints_a_wrun_ulid_at_slot_1(world: AnyWorld) -> None:
    result = await world.events.create(None, run_created(input={"x": [1, 2]}))
    assert result.run is not None and result.event is not None
    assert re.fullmatch(r"wrun_[0-9A-HJKMNP-TV-Z]{26}", result.run.run_id)
    assert result.event.event_id == "evnt_00000000000000000000000001"
    assert result.event.event_type == "run_created"
    assert result.event.run_id == result.run.run_id
    assert result.event.event_data is not None and result.event.event_data["workflowName"] == "wf-conformance"
    assert result.run.status == "pending"
    assert result.run.input == {"x": [1, 2]}
    assert (result.run.seq, result.run.seq_in_band, result.seq_in_band) == (1, 1, 1)
    assert result.run.spec_version == SPEC_VERSION_CURRENT
    stored = await world.runs.get(result.run.run_id)
    assert stored.status == "pending" and stored.input == {"x": [1, 2]}


async def test_run_created_twice_mints_distinct_ids(world: AnyWorld) -> None:
    assert await new_run(world) != await new_run(world)


async def test_run_created_with_a_client_id_uses_it(world: AnyWorld) -> None:
    run_id = new_run_id()
    result = await world.events.create(run_id, run_created())
    assert result.run is not None and result.run.run_id == run_id
    assert result.event is not None and result.event.run_id == run_id and result.event.slot == 1


async def test_run_created_for_an_existing_id_returns_the_run_unchanged_and_writes_nothing(world: AnyWorld) -> None:
    run_id = new_run_id()
    await world.events.create(run_id, run_created("first", input=[1]))
    before = await stored(world)
    again = await world.events.create(run_id, run_created("second", input=[2]))
    assert again.event is None
    assert again.run is not None
    assert (again.run.run_id, again.run.workflow_name, again.run.input) == (run_id, "first", [1])
    assert await stored(world) == before


async def test_run_created_keeps_attributes_execution_context_and_deployment(world: AnyWorld) -> None:
    result = await world.events.create(None, run_created(attributes={"team": "a"}, executionContext={"k": [1]},
                                                         deploymentId="dpl_1"))
    assert result.run is not None
    run = await world.runs.get(result.run.run_id)
    assert run.attributes == {"team": "a"}
    assert run.execution_context == {"k": [1]}
    assert run.deployment_id == "dpl_1"


# ---------------------------------------------------------------- run_started


async def test_run_started_moves_a_pending_run_to_running(world: AnyWorld) -> None:
    run_id = await new_run(world)
    result = await world.events.create(run_id, run_started())
    assert result.event is not None and result.event.slot == 2 and result.event.event_type == "run_started"
    assert result.run is not None and result.run.status == "running" and result.run.started_at is not None
    run = await world.runs.get(run_id)
    assert run.status == "running" and run.seq == 2
    assert types(await all_events(world, run_id)) == ["run_created", "run_started"]


async def test_run_started_on_a_running_run_is_an_idempotent_no_op(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await stored(world)
    result = await world.events.create(run_id, run_started())
    assert result.event is None
    assert result.run is not None and result.run.run_id == run_id and result.run.status == "running"
    assert await stored(world) == before


@pytest.mark.parametrize("status", TERMINAL_EVENTS)
async def test_run_started_on_a_terminal_run_is_gone(world: AnyWorld, status: str) -> None:
    run_id = await new_run(world, start=True)
    await end_run(world, run_id, status)
    before = await stored(world)
    with pytest.raises(RunGoneError) as raised:
        await world.events.create(run_id, run_started())
    assert raised.value.status == 410
    assert await stored(world) == before


async def test_run_started_on_a_missing_run_with_its_creation_fields_creates_it(world: AnyWorld) -> None:
    run_id = new_run_id()
    result = await world.events.create(run_id, run_started(workflowName="resilient", input={"a": 1},
                                                           deploymentId="dpl_r"))
    assert result.event is not None and result.event.slot == 2 and result.event.event_type == "run_started"
    assert result.run is not None and result.run.status == "running"
    events = await all_events(world, run_id)
    assert types(events) == ["run_created", "run_started"]
    assert [e.event_id for e in events] == [slot_to_event_id(1), slot_to_event_id(2)]
    assert events[0].event_data is not None
    assert events[0].event_data["workflowName"] == "resilient" and events[0].event_data["input"] == {"a": 1}
    run = await world.runs.get(run_id)
    assert (run.workflow_name, run.input, run.deployment_id, run.status) == ("resilient", {"a": 1}, "dpl_r",
                                                                              "running")
    assert run.seq == 2


async def test_run_started_on_a_missing_run_without_creation_fields_is_not_found(world: AnyWorld) -> None:
    run_id = new_run_id()
    before = await stored(world)
    with pytest.raises(RunNotFoundError) as raised:
        await world.events.create(run_id, run_started())
    assert raised.value.status == 404
    assert await stored(world) == before


# ---------------------------------------------------------------- terminal events


async def test_run_completed_records_output_and_ends_the_run(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    result = await world.events.create(run_id, run_completed({"answer": 42}))
    assert result.event is not None and result.event.slot == 3
    assert result.event.event_data == {"output": {"answer": 42}}
    assert result.run is not None and result.run.status == "completed" and result.run.completed_at is not None
    run = await world.runs.get(run_id)
    assert (run.status, run.output) == ("completed", {"answer": 42})


async def test_run_failed_records_the_structured_error(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    result = await world.events.create(run_id, {"eventType": "run_failed", "eventData": {
        "error": {"message": "it broke", "stack": "at x", "code": "E1"}, "errorCode": "USER_ERROR"}})
    assert result.run is not None and result.run.status == "failed"
    run = await world.runs.get(run_id)
    assert run.status == "failed"
    assert run.error is not None and (run.error.message, run.error.stack, run.error.code) == ("it broke", "at x",
                                                                                             "E1")
    assert run.error_code == "USER_ERROR"


async def test_run_cancelled_ends_the_run(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    result = await world.events.create(run_id, run_cancelled("user asked"))
    assert result.event is not None and result.event.event_type == "run_cancelled"
    assert (await world.runs.get(run_id)).status == "cancelled"


async def test_a_pending_run_can_be_cancelled(world: AnyWorld) -> None:
    run_id = await new_run(world)
    await world.events.create(run_id, run_cancelled())
    assert (await world.runs.get(run_id)).status == "cancelled"


@pytest.mark.parametrize(("first", "second"), [("completed", "completed"), ("completed", "failed"),
                                               ("failed", "completed"), ("cancelled", "failed")])
async def test_a_second_completion_or_failure_of_a_terminal_run_conflicts(world: AnyWorld, first: str,
                                                                          second: str) -> None:
    run_id = await new_run(world, start=True)
    await end_run(world, run_id, first)
    before = await stored(world)
    with pytest.raises(EntityConflictError) as raised:
        await world.events.create(run_id, TERMINAL_EVENTS[second]())
    assert raised.value.status == 409
    assert await stored(world) == before
    assert (await world.runs.get(run_id)).status == first


@pytest.mark.parametrize("first", ["completed", "failed"])
async def test_cancelling_a_completed_or_failed_run_conflicts(world: AnyWorld, first: str) -> None:
    run_id = await new_run(world, start=True)
    await end_run(world, run_id, first)
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, run_cancelled())
    assert (await world.runs.get(run_id)).status == first


async def test_cancelling_a_cancelled_run_is_an_idempotent_no_op(world: AnyWorld) -> None:
    """Answered with the run and no event (``world/rules/runs.py`` says why): nothing is written, so the log's end
    stays its last event and the first cancel's reason the one recorded."""
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, run_cancelled("first"))
    before = await stored(world)
    result = await world.events.create(run_id, run_cancelled("second"))
    assert result.event is None
    assert result.run is not None and result.run.status == "cancelled"
    assert await stored(world) == before
    last = (await all_events(world, run_id))[-1]
    assert (last.event_type, (last.event_data or {}).get("cancelReason")) == ("run_cancelled", "first")


async def test_terminal_event_on_a_missing_run_is_not_found(world: AnyWorld) -> None:
    with pytest.raises(RunNotFoundError):
        await world.events.create(new_run_id(), run_completed(1))


# ---------------------------------------------------------------- reads


async def test_runs_get_of_a_missing_run_is_not_found(world: AnyWorld) -> None:
    with pytest.raises(RunNotFoundError) as raised:
        await world.runs.get(new_run_id())
    assert raised.value.status == 404


async def test_runs_get_resolve_none_leaves_input_and_output_out(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True, input={"big": "in"})
    await world.events.create(run_id, run_completed({"big": "out"}))
    run = await world.runs.get(run_id, resolve_data="none")
    assert run.input is None and run.output is None
    full = await world.runs.get(run_id)
    assert full.input == {"big": "in"} and full.output == {"big": "out"}


async def test_runs_list_filters_by_workflow_name_and_status(storage_world_factory: WorldFactory) -> None:
    world = await storage_world_factory()  # an empty table: the listing sees only these runs
    a_pending = await new_run(world, workflow_name="wf-a")
    a_running = await new_run(world, workflow_name="wf-a", start=True)
    b_running = await new_run(world, workflow_name="wf-b", start=True)
    b_done = await new_run(world, workflow_name="wf-b", start=True)
    await end_run(world, b_done, "completed")

    async def ids(**kwargs: object) -> set[str]:
        page = await world.runs.list(**kwargs)  # type: ignore[arg-type]
        return {r.run_id for r in page.data}

    assert await ids() == {a_pending, a_running, b_running, b_done}
    assert await ids(workflow_name="wf-a") == {a_pending, a_running}
    assert await ids(status="running") == {a_running, b_running}
    assert await ids(status=["pending", "completed"]) == {a_pending, b_done}
    assert await ids(workflow_name="wf-b", status="running") == {b_running}
    assert await ids(status=[]) == set()
    assert await ids(workflow_name="nobody") == set()


async def test_runs_list_pages_newest_first_without_duplicates(storage_world_factory: WorldFactory) -> None:
    world = await storage_world_factory()
    created = [await new_run(world) for _ in range(5)]
    seen: list[str] = []
    cursor = None
    while True:
        page = await world.runs.list(limit=2, cursor=cursor)
        assert len(page.data) <= 2
        seen.extend(r.run_id for r in page.data)
        if not page.has_more:
            break
        cursor = page.cursor
        assert cursor is not None
    assert seen == list(reversed(created))


async def test_a_runs_page_costs_what_the_docs_say(storage_world_factory: WorldFactory) -> None:
    """What docs/how-to/list-runs.md says a page costs on AWS: one Query of the index partition, one BatchGetItem
    of the heads and one of their first events (what a run record has: its execution context) with, for a failed
    run, the block of the terminal event that holds the error the listing shows (it was a Query per failed run:
    ``aws/log/blocks.END_BLOCK``); no read of a completed run's output (values are not read) or of a cancelled
    run's end (it holds no value)."""
    world = await storage_world_factory()
    ended: dict[str, list[str]] = {"completed": [], "failed": [], "cancelled": []}
    for status, ids in ended.items():
        for _ in range(3):
            ids.append(await new_run(world, start=True))
            await end_run(world, ids[-1], status)
    stats = getattr(world, "stats", None)  # the AWS World's requests (the in-memory one has none to count)
    for status, ids in ended.items():
        if stats is not None:
            stats.reset()
        page = await world.runs.list(status=status)
        assert sorted(r.run_id for r in page.data) == sorted(ids)
        assert all((r.error is not None) == (status == "failed") and r.output is None for r in page.data)
        if stats is not None:  # the index's partition, the heads, their first events (and the errors' blocks)
            assert dict(stats.requests) == {"dynamodb.Query": 1, "dynamodb.BatchGetItem": 2}


async def test_a_filtered_listing_reads_further_at_each_query(storage_world_factory: WorldFactory) -> None:
    """``workflow`` and ``status`` together read the workflow's partition, filtered: each Query read ``limit + 1``
    items (at least 25), so a workflow's running runs behind 2,000 finished ones took 40 Queries (5.6 s on
    ``awsworld dev``). Each Query now reads twice as many as the one before (``run_index.MAX_FILTERED_READS``):
    here 25, 50, 100, 200 items, 4 Queries for the one running run behind 199 others (it was 8)."""
    world = await storage_world_factory()
    running = await new_run(world, workflow_name="wf-busy", start=True)
    gate = asyncio.Semaphore(16)

    async def pending() -> None:
        async with gate:
            await new_run(world, workflow_name="wf-busy")

    await asyncio.gather(*(pending() for _ in range(199)))
    stats = getattr(world, "stats", None)
    if stats is not None:
        stats.reset()
    page = await world.runs.list(workflow_name="wf-busy", status="running", limit=1)
    assert [r.run_id for r in page.data] == [running] and not page.has_more
    if stats is not None:
        assert dict(stats.requests) == {"dynamodb.Query": 4, "dynamodb.BatchGetItem": 2}


async def test_wait_for_terminal_status_returns_once_the_run_ends(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)

    async def finish_later() -> None:
        await asyncio.sleep(0.3)
        await world.events.create(run_id, run_completed("done"))

    started = time.monotonic()
    run, _ = await asyncio.gather(world.runs.wait_for_terminal_status(run_id, timeout=20), finish_later())
    assert run.status == "completed" and run.output == "done"
    assert time.monotonic() - started < 10


async def test_wait_for_terminal_status_times_out_with_the_latest_snapshot(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    started = time.monotonic()
    run = await world.runs.wait_for_terminal_status(run_id, timeout=0.3)
    assert run.status == "running"
    assert time.monotonic() - started < 3


async def test_wait_for_terminal_status_of_a_missing_run_is_not_found(world: AnyWorld) -> None:
    with pytest.raises(RunNotFoundError):
        await world.runs.wait_for_terminal_status(new_run_id(), timeout=0.2)


# ---------------------------------------------------------------- attributes


async def test_set_attributes_sets_and_removes_keys_through_an_attr_set_event(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    result = await world.runs.set_attributes(run_id, [{"key": "a", "value": "1"}, {"key": "b", "value": "2"}])
    assert result.event is not None and result.event.event_type == "attr_set"
    assert (await world.runs.get(run_id)).attributes == {"a": "1", "b": "2"}
    await world.runs.set_attributes(run_id, [{"key": "a", "value": None}])
    assert (await world.runs.get(run_id)).attributes == {"b": "2"}
    assert types(await all_events(world, run_id)) == ["run_created", "run_started", "attr_set", "attr_set"]


async def test_attr_set_event_sets_attributes(world: AnyWorld) -> None:
    run_id = await new_run(world)
    await world.events.create(run_id, attr_set(phase="ready"))
    assert (await world.runs.get(run_id)).attributes == {"phase": "ready"}


@pytest.mark.parametrize(("changes", "field"), [
    ([{"key": 5, "value": "x"}], "eventData.changes.0.key"),
    ([{"key": "a", "value": "1"}, {"key": "b", "value": 2}], "eventData.changes.1.value"),
    ([{"value": "x"}], "eventData.changes.0.key"),
    (["a=1"], "eventData.changes.0"),
    ([], "eventData.changes"),
])
async def test_set_attributes_refuses_a_malformed_change_naming_it(world: AnyWorld, changes: list[object],
                                                                    field: str) -> None:
    """A change that is not ``{key: str, value: str | None}`` is an InvalidInputError naming the field (a 400 over
    HTTP; it raised pydantic's ValidationError, a 500 to a TypeScript caller), and nothing is written."""
    run_id = await new_run(world)
    before = await stored(world)
    with pytest.raises(InvalidInputError) as refused:
        await world.runs.set_attributes(run_id, changes)  # type: ignore[arg-type]
    assert refused.value.field == field and field in refused.value.message
    assert await stored(world) == before


async def test_set_attributes_refuses_reserved_keys(world: AnyWorld) -> None:
    run_id = await new_run(world)
    before = await stored(world)
    with pytest.raises(InvalidInputError):
        await world.runs.set_attributes(run_id, [{"key": "$internal", "value": "x"}])
    assert await stored(world) == before
