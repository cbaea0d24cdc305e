"""The consuming side of the queue, shared by the Lambda handler and the local poller.

``QueueConsumer.open(record)`` turns one SQS record (the Lambda event-record shape or the ReceiveMessage
shape) into exactly one outcome:

- ``Delivery``: hand it to user code, then ``ack`` it (or ``redeliver_after`` N seconds);
- ``Deferred``: a long delay's hop arrived before its due time; the remainder was re-sent and this copy
  acknowledged, so the caller counts it as handled and runs nothing;
- ``Refused``: the message belongs to another queue prefix; the caller reports it as failed so it is retried
  (by the consumer it belongs to), never run here;
- ``Malformed``: the body is not one of ours; it was moved to the dead-letter queue (or, without one, is left
  to the queue's redrive policy) with one log line naming the reason, never the content.

Redelivery re-sends the message with a delay and deletes the current copy, instead of changing its
visibility: ``ChangeMessageVisibility`` keeps the receive count growing and would walk a healthy, retrying
message into the DLQ.

A Lambda handler with ``ReportBatchItemFailures`` uses it like this (the local poller the same way, with
``receive``/``poll`` and ``ack(delivery)``)::

    consumer = world.sqs_queue.consumer("__wkf_workflow_")
    failures = []
    for record in event["Records"]:
        outcome = await consumer.open(record)
        if isinstance(outcome, Delivery):
            ...  # run it; then ack(outcome, delete_message=False), or redeliver_after(outcome, n)
        elif isinstance(outcome, Refused) or (isinstance(outcome, Malformed) and not outcome.dead_lettered):
            failures.append({"itemIdentifier": record["messageId"]})
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from ...world.errors import InvalidInputError
from ...world.queue import Delivery, Refused, check_delay, check_queue_prefix, visibility_seconds
from .queue_envelope import Envelope, MalformedBody, decode_body
from .sqs_errors import sqs_error

if TYPE_CHECKING:
    from .sqs_queue import SqsQueue

log = logging.getLogger("awsworld.queue")


@dataclass(frozen=True)
class Deferred:
    message_id: str
    due_at: datetime
    transport_message_id: str

    kind = "deferred"
    failure = None


@dataclass(frozen=True)
class Malformed:
    reason: str
    transport_message_id: str
    dead_lettered: bool
    """True when the message was moved to the DLQ and deleted; False when the caller must report it failed."""

    kind = "malformed"

    @property
    def failure(self) -> str | None:
        return None if self.dead_lettered else f"malformed message left to the redrive policy: {self.reason}"


Outcome = Delivery | Deferred | Refused | Malformed


@dataclass(frozen=True)
class SqsRecord:
    """The parts of an SQS record this World reads, whichever shape it arrived in."""

    body: Any
    transport_message_id: str
    receipt_handle: str
    receive_count: int


def read_record(record: Mapping[str, Any]) -> SqsRecord:
    """Lambda's ``{"body", "messageId", "receiptHandle", "attributes"}`` or ReceiveMessage's
    ``{"Body", "MessageId", "ReceiptHandle", "Attributes"}``."""
    lambda_shape = "body" in record or "receiptHandle" in record
    attributes = record.get("attributes" if lambda_shape else "Attributes") or {}
    try:
        count = int(attributes.get("ApproximateReceiveCount", 1))
    except (TypeError, ValueError):
        count = 1
    return SqsRecord(
        body=record.get("body" if lambda_shape else "Body"),
        transport_message_id=str(record.get("messageId" if lambda_shape else "MessageId") or ""),
        receipt_handle=str(record.get("receiptHandle" if lambda_shape else "ReceiptHandle") or ""),
        receive_count=max(1, count),
    )


class QueueConsumer:
    def __init__(self, queue: SqsQueue, prefix: str) -> None:
        self.queue = queue
        self.prefix = check_queue_prefix(prefix)
        self.clients = queue.clients

    async def receive(self, max_messages: int = 10, wait_seconds: int = 0,
                      visibility_timeout: int | None = None) -> list[dict[str, Any]]:
        """Raw records for a poller (ReceiveMessage shape, with the receive count); pass each to ``open``."""
        sqs = await self.clients.sqs()
        kwargs: dict[str, Any] = {}
        if visibility_timeout is not None:
            kwargs["VisibilityTimeout"] = visibility_timeout
        try:
            response = await sqs.receive_message(
                QueueUrl=self.queue._url(), MaxNumberOfMessages=max(1, min(10, max_messages)),
                WaitTimeSeconds=max(0, min(20, wait_seconds)),
                MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"], **kwargs,
            )
        except ClientError as error:
            raise sqs_error(error, "ReceiveMessage") from error
        return list(response.get("Messages", []))

    async def poll(self, max_messages: int = 10, wait_seconds: int = 0) -> list[Outcome]:
        """``receive`` and ``open`` in one call: the outcomes of whatever arrived."""
        records = await self.receive(max_messages, wait_seconds)
        return list(await asyncio.gather(*(self.open(r) for r in records)))

    async def open(self, record: Mapping[str, Any]) -> Outcome:
        sqs_record = read_record(record)
        try:
            envelope = decode_body(sqs_record.body)
        except MalformedBody as error:
            return await self._dead_letter(sqs_record, str(error))
        if not envelope.queue_name.startswith(self.prefix):
            log.warning("refused message %s: queue %s is not under this consumer's prefix %s; it will be retried",
                        envelope.message_id, envelope.queue_name, self.prefix)
            return Refused(envelope.message_id, envelope.queue_name, sqs_record.transport_message_id,
                           sqs_record.receipt_handle)
        if envelope.due_at is not None and envelope.due_at.timestamp() > self.queue.clock():
            await self._resend(envelope, self.queue.hop_for(envelope.due_at), sqs_record.receipt_handle)
            return Deferred(envelope.message_id, envelope.due_at, sqs_record.transport_message_id)
        try:
            payload = await self.queue.payloads.load(envelope)
        except MalformedBody as error:
            return await self._dead_letter(sqs_record, str(error))
        attempt = envelope.attempt + sqs_record.receive_count
        return Delivery(
            message_id=envelope.message_id, queue_name=envelope.queue_name, payload=payload, attempt=attempt,
            delivery_count=attempt, created_at=envelope.created_at, receipt_handle=sqs_record.receipt_handle,
            transport_message_id=sqs_record.transport_message_id, idempotency_key=envelope.idempotency_key,
            deployment_id=envelope.deployment_id, transport=envelope,
        )

    async def ack(self, delivery: Delivery, *, delete_message: bool = True) -> None:
        """The delivery is done: free its idempotency key, then delete the message.

        The key goes first: a crash in between leaves a message that is delivered again (at-least-once), never
        a marker that silently drops the next send with the same key. ``delete_message=False`` suits the
        Lambda handler, whose event source mapping deletes the records it reports as successful.
        """
        if delivery.idempotency_key is not None:
            await self.queue.dedup.release(delivery.queue_name, delivery.idempotency_key, delivery.message_id)
        if delete_message:
            await self._delete(delivery.receipt_handle)

    async def redeliver_after(self, delivery: Delivery, seconds: float) -> None:
        """Deliver the message again after ``seconds``, keeping its id and counting this delivery as an
        attempt: re-send with a delay, then delete this copy."""
        delay_seconds = check_delay(seconds, "seconds")
        envelope = delivery.transport
        if not isinstance(envelope, Envelope):
            raise InvalidInputError("redeliver_after needs a Delivery that this consumer opened", field="delivery")
        delay, due_at = self.queue.plan_delay(delay_seconds)
        resent = envelope.resent(attempt=delivery.attempt, due_at=due_at)
        if delivery.idempotency_key is not None:
            due = due_at.timestamp() if due_at else self.queue.clock() + delay
            await self.queue.dedup.extend(delivery.queue_name, delivery.idempotency_key, delivery.message_id, due)
        await self._resend(resent, delay, delivery.receipt_handle)

    async def release(self, outcome: Refused | Delivery) -> None:
        """Make a refused (or abandoned) message visible again now, for a poller that shares the queue with
        consumers of other prefixes. Costs a receive count; the Lambda handler reports a failure instead."""
        sqs = await self.clients.sqs()
        try:
            await sqs.change_message_visibility(QueueUrl=self.queue._url(), ReceiptHandle=outcome.receipt_handle,
                                                VisibilityTimeout=0)
        except ClientError as error:
            raise sqs_error(error, "ChangeMessageVisibility") from error

    async def delete(self, record: Mapping[str, Any]) -> None:
        """Delete a record that is done with (what Lambda's event source mapping does to a successful one)."""
        await self._delete(read_record(record).receipt_handle)

    def receive_count(self, record: Mapping[str, Any]) -> int:
        """How many times the record has been received, this time included (1 when the record does not say)."""
        return read_record(record).receive_count

    async def back_off(self, record: Mapping[str, Any], seconds: int) -> None:
        """Make a failed record visible again after ``seconds`` (instead of the queue's visibility timeout)."""
        sqs = await self.clients.sqs()
        try:
            await sqs.change_message_visibility(QueueUrl=self.queue._url(), ReceiptHandle=read_record(record)
                                                .receipt_handle, VisibilityTimeout=int(visibility_seconds(seconds)))
        except ClientError as error:
            raise sqs_error(error, "ChangeMessageVisibility") from error

    async def dead_letter(self, record: Mapping[str, Any], reason: str) -> bool:
        """Move a record that can never succeed to the DLQ now; False when there is no DLQ to move it to."""
        return (await self._dead_letter(read_record(record), reason)).dead_lettered

    # -- internals -------------------------------------------------------------------------------------------

    async def _resend(self, envelope: Envelope, delay: int, receipt_handle: str) -> None:
        """Send the next copy, then delete this one: a crash in between duplicates, never loses, the message."""
        body = envelope.to_body()
        await self.queue.send_body(body, delay)
        await self._delete(receipt_handle)

    async def _delete(self, receipt_handle: str) -> None:
        sqs = await self.clients.sqs()
        try:
            await sqs.delete_message(QueueUrl=self.queue._url(), ReceiptHandle=receipt_handle)
        except ClientError as error:
            raise sqs_error(error, "DeleteMessage") from error

    async def _dead_letter(self, record: SqsRecord, reason: str) -> Malformed:
        """Move a body that can never be delivered to the DLQ at once (no retries: it would only fail again)."""
        size = len(record.body) if isinstance(record.body, str) else 0
        if not self.queue.dlq_url or not record.receipt_handle or not isinstance(record.body, str) or not size:
            log.error("undeliverable queue message %s (%d bytes): %s; no dead-letter queue to move it to, leaving "
                      "it to the queue's redrive policy", record.transport_message_id, size, reason)
            return Malformed(reason, record.transport_message_id, dead_lettered=False)
        sqs = await self.clients.sqs()
        try:
            await sqs.send_message(
                QueueUrl=self.queue.dlq_url, MessageBody=record.body,
                MessageAttributes={"awsworldError": {"DataType": "String", "StringValue": reason},
                                   "awsworldSourceMessageId": {"DataType": "String",
                                                               "StringValue": record.transport_message_id or "-"}},
            )
        except ClientError as error:
            raise sqs_error(error, "SendMessage (dead-letter)") from error
        await self._delete(record.receipt_handle)
        log.error("undeliverable queue message %s (%d bytes) moved to the dead-letter queue: %s",
                  record.transport_message_id, size, reason)
        return Malformed(reason, record.transport_message_id, dead_lettered=True)


__all__ = ["Deferred", "Delivery", "Malformed", "Outcome", "QueueConsumer", "Refused", "SqsRecord", "read_record"]
