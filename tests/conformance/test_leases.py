"""A started step's lease and a run's due, on every backend (``world.rules.leases``, ``world.watch``).

The lease: while it runs, only the owner's message may start the step again; once it has passed, any delivery
takes the step over as a new attempt, and of several racing for it exactly one wins (DynamoDB Local honours
the transaction's conditions under real contention). The due: every commit leaves one on the run head, in a
sparse index the watchdog queries; a run's end takes it out; the watchdog's snooze and a resting flow's
correction are conditioned on the run not having moved.
"""

from __future__ import annotations

import asyncio
from datetime import datetime, timedelta
from typing import Any

import pytest

from awsworld.world import InvalidInputError, StepRunningElsewhereError
from awsworld.world.clock import clock_of
from awsworld.world.rules.leases import DEFAULT_LEASE_SECONDS
from awsworld.world.rules.lifetime import lifetime_end
from awsworld.world.watch import DueRun, due_key, horizon, parse_key, snooze_due

from .helpers import (
    AnyWorld,
    all_events,
    assert_dense,
    module_peers,
    module_world,
    new_run,
    on_aws,
    run_completed,
    step_completed,
    step_created,
    stored,
    table_items,
)

module_local_aws, world = module_world()
peers = module_peers(4)


def started(step_id: str, owner: str, lease: Any = None) -> dict[str, Any]:
    data: dict[str, Any] = {"ownerMessageId": owner}
    if lease is not None:
        data["leaseSeconds"] = lease
    return {"eventType": "step_started", "correlationId": step_id, "eventData": data}


async def _fenced(world: AnyWorld, run_id: str, events: list[dict[str, Any]]) -> Any:
    snapshot = (await world.events.list(run_id)).snapshot
    assert snapshot is not None
    return await world.events.create_batch(run_id, events, in_band=True, expected_seq_in_band=snapshot.seq_in_band,
                                           expect_seq=snapshot.seq, atomic=True)


def now(world: AnyWorld) -> datetime:
    return clock_of(world).now()


# ---------------------------------------------------------------- the lease


async def test_a_step_is_refused_to_another_delivery_while_its_lease_runs(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    first = await world.events.create(run_id, started("s", "m1", lease=600))
    assert first.step is not None and first.event is not None and first.event.event_data is not None
    lease = datetime.fromisoformat(first.event.event_data["leaseUntil"])
    assert timedelta(seconds=599) < lease - first.event.created_at <= timedelta(seconds=600)
    assert "leaseSeconds" not in first.event.event_data  # the log keeps the end, not what was asked
    assert first.step.lease_until == lease
    with pytest.raises(StepRunningElsewhereError):
        await world.events.create(run_id, started("s", "m2", lease=600))
    again = await world.events.create(run_id, started("s", "m1", lease=600))  # its own redelivery may
    assert again.step is not None and again.step.attempt == 2


async def test_a_step_whose_lease_has_passed_is_taken_over_as_a_new_attempt(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1", lease=0))  # the owner's lease is over at once
    taken = await world.events.create(run_id, started("s", "m2", lease=600))
    assert taken.step is not None and taken.step.attempt == 2  # the lost attempt counts
    with pytest.raises(StepRunningElsewhereError):  # the lost owner's late redelivery is now the duplicate
        await world.events.create(run_id, started("s", "m1", lease=600))
    done = await world.events.create(run_id, step_completed("s", 7))
    assert done.step is not None and (done.step.status, done.step.output, done.step.lease_until) == (
        "completed", 7, None)


async def test_a_step_started_without_a_lease_gets_the_default_one(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    first = await world.events.create(run_id, started("s", "m1"))
    assert first.event is not None and first.event.event_data is not None
    lease = datetime.fromisoformat(first.event.event_data["leaseUntil"])
    assert lease - first.event.created_at == timedelta(seconds=DEFAULT_LEASE_SECONDS)


@pytest.mark.parametrize("lease", [-1, "ten", True, 10**9, float("inf")])
async def test_a_lease_that_is_not_a_number_of_seconds_up_to_a_day_is_refused(world: AnyWorld, lease: Any) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    before = await stored(world)
    with pytest.raises(InvalidInputError) as refused:
        await world.events.create(run_id, started("s", "m1", lease=lease))
    assert refused.value.field == "eventData.leaseSeconds"
    assert await stored(world) == before


async def test_a_step_held_in_the_run_head_carries_its_lease_and_is_taken_over_when_it_passes(
        world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    born = await _fenced(world, run_id, [step_created("h", input=[1]), started("h", "m1", lease=0)])
    head_step = born.results[1].result.step
    assert head_step is not None and head_step.lease_until is not None
    if (aws := on_aws(world)) is not None:  # held in the head: no step item yet
        items = await table_items(aws)
        assert not any(i["sk"]["S"] == "STEP#h" and i["pk"]["S"] == f"RUN#{run_id}" for i in items)
        [head] = [i for i in items if i["pk"]["S"] == f"RUN#{run_id}" and i["sk"]["S"] == "RUN"]
        assert head["inl"]["M"]["l"]["S"] == head_step.lease_until.isoformat(timespec="microseconds")
    taken = await world.events.create(run_id, started("h", "m2", lease=600))
    assert taken.step is not None and (taken.step.attempt, taken.step.input) == (2, [1])
    assert (await world.steps.get(run_id, "h")).attempt == 2


@pytest.mark.parametrize("racers", [2, 4])
async def test_deliveries_racing_to_take_over_an_expired_step_one_wins(world: AnyWorld, peers: list[AnyWorld],
                                                                      racers: int) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "lost", lease=0))
    outcomes = await asyncio.gather(*(p.events.create(run_id, started("s", f"m{i}", lease=600))
                                      for i, p in enumerate(peers[:racers])), return_exceptions=True)
    won = [o for o in outcomes if not isinstance(o, BaseException)]
    lost = [o for o in outcomes if isinstance(o, BaseException)]
    assert len(won) == 1, outcomes
    assert all(isinstance(e, StepRunningElsewhereError) for e in lost), lost
    assert won[0].step.attempt == 2
    step = await world.steps.get(run_id, "s")
    assert step.attempt == 2
    events = await all_events(world, run_id)
    assert [e.event_data["attempt"] for e in events if e.event_type == "step_started"] == [1, 2]
    assert_dense(events)


# ---------------------------------------------------------------- the due


async def _due(world: AnyWorld, run_id: str, at: datetime) -> DueRun | None:
    return next((r for r in await world.watch.due(at) if r.run_id == run_id), None)


async def test_every_commit_leaves_a_due_and_the_runs_end_takes_it_out(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    written = now(world)
    assert await _due(world, run_id, written) is None  # due after the horizon, not before
    found = await _due(world, run_id, written + horizon() + timedelta(minutes=2))
    assert found is not None and found.workflow_name and found.wakes == 0
    assert written + horizon() <= parse_key(found.due) <= now(world) + horizon() + timedelta(minutes=1)
    await world.events.create(run_id, step_created("s"))
    await world.events.create(run_id, started("s", "m1", lease=3600))  # a longer lease holds the due back
    found = await _due(world, run_id, now(world) + timedelta(hours=2))
    assert found is not None and parse_key(found.due) >= now(world) + timedelta(minutes=59)
    assert await _due(world, run_id, now(world) + timedelta(minutes=30)) is None
    await world.events.create(run_id, step_completed("s"))
    await world.events.create(run_id, run_completed("done"))
    assert await _due(world, run_id, now(world) + timedelta(days=30)) is None


async def test_the_watchdogs_snooze_doubles_and_yields_to_a_write(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    later = now(world) + horizon() + timedelta(minutes=2)
    found = await _due(world, run_id, later)
    assert found is not None
    pushed = await world.watch.snooze(found, later)
    assert pushed is not None and due_key(pushed) == due_key(snooze_due(later, 0))
    assert await world.watch.snooze(found, later) is None  # the due moved: a second watchdog does nothing
    again = await _due(world, run_id, pushed + timedelta(minutes=1))
    assert again is not None and again.wakes == 1
    second = await world.watch.snooze(again, pushed)
    assert second is not None and second - pushed == 2 * horizon()  # doubling
    stale = await _due(world, run_id, second + timedelta(minutes=1))
    assert stale is not None and stale.wakes == 2
    await world.events.create(run_id, step_created("s"))  # activity: a new due, the count restarts
    assert await world.watch.snooze(stale, second) is None
    fresh = await _due(world, run_id, now(world) + horizon() + timedelta(minutes=2))
    assert fresh is not None and fresh.wakes == 0


async def test_the_watchdogs_snooze_stops_at_the_end_of_the_runs_lifetime(world: AnyWorld) -> None:
    """A run that cannot rest (waiting for a concurrency slot) is due only by the watchdog's snoozes: one a few
    minutes before its lifetime's end (``world/rules/lifetime.py``) is cut to that end, on every World (the
    in-memory record, the DynamoDB head's ``wdEnd``); past the end, the backoff alone."""
    run_id = await new_run(world)
    created = (await world.runs.get(run_id)).created_at
    end = lifetime_end(created, None)  # (no maxRunSeconds in these runs' context: the setting's 365 days)
    before = end - horizon() / 2
    found = await _due(world, run_id, before)
    assert found is not None and found.wakes == 0
    capped = await world.watch.snooze(found, before)
    assert capped is not None and due_key(capped) == due_key(end) < due_key(snooze_due(before, 0)), (capped, end)
    again = await _due(world, run_id, end + timedelta(minutes=1))
    assert again is not None and again.wakes == 1
    after = end + timedelta(minutes=1)
    past = await world.watch.snooze(again, after)
    assert past is not None and due_key(past) == due_key(snooze_due(after, 1)), "past the end: the backoff"


async def test_a_resting_flows_correction_holds_only_while_the_log_has_not_moved(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    seq = len(await all_events(world, run_id))
    far = now(world) + timedelta(days=3)
    assert await world.watch.correct(run_id, far, seq=seq)
    assert await _due(world, run_id, now(world) + timedelta(days=2)) is None
    assert await _due(world, run_id, far + timedelta(minutes=1)) is not None
    assert await world.watch.correct(run_id, None, seq=seq)  # hooks alone: out of the index
    assert await _due(world, run_id, now(world) + timedelta(days=365)) is None
    assert not await world.watch.correct(run_id, far, seq=seq - 1)  # someone wrote since
    await world.events.create(run_id, run_completed("done"))
    assert not await world.watch.correct(run_id, far, seq=seq + 1)  # an ended run takes no due
    assert await _due(world, run_id, now(world) + timedelta(days=365)) is None


# ---------------------------------------------------------------- the numbers


def test_a_lease_is_the_shorter_of_the_steps_timeout_and_the_budget_left_plus_the_grace(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from awsworld.world.rules.leases import lease_seconds

    monkeypatch.delenv("AWSWORLD_LEASE_GRACE_SECONDS", raising=False)
    assert lease_seconds(step_timeout=None, budget_left=110.0, cancel_grace=1.0) == 140.0
    assert lease_seconds(step_timeout=5.0, budget_left=110.0, cancel_grace=1.0) == 36.0
    assert lease_seconds(step_timeout=500.0, budget_left=20.0, cancel_grace=1.0) == 50.0
    assert lease_seconds(step_timeout=None, budget_left=-3.0, cancel_grace=1.0) == 30.0  # a delivery past its budget
    monkeypatch.setenv("AWSWORLD_LEASE_GRACE_SECONDS", "4")
    assert lease_seconds(step_timeout=None, budget_left=5.0, cancel_grace=1.0) == 9.0


def test_dues_are_kept_rounded_up_to_the_bucket_and_sort_as_they_compare(monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC

    monkeypatch.delenv("AWSWORLD_WATCH_BUCKET_SECONDS", raising=False)
    at = datetime(2026, 3, 1, 12, 0, 1, 500, tzinfo=UTC)
    assert due_key(at) == "2026-03-01T12:01:00.000Z"
    assert due_key(datetime(2026, 3, 1, 12, 1, tzinfo=UTC)) == "2026-03-01T12:01:00.000Z"  # on the boundary: kept
    keys = [due_key(at + timedelta(seconds=s)) for s in (0, 59, 60, 3600, 86400 * 40)]
    assert keys == sorted(keys) and len(set(keys)) == 4
    monkeypatch.setenv("AWSWORLD_WATCH_BUCKET_SECONDS", "1")
    assert due_key(at) == "2026-03-01T12:00:02.000Z"
