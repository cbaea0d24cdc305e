"""``@step(timeout=...)`` end to end: an attempt that runs longer is cancelled (the body sees
``CancelledError``) and fails as a retryable ``StepTimeoutError``, inline and queued alike; a body that swallows
the cancellation cannot hang the attempt; spent retries reach the workflow as ``StepError``; and ``LocalAWS``."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import Counter
from typing import Any

import pytest

from awsworld import RetryPolicy, StepError, step, step_metadata, workflow
from awsworld._worker import step_runner
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv
from awsworld.world.events import Event

CALLS: Counter[str] = Counter()
CANCELLED: Counter[str] = Counter()


def timeout_errors(events: list[Event]) -> list[str]:
    return [e.event_data["error"]["name"] for e in events
            if e.event_type in ("step_retrying", "step_failed") and e.event_data]


async def slow_first_attempt(tag: str) -> int:
    """A step body whose first attempt sleeps 30 s (counting its cancellation); a later one returns its number."""
    if step_metadata().attempt == 1:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            CANCELLED[tag] += 1
            raise
    return step_metadata().attempt


@step(timeout="200ms", retry=RetryPolicy(max_attempts=3, initial_delay="1s"))
async def slow_first(tag: str) -> int:
    CALLS[tag] += 1
    return await slow_first_attempt(tag)


@workflow
async def one_slow(tag: str) -> int:
    return await slow_first(tag)


async def test_a_slow_attempt_is_cancelled_and_retried(awsworld_env: WorkflowTestEnv) -> None:
    tag = uuid.uuid4().hex
    began = time.monotonic()
    run = await awsworld_env.client.start(one_slow, tag)
    assert await run.result() == 2
    assert time.monotonic() - began < 5, "the 30 s body was cut at its 200 ms timeout"
    assert CANCELLED[tag] == 1, "the body itself was cancelled, not left running"
    events = await run.events()
    assert timeout_errors(events) == ["StepTimeoutError"]
    assert [e.event_type for e in events if e.correlation_id == "step_1"] == [
        "step_created", "step_started", "step_retrying", "step_started", "step_completed"]


@workflow
async def two_slow(tag: str) -> list[int]:
    return list(await asyncio.gather(slow_first(f"{tag}:a"), slow_first(f"{tag}:b")))


async def test_queued_and_inline_attempts_time_out_alike(awsworld_env: WorkflowTestEnv) -> None:
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(two_slow, tag)
    assert await run.result() == [2, 2]
    assert CANCELLED[f"{tag}:a"] == 1 and CANCELLED[f"{tag}:b"] == 1
    assert timeout_errors(await run.events()) == ["StepTimeoutError", "StepTimeoutError"]


@step(timeout=0.2, retry=RetryPolicy(max_attempts=2, initial_delay="1m"))
async def stubborn(tag: str) -> str:
    CALLS[tag] += 1
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:  # swallows every cancellation for a second
        try:
            await asyncio.sleep(deadline - time.monotonic())
        except asyncio.CancelledError:
            CANCELLED[tag] += 1
    return "finished late"


@workflow
async def stubborn_flow(tag: str) -> dict[str, object]:
    try:
        return {"result": await stubborn(tag)}
    except StepError as error:
        return {"error_type": error.error_type, "message": str(error)}


async def test_a_body_that_swallows_its_cancellation_cannot_hang_the_attempt(
        awsworld_env: WorkflowTestEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(step_runner, "CANCEL_GRACE_SECONDS", 0.1)
    tag = uuid.uuid4().hex
    began = time.monotonic()
    run = await awsworld_env.client.start(stubborn_flow, tag)
    result = await run.result()
    assert time.monotonic() - began < 1.5, "each attempt ends at timeout + grace, not when the body gives up"
    assert result["error_type"] == "StepTimeoutError", result
    assert "timeout of 0.2 s" in str(result["message"])
    assert CALLS[tag] == 2 and CANCELLED[tag] >= 2
    assert timeout_errors(await run.events()) == ["StepTimeoutError", "StepTimeoutError"]


@step(timeout="300ms", retry=RetryPolicy(max_attempts=2, initial_delay="200ms"))
async def local_slow(tag: str) -> int:
    return await slow_first_attempt(tag)


@workflow
async def local_slow_flow(tag: str) -> int:
    return await local_slow(tag)


async def test_a_step_timeout_on_local_aws(local: LocalAWS) -> None:
    assert local.client is not None
    tag = uuid.uuid4().hex
    run = await local.client.start(local_slow_flow, tag)
    assert await run.result(timeout=30) == 2
    assert CANCELLED[tag] == 1
    assert timeout_errors(await run.events()) == ["StepTimeoutError"]


@step(name="timeout_test.blocks", timeout="100ms", retry=RetryPolicy(max_attempts=2, initial_delay="1m"))
async def blocks(tag: str) -> str:
    CALLS[tag] += 1
    time.sleep(0.6)  # noqa: ASYNC251  (the point: never awaits, so a cancellation cannot reach it)
    return f"done {tag}"


@workflow
async def blocks_flow(tag: str) -> str:
    return await blocks(tag)


async def blocked_past_its_timeout(client: Any, monkeypatch: pytest.MonkeyPatch,
                                   caplog: pytest.LogCaptureFixture) -> None:
    """asyncio cancels at an await: a blocking body runs to its end and keeps its result, which the docs said was
    a timeout; the warning says what happened and what to do, where it used to pass in silence."""
    monkeypatch.setattr(step_runner, "CANCEL_GRACE_SECONDS", 0.1)
    tag = uuid.uuid4().hex
    with caplog.at_level("WARNING", logger="awsworld.steps"):
        run = await client.start(blocks_flow, tag)
        assert await run.result(timeout=30) == f"done {tag}"
    assert CALLS[tag] == 1 and timeout_errors(await run.events()) == []
    warned = [r.getMessage() for r in caplog.records if r.name == "awsworld.steps"]
    assert len(warned) == 1 and warned[0].startswith("step timeout_test.blocks ran ") and \
        "past its timeout of 0.1 s without an await where it could be cancelled" in warned[0] and \
        "asyncio.to_thread" in warned[0], warned


async def test_a_body_that_blocks_past_its_timeout_is_named_in_a_warning(
        awsworld_env: WorkflowTestEnv, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    await blocked_past_its_timeout(awsworld_env.client, monkeypatch, caplog)


async def test_a_body_that_blocks_past_its_timeout_is_named_in_a_warning_on_local_aws(
        local: LocalAWS, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    await blocked_past_its_timeout(local.client, monkeypatch, caplog)
