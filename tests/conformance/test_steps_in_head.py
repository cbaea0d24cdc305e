"""A step born running in a fenced writer's batch lives in the run head until it ends: its item is written
once, by the commit that records its end. Everything a caller sees is the same as for any other step."""

from __future__ import annotations

from typing import Any

import pytest

from awsworld.world import EntityConflictError, StepRunningElsewhereError

from .helpers import (
    AnyWorld,
    all_events,
    another_process,
    assert_dense,
    module_world,
    new_run,
    on_aws,
    step_completed,
    step_created,
    table_items,
)

module_local_aws, world = module_world()


def _started(step_id: str, owner: str = "m1") -> dict[str, Any]:
    return {"eventType": "step_started", "correlationId": step_id, "eventData": {"ownerMessageId": owner}}


async def _position(world: AnyWorld, run_id: str) -> tuple[int, int]:
    snapshot = (await world.events.list(run_id)).snapshot
    assert snapshot is not None
    return snapshot.seq, snapshot.seq_in_band


async def _fenced(world: AnyWorld, run_id: str, events: list[dict[str, Any]]) -> Any:
    seq, in_band = await _position(world, run_id)
    return await world.events.create_batch(run_id, events, in_band=True, expected_seq_in_band=in_band,
                                           expect_seq=seq, atomic=True)


def _step_items(items: list[dict[str, Any]], run_id: str) -> set[str]:
    return {i["sk"]["S"] for i in items if i["pk"]["S"] == f"RUN#{run_id}" and i["sk"]["S"].startswith("STEP#")}


async def test_a_held_step_reads_like_any_step_and_is_written_once_when_it_ends(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    born = await _fenced(world, run_id, [step_created("a", input=[1, 2]), _started("a")])
    assert born.results[1].result.step.status == "running"  # type: ignore[union-attr]
    aws = on_aws(world)  # where the AWS World holds it, and what it writes: its layout
    if aws is not None:
        assert "STEP#a" not in _step_items(await table_items(aws), run_id)  # held in the head
    step = await world.steps.get(run_id, "a")
    assert (step.status, step.attempt, step.input, step.step_name) == ("running", 1, [1, 2], "add")
    assert [s.step_id for s in (await world.steps.list(run_id)).data] == ["a"]

    before = aws.stats.snapshot() if aws is not None else None
    await _fenced(world, run_id, [step_completed("a", 3), step_created("b", input=[3]), _started("b")])
    if aws is not None and before is not None:
        used = aws.stats - before
        assert used.transaction_items == 3  # the head, one event block, a's item (b is held in the head)
        assert _step_items(await table_items(aws), run_id) == {"STEP#a"}
    a, b = await world.steps.get(run_id, "a"), await world.steps.get(run_id, "b")
    assert (a.status, a.output, a.input) == ("completed", 3, [1, 2])
    assert (b.status, b.input) == ("running", [3])
    listed = (await world.steps.list(run_id)).data
    assert [(s.step_id, s.status) for s in listed] == [("a", "completed"), ("b", "running")]
    page = await world.steps.list(run_id, limit=1)
    rest = await world.steps.list(run_id, cursor=page.cursor)
    assert [s.step_id for s in [*page.data, *rest.data]] == ["a", "b"]
    assert_dense(await all_events(world, run_id))


async def test_a_held_step_keeps_every_rule(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await _fenced(world, run_id, [step_created("h"), _started("h")])
    with pytest.raises(EntityConflictError):  # its id is taken though it has no item
        await world.events.create(run_id, step_created("h"))
    with pytest.raises(StepRunningElsewhereError):
        await world.events.create(run_id, _started("h", owner="m2"))
    # An end written by anyone else (out of band, a fresh World: no cached state) writes its item.
    other = another_process(world)
    try:
        done = await other.events.create(run_id, step_completed("h", {"ok": True}))
        assert done.step.status == "completed" and done.step.output == {"ok": True}  # type: ignore[union-attr]
        with pytest.raises(EntityConflictError):
            await other.events.create(run_id, step_completed("h", 5))
    finally:
        await other.close()
    with pytest.raises(EntityConflictError):  # the first World's cached copy is stale: the commit says so
        await world.events.create(run_id, step_completed("h", 6))
    assert (await world.steps.get(run_id, "h")).output == {"ok": True}
    if (aws := on_aws(world)) is not None:
        assert "STEP#h" in _step_items(await table_items(aws), run_id)
