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
    return None


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


@workflow(name="reraised.parent")
async def parent() -> None:
    try:
        await child()
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
