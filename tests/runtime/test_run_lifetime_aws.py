"""A run still running at the end of its lifetime is ended before any of its items can expire, on the AWS World.

On the emulator (``LocalAWS``: moto's DynamoDB and SQS, the poller that runs the Lambda handler's delivery code)
with time made small, as ``test_e2e_far_timers.py`` does: a lifetime (``AWSWORLD_MAX_RUN_DAYS``) of 4 s, a retention
(``AWSWORLD_RETENTION_DAYS``) of 60 s, a watch horizon of 2 s and a tick every 0.2 s. moto expires nothing, so the
test reads the items' ``expiresAt`` back (``aws/retention.py``): the run must have failed, with ``RunLifetimeError``,
before the soonest of them. Before, a run waiting on a hook with no timeout left the watch index and nothing ever
woke it: its items expired under it (``run_created`` first), after which it was *not found* everywhere.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

import pytest

from awsworld import Concurrency, RunLifetimeError, create_hook, step, workflow
from awsworld.aws.keys import RUN_SK, SK
from awsworld.aws.resources import TTL_ATTRIBUTE
from awsworld.aws.retention import LIFETIME_WAKE_SECONDS
from awsworld.cli.dev import environment
from awsworld.local import LocalAWS

from .conftest import ticking

pytestmark = pytest.mark.asyncio

DAY = 24 * 3600
LIFETIME_SECONDS = 4


@workflow(name="lifetime_aws.approval")
async def approval(token: str) -> str:
    return str(await create_hook(token=token))


@step(name="lifetime_aws.work")
async def work(i: int) -> int:
    await asyncio.sleep(0.5)  # (real time: the lifetime is 4 s)
    return i


@workflow(name="lifetime_aws.busy")
async def busy(n: int) -> int:
    for i in range(n):
        await work(i)
    return n


@workflow(name="lifetime_aws.one_at_a_time", concurrency=Concurrency(1))
async def one_at_a_time(token: str) -> str:
    return str(await create_hook(token=token))


@workflow(name="lifetime_aws.brief", retention="1s")
async def brief(token: str) -> str:
    return str(await create_hook(token=token))


@pytest.fixture
async def local(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[LocalAWS]:
    monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", repr(LIFETIME_SECONDS / DAY))
    monkeypatch.setenv("AWSWORLD_RETENTION_DAYS", repr(60 / DAY))
    monkeypatch.setenv("AWSWORLD_WATCH_HORIZON_SECONDS", "2")
    monkeypatch.setenv("AWSWORLD_WATCH_BUCKET_SECONDS", "0.1")
    async with LocalAWS() as made, ticking(made, 0.2):
        yield made


async def run_items(local: LocalAWS, run_id: str) -> list[dict[str, Any]]:
    """Every DynamoDB item of the run's partition, as stored."""
    ddb = await local.world.clients.dynamodb()
    return (await ddb.query(TableName=local.world.config.table_name, KeyConditionExpression="pk = :pk",
                            ExpressionAttributeValues={":pk": {"S": f"RUN#{run_id}"}}, ConsistentRead=True))["Items"]


async def test_a_run_on_a_hook_alone_fails_at_its_lifetime_before_any_of_its_items_expires(local: LocalAWS) -> None:
    assert local.client is not None
    world = local.world
    run = await local.client.start(approval, f"lifetime-{uuid.uuid4().hex}")
    with pytest.raises(RunLifetimeError) as failed:
        await asyncio.wait_for(run.result(), 60)
    assert "was still running at the end of its lifetime" in str(failed.value), failed.value
    assert "child_options(successor=True)" in str(failed.value)
    ended = await world.runs.get(run.run_id)
    assert ended.status == "failed" and ended.completed_at is not None
    created = (await run.events())[0]
    context = (created.event_data or {})["executionContext"]
    assert context["maxRunSeconds"] == LIFETIME_SECONDS  # (world/rules/lifetime.py)
    items = await run_items(local, run.run_id)
    expiries = [int(item[TTL_ATTRIBUTE]["N"]) for item in items if TTL_ATTRIBUTE in item]
    assert len(expiries) == len(items) > 2, items
    end = datetime.fromisoformat(str(ended.completed_at)) if not isinstance(ended.completed_at, datetime) \
        else ended.completed_at
    assert end.timestamp() < min(expiries), (end, min(expiries))


async def test_a_run_that_keeps_running_steps_fails_at_its_lifetime_in_the_delivery_that_runs_them(
        local: LocalAWS) -> None:
    """One delivery runs the steps inline, one after another (``docs/concepts/inline-loop.md``): its loop ends the
    run when the lifetime ends, not the next delivery (which may come minutes later). Before, all 20 ran."""
    assert local.client is not None
    run = await local.client.start(busy, 20)
    with pytest.raises(RunLifetimeError):
        await asyncio.wait_for(run.result(), 60)
    done = [s for s in await run.steps() if s.status == "completed"]
    assert 0 < len(done) < 20, len(done)


async def test_a_run_waiting_for_a_concurrency_slot_is_ended_at_its_lifetime_not_at_the_next_snooze(
        local: LocalAWS, monkeypatch: pytest.MonkeyPatch) -> None:
    """The watchdog's snoozes of a run waiting for a slot (2 s, then 4, 8, 16: the horizon doubling) stop at the end
    of its lifetime (the head's ``wdEnd``, ``aws/log/watch_api.py``): a 10 s lifetime ends at 10 s. Before, at the
    wake 16 s after its start, 6 s late (at full scale: up to a day)."""
    assert local.client is not None
    monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", "1")  # the holder keeps its slot past the test
    holder = await local.client.start(one_at_a_time, f"holder-{uuid.uuid4().hex}")
    monkeypatch.setenv("AWSWORLD_MAX_RUN_DAYS", repr(10 / DAY))
    waiter = await local.client.start(one_at_a_time, f"waiter-{uuid.uuid4().hex}")
    assert (await local.world.runs.get(waiter.run_id)).status == "pending"
    with pytest.raises(RunLifetimeError):
        await asyncio.wait_for(waiter.result(), 60)
    ended = await local.world.runs.get(waiter.run_id)
    assert ended.error_code == "RUN_LIFETIME_EXCEEDED" and ended.completed_at is not None, ended
    late = (ended.completed_at - ended.created_at).total_seconds() - 10
    assert 0 <= late < 3, late
    assert (await local.world.runs.get(holder.run_id)).status in ("pending", "running")


async def test_a_retention_shorter_than_the_lifetimes_wake_keeps_the_running_runs_items_until_then(
        local: LocalAWS) -> None:
    """A workflow's retention of 1 s: the items written while its run runs live at least ``LIFETIME_WAKE_SECONDS``
    (a day) past its lifetime's end (``aws/retention.py``, ``running_retention``), so the watchdog's wake that ends
    it, a tick and a due's bucket after that end, finds them all; the ended run is still gone 1 s after its end (the
    head's TTL counts the retention asked for). Before, its items expired 1 s after its lifetime's end: a wake a
    minute late found its ``run_created`` gone."""
    assert local.client is not None
    run = await local.client.start(brief, f"brief-{uuid.uuid4().hex}")
    with pytest.raises(RunLifetimeError):
        await asyncio.wait_for(run.result(), 60)
    ended = await local.world.runs.get(run.run_id)
    assert ended.completed_at is not None
    created = ended.created_at.timestamp()
    items = await run_items(local, run.run_id)
    head = next(item for item in items if item[SK]["S"] == RUN_SK)
    assert int(head[TTL_ATTRIBUTE]["N"]) == int(ended.completed_at.timestamp()) + 1, "gone 1 s after its end"
    written_running = [int(item[TTL_ATTRIBUTE]["N"]) for item in items if item is not head and TTL_ATTRIBUTE in item]
    assert written_running and min(written_running) >= int(created) + LIFETIME_SECONDS + LIFETIME_WAKE_SECONDS, \
        (min(written_running), created)


async def test_awsworld_result_of_a_run_ended_at_its_lifetime_says_so_in_units_people_read(local: LocalAWS) -> None:
    """``awsworld result RUN`` as a process: its hint sent the reader to describe's tracebacks, which a run awsworld
    ended at its lifetime has none of (its code did not fail), and the message's limit read ``4.62963e-05 days``
    (``world/rules/lifetime.py``, ``limit_text``: now ``authoring/durations.py``'s ``duration_text``)."""
    assert local.client is not None
    run = await local.client.start(approval, f"lifetime-{uuid.uuid4().hex}")
    with pytest.raises(RunLifetimeError):
        await asyncio.wait_for(run.result(), 60)
    env = {**environment(local.world.config, "http://127.0.0.1:9"), "PATH": "/usr/bin:/bin",
           "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    done = await asyncio.to_thread(subprocess.run, [sys.executable, "-m", "awsworld.cli", "result", run.run_id],
                                   env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done
    line = done.stderr.strip()
    assert f"run {run.run_id} was still running at the end of its lifetime" in line, line
    assert "(4 s: the stack's MaxRunDays, AWSWORLD_MAX_RUN_DAYS, when the run was created)" in line, line
    assert line.endswith(f"(hint: there is no traceback (awsworld ended the run; its code did not fail): `awsworld "
                         f"describe {run.run_id}` shows what it was waiting on then)"), line
    assert "tracebacks" not in line, line
