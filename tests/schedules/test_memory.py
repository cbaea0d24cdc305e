"""Schedules on the in-memory World, fired by ``WorkflowTestEnv``'s virtual clock through the real tick
(``_worker.tick``'s ``schedules`` job) and run through the real delivery path."""

from __future__ import annotations

import asyncio
import itertools
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from awsworld import Schedule
from awsworld._memory import MemoryWorld
from awsworld._memory.clock import VirtualClock
from awsworld._worker.tick import run_tick
from awsworld.authoring.definitions import workflow_name
from awsworld.client.client import Client
from awsworld.schedules.job import MAX_ROUNDS, run_schedules
from awsworld.testing import WorkflowTestEnv
from awsworld.world.entities import error_name_and_message
from awsworld.world.errors import InvalidInputError
from awsworld.world.rules.schedules import claim
from awsworld.world.schedules import (
    MAX_TICKS_PER_CLAIM,
    Overlap,
    ScheduleDeclaredInCodeError,
    ScheduleExistsError,
    ScheduleInputError,
    ScheduleNotFoundError,
    ScheduleState,
    schedule_run_id,
)

from . import app
from .helpers import hhmm, scheduled_runs

START = datetime(2026, 3, 2, 0, 0, tzinfo=UTC)  # a Monday, on an hour boundary
NIGHTLY = workflow_name(app.nightly)  # its schedule id too (the default)


def test_an_environment_asked_to_fire_a_workflow_that_declares_no_schedule_says_so() -> None:
    """A workflow without a declaration (``echo``), or a mistyped name, among ``schedules=`` is refused naming what is
    declared: the environment used to fire nothing for it and say nothing, and the test's assertion on the runs it
    expected failed without a reason."""
    echo = workflow_name(app.echo)
    with pytest.raises(ValueError, match=re.escape(f"no schedule is declared on {echo!r}, 'shop.nightly' in this "
                                                   "process, so nothing of it would fire (declared on: ")) as refused:
        WorkflowTestEnv(schedules=[app.nightly, app.echo, "shop.nightly"])
    assert NIGHTLY in str(refused.value)


async def test_a_declared_schedule_can_be_triggered_as_soon_as_the_environment_starts() -> None:
    """The environment stores the declarations it fires when it starts, as a stack's first tick does: a test that
    triggers or describes one at once found "no schedule" (the first tick ran only once the test waited)."""
    async with WorkflowTestEnv(start_time=START + timedelta(hours=12), schedules=[app.nightly]) as env:
        assert (await env.client.schedules.describe(NIGHTLY)).state.workflow_name == NIGHTLY
        triggered = await env.client.schedules.trigger(NIGHTLY)
        assert triggered.outcome == "started" and triggered.run_id is not None


async def test_a_declared_schedule_the_environment_does_not_fire_says_how_to_make_it(
        awsworld_env: WorkflowTestEnv) -> None:
    """``awsworld_env`` names no schedules: a test that triggers one declared in code is told how to name it."""
    with pytest.raises(ScheduleNotFoundError, match=re.escape(
            f"no schedule {NIGHTLY!r}: {NIGHTLY} declares it in code ({app.__name__}), but this World does not apply "
            f"that declaration: a WorkflowTestEnv stores and fires the schedules of the workflows it names "
            f"(WorkflowTestEnv(schedules=[{NIGHTLY!r}]), or the function; the awsworld_env fixture names none)")):
        await awsworld_env.client.schedules.trigger(NIGHTLY)
    with pytest.raises(ScheduleNotFoundError, match=r"^no schedule 'no\.such'$"):  # not declared: nothing to add
        await awsworld_env.client.schedules.trigger("no.such")


async def test_a_daily_schedule_declared_in_code_fires_once_a_night_for_30_simulated_days() -> None:
    async with WorkflowTestEnv(start_time=START + timedelta(hours=12), schedules=[app.nightly]) as env:
        await env.sleep("30d")
        await env.idle()
        runs = await scheduled_runs(env.world, NIGHTLY)
        # 02:00 in Berlin: 01:00Z in winter time, 00:00Z from March 29 (summer time).
        assert len(runs) == 30
        assert hhmm(runs)[:2] == ["03-03 01:00Z", "03-04 01:00Z"] and hhmm(runs)[-1] == "04-01 00:00Z"
        # March 29: 02:00 does not exist (02:00 CET -> 03:00 CEST): that night's run is at 03:00 CEST, once.
        assert hhmm(runs)[24:28] == ["03-27 01:00Z", "03-28 01:00Z", "03-29 01:00Z", "03-30 00:00Z"]
        assert all(r.status == "completed" and r.trigger == "tick" for r in runs)
        first = await env.client.get_run(runs[0].run_id).result()
        assert first == {"label": "nightly", "tick": "2026-03-03T01:00:00+00:00", "trigger": "tick", "id": NIGHTLY}
        assert runs[0].run_id == schedule_run_id(NIGHTLY, runs[0].tick), "the run id is the schedule's and tick's"
        state = await env.client.schedules.get(NIGHTLY)
        assert (state.source, state.fired, state.skipped, state.missed) == ("code", 30, 0, 0)


async def test_a_schedule_not_named_by_the_env_does_not_fire() -> None:
    async with WorkflowTestEnv(start_time=START) as env:
        await env.sleep("2d")
        assert await scheduled_runs(env.world) == []
        assert await env.client.schedules.list() == []


async def test_duplicate_ticks_and_two_schedulers_on_one_storage_start_one_run_per_tick() -> None:
    clock = VirtualClock(START)
    clock_world = MemoryWorld(clock=clock)
    other = MemoryWorld(storage=clock_world.storage)  # a second process on the same table
    client = Client(clock_world)
    await client.schedules.create("every-15", app.echo, Schedule(every="15m", args=("x",)))
    clock.advance(timedelta(minutes=15))
    reports = await asyncio.gather(run_tick(clock_world), run_tick(other), run_tick(clock_world),
                                   run_schedules(other))
    started = [r["schedules"]["started"] for r in reports[:3]] + [reports[3]["started"]]
    assert sum(started) == 1, started
    runs = await scheduled_runs(clock_world, "every-15")
    assert [(r.tick, r.trigger) for r in runs] == [(START + timedelta(minutes=15), "tick")]
    # Ticks again at the same moment (a redelivered tick message) find the cursor moved.
    assert (await run_schedules(clock_world))["started"] == 0
    assert (await run_schedules(other))["evaluated"] == 0
    state = await client.schedules.get("every-15")
    assert (state.fired, state.pending, state.version) == (1, (), 2)  # created (0), claimed, settled


async def test_a_claim_whose_writer_died_before_starting_is_carried_out_by_the_next_tick_once() -> None:
    clock = VirtualClock(START)
    world = MemoryWorld(clock=clock)
    client = Client(world)
    state = await client.schedules.create("crashy", app.echo, Schedule(every="1h", args=(1,)))
    clock.advance(timedelta(hours=1))
    from awsworld.world import schedule_timing as timing

    now = world.clock.now()
    decision = claim(state, now, timing.due(state.spec, state.cursor, now, "latest"), None,
                     lambda moment: timing.next_after(state.spec, moment))
    assert decision is not None and len(decision.state.pending) == 1
    assert await world.schedules.write(decision.state, expected_version=state.version)  # then the writer died
    assert await scheduled_runs(world) == [], "nothing started yet"
    report = await run_schedules(world)
    assert report["started"] == 0, "the next tick carried out the recorded start; it decided nothing new"
    runs = await scheduled_runs(world, "crashy")
    assert [r.run_id for r in runs] == [decision.state.pending[0].run_id]
    assert (await client.schedules.get("crashy")).pending == ()



async def test_catchup_all_fires_up_to_2000_missed_ticks_a_tick_and_the_rest_at_the_next() -> None:
    """Found by a walk: the page (and *Operate: Limits*) said ``catchup="all"`` fires "up to 100 per tick, the rest
    at the next"; a tick fired all 250 ticks of a minutely schedule paused 250 minutes. 100 is a claim's (what one
    record's ``pending`` holds); a tick makes up to ``job.MAX_ROUNDS`` (20) claims a schedule: 2,000 starts."""
    clock = VirtualClock(START)
    world = MemoryWorld(clock=clock)  # no worker: the runs are only recorded, so 2,500 stay cheap
    client = Client(world)
    await client.schedules.create("many", app.echo, Schedule(every="1m", args=(1,), catchup="all",
                                                             overlap="allow_all"))
    await client.schedules.pause("many")
    clock.advance(timedelta(minutes=2500))
    await client.schedules.resume("many")
    assert MAX_ROUNDS * MAX_TICKS_PER_CLAIM == 2000
    assert (await run_schedules(world))["started"] == 2000
    clock.advance(timedelta(seconds=30))
    assert (await run_schedules(world))["started"] == 500, "the rest at the next tick"
    assert (await client.schedules.get("many")).fired == 2500

async def _overlap_runs(overlap: Overlap, hours: float = 4.5) -> tuple[list[tuple[str, str]], ScheduleState]:
    """An hourly schedule of a 90-minute workflow, over ``hours``: (tick, final status) of each run, and
    the schedule's record."""
    async with WorkflowTestEnv(start_time=START) as env:
        await env.client.schedules.create("slow", app.slow, Schedule(every="1h", args=(90,), overlap=overlap))
        await env.sleep(timedelta(hours=hours))
        await env.client.schedules.pause("slow")  # no more ticks: let the runs end
        await env.sleep("3h")
        runs = await scheduled_runs(env.world, "slow")
        state = await env.client.schedules.get("slow")
        return [(r.tick.strftime("%H:%M"), r.status) for r in runs], state


async def test_overlap_skip_drops_a_tick_while_the_last_run_is_going() -> None:
    runs, state = await _overlap_runs("skip")
    assert runs == [("01:00", "completed"), ("03:00", "completed")]  # 02:00 and 04:00 were skipped
    assert (state.fired, state.skipped) == (2, 2)


async def test_overlap_buffer_one_starts_one_waiting_tick_when_the_last_run_ends() -> None:
    async with WorkflowTestEnv(start_time=START) as env:
        await env.client.schedules.create("slow", app.slow, Schedule(every="1h", args=(90,), overlap="buffer_one"))
        await env.sleep(timedelta(hours=2, minutes=10))
        state = await env.client.schedules.get("slow")
        assert state.buffered is not None and state.buffered.tick == START + timedelta(hours=2)
        await env.sleep(timedelta(hours=2, minutes=20))  # to 04:30
        runs = await scheduled_runs(env.world, "slow")
        # 01:00 runs to 02:30; 02:00 waits and starts then (to ~04:01); 03:00 waits; 04:00 finds the buffer full.
        created = {r.tick.strftime("%H:%M"): (await env.world.runs.get(r.run_id)).created_at for r in runs}
        assert sorted(created) == ["01:00", "02:00", "03:00"]
        # A buffered start goes at the first tick (a minute apart) after the run before it ended.
        ended = START + timedelta(hours=2, minutes=30)
        assert ended <= created["02:00"] <= ended + timedelta(minutes=1, seconds=5)
        ended = created["02:00"] + timedelta(minutes=90)
        assert ended <= created["03:00"] <= ended + timedelta(minutes=1, seconds=5)
        state = await env.client.schedules.get("slow")
        assert (state.fired, state.skipped, state.buffered) == (3, 1, None)


async def test_overlap_allow_all_starts_every_tick() -> None:
    runs, state = await _overlap_runs("allow_all")
    assert runs == [("01:00", "completed"), ("02:00", "completed"), ("03:00", "completed"), ("04:00", "completed")]
    assert (state.fired, state.skipped) == (4, 0)


async def test_overlap_cancel_previous_cancels_the_running_one() -> None:
    runs, state = await _overlap_runs("cancel_previous")
    assert runs == [("01:00", "cancelled"), ("02:00", "cancelled"), ("03:00", "cancelled"), ("04:00", "completed")]
    assert state.fired == 4


async def test_catchup_after_a_pause_fires_the_most_recent_missed_tick_only_by_default() -> None:
    async with WorkflowTestEnv(start_time=START) as env:
        schedules = env.client.schedules
        await schedules.create("daily", app.echo, Schedule(cron="0 3 * * *", args=("d",)))
        await env.sleep("1d")  # 03:00 on day 1 runs
        paused = await schedules.pause("daily", note="supplier outage")
        assert paused.paused and paused.note == "supplier outage" and paused.next_at is None
        assert (await schedules.describe("daily")).upcoming == []
        await env.sleep("5d")  # five nights pass paused
        assert len(await scheduled_runs(env.world, "daily")) == 1
        await schedules.resume("daily")
        await env.sleep("1m")
        runs = await scheduled_runs(env.world, "daily")
        assert hhmm(runs) == ["03-02 03:00Z", "03-07 03:00Z"], "the most recent missed night, once"
        state = await schedules.get("daily")
        assert (state.fired, state.missed) == (2, 4)
        assert (await schedules.describe("daily")).upcoming[0] == datetime(2026, 3, 8, 3, tzinfo=UTC)


async def test_catchup_all_fires_each_missed_tick_in_order_and_a_window_drops_old_ones() -> None:
    async with WorkflowTestEnv(start_time=START) as env:
        schedules = env.client.schedules
        await schedules.create("all", app.echo, Schedule(cron="0 3 * * *", args=(1,), catchup="all",
                                                          overlap="allow_all"))
        await schedules.create("window", app.echo, Schedule(cron="0 3 * * *", args=(2,), catchup="all",
                                                             overlap="allow_all", catchup_window="36h"))
        await schedules.pause("all")
        await schedules.pause("window")
        await env.sleep(timedelta(days=4, hours=12))  # to March 6, 12:00: nights 2..6 pass
        await schedules.resume("all")
        await schedules.resume("window")
        await env.sleep("1m")
        assert hhmm(await scheduled_runs(env.world, "all")) == [f"03-0{d} 03:00Z" for d in range(2, 7)]
        assert hhmm(await scheduled_runs(env.world, "window")) == ["03-05 03:00Z", "03-06 03:00Z"]
        assert (await schedules.get("window")).missed == 3




def test_a_cron_whose_day_no_month_has_is_refused_as_never_firing() -> None:
    """Found by a walk: February 30th (``0 2 30 2 *``) was refused as "not valid: Bad day-of-month" (CronSim's
    words, as for 32), and the user looked for what was wrong with 30. A day that is fine but in none of the
    months named is said as such, with the way to write the month's last day."""
    with pytest.raises(ValueError, match=re.escape("cron '0 2 30 2 *' never fires: no month it names (month field "
                                                   "'2') has day '30'; for the last day of each month write L "
                                                   "('0 2 L 2 *')")):
        Schedule(cron="0 2 30 2 *", timezone="Europe/Paris")
    with pytest.raises(ValueError, match=re.escape("cron '0 2 32 * *' is not valid: Bad day-of-month")):
        Schedule(cron="0 2 32 * *")  # a day no month has: CronSim's words stand

@pytest.mark.parametrize("overlap", ["skip", "buffer_one", "cancel_previous"])
def test_catchup_all_without_allow_all_is_refused_where_it_is_written(overlap: Overlap) -> None:
    """Found by a walk: ``Schedule(every="1h", catchup="all")`` (the default overlap, ``skip``) paused six hours and
    resumed started one run, the oldest missed tick's, and counted the five others ``skipped``: a claim settles the
    missed ticks together, and the first one's run is going when the next is looked at. The page promised "fires
    each missed tick in order"; what ran was fewer and staler than the default ``catchup="latest"`` gives.
    ``buffer_one`` kept two, ``cancel_previous`` started them all and cancelled all but the last. Refused now, with
    the way out, where the declaration or the ``create`` is written."""
    with pytest.raises(ValueError, match=re.escape(
            f"catchup='all' starts every missed tick at once, which needs overlap='allow_all' (they run side by "
            f"side); with overlap={overlap!r} the first missed tick's run would turn the others away")):
        Schedule(every="1h", catchup="all", overlap=overlap)
    assert Schedule(every="1h", catchup="all", overlap="allow_all").catchup == "all"

async def test_daylight_saving_in_berlin_a_skipped_hour_fires_once_and_a_repeated_hour_once() -> None:
    spring = datetime(2026, 3, 28, 12, tzinfo=UTC)
    async with WorkflowTestEnv(start_time=spring, schedules=[app.dst]) as env:
        await env.sleep("1d")  # over the night of March 29 (02:00 CET -> 03:00 CEST)
        fixed = hhmm(await scheduled_runs(env.world, "spring"))
        hourly = await scheduled_runs(env.world, "hourly-berlin")
    assert fixed == ["03-29 01:00Z"], "02:30 does not exist that night: it fires once, at 03:00 CEST"
    assert len(hourly) == 24, "an hourly job keeps its pace by the real clock: 24 runs in 24 hours"
    assert all((b.tick - a.tick) == timedelta(hours=1) for a, b in itertools.pairwise(hourly))
    autumn = datetime(2026, 10, 24, 12, tzinfo=UTC)
    async with WorkflowTestEnv(start_time=autumn, schedules=[app.dst]) as env:
        await env.sleep("1d")  # over the night of October 25 (03:00 CEST -> 02:00 CET)
        fixed = hhmm(await scheduled_runs(env.world, "spring"))
        hourly = await scheduled_runs(env.world, "hourly-berlin")
    assert fixed == ["10-25 00:30Z"], "02:30 happens twice that night: it fires once, at its first pass"
    assert "10-25 00:15Z" in hhmm(hourly) and "10-25 01:15Z" in hhmm(hourly), "02:15 CEST and 02:15 CET"
    assert len(hourly) == 24


async def test_trigger_backfill_and_describe_through_the_client() -> None:
    async with WorkflowTestEnv(start_time=START) as env:
        schedules = env.client.schedules
        await schedules.create("q", app.echo, Schedule(every="6h", args=("q",)))
        await env.sleep("13h")  # 06:00 and 12:00 run
        done = await schedules.trigger("q")
        assert done.outcome == "started" and done.run_id is not None
        assert (await env.client.get_run(done.run_id).result())["value"] == "q"
        ids = await schedules.backfill("q", START - timedelta(days=1), START + timedelta(hours=12, minutes=1))
        # Yesterday's four ticks, today's 00:00, and the 06:00 and 12:00 that already ran (their ids: no new run).
        assert len(ids) == 7 and ids[-2:] == [schedules.run_id("q", START + timedelta(hours=h)) for h in (6, 12)]
        await env.idle()
        runs = await scheduled_runs(env.world, "q")
        by_trigger = sorted(r.trigger for r in runs)
        assert by_trigger == ["backfill"] * 5 + ["manual"] + ["tick"] * 2
        described = await schedules.describe("q", upcoming=3)
        assert described.upcoming == [START + timedelta(hours=h) for h in (18, 24, 30)]
        assert (described.args, described.kwargs) == (("q",), {}), "the arguments its runs get"
        with pytest.raises(InvalidInputError, match="end it at now at the latest"):
            await schedules.backfill("q", START, START + timedelta(days=2))  # the future
        with pytest.raises(InvalidInputError, match=r"must be after its start \(.*\): swap them$"):
            await schedules.backfill("q", START - timedelta(days=1), START - timedelta(days=2))
        # Too many ticks: the refusal says where a first part of 1,000 ends (it said "backfill it in parts").
        early = START - timedelta(days=300)
        with pytest.raises(InvalidInputError) as large:
            await schedules.backfill("q", early, START - timedelta(days=1))
        part_end = early + timedelta(hours=6 * 1000)
        assert f"the first 1000 end before {part_end.isoformat()}: end a first part there" in str(large.value)
        assert len(await schedules.backfill("q", early, part_end)) == 1000, "the part it names is accepted"
        with pytest.raises(ScheduleExistsError) as taken:
            await schedules.create("q", app.echo, Schedule(every="1h", args=("other",)))
        # The refusal writes the interval as `awsworld schedules` does (it said "every 21600s (UTC)").
        assert "(api: schedules.app.echo, every 6h)" in str(taken.value), taken.value
        assert (await schedules.get("q")).spec.every == 6 * 3600, "the refused create changed nothing"
        await schedules.delete("q")
        with pytest.raises(ScheduleNotFoundError):
            await schedules.get("q")


async def test_a_schedule_declared_in_code_cannot_be_deleted_and_changing_it_keeps_its_state() -> None:
    async with WorkflowTestEnv(start_time=START, schedules=[app.nightly]) as env:
        await env.sleep("2d")
        with pytest.raises(ScheduleDeclaredInCodeError):
            await env.client.schedules.delete(NIGHTLY)
        await env.client.schedules.pause(NIGHTLY)
        # The deployment stops declaring it: the next tick marks it orphaned, and then it may be deleted.
        env.world.schedules.declared = ()
        await env.sleep("1m")
        state = await env.client.schedules.get(NIGHTLY)
        assert state.orphaned and state.paused and state.fired == 2
        await env.client.schedules.delete(NIGHTLY)


def test_bad_declarations_fail_where_they_are_written() -> None:
    with pytest.raises(ValueError, match="not valid"):
        Schedule(cron="61 * * * *")
    with pytest.raises(ValueError, match="5 fields"):
        Schedule(cron="0 0 2 * * *")
    with pytest.raises(ValueError, match="IANA"):
        Schedule(cron="0 2 * * *", timezone="Mars/Olympus")
    # A zone in the wrong case or misspelt names the one meant (it said only "e.g. 'Europe/Berlin', 'UTC'").
    with pytest.raises(ValueError) as lower:
        Schedule(cron="0 2 * * *", timezone="europe/berlin")
    assert str(lower.value) == ("'europe/berlin' is not an IANA time zone: did you mean 'Europe/Berlin'? "
                                "(names are case-sensitive)")
    with pytest.raises(ValueError, match=r"'Europe/Berln' is not an IANA time zone: did you mean 'Europe/Berlin'\?$"):
        Schedule(cron="0 2 * * *", timezone="Europe/Berln")
    with pytest.raises(ValueError, match="at least 60"):
        Schedule(every="30s")
    with pytest.raises(ValueError, match="exactly one"):
        Schedule()
    with pytest.raises(TypeError, match="serialized"):
        Schedule(every="1h", args=(object(),))
    # Over 256 KB serialized (or a bad id): the README's ValueError, typed, and the World's InvalidInputError
    # naming the field, raised by the constructor.
    with pytest.raises(ValueError, match="at most 262144 bytes serialized") as too_large:
        Schedule(every="1h", args=("x" * 300_000,))
    assert isinstance(too_large.value, ScheduleInputError) and isinstance(too_large.value, InvalidInputError)
    assert too_large.value.field == "input"
    with pytest.raises(ValueError, match="schedule id") as bad_id:
        Schedule(every="1h", id="nightly report")
    assert isinstance(bad_id.value, ScheduleInputError) and bad_id.value.field == "scheduleId"


async def test_arguments_that_do_not_fit_the_workflow_are_refused_at_create() -> None:
    async with WorkflowTestEnv(start_time=START) as env:
        with pytest.raises(TypeError, match="echo"):
            await env.client.schedules.create("bad", app.echo, Schedule(every="1h", args=(1, 2)))
        assert await env.client.schedules.list() == []


async def test_large_arguments_round_trip_into_every_run() -> None:
    big = "z" * 20_000  # above the inline value limit (16 KB)
    async with WorkflowTestEnv(start_time=START) as env:
        await env.client.schedules.create("big", app.echo, Schedule(every="1h", args=(big,)))
        await env.sleep("2h")
        runs = await scheduled_runs(env.world, "big")
        assert len(runs) == 2
        for run in runs:
            assert (await env.client.get_run(run.run_id).result())["value"] == big


def test_a_stale_record_loses_its_write() -> None:
    world = MemoryWorld()
    client = Client(world)

    async def go() -> None:
        state = await client.schedules.create("v", app.echo, Schedule(every="1h", args=(0,)))
        assert await world.schedules.write(replace(state, version=1, note="a"), expected_version=0)
        assert not await world.schedules.write(replace(state, version=1, note="b"), expected_version=0)
        assert (await world.schedules.get("v")).note == "a"

    asyncio.run(go())


async def test_on_lambda_a_declaration_defers_its_cron_check_to_the_tick_which_skips_a_bad_one(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from awsworld.schedules.declared import Declaration

    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_NAME", "awsworld-flow")
    bad = Schedule(cron="61 * * * *")  # not refused here: CronSim is not imported by a cold start
    good = Schedule(id="fine", cron="*/5 * * * *", timezone="Europe/Berlin")
    world = MemoryWorld(clock=VirtualClock(START))
    world.schedules.declared = (Declaration("bad", workflow_name(app.dst), app.__name__, bad),
                                Declaration("fine", workflow_name(app.dst), app.__name__, good))
    report = await run_schedules(world)
    assert (report["invalid"], report["synced"], report["failed"]) == (1, 1, 0), report
    assert [s.schedule_id for s in await world.schedules.list()] == ["fine"]
    assert "cronsim" in sys.modules  # the tick evaluated the good one


async def test_awsworld_schedule_declares_beside_the_workflow_and_ids_are_unique() -> None:
    from awsworld import schedule
    from awsworld.schedules.declared import DECLARED

    assert DECLARED["tagged-6h"].workflow_name == workflow_name(app.tagged)
    schedule(app.tagged, Schedule(id="tagged-6h", every="6h", offset="1h", args=("declared apart",)))  # again: no-op
    with pytest.raises(ValueError, match="two schedules"):
        schedule(app.echo, Schedule(id="tagged-6h", every="1h", args=(1,)))
    with pytest.raises(TypeError, match="not a @workflow"):
        schedule(print, Schedule(every="1h"))
    async with WorkflowTestEnv(start_time=START, schedules=[app.tagged]) as env:
        await env.sleep("1d")
        assert hhmm(await scheduled_runs(env.world, "tagged-6h")) == [f"03-02 {h:02d}:00Z" for h in (1, 7, 13, 19)]


@pytest.mark.parametrize("published", [False, True], ids=["after-the-window", "published-names"])
async def test_a_scheduled_run_of_a_workflow_no_deployment_registers_names_the_schedule_and_what_to_do(
        published: bool) -> None:
    """A schedule created through the API keeps its workflow's name: renamed (or its module dropped), each tick
    starts a run that fails with ``UnknownWorkflowError``. The error said to check the modules, or (where the
    consumers' names are published, as under ``awsworld dev``: at once) "name a workflow it registers", never which
    schedule started the run and goes on starting them: it now names the schedule and says to pause or delete it,
    or to create it on the workflow's new name."""
    from awsworld._published.model import publish
    from awsworld.authoring.definitions import REGISTRY

    gone = "tests.schedules.app.renamed_away"  # the name the schedule was created with; registered nowhere now
    async with WorkflowTestEnv(start_time=START) as env:
        # Created when the name was registered (a client of the stack, with no workflow code, takes it as it is).
        await Client(env.world).schedules.create("hourly-gone", gone, Schedule(every="1h", args=("x",)))
        if published:  # then the renaming deploy's names, published ahead of its deliveries (as `awsworld dev` does)
            assert await publish(env.world, REGISTRY, host="awsworld dev", ahead=True)
        await env.sleep("1h")  # the 01:00 tick starts a run
        await env.client.schedules.pause("hourly-gone")
        await env.sleep("1h")  # past the unknown-workflow window (15 minutes from the run's creation)
        [started] = await scheduled_runs(env.world, "hourly-gone")
        view = await env.world.runs.get(started.run_id)
        assert (view.status, view.error_code) == ("failed", "UNKNOWN_WORKFLOW"), view
        _, message = error_name_and_message(view.error)
        assert f"no workflow named {gone!r}" in message and "name a workflow" not in message, message
        assert message.endswith(
            f"; schedule 'hourly-gone' started this run and starts one of {gone!r} at each tick: pause or delete it "
            "(`awsworld schedules pause hourly-gone`, `awsworld schedules delete hourly-gone`), and if the workflow "
            "was renamed, create the schedule on its new name"), message


async def test_describe_and_the_run_viewer_say_what_works_for_a_run_whose_workflow_is_gone(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``awsworld describe`` and the run viewer ended a run that failed with ``UNKNOWN_WORKFLOW`` with "once the
    cause is fixed, `awsworld rerun RUN`": a rerun starts the same name again and fails the same way. They now say
    so, and what works: code of that name back, else the new name (for a run a schedule started, the schedule,
    which still names the old one). A run of a workflow that exists keeps the rerun hint (tests/cli/test_cli.py)."""
    import httpx

    from awsworld.cli.describe import _print_description, describe_document
    from awsworld.ui import create_app

    gone = "tests.schedules.app.renamed_away"
    async with WorkflowTestEnv(start_time=START) as env:
        client = Client(env.world)
        await client.schedules.create("hourly-gone", gone, Schedule(every="1h", args=("x",)))
        started = await client.start(gone, "y")  # not a schedule's: a script's, of a name no longer deployed
        await env.sleep("1h")  # the 01:00 tick starts a run
        await env.client.schedules.pause("hourly-gone")
        await env.sleep("1h")  # past the unknown-workflow window (15 minutes from the run's creation)
        [scheduled] = await scheduled_runs(env.world, "hourly-gone")
        said = {}
        for run_id in (scheduled.run_id, started.run_id):
            view = await env.world.runs.get(run_id)
            assert (view.status, view.error_code) == ("failed", "UNKNOWN_WORKFLOW"), view
            _print_description(await describe_document(client, run_id))
            [said[run_id]] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("re-run ")]
            app = create_app(env.world)
            async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
                page = (await http.get(f"/runs/{run_id}")).text
            assert said[run_id].removeprefix("re-run    ").replace("'", "&#x27;") in page, "the viewer says the same"
    back = (f"re-run    no deployment registered {gone!r}, so a rerun fails the same way until code of that name is "
            "deployed again (then `awsworld rerun {}`); if the workflow was renamed, start the new name with the same "
            "arguments (`awsworld start NEW_NAME '[...]'`)")
    assert said[started.run_id] == back.format(started.run_id)
    assert said[scheduled.run_id] == back.format(scheduled.run_id) + (
        ", and create schedule hourly-gone on it: it still names the old one (`awsworld schedules delete "
        "hourly-gone`, then `awsworld schedules create hourly-gone NEW_NAME ...`)")


def test_an_offset_of_zero_is_none_with_a_cron_too() -> None:
    """``offset`` applies to ``every``: one given with ``cron`` is refused, not dropped in silence; an offset of 0 in
    any spelling is none, and was refused as one given (``awsworld schedules create --cron ... --offset 0`` too:
    ``tests/cli/test_schedules_cli.py``)."""
    for zero in (0, "0s", "0m"):
        assert Schedule(cron="0 2 * * *", offset=zero).cron == "0 2 * * *"
    with pytest.raises(ValueError, match=r"^offset applies to every, not to a cron expression"):
        Schedule(cron="0 2 * * *", offset="5m")


@pytest.mark.parametrize("after", ["declared-on-the-new-name", "orphaned", "deleted"])
async def test_a_scheduled_run_of_a_renamed_workflow_is_told_what_is_true_of_its_schedule(
        after: str, capsys: pytest.CaptureFixture[str]) -> None:
    """A run a schedule declared in code started, of a workflow renamed since, failed with ``UNKNOWN_WORKFLOW`` and
    a note to pause or delete the schedule and create it on the new name, as for a schedule created through the API.
    False for a declaration: the deploy that renamed the workflow declares it on the new name (same ``id``), or
    orphans it (a default id, renamed with the workflow) and it fires nothing; and a declared schedule cannot be
    deleted. The note, describe's re-run line and the run viewer now say what is true of the schedule now."""
    import httpx

    from awsworld.cli.describe import _print_description, describe_document
    from awsworld.schedules.declared import Declaration
    from awsworld.ui import create_app

    gone, new = "tests.schedules.app.renamed_away", workflow_name(app.echo)
    async with WorkflowTestEnv(start_time=START) as env:
        # The old deployment declared "nightly" on the old name: its 01:00 tick starts a run of it.
        env.world.schedules.declared = (Declaration("nightly", gone, app.__name__, Schedule(every="1h", args=(1,))),)
        await run_schedules(env.world)
        await env.sleep("1h")
        [started] = await scheduled_runs(env.world, "nightly")
        # Then the renaming deploy: the same id on the new name, or a default id of its own (the old one orphaned).
        kept = Declaration("nightly", new, app.__name__, Schedule(every="1h", args=(1,)))
        renamed = Declaration(f"{new}-1h", new, app.__name__, Schedule(every="1h", args=(1,)))
        env.world.schedules.declared = (kept,) if after == "declared-on-the-new-name" else (renamed,)
        await run_schedules(env.world)
        if after == "deleted":
            await env.client.schedules.delete("nightly")
        await env.sleep("1h")  # past the unknown-workflow window (15 minutes from the run's creation)
        view = await env.world.runs.get(started.run_id)
        assert (view.status, view.error_code) == ("failed", "UNKNOWN_WORKFLOW"), view
        _, message = error_name_and_message(view.error)
        _print_description(await describe_document(env.client, started.run_id))
        [rerun] = [line for line in capsys.readouterr().out.splitlines() if line.startswith("re-run ")]
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(env.world)),
                                     base_url="http://127.0.0.1") as http:
            page = (await http.get(f"/runs/{started.run_id}")).text
    told = {"declared-on-the-new-name": f"schedule 'nightly' started this run and is now declared in code on {new!r}: "
                                       "its next ticks start that; nothing to change in the schedule",
            "orphaned": "schedule 'nightly' (declared in code) started this run; no deployment declares it now, so "
                        "it starts nothing: a declaration on the new name is a schedule of its own (`awsworld "
                        "schedules list`); `awsworld schedules delete nightly` removes the old one's record",
            "deleted": "schedule 'nightly' started this run and has been deleted since: it starts no more runs"}[after]
    if after != "deleted":  # (the note is written when the run fails, before this test deletes the schedule)
        assert message.endswith(f"; {told}"), message
    assert "pause or delete it" not in message and "create the schedule on its new name" not in message, message
    assert rerun.endswith(f"(`awsworld start NEW_NAME '[...]'`); {told}"), rerun
    assert rerun.removeprefix("re-run    ").replace("'", "&#x27;") in page, "the viewer says the same"
