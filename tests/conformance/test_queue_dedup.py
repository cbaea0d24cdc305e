"""What idempotency-key dedup costs, and that it still holds: on both emulators and in memory (``any_world``).

A keyed send is three plain single-item writes (claim, confirm, and the consumer's release), never a
transaction; a batch claims its keys one conditional put each; a send without a key touches no DynamoDB. The
request counts are the World's own (``world.stats``), so they are exact on either emulator; the in-memory
World makes no requests, so there only the dedup rules are checked. A key another sender claimed and never
confirmed is a DynamoDB marker's state, checked on the emulators alone (``world``).
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from awsworld.aws import AWSWorld
from awsworld.aws.dynamodb.items import to_ddb
from awsworld.aws.keys import dedup_key
from awsworld.aws.queue.dedup import DedupInDoubtError
from awsworld.world import Delivery

from .conftest import consumer_for, is_memory

QUEUE = "__wkf_workflow_dedup"
PREFIX = "__wkf_workflow_"


def dynamodb(world: Any) -> dict[str, int]:
    return {k: v for k, v in world.stats.requests.items() if k.startswith("dynamodb.")}


async def consume(world: Any, expected: int, timeout: float = 10) -> list[Delivery]:
    """Receive and acknowledge ``expected`` deliveries; nothing more may be waiting."""
    consumer = consumer_for(world, PREFIX)
    found: list[Delivery] = []
    deadline = time.monotonic() + timeout
    while len(found) < expected and time.monotonic() < deadline:
        for outcome in await consumer.poll(10, 1):
            if isinstance(outcome, Delivery):
                await consumer.ack(outcome)
                found.append(outcome)
    assert await consumer.poll(10, 0) == [], "nothing beyond the expected messages"
    return found


async def plant_pending(world: AWSWorld, key: str, message_id: str, lease_seconds: float) -> None:
    """The marker of a sender that claimed ``key`` and has not confirmed a send (or died before sending)."""
    item: dict[str, Any] = {**dedup_key(QUEUE, key), "messageId": message_id, "sent": False,
                            "liveUntil": int(time.time() + lease_seconds)}
    ddb = await world.clients.dynamodb()
    await ddb.put_item(TableName=world.config.table_name, Item=to_ddb(item))


async def test_a_keyed_send_is_three_plain_writes(any_world: Any) -> None:
    world, aws = any_world, not is_memory(any_world)
    if aws:
        world.stats.reset()
    sent = await world.queue(QUEUE, {"n": 1}, idempotency_key="one")
    if aws:
        assert world.stats.requests == {"dynamodb.PutItem": 1, "sqs.SendMessage": 1, "dynamodb.UpdateItem": 1}, \
            "claim, send, confirm"
        assert world.stats.transaction_items == 0
        world.stats.reset()

    assert await world.queue(QUEUE, {"n": 2}, idempotency_key="one") == sent
    if aws:
        assert world.stats.requests == {"dynamodb.PutItem": 1}, "a duplicate: one refused put, nothing sent"
        world.stats.reset()

    [delivery] = await consume(world, 1)
    assert (delivery.message_id, delivery.payload) == (sent, {"n": 1})
    if aws:
        assert dynamodb(world) == {"dynamodb.DeleteItem": 1}, "the acknowledgement frees the key"
    assert await world.queue(QUEUE, {"n": 3}, idempotency_key="one") != sent
    await consume(world, 1)


async def test_a_keyed_batch_of_ten_claims_with_plain_puts(any_world: Any) -> None:
    world, aws = any_world, not is_memory(any_world)
    batch = [{"payload": {"n": n}, "idempotencyKey": f"step_{n}"} for n in range(10)]
    if aws:
        world.stats.reset()
    results = await world.queue_batch(QUEUE, batch)
    assert all(r.ok for r in results) and len({r.message_id for r in results}) == 10
    if aws:
        assert world.stats.requests == {"dynamodb.PutItem": 10, "sqs.SendMessageBatch": 1,
                                        "dynamodb.UpdateItem": 10}
        assert world.stats.transaction_items == 0, "no TransactWriteItems: each claim stands alone"
        world.stats.reset()

    again = await world.queue_batch(QUEUE, batch)  # the runtime's recovery republishes the whole batch
    assert [r.message_id for r in again] == [r.message_id for r in results]
    if aws:
        assert world.stats.requests == {"dynamodb.PutItem": 10}, "ten refused puts, nothing sent"
        world.stats.reset()

    deliveries = await consume(world, 10)
    assert sorted(d.payload["n"] for d in deliveries) == list(range(10))
    if aws:
        assert dynamodb(world) == {"dynamodb.DeleteItem": 10}


async def test_duplicates_within_and_across_batches_are_dropped(any_world: Any) -> None:
    world, aws = any_world, not is_memory(any_world)
    first = await world.queue_batch(QUEUE, [{"payload": "a1", "idempotencyKey": "a"},
                                            {"payload": "b1", "idempotencyKey": "b"},
                                            {"payload": "a2", "idempotencyKey": "a"},
                                            {"payload": "c1", "idempotencyKey": "c"}])
    assert all(r.ok for r in first)
    assert first[2].message_id == first[0].message_id, "a key repeated within a batch is sent once"
    if aws:
        world.stats.reset()
    second = await world.queue_batch(QUEUE, [{"payload": "b2", "idempotencyKey": "b"},
                                             {"payload": "d1", "idempotencyKey": "d"},
                                             {"payload": "c2", "idempotencyKey": "c"},
                                             {"payload": "d2", "idempotencyKey": "d"}])
    assert all(r.ok for r in second)
    assert (second[0].message_id, second[2].message_id) == (first[1].message_id, first[3].message_id), \
        "keys an earlier batch holds answer with its ids"
    assert second[3].message_id == second[1].message_id
    if aws:
        assert world.stats.requests == {"dynamodb.PutItem": 3, "sqs.SendMessageBatch": 1,
                                        "dynamodb.UpdateItem": 1}, \
            "one put per distinct key, one confirmation for the one message sent"
    deliveries = await consume(world, 4)
    assert sorted(d.payload for d in deliveries) == ["a1", "b1", "c1", "d1"]


async def test_an_in_doubt_key_is_retryable_per_entry_and_the_rest_go(world: AWSWorld) -> None:
    await plant_pending(world, "doubt", "msg_claimed_elsewhere", lease_seconds=60)
    results = await world.queue_batch(QUEUE, [{"payload": "x", "idempotencyKey": "doubt"},
                                              {"payload": "y", "idempotencyKey": "clear"},
                                              {"payload": "z"}])
    assert not results[0].ok and results[0].retryable and "not confirmed" in (results[0].error or "")
    assert results[1].ok and results[2].ok
    with pytest.raises(DedupInDoubtError) as doubt:
        await world.queue(QUEUE, "x", idempotency_key="doubt")
    assert doubt.value.status == 429 and doubt.value.retry_after is not None and doubt.value.retry_after > 30
    deliveries = await consume(world, 2)
    assert sorted(d.payload for d in deliveries) == ["y", "z"]


async def test_sends_without_a_key_touch_no_dynamodb(any_world: Any) -> None:
    world, aws = any_world, not is_memory(any_world)
    if aws:
        world.stats.reset()
    await world.queue(QUEUE, {"n": 0})
    results = await world.queue_batch(QUEUE, [{"payload": {"n": n}} for n in range(1, 11)])
    assert all(r.ok for r in results)
    deliveries = await consume(world, 11)
    assert sorted(d.payload["n"] for d in deliveries) == list(range(11))
    assert all(d.idempotency_key is None for d in deliveries)
    if aws:
        assert world.stats.total("dynamodb") == 0, "no marker: nothing to claim, confirm or release"
