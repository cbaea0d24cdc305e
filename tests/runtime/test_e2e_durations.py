"""Durations end to end: ``sleep`` with strings and datetimes, measured from the workflow's ``now()`` (so a
replay declares the same wait), a bad duration failing the run with a clear error, and ``LocalAWS``."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from awsworld import WorkflowRunFailedError, now, sleep, workflow
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv
from awsworld.world.events import Event


def waits(events: list[Event]) -> list[float]:
    """Each wait's duration as declared: resumeAt minus the workflow's ``now()`` at the call, which is the time of
    the event that let it reach the call (run_created for the first, the previous wait's end after that), not
    the wall clock: what makes a replay declare the same wait."""
    durations, reference = [], None
    for event in events:
        if event.event_type in ("run_created", "wait_completed"):
            reference = event.created_at
        elif event.event_type == "wait_created" and event.event_data and reference is not None:
            durations.append((datetime.fromisoformat(event.event_data["resumeAt"]) - reference).total_seconds())
    return durations


@workflow
async def napping(durations: list[object]) -> str:
    for duration in durations:
        await sleep(duration)  # type: ignore[arg-type]
    return "awake"


@workflow
async def until_tomorrow() -> str:
    await sleep(now() + timedelta(days=1))
    await sleep(timedelta(minutes=5))
    return "tomorrow"


async def test_sleep_takes_strings(awsworld_env: WorkflowTestEnv) -> None:
    start = awsworld_env.now()
    run = await awsworld_env.client.start(napping, ["500ms", "10s", "5m", "2h", "1d", "1h30m", 3, 0.25])
    assert await run.result() == "awake"
    events = await run.events()
    expected = [0.5, 10, 300, 7200, 86400, 5400, 3, 0.25]
    assert waits(events) == pytest.approx(expected, abs=0.05)
    assert awsworld_env.now() - start >= timedelta(seconds=sum(expected))
    assert [e.event_type for e in events].count("wait_completed") == len(expected)


async def test_sleep_until_an_aware_datetime(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(until_tomorrow)
    assert await run.result() == "tomorrow"
    assert waits(await run.events()) == pytest.approx([86400, 300], abs=0.05)


@pytest.mark.parametrize(("duration", "message"), [
    ("10 parsecs", "cannot read"), ("-5s", "cannot read"), (-1, "negative"),
    # a Step Functions Wait state's Timestamp, ported as the text it was: refused with the datetime to pass
    ("2030-01-01T00:00:00Z", r"point in time written as text.*datetime\.fromisoformat\('2030-01-01T00:00:00Z'\)\)$"),
    ("2030-01-01T00:00:00", r"datetime\.fromisoformat\('2030-01-01T00:00:00'\)\) and give it a timezone"),
])
async def test_a_bad_duration_fails_the_run_with_a_clear_error(awsworld_env: WorkflowTestEnv, duration: object,
                                                               message: str) -> None:
    run = await awsworld_env.client.start(napping, [duration])
    with pytest.raises(WorkflowRunFailedError, match=message) as failed:
        await run.result()
    assert failed.value.error_type == "ValueError"


@workflow
async def naive_nap() -> str:
    await sleep(datetime(2030, 1, 1))
    return "never"


async def test_a_naive_datetime_is_refused(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(naive_nap)
    with pytest.raises(WorkflowRunFailedError, match="timezone-aware"):
        await run.result()


async def test_string_sleeps_on_local_aws(local: LocalAWS) -> None:
    assert local.client is not None
    run = await local.client.start(napping, ["500ms", "1s"])
    assert await run.result(timeout=30) == "awake"
    events = await run.events()
    assert waits(events) == pytest.approx([0.5, 1.0], abs=0.05)
    resume = [datetime.fromisoformat(e.event_data["resumeAt"]) for e in events
              if e.event_type == "wait_created" and e.event_data]
    completed = [e.created_at for e in events if e.event_type == "wait_completed"]
    assert all(done >= due for due, done in zip(resume, completed, strict=True)), "no wait ends early"
