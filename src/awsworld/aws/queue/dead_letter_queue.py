"""The dead-letter queue's SQS calls, for an operator: look at what it holds without taking anything out, and move
its messages back to the flow queue (``client/dead_letters.py`` reads them; ``awsworld dlq`` prints them).

A message reaches the DLQ two ways. The consumer moves a record that can never succeed there on its first receive
(``deliveries.QueueConsumer._move_to_dlq``), and says why in message attributes: ``awsworldError`` (the reason, the
same words as its log line, never the body), ``awsworldSourceMessageId`` (its SQS id in the flow queue) and
``awsworldReceiveCount`` (how often the flow queue had handed it out). SQS itself moves a record that failed
``maxReceiveCount`` times (the flow queue's redrive policy, ``aws/resources.py``) with no attribute of awsworld's.

Peeking receives with a visibility timeout (``HIDE_SECONDS``), so each receive hands out messages not seen yet (a
visibility timeout of 0 would let SQS return the same first ten every time: moto does), and then makes every one
visible again at once (``ChangeMessageVisibilityBatch`` to 0). Nothing is deleted; a peek that dies between the two
leaves its messages hidden for ``HIDE_SECONDS`` at most. Every receive adds one to a message's
``ApproximateReceiveCount`` in the DLQ, which is why the consumer carries the flow queue's count in an attribute.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from ...world.errors import InvalidInputError
from ..clients import AWSClients
from .sqs_errors import sqs_error

REASON_ATTRIBUTE = "awsworldError"
SOURCE_ID_ATTRIBUTE = "awsworldSourceMessageId"
RECEIVES_ATTRIBUTE = "awsworldReceiveCount"
DEAD_LETTER_ATTRIBUTES = (REASON_ATTRIBUTE, SOURCE_ID_ATTRIBUTE, RECEIVES_ATTRIBUTE)
"""What the consumer adds when it dead-letters a record: about its stay in the DLQ, so a redrive drops them (a
message that fails again gets fresh ones, or none if SQS moves it)."""

HIDE_SECONDS = 30
"""How long a peek or a redrive hides the messages it received: one peek's receives, or one batch's send and
delete, take far less."""


@dataclass(frozen=True)
class DeadMessage:
    """One message in the DLQ as SQS hands it out."""

    sqs_message_id: str
    body: str
    sent_at: datetime | None
    """SQS's ``SentTimestamp``: when the consumer moved it; for a message SQS moved, its last send to the flow
    queue."""
    attributes: Mapping[str, str] = field(default_factory=dict[str, str])
    """Its message attributes' string values (``awsworldError``, ...)."""


@dataclass(frozen=True)
class Redriven:
    """What a redrive did: how many messages went back to the flow queue, and the SQS ids of those it could not
    send (they stay in the DLQ), with SQS's code for each."""

    moved: int
    failed: tuple[tuple[str, str], ...] = ()


def dead_message(raw: Mapping[str, Any]) -> DeadMessage:
    system = raw.get("Attributes") or {}
    sent = str(system.get("SentTimestamp") or "")
    attributes = {name: str(value["StringValue"]) for name, value in (raw.get("MessageAttributes") or {}).items()
                  if isinstance(value, Mapping) and "StringValue" in value}
    return DeadMessage(str(raw.get("MessageId", "")), str(raw.get("Body", "")),
                       datetime.fromtimestamp(int(sent) / 1000, UTC) if sent.isdigit() else None,
                       attributes)


def _resend_attributes(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The message attributes to send it back with: all of them but the DLQ's own, in the shape SendMessage takes."""
    kept: dict[str, Any] = {}
    for name, value in (raw.get("MessageAttributes") or {}).items():
        if name not in DEAD_LETTER_ATTRIBUTES and isinstance(value, Mapping):
            kept[name] = {k: value[k] for k in ("DataType", "StringValue", "BinaryValue") if k in value}
    return kept


class DeadLetterQueue:
    """The DLQ at ``dlq_url``, and the flow queue at ``queue_url`` its messages came from and a redrive sends to."""

    def __init__(self, clients: AWSClients, *, dlq_url: str, queue_url: str | None) -> None:
        self.clients = clients
        self.dlq_url = dlq_url
        self.queue_url = queue_url

    async def peek(self, limit: int | None = None) -> list[DeadMessage]:
        """Up to ``limit`` messages (default: all), each once, in the order SQS hands them out; all of them stay in
        the DLQ."""
        seen: dict[str, DeadMessage] = {}
        handles: list[str] = []
        try:
            while limit is None or len(seen) < limit:
                batch = await self._receive(10)
                handles += [str(m["ReceiptHandle"]) for m in batch]
                new = [dead_message(m) for m in batch if m.get("MessageId") not in seen]
                if not new:
                    break
                for message in new[: None if limit is None else limit - len(seen)]:
                    seen[message.sqs_message_id] = message
        finally:
            await self._show(handles)
        return list(seen.values())

    async def depth(self) -> int:
        """About how many messages the DLQ holds now: SQS's approximate counts of its visible and in-flight messages
        (a peek's own hidden ones included until it shows them again)."""
        sqs = await self.clients.sqs()
        try:
            response = await sqs.get_queue_attributes(
                QueueUrl=self.dlq_url,
                AttributeNames=["ApproximateNumberOfMessages", "ApproximateNumberOfMessagesNotVisible"])
        except ClientError as error:
            raise sqs_error(error, "GetQueueAttributes (dead-letter queue)") from error
        return sum(int(value) for value in response.get("Attributes", {}).values())

    async def max_receive_count(self) -> int | None:
        """The flow queue's ``maxReceiveCount`` (how often SQS hands a message out before moving it here), or None
        when there is no flow queue or it has no redrive policy."""
        if not self.queue_url:
            return None
        sqs = await self.clients.sqs()
        try:
            response = await sqs.get_queue_attributes(QueueUrl=self.queue_url, AttributeNames=["RedrivePolicy"])
        except ClientError as error:
            raise sqs_error(error, "GetQueueAttributes") from error
        try:
            return int(json.loads(response["Attributes"]["RedrivePolicy"])["maxReceiveCount"])
        except (KeyError, TypeError, ValueError):
            return None

    async def redrive(self, limit: int | None = None) -> Redriven:
        """Move up to ``limit`` messages (default: all) back to the flow queue: each batch is received, sent with
        the same body and message attributes (less ``DEAD_LETTER_ATTRIBUTES``), then deleted from the DLQ.

        A crash between the send and the delete leaves the message in both queues; its second delivery is a
        duplicate, which deliveries tolerate (docs/concepts/guarantees.md: a redelivery carries the same message id
        and every write is fenced, a delivery for an ended run is acknowledged). A message that fails at once and
        is dead-lettered again while this runs comes back with the same body: it is left there, not sent round
        again, and the redrive ends at the first receive that brings nothing else."""
        if not self.queue_url:
            raise InvalidInputError("no flow queue to redrive to (AWSWORLD_QUEUE_URL is not set)", field="queueUrl")
        sqs = await self.clients.sqs()
        sent_bodies: set[bytes] = set()
        moved, failed = 0, list[tuple[str, str]]()
        while limit is None or moved < limit:
            batch = await self._receive(10 if limit is None else min(10, limit - moved))
            fresh = [m for m in batch if _digest(m) not in sent_bodies]
            await self._show([str(m["ReceiptHandle"]) for m in batch if m not in fresh])
            if not fresh:
                break
            entries = [{"Id": str(i), "MessageBody": m["Body"], "MessageAttributes": _resend_attributes(m)}
                       for i, m in enumerate(fresh)]
            try:
                answer = await sqs.send_message_batch(QueueUrl=self.queue_url, Entries=entries)
            except ClientError as error:
                await self._show([str(m["ReceiptHandle"]) for m in fresh])
                raise sqs_error(error, "SendMessageBatch") from error
            done = [fresh[int(entry["Id"])] for entry in answer.get("Successful", [])]
            failures = answer.get("Failed", [])
            await self._show([str(fresh[int(e["Id"])]["ReceiptHandle"]) for e in failures])  # in the DLQ, as before
            refused = [(str(fresh[int(e["Id"])]["MessageId"]), str(e.get("Code", "?"))) for e in failures]
            refused += await self._delete(done)
            sent_bodies.update(_digest(m) for m in done)
            moved += len(done)
            if refused:
                failed += refused
                break
        return Redriven(moved, tuple(failed))

    # -- SQS -----------------------------------------------------------------------------------------------------

    async def _receive(self, count: int) -> list[dict[str, Any]]:
        """A long poll of 1 s: it asks every SQS server (a short poll samples some, and may answer empty while
        messages wait), and answers at once when there are any."""
        sqs = await self.clients.sqs()
        try:
            response = await sqs.receive_message(
                QueueUrl=self.dlq_url, MaxNumberOfMessages=max(1, min(10, count)), WaitTimeSeconds=1,
                VisibilityTimeout=HIDE_SECONDS, MessageAttributeNames=["All"],
                MessageSystemAttributeNames=["SentTimestamp"])
        except ClientError as error:
            raise sqs_error(error, "ReceiveMessage (dead-letter queue)") from error
        return list(response.get("Messages", []))

    async def _show(self, handles: list[str]) -> None:
        """Make the messages received under ``handles`` visible again now."""
        sqs = await self.clients.sqs()
        for start in range(0, len(handles), 10):
            entries = [{"Id": str(i), "ReceiptHandle": h, "VisibilityTimeout": 0}
                       for i, h in enumerate(handles[start:start + 10])]
            try:
                await sqs.change_message_visibility_batch(QueueUrl=self.dlq_url, Entries=entries)
            except ClientError as error:
                raise sqs_error(error, "ChangeMessageVisibilityBatch (dead-letter queue)") from error

    async def _delete(self, messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
        """Delete ``messages`` from the DLQ; those SQS would not delete (sent already: a redrive again repeats
        them, which deliveries tolerate), with its code."""
        if not messages:
            return []
        sqs = await self.clients.sqs()
        entries = [{"Id": str(i), "ReceiptHandle": m["ReceiptHandle"]} for i, m in enumerate(messages)]
        try:
            answer = await sqs.delete_message_batch(QueueUrl=self.dlq_url, Entries=entries)
        except ClientError as error:
            raise sqs_error(error, "DeleteMessageBatch (dead-letter queue)") from error
        return [(str(messages[int(e["Id"])]["MessageId"]), f"{e.get('Code', '?')} (sent, yet still in the DLQ)")
                for e in answer.get("Failed", [])]


def _digest(raw: Mapping[str, Any]) -> bytes:
    return hashlib.sha256(str(raw.get("Body", "")).encode("utf-8")).digest()


__all__ = [
    "DEAD_LETTER_ATTRIBUTES",
    "REASON_ATTRIBUTE",
    "RECEIVES_ATTRIBUTE",
    "SOURCE_ID_ATTRIBUTE",
    "DeadLetterQueue",
    "DeadMessage",
    "Redriven",
]
