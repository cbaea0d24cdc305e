"""``handlers/flow.py`` invoked as Lambda invokes it: SQS events built from messages received from the
emulator's queue, a context whose remaining time runs down, runs driven to completion over invocations."""

from __future__ import annotations

import asyncio
import json
import logging
import sys
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from awsworld._http.listen import listening
from awsworld._http.push import FLOW_ROUTE, push_envelope, transport_queue_name
from awsworld._worker.dispatch import Outcome, Worker
from awsworld.authoring.definitions import REGISTRY
from awsworld.client.client import Client
from awsworld.lambda_host.container import Container, import_modules, module_names
from awsworld.lambda_host.flow import NotAnSqsBatchError, backoff_seconds, handle
from awsworld.lambda_host.observability import instrument
from awsworld.local import LocalAWS
from awsworld.settings import Settings
from awsworld.world.entities import TERMINAL_RUN_STATUSES
from awsworld.world.messages import FlowMessage, queue_name_for

from . import app
from .conftest import Handlers, json_lines, metric_values
from .lambda_env import EventSourceMapping, LambdaContext


def terminal(run: Any) -> Any:
    async def done() -> bool:
        return await run.status() in TERMINAL_RUN_STATUSES

    return done


async def test_a_run_completes_across_invocations(local: LocalAWS, esm: EventSourceMapping, capsys) -> None:
    secret = f"payload-secret-{uuid.uuid4().hex}"
    assert local.client is not None
    run = await local.client.start(app.fan_out_sleep, 4, secret)
    await esm.run_until(terminal(run))
    assert await run.result(timeout=1) == {"total": 0 + 1 + 4 + 9, "secret_length": len(secret)}
    assert all(not i.failed for i in esm.invocations)
    assert len(esm.invocations) >= 2, "the sleep needs a second delivery"

    out = capsys.readouterr().out
    assert secret not in out, "payloads never reach the logs"
    lines = json_lines(out)
    handled = [line for line in lines if line.get("message", "").endswith(": delivery handled")]
    assert handled and all(line["runId"] == run.run_id and line["messageId"].startswith("msg_") for line in handled)
    assert all(line["message"].startswith(f"run {run.run_id}") for line in handled), "the text names the run too"
    assert {line["outcome"] for line in handled} >= {"suspended", "completed"}
    assert any(line.get("stepId") for line in handled), "queued steps arrive as step deliveries"
    assert all(line.get("function_request_id") for line in handled), "the invocation's request id in every line"
    assert sum(metric_values(lines, "FlowDeliveries")) >= 2
    assert sum(metric_values(lines, "StepDeliveries")) >= 1
    assert sum(metric_values(lines, "RunsStarted")) == 1
    assert sum(metric_values(lines, "RunsCompleted")) == 1
    assert metric_values(lines, "QueueLag"), "queue lag is measured from the first send"
    emf = next(line for line in lines if "FlowDeliveries" in line)
    assert emf["_aws"]["CloudWatchMetrics"][0]["Namespace"] == "awsworld"


async def test_the_budget_runs_out_mid_run_and_a_continuation_finishes_it(
        local: LocalAWS, esm: EventSourceMapping, capsys) -> None:
    tag = uuid.uuid4().hex
    assert local.client is not None
    run = await local.client.start(app.slow_serial, tag, 6)
    # 11 s left in the invocation, less the runtime's 10 s margin: a 1 s budget, about three 0.35 s steps.
    first = await esm.poll(timeout_ms=11_000)
    assert first is not None and not first.failed
    assert await run.status() not in TERMINAL_RUN_STATUSES, "one invocation cannot finish six slow steps"
    out = capsys.readouterr().out
    assert sum(metric_values(json_lines(out), "BudgetExhausted")) == 1
    assert any(line.get("outcome") == "continued" for line in json_lines(out))

    await esm.run_until(terminal(run), timeout_ms=11_000)
    assert await run.result(timeout=1) == 6
    assert all(app.CALLS[f"slow_inc:{tag}:{x}"] == 1 for x in range(6)), "every step body ran once"
    types = [e.event_type for e in await run.events()]
    assert types.count("run_started") == 1 and types.count("step_completed") == 6
    assert len(esm.invocations) >= 3


async def test_bad_records_fail_alone_and_the_rest_of_the_batch_goes_on(
        local: LocalAWS, esm: EventSourceMapping, capsys) -> None:
    world = local.world
    assert local.client is not None
    finished = await local.client.start(app.quick, "done")
    await esm.run_until(terminal(finished))
    assert await finished.result(timeout=1) == "done"

    live = await local.client.start(app.quick, "live")  # its start message rides in the same batch
    sqs = await world.clients.sqs()
    await sqs.send_message(QueueUrl=world.config.queue_url, MessageBody="this is not an awsworld message")
    gone_id = await world.queue(queue_name_for("deploy.quick"),
                                FlowMessage(finished.run_id, "deploy.quick").to_payload())
    refused_id = await world.queue("__other_wkf_workflow_x", {"runId": "wrun_x", "workflowName": "x"})
    unknown = await Client(world).start("deploy.missing")  # recorded: no client code to check the name with
    not_ours_id = await world.queue(queue_name_for("deploy.quick"), {"hello": "world"})
    empty_id = await world.queue(queue_name_for("deploy.quick"), None)
    missing_run_id = await world.queue(queue_name_for("deploy.quick"),
                                       FlowMessage("wrun_01HZZZZZZZZZZZZZZZZZZZZZZZ", "deploy.quick").to_payload())
    bad_run_id = await world.queue(queue_name_for("deploy.quick"),
                                   FlowMessage("not a run", "deploy.quick").to_payload())

    messages: list[dict[str, Any]] = []
    while len(messages) < 9:
        received = await esm.receive(max_messages=10)
        assert received, f"only {len(messages)} of 9 messages arrived"
        messages.extend(received)
    by_world_id = {_world_id(m): m["MessageId"] for m in messages}
    invocation = await esm.invoke(messages)

    unknown_sqs_id = next(m["MessageId"] for m in messages if _run_of(m) == unknown.run_id)
    expected_failures = {by_world_id[refused_id], unknown_sqs_id}
    assert invocation.failed == expected_failures, "only what a retry or another consumer can still fix fails"
    assert by_world_id[gone_id] not in invocation.failed, "a record for a finished run is simply acknowledged"

    dead: list[dict[str, Any]] = []
    for _ in range(5):
        dlq = await sqs.receive_message(QueueUrl=world.config.dlq_url, MaxNumberOfMessages=10,
                                        MessageAttributeNames=["All"], WaitTimeSeconds=1)
        dead.extend(dlq.get("Messages", []))
        if len(dead) >= 5:
            break
    assert {m["Body"] for m in dead if not m["Body"].startswith("{")} == {"this is not an awsworld message"}
    assert {_world_id(m) for m in dead if m["Body"].startswith("{")} == {not_ours_id, empty_id, missing_run_id,
                                                                         bad_run_id}, \
        "records that can never succeed reach the DLQ on their first receive"
    reasons = {m["MessageAttributes"]["awsworldError"]["StringValue"] for m in dead}
    assert {r for r in reasons if "does not exist" in r} == {
        f"run {run} does not exist (run {run} not found)" for run in ("wrun_01HZZZZZZZZZZZZZZZZZZZZZZZ", "not a run")}
    for message in dead:
        await sqs.delete_message(QueueUrl=world.config.dlq_url, ReceiptHandle=message["ReceiptHandle"])

    await esm.run_until(terminal(live))
    assert await live.result(timeout=1) == "live"

    lines = json_lines(capsys.readouterr().out)
    assert sum(metric_values(lines, "UnknownWorkflow")) == 1
    assert sum(metric_values(lines, "RefusedMessages")) == 1
    assert sum(metric_values(lines, "MalformedMessages")) == 1
    assert sum(metric_values(lines, "DeadLettered")) == 4
    assert sum(metric_values(lines, "DeliveryErrors")) == 0
    missing = [line for line in lines if line.get("level") == "ERROR" and "deploy.missing" in line.get("message", "")]
    assert missing and "AWSWORLD_MODULES" in missing[0]["message"]
    assert all(line["message"].startswith(f"run {unknown.run_id}: ") and line["runId"] == unknown.run_id
               for line in missing), "the line names the run it is about"
    # Every test module a worker imported registers workflows too: the deployment's own (AWSWORLD_MODULES) come first.
    assert f"workflows from {app.__name__}" in missing[0]["message"], "and the modules that were loaded"

    # The failed records now wait out their backoff; drop them so they do not reach later tests' batches.
    for message in messages:
        if message["MessageId"] in expected_failures:
            await sqs.delete_message(QueueUrl=world.config.queue_url, ReceiptHandle=message["ReceiptHandle"])


def _run_of(message: dict[str, Any]) -> str | None:
    try:
        payload = json.loads(message["Body"]).get("payload")
    except ValueError:
        return None
    return payload.get("runId") if isinstance(payload, dict) else None


def _world_id(message: dict[str, Any]) -> str | None:
    try:
        return json.loads(message["Body"]).get("messageId")
    except ValueError:
        return None


@pytest.mark.parametrize("event, names", [
    ({"key1": "value1", "key2": "value2"}, "keys ['key1', 'key2']"),  # the console's test event
    ({}, "an empty object"),
    ({"Records": []}, "an object with keys ['Records']"),
    ({"Records": [{"eventSource": "aws:s3", "s3": {"object": {"key": "secret-name"}}}]}, "record 0 of 1"),
    ({"Records": [{"eventSource": "aws:sqs", "body": "{}"}]}, "needs 'aws:sqs' and a messageId"),
])
async def test_an_event_that_is_not_an_sqs_batch_is_refused_and_nothing_is_acknowledged(
        local: LocalAWS, handlers: Handlers, event: dict[str, Any], names: str) -> None:
    # The deployed entry point, invoked as a direct `lambda invoke` or another trigger would: a clear error (the
    # invocation fails) instead of an empty batchItemFailures that reads as "all done", and no value quoted.
    waiting = await local.world.queue(queue_name_for("deploy.quick"), FlowMessage(
        "wrun_01HZZZZZZZZZZZZZZZZZZZZZZZ", "deploy.quick").to_payload())
    with pytest.raises(NotAnSqsBatchError, match="the flow function takes batches of its SQS queue") as refused:
        await asyncio.to_thread(handlers.flow, event, LambdaContext())
    assert isinstance(refused.value, ValueError) and names in str(refused.value)
    assert "value1" not in str(refused.value) and "secret-name" not in str(refused.value)
    sqs = await local.world.clients.sqs()
    received = await sqs.receive_message(QueueUrl=local.world.config.queue_url, MaxNumberOfMessages=10,
                                         WaitTimeSeconds=1)
    bodies = [json.loads(m["Body"]) for m in received.get("Messages", [])]
    assert [body["messageId"] for body in bodies] == [waiting], "the queue is untouched"
    for message in received.get("Messages", []):
        await sqs.delete_message(QueueUrl=local.world.config.queue_url, ReceiptHandle=message["ReceiptHandle"])


def test_failed_records_back_off_exponentially_up_to_ten_minutes() -> None:
    assert [backoff_seconds(n) for n in range(1, 9)] == [10, 20, 40, 80, 160, 320, 600, 600]
    assert backoff_seconds(0) == 10 and backoff_seconds(10_000) == 600
    assert sum(backoff_seconds(n) for n in range(1, 10)) < 3600, "ten receives reach the DLQ within an hour"


def test_modules_are_named_by_commas_or_spaces() -> None:
    assert module_names(" a.b, c  d,,") == ["a.b", "c", "d"]
    assert module_names(None) == []
    assert import_modules(app.__name__) == [app.__name__]
    with pytest.raises(ImportError, match="AWSWORLD_MODULES names 'no_such_module_x'"):
        import_modules("no_such_module_x")


async def test_failing_steps_are_retried_through_the_queue(local: LocalAWS, esm: EventSourceMapping, capsys) -> None:
    tag = uuid.uuid4().hex
    assert local.client is not None
    run = await local.client.start(app.flaky_pair, tag)
    await esm.run_until(terminal(run))
    assert await run.result(timeout=1) == [1, 2]
    assert app.CALLS[f"flaky:{tag}:1"] == app.CALLS[f"flaky:{tag}:2"] == 2
    assert all(not i.failed for i in esm.invocations)
    lines = json_lines(capsys.readouterr().out)
    assert sum(metric_values(lines, "StepRetries")) >= 1, "the queued step's retry was queued from its delivery"


class _Later:
    """A worker that asks for every delivery again in 2 s (as a step message that came too early does)."""

    def __init__(self, world: Any, *, deployment: str | None = None) -> None:
        self.world = world  # the delivery path reads the World's clock through its worker
        self.registry = Worker(world).registry
        self.deployment = deployment  # (pinning: the delivery path asks which deployment this is)

    async def execute(self, payload: Any, *, deadline: float, message_id: str | None = None,
                      attempt: int = 1, sent_at: datetime | None = None) -> Outcome:
        return Outcome("too-early", retry_after=2.0)


async def test_a_redelivery_asked_for_succeeds_the_record_and_comes_back_later(
        local: LocalAWS, lambda_environment: dict[str, str], capsys) -> None:
    container = Container(worker_factory=_Later)
    esm = EventSourceMapping(local.world, instrument(lambda event, context: handle(event, context, container)))
    world = local.world
    message_id = await world.queue(queue_name_for("deploy.quick"),
                                   FlowMessage("wrun_01HZZZZZZZZZZZZZZZZZZZZZZZ", "deploy.quick").to_payload())
    try:
        first = await esm.poll()
        assert first is not None and not first.failed, "a redelivery is the handler's job, not a failure"
        assert await esm.receive(wait_seconds=0) == [], "the copy is delayed, not visible"
        again: list[dict[str, Any]] = []
        for _ in range(10):
            again = await esm.receive(wait_seconds=1)
            if again:
                break
        assert [json.loads(m["Body"])["messageId"] for m in again] == [message_id], "same message, later"
        assert json.loads(again[0]["Body"])["attempt"] == 1, "the delivery counted as an attempt"
        await esm.invoke(again)
    finally:
        await asyncio.to_thread(container.reset)
        container.loop.close()
    lines = json_lines(capsys.readouterr().out)
    assert sum(metric_values(lines, "Redeliveries")) == 2
    # Leave nothing for the next test: take the third copy off the queue.
    sqs = await world.clients.sqs()
    for _ in range(10):
        messages = await esm.receive(wait_seconds=1)
        for message in messages:
            await sqs.delete_message(QueueUrl=world.config.queue_url, ReceiptHandle=message["ReceiptHandle"])
        if messages:
            break


async def test_a_typescript_only_stack_with_no_modules_delivers_pushed_messages(
        local: LocalAWS, lambda_environment: dict[str, str], monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    """``awsworld init --world-server`` without ``-m`` deploys ``Modules=""``: the flow function's cold start
    imports no module (and says the Python deliveries have no workflow, pushed ones are delivered), and a message
    the World server queued for a TypeScript app (``deliverTo``) is POSTed to it and acknowledged."""
    monkeypatch.setenv("AWSWORLD_MODULES", "")  # what the template passes for Modules=""
    received: list[tuple[dict[str, str], Any]] = []

    async def flow(request: Request) -> JSONResponse:
        received.append((dict(request.headers), json.loads(await request.body())))
        return JSONResponse({"ok": True})

    container = Container()

    def flow_function(event: dict[str, Any], context: Any) -> dict[str, Any]:
        return dict(handle(event, context, container))

    esm = EventSourceMapping(local.world, instrument(flow_function))
    queue_name = f"__wkf_workflow_ts_only_{uuid.uuid4().hex[:8]}"
    message = {"runId": "wrun_01K0000000000000000000000A", "traceCarrier": {}}
    try:
        async with listening(Starlette(routes=[Route(FLOW_ROUTE, flow, methods=["POST"])])) as app:
            url = app.url.replace("127.0.0.1", "localhost")  # a host AWSWORLD_PUSH_HOSTS lists by default
            message_id = await local.world.queue(transport_queue_name(queue_name),
                                                 push_envelope(queue_name, message, url))
            for _ in range(10):
                invocation = await esm.poll()
                assert invocation is None or not invocation.failed, invocation
                if received:
                    break
        assert container.modules == [], "no module named, none imported"
    finally:
        await asyncio.to_thread(container.reset)
        container.loop.close()
    [(headers, body)] = received
    assert body == message
    assert headers["x-vqs-queue-name"] == queue_name and headers["x-vqs-message-id"] == message_id
    assert "pushed deliveries" in caplog.text and "AWSWORLD_MODULES is empty" in caplog.text


def test_a_step_timeout_longer_than_one_invocation_is_warned_about_at_the_cold_start(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A ``@step(timeout="5m")`` on a function that stops every delivery after 120 s can never time out (the
    function's timeout cuts the attempt off first): the cold start's module import says so, naming the step and
    the parameter that raises it; at FlowTimeoutSeconds=600 it says nothing. Not refused at the call: a run that
    called the step already must replay as it ran (``_worker/cut_off.py``)."""
    module = f"longsteps_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{module}.py").write_text(
        "from awsworld import step\n\n\n"
        f"@step(name='{module}.transcode', timeout='5m')\n"
        "async def transcode(path: str) -> str:\n"
        "    return path\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv(Settings.flow_timeout_seconds.env, raising=False)
    try:
        with caplog.at_level(logging.WARNING, logger="awsworld.lambda"):
            assert import_modules(module) == [module]
        warned = [r.getMessage() for r in caplog.records if f"{module}.transcode" in r.getMessage()]
        assert warned == [f"step '{module}.transcode' has timeout=300s, but the flow function stops every delivery "
                          "after 120 s, so an attempt runs 110 s at most and that timeout never fires: raise the "
                          "stack's FlowTimeoutSeconds parameter (up to 900 s, AWSWORLD_FLOW_TIMEOUT_SECONDS) or "
                          "shorten the timeout"]
        caplog.clear()
        monkeypatch.setenv(Settings.flow_timeout_seconds.env, "600")
        with caplog.at_level(logging.WARNING, logger="awsworld.lambda"):
            import_modules(module)
        assert f"{module}.transcode" not in caplog.text
    finally:  # (the process's registry holds it no longer: later cold starts in this process warn of nothing)
        sys.modules.pop(module, None)
        REGISTRY.steps.pop(f"{module}.transcode", None)
