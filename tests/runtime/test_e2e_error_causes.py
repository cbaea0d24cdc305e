"""Errors keep their cause, on both Worlds (memory and LocalAWS): a step's final failure reaches the workflow
(``StepError``) and the run's error with the step's name, the original exception's type (qualified) and
message, and its traceback, which ``step_failed``/``step_retrying`` store (bounded: the last 8 KB, runner frames
dropped, the cut said); a workflow body's own exception keeps its traceback the same way; a failed run is
logged naming the run, the step and the types (and, with ``AWSWORLD_LOG_ERRORS=full``, messages and
tracebacks)."""

from __future__ import annotations

import logging
import uuid
from typing import Any

import pytest

from awsworld import StepError, WorkflowRunFailedError, step, workflow
from awsworld._worker.error_shapes import LOG_ERRORS_ENV, MAX_STACK_BYTES

from .conftest import BOTH, E2E

pytestmark = pytest.mark.parametrize("e2e_backend", BOTH)

BIG = "k" * (20 * 1024)  # a message above the inline value limit (16 KB): the error is stored out of line


class Declined(Exception):
    """A user's own exception type: its qualified name is recorded."""


@step(name="causes.lookup", max_retries=1)
async def lookup(key: str) -> int:
    prices = {"kettle": 30}
    return prices[key]


@workflow(name="causes.uncaught")
async def uncaught(key: str) -> int:
    return await lookup(key)


@step(name="causes.charge", max_retries=0)
async def charge(amount: int) -> None:
    raise Declined(f"card declined for {amount}")


@workflow(name="causes.caught")
async def caught(amount: int) -> dict[str, Any]:
    try:
        await charge(amount)
    except StepError as error:
        return {"str": str(error), "step": error.step_name, "stepId": error.step_id, "attempt": error.attempt,
                "type": error.error_type, "qualified": error.qualified_type, "message": error.message,
                "stack": error.stack}
    return {}


@workflow(name="causes.body")
async def body(order: str) -> None:
    raise ValueError(f"order {order} has no lines")


def ping(depth: int) -> None:  # ping and pong alternate, so Python's traceback does not fold the frames
    if depth == 0:
        raise RecursionError(f"gave up deep down: {BIG}")
    pong(depth - 1)


def pong(depth: int) -> None:
    ping(depth - 1)


@step(name="causes.deep", max_retries=0)
async def deep() -> None:
    ping(300)


@workflow(name="causes.deep_flow")
async def deep_flow() -> None:
    await deep()


async def events_of(e2e: E2E, run_id: str, kind: str) -> list[dict[str, Any]]:
    return [dict(e.event_data or {}) for e in await e2e.client.get_run(run_id).events() if e.event_type == kind]


async def test_a_failed_steps_error_reaches_the_run_with_its_step_type_message_and_traceback(e2e: E2E) -> None:
    run = await e2e.start(uncaught, "toaster")
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    error = failed.value
    assert "step 'causes.lookup' failed after 2 attempts: KeyError: 'toaster'" in str(error)
    assert (error.error_type, error.step_name) == ("StepError", "causes.lookup")
    cause = error.details["cause"]
    assert (cause["name"], cause["type"], cause["message"]) == ("KeyError", "KeyError", "'toaster'")
    assert 'in lookup\n    return prices[key]' in cause["stack"] and cause["stack"].endswith("KeyError: 'toaster'\n")
    assert error.details["attempt"] == 2 and error.details["stepId"]
    assert "in uncaught\n    return await lookup(key)" in error.details["stack"]  # where the workflow awaited it

    stored = (await e2e.world.runs.get(run.run_id)).error
    assert stored is not None and stored.cause is not None and stored.step_name == "causes.lookup"
    assert stored.cause.stack == cause["stack"]
    retrying, failed_step = await events_of(e2e, run.run_id, "step_retrying"), await events_of(
        e2e, run.run_id, "step_failed")
    for data in (*retrying, *failed_step):  # every attempt's error is stored whole with the event
        assert data["error"]["type"] == "KeyError" and "return prices[key]" in data["error"]["stack"]
        assert "step_runner.py" not in data["error"]["stack"], "the runner's own frames are left out"


async def test_the_workflow_catches_a_step_error_with_its_cause(e2e: E2E) -> None:
    result = await e2e.run(caught, 12)
    assert result["str"] == "step 'causes.charge' failed: Declined: card declined for 12"
    assert (result["step"], result["attempt"], result["type"]) == ("causes.charge", 1, "Declined")
    assert result["qualified"] == f"{__name__}.Declined"
    assert result["message"] == "card declined for 12" and result["stepId"]
    assert 'raise Declined(f"card declined for {amount}")' in result["stack"]


async def test_a_workflow_bodys_own_exception_keeps_its_traceback(e2e: E2E) -> None:
    run = await e2e.start(body, "A-17")
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    details = failed.value.details
    assert (details["name"], details["type"], details["message"]) == ("ValueError", "ValueError",
                                                                      "order A-17 has no lines")
    assert details["stack"].startswith("Traceback (most recent call last):\n  File ")
    assert 'in body\n    raise ValueError(f"order {order} has no lines")' in details["stack"]
    assert "execution.py" not in details["stack"] and "cause" not in details


async def test_a_long_traceback_keeps_its_last_8_kb_and_says_what_was_cut(e2e: E2E) -> None:
    run = await e2e.start(deep_flow)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    [data] = await events_of(e2e, run.run_id, "step_failed")
    stack = data["error"]["stack"]
    first, rest = stack.split("\n", 1)
    assert first.startswith("[traceback cut: its first ") and first.endswith(" bytes are not kept]")
    assert len(rest.encode()) <= MAX_STACK_BYTES
    last = rest.rstrip().splitlines()[-1]  # the exception's line: its message is cut here, kept in "message"
    assert last.startswith("RecursionError: gave up deep down: kkk") and last.endswith(" more characters cut)")
    assert rest.count("in pong\n    ping(depth - 1)") > 20, "the innermost frames are kept"
    assert len(data["error"]["message"]) > 20 * 1024, "the message itself is kept whole (up to 32 KB)"
    assert failed.value.details["cause"]["stack"] == stack


async def test_a_failed_run_is_logged_naming_its_step_and_types(e2e: E2E, caplog: pytest.LogCaptureFixture,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    tag = uuid.uuid4().hex[:8]
    with caplog.at_level(logging.WARNING, logger="awsworld.failures"):
        run = await e2e.start(uncaught, f"summary-{tag}")
        with pytest.raises(WorkflowRunFailedError):
            await run.result(timeout=30)
        await e2e.idle()
    [line] = [r.getMessage() for r in caplog.records if r.name == "awsworld.failures" and run.run_id in r.getMessage()]
    assert line.startswith(f"run {run.run_id} (causes.uncaught) failed [USER_ERROR]: StepError in step "
                           "causes.lookup (")
    assert line.endswith(", attempt 2): KeyError"), line
    assert tag not in line and "Traceback" not in line, "by default no message (it may quote user data)"

    monkeypatch.setenv(LOG_ERRORS_ENV, "full")
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="awsworld.failures"):
        run = await e2e.start(uncaught, f"full-{tag}")
        with pytest.raises(WorkflowRunFailedError):
            await run.result(timeout=30)
        await e2e.idle()
    [text] = [r.getMessage() for r in caplog.records if r.name == "awsworld.failures" and run.run_id in r.getMessage()]
    assert f"step 'causes.lookup' failed after 2 attempts: KeyError: 'full-{tag}'" in text.splitlines()[0]
    assert f"raised KeyError: 'full-{tag}'" in text and "return prices[key]" in text
    assert "and the workflow did not catch it:" in text and "return await lookup(key)" in text
