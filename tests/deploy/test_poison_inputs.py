"""Inputs that can never succeed end their run (or their step) at once, through the Lambda flow handler:
never a redelivery loop, never a run left ``running`` or ``pending``."""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from awsworld import Client, RunStartError, WorkflowRunFailedError
from awsworld.authoring.definitions import workflow_name
from awsworld.authoring.errors import UNKNOWN_WORKFLOW, USER_ERROR, VALUE_TOO_LARGE
from awsworld.aws import AWSConfig, AWSWorld
from awsworld.lambda_host.container import Container
from awsworld.lambda_host.flow import handle
from awsworld.lambda_host.observability import instrument
from awsworld.local import LocalAWS
from awsworld.world.entities import TERMINAL_RUN_STATUSES

from . import app
from .lambda_env import EventSourceMapping

SMALL_LIMIT = 64 * 1024


def ended(run: Any) -> Any:
    async def done() -> bool:
        return await run.status() in TERMINAL_RUN_STATUSES

    return done


async def failure(run: Any) -> WorkflowRunFailedError:
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=1)
    return failed.value


async def test_wrong_arguments_fail_the_run_with_the_users_error_in_one_delivery(
        local: LocalAWS, esm: EventSourceMapping) -> None:
    assert local.client is not None
    with pytest.raises(TypeError, match="missing 1 required positional argument: 'b'"):
        await local.client.start(app.two_args, 1)  # refused where it is made: the workflow is known here
    # A client without the workflow's code (by name, no registry) cannot check: the run fails in one delivery.
    run = await Client(local.world).start(workflow_name(app.two_args), 1)  # b is missing
    await esm.run_until(ended(run), timeout=20)
    error = await failure(run)
    assert error.code == USER_ERROR and error.error_type == "TypeError" and "'b'" in str(error)
    assert len(esm.invocations) == 1 and not esm.invocations[0].failed


async def test_a_body_that_raises_between_steps_fails_the_run_at_once(local: LocalAWS, esm: EventSourceMapping) -> None:
    assert local.client is not None
    run = await local.client.start(app.raises_between_steps, "A-1")
    await esm.run_until(ended(run), timeout=20)
    error = await failure(run)
    assert error.code == USER_ERROR and error.error_type == "LookupError" and "no such order A-1" in str(error)
    assert not any(i.failed for i in esm.invocations)


@pytest.fixture
def unknown_window(lambda_environment: dict[str, str]) -> Iterator[pytest.MonkeyPatch]:
    with pytest.MonkeyPatch.context() as patch:
        yield patch


async def test_an_unknown_workflow_backs_off_for_a_window_then_fails_its_run(
        local: LocalAWS, esm: EventSourceMapping, unknown_window: pytest.MonkeyPatch) -> None:
    client = Client(local.world)  # like a client of a deployed stack: it has no workflow code to check names
    run = await client.start("deploy.not_deployed_yet", 1)
    unknown_window.setenv("AWSWORLD_FAILURE_BACKOFF_SECONDS", "1")
    first = await esm.poll()
    assert first is not None and first.failed == set(first.message_ids), "within the window: retried later"
    assert await run.status() == "pending"

    unknown_window.setenv("AWSWORLD_UNKNOWN_WORKFLOW_WINDOW_SECONDS", "0")
    await esm.run_until(ended(run), timeout=20)
    error = await failure(run)
    assert error.code == UNKNOWN_WORKFLOW and "deploy.not_deployed_yet" in str(error)
    assert not esm.invocations[-1].failed


async def test_a_client_with_a_registry_refuses_a_name_it_lacks(local: LocalAWS) -> None:
    assert local.client is not None and local.client.registry is not None
    with pytest.raises(LookupError, match=r"deploy\.typo"):
        await local.client.start("deploy.typo")
    assert (await local.client.start("deploy.quick", "by name")).run_id


@pytest.fixture
def small_values(local: LocalAWS, lambda_environment: dict[str, str]) -> Iterator[EventSourceMapping]:
    """A flow handler whose World takes values of at most 64 KiB (AWSWORLD_MAX_VALUE_BYTES)."""
    container = Container(world_factory=lambda: AWSWorld(dataclasses.replace(AWSConfig.from_env(),
                                                                             max_value_bytes=SMALL_LIMIT)))
    yield EventSourceMapping(local.world, instrument(lambda event, context: handle(event, context, container)))
    container.run(asyncio.sleep(0))
    container.reset()
    container.loop.close()


async def test_a_step_result_over_the_limit_fails_the_step_once_and_the_workflow_can_catch_it(
        local: LocalAWS, small_values: EventSourceMapping) -> None:
    assert local.client is not None
    tag = uuid.uuid4().hex
    run = await local.client.start(app.catches_big_result, tag, SMALL_LIMIT + 1)
    await small_values.run_until(ended(run), timeout=30)
    assert await run.result(timeout=1) == {"caught": "ValueTooLargeError", "step": "deploy.big_result"}
    assert app.CALLS[f"big_result:{tag}"] == 1, "the body ran once: a too-large value is not retried"
    types = [e.event_type for e in await run.events()]
    assert types.count("step_failed") == 1 and "step_retrying" not in types


async def test_a_step_input_over_the_limit_raises_where_the_workflow_calls_it(
        local: LocalAWS, small_values: EventSourceMapping) -> None:
    assert local.client is not None
    run = await local.client.start(app.catches_big_input, SMALL_LIMIT + 1)
    await small_values.run_until(ended(run), timeout=30)
    assert await run.result(timeout=1) == "caught: ValueTooLargeError"
    assert not any(i.failed for i in small_values.invocations)


async def test_a_return_value_over_the_limit_fails_the_run(local: LocalAWS, small_values: EventSourceMapping) -> None:
    assert local.client is not None
    run = await local.client.start(app.big_output, SMALL_LIMIT // 2 + 1)
    await small_values.run_until(ended(run), timeout=30)
    error = await failure(run)
    assert error.code == VALUE_TOO_LARGE, error
    assert not any(i.failed for i in small_values.invocations)


async def test_a_start_whose_message_cannot_be_queued_names_the_run_to_start_again(
        local: LocalAWS, esm: EventSourceMapping) -> None:
    """The run is recorded, then its start message is queued: when the second write fails the caller learns the
    run's id, and starting it again by id queues the message instead of leaving a run pending for good."""
    client = Client(local.world)
    sqs = await local.world.clients.sqs()
    failures = [0]

    def fail_once(**_: Any) -> None:
        if failures[0] == 0:
            failures[0] += 1
            raise ClientError({"Error": {"Code": "InternalError", "Message": "injected"}}, "SendMessage")

    sqs.meta.events.register("before-call.sqs.SendMessage", fail_once)
    try:
        with pytest.raises(RunStartError) as refused:
            await client.start(app.quick, "again")
    finally:
        sqs.meta.events.unregister("before-call.sqs.SendMessage", fail_once)
    run_id = refused.value.run_id
    assert run_id in str(refused.value) and await client.get_run(run_id).status() == "pending"

    run = await client.options(run_id=run_id).start(app.quick, "again")
    assert run.run_id == run_id
    await esm.run_until(ended(run), timeout=20)
    assert await run.result(timeout=1) == "again"
