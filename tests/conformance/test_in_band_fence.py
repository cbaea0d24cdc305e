"""The in-band writer fence: two counters per run, fenced in-band writes that allocate nothing when refused,
out-of-band writes that are never refused, and exactly one winner among racing in-band writers."""

from __future__ import annotations

import asyncio

import pytest

from awsworld.world import (
    IN_BAND_SEQ_AT_RUN_CREATION,
    EntityConflictError,
    InBandSupersededError,
    MissingInBandCountError,
    StepNotFoundError,
    new_run_id,
)

from .helpers import (
    AnyWorld,
    all_events,
    assert_dense,
    attr_set,
    module_peers,
    module_world,
    new_run,
    run_completed,
    run_created,
    run_started,
    step_created,
    stored,
    wait_completed,
    wait_created,
)

module_local_aws, world = module_world()
peers = module_peers(8)

MAX_SAFE_INTEGER = 2**53 - 1


async def snapshot(world: AnyWorld, run_id: str) -> tuple[int, int]:
    page = await world.events.list(run_id)
    assert page.snapshot is not None
    return page.snapshot.seq, page.snapshot.seq_in_band


def test_the_world_declares_the_in_band_fence(world: AnyWorld) -> None:
    assert world.capabilities.in_band_fence is True


async def test_a_new_run_holds_run_created_as_its_one_in_band_position(world: AnyWorld) -> None:
    run_id = await new_run(world)
    assert IN_BAND_SEQ_AT_RUN_CREATION == 1
    assert await snapshot(world, run_id) == (1, 1)


async def test_run_created_in_band_needs_no_count(world: AnyWorld) -> None:
    result = await world.events.create(None, run_created(), in_band=True)
    assert result.run is not None and result.seq_in_band == 1
    assert await snapshot(world, result.run.run_id) == (1, 1)


async def test_an_in_band_write_at_the_current_count_is_accepted_and_advances_it(world: AnyWorld) -> None:
    run_id = await new_run(world)
    started = await world.events.create(run_id, run_started(), in_band=True, expected_seq_in_band=1)
    assert started.seq_in_band == 2
    waited = await world.events.create(run_id, wait_created("w1"), in_band=True, expected_seq_in_band=2)
    assert waited.seq_in_band == 3
    assert waited.event is not None and waited.event.slot == 3
    assert await snapshot(world, run_id) == (3, 3)
    run = await world.runs.get(run_id)
    assert (run.seq, run.seq_in_band) == (3, 3)


async def test_an_in_band_resilient_start_reports_the_count_it_stored(world: AnyWorld) -> None:
    """run_created (implied) and run_started are both in-band: the new run holds 2, and the writer is told 2."""
    run_id = new_run_id()
    result = await world.events.create(run_id, run_started(workflowName="wf", input=1), in_band=True,
                                       expected_seq_in_band=IN_BAND_SEQ_AT_RUN_CREATION)
    assert await snapshot(world, run_id) == (2, 2)
    assert result.seq_in_band == 2
    assert result.run is not None and result.run.seq_in_band == 2
    following = await world.events.create(run_id, wait_created("w1"), in_band=True,
                                          expected_seq_in_band=result.seq_in_band)
    assert following.event is not None and following.event.slot == 3


async def test_an_out_of_band_resilient_start_counts_only_run_created_in_band(world: AnyWorld) -> None:
    run_id = new_run_id()
    await world.events.create(run_id, run_started(workflowName="wf", input=1))
    assert await snapshot(world, run_id) == (2, 1)


async def test_an_in_band_write_without_a_count_is_a_400_and_writes_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world)
    before = await stored(world)
    with pytest.raises(MissingInBandCountError) as raised:
        await world.events.create(run_id, wait_created("w1"), in_band=True)
    assert raised.value.status == 400
    assert await stored(world) == before


async def test_a_stale_in_band_write_is_refused_with_the_counters_and_allocates_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world)
    await world.events.create(run_id, run_started(), in_band=True, expected_seq_in_band=1)
    await world.events.create(run_id, step_created("oob"))  # out-of-band: seq 3, seq_in_band 2
    before = await stored(world)
    with pytest.raises(InBandSupersededError) as raised:
        await world.events.create(run_id, wait_created("w1"), in_band=True, expected_seq_in_band=1)
    assert raised.value.status == 412
    assert (raised.value.seq, raised.value.seq_in_band) == (3, 2)
    assert await stored(world) == before
    # The current writer takes the very next slot: the refusal left no hole and no entity.
    accepted = await world.events.create(run_id, wait_created("w1"), in_band=True, expected_seq_in_band=2)
    assert accepted.event is not None and accepted.event.slot == 4
    assert_dense(await all_events(world, run_id))


async def test_a_count_no_run_holds_reads_the_counters_from_the_refusal(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1"))
    before = await stored(world)
    with pytest.raises(InBandSupersededError) as raised:
        await world.events.create(run_id, wait_created("w1"), in_band=True, expected_seq_in_band=MAX_SAFE_INTEGER)
    assert (raised.value.seq, raised.value.seq_in_band) == (3, 1)
    assert await stored(world) == before


async def test_a_stale_in_band_write_touches_no_entity_row(world: AnyWorld) -> None:
    run_id = await new_run(world)
    await world.events.create(run_id, run_started(), in_band=True, expected_seq_in_band=1)
    with pytest.raises(InBandSupersededError):
        await world.events.create(run_id, step_created("s1"), in_band=True, expected_seq_in_band=1)
    with pytest.raises(StepNotFoundError):
        await world.steps.get(run_id, "s1")
    with pytest.raises(InBandSupersededError):
        await world.events.create(run_id, run_completed("stale"), in_band=True, expected_seq_in_band=1)
    assert (await world.runs.get(run_id)).status == "running"


async def test_the_fence_is_decided_before_an_idempotent_no_op(world: AnyWorld) -> None:
    """A superseded orchestrator's run_started on a running run is refused, not answered as a no-op."""
    run_id = await new_run(world)
    await world.events.create(run_id, run_started(), in_band=True, expected_seq_in_band=1)
    await world.events.create(run_id, wait_created("w1"), in_band=True, expected_seq_in_band=2)
    with pytest.raises(InBandSupersededError):
        await world.events.create(run_id, run_started(), in_band=True, expected_seq_in_band=1)


async def test_the_fence_is_decided_before_an_entity_conflict(world: AnyWorld) -> None:
    """A stale in-band writer learns it was superseded (412), whatever the entity's state says."""
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, wait_created("w1"), in_band=True, expected_seq_in_band=1)
    await world.events.create(run_id, wait_completed("w1"), in_band=True, expected_seq_in_band=2)
    with pytest.raises(InBandSupersededError):
        await world.events.create(run_id, wait_completed("w1"), in_band=True, expected_seq_in_band=2)
    with pytest.raises(InBandSupersededError):
        await world.events.create(run_id, wait_created("w1"), in_band=True, expected_seq_in_band=2)


async def test_an_entity_conflict_at_the_current_count_allocates_nothing(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, wait_created("w1"), in_band=True, expected_seq_in_band=1)
    before = await stored(world)
    with pytest.raises(EntityConflictError):
        await world.events.create(run_id, wait_created("w1"), in_band=True, expected_seq_in_band=2)
    assert await stored(world) == before


async def test_out_of_band_writes_move_seq_and_never_seq_in_band(world: AnyWorld) -> None:
    run_id = await new_run(world)
    first = await world.events.create(run_id, attr_set(k="a"), in_band=False)
    second = await world.events.create(run_id, attr_set(k="b"))
    assert first.seq_in_band is None and second.seq_in_band is None
    assert await snapshot(world, run_id) == (3, 1)
    accepted = await world.events.create(run_id, run_started(), in_band=True, expected_seq_in_band=1)
    assert accepted.event is not None and accepted.event.slot == 4 and accepted.seq_in_band == 2


async def test_out_of_band_writes_are_never_refused_by_the_fence(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, wait_created("w1"), in_band=True, expected_seq_in_band=1)
    # Any expected count is ignored without in_band.
    result = await world.events.create(run_id, step_created("s1"), expected_seq_in_band=999)
    assert result.event is not None and result.event.slot == 4
    assert await snapshot(world, run_id) == (4, 2)


async def test_an_in_band_batch_is_one_fenced_allocation(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    batch = await world.events.create_batch(run_id, [step_created("a"), step_created("b"), wait_created("w")],
                                            in_band=True, expected_seq_in_band=1)
    assert all(o.ok for o in batch.results)
    assert batch.seq_in_band == 4
    assert await snapshot(world, run_id) == (5, 4)
    before = await stored(world)
    with pytest.raises(InBandSupersededError) as raised:
        await world.events.create_batch(run_id, [step_created("c"), step_created("d")], in_band=True,
                                        expected_seq_in_band=1)
    assert (raised.value.seq, raised.value.seq_in_band) == (5, 4)
    assert await stored(world) == before


async def test_an_in_band_batch_without_a_count_is_a_400(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    with pytest.raises(MissingInBandCountError):
        await world.events.create_batch(run_id, [step_created("a")], in_band=True)


# ---------------------------------------------------------------- races


async def _race(writers: list[AnyWorld], run_id: str, expected: int) -> list[object]:
    return list(await asyncio.gather(
        *(w.events.create(run_id, wait_created(f"w{i}"), in_band=True, expected_seq_in_band=expected)
          for i, w in enumerate(writers)),
        return_exceptions=True))


def _one_winner(outcomes: list[object]) -> None:
    winners = [o for o in outcomes if not isinstance(o, BaseException)]
    refused = [o for o in outcomes if isinstance(o, InBandSupersededError)]
    assert len(winners) == 1, outcomes
    assert len(refused) == len(outcomes) - 1, outcomes
    assert all((r.seq, r.seq_in_band) == (3, 3) for r in refused)


async def test_of_8_concurrent_in_band_writers_with_one_count_exactly_one_wins(world: AnyWorld) -> None:
    run_id = await new_run(world)
    await world.events.create(run_id, run_started(), in_band=True, expected_seq_in_band=1)
    _one_winner(await _race([world] * 8, run_id, 2))
    events = await all_events(world, run_id)
    assert len(events) == 3
    assert_dense(events)
    assert await snapshot(world, run_id) == (3, 3)
    assert len((await world.events.list_by_correlation_id(run_id, events[-1].correlation_id or "")).data) == 1


async def test_in_band_writers_in_separate_worlds_race_to_exactly_one_winner(world: AnyWorld,
                                                                            peers: list[AnyWorld]) -> None:
    run_id = await new_run(world)
    await world.events.create(run_id, run_started(), in_band=True, expected_seq_in_band=1)
    _one_winner(await _race(peers, run_id, 2))
    events = await all_events(world, run_id)
    assert len(events) == 3
    assert_dense(events)
    assert await snapshot(world, run_id) == (3, 3)


async def test_out_of_band_writers_racing_in_band_writers_all_land(world: AnyWorld, peers: list[AnyWorld]) -> None:
    run_id = await new_run(world)
    await world.events.create(run_id, run_started(), in_band=True, expected_seq_in_band=1)
    in_band = [w.events.create(run_id, wait_created(f"w{i}"), in_band=True, expected_seq_in_band=2)
               for i, w in enumerate(peers[:4])]
    out_of_band = [w.events.create(run_id, step_created(f"s{i}")) for i, w in enumerate(peers[4:])]
    outcomes = await asyncio.gather(*in_band, *out_of_band, return_exceptions=True)
    fenced, free = outcomes[:4], outcomes[4:]
    assert all(not isinstance(o, BaseException) for o in free), free
    assert sum(not isinstance(o, BaseException) for o in fenced) == 1, fenced
    assert all(isinstance(o, InBandSupersededError) for o in fenced if isinstance(o, BaseException))
    events = await all_events(world, run_id)
    assert len(events) == 2 + 1 + 4
    assert_dense(events)
    assert await snapshot(world, run_id) == (7, 3)
