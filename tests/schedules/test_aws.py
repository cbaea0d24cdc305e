"""Schedules on the AWS World (``aws.schedule_store``), on moto and on DynamoDB Local: the record and its
arguments in the table, conditional writes, and the tick job racing itself from several processes."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from awsworld import Schedule
from awsworld.authoring.definitions import workflow_name
from awsworld.aws import AWSWorld
from awsworld.aws.resources import PK
from awsworld.aws.schedule_store import PARTITION
from awsworld.client.client import Client
from awsworld.schedules.job import run_schedules
from awsworld.world import schedule_timing as timing
from awsworld.world.schedules import Overlap, ScheduleExistsError, ScheduleNotFoundError, schedule_run_id
from conftest import WorldFactory

from . import app
from .helpers import scheduled_runs


async def _items(world: AWSWorld) -> list[str]:
    """The sort keys of the schedule partition's items (records and arguments)."""
    ddb = await world.clients.dynamodb()
    response = await ddb.query(TableName=world.config.table_name, KeyConditionExpression="#pk = :pk",
                               ExpressionAttributeNames={"#pk": PK},
                               ExpressionAttributeValues={":pk": {"S": PARTITION}}, ConsistentRead=True)
    return sorted(item["sk"]["S"] for item in response["Items"])


async def _created_ago(world: AWSWorld, schedule_id: str, schedule: Schedule, ago: timedelta,
                       overlap: Overlap | None = None) -> None:
    """A schedule created ``ago`` (its ticks since then are due): written as ``create`` writes it (``overlap``:
    another policy in the record than the ``Schedule``'s)."""
    state = schedule.state(schedule_id, workflow_name(app.echo), datetime.now(UTC) - ago, source="api")
    if overlap is not None:
        state = replace(state, overlap=overlap)
    assert await world.schedules.write(state, expected_version=None)


async def test_a_schedule_round_trips_with_arguments_over_the_inline_limit(world: AWSWorld) -> None:
    client = Client(world)
    big = "b" * 20_000  # stored in an item of its own; the record stays small
    created = await client.schedules.create("big", app.echo, Schedule(every="1h", args=(big,), overlap="allow_all"))
    assert await _items(world) == [f"INPUT#big#{(await world.schedules.get('big')).input_key}", "SCHED#big"]
    [listed] = await world.schedules.list()
    assert listed.input is None and listed.input_key is not None, "the listing reads the records alone"
    assert await world.schedules.input(listed) == created.input
    stored = await client.schedules.get("big")
    assert (stored.spec, stored.overlap, stored.cursor, stored.next_at) == (
        created.spec, "allow_all", created.cursor.replace(microsecond=created.cursor.microsecond // 1000 * 1000),
        created.next_at)
    with pytest.raises(ScheduleExistsError):
        await client.schedules.create("big", app.echo, Schedule(every="2h", args=("small",)))
    assert (await client.schedules.get("big")).spec.every == 3600, "the refused create wrote nothing"
    await client.schedules.delete("big")
    assert await _items(world) == [], "the arguments' item goes with the record"
    with pytest.raises(ScheduleNotFoundError):
        await client.schedules.get("big")


async def test_a_write_on_a_stale_version_loses(world: AWSWorld) -> None:
    client = Client(world)
    state = await client.schedules.create("v", app.echo, Schedule(every="1h", args=(1,)))
    paused = await client.schedules.pause("v", note="first")
    assert paused.version == state.version + 1
    assert not await world.schedules.write(replace(state, version=state.version + 1, note="stale"),
                                           expected_version=state.version)
    assert (await client.schedules.get("v")).note == "first"
    assert not await world.schedules.delete("v", expected_version=state.version)
    assert (await client.schedules.get("v")).paused


async def test_three_schedulers_racing_start_each_due_tick_once(world_factory: WorldFactory,
                                                                backend: str) -> None:
    """Three processes (their own clients) tick at once, several times over, on schedules with due ticks: each
    tick gets one run, whatever order their conditional writes land in (DynamoDB Local: AWS's own engine)."""
    first = await world_factory()
    others = [AWSWorld(first.config) for _ in range(2)]
    try:
        big = "a" * 20_000
        await _created_ago(first, "every-minute", Schedule(every="1m", args=(big,), catchup="all",
                                                           overlap="allow_all"), timedelta(minutes=6, seconds=30))
        await _created_ago(first, "latest", Schedule(every="1m", args=("l",)), timedelta(minutes=6, seconds=30))
        # (a record Schedule() refuses to make since: catchup "all" needs overlap "allow_all"; the rule stays)
        await _created_ago(first, "skip", Schedule(every="1m", args=("s",), catchup="all", overlap="allow_all"),
                           timedelta(minutes=3, seconds=30), overlap="skip")
        worlds = [first, *others]
        reports = await asyncio.gather(*(run_schedules(w) for w in worlds for _ in range(3)))
        runs = await scheduled_runs(first)
        states = {s.schedule_id: s for s in await first.schedules.list()}

        def ticks(schedule_id: str) -> list[datetime]:
            """The ticks from the schedule's creation to the cursor its claims settled (the clock is real)."""
            state = states[schedule_id]
            return timing.between(state.spec, state.created_at, state.cursor, 100)

        every = [r for r in runs if r.schedule_id == "every-minute"]
        assert len(ticks("every-minute")) >= 6
        assert [r.tick for r in every] == ticks("every-minute"), "each due tick once, in order"
        assert [r.run_id for r in every] == [schedule_run_id("every-minute", r.tick) for r in every]
        latest = [r for r in runs if r.schedule_id == "latest"]
        assert [r.tick for r in latest] == ticks("latest")[-1:], "catchup latest: the most recent tick"
        assert states["latest"].missed == len(ticks("latest")) - 1
        # skip: the first due tick starts a run; it is still pending (no worker here), so the later ones skip.
        assert [r.tick for r in runs if r.schedule_id == "skip"] == ticks("skip")[:1]
        assert states["skip"].skipped == len(ticks("skip")) - 1 >= 2
        assert sum(r["started"] for r in reports) == len(runs)
        assert all(s.pending == () for s in states.values())
        # The runs carry the large arguments whole.
        view = await first.runs.get(every[0].run_id)
        assert big in str(view.input)
    finally:
        for world in others:
            await world.close()
