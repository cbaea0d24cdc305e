"""Concurrent writers on one run: unique, dense slots; exactly-one winners for entity, token and fence races.

Every race runs over one World (whose writers of one run take turns in-process) and, where it matters,
over ``peers``: separate World instances on the same storage, which is what separate processes look like to
the store. Each test works on runs of its own, so the module shares one table per backend.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

import pytest

from awsworld.world import EntityConflictError, HookNotFoundError, RunGoneError, new_run_id

from .helpers import (
    AnyWorld,
    all_events,
    assert_dense,
    hook_created,
    hook_disposed,
    module_peers,
    module_world,
    new_run,
    on_aws,
    run_created,
    step_completed,
    step_created,
    step_failed,
    step_started,
    types,
    unique,
    wait_completed,
    wait_created,
)

module_local_aws, world = module_world()
peers = module_peers(8)
Peers = list[AnyWorld]


async def settle(calls: list[Awaitable[Any]]) -> list[Any]:
    """Run concurrently; each entry is the result or the exception it raised."""
    return list(await asyncio.gather(*calls, return_exceptions=True))


async def _append_many(world: AnyWorld, run_id: str, writer: str, count: int) -> list[int]:
    slots = []
    for j in range(count):
        result = await world.events.create(run_id, step_created(f"{writer}-{j}"))
        assert result.event is not None
        slots.append(result.event.slot)
    return slots


def _check_writers(events: list, writers: dict[str, list[int]], count: int) -> None:
    assert_dense(events)
    by_step = {e.correlation_id: e.slot for e in events if e.event_type == "step_created"}
    for writer, slots in writers.items():
        expected = [by_step[f"{writer}-{j}"] for j in range(count)]
        assert slots == expected, f"{writer}'s results name the slots its events hold"
        assert slots == sorted(slots), f"{writer}'s sequential writes land in order"


async def test_16_concurrent_writers_x50_fill_slots_densely_without_duplicates(world: AnyWorld) -> None:
    run_id = await new_run(world)
    names = [f"w{i}" for i in range(16)]
    results = await asyncio.gather(*(_append_many(world, run_id, n, 50) for n in names))
    events = await all_events(world, run_id)
    assert len(events) == 1 + 16 * 50
    assert events[-1].slot == 801
    _check_writers(events, dict(zip(names, results, strict=True)), 50)
    all_slots = [s for r in results for s in r]
    assert len(set(all_slots)) == 800
    run = await world.runs.get(run_id)
    assert run.seq == 801
    assert (await world.events.list(run_id, limit=1)).snapshot.seq == 801
    paged = await all_events(world, run_id, limit=97)
    assert [e.event_id for e in paged] == [e.event_id for e in events]


async def test_writers_in_separate_worlds_fill_slots_densely(world: AnyWorld, peers: Peers) -> None:
    run_id = await new_run(world)
    names = [f"p{i}" for i in range(8)]
    results = await asyncio.gather(*(_append_many(p, run_id, n, 20) for p, n in zip(peers, names, strict=True)))
    events = await all_events(world, run_id)
    assert len(events) == 1 + 8 * 20
    _check_writers(events, dict(zip(names, results, strict=True)), 20)


async def test_a_lost_race_retries_from_the_cancellation_without_another_read(world: AnyWorld, peers: Peers) -> None:
    run_id = await new_run(world)  # this World now believes the log holds 1 event
    other = peers[0]
    for i in range(3):
        await other.events.create(run_id, step_created(f"other{i}"))
    aws = on_aws(world)
    before = aws.stats.snapshot() if aws is not None else None
    result = await world.events.create(run_id, step_created("mine"))
    assert result.event is not None and result.event.slot == 5
    if aws is not None and before is not None:  # how the AWS World learns the next free slot
        used = aws.stats - before
        assert used.requests["dynamodb.TransactWriteItems"] == 2
        reads = used.total("dynamodb") - used.requests["dynamodb.TransactWriteItems"]
        assert reads == 0, f"the ALL_OLD run item names the next free slot: {dict(used.requests)}"


# ---------------------------------------------------------------- exactly-one races


def racers(world: AnyWorld, peers: Peers, separate: bool, count: int) -> Peers:
    return peers[:count] if separate else [world] * count
SEPARATE = pytest.mark.parametrize("separate", [False, True], ids=["one-world", "separate-worlds"])


def _split(outcomes: list[Any]) -> tuple[list[Any], list[BaseException]]:
    return ([o for o in outcomes if not isinstance(o, BaseException)],
            [o for o in outcomes if isinstance(o, BaseException)])


@SEPARATE
async def test_8_racers_on_one_step_created_exactly_one_wins(world: AnyWorld, peers: Peers, separate: bool) -> None:
    run_id = await new_run(world, start=True)
    worlds = racers(world, peers, separate, 8)
    outcomes = await settle([w.events.create(run_id, step_created("s1", input=[i]))
                             for i, w in enumerate(worlds)])
    won, lost = _split(outcomes)
    assert len(won) == 1, outcomes
    assert len(lost) == 7 and all(isinstance(e, EntityConflictError) for e in lost), lost
    events = await all_events(world, run_id)
    assert types(events) == ["run_created", "run_started", "step_created"]
    assert (await world.steps.get(run_id, "s1")).input == won[0].step.input


@SEPARATE
async def test_two_runs_racing_for_one_hook_token_get_one_hook_and_one_conflict(world: AnyWorld, peers: Peers,
                                                                                separate: bool) -> None:
    runs = [await new_run(world, start=True) for _ in range(2)]
    worlds = racers(world, peers, separate, 2)
    token = unique("tok-contested")
    outcomes = await settle([w.events.create(r, hook_created(unique("h"), token))
                             for w, r in zip(worlds, runs, strict=True)])
    won, lost = _split(outcomes)
    assert not lost, lost
    kinds = sorted(o.event.event_type for o in won)
    assert kinds == ["hook_conflict", "hook_created"]
    winner = next(o for o in won if o.event.event_type == "hook_created")
    loser = next(o for o in won if o.event.event_type == "hook_conflict")
    assert loser.hook is None
    assert loser.event.event_data == {"token": token, "conflictingRunId": winner.event.run_id}
    assert (await world.hooks.get_by_token(token)).run_id == winner.event.run_id


async def test_8_runs_racing_for_one_token_in_separate_worlds_get_one_hook(world: AnyWorld, peers: Peers) -> None:
    runs = [await new_run(world, start=True) for _ in range(8)]
    worlds = peers[:8]
    token = unique("tok-8")
    outcomes = await settle([w.events.create(r, hook_created(unique("h"), token))
                             for w, r in zip(worlds, runs, strict=True)])
    won, lost = _split(outcomes)
    assert not lost, lost
    created = [o for o in won if o.event.event_type == "hook_created"]
    assert len(created) == 1
    owner = created[0].event.run_id
    assert all(o.event.event_data == {"token": token, "conflictingRunId": owner}
               for o in won if o is not created[0])


@SEPARATE
async def test_concurrent_starts_of_one_step_take_distinct_attempts(world: AnyWorld, peers: Peers,
                                                                    separate: bool) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    worlds = racers(world, peers, separate, 6)
    outcomes = await settle([w.events.create(run_id, step_started("s1")) for w in worlds])
    won, lost = _split(outcomes)
    assert not lost, lost
    assert sorted(o.step.attempt for o in won) == [1, 2, 3, 4, 5, 6]
    assert sorted(o.event.event_data["attempt"] for o in won) == [1, 2, 3, 4, 5, 6]
    assert (await world.steps.get(run_id, "s1")).attempt == 6


@SEPARATE
async def test_racing_step_results_first_one_wins(world: AnyWorld, peers: Peers, separate: bool) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    await world.events.create(run_id, step_started("s1"))
    worlds = racers(world, peers, separate, 6)
    outcomes = await settle([w.events.create(run_id, step_completed("s1", i) if i % 2 else
                                             step_failed("s1", str(i))) for i, w in enumerate(worlds)])
    won, lost = _split(outcomes)
    assert len(won) == 1 and len(lost) == 5, outcomes
    assert all(isinstance(e, EntityConflictError) for e in lost)
    events = await all_events(world, run_id)
    assert len([e for e in events if e.event_type in ("step_completed", "step_failed")]) == 1
    assert_dense(events)


@SEPARATE
async def test_racing_wait_completions_complete_it_once(world: AnyWorld, peers: Peers, separate: bool) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, wait_created("w1"))
    worlds = racers(world, peers, separate, 5)
    outcomes = await settle([w.events.create(run_id, wait_completed("w1")) for w in worlds])
    won, lost = _split(outcomes)
    assert len(won) == 1 and all(isinstance(e, EntityConflictError) for e in lost) and len(lost) == 4


async def test_racing_run_completions_end_the_run_once(world: AnyWorld, peers: Peers) -> None:
    run_id = await new_run(world, start=True)
    worlds = peers[:4]
    outcomes = await settle([w.events.create(run_id, {"eventType": "run_completed",
                                                      "eventData": {"output": i}})
                             for i, w in enumerate(worlds)])
    won, lost = _split(outcomes)
    assert len(won) == 1 and len(lost) == 3 and all(isinstance(e, EntityConflictError) for e in lost)
    assert (await world.runs.get(run_id)).output == won[0].run.output


async def test_no_step_lands_after_a_racing_run_end(world: AnyWorld, peers: Peers) -> None:
    run_id = await new_run(world, start=True)
    worlds = peers[:4]
    creators = [_create_until_gone(w, run_id, f"p{i}", 30) for i, w in enumerate(worlds[:3])]

    async def end_soon() -> None:
        await asyncio.sleep(0.05)
        await worlds[3].events.create(run_id, {"eventType": "run_cancelled"})

    await asyncio.gather(*creators, end_soon())
    events = await all_events(world, run_id)
    assert_dense(events)
    assert types(events).index("run_cancelled") == len(events) - 1, "nothing is created after the run ended"
    assert len(events) < 2 + 3 * 30 + 1, "the run ended while the creators were still writing"


async def _create_until_gone(world: AnyWorld, run_id: str, prefix: str, count: int) -> None:
    for j in range(count):
        try:
            await world.events.create(run_id, step_created(f"{prefix}-{j}"))
        except RunGoneError:
            return
        await asyncio.sleep(0.02)  # a busy run, not a saturated one: the run end gets its turn


async def test_racing_resilient_starts_create_the_run_once(world: AnyWorld, peers: Peers) -> None:
    run_id = new_run_id()
    worlds = peers[:4]
    outcomes = await settle([w.events.create(run_id, {"eventType": "run_started", "eventData": {
        "workflowName": "wf", "input": i}}) for i, w in enumerate(worlds)])
    won, lost = _split(outcomes)
    assert not lost, lost
    assert sum(o.event is not None for o in won) == 1
    assert all(o.run.status == "running" for o in won)
    assert types(await all_events(world, run_id)) == ["run_created", "run_started"]


async def test_racing_run_created_with_one_client_id_writes_once(world: AnyWorld, peers: Peers) -> None:
    run_id = new_run_id()
    worlds = peers[:4]
    outcomes = await settle([w.events.create(run_id, run_created(input=i)) for i, w in enumerate(worlds)])
    won, lost = _split(outcomes)
    assert not lost, lost
    assert sum(o.event is not None for o in won) == 1
    winner = next(o for o in won if o.event is not None)
    assert all(o.run.input == winner.run.input for o in won)
    assert types(await all_events(world, run_id)) == ["run_created"]


async def test_hooks_created_while_the_run_ends_are_released_or_refused(world: AnyWorld, peers: Peers) -> None:
    """Whatever the interleaving, a run that ended holds no live hook and no token."""
    for round_ in range(6):
        run_id = await new_run(world, start=True)
        tokens = [unique(f"tok-r{round_}") for _ in range(3)]
        creates = [p.events.create(run_id, hook_created(unique("h"), t)) for p, t in zip(peers[:3], tokens,
                                                                                          strict=True)]
        outcomes = await settle([*creates, _later(0.005 * round_, peers[3].events.create(
            run_id, {"eventType": "run_completed"}))])
        assert all(o is None or not isinstance(o, BaseException) or isinstance(o, RunGoneError)
                   for o in outcomes), outcomes
        assert (await world.hooks.list(run_id)).data == [], f"round {round_}: a hook outlived its run"
        for t in tokens:
            with pytest.raises(HookNotFoundError):
                await world.hooks.get_by_token(t)


async def _later(delay: float, call: Awaitable[Any]) -> Any:
    await asyncio.sleep(delay)
    return await call


async def test_a_hook_created_racing_the_tokens_disposal_never_leaves_it_half_held(world: AnyWorld,
                                                                                  peers: Peers) -> None:
    for _ in range(5):
        owner, other = await new_run(world, start=True), await new_run(world, start=True)
        token, owner_hook = unique("tok-d"), unique("h")
        await world.events.create(owner, hook_created(owner_hook, token))
        disposed, created = await settle([peers[0].events.create(owner, hook_disposed(owner_hook)),
                                          peers[1].events.create(other, hook_created(unique("h"), token))])
        assert not isinstance(disposed, BaseException) and not isinstance(created, BaseException)
        if created.event.event_type == "hook_created":
            assert (await world.hooks.get_by_token(token)).run_id == other
        else:
            assert created.event.event_data == {"token": token, "conflictingRunId": owner}
            with pytest.raises(HookNotFoundError):
                await world.hooks.get_by_token(token)
