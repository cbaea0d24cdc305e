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

The protocol's sequences (the ack's and the redelivery's orderings, the prefix refusal, the argument checks)
are ``world.shared.queue_consumer``'s, shared with the in-memory World; this module is the SQS transport under them.

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

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from botocore.exceptions import ClientError

from ...world.errors import InvalidInputError
from ...world.queue import Delivery, Refused
from ...world.shared.queue_consumer import Loaded, QueueConsumerBase, Receipt, Received, Resend
from ..clients import AWSClients
from .dead_letter_queue import REASON_ATTRIBUTE, RECEIVES_ATTRIBUTE, SOURCE_ID_ATTRIBUTE
from .dedup import DedupMarkers
from .queue_envelope import Envelope, MalformedBody, QueuePayloads, decode_body
from .sqs_errors import sqs_error

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


class Sender(Protocol):
    """What the consumer needs of the publishing side (``sqs_queue.SqsQueue``, which makes consumers): where the
    queue is, how a delay becomes hops, how a body is sent, the payloads and the key markers."""

    clients: AWSClients
    dlq_url: str | None
    clock: Callable[[], float]
    payloads: QueuePayloads
    dedup: DedupMarkers

    @property
    def url(self) -> str: ...

    def plan_delay(self, delay: float) -> tuple[int, datetime | None]: ...

    def hop_for(self, due_at: datetime) -> int: ...

    async def send_body(self, body: str, delay: int) -> str: ...


class QueueConsumer(QueueConsumerBase[Deferred | Malformed]):
    """``world.shared.queue_consumer``'s protocol over the SQS queue: a receive's transport state is its ``SqsRecord``,
    a
    delivery's the ``Envelope`` a redelivery re-sends."""

    def __init__(self, queue: Sender, prefix: str) -> None:
        super().__init__(prefix)
        self.queue = queue
        self.clients = queue.clients

    async def receive(self, max_messages: int = 10, wait_seconds: float = 0,
                      visibility_timeout: float | None = None) -> list[dict[str, Any]]:
        """Raw records for a poller (ReceiveMessage shape, with the receive count); pass each to ``open``."""
        sqs = await self.clients.sqs()
        kwargs: dict[str, Any] = {}
        if visibility_timeout is not None:
            kwargs["VisibilityTimeout"] = int(visibility_timeout)
        try:
            response = await sqs.receive_message(
                QueueUrl=self.queue.url, MaxNumberOfMessages=max(1, min(10, max_messages)),
                WaitTimeSeconds=max(0, min(20, int(wait_seconds))),
                MessageSystemAttributeNames=["ApproximateReceiveCount", "SentTimestamp"], **kwargs,
            )
        except ClientError as error:
            raise sqs_error(error, "ReceiveMessage") from error
        return list(response.get("Messages", []))

    # -- the transport -----------------------------------------------------------------------------------

    def _receipt(self, record: Mapping[str, Any]) -> Receipt:
        sqs_record = read_record(record)
        return Receipt(sqs_record, sqs_record.receipt_handle, sqs_record.receive_count)

    async def _read(self, record: Mapping[str, Any]) -> Received | Malformed:
        receipt = self._receipt(record)
        sqs_record: SqsRecord = receipt.transport
        try:
            envelope = decode_body(sqs_record.body)
        except MalformedBody as error:
            return await self._move_to_dlq(sqs_record, str(error))
        return Received(envelope.message_id, envelope.queue_name, sqs_record.transport_message_id, receipt,
                        envelope, envelope.created_at, envelope.idempotency_key, envelope.deployment_id,
                        envelope.attempt)

    async def _load(self, received: Received) -> Loaded | Deferred | Malformed:
        """A long delay's early hop is re-sent towards its due time; a payload that cannot be loaded goes to the
        dead-letter queue; anything else is delivered."""
        envelope: Envelope = received.message
        sqs_record: SqsRecord = received.receipt.transport
        if envelope.due_at is not None and envelope.due_at.timestamp() > self.queue.clock():
            await self._replace(Resend(envelope.due_at.timestamp(), (envelope, self.queue.hop_for(envelope.due_at))),
                                sqs_record, sqs_record.receipt_handle)
            return Deferred(envelope.message_id, envelope.due_at, sqs_record.transport_message_id)
        try:
            return Loaded(await self.queue.payloads.load(envelope))
        except MalformedBody as error:
            return await self._move_to_dlq(sqs_record, str(error))

    async def _delete(self, transport: Any, receipt_handle: str) -> None:
        sqs = await self.clients.sqs()
        try:
            await sqs.delete_message(QueueUrl=self.queue.url, ReceiptHandle=receipt_handle)
        except ClientError as error:
            raise sqs_error(error, "DeleteMessage") from error

    async def _change_visibility(self, transport: Any, receipt_handle: str, seconds: float) -> None:
        sqs = await self.clients.sqs()
        try:
            await sqs.change_message_visibility(QueueUrl=self.queue.url, ReceiptHandle=receipt_handle,
                                                VisibilityTimeout=int(seconds))
        except ClientError as error:
            raise sqs_error(error, "ChangeMessageVisibility") from error

    def _plan_resend(self, delivery: Delivery, seconds: float) -> Resend:
        """The re-sent envelope counts this delivery as an attempt; a delay past one hop travels as ``dueAt``."""
        envelope = delivery.transport
        if not isinstance(envelope, Envelope):
            raise InvalidInputError("redeliver_after needs a Delivery that this consumer opened", field="delivery")
        delay, due_at = self.queue.plan_delay(seconds)
        due = due_at.timestamp() if due_at else self.queue.clock() + delay
        return Resend(due, (envelope.resent(attempt=delivery.attempt, due_at=due_at), delay))

    async def _send_copy(self, resend: Resend) -> None:
        envelope, delay = resend.copy
        await self.queue.send_body(envelope.to_body(), delay)

    async def _free_key(self, queue_name: str, key: str, message_id: str) -> None:
        await self.queue.dedup.release(queue_name, key, message_id)

    async def _extend_key(self, queue_name: str, key: str, message_id: str, due_epoch: float) -> None:
        await self.queue.dedup.extend(queue_name, key, message_id, due_epoch)

    async def _dead_letter(self, receipt: Receipt, reason: str) -> bool:
        return (await self._move_to_dlq(receipt.transport, reason)).dead_lettered

    async def _move_to_dlq(self, record: SqsRecord, reason: str) -> Malformed:
        """Move a body that can never be delivered to the DLQ at once (no retries: it would only fail again), with
        the reason, its id here and how often it was received here as message attributes (what ``awsworld dlq``
        shows: ``dead_letter_queue.py``)."""
        size = len(record.body) if isinstance(record.body, str) else 0
        if not self.queue.dlq_url or not record.receipt_handle or not isinstance(record.body, str) or not size:
            log.error("undeliverable queue message %s (%d bytes): %s; no dead-letter queue to move it to, leaving "
                      "it to the queue's redrive policy", record.transport_message_id, size, reason)
            return Malformed(reason, record.transport_message_id, dead_lettered=False)
        sqs = await self.clients.sqs()
        try:
            await sqs.send_message(
                QueueUrl=self.queue.dlq_url, MessageBody=record.body,
                MessageAttributes={
                    REASON_ATTRIBUTE: {"DataType": "String", "StringValue": reason},
                    SOURCE_ID_ATTRIBUTE: {"DataType": "String", "StringValue": record.transport_message_id or "-"},
                    RECEIVES_ATTRIBUTE: {"DataType": "Number", "StringValue": str(record.receive_count)}},
            )
        except ClientError as error:
            raise sqs_error(error, "SendMessage (dead-letter)") from error
        await self._delete(record, record.receipt_handle)
        log.error("undeliverable queue message %s (%d bytes) moved to the dead-letter queue: %s",
                  record.transport_message_id, size, reason)
        return Malformed(reason, record.transport_message_id, dead_lettered=True)


__all__ = ["Deferred", "Delivery", "Malformed", "Outcome", "QueueConsumer", "Refused", "SqsRecord", "read_record"]
