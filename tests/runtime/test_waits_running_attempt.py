"""What a run waits on names its running attempt's start, not the step's first one (``client/waits.py``): after
a crash or a retry, attempt 2 started long after attempt 1, and ``describe``'s ``running (attempt 2, started
...)`` (the same words a timed-out ``Run.result()`` ends with) gave attempt 1's time."""

from __future__ import annotations

import asyncio
from datetime import UTC

import pytest

from awsworld import RetryPolicy, step, workflow
from awsworld.testing import WorkflowTestEnv

pytestmark = pytest.mark.asyncio

RELEASE: dict[str, asyncio.Event] = {}


@step(retry=RetryPolicy.fixed("1h", max_attempts=3))
async def second_time_lucky(key: str) -> str:
    if key not in RELEASE:
        RELEASE[key] = asyncio.Event()
        raise ConnectionError("partner down")
    await RELEASE[key].wait()  # attempt 2 runs until the test has read what the run waits on
    return "done"


@workflow
async def retries_once(key: str) -> str:
    return await second_time_lucky(key)


async def test_a_running_retry_is_shown_with_its_own_start(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(retries_once, "k")
    await awsworld_env.idle()  # attempt 1 failed: its retry is an hour away
    awsworld_env.advance("1h")  # the back-off passes on the virtual clock, and attempt 2 starts
    for _ in range(200):
        if [e for e in await run.events() if e.event_type == "step_started"][1:]:
            break
        await asyncio.sleep(0.05)
    first, second = [e.created_at.astimezone(UTC) for e in await run.events() if e.event_type == "step_started"]
    assert (second - first).total_seconds() >= 3600
    with pytest.raises(TimeoutError) as timed_out:
        await run.result(timeout=0.3)
    shown = f"{second:%H:%M:%S}.{second.microsecond // 1000:03d} UTC"
    assert f"running (attempt 2, started {shown}" in str(timed_out.value), (str(timed_out.value), first)
    RELEASE["k"].set()
    assert await run.result() == "done"
