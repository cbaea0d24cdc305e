"""Step retries end to end: default retries with the attempt visible in step metadata, ``retry_after``
honoured (checked on the log's timestamps), ``FatalError`` never retried, exhausted retries failing the run. In
memory (WorkflowTestEnv: a retry's back-off costs no wall time); the three-attempt retry also on AWS (moto, the
local poller: the retry's delayed SQS message)."""

from __future__ import annotations

import uuid
from collections import Counter
from datetime import timedelta

import pytest

from awsworld import FatalError, RetryableError, StepError, WorkflowRunFailedError, step, step_metadata, workflow

CALLS: Counter[str] = Counter()


# ----------------------------------------------------------------------------------------- fails twice


@step(retry_delay=0.5)
async def fails_twice(tag: str) -> dict[str, object]:
    CALLS[tag] += 1
    meta = step_metadata()
    if CALLS[tag] < 3:
        raise RuntimeError(f"boom {CALLS[tag]}")
    return {"attempt": meta.attempt, "calls": CALLS[tag], "step_id": meta.step_id}


@workflow
async def twice_then_ok(tag: str) -> dict[str, object]:
    return await fails_twice(tag)


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_a_step_failing_twice_then_succeeding_reports_attempt_3(e2e) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(twice_then_ok, tag)
    result = await run.result(timeout=30)
    assert result["attempt"] == 3
    assert result["calls"] == 3
    events = await e2e.event_types(run)
    step_id = result["step_id"]
    assert [t for t, c in events if c == step_id] == [
        "step_created", "step_started", "step_retrying", "step_started", "step_retrying", "step_started",
        "step_completed"]
    gaps = _retry_gaps(await run.events(), step_id)
    assert len(gaps) == 2 and all(gap >= timedelta(seconds=0.5) for gap in gaps), f"retry_delay=0.5: {gaps}"


def _retry_gaps(events: list, step_id: str) -> list[timedelta]:
    """For each step_retrying of the step: the time (the log's) until its next step_started."""
    mine = [e for e in events if e.correlation_id == step_id]
    return [next(later.created_at for later in mine[i + 1:] if later.event_type == "step_started") - e.created_at
            for i, e in enumerate(mine) if e.event_type == "step_retrying"]


# ----------------------------------------------------------------------------------------- retry_after


@step
async def retry_after_two(tag: str) -> dict[str, object]:
    CALLS[tag] += 1
    meta = step_metadata()
    if meta.attempt == 1:
        raise RetryableError("not yet", retry_after=2)
    return {"attempt": meta.attempt, "step_id": meta.step_id}


@workflow
async def honours_retry_after(tag: str) -> dict[str, object]:
    return await retry_after_two(tag)


async def test_retry_after_is_honoured(e2e) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(honours_retry_after, tag)
    result = await run.result(timeout=30)
    assert result["attempt"] == 2 and CALLS[tag] == 2
    events = [e for e in await run.events() if e.correlation_id == result["step_id"]]
    assert [e.event_type for e in events] == [
        "step_created", "step_started", "step_retrying", "step_started", "step_completed"]
    (gap,) = _retry_gaps(events, result["step_id"])
    assert gap >= timedelta(seconds=2), f"the retry started {gap} after the failure, before retry_after=2 s"
    assert gap < timedelta(seconds=10), f"the retry took {gap}"


# ----------------------------------------------------------------------------------------- FatalError


@step
async def fatal(tag: str) -> None:
    CALLS[tag] += 1
    raise FatalError("no point retrying")


@workflow
async def fatal_uncaught(tag: str) -> None:
    await fatal(tag)


@workflow
async def fatal_caught(tag: str) -> dict[str, object]:
    try:
        await fatal(tag)
    except StepError as error:
        return {"message": str(error), "step": error.step_name, "type": error.error_type}
    return {"message": None}


async def test_fatal_error_is_not_retried_and_fails_the_run(e2e) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(fatal_uncaught, tag)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert "no point retrying" in str(failed.value)
    await e2e.idle()
    assert CALLS[tag] == 1
    types = [t for t, _ in await e2e.event_types(run)]
    assert types.count("step_started") == 1
    assert "step_retrying" not in types
    assert "step_failed" in types
    assert types[-1] == "run_failed"


async def test_fatal_error_reaches_the_workflow_as_step_error(e2e) -> None:
    tag = uuid.uuid4().hex
    result = await e2e.run(fatal_caught, tag)
    assert "no point retrying" in result["message"]
    assert result["step"] == fatal.__awsworld_step__.name
    assert result["type"] == "FatalError"
    await e2e.idle()
    assert CALLS[tag] == 1


# ----------------------------------------------------------------------------------------- retries exhausted


@step(max_retries=1, retry_delay=0.2)
async def always_fails(tag: str) -> None:
    CALLS[tag] += 1
    raise ValueError(f"failure {CALLS[tag]}")


@workflow
async def exhausts_retries(tag: str) -> None:
    await always_fails(tag)


async def test_exhausted_retries_fail_the_run_after_max_retries_plus_one_attempts(e2e) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(exhausts_retries, tag)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert "failure 2" in str(failed.value)
    await e2e.idle()
    assert CALLS[tag] == 2, "max_retries=1: one first attempt and one retry"
