"""What the Workflow SDK's TypeScript runtime asks of a World beyond awsworld's own runtime, on every backend: a
lazy step start, errors that are another runtime's bytes, runs stamped with their creator's spec version (and a
newer one refused), and the answers its retries rely on (resilient ``run_started``, conflicts, ``ownerMessageId``).
The rules are ``world/rules/steps.py`` (``lazy_start``), ``world/entities.py`` (``ErrorBytes``) and
``world/rules/requests.py`` (``check_write_params``)."""

from __future__ import annotations

import asyncio
import base64
from typing import Any

import pytest

from awsworld.world import EntityConflictError, RunGoneError
from awsworld.world.entities import ErrorBytes
from awsworld.world.errors import InvalidInputError, RunNotSupportedError
from awsworld.world.ids import SPEC_VERSION_CURRENT

from .helpers import AnyWorld, all_events, module_world, new_run, run_created, step_created, types, unique

module_local_aws, world = module_world()

SDK_SPEC = 5
"""The spec version the suite's runtime (core 5.0.0-beta.35) stamps on every request."""


def tagged(data: bytes) -> dict[str, str]:
    return {"__type": "Uint8Array", "data": base64.b64encode(data).decode()}


BIG_INPUT = tagged(b"devl" + bytes(range(256)) * 100)  # above the AWS World's inline limit: it lands in S3


def lazy_start(step_id: str, input: Any = BIG_INPUT, **more: Any) -> dict[str, Any]:
    return {"eventType": "step_started", "correlationId": step_id, "specVersion": SDK_SPEC,
            "eventData": {"stepName": "step//./add//add", "input": input, "ownerMessageId": "msg_1", **more}}


async def test_a_lazy_start_creates_the_step_running_with_both_events(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    step_id = unique("step")
    result = await world.events.create(run_id, lazy_start(step_id, workflowName="wf"))
    assert result.step_created is True
    assert result.step is not None and result.event is not None
    assert (result.step.status, result.step.attempt, result.step.input) == ("running", 1, BIG_INPUT)
    assert result.event.event_type == "step_started" and result.event.event_data is not None
    assert "input" not in result.event.event_data and result.event.event_data["ownerMessageId"] == "msg_1"
    events = await all_events(world, run_id)
    assert types(events)[-2:] == ["step_created", "step_started"]
    created = events[-2]
    assert created.event_data == {"stepName": "step//./add//add", "input": BIG_INPUT, "workflowName": "wf"}
    assert (await world.steps.get(run_id, step_id)).input == BIG_INPUT
    assert result.to_wire()["stepCreated"] is True


async def test_a_lazy_start_of_a_step_that_exists_conflicts_and_writes_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    declared = unique("step")
    await world.events.create(run_id, step_created(declared))
    before = await all_events(world, run_id)
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, lazy_start(declared))
    assert await all_events(world, run_id) == before
    assert (await world.steps.get(run_id, declared)).status == "pending"


async def test_racing_lazy_starts_one_wins_the_others_conflict(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    step_id = unique("step")
    outcomes = await asyncio.gather(*(world.events.create(run_id, lazy_start(step_id)) for _ in range(4)),
                                    return_exceptions=True)
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    assert len(winners) == 1 and winners[0].step_created is True
    assert all(isinstance(o, EntityConflictError) for o in outcomes if isinstance(o, BaseException))
    assert types(await all_events(world, run_id)).count("step_started") == 1


async def test_a_step_started_without_input_is_a_plain_start(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    step_id = unique("step")
    await world.events.create(run_id, step_created(step_id))
    result = await world.events.create(run_id, {"eventType": "step_started", "correlationId": step_id,
                                                "eventData": {"stepName": "add"}})
    assert result.step_created is None and result.step is not None and result.step.attempt == 1


async def test_error_bytes_are_kept_byte_for_byte_on_runs_steps_and_retries(world: AnyWorld) -> None:
    error = tagged(b"gzip\x1f\x8b\x00\x00" + bytes(range(256)))
    run_id = await new_run(world, start=True)
    step_id = unique("step")
    await world.events.create(run_id, lazy_start(step_id))
    retry = await world.events.create(run_id, {"eventType": "step_retrying", "correlationId": step_id,
                                               "eventData": {"error": error, "stepName": "add"}})
    assert retry.step is not None and retry.step.status == "pending"
    assert isinstance(retry.step.error, ErrorBytes) and retry.step.error.to_wire() == error
    await world.events.create(run_id, {"eventType": "step_started", "correlationId": step_id})
    await world.events.create(run_id, {"eventType": "step_failed", "correlationId": step_id,
                                       "eventData": {"error": error}})
    assert (await world.steps.get(run_id, step_id)).to_wire()["error"] == error
    ended = await world.events.create(run_id, {"eventType": "run_failed", "specVersion": SDK_SPEC,
                                               "eventData": {"error": error, "errorCode": "USER_ERROR"}})
    assert ended.run is not None and ended.run.to_wire()["error"] == error
    assert (await world.runs.get(run_id)).to_wire()["error"] == error
    assert [e.event_data["error"] for e in await all_events(world, run_id) if e.event_type.endswith(
        ("_retrying", "_failed"))] == [error, error, error]


async def test_error_bytes_that_are_not_base64_are_refused(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await all_events(world, run_id)
    with pytest.raises(InvalidInputError):
        await world.events.create(run_id, {"eventType": "run_failed",
                                           "eventData": {"error": {"__type": "Uint8Array", "data": "not base64!"}}})
    assert await all_events(world, run_id) == before


async def test_runs_carry_their_creators_spec_version_and_a_newer_one_is_refused(world: AnyWorld) -> None:
    run_id = unique("wrun")
    made = await world.events.create(run_id, {**run_created(), "specVersion": SDK_SPEC})
    assert made.run is not None and made.run.spec_version == SDK_SPEC
    assert (await world.runs.get(run_id)).spec_version == SDK_SPEC
    own = await world.events.create(None, run_created())
    assert own.run is not None and own.run.spec_version == SPEC_VERSION_CURRENT
    newer = unique("wrun")
    with pytest.raises(RunNotSupportedError) as refused:
        await world.events.create(newer, {**run_created(), "specVersion": SPEC_VERSION_CURRENT + 1})
    assert refused.value.status == 400 and refused.value.world_spec_version == SPEC_VERSION_CURRENT
    with pytest.raises(Exception, match="not found"):
        await world.runs.get(newer)


async def test_an_event_written_without_a_spec_version_carries_the_worlds_as_do_its_step_and_listing(
        world: AnyWorld) -> None:
    """awsworld's own writers (``Client.cancel``, ``runs.set_attributes``, the Python runtime) send no
    ``specVersion``; the SDK reads an event without one as legacy data, so the World stamps its own
    (``CreateEventRequest.spec_version``; over HTTP: ``tests/cli/test_serve_cli.py``)."""
    run_id = unique("wrun")
    await world.events.create(run_id, {**run_created(), "specVersion": SDK_SPEC})
    made = await world.events.create(run_id, step_created("step_1"))
    assert made.event is not None and made.step is not None
    assert made.event.spec_version == made.step.spec_version == SPEC_VERSION_CURRENT
    assert (await world.steps.get(run_id, "step_1")).spec_version == SPEC_VERSION_CURRENT
    cancelled = await world.events.create(run_id, {"eventType": "run_cancelled"})
    assert cancelled.event is not None and cancelled.event.spec_version == SPEC_VERSION_CURRENT
    assert [(e.event_type, e.spec_version) for e in await all_events(world, run_id)] == [
        ("run_created", SDK_SPEC), ("step_created", SPEC_VERSION_CURRENT), ("run_cancelled", SPEC_VERSION_CURRENT)]


async def test_resilient_run_started_creates_then_answers_with_the_run_then_refuses_an_ended_one(
        world: AnyWorld) -> None:
    run_id = unique("wrun")
    start = {"eventType": "run_started", "specVersion": SDK_SPEC,
             "eventData": {"workflowName": "wf", "deploymentId": "dpl_1", "input": tagged(b"devl[1]"),
                           "attributes": {"$rootRunId": "wrun_root"}, "allowReservedAttributes": True}}
    created = await world.events.create(run_id, start)
    assert created.run is not None and created.run.status == "running"
    assert created.run.attributes == {"$rootRunId": "wrun_root"} and created.run.spec_version == SDK_SPEC
    again = await world.events.create(run_id, start)
    assert again.run is not None and again.run.status == "running"
    await world.events.create(run_id, {"eventType": "run_completed", "eventData": {"output": tagged(b"devl[3]")}})
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, {"eventType": "run_completed", "eventData": {"output": tagged(b"x")}})
    with pytest.raises(RunGoneError):
        await world.events.create(run_id, start)
