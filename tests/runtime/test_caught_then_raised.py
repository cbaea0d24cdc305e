"""A run that failed with a step's (or a child run's) error its workflow caught, acted on and raised again (a
saga's compensations) says so: its stored error counts the calls made after the failure reached the workflow
(``callsAfter``, ``callsAfterNames``: ``_worker.error_shapes.calls_after``), and ``describe``, ``events --full``,
the UI and the failure log read "the workflow caught it, made 2 more calls (...), then raised it again" where
they said "the workflow did not catch it". A failure let through at once, in a fan-out too, still reads "did not
catch it". On the memory World, through ``WorkflowTestEnv``."""

from __future__ import annotations

import asyncio
import json
import logging

import pytest

from awsworld import FatalError, WorkflowRunFailedError, sleep, step, workflow
from awsworld._worker.error_shapes import LOG_ERRORS_ENV
from awsworld.cli.error_view import error_part, print_error_part
from awsworld.testing import WorkflowTestEnv
from awsworld.world.entities import StructuredError


@step(name="reraised.book")
async def book(what: str) -> str:
    if what == "car":
        raise FatalError("no convertible left")
    return f"booked {what}"


@step(name="reraised.unbook")
async def unbook(what: str) -> None:
    if what == "refused":
        raise FatalError("cancellation refused")
    return None


@workflow(name="reraised.saga_undo_fails")
async def saga_undo_fails(own_error: bool = False) -> None:
    try:
        await book("car")
    except Exception as failure:
        if own_error:  # the run's own error, raised from the booking's once it is undone
            await unbook("flight")
            raise RuntimeError("car not booked; flight undone") from failure
        await unbook("refused")  # fails too, and the workflow lets it through
        raise


@workflow(name="reraised.saga")
async def saga() -> list[str]:
    undo: list[str] = []
    try:
        for what in ["flight", "hotel", "car"]:
            await book(what)
            undo.append(what)
    except Exception:
        for what in reversed(undo):
            await unbook(what)
        raise
    return undo


@workflow(name="reraised.fan")
async def fan() -> list[str]:
    return list(await asyncio.gather(*(book(w) for w in ["a", "car", "b", "c"])))


@workflow(name="reraised.child")
async def child() -> None:
    await book("car")


@workflow(name="reraised.waiting_child")
async def waiting_child() -> None:
    await sleep("1d")  # cancelled by the test meanwhile


@workflow(name="reraised.parent")
async def parent(child_cancelled: bool = False) -> None:
    try:
        await (waiting_child() if child_cancelled else child())
    except Exception:
        await sleep("1s")
        await unbook("parent")
        raise


async def test_a_caught_and_raised_failure_says_what_the_workflow_did_after_it(
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(LOG_ERRORS_ENV, "full")
    async with WorkflowTestEnv() as env:
        with caplog.at_level(logging.WARNING, logger="awsworld.failures"):
            runs = {name: await env.client.start(wf) for name, wf in
                    (("saga", saga), ("fan", fan), ("parent", parent))}
            for run in runs.values():
                with pytest.raises(WorkflowRunFailedError):
                    await run.result()
        shown: dict[str, str] = {}
        for name, run in runs.items():
            view = await run.get()
            capsys.readouterr()  # (what was written before, the runs' own log lines among them, is not the part)
            print_error_part(json.loads(json.dumps(error_part(view.error, view.error_code))))
            shown[name] = capsys.readouterr().out
        logged = {name: next(r.getMessage() for r in caplog.records
                             if r.getMessage().startswith(f"run {run.run_id} (")) for name, run in runs.items()}
        saga_error = (await runs["saga"].get()).error
        assert isinstance(saga_error, StructuredError) and saga_error.step_id == "step_3"
        stored = saga_error.model_dump(by_alias=True, exclude_none=True)
        assert (stored["callsAfter"], stored["callsAfterNames"]) == (2, ["reraised.unbook"])
        said = "the workflow caught it, made 2 more calls (reraised.unbook), then raised it again:"
        assert said in shown["saga"] and "did not catch it" not in shown["saga"], shown["saga"]
        assert f"and {said}" in logged["saga"], logged["saga"]
        assert "the workflow did not catch it:" in shown["fan"] and "caught it" not in shown["fan"], \
            "a fan-out's other steps were made before the failure: not calls after it"
        fan_error = (await runs["fan"].get()).error
        assert fan_error is not None and "callsAfter" not in fan_error.model_dump(by_alias=True)
        assert "the workflow caught it, made 2 more calls (sleep, reraised.unbook), then raised it again:" in \
            shown["parent"], shown["parent"]
        assert "and the workflow caught it, made 2 more calls" in logged["parent"]


async def test_a_compensation_that_fails_shows_the_failure_it_was_undoing(
        capsys: pytest.CaptureFixture[str]) -> None:
    """The run fails with the compensation's error; its workflow traceback shows, as Python's would, the booking's
    error it was raised while handling, so ``describe`` shows both tracebacks, not the compensation's alone."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(saga_undo_fails)
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result()
        assert "step 'reraised.unbook' failed" in str(failed.value)
        view = await run.get()
        assert isinstance(view.error, StructuredError) and view.error.stack is not None
        stack = view.error.stack
        handling = "During handling of the above exception, another exception occurred:"
        assert handling in stack, stack
        before, after = stack.split(handling)
        assert "StepError: step 'reraised.book' failed: FatalError: no convertible left" in before, stack
        assert "StepError: step 'reraised.unbook' failed: FatalError: cancellation refused" in after, stack
        assert 'raise FatalError("no convertible left")' in before, "the booking step's own traceback"
        assert "step reraised.unbook" not in stack.replace("step 'reraised.unbook' failed", ""), \
            "the compensation's own traceback is the run error's cause, shown above the stack, not in it"
        capsys.readouterr()
        print_error_part(json.loads(json.dumps(error_part(view.error, view.error_code))))
        shown = capsys.readouterr().out
        assert shown.index("cancellation refused") < shown.index("the workflow did not catch it:") < \
            shown.index(handling) < shown.index("await unbook(\"refused\")"), shown


async def test_an_error_the_workflow_raised_from_a_steps_keeps_that_steps_traceback() -> None:
    """A run's own error raised from a step's ``StepError`` (a saga naming what it undid) has no ``cause`` of its
    own: its stack keeps the step's traceback, where the step raised, which it left out."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(saga_undo_fails, True)
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result()
        assert failed.value.error_type == "RuntimeError"
        view = await run.get()
        assert isinstance(view.error, StructuredError) and view.error.stack is not None
        stack = view.error.stack
        assert "the traceback of step reraised.book (attempt 1), as the run stored it" in stack, stack
        assert stack.index('raise FatalError("no convertible left")') < stack.index("await book(\"car\")") < \
            stack.index("RuntimeError: car not booked; flight undone"), stack


async def test_a_cancelled_child_run_the_workflow_compensated_for_says_so(
        capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture,
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A cancelled child has no error of its own (no ``cause``), and its parent's run error still counts the
    compensation the parent made before raising the ``ChildWorkflowError`` again: ``describe`` and the failure log
    say so above the workflow's traceback, where they said nothing."""
    monkeypatch.setenv(LOG_ERRORS_ENV, "full")
    caplog.set_level(logging.WARNING, logger="awsworld.failures")
    async with WorkflowTestEnv() as env:
        run = await env.client.start(parent, True)
        for _ in range(100):
            if children := await run.children():
                break
            await env.idle()
        [child] = children
        await child.cancel(reason="customer withdrew")
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result()
        assert failed.value.error_type == "ChildWorkflowError" and "cancelled" in str(failed.value)
        view = await run.get()
        capsys.readouterr()
        print_error_part(json.loads(json.dumps(error_part(view.error, view.error_code))))
        shown = capsys.readouterr().out
        said = "the workflow caught it, made 2 more calls (sleep, reraised.unbook), then raised it again:"
        assert said in shown and shown.index(said) < shown.index("Traceback"), shown
        logged = next(r.getMessage() for r in caplog.records if r.getMessage().startswith(f"run {run.run_id} ("))
        assert said in logged and logged.index(said) < logged.index("Traceback"), logged
