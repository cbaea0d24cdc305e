"""Idempotency keys under contention, from separate AWSWorld instances (separate processes, to the store).

These run on both emulators and in memory (``any_world``): the dedup marker's conditional put must hold on
DynamoDB Local, which honours conditions under real concurrency, as on moto; in memory the contenders are
concurrent tasks of one process.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from awsworld.world import Delivery

from .conftest import consumer_for, processes

QUEUE = "__wkf_workflow_race"


async def received(world: Any, expected: int, timeout: float = 10) -> list[Delivery]:
    consumer = consumer_for(world, "__wkf_workflow_")
    found: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while len(found) < expected and time.monotonic() < deadline:
        found += [o for o in await consumer.poll(10, 1) if isinstance(o, Delivery)]
    assert await consumer.poll(10, 0) == [], "nothing beyond the expected messages"
    return found


async def test_one_key_from_many_processes_sends_once(any_world: Any) -> None:
    world = any_world
    async with processes(world, 4) as others:
        ids = await asyncio.gather(*(w.queue(QUEUE, n, idempotency_key="only-once")
                                     for n, w in enumerate(others * 3)))
    assert len(set(ids)) == 1
    [delivery] = await received(world, 1)
    assert delivery.message_id == ids[0]


async def test_overlapping_batches_send_each_key_once(any_world: Any) -> None:
    world = any_world
    async with processes(world, 3) as others:
        batches = [[{"payload": {"key": k, "from": n}, "idempotencyKey": f"k{k}"} for k in range(n * 10, n * 10 + 40)]
                   for n in range(3)]  # keys 0-39, 10-49, 20-59: every key but the ends is in two or three
        results = await asyncio.gather(*(w.queue_batch(QUEUE, b) for w, b in zip(others, batches, strict=True)))
    by_key: dict[str, set[str]] = {}
    for batch, batch_results in zip(batches, results, strict=True):
        assert len(batch_results) == len(batch)
        for message, result in zip(batch, batch_results, strict=True):
            assert result.ok and result.message_id
            by_key.setdefault(message["idempotencyKey"], set()).add(result.message_id)
    assert len(by_key) == 60
    assert all(len(ids) == 1 for ids in by_key.values()), "every caller got the one id its key was sent under"
    deliveries = await received(world, 60)
    assert sorted(d.payload["key"] for d in deliveries) == list(range(60))
    assert {d.message_id for d in deliveries} == {next(iter(ids)) for ids in by_key.values()}
