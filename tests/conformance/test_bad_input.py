"""Bad input gets a typed 400 (or the 404 of an unknown run) naming the field, and the table is unchanged."""

from __future__ import annotations

import math
from typing import Any

import pytest

from awsworld.world import InvalidInputError, RunNotFoundError, new_run_id

from .helpers import AnyWorld, module_world, new_run, run_created, step_created, stored, wait_created

module_local_aws, world = module_world()

BAD_EVENTS: dict[str, tuple[Any, str | None]] = {
    "unknown-event-type": ({"eventType": "step_exploded", "correlationId": "s1"}, "eventType"),
    "missing-event-type": ({"correlationId": "s1", "eventData": {"stepName": "add"}}, "eventType"),
    "event-type-not-a-string": ({"eventType": 7, "correlationId": "s1"}, "eventType"),
    "missing-step-name": ({"eventType": "step_created", "correlationId": "s1", "eventData": {"input": 1}},
                          "eventData.stepName"),
    "step-name-not-a-string": ({"eventType": "step_created", "correlationId": "s1",
                                "eventData": {"stepName": 12}}, "eventData.stepName"),
    "empty-step-name": ({"eventType": "step_created", "correlationId": "s1", "eventData": {"stepName": ""}},
                        "eventData.stepName"),
    "missing-correlation-id": ({"eventType": "step_created", "eventData": {"stepName": "add"}}, "correlationId"),
    "correlation-id-with-a-slash": ({"eventType": "step_created", "correlationId": "a/b",
                                     "eventData": {"stepName": "add"}}, "correlationId"),
    "correlation-id-with-a-hash": ({"eventType": "wait_completed", "correlationId": "a#b"}, "correlationId"),
    "event-data-not-an-object": ({"eventType": "step_created", "correlationId": "s1", "eventData": [1]},
                                 "eventData"),
    "resume-at-not-a-date": ({"eventType": "wait_created", "correlationId": "w1",
                              "eventData": {"resumeAt": "next tuesday"}}, "eventData.resumeAt"),
    "missing-resume-at": ({"eventType": "wait_created", "correlationId": "w1", "eventData": {}},
                          "eventData.resumeAt"),
    "run-failed-without-error": ({"eventType": "run_failed", "eventData": {}}, "eventData.error"),
    "error-without-message": ({"eventType": "step_failed", "correlationId": "s1",
                               "eventData": {"error": {"stack": "x"}}}, "eventData.error.message"),
    "hook-without-token": ({"eventType": "hook_created", "correlationId": "h1", "eventData": {}},
                           "eventData.token"),
    "attr-set-without-changes": ({"eventType": "attr_set", "eventData": {"changes": []}}, "eventData.changes"),
    "retention-beyond-30-days": ({"eventType": "hook_created", "correlationId": "h1", "eventData": {
        "token": "t", "tokenRetentionUntil": "2999-01-01T00:00:00+00:00"}}, "eventData.tokenRetentionUntil"),
    "hook-conflict-from-a-caller": ({"eventType": "hook_conflict", "correlationId": "h1",
                                     "eventData": {"token": "t", "conflictingRunId": "wrun_x"}}, "eventType"),
    "not-a-mapping": (["step_created"], None),
    # Ids a URL path drops (fetch drops "." and ".." segments, %2e too): no entity the World over HTTP cannot reach.
    "step-id-dot": ({"eventType": "step_created", "correlationId": ".", "eventData": {"stepName": "add"}},
                    "correlationId"),
    "lazy-step-start-id-dot-dot": ({"eventType": "step_started", "correlationId": "..",
                                    "eventData": {"stepName": "add", "input": None}}, "correlationId"),
    "hook-id-dot-dot": ({"eventType": "hook_created", "correlationId": "..", "eventData": {"token": "t-dots"}},
                        "correlationId"),
    "wait-id-dot": ({"eventType": "wait_created", "correlationId": ".",
                     "eventData": {"resumeAt": "2030-01-01T00:00:00Z"}}, "correlationId"),
}


@pytest.mark.parametrize("case", BAD_EVENTS)
async def test_a_bad_event_is_refused_naming_the_field_and_writes_nothing(world: AnyWorld, case: str) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    event, field = BAD_EVENTS[case]
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(run_id, event)
    assert raised.value.status == 400
    if field is not None:
        assert raised.value.field == field
    assert await stored(world) == before


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, 10 ** 5000, object()],
                         ids=["nan", "infinity", "minus-infinity", "int-of-5001-digits", "object"])
async def test_a_value_that_is_not_json_is_refused_not_altered(world: AnyWorld, value: Any) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(run_id, {"eventType": "step_completed", "correlationId": "s1",
                                           "eventData": {"result": value}})
    assert raised.value.field == "eventData.result"
    assert await stored(world) == before


SCALARS: list[Any] = [0, -7, 10 ** 30, 1.5, -0.0, 1e308, 5e-324, 0.1 + 0.2, True, False, None]


async def test_a_scalar_that_is_json_is_kept_exactly(world: AnyWorld) -> None:
    """Beside the refusals above: what a World takes it keeps as written (a scalar's JSON is written without the
    encoder, ``world/limits.py``'s ``value_json``): a bool stays a bool, not 1, -0.0 keeps its sign, a float
    every digit."""
    run_id = await new_run(world, start=True)
    for i, value in enumerate(SCALARS):
        await world.events.create(run_id, step_created(f"s{i}"))
        await world.events.create(run_id, {"eventType": "step_completed", "correlationId": f"s{i}",
                                           "eventData": {"result": value}})
    kept = [(await world.steps.get(run_id, f"s{i}")).output for i in range(len(SCALARS))]
    assert [(type(v), repr(v)) for v in kept] == [(type(v), repr(v)) for v in SCALARS]


@pytest.mark.parametrize("value", [math.nan, object()], ids=["nan", "object"])
async def test_a_run_input_that_is_not_json_is_refused_not_altered(world: AnyWorld, value: Any) -> None:
    """run_created takes its input as given, like every other value (the AWS World once stored pydantic's
    rendering of it: NaN as null, and crashed on an object)."""
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(None, {"eventType": "run_created",
                                         "eventData": {"workflowName": "w", "input": value}})
    assert raised.value.field == "eventData.input"
    assert await stored(world) == before


async def test_a_bad_event_in_a_batch_is_refused_and_writes_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await stored(world)
    with pytest.raises(InvalidInputError):
        await world.events.create_batch(run_id, [wait_created("w1"), BAD_EVENTS["missing-step-name"][0]])
    assert await stored(world) == before


async def test_an_event_for_an_unknown_run_is_not_found_and_writes_nothing(world: AnyWorld) -> None:
    await new_run(world)
    before = await stored(world)
    for event in (step_created("s1"), wait_created("w1"), {"eventType": "attr_set",
                                                          "eventData": {"changes": [{"key": "k", "value": "v"}]}}):
        with pytest.raises(RunNotFoundError) as raised:
            await world.events.create(new_run_id(), event)
        assert raised.value.status == 404
    assert await stored(world) == before


async def test_a_non_run_created_event_without_a_run_id_is_refused(world: AnyWorld) -> None:
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(None, step_created("s1"))
    assert raised.value.field == "runId"
    assert await stored(world) == before


@pytest.mark.parametrize("run_id", ["has/slash", "has#hash", "x" * 201, "spaces here", ".", ".."])
async def test_run_created_with_an_unsafe_run_id_is_refused(world: AnyWorld, run_id: str) -> None:
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(run_id, run_created())
    assert raised.value.field == "runId"
    assert await stored(world) == before


@pytest.mark.parametrize("run_id", [".", ".."])
async def test_a_resilient_start_does_not_make_a_run_a_url_path_cannot_reach(world: AnyWorld, run_id: str) -> None:
    """run_started creates a missing run from its data (a resilient start): not one of an id ``.`` or ``..``,
    which the World over HTTP could not reach (a URL path drops such a segment), as run_created does not."""
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(run_id, {"eventType": "run_started", "eventData": run_created()["eventData"]})
    assert raised.value.field == "runId" and raised.value.status == 400
    assert await stored(world) == before


async def test_run_created_without_a_workflow_name_is_refused(world: AnyWorld) -> None:
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(None, {"eventType": "run_created", "eventData": {"input": 1}})
    assert raised.value.field == "eventData.workflowName"
    assert await stored(world) == before


async def test_a_negative_event_count_is_refused(world: AnyWorld) -> None:
    run_id = await new_run(world)
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create(run_id, step_created("s1"), event_count=-1)
    assert raised.value.field == "eventCount"
    assert await stored(world) == before


@pytest.mark.parametrize("cursor", ["not base64 !!", "bm90IGpzb24", "WzFd", "eyJzIjotMX0", "eyJzIjoiYSJ9"],
                         ids=["garbage", "not-json", "json-list", "negative-slot", "slot-not-int"])
async def test_a_bad_events_cursor_is_refused(world: AnyWorld, cursor: str) -> None:
    run_id = await new_run(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.list(run_id, cursor=cursor)
    assert raised.value.field == "cursor"
    with pytest.raises(InvalidInputError):
        await world.events.list_by_correlation_id(run_id, "s1", cursor=cursor)


async def test_a_cursor_of_another_listing_is_refused(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    for i in range(3):
        await world.events.create(run_id, step_created(f"s{i}"))
    steps_cursor = (await world.steps.list(run_id, limit=1)).cursor
    events_cursor = (await world.events.list(run_id, limit=1)).cursor
    assert steps_cursor is not None and events_cursor is not None
    with pytest.raises(InvalidInputError):
        await world.events.list(run_id, cursor=steps_cursor)
    with pytest.raises(InvalidInputError):
        await world.steps.list(run_id, cursor=events_cursor)
    with pytest.raises(InvalidInputError):
        await world.hooks.list(run_id, cursor=steps_cursor)
    with pytest.raises(InvalidInputError):
        await world.runs.list(cursor=events_cursor)


@pytest.mark.parametrize("limit", [0, -1, 1001])
async def test_a_bad_limit_is_refused_by_every_listing(world: AnyWorld, limit: int) -> None:
    run_id = await new_run(world)
    calls = [
        world.events.list(run_id, limit=limit),
        world.events.list_by_correlation_id(run_id, "s1", limit=limit),
        world.steps.list(run_id, limit=limit),
        world.hooks.list(run_id, limit=limit),
        world.runs.list(limit=limit),
    ]
    for call in calls:
        with pytest.raises(InvalidInputError) as raised:
            await call
        assert raised.value.field == "limit"


async def test_runs_list_limit_is_capped_at_100(world: AnyWorld) -> None:
    with pytest.raises(InvalidInputError):
        await world.runs.list(limit=101)
    assert len((await world.runs.list(limit=100)).data) <= 100


async def test_runs_list_refuses_an_unknown_status(world: AnyWorld) -> None:
    with pytest.raises(InvalidInputError) as raised:
        await world.runs.list(status=["running", "sleeping"])
    assert raised.value.field == "status"
    # what to type instead: `client.list_runs(status="faild")` said only "unknown run status 'faild'"
    assert str(raised.value).startswith("unknown run status 'sleeping': a run's status is one of pending, running, "
                                        "completed, failed, cancelled")


async def test_list_by_correlation_id_needs_a_correlation_id(world: AnyWorld) -> None:
    run_id = await new_run(world)
    with pytest.raises(InvalidInputError):
        await world.events.list_by_correlation_id(run_id, "")
