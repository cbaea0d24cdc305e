"""What the flow function logs, read as an operator on call reads it: every line a delivery writes on the paths
on-call meets (a normal run, the inline budget running out, a step failing and retried, a run failing, a lost
message woken by the watchdog, a run stuck after a wake, a record moved to the DLQ), captured from the real entry
point ``handlers/flow.py`` on moto. Each line is JSON with the delivery's ids; none holds a value the user passed
(the runs carry a marked value in their inputs and their steps' error messages); levels page only for what needs
a person (a retried step is INFO, a failed run WARNING, a DLQ move ERROR); of the Lambda context a line keeps the
request id, ``cold_start`` on a cold invocation and the trace id when tracing is on. docs/operate/monitoring.md#logs
lists the lines."""

from __future__ import annotations

import json
import os
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from aws_lambda_powertools.metrics.provider.cold_start import reset_cold_start_flag

from awsworld._worker.tick import TICK_BODY
from awsworld.lambda_host import flow, observability
from awsworld.local import LocalAWS
from awsworld.world.entities import TERMINAL_RUN_STATUSES
from awsworld.world.messages import FlowMessage, queue_name_for
from conftest import local_aws_options  # tests/conftest.py (tests/ is on sys.path)

from . import app
from .conftest import Handlers, json_lines, metric_values
from .lambda_env import LEFT_OUT_KEYS, EventSourceMapping, Invocation

#: The step delivery's line docs/operate/monitoring.md#logs shows.
SHOWN_LINE = Path(__file__).resolve().parents[2] / "docs" / "snippets" / "log-line.json"
DELIVERY_KEYS = {"runId", "workflow", "messageId", "sqsMessageId", "attempt", "function_request_id"}


@pytest.fixture(scope="module")
def local_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """moto only: what a line says does not depend on the SQS engine (test_flow_handler.py runs both)."""
    return local_aws_options(request, "moto")


def terminal(run: Any) -> Any:
    async def done() -> bool:
        return await run.status() in TERMINAL_RUN_STATUSES

    return done


def logged(out: str, *secrets: str) -> list[dict[str, Any]]:
    """The log lines (not the EMF blobs) of captured stdout, after checking that every line is JSON and that no
    line holds any of ``secrets`` (nor the process's AWS secret key)."""
    for secret in (*secrets, os.environ["AWS_SECRET_ACCESS_KEY"]):
        assert secret not in out, f"{secret!r} reached the logs"
    lines = [line for line in out.splitlines() if line.strip()]
    parsed = json_lines(out)
    assert len(parsed) == len(lines), [line for line in lines if not line.startswith("{")]
    return [line for line in parsed if "_aws" not in line]


def of_run(lines: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    return [line for line in lines if line.get("runId") == run_id]


async def test_a_run_and_its_budget_hand_off_log_ids_at_info_and_never_its_values(
        local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> None:
    secret = f"ssn-{uuid.uuid4().hex}"
    assert local.client is not None
    run = await local.client.start(app.slow_serial, secret, 6)
    # 11 s left in each invocation, less the runtime's 10 s margin: a 1 s budget, about three 0.35 s steps.
    await esm.run_until(terminal(run), timeout_ms=11_000)
    assert await run.result(timeout=1) == 6
    lines = logged(capsys.readouterr().out, secret)
    assert {line["level"] for line in lines} == {"INFO"}, "nothing on a healthy run asks for a person"
    handled = [line for line in of_run(lines, run.run_id) if line["message"].endswith("delivery handled")]
    assert all(set(line) >= DELIVERY_KEYS and line["workflow"] == "deploy.slow_serial" for line in handled), handled
    assert [line["outcome"] for line in handled].count("continued") >= 1, "the budget ran out at least once"
    assert handled[-1]["outcome"] == "completed"
    assert [line["attempt"] for line in handled] == list(range(1, len(handled) + 1)), \
        "attempt: how often the run's one message (its continuation) was handed out"


async def test_a_step_retried_then_failing_its_run_logs_types_and_attempts_not_the_message(
        local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> None:
    card = f"4111-{uuid.uuid4().hex}"
    assert local.client is not None
    run = await local.client.start(app.declined, card)
    await esm.run_until(terminal(run), timeout=30)
    assert await run.status() == "failed"
    error = (await local.world.runs.get(run.run_id)).error
    assert error is not None and card in str(error), "the value is in the run's stored error (describe shows it)"
    lines = of_run(logged(capsys.readouterr().out, card), run.run_id)

    [retry] = [line for line in lines if "attempt 1 of 2 failed" in line["message"]]
    assert retry["level"] == "INFO", "a retry is the policy working: no page"
    assert retry["stepId"] == "step_1" and retry["stepName"] == "deploy.charge"
    assert (retry["stepAttempt"], retry["maxAttempts"], retry["errorType"]) == (1, 2, "ValueError")
    assert retry["retryAt"] and retry["workflow"] == "deploy.declined"

    [failed] = [line for line in lines if "failed [USER_ERROR]" in line["message"]]
    assert failed["level"] == "WARNING"
    assert (failed["errorCode"], failed["causeType"], failed["stepId"], failed["stepAttempt"]) == \
        ("USER_ERROR", "ValueError", "step_1", 2)
    assert failed["errorType"] == "StepError"
    assert not [line for line in lines if line["level"] == "ERROR"]


async def test_a_lost_message_woken_and_a_stuck_run_are_named_with_their_wake(
        local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> None:
    secret = f"lost-{uuid.uuid4().hex}"
    assert local.client is not None
    watch = local.world.watch
    assert watch is not None
    lost = await local.client.start(app.quick, secret)
    stuck = await local.client.start(app.quick, secret)
    assert await esm.lose() == 2  # their start messages are gone: nothing will deliver them
    now = datetime.now(UTC)
    assert await watch.correct(lost.run_id, now - timedelta(minutes=2), seq=1)
    assert await watch.correct(stuck.run_id, now - timedelta(hours=2), seq=1)
    # The stuck run was woken an hour ago already, and that wake moved nothing: it is due again, its wakes at 1.
    [due] = [run for run in await watch.due(now) if run.run_id == stuck.run_id]
    assert await watch.snooze(due, now - timedelta(hours=1)) is not None

    sqs = await local.world.clients.sqs()
    await sqs.send_message(QueueUrl=local.world.config.queue_url, MessageBody=TICK_BODY)
    invocation = await esm.poll()
    assert invocation is not None and not invocation.failed
    await esm.run_until(terminal(lost), timeout=30)
    await esm.run_until(terminal(stuck), timeout=30)
    out = capsys.readouterr().out
    lines = logged(out, secret)
    [tick] = [line for line in lines if line["message"] == "tick handled"]
    assert (tick["jobs"]["watchdog"]["woken"], tick["jobs"]["watchdog"]["stuck"]) == (2, 1)
    [warning] = [line for line in lines if "still due after a wake" in line["message"]]
    assert warning["level"] == "WARNING" and warning["stuckRuns"] == [stuck.run_id]
    assert sum(metric_values(json_lines(out), "RunsWoken")) == 2
    assert sum(metric_values(json_lines(out), "RunsStuck")) == 1
    for run in (lost, stuck):
        [handled] = [line for line in of_run(lines, run.run_id) if line["message"].endswith("delivery handled")]
        assert handled["wake"] == "watchdog" and handled["outcome"] == "completed"


async def test_a_record_moved_to_the_dlq_is_an_error_naming_its_run(
        local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> None:
    missing = "wrun_01HZZZZZZZZZZZZZZZZZZZZZZZ"
    await local.world.queue(queue_name_for("deploy.quick"), FlowMessage(missing, "deploy.quick").to_payload())
    invocation = await esm.poll()
    assert invocation is not None and not invocation.failed
    lines = logged(capsys.readouterr().out)
    [moved] = [line for line in lines if "moved to the dead-letter queue" in line["message"]]
    assert moved["level"] == "ERROR" and moved["runId"] == missing and set(moved) >= DELIVERY_KEYS
    assert f"run {missing} does not exist" in moved["message"]
    sqs = await local.world.clients.sqs()
    dead = await sqs.receive_message(QueueUrl=local.world.config.dlq_url, WaitTimeSeconds=1)
    for message in dead.get("Messages", []):
        await sqs.delete_message(QueueUrl=local.world.config.dlq_url, ReceiptHandle=message["ReceiptHandle"])


async def _one_invocation(local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> tuple[Invocation, str]:
    """Start a run and invoke the function once (its start message, or whatever the queue hands out first):
    the invocation and what it wrote. The run is then finished, its output dropped."""
    assert local.client is not None
    run = await local.client.start(app.quick, "context keys")
    capsys.readouterr()
    invocation = await esm.poll()
    assert invocation is not None
    out = capsys.readouterr().out
    await esm.run_until(terminal(run), timeout=30)
    capsys.readouterr()
    return invocation, out


async def test_a_line_keeps_the_request_id_and_says_cold_start_on_the_cold_invocation_only(
        local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> None:
    reset_cold_start_flag()  # the next invocation is this environment's first, as after a deploy
    cold, cold_out = await _one_invocation(local, esm, capsys)
    warm, warm_out = await _one_invocation(local, esm, capsys)
    cold_lines, warm_lines = logged(cold_out), logged(warm_out)
    assert cold_lines and warm_lines, "a delivery's line and the batch's line at least"
    assert {line["function_request_id"] for line in cold_lines} == {cold.request_id}
    assert {line["function_request_id"] for line in warm_lines} == {warm.request_id}
    assert all(line.get("cold_start") is True for line in cold_lines), "every line of the cold invocation says so"
    assert sum(metric_values(json_lines(cold_out), "ColdStart")) == 1, "the metric counts the same invocation"
    assert not [line for line in warm_lines if "cold_start" in line], "a warm line says nothing of it"
    assert not metric_values(json_lines(warm_out), "ColdStart")
    assert not [line for line in cold_lines + warm_lines if LEFT_OUT_KEYS & set(line)], \
        "no function name, ARN or memory (the log group and REPORT say them), no trace id with tracing off"


async def test_a_traced_function_logs_each_invocations_trace_id(
        local: LocalAWS, handlers: Handlers, capsys: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(observability.TRACING_ENV, "true")
    traced = EventSourceMapping(local.world, observability.instrument(flow.handle))
    invocation, out = await _one_invocation(local, traced, capsys)
    lines = logged(out)
    assert lines and {line["xray_trace_id"] for line in lines} == {invocation.trace_id}
    assert {line["function_request_id"] for line in lines} == {invocation.request_id}


async def test_a_step_delivery_line_has_the_keys_the_docs_show(
        local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> None:
    assert local.client is not None
    run = await local.client.start(app.fan_out_sleep, 2, "shown")
    await esm.run_until(terminal(run), timeout=30)
    shown = json.loads(SHOWN_LINE.read_text(encoding="utf-8"))
    steps = [line for line in of_run(logged(capsys.readouterr().out), run.run_id)
             if line["message"].endswith("delivery handled") and "stepId" in line]
    assert steps, "one of the fan-out's steps runs inline, the other comes as a step message"
    # A cold invocation's lines add cold_start: true; the docs show a warm one. No taskName (Python 3.12+ would
    # name the record's asyncio task on each line).
    assert [sorted(set(line) - {"cold_start"}) for line in steps] == [sorted(shown)] * len(steps)


def user_lines(lines: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    """The run's lines its own code wrote (``app.SHOP_LOG``), not awsworld's."""
    return [line for line in of_run(lines, run_id) if line["location"].partition(":")[0] in ("noted_inc",
                                                                                           "logs_own_lines")]


async def test_the_users_own_lines_are_json_with_the_delivery_and_step_and_mark_replays(
        local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> None:
    assert local.client is not None
    run = await local.client.start(app.logs_own_lines, "own", 5)
    # 11 s left in each invocation, less the runtime's 10 s margin: a 1 s budget, about three 0.35 s steps.
    await esm.run_until(terminal(run), timeout_ms=11_000)
    assert await run.result(timeout=1) == 5
    out = capsys.readouterr().out
    lines = logged(out)  # every line JSON: the runtime's text handler wrote none (it was taken off the root)
    mine = user_lines(lines, run.run_id)
    handled = {line["sqsMessageId"]: line for line in of_run(lines, run.run_id)
               if line["message"].endswith("delivery handled")}
    assert len(handled) >= 3, "the budget ran out at least once, then the sleep's message came"

    steps = [line for line in mine if line["message"].startswith("incrementing")]
    assert [line["message"] for line in steps] == [f"incrementing {x}" for x in range(5)], "each attempt's line once"
    for line in steps:
        assert line["level"] == "INFO" and line["stepName"] == "deploy.noted_inc" and line["stepAttempt"] == 1
        assert line["stepId"].startswith("step_") and line["workflow"] == "deploy.logs_own_lines"
        assert line["sqsMessageId"] in handled and set(line) >= DELIVERY_KEYS
        assert "replaying" not in line
    assert "below the level" not in out, "DEBUG is below the function's level (LogLevel: INFO)"

    body = [line for line in mine if line["location"].startswith("logs_own_lines")]
    assert all(set(line) >= DELIVERY_KEYS and line["sqsMessageId"] in handled for line in body)
    assert all("stepId" not in line for line in body)
    first = [line["message"] for line in body if "replaying" not in line]
    assert first == ["checkout began", *(f"after step {x}" for x in range(1, 6)), "woke after the sleep"], \
        "every line of the body once without the mark: `filter not ispresent(replaying)` tells the story"
    replayed = [line for line in body if "replaying" in line]
    assert replayed and all(line["replaying"] is True for line in replayed)
    assert {line["message"] for line in replayed} <= set(first[:-1])
    for line in replayed:  # written by a later delivery than the line it repeats
        [original] = [o for o in body if o["message"] == line["message"] and "replaying" not in o]
        assert line["sqsMessageId"] != original["sqsMessageId"]
    [woke] = [line for line in body if line["message"] == "woke after the sleep"]
    assert woke["level"] == "WARNING"
    assert handled[woke["sqsMessageId"]]["outcome"] == "completed", \
        "the line names the delivery that wrote it, not one of the kept replay's earlier deliveries"
    raw = [line for line in out.splitlines() if '"deploy.shop"' in line or "checkout began" in line]
    assert len(raw) == len(set(raw)), "no line printed twice"
