"""Retention (issue 13, item 4): every DynamoDB item of a run carries its TTL from the moment it is written
(``written + R + H``), and the run's end sets the head's TTL to ``end + R`` (later when a token of the run
stays reserved). moto and DynamoDB Local store ``expiresAt`` but expire nothing on this clock, so these tests
read the values back; that the items vanish is DynamoDB's promise, not ours.

The in-memory World keeps every run for the life of the process (nothing observable expires there): its test
checks that the retention a run was created with comes back in its execution context, as on AWS.
"""

from __future__ import annotations

import time
from typing import Any

from awsworld.aws.resources import TTL_ATTRIBUTE
from awsworld.aws.retention import RETENTION_ATTRIBUTE, RETENTION_CONTEXT_KEY
from awsworld.runtime.registry import RETENTION_CONTEXT_KEY as RUNTIME_RETENTION_KEY

from .helpers import (
    AnyWorld,
    attr_set,
    aws_world,
    future,
    hook_created,
    module_world,
    run_completed,
    run_created,
    run_started,
    step_completed,
    step_created,
    step_started,
    table_items,
    unique,
    wait_created,
)

module_local_aws, world = module_world()  # every test reads only its own run's items

DAY = 24 * 3600
SLACK = 120  # seconds between the writes and the checks


def _ttl(item: dict[str, Any]) -> int | None:
    value = item.get(TTL_ATTRIBUTE)
    return None if value is None else int(value["N"])


async def _run_items(world: AnyWorld, run_id: str, tokens: list[str], hook_ids: list[str]) -> dict[str, Any]:
    """Every item of the run: its partition, its tokens and its hook pointers, by (pk, sk)."""
    keys = {f"RUN#{run_id}", *(f"TOKEN#{t}" for t in tokens), *(f"HOOKID#{h}" for h in hook_ids)}
    return {(i["pk"]["S"], i["sk"]["S"]): i for i in await table_items(aws_world(world)) if i["pk"]["S"] in keys}


async def test_every_item_carries_its_ttl_from_the_first_write_and_the_end_sets_the_heads(
        world: AnyWorld) -> None:
    world = aws_world(world)
    retention, horizon = 2 * DAY, world.config.max_run_seconds
    created = await world.events.create(None, run_created(
        input={"x": 1}, attributes={"team": "a"}, executionContext={"seed": "s", RETENTION_CONTEXT_KEY: retention}))
    assert created.run is not None
    run_id = created.run.run_id
    kept, freed = unique("tok-kept"), unique("tok-freed")
    hook_kept, hook_freed, step_id, wait_id = unique("hk"), unique("hf"), unique("st"), unique("wt")
    await world.events.create(run_id, run_started())
    await world.events.create(run_id, step_created(step_id))
    await world.events.create(run_id, step_started(step_id))
    await world.events.create(run_id, step_completed(step_id, {"y": 2}))
    await world.events.create(run_id, attr_set(stage="two", extra="new"))
    retained_until = future(7 * DAY)
    await world.events.create(run_id, hook_created(hook_kept, kept, retention_until=retained_until))
    await world.events.create(run_id, hook_created(hook_freed, freed))
    await world.events.create(run_id, {"eventType": "hook_received", "correlationId": hook_freed,
                                       "eventData": {"payload": {"ok": True}, "resumeId": "delivery-1"}})
    await world.events.create(run_id, wait_created(wait_id))
    await world.streams.write(run_id, "log", "a line")
    await world.streams.close(run_id, "log")

    now = int(time.time())
    running = await _run_items(world, run_id, [kept, freed], [hook_kept, hook_freed])
    kinds = {sk.split("#")[0] if pk.startswith("RUN#") else pk.split("#")[0] for pk, sk in running}
    assert kinds >= {"RUN", "EVT", "ATTRS", "STEP", "HOOK", "WAIT", "RESUME", "STREAM", "SEG", "TOKEN", "HOOKID"}
    for key, item in running.items():  # nothing of a running run expires before it could end and be kept R
        ttl = _ttl(item)
        assert ttl is not None, key
        assert now + retention + horizon - SLACK <= ttl <= now + retention + horizon + SLACK, key
    assert int(running[(f"RUN#{run_id}", "RUN")][RETENTION_ATTRIBUTE]["N"]) == retention

    await world.events.create(run_id, run_completed({"done": True}))
    end = int(time.time())
    ended = await _run_items(world, run_id, [kept, freed], [hook_kept, hook_freed])
    head = ended.pop((f"RUN#{run_id}", "RUN"))
    # The head outlives the token it keeps reserved (the contract: the owner stays available meanwhile).
    assert _ttl(head) == int(retained_until.timestamp()) + 1
    assert _ttl(ended.pop((f"TOKEN#{kept}", "TOKEN"))) == int(retained_until.timestamp()) + 1
    assert (f"TOKEN#{freed}", "TOKEN") not in ended and (f"HOOKID#{hook_freed}", "HOOKID") not in ended
    for key, item in ended.items():  # untouched by the end: each item keeps the TTL it was written with
        if key in running:
            assert _ttl(item) == _ttl(running[key]), key
        else:  # the terminal event's block, written by the end like any other item
            assert abs((_ttl(item) or 0) - (end + retention + horizon)) <= SLACK, key
        assert (_ttl(item) or 0) >= end + retention, key


async def test_the_end_of_a_run_without_reserved_tokens_keeps_it_for_its_retention(world: AnyWorld
                                                                                 ) -> None:
    world = aws_world(world)
    created = await world.events.create(None, run_created(executionContext={RETENTION_CONTEXT_KEY: 3600}))
    assert created.run is not None
    await world.events.create(created.run.run_id, run_started())
    await world.events.create(created.run.run_id, run_completed(1))
    [head] = [i for i in await table_items(world) if i["pk"]["S"] == f"RUN#{created.run.run_id}" and
              i["sk"]["S"] == "RUN"]
    assert abs((_ttl(head) or 0) - (int(time.time()) + 3600)) <= SLACK


async def test_a_run_without_a_retention_takes_the_deployments(world: AnyWorld) -> None:
    world = aws_world(world)
    created = await world.events.create(None, run_created())
    assert created.run is not None
    [head] = [i for i in await table_items(world) if i["pk"]["S"] == f"RUN#{created.run.run_id}" and
              i["sk"]["S"] == "RUN"]
    assert int(head[RETENTION_ATTRIBUTE]["N"]) == world.config.retention_seconds
    expected = int(time.time()) + world.config.retention_seconds + world.config.max_run_seconds
    assert abs((_ttl(head) or 0) - expected) <= SLACK


async def test_the_retention_a_run_was_created_with_is_in_its_execution_context(world: AnyWorld) -> None:
    assert RETENTION_CONTEXT_KEY == RUNTIME_RETENTION_KEY  # the runtime writes what the World reads
    created = await world.events.create(None, run_created(
        executionContext={"seed": "s", RETENTION_CONTEXT_KEY: 30 * DAY}))
    assert created.run is not None
    run = await world.runs.get(created.run.run_id)
    assert run.execution_context == {"seed": "s", RETENTION_CONTEXT_KEY: 30 * DAY}
