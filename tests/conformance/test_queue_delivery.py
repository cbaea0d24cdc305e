"""The consuming side: record shapes, attempts, acknowledgement, redelivery, the DLQ and malformed bodies.

Attempts, acknowledgement and redelivery are the contract's and run on moto, LocalStack and in memory
(``queue_world``); record shapes, the redrive policy and foreign bodies are SQS's and run on the AWS World alone,
on both SQS/S3 engines (``sqs_s3_world``).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest

from awsworld.aws import AWSWorld
from awsworld.aws.queue.deliveries import Deferred, Malformed, read_record
from awsworld.aws.queue.sqs_queue import SqsQueue
from awsworld.world import Delivery, InvalidInputError

from .conftest import consumer_for, is_memory

QUEUE = "__wkf_workflow_flow"
PREFIX = "__wkf_workflow_"
SECRET = "s3cr3t-payload-content"


async def next_delivery(consumer: Any, timeout: float = 5.0, **receive: Any) -> Delivery:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for record in await consumer.receive(10, 1, **receive):
            outcome = await consumer.open(record)
            if isinstance(outcome, Delivery):
                return outcome
    raise AssertionError("no delivery arrived")


async def raw_records(world: AWSWorld, url: str, wait: int = 1) -> list[dict[str, Any]]:
    sqs = await world.clients.sqs()
    response = await sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=wait,
                                         MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"])
    return list(response.get("Messages", []))


@pytest.fixture
async def retry_queue(sqs_s3_world: AWSWorld) -> AsyncIterator[SqsQueue]:
    """A queue with a 1 s visibility timeout and a DLQ after 2 receives, beside the provisioned one."""
    sqs = await sqs_s3_world.clients.sqs()
    suffix = sqs_s3_world.config.table_name[-12:]
    dlq_url = (await sqs.create_queue(QueueName=f"retry-dlq-{suffix}"))["QueueUrl"]
    dlq_arn = (await sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"]))["Attributes"]["QueueArn"]
    url = (await sqs.create_queue(QueueName=f"retry-{suffix}", Attributes={
        "VisibilityTimeout": "1",
        "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}),
    }))["QueueUrl"]
    yield SqsQueue(sqs_s3_world.clients, queue_url=url, dlq_url=dlq_url, max_hop_seconds=1)
    for queue_url in (url, dlq_url):
        await sqs.delete_queue(QueueUrl=queue_url)


# -- record shapes and attempts ---------------------------------------------------------------------------------------


async def test_lambda_and_receive_shapes_give_the_same_delivery(sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    message_id = await world.queue(QUEUE, {"runId": "wrun_x"})
    consumer = world.sqs_queue.consumer(PREFIX)
    [record] = await consumer.receive(10, 1)
    lambda_record = {
        "messageId": record["MessageId"], "receiptHandle": record["ReceiptHandle"], "body": record["Body"],
        "attributes": {"ApproximateReceiveCount": "3", "SentTimestamp": "1"}, "messageAttributes": {},
        "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
    }
    from_receive, from_lambda = await consumer.open(record), await consumer.open(lambda_record)
    assert isinstance(from_receive, Delivery) and isinstance(from_lambda, Delivery)
    assert from_receive.message_id == from_lambda.message_id == message_id
    assert from_receive.attempt == 1 and from_lambda.attempt == 3, "attempt comes from ApproximateReceiveCount"
    assert from_lambda.payload == {"runId": "wrun_x"}
    await consumer.ack(from_lambda)  # the Lambda shape's receipt handle acknowledges just as well
    assert await consumer.receive(10, 0, visibility_timeout=0) == []


def test_read_record_tolerates_missing_attributes() -> None:
    record = read_record({"body": "{}", "messageId": "m", "receiptHandle": "r"})
    assert (record.receive_count, record.transport_message_id, record.receipt_handle) == (1, "m", "r")
    record = read_record({"Body": "{}", "MessageId": "m", "ReceiptHandle": "r",
                          "Attributes": {"ApproximateReceiveCount": "x"}})
    assert record.receive_count == 1


async def test_visibility_redelivery_counts_attempts_and_keeps_the_id(queue_world: Any) -> None:
    world = queue_world
    message_id = await world.queue(QUEUE, "work")
    consumer = consumer_for(world, PREFIX)
    first = await next_delivery(consumer, visibility_timeout=1)
    second = await next_delivery(consumer, visibility_timeout=1)  # not acknowledged: SQS hands it out again
    assert (first.message_id, second.message_id) == (message_id, message_id)
    assert (first.attempt, second.attempt) == (1, 2)
    assert second.created_at == first.created_at


async def test_ack_deletes_the_message(queue_world: Any) -> None:
    world = queue_world
    await world.queue(QUEUE, "once")
    consumer = consumer_for(world, PREFIX)
    delivery = await next_delivery(consumer, visibility_timeout=1)
    if not is_memory(world):
        world.stats.reset()
    await consumer.ack(delivery)
    if not is_memory(world):
        assert world.stats.requests == {"sqs.DeleteMessage": 1}, "no key, no DynamoDB request"
    await asyncio.sleep(1.2)
    assert await consumer.receive(10, 0) == []


async def test_ack_without_delete_only_frees_the_key(queue_world: Any) -> None:
    world = queue_world
    first = await world.queue(QUEUE, 1, idempotency_key="lambda")
    consumer = consumer_for(world, PREFIX)
    [record] = await consumer.receive(10, 1)
    delivery = await consumer.open(record)
    if not is_memory(world):
        world.stats.reset()
    await consumer.ack(delivery, delete_message=False)  # the Lambda event source mapping deletes it
    if not is_memory(world):
        assert world.stats.requests == {"dynamodb.DeleteItem": 1}
    assert await world.queue(QUEUE, 2, idempotency_key="lambda") != first
    await consumer.delete(record)  # what the poller does then: the first message is gone, the second stays
    [second] = [o for o in await consumer.poll(10, 1)]
    assert isinstance(second, Delivery) and second.payload == 2
    assert await consumer.receive(10, 0) == []


# -- redelivery ------------------------------------------------------------------------------------------------------


async def test_redeliver_after_keeps_the_message_id_and_counts_the_attempt(queue_world: Any) -> None:
    world = queue_world
    message_id = await world.queue(QUEUE, {"step": "s1"}, idempotency_key="s1")
    consumer = consumer_for(world, PREFIX)
    first = await next_delivery(consumer)
    asked = time.monotonic()
    await consumer.redeliver_after(first, 1)
    assert await consumer.receive(10, 0) == [], "not before N seconds"
    assert await world.queue(QUEUE, "dup", idempotency_key="s1") == message_id, "still queued: still deduped"

    second = await next_delivery(consumer)
    assert time.monotonic() - asked >= 0.9
    assert second.message_id == message_id
    assert second.attempt == 2 and second.delivery_count == 2
    assert second.created_at == first.created_at
    assert second.transport_message_id != first.transport_message_id, "it was re-sent, not made visible again"
    assert second.payload == {"step": "s1"}
    await consumer.ack(second)
    assert await world.queue(QUEUE, "new", idempotency_key="s1") != message_id


async def test_redeliver_after_a_long_time_hops(sqs_s3_world: AWSWorld) -> None:
    queue = SqsQueue(sqs_s3_world.clients, max_hop_seconds=1)
    consumer = queue.consumer(PREFIX)
    message_id = await queue.queue(QUEUE, "retry me")
    first = await next_delivery(consumer)
    asked = time.time()
    await consumer.redeliver_after(first, 2.5)
    hops = 0
    second: Delivery | None = None
    while second is None and time.time() - asked < 7:
        for outcome in await consumer.poll(10, 1):
            hops += isinstance(outcome, Deferred)
            if isinstance(outcome, Delivery):
                second = outcome
    assert second is not None and time.time() >= asked + 2.5
    assert hops >= 1
    assert (second.message_id, second.attempt) == (message_id, 2)


async def test_redeliver_after_validates(queue_world: Any) -> None:
    await queue_world.queue(QUEUE, 1)
    consumer = consumer_for(queue_world, PREFIX)
    delivery = await next_delivery(consumer)
    with pytest.raises(InvalidInputError):
        await consumer.redeliver_after(delivery, -1)


async def test_repeated_failure_ends_in_the_dlq(sqs_s3_world: AWSWorld, retry_queue: SqsQueue) -> None:
    consumer = retry_queue.consumer(PREFIX)
    message_id = await retry_queue.queue(QUEUE, {"poison": True})
    attempts = []
    for _ in range(2):  # the handler fails twice: no ack, the visibility timeout runs out
        attempts.append((await next_delivery(consumer)).attempt)
    assert attempts == [1, 2]
    await asyncio.sleep(1.1)
    assert await consumer.receive(10, 1) == [], "past maxReceiveCount it left the queue"

    dlq_reader = SqsQueue(sqs_s3_world.clients, queue_url=retry_queue.dlq_url).consumer(PREFIX)
    dead = await next_delivery(dlq_reader)
    assert dead.message_id == message_id and dead.payload == {"poison": True}


async def test_redelivery_does_not_walk_a_message_into_the_dlq(sqs_s3_world: AWSWorld, retry_queue: SqsQueue) -> None:
    consumer = retry_queue.consumer(PREFIX)
    message_id = await retry_queue.queue(QUEUE, "keeps retrying")
    for expected in (1, 2, 3):  # three attempts on a queue whose DLQ takes messages after two receives
        delivery = await next_delivery(consumer)
        assert (delivery.message_id, delivery.attempt) == (message_id, expected)
        if expected < 3:
            await consumer.redeliver_after(delivery, 0)
    await consumer.ack(delivery)
    assert await raw_records(sqs_s3_world, retry_queue.dlq_url or "", wait=0) == []


# -- malformed bodies ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("body", [
    f"not json {SECRET}",
    json.dumps({"hello": SECRET}),
    json.dumps({"awsworld": 1, "messageId": "m", "queueName": "bad", "createdAt": "2024-01-01T00:00:00Z"}),
    json.dumps({"awsworld": 1, "messageId": "m", "queueName": QUEUE, "createdAt": "yesterday"}),
    json.dumps({"awsworld": 1, "messageId": "m", "queueName": QUEUE, "createdAt": "2024-01-01T00:00:00Z",
                "attempt": -1, "payload": SECRET}),
    json.dumps({"awsworld": 1, "messageId": "m", "queueName": QUEUE, "createdAt": "2024-01-01T00:00:00Z",
                "payloadRef": {"key": "queue/missing.json"}, "secret": SECRET}),
])
async def test_malformed_bodies_go_to_the_dlq_with_a_clear_log_line(
    sqs_s3_world: AWSWorld, body: str, caplog: pytest.LogCaptureFixture
) -> None:
    world = sqs_s3_world
    sqs = await world.clients.sqs()
    await sqs.send_message(QueueUrl=world.config.queue_url, MessageBody=body)
    consumer = world.sqs_queue.consumer(PREFIX)
    with caplog.at_level(logging.ERROR, logger="awsworld.queue"):
        [outcome] = await consumer.poll(10, 1)
    assert isinstance(outcome, Malformed) and outcome.dead_lettered
    [line] = [r for r in caplog.records if r.name == "awsworld.queue"]
    assert "undeliverable" in line.getMessage() and outcome.reason in line.getMessage()
    assert SECRET not in line.getMessage(), "no payloads in logs"

    assert await consumer.receive(10, 0, visibility_timeout=0) == [], "deleted from the queue: no crash loop"
    [dead] = await raw_records(world, world.config.dlq_url or "")
    assert dead["Body"] == body
    assert dead["MessageAttributes"]["awsworldError"]["StringValue"] == outcome.reason


async def test_malformed_without_a_dlq_is_left_to_the_redrive_policy(sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    queue = SqsQueue(world.clients)
    queue.dlq_url = None
    sqs = await world.clients.sqs()
    await sqs.send_message(QueueUrl=world.config.queue_url, MessageBody="garbage")
    [outcome] = await queue.consumer(PREFIX).poll(10, 1)
    assert isinstance(outcome, Malformed) and not outcome.dead_lettered
