"""create_batch: one atomic write at consecutive slots, per-event outcomes, and whole-batch rejections."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from awsworld.world import InvalidInputError, RunGoneError, RunNotFoundError, StepNotFoundError, new_run_id

from .helpers import (
    AnyWorld,
    all_events,
    assert_dense,
    attr_set,
    aws_world,
    hook_created,
    hook_disposed,
    module_peers,
    module_world,
    new_run,
    run_cancelled,
    run_completed,
    run_created,
    run_failed,
    run_started,
    step_completed,
    step_created,
    step_started,
    stored,
    types,
    unique,
    wait_completed,
    wait_created,
)

module_local_aws, world = module_world()
peers = module_peers(8)


async def test_a_batch_lands_in_request_order_at_consecutive_slots(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    batch = await world.events.create_batch(run_id, [step_created("a"), wait_created("w"), step_created("b")])
    assert [o.ok for o in batch.results] == [True, True, True]
    assert [o.status for o in batch.results] == [200, 200, 200]
    slots = [o.result.event.slot for o in batch.results]  # type: ignore[union-attr]
    assert slots == [3, 4, 5]
    assert batch.results[0].result.step.step_id == "a"  # type: ignore[union-attr]
    assert batch.results[1].result.wait.wait_id == "w"  # type: ignore[union-attr]
    events = await all_events(world, run_id)
    assert_dense(events)
    assert [e.correlation_id for e in events[2:]] == ["a", "w", "b"]


async def test_a_batch_is_one_transaction(world: AnyWorld) -> None:
    aws = aws_world(world)
    run_id = await new_run(aws, start=True)
    before = aws.stats.snapshot()
    await aws.events.create_batch(run_id, [step_created(f"s{i}") for i in range(10)])
    used = aws.stats - before
    assert used.requests["dynamodb.TransactWriteItems"] == 1


async def test_a_batch_may_complete_several_steps(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create_batch(run_id, [step_created("a"), step_created("b")])
    batch = await world.events.create_batch(run_id, [step_started("a"), step_started("b")])
    assert all(o.ok for o in batch.results)
    batch = await world.events.create_batch(run_id, [step_completed("a", 1), step_completed("b", 2)])
    assert all(o.ok for o in batch.results)
    assert [(await world.steps.get(run_id, s)).output for s in ("a", "b")] == [1, 2]


async def test_step_created_then_step_started_in_a_batch_makes_the_step_born_running(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    batch = await world.events.create_batch(run_id, [step_created("s1", input={"x": 1}), step_started("s1"),
                                                     wait_created("w1")])
    assert [o.ok for o in batch.results] == [True, True, True]
    created, started, waited = (o.result for o in batch.results)
    assert created is not None and started is not None and waited is not None
    assert created.event is not None and created.event.event_type == "step_created" and created.event.slot == 3
    assert started.event is not None and started.event.event_type == "step_started" and started.event.slot == 4
    assert started.event.event_data is not None and started.event.event_data["attempt"] == 1
    assert started.step is not None and (started.step.status, started.step.attempt) == ("running", 1)
    assert waited.event is not None and waited.event.slot == 5
    step = await world.steps.get(run_id, "s1")
    assert (step.status, step.attempt, step.input) == ("running", 1, {"x": 1})
    assert types(await all_events(world, run_id))[2:] == ["step_created", "step_started", "wait_created"]


async def test_the_born_running_pair_refuses_input_on_step_started(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await stored(world)
    with pytest.raises(InvalidInputError):
        await world.events.create_batch(run_id, [
            {"eventType": "step_created", "correlationId": "s1", "eventData": {"stepName": "add"}},
            {"eventType": "step_started", "correlationId": "s1", "eventData": {"input": [1]}},
        ])
    assert await stored(world) == before


async def test_a_duplicate_step_created_in_a_batch_gets_its_own_409_and_the_rest_land(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("dup"))  # slot 3
    batch = await world.events.create_batch(run_id, [step_created("a"), step_created("dup"), step_created("b")])
    ok_a, dup, ok_b = batch.results
    assert ok_a.ok and ok_b.ok
    assert not dup.ok and dup.status == 409 and dup.result is None and dup.error
    assert [ok_a.result.event.slot, ok_b.result.event.slot] == [4, 5]  # type: ignore[union-attr]
    events = await all_events(world, run_id)
    assert_dense(events)
    assert [e.correlation_id for e in events[2:]] == ["dup", "a", "b"]


async def test_a_refused_transition_in_a_batch_gets_its_own_outcome(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("done"))
    await world.events.create(run_id, step_started("done"))
    await world.events.create(run_id, step_completed("done"))
    batch = await world.events.create_batch(run_id, [step_completed("done"), step_started("ghost"),
                                                     wait_created("w1")])
    done, ghost, waited = batch.results
    assert (done.status, ghost.status) == (409, 404)
    assert waited.ok and waited.result.event.slot == 6  # type: ignore[union-attr]
    with pytest.raises(StepNotFoundError):
        await world.steps.get(run_id, "ghost")


FORBIDDEN: dict[str, Any] = {
    "run_created": run_created(),
    "run_started": run_started(),
    "run_cancelled": run_cancelled(),
    "run_completed": run_completed(),
    "run_failed": run_failed(),
    "hook_created": hook_created("h-batch", "tok-batch"),
    "hook_disposed": hook_disposed("h-held"),
    "attr_set": attr_set(k="v"),
}


@pytest.mark.parametrize("event_type", FORBIDDEN)
async def test_a_batch_with_a_run_level_or_token_event_is_rejected_whole(world: AnyWorld, event_type: str) -> None:
    run_id = await new_run(world, start=True)
    event = dict(FORBIDDEN[event_type])
    if event_type == "hook_disposed":  # of a live hook of this run
        event["correlationId"] = unique("h-held")
        await world.events.create(run_id, hook_created(event["correlationId"], unique("tok-held")))
    before = await stored(world)
    with pytest.raises(InvalidInputError) as raised:
        await world.events.create_batch(run_id, [step_created("a"), event])
    assert raised.value.status == 400
    assert await stored(world) == before


@pytest.mark.parametrize("pair", [
    [step_created("s1"), step_completed("s1")],
    [step_created("s1"), step_created("s1")],
    [step_started("s0"), step_completed("s0")],
    [step_created("s1"), step_started("s1"), step_completed("s1")],
    [wait_created("w1"), wait_completed("w1")],
    [step_started("s0"), step_created("x"), step_started("s0")],
], ids=["created+completed", "created+created", "started+completed", "born-running+completed",
        "wait-created+completed", "started-twice-apart"])
async def test_a_batch_with_two_events_for_one_entity_is_rejected_whole(world: AnyWorld, pair: list) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s0"))
    before = await stored(world)
    with pytest.raises(InvalidInputError):
        await world.events.create_batch(run_id, pair)
    assert await stored(world) == before


async def test_a_batch_of_40_events_is_accepted(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    batch = await world.events.create_batch(run_id, [step_created(f"s{i}") for i in range(40)])
    assert all(o.ok for o in batch.results)
    assert [o.result.event.slot for o in batch.results] == list(range(3, 43))  # type: ignore[union-attr]


async def test_a_batch_over_40_events_is_rejected_whole(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await stored(world)
    with pytest.raises(InvalidInputError):
        await world.events.create_batch(run_id, [step_created(f"s{i}") for i in range(41)])
    assert await stored(world) == before


async def test_an_empty_batch_is_rejected(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    with pytest.raises(InvalidInputError):
        await world.events.create_batch(run_id, [])


async def test_a_batch_with_one_invalid_event_is_rejected_whole(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    before = await stored(world)
    with pytest.raises(InvalidInputError):
        await world.events.create_batch(run_id, [step_created("a"), {"eventType": "step_created",
                                                                     "correlationId": "b", "eventData": {}}])
    assert await stored(world) == before


async def test_a_batch_on_a_terminal_run_is_gone_and_writes_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, run_completed())
    before = await stored(world)
    with pytest.raises(RunGoneError):
        await world.events.create_batch(run_id, [step_created("a"), wait_created("w")])
    assert await stored(world) == before


async def test_a_batch_on_a_missing_run_is_not_found(world: AnyWorld) -> None:
    with pytest.raises(RunNotFoundError):
        await world.events.create_batch(new_run_id(), [step_created("a")])


async def test_concurrent_batches_and_single_writes_keep_each_batch_contiguous(world: AnyWorld,
                                                                                peers: list[AnyWorld]) -> None:
    run_id = await new_run(world, start=True)
    batches = [w.events.create_batch(run_id, [step_created(f"b{i}-{j}") for j in range(8)])
               for i, w in enumerate(peers[:4])]
    singles = [w.events.create(run_id, wait_created(f"w{i}")) for i, w in enumerate(peers[4:])]
    outcomes = await asyncio.gather(*batches, *singles)
    for i, batch in enumerate(outcomes[:4]):
        slots = [o.result.event.slot for o in batch.results]  # type: ignore[union-attr]
        assert slots == list(range(slots[0], slots[0] + 8)), f"batch {i} is contiguous"
    events = await all_events(world, run_id)
    assert len(events) == 2 + 4 * 8 + 4
    assert_dense(events)


async def _in_band(world: AnyWorld, run_id: str) -> int:
    return (await world.events.list(run_id)).snapshot.seq_in_band  # type: ignore[union-attr]


async def test_an_atomic_batch_with_a_refused_event_writes_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("done"))
    await world.events.create(run_id, step_completed("done"))
    before = await all_events(world, run_id)
    with pytest.raises(StepNotFoundError):
        await world.events.create_batch(run_id, [step_created("new"), step_completed("missing")], atomic=True)
    from awsworld.world import EntityConflictError

    with pytest.raises(EntityConflictError):
        await world.events.create_batch(run_id, [step_completed("done", 4), step_created("new2")], atomic=True)
    assert await all_events(world, run_id) == before


async def test_a_stamped_batch_records_the_writers_time(world: AnyWorld) -> None:
    from datetime import UTC, datetime, timedelta

    run_id = await new_run(world, start=True)
    at = datetime.now(UTC) - timedelta(milliseconds=250)
    batch = await world.events.create_batch(run_id, [step_created("a"), step_started("a")], in_band=True,
                                            expected_seq_in_band=await _in_band(world, run_id), stamp=at)
    events = await all_events(world, run_id)
    assert [e.created_at for e in events[-2:]] == [at, at]
    assert batch.results[0].result.step.created_at == at  # type: ignore[union-attr]
    with pytest.raises(InvalidInputError):  # only a fenced writer may stamp its events
        await world.events.create_batch(run_id, [step_created("b")], stamp=at)
    with pytest.raises(InvalidInputError):  # never ahead of the clock
        await world.events.create_batch(run_id, [step_created("b")], in_band=True,
                                        expected_seq_in_band=await _in_band(world, run_id),
                                        stamp=datetime.now(UTC) + timedelta(minutes=5))
    assert len(await all_events(world, run_id)) == len(events)


async def test_a_batch_expecting_a_position_lands_there_or_not_at_all(world: AnyWorld) -> None:
    from awsworld.world import LogMovedError

    run_id = await new_run(world, start=True)
    count = len(await all_events(world, run_id))
    batch = await world.events.create_batch(run_id, [step_created("a")], expect_seq=count)
    assert batch.results[0].result.event.slot == count + 1  # type: ignore[union-attr]
    with pytest.raises(LogMovedError) as moved:
        await world.events.create_batch(run_id, [step_created("b")], expect_seq=count)
    assert moved.value.seq == count + 1
    assert len(await all_events(world, run_id)) == count + 1
