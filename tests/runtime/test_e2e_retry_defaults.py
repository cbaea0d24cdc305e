"""The default retry schedule end to end (issue 26 item 8), on the in-memory World (virtual time: the minutes of
back-off cost nothing) and on LocalAWS (moto, real time): a bare ``@step`` gets 6 attempts, 5 s doubling to 60
s, full jitter; each retry's delay is drawn from the attempt's identity (run, step, attempt) and recorded in
``step_retrying``'s ``retryAfter``, so a replay reads it (the run replays across a sleep without diverging) and
the test can predict it exactly; ``@step(max_retries=N)`` keeps the default schedule, ``retry_delay`` stays a
fixed delay."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter

import pytest

from awsworld import RetryPolicy, StepError, sleep, step, step_metadata, workflow
from awsworld.authoring.retry import seeded

from .conftest import AWS, BOTH, E2E
from .test_e2e_retry_policy import restart_gaps, retry_gaps

CALLS: Counter[str] = Counter()
DEFAULT = RetryPolicy()


@step(name="defaults.always_fails")
async def always_fails(tag: str) -> None:
    CALLS[tag] += 1
    raise ConnectionError(f"attempt {step_metadata().attempt}")


@workflow(name="defaults.gives_up")
async def gives_up(tag: str) -> dict[str, object]:
    try:
        await always_fails(tag)
    except StepError as error:
        await sleep("1s")  # a new delivery replays the five recorded retries: their times are read, not redrawn
        return {"attempt": error.attempt, "type": error.error_type}
    return {}


def predicted(run_id: str, step_id: str, attempts: int, policy: RetryPolicy = DEFAULT) -> list[float]:
    """The delays the runtime must have recorded: the policy's, jittered by the attempt's own draw."""
    return [policy.delay(n, rand=seeded(run_id, step_id, str(n))) for n in range(1, attempts)]


@pytest.mark.parametrize("e2e_backend", ["memory"])
async def test_a_bare_step_gets_six_attempts_with_full_jitter_backoff(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(gives_up, tag)
    assert await run.result(timeout=30) == {"attempt": 6, "type": "ConnectionError"}
    assert CALLS[tag] == 6
    events = await run.events()
    gaps = retry_gaps(events, "step_1")
    expected = predicted(run.run_id, "step_1", 6)
    # retryAfter is the failure's moment plus the draw; the event's own time is its commit, a little later.
    late = [want - gap for gap, want in zip(gaps, expected, strict=True)]
    assert all(0 <= d < 0.5 for d in late), f"each delay is the attempt's seeded draw under its base: {late}"
    assert all(0 <= gap <= base for gap, base in zip(gaps, [5, 10, 20, 40, 60], strict=True)), gaps
    assert len({round(g, 3) for g in gaps}) == 5, f"jittered, not a fixed ladder: {gaps}"
    assert all(gap >= 0 for gap in restart_gaps(events, "step_1")), "no attempt started before its time"


@pytest.mark.parametrize("e2e_backend", ["memory"])
async def test_two_runs_of_the_same_step_retry_at_different_times(e2e: E2E) -> None:
    first = await e2e.start(gives_up, uuid.uuid4().hex)
    second = await e2e.start(gives_up, uuid.uuid4().hex)
    for run in (first, second):
        await run.result(timeout=30)
    assert retry_gaps(await first.events(), "step_1") != retry_gaps(await second.events(), "step_1")


@step(name="defaults.fails_once", max_retries=1)
async def fails_once(tag: str) -> int:
    CALLS[tag] += 1
    if step_metadata().attempt == 1:
        raise TimeoutError("busy")
    return step_metadata().attempt


@workflow(name="defaults.once")
async def once(tag: str) -> int:
    return await fails_once(tag)


def quick_run_id(policy: RetryPolicy, most: float) -> str:
    """A run id whose first retry's seeded delay is under ``most`` seconds (real time on the emulator)."""
    for n in itertools.count():
        run_id = f"defaults-{uuid.uuid4().hex[:8]}-{n}"
        if policy.delay(1, rand=seeded(run_id, "step_1", "1")) < most:
            return run_id
    raise AssertionError("unreachable")


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_max_retries_alone_keeps_the_jittered_schedule(e2e: E2E) -> None:
    policy = RetryPolicy(max_attempts=2)
    tag = uuid.uuid4().hex
    run_id = quick_run_id(policy, 1.5)
    run = await e2e.start(once, tag, run_id=run_id)
    assert await run.result(timeout=60) == 2
    events = await run.events()
    expected = predicted(run_id, "step_1", 2, policy)
    assert retry_gaps(events, "step_1") == pytest.approx(expected, abs=0.5 if e2e.backend == AWS else 0.01)
    assert all(gap >= -0.05 for gap in restart_gaps(events, "step_1")), "the World refused an earlier start"


@step(name="defaults.fixed", max_retries=2, retry_delay="300ms")
async def fixed(tag: str) -> int:
    if step_metadata().attempt < 3:
        raise TimeoutError("busy")
    return step_metadata().attempt


@workflow(name="defaults.fixed_flow")
async def fixed_flow(tag: str) -> int:
    return await fixed(tag)


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_retry_delay_stays_a_fixed_delay(e2e: E2E) -> None:
    run = await e2e.start(fixed_flow, uuid.uuid4().hex)
    assert await run.result(timeout=60) == 3
    assert retry_gaps(await run.events(), "step_1") == pytest.approx([0.3, 0.3], abs=0.05)
