"""The dead-letter queue as ``awsworld dlq`` reads and redrives it (``client/dead_letters.py`` over
``aws/queue/dead_letter_queue.py``), on both SQS engines (moto, LocalStack): messages put there by the consumer's own
path (``dead_letter``, what a delivery does with a poison record; ``poll`` of a body that is not ours) and by SQS's
redrive policy. A peek lists each once, says why, shows no payload and leaves them all in place; a redrive moves them
back to the flow queue, body as it was, without the DLQ's own attributes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from awsworld.aws import AWSWorld
from awsworld.aws.queue.dead_letter_queue import DEAD_LETTER_ATTRIBUTES
from awsworld.aws.queue.deliveries import Malformed
from awsworld.client.dead_letters import DeadLetters
from awsworld.world.ids import new_run_id
from awsworld.world.messages import FlowMessage, queue_name_for

QUEUE = queue_name_for("dlqtest.flow")
PREFIX = "__wkf_workflow_"
SECRET = "s3cr3t-payload-content"


async def dead_letter(world: AWSWorld, count: int) -> dict[str, str]:
    """``count`` flow and step messages for runs that do not exist, moved to the DLQ as a delivery moves them (the
    consumer's ``dead_letter``, after one receive), each with a secret in its payload; {message id: run id}."""
    sent: dict[str, str] = {}
    for i in range(count):
        run_id = new_run_id()
        message = (FlowMessage(run_id, "dlqtest.flow", "step_1", "dlqtest.step", {"token": SECRET}) if i % 2
                   else FlowMessage(run_id, "dlqtest.flow"))
        sent[await world.queue(QUEUE, message.to_payload())] = run_id
    consumer = world.sqs_queue.consumer(PREFIX)
    moved = 0
    while moved < count:
        for record in await consumer.receive(10, 1):
            assert await consumer.dead_letter(record, f"run {json.loads(record['Body'])['payload']['runId']} does "
                                                      "not exist")
            moved += 1
    return sent


async def flow_queue_records(world: AWSWorld, url: str, count: int) -> list[dict[str, Any]]:
    sqs = await world.clients.sqs()
    records: dict[str, dict[str, Any]] = {}
    for _ in range(20):
        response = await sqs.receive_message(QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                             MessageAttributeNames=["All"])
        records.update((m["MessageId"], m) for m in response.get("Messages", []))
        if len(records) >= count:
            break
    return list(records.values())


async def test_a_peek_lists_each_dead_letter_once_with_its_reason_and_leaves_them_all_in_place(
        sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    sent = await dead_letter(world, 12)  # more than one receive's ten
    sqs = await world.clients.sqs()
    await sqs.send_message(QueueUrl=world.config.queue_url, MessageBody=f"not json {SECRET}")
    [malformed] = await world.sqs_queue.consumer(PREFIX).poll(10, 1)
    assert isinstance(malformed, Malformed) and malformed.dead_lettered

    letters = await DeadLetters(world).list()
    again = await DeadLetters(world).list()  # the first took nothing out, and hid nothing past its end
    assert sorted(x.sqs_message_id for x in letters) == sorted(x.sqs_message_id for x in again)
    assert len({x.sqs_message_id for x in letters}) == 13
    shown = json.dumps([x.to_json() for x in letters])
    assert SECRET not in shown, "no payload in what an operator sees"

    ours = {x.message_id: x for x in letters if x.message_id is not None}
    assert ours.keys() == sent.keys()
    for message_id, run_id in sent.items():
        letter = ours[message_id]
        assert (letter.run_id, letter.receives, letter.reason) == (run_id, 1, f"run {run_id} does not exist")
        assert letter.kind == ("step" if letter.step_id else "flow") and letter.step_id in (None, "step_1")
        assert letter.workflow_name == "dlqtest.flow" and letter.first_sent is not None
    assert {x.kind for x in letters} == {"flow", "step", "other"}
    [other] = [x for x in letters if x.message_id is None]
    assert (other.kind, other.run_id, other.reason, other.receives) == ("other", None, "body is not JSON", 1)
    assert [x.first_sent for x in letters] == sorted(x.first_sent for x in letters if x.first_sent), "oldest first"

    cut = await DeadLetters(world).list(4)  # a list cut short, and what it left out, counted
    assert len(cut) == 4 and {x.sqs_message_id for x in cut} <= {x.sqs_message_id for x in letters}
    assert await DeadLetters(world).held() == 13, "a peek shows again all it hid, and counts them all"


async def test_a_redrive_moves_them_back_body_as_it_was_without_the_dlqs_attributes(sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    sent = await dead_letter(world, 12)
    letters = DeadLetters(world)
    bodies = {x.message_id: x for x in await letters.list()}
    assert bodies.keys() == sent.keys()

    first = await letters.redrive(5)
    assert (first.moved, first.failed) == (5, ())
    assert len(await letters.list()) == 7
    rest = await letters.redrive()
    assert (rest.moved, rest.failed) == (7, ())
    assert await letters.list() == []

    records = await flow_queue_records(world, world.config.queue_url or "", 12)
    assert sorted(json.loads(r["Body"])["messageId"] for r in records) == sorted(sent)
    assert not any(set(r.get("MessageAttributes") or {}) & set(DEAD_LETTER_ATTRIBUTES) for r in records)


@pytest.fixture
async def redriving_queue(sqs_s3_world: AWSWorld) -> AsyncIterator[tuple[str, str]]:
    """A flow queue whose redrive policy moves a message to its DLQ after 2 receives (1 s visibility)."""
    sqs = await sqs_s3_world.clients.sqs()
    suffix = sqs_s3_world.config.table_name[-12:]
    dlq_url = (await sqs.create_queue(QueueName=f"dlqtest-dlq-{suffix}"))["QueueUrl"]
    dlq_arn = (await sqs.get_queue_attributes(QueueUrl=dlq_url, AttributeNames=["QueueArn"]))["Attributes"]["QueueArn"]
    url = (await sqs.create_queue(QueueName=f"dlqtest-{suffix}", Attributes={
        "VisibilityTimeout": "1", "RedrivePolicy": json.dumps({"deadLetterTargetArn": dlq_arn, "maxReceiveCount": 2}),
    }))["QueueUrl"]
    yield url, dlq_url
    for queue_url in (url, dlq_url):
        await sqs.delete_queue(QueueUrl=queue_url)


async def test_a_message_sqs_moved_says_it_was_received_max_receive_count_times(
        sqs_s3_world: AWSWorld, redriving_queue: tuple[str, str]) -> None:
    world = sqs_s3_world
    url, dlq_url = redriving_queue
    sqs = await world.clients.sqs()
    run_id = new_run_id()
    envelope_body = json.dumps({"awsworld": 1, "messageId": "msg_failing", "queueName": QUEUE,
                                "createdAt": "2025-01-02T03:04:05.000Z", "attempt": 0,
                                "payload": FlowMessage(run_id, "dlqtest.flow").to_payload()})
    await sqs.send_message(QueueUrl=url, MessageBody=envelope_body, MessageAttributes={
        "traceparent": {"DataType": "String", "StringValue": "00-abc-def-01"}})
    for _ in range(2):  # two deliveries that fail: no ack, the visibility timeout runs out
        response = await sqs.receive_message(QueueUrl=url, WaitTimeSeconds=2)
        assert len(response.get("Messages", [])) == 1
        await asyncio.sleep(1.1)
    assert (await sqs.receive_message(QueueUrl=url, WaitTimeSeconds=1)).get("Messages", []) == []  # moved

    letters = DeadLetters(world, dlq_url=dlq_url, queue_url=url)
    [letter] = await letters.list()
    assert (letter.message_id, letter.kind, letter.run_id, letter.receives, letter.reason) == (
        "msg_failing", "flow", run_id, 2, "received 2 times without success (maxReceiveCount)")
    assert letter.first_sent is not None and letter.first_sent.isoformat() == "2025-01-02T03:04:05+00:00"

    assert (await letters.redrive()).moved == 1
    assert await letters.list() == []
    [back] = await flow_queue_records(world, url, 1)
    assert back["Body"] == envelope_body, "the same body"
    assert back["MessageAttributes"]["traceparent"]["StringValue"] == "00-abc-def-01", "and its own attributes"


async def test_a_message_whose_payload_rides_in_s3_names_its_run_and_is_not_fetched(sqs_s3_world: AWSWorld) -> None:
    world = sqs_s3_world
    run_id = new_run_id()
    big = FlowMessage(run_id, "dlqtest.flow", "step_1", "dlqtest.step", {"blob": SECRET + "x" * 250_000})
    message_id = await world.queue(QUEUE, big.to_payload())  # over the 200 KiB body: the payload goes to S3
    consumer = world.sqs_queue.consumer(PREFIX)
    [record] = await consumer.receive(10, 2)
    assert "payloadRef" in json.loads(record["Body"])
    assert await consumer.dead_letter(record, f"run {run_id} does not exist")

    [letter] = await DeadLetters(world).list()
    assert (letter.message_id, letter.kind, letter.run_id, letter.step_id, letter.reason) == (
        message_id, "stored", run_id, None, f"run {run_id} does not exist")
    assert SECRET not in json.dumps(letter.to_json())
