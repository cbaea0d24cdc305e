"""Errors keep their cause, on both Worlds (memory and LocalAWS): a step's final failure reaches the workflow
(``StepError``) and the run's error with the step's name, the original exception's type (qualified) and
message, and its traceback, which ``step_failed``/``step_retrying`` store (bounded: the last 8 KB, runner frames
dropped, the cut said); a workflow body's own exception keeps its traceback the same way; a failed run is
logged naming the run, the step and the types (and, with ``AWSWORLD_LOG_ERRORS=full``, messages and
tracebacks). A child run's failure the parent lets through keeps its cause the same way: the parent's error
names the child run and holds the child's original error (a grandchild's, a step's: the innermost), so the
parent's ``result()`` raises that type and ``awsworld describe``/``result`` of the parent show it."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import subprocess
import sys
import traceback
import uuid
from pathlib import Path
from typing import Any

import pytest

from awsworld import ChildWorkflowError, StepError, WorkflowRunFailedError, step, workflow
from awsworld._worker.error_shapes import LOG_ERRORS_ENV, MAX_STACK_BYTES
from awsworld.cli.dev import environment
from awsworld.cli.error_view import error_part, print_error_part
from awsworld.client.replay import replay_run

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


# ----------------------------------------------------------------------------------------- a child run's failure


@workflow(name="causes.child_pays")
async def child_pays(mode: str, amount: int) -> None:
    if mode == "own":
        raise Declined(f"card declined for {amount}")
    if mode == "step":
        await charge(amount)  # the child lets the step's failure through
    if mode == "grandchild":
        await child_pays("own", amount)  # the child lets its own child's failure through


@workflow(name="causes.parent_pays")
async def parent_pays(mode: str, amount: int) -> None:
    await child_pays(mode, amount)  # not caught: the parent fails with the child's ChildWorkflowError


RAISED = 'raise Declined(f"card declined for {amount}")'  # the line of the body and of the step alike


@pytest.mark.parametrize("mode", ["own", "step", "grandchild"])
async def test_a_child_runs_failure_the_parent_lets_through_is_raised_as_the_childs_type(e2e: E2E, mode: str) -> None:
    run = await e2e.start(parent_pays, mode, 12)
    child = f"{run.run_id}.step_1"
    with pytest.raises(Declined, match=rf"^run {re.escape(run.run_id)} \(causes\.parent_pays\) failed: child run "
                                       rf"{re.escape(child)} "
                                       r"\(causes\.child_pays\) failed: .*card declined for 12$") as failed:
        await run.result(timeout=30)
    error = failed.value
    assert isinstance(error, WorkflowRunFailedError) and error.error_type == "ChildWorkflowError"
    assert error.child_run_id == child and error.step_name is None
    details = error.details
    assert (details["childRunId"], details["childWorkflowName"]) == (child, "causes.child_pays")
    cause = details["cause"]
    assert (cause["name"], cause["type"], cause["message"]) == ("Declined", f"{__name__}.Declined",
                                                                "card declined for 12"), "the innermost error"
    assert set(cause) == {"name", "type", "message", "stack"}, "one cause, never a chain of them"
    assert RAISED in cause["stack"], "the traceback of the line that raised, in the child (or its step)"
    assert "in parent_pays\n    await child_pays(mode, amount)" in details["stack"], "where the parent awaited"
    if mode == "grandchild":
        assert f"failed: child run {child}.step_1 (causes.child_pays) failed: card declined" in str(error)
        grandchild = (await e2e.world.runs.get(f"{child}.step_1")).error
        assert grandchild is not None and grandchild.cause is None and grandchild.name == "Declined"
    stored = (await e2e.world.runs.get(child)).error  # the child's own error: the same rule one level down
    assert stored is not None and stored.name == ("Declined" if mode == "own" else "StepError" if mode == "step"
                                                  else "ChildWorkflowError")
    assert (stored.cause is None) == (mode == "own") and (stored.child_run_id is not None) == (mode == "grandchild")
    assert (await replay_run(e2e.world, run.run_id)).ok, "replaying the parent's log raises the same error"


@workflow(name="causes.parent_catches")
async def parent_catches(mode: str, amount: int) -> dict[str, Any]:
    try:
        if mode == "step":
            await charge(amount)
        else:
            await child_pays(mode, amount)
    except (StepError, ChildWorkflowError) as error:
        return {"printed": "".join(traceback.format_exception(error)), "type": type(error.__cause__).__name__}
    return {}


@pytest.mark.parametrize("mode", ["step", "own", "grandchild"])
async def test_a_caught_step_or_child_error_prints_the_traceback_it_stored_as_its_cause(e2e: E2E, mode: str) -> None:
    """A step's or a child run's error caught in a workflow has the traceback that step or child stored as its
    ``__cause__`` (a ``StoredTraceback``, as ``Run.result()`` chains a run's), so a traceback printed or logged
    in the workflow shows the line that raised, in the step or in the child (it was None: the workflow's own
    frames only). What the run stores is unchanged: the parent's stored stack does not hold that text again."""
    result = await e2e.run(parent_catches, mode, 7)
    assert result["type"] == "StoredTraceback"
    printed = result["printed"]
    assert RAISED in printed and "as the run stored it:" in printed, printed
    assert "The above exception was the direct cause of the following exception:" in printed
    where = "the traceback of step causes.charge" if mode == "step" else "the traceback of child run"
    assert where in printed


@pytest.mark.parametrize("mode", ["own", "step"])
async def test_a_parent_that_lets_a_child_error_through_stores_the_childs_traceback_once(e2e: E2E, mode: str) -> None:
    run = await e2e.start(parent_pays, mode, 5)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    details = failed.value.details
    assert RAISED in details["cause"]["stack"]
    assert RAISED not in details["stack"] and "StoredTraceback" not in details["stack"], details["stack"]
    printed = "".join(traceback.format_exception(failed.value))
    assert printed.count(RAISED) == 1, printed  # Run.result()'s chain: the child's traceback, once


async def test_describe_and_result_of_the_parent_show_the_child_run_and_its_type(
        e2e: E2E, tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture) -> None:
    tag = uuid.uuid4().hex[:8]
    with caplog.at_level(logging.WARNING, logger="awsworld.failures"):
        run = await e2e.start(parent_pays, "step", 7, run_id=f"causes-{tag}")
        with pytest.raises(WorkflowRunFailedError):
            await run.result(timeout=30)
        await e2e.idle()
    child = f"{run.run_id}.step_1"
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"run {run.run_id} (")]
    assert line == (f"run {run.run_id} (causes.parent_pays) failed [USER_ERROR]: ChildWorkflowError in child run "
                    f"{child} (causes.child_pays): {__name__}.Declined"), line
    if e2e.memory:  # the World is in this process: what the CLI's describe renders from the run it read
        view = await run.get()
        document = json.loads(json.dumps(error_part(view.error, view.error_code)))
        print_error_part(document)
        described = capsys.readouterr().out
        result, result_text = {"status": "failed", **document}, None  # (result's text: on the emulator)
    else:  # ``awsworld describe`` and ``result`` as processes, configured as ``awsworld dev``'s exports do
        described, document, result_text, result = await _cli_on(e2e, run.run_id, tmp_path)
    summary = (f"ChildWorkflowError: child run {child} (causes.child_pays) failed: step 'causes.charge' failed: "
               "Declined: card declined for 7 (raised Declined)")
    assert f"failed in child run {child} (causes.child_pays)\n" in described, described
    assert f"error     {__name__}.Declined: card declined for 7\n" in described, described
    assert "code      USER_ERROR" in described and "traceback\n" in described and RAISED in described
    assert "the workflow did not catch it:" in described and "await child_pays(mode, amount)" in described
    for shown in (document, result):  # describe --json, result --json
        assert shown["error"] == summary
        details = shown["errorDetails"]
        assert (details["childRunId"], details["childWorkflowName"]) == (child, "causes.child_pays")
        assert details["cause"]["type"] == f"{__name__}.Declined" and RAISED in details["cause"]["stack"]
    assert result["status"] == "failed"
    assert result_text is None or f"run {run.run_id} (causes.parent_pays) failed: {summary}" in result_text, result_text
    # The hint named `events`, which shows neither the failing step's traceback nor the workflow's without --full.
    assert result_text is None or result_text.endswith(
        f"(hint: `awsworld describe {run.run_id}` shows where, with the tracebacks)"), result_text


async def _cli_on(e2e: E2E, run_id: str, cwd: Path) -> tuple[str, dict[str, Any], str | None, dict[str, Any]]:
    """``awsworld describe RUN`` (text, ``--json``) and ``awsworld result RUN`` (text, ``--json``) as processes."""
    assert e2e.local is not None
    env = {**environment(e2e.local.config, "http://127.0.0.1:9"), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # (the code under test, as in this process)

    def cli(*command: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "awsworld.cli", *command], env=env, cwd=cwd,
                              capture_output=True, text=True, timeout=120)

    text, as_json, result, result_json = await asyncio.gather(*(asyncio.to_thread(cli, *command) for command in (
        ("describe", run_id), ("describe", run_id, "--json"), ("result", run_id), ("result", run_id, "--json"))))
    assert (text.returncode, as_json.returncode, result.returncode, result_json.returncode) == (0, 0, 1, 1), \
        (text, as_json, result, result_json)
    return text.stdout, json.loads(as_json.stdout), result.stderr.strip(), json.loads(result_json.stdout)
