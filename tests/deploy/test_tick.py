"""The schedule's tick through the Lambda flow handler: the watchdog finds runs whose messages were lost by the
``byDue`` index and wakes them; the tick record is handled (deleted, never reported failed or dead-lettered)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from awsworld._worker.tick import TICK_BODY
from awsworld.lambda_host.container import default_container
from awsworld.local import LocalAWS
from awsworld.world.entities import TERMINAL_RUN_STATUSES
from awsworld.world.watch import SHARDS

from . import app
from .conftest import json_lines, metric_values
from .lambda_env import EventSourceMapping


def terminal(run: Any) -> Any:
    async def done() -> bool:
        return await run.status() in TERMINAL_RUN_STATUSES

    return done


async def _tick(local: LocalAWS) -> None:
    sqs = await local.world.clients.sqs()
    await sqs.send_message(QueueUrl=local.world.config.queue_url, MessageBody=TICK_BODY)


async def test_a_tick_wakes_a_run_whose_message_was_lost_and_is_handled_like_a_delivery(
        local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> None:
    assert local.client is not None
    value = f"lost-{uuid.uuid4().hex[:6]}"
    run = await local.client.start(app.quick, value)
    assert await esm.lose() == 1  # its start message is gone: nothing will ever deliver it
    assert await local.world.watch.correct(run.run_id, datetime.now(UTC) - timedelta(minutes=2), seq=1)
    await _tick(local)
    invocation = await esm.poll()
    assert invocation is not None and not invocation.failed, "a tick is handled, never retried"
    lines = json_lines(capsys.readouterr().out)
    [tick] = [line for line in lines if line.get("message") == "tick handled"]
    assert tick["jobs"]["watchdog"]["woken"] == 1
    assert sum(metric_values(lines, "RunsWoken")) == 1
    await esm.run_until(terminal(run), timeout=30)
    assert await run.result(timeout=1) == value
    dlq = await (await local.world.clients.sqs()).get_queue_attributes(
        QueueUrl=local.world.config.dlq_url, AttributeNames=["ApproximateNumberOfMessages"])
    assert dlq["Attributes"]["ApproximateNumberOfMessages"] == "0", "the tick was not dead-lettered"


async def test_a_tick_with_nothing_due_costs_one_index_query_per_shard(
        local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> None:
    """And one Query of the schedules (``schedules.job``: the stack's schedules, none here)."""
    stats = default_container().world.stats
    before = stats.snapshot()
    await _tick(local)
    invocation = await esm.poll()
    assert invocation is not None and not invocation.failed
    used = stats - before
    assert used.requests["dynamodb.Query"] == SHARDS + 1
    assert used.total("dynamodb") == SHARDS + 1 and used.total("sqs") == 0, dict(used.requests)
    lines = json_lines(capsys.readouterr().out)
    assert [line["jobs"]["watchdog"]["due"] for line in lines if line.get("message") == "tick handled"] == [0]


async def test_a_tick_revives_a_step_whose_delivery_died_with_its_message_by_a_take_over(
        local: LocalAWS, esm: EventSourceMapping) -> None:
    """The step's owner (a delivery whose message is gone) asked for no time at all: its lease has passed, and
    the wake's flow runs the step again as attempt 2."""
    assert local.client is not None
    tag = uuid.uuid4().hex[:8]
    run = await local.client.start(app.quick, tag)
    await esm.run_until(terminal(run), timeout=30)
    # A second run of the same call, whose inline step's delivery died right after claiming it, message and all.
    stranded = await local.client.start(app.quick, tag)
    assert await esm.lose() == 1
    world = local.world
    await world.events.create(stranded.run_id, {"eventType": "run_started"})
    await world.events.create(stranded.run_id, {"eventType": "step_created", "correlationId": "step_1", "eventData": {
        "stepName": "deploy.echo", "input": (await _call_input(local, run.run_id))}})
    await world.events.create(stranded.run_id, {"eventType": "step_started", "correlationId": "step_1",
                                                "eventData": {"ownerMessageId": "msg_dead", "leaseSeconds": 0}})
    seq = len(await stranded.events())
    assert await world.watch.correct(stranded.run_id, datetime.now(UTC) - timedelta(minutes=2), seq=seq)
    await _tick(local)
    await esm.run_until(terminal(stranded), timeout=30)
    assert await stranded.status() == "completed"
    steps = await stranded.steps()
    assert [(s.step_id, s.status, s.attempt) for s in steps] == [("step_1", "completed", 2)]
    assert await stranded.result(timeout=1) == tag
    owners = [(e.event_data or {}).get("ownerMessageId") for e in await stranded.events()
              if e.event_type == "step_started"]
    assert owners[0] == "msg_dead" and owners[1] not in (None, "msg_dead")


async def _call_input(local: LocalAWS, run_id: str) -> Any:
    """The serialized input of ``run_id``'s first step (the same call the stranded run's body makes)."""
    step = await local.world.steps.get(run_id, "step_1")
    return step.input
