"""A wait may not end after the longest a run may stay running (``MaxRunDays``, ``AWSWORLD_MAX_RUN_DAYS``, 365 days
from the run's creation): on AWS every record of a run expires ``retention + MaxRunDays`` after it was written
(``aws/retention.py``), so a ``sleep(timedelta(days=400))`` was accepted, and the run lost its oldest records while it
slept and failed when it woke, with nothing left to say why. Now the call raises ``RunLifetimeError`` where the
workflow makes it and writes nothing (``_engine/execution.py``, ``WorkflowExecution._within_lifetime``). On the
in-memory World through the test environment's delivery path, on its skipping clock: nothing expires there, but the
same code would break once deployed."""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

import pytest

from awsworld import RunLifetimeError, WorkflowRunFailedError, create_hook, sleep, workflow
from awsworld.client.replay import replay_run
from awsworld.testing import WorkflowTestEnv

from .conftest import RESULT_TIMEOUT

pytestmark = pytest.mark.asyncio


@workflow(name="lifetime.long_sleep")
async def long_sleep(days: float) -> str:
    await sleep(timedelta(days=days))
    return "woke"


@workflow(name="lifetime.monthly")
async def monthly(months: int) -> dict[str, Any]:
    """A loop of 100-day sleeps: each is short, the run is not; the one that would cross the limit is refused."""
    slept = 0
    try:
        for _ in range(months):
            await sleep(timedelta(days=100))
            slept += 1
    except RunLifetimeError as refused:
        return {"slept": slept, "refused": str(refused)}
    return {"slept": slept}


@workflow(name="lifetime.hook_timeout")
async def hook_timeout(timeout: str) -> str:
    hook = create_hook(token="lifetime:approval", timeout=timeout)
    return str(await hook)


async def events_of(env: WorkflowTestEnv, run_id: str) -> list[tuple[str, str | None]]:
    page = await env.world.events.list(run_id, limit=1000)
    return [(e.event_type, e.correlation_id) for e in page.data]


async def test_a_sleep_past_the_runs_lifetime_fails_the_run_where_it_was_made_and_writes_nothing() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(long_sleep, 400)
        with pytest.raises(RunLifetimeError) as failed:
            await asyncio.wait_for(run.result(), RESULT_TIMEOUT)
        assert isinstance(failed.value, WorkflowRunFailedError)
        message = str(failed.value)
        assert "sleep() would end at " in message and "400 days after run" in message, message
        assert "365 days: the stack's MaxRunDays, AWSWORLD_MAX_RUN_DAYS" in message, message
        assert failed.value.error_type == "RunLifetimeError"
        assert "test_run_lifetime.py" in str(failed.value.details.get("stack")), "the user's line is its traceback's"
        assert not [kind for kind, _ in await events_of(env, run.run_id) if kind.startswith("wait_")]
        assert (await replay_run(env.world, run.run_id)).ok

        within = await env.client.start(long_sleep, 364.9)  # (the old code refused nothing either way)
        assert await asyncio.wait_for(within.result(), RESULT_TIMEOUT) == "woke"


async def test_the_limit_is_counted_from_the_runs_creation_and_the_refusal_is_caught() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(monthly, 12)
        result = await asyncio.wait_for(run.result(), RESULT_TIMEOUT)
        assert result["slept"] == 3, result  # day 300 -> 400 is refused (the old code slept all 12: 1,200 days)
        assert "400 days after run" in result["refused"], result
        waits = [cid for kind, cid in await events_of(env, run.run_id) if kind == "wait_created"]
        assert len(waits) == 3, waits
        assert (await replay_run(env.world, run.run_id)).ok


async def test_a_hook_whose_timeout_ends_past_the_lifetime_is_refused_before_anything_is_written(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(hook_timeout, "500d")
        with pytest.raises(RunLifetimeError) as failed:
            await asyncio.wait_for(run.result(), RESULT_TIMEOUT)
        assert "create_hook(timeout=...) would end at " in str(failed.value)
        assert [kind for kind, _ in await events_of(env, run.run_id)
                if kind.startswith(("hook_", "wait_"))] == [], "no hook, no wait"
        monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "730")
        allowed = await env.client.start(hook_timeout, "500d")
        await env.client.resume_hook("lifetime:approval", "yes", wait=RESULT_TIMEOUT)
        assert await asyncio.wait_for(allowed.result(), RESULT_TIMEOUT) == "yes"


async def test_a_wait_written_under_a_larger_limit_replays_and_ends_under_a_smaller_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit is read when a wait is made: lowering it refuses new waits only, never one the log records (a
    replay that refused it would diverge from its own log)."""
    monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "500")
    async with WorkflowTestEnv() as env:
        started = env.now()
        run = await env.client.start(long_sleep, 400)
        await env.idle()  # its wait is written
        assert [kind for kind, _ in await events_of(env, run.run_id)][-1] == "wait_created"
        monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "365")
        assert (await replay_run(env.world, run.run_id)).ok
        assert await asyncio.wait_for(run.result(), RESULT_TIMEOUT) == "woke"  # (the clock skips to its end)
        assert env.now() - started >= timedelta(days=400)
