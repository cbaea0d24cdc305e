"""``@step(retry=RetryPolicy(...))`` end to end: the back-off schedule (read off the log's timestamps in virtual
time), jitter recorded once and replayed, which errors retry, ``retry_after`` overriding the schedule, a
policy whose delays span several deliveries, and one run on ``LocalAWS``."""

from __future__ import annotations

import itertools
import logging
import re
import uuid
from collections import Counter
from datetime import datetime, timedelta

import pytest

from awsworld import (
    RetryableError,
    RetryPolicy,
    StepError,
    WorkflowRunFailedError,
    now,
    sleep,
    step,
    step_metadata,
    workflow,
)
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv
from awsworld.world.events import Event

CALLS: Counter[str] = Counter()


def retry_gaps(events: list[Event], step_id: str) -> list[float]:
    """Seconds from each step_retrying to the retryAfter it recorded."""
    return [(datetime.fromisoformat(e.event_data["retryAfter"]) - e.created_at).total_seconds()
            for e in events if e.event_type == "step_retrying" and e.correlation_id == step_id and e.event_data]


def restart_gaps(events: list[Event], step_id: str) -> list[float]:
    """Seconds between each step_retrying's retryAfter and the step_started that followed (>= 0: honoured)."""
    mine = [e for e in events if e.correlation_id == step_id]
    gaps = []
    for before, after in itertools.pairwise(mine):
        if before.event_type == "step_retrying" and after.event_type == "step_started" and before.event_data:
            gaps.append((after.created_at - datetime.fromisoformat(before.event_data["retryAfter"])).total_seconds())
    return gaps


# ----------------------------------------------------------------------------------------- back-off


@step(retry=RetryPolicy(max_attempts=5, initial_delay="10s", backoff=2, max_delay="30s", jitter=0))
async def backs_off(tag: str) -> int:
    CALLS[tag] += 1
    if step_metadata().attempt < 5:
        raise ConnectionError(f"attempt {step_metadata().attempt}")
    return step_metadata().attempt


@workflow
async def backing_off(tag: str) -> int:
    return await backs_off(tag)


async def test_exponential_back_off_capped_by_max_delay(awsworld_env: WorkflowTestEnv) -> None:
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(backing_off, tag)
    assert await run.result() == 5
    events = await run.events()
    assert retry_gaps(events, "step_1") == pytest.approx([10, 20, 30, 30], abs=0.5)
    assert all(gap >= 0 for gap in restart_gaps(events, "step_1")), "no attempt starts before its retryAfter"
    assert CALLS[tag] == 5


@step(retry=RetryPolicy(max_attempts=3, initial_delay="1m", backoff=1, retry_on=ConnectionError))
async def exhausts(tag: str) -> None:
    CALLS[tag] += 1
    raise ConnectionError(f"down {CALLS[tag]}")


@workflow
async def exhausting(tag: str) -> None:
    await exhausts(tag)


async def test_max_attempts_counts_every_attempt(awsworld_env: WorkflowTestEnv) -> None:
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(exhausting, tag)
    with pytest.raises(WorkflowRunFailedError, match="down 3"):
        await run.result()
    assert CALLS[tag] == 3
    assert [e.event_type for e in await run.events() if e.correlation_id == "step_1"].count("step_retrying") == 2


@step(retry=RetryPolicy(max_attempts=2, initial_delay="90s", jitter=0, retry_on=ConnectionError))
async def down_once(tag: str) -> None:
    raise ConnectionError(f"down {tag}")


@workflow
async def retried_once(tag: str) -> None:
    await down_once(tag)


async def test_a_retried_attempts_log_line_says_how_far_its_next_attempt_is_as_every_duration_is_said(
        awsworld_env: WorkflowTestEnv, caplog: pytest.LogCaptureFixture) -> None:
    """The line a retried attempt logs (``awsworld.failures``, INFO: ``awsworld dev`` prints it) says the next
    attempt's distance with ``authoring/durations.py``'s ``duration_text``, as every message does: 90 s is
    ``1 min 30 s``. It had a formatter of its own, which said ``90 s`` there and ``2 h`` for 2 h 29 min."""
    caplog.set_level(logging.INFO, logger="awsworld.failures")
    run = await awsworld_env.client.start(retried_once, uuid.uuid4().hex)
    with pytest.raises(WorkflowRunFailedError):
        await run.result()
    [line] = [r.getMessage() for r in caplog.records
              if r.name == "awsworld.failures" and "attempt 2 at" in r.getMessage() and run.run_id in r.getMessage()]
    assert re.search(rf"; attempt 2 at \d\d:\d\d:\d\d UTC, in 1 min 30 s \(`awsworld skip {run.run_id}` starts it "
                     r"now\)$", line), line


# ----------------------------------------------------------------------------------------- jitter


@step(retry=RetryPolicy(max_attempts=4, initial_delay="1m", backoff=1, jitter=0.5))
async def jittery(tag: str) -> int:
    if step_metadata().attempt < 4:
        raise TimeoutError("busy")
    return step_metadata().attempt


@workflow
async def with_jitter(tag: str) -> int:
    first = await jittery(tag)
    await sleep("1s")  # a new delivery replays the retries: it must read their recorded times, not draw new ones
    return first


async def test_jitter_is_chosen_once_and_recorded(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(with_jitter, uuid.uuid4().hex)
    assert await run.result() == 4
    events = await run.events()
    gaps = retry_gaps(events, "step_1")
    assert len(gaps) == 3
    assert all(29.5 <= g <= 60.5 for g in gaps), gaps
    assert len({round(g, 3) for g in gaps}) > 1, f"jitter should vary the delays: {gaps}"
    assert all(gap >= 0 for gap in restart_gaps(events, "step_1"))


# ----------------------------------------------------------------------------------------- which errors retry


@step(retry=RetryPolicy(retry_on=ConnectionError, no_retry_on=ConnectionRefusedError, initial_delay="1s"))
async def picky(tag: str, error: str) -> str:
    CALLS[tag] += 1
    if CALLS[tag] == 1:
        raise {"value": ValueError, "refused": ConnectionRefusedError, "reset": ConnectionResetError,
               "retryable": RetryableError}[error](f"{error} on call {CALLS[tag]}")
    return "ok"


@workflow
async def picking(tag: str, error: str) -> dict[str, object]:
    try:
        return {"result": await picky(tag, error)}
    except StepError as failed:
        return {"error_type": failed.error_type}


@pytest.mark.parametrize(("error", "expected", "calls"), [
    ("value", {"error_type": "ValueError"}, 1),
    ("refused", {"error_type": "ConnectionRefusedError"}, 1),
    ("reset", {"result": "ok"}, 2),
    ("retryable", {"result": "ok"}, 2),
])
async def test_retry_on_and_no_retry_on_choose_what_retries(awsworld_env: WorkflowTestEnv, error: str,
                                                            expected: dict[str, object], calls: int) -> None:
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(picking, tag, error)
    assert await run.result() == expected
    assert CALLS[tag] == calls
    retrying = [e for e in await run.events() if e.event_type == "step_retrying"]
    assert len(retrying) == calls - 1


# ----------------------------------------------------------------------------------------- retry_after


@step(retry=RetryPolicy(initial_delay="1s"))
async def asks_later(tag: str, mode: str) -> str:
    if step_metadata().attempt == 1:
        if mode == "string":
            raise RetryableError("rate limited", retry_after="10m")
        raise RetryableError("rate limited", retry_after=now() + timedelta(hours=2))
    return mode


@workflow
async def asking_later(tag: str, mode: str) -> str:
    return await asks_later(tag, mode)


@pytest.mark.parametrize(("mode", "gap"), [("string", 600), ("datetime", 7200)])
async def test_retry_after_overrides_the_policy(awsworld_env: WorkflowTestEnv, mode: str, gap: float) -> None:
    run = await awsworld_env.client.start(asking_later, uuid.uuid4().hex, mode)
    assert await run.result() == mode
    events = await run.events()
    assert retry_gaps(events, "step_1") == pytest.approx([gap], abs=0.5)
    assert restart_gaps(events, "step_1")[0] >= 0


# ----------------------------------------------------------------------------------------- across deliveries


@step(retry=RetryPolicy(max_attempts=3, initial_delay="1h", backoff=2, max_delay=None, jitter=0))
async def slow_to_work(tag: str, which: str) -> str:
    CALLS[f"{tag}:{which}"] += 1
    if step_metadata().attempt < 3:
        raise ConnectionError(which)
    return f"{which}@{step_metadata().attempt}"


@workflow
async def two_patient_steps(tag: str) -> list[str]:
    first = await slow_to_work(tag, "a")
    await sleep("30m")
    second = await slow_to_work(tag, "b")
    return [first, second]


async def test_a_policy_whose_delays_span_several_deliveries(awsworld_env: WorkflowTestEnv) -> None:
    tag = uuid.uuid4().hex
    start = awsworld_env.now()
    run = await awsworld_env.client.start(two_patient_steps, tag)
    assert await run.result() == ["a@3", "b@3"]
    assert CALLS[f"{tag}:a"] == 3 and CALLS[f"{tag}:b"] == 3, "each body ran once per attempt, replays ran none"
    events = await run.events()
    assert retry_gaps(events, "step_1") == pytest.approx([3600, 7200], abs=0.5)
    assert retry_gaps(events, "step_3") == pytest.approx([3600, 7200], abs=0.5)
    assert awsworld_env.now() - start >= timedelta(hours=6, minutes=30)
    assert awsworld_env.deliveries >= 6, "every retry and the sleep were deliveries of their own"
    types = [e.event_type for e in events]
    assert types.count("step_completed") == 2 and types[-1] == "run_completed"


# ----------------------------------------------------------------------------------------- LocalAWS


@step(retry=RetryPolicy(max_attempts=3, initial_delay="500ms", backoff=2, jitter=0, retry_on=ConnectionError))
async def local_flaky(tag: str) -> int:
    CALLS[tag] += 1
    if step_metadata().attempt < 3:
        raise ConnectionError("not yet")
    return step_metadata().attempt


@workflow
async def local_retrying(tag: str) -> int:
    return await local_flaky(tag)


async def test_a_policy_on_local_aws(local: LocalAWS) -> None:
    assert local.client is not None
    tag = uuid.uuid4().hex
    run = await local.client.start(local_retrying, tag)
    assert await run.result(timeout=30) == 3
    events = await run.events()
    assert retry_gaps(events, "step_1") == pytest.approx([0.5, 1.0], abs=0.25)
    assert all(gap >= -0.01 for gap in restart_gaps(events, "step_1"))
    assert CALLS[tag] == 3
