"""The per-run event limit (``AWSWORLD_MAX_EVENTS_PER_RUN``) fails a runaway run with a clear code. This
module's LocalAWS runs with a limit of 40 events; other modules keep the default."""

from __future__ import annotations

import uuid
from collections import Counter

import pytest

from awsworld import WorkflowRunFailedError, step, workflow
from awsworld.authoring.errors import EVENT_LIMIT_EXCEEDED

from .conftest import with_env

LIMIT = 40
CALLS: Counter[str] = Counter()


local_env = with_env({"AWSWORLD_MAX_EVENTS_PER_RUN": str(LIMIT)})


@step
async def tick(tag: str, i: int) -> int:
    CALLS[tag] += 1
    return i + 1


@workflow
async def runaway(tag: str) -> None:
    i = 0
    while True:
        i = await tick(tag, i)


@workflow
async def within_limit(tag: str) -> int:
    i = 0
    for _ in range(5):
        i = await tick(tag, i)
    return i


async def test_the_event_limit_fails_a_runaway_loop(e2e) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(runaway, tag)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert failed.value.code == EVENT_LIMIT_EXCEEDED
    assert str(LIMIT) in str(failed.value)
    events = await run.events()
    assert events[-1].event_type == "run_failed"
    assert len(events) <= LIMIT + 5, f"the run went on to {len(events)} events past its limit of {LIMIT}"
    await e2e.idle()
    assert CALLS[tag] <= LIMIT // 2
    assert await run.status() == "failed"


async def test_a_run_within_the_limit_completes(e2e) -> None:
    assert await e2e.run(within_limit, uuid.uuid4().hex) == 5
