"""Idempotency keys under contention, from separate AWSWorld instances (separate processes, to the store).

These run on both backends (``world``): the dedup marker's conditional put and the batch's transaction must
hold on DynamoDB Local, which honours conditions under real concurrency, as on moto.
"""

from __future__ import annotations

import asyncio
import time

from awsworld.aws import AWSWorld
from awsworld.world import Delivery

QUEUE = "__wkf_workflow_race"


async def received(world: AWSWorld, expected: int, timeout: float = 10) -> list[Delivery]:
    consumer = world.sqs_queue.consumer("__wkf_workflow_")
    found: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while len(found) < expected and time.monotonic() < deadline:
        found += [o for o in await consumer.poll(10, 1) if isinstance(o, Delivery)]
    assert await consumer.poll(10, 0) == [], "nothing beyond the expected messages"
    return found


async def test_one_key_from_many_processes_sends_once(world: AWSWorld) -> None:
    others = [AWSWorld(world.config) for _ in range(4)]
    try:
        ids = await asyncio.gather(*(w.queue(QUEUE, n, idempotency_key="only-once")
                                     for n, w in enumerate(others * 3)))
    finally:
        for other in others:
            await other.close()
    assert len(set(ids)) == 1
    [delivery] = await received(world, 1)
    assert delivery.message_id == ids[0]


async def test_overlapping_batches_send_each_key_once(world: AWSWorld) -> None:
    others = [AWSWorld(world.config) for _ in range(3)]
    try:
        batches = [[{"payload": {"key": k, "from": n}, "idempotencyKey": f"k{k}"} for k in range(n * 10, n * 10 + 40)]
                   for n in range(3)]  # keys 0-39, 10-49, 20-59: every key but the ends is in two or three
        results = await asyncio.gather(*(w.queue_batch(QUEUE, b) for w, b in zip(others, batches, strict=True)))
    finally:
        for other in others:
            await other.close()
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
