"""A run that waited for its slot (``@workflow(concurrency=...)``) starts its clock when it starts: ``now()`` before
its first call is its ``run_started`` time, so a ``sleep("10m")`` first thing sleeps ten minutes after the slot came.
It once read the creation time: a run that waited an hour for its slot found that sleep over at once (its
``wait_created`` and ``wait_completed`` at the same instant). The log replays the same (``replay_run``)."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest

from awsworld import Concurrency, create_hook, now, sleep, workflow
from awsworld.client.replay import replay_run
from awsworld.testing import WorkflowTestEnv

pytestmark = pytest.mark.asyncio


@workflow(name="slot_clock.exclusive", concurrency=Concurrency(1))
async def exclusive(token: str) -> list[str]:
    began = now()
    await sleep(timedelta(minutes=10))
    async with create_hook(token=token) as hook:
        await hook
    return [began.isoformat(), now().isoformat()]


async def test_a_run_that_waited_an_hour_for_its_slot_sleeps_its_ten_minutes_after_it_starts() -> None:
    async with WorkflowTestEnv() as env:
        holder = await env.client.start(exclusive, "holder")
        await holder.wait_for_hook("holder")
        waiter = await env.client.start(exclusive, "waiter")
        await env.sleep("1h")  # the waiter waits for the holder's slot meanwhile
        await env.client.resume_hook("holder", "done")
        await holder.result()
        await waiter.wait_for_hook("waiter")
        await env.client.resume_hook("waiter", "done")
        began, ended = (datetime.fromisoformat(t) for t in await waiter.result())
        events = {e.event_type: e.created_at for e in await waiter.events()}
        assert events["run_started"] - events["run_created"] >= timedelta(hours=1)
        assert began == events["run_started"], "now() before the first call is the run's start"
        assert events["wait_completed"] - events["wait_created"] >= timedelta(minutes=10), "the sleep was slept"
        assert ended - began >= timedelta(minutes=10)
        assert (await replay_run(env.world, waiter.run_id)).ok
        assert (await replay_run(env.world, holder.run_id)).ok
