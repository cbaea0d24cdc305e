"""The dead-letter queue as an operator reads it (``awsworld dlq``): what each message is for and why it is there,
and a redrive back to the flow queue once the cause is fixed (docs/operate/monitoring.md).

A message is described by its envelope and its flow message (``aws/queue/queue_envelope.py``,
``world/messages.py``): awsworld's message id and first send time, the run it names and whether it is a flow
message (advance the run) or a step message (run one step). Never its payload's values or a hook's token: only ids
(a run id only when it is one: a forged message's ``runId`` could hold anything) and the reason, which the
consumer wrote without the body. The SQS calls are ``aws/queue/dead_letter_queue.py``'s.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from ..aws.queue.dead_letter_queue import (
    REASON_ATTRIBUTE,
    RECEIVES_ATTRIBUTE,
    SOURCE_ID_ATTRIBUTE,
    DeadLetterQueue,
    DeadMessage,
    Redriven,
)
from ..aws.queue.queue_envelope import MalformedBody, decode_body, payload_run
from ..aws.world import AWSWorld
from ..world.errors import InvalidInputError
from ..world.ids import check_entity_id
from ..world.messages import FlowMessage

Kind = Literal["flow", "step", "stored", "other"]
"""``flow`` (advance a run), ``step`` (run one step), ``stored`` (its payload rides in S3, which a list does not
read: no payload is fetched, so its run is known, from the object's key, and whether it is a step is not), ``other``
(a body that is not a flow or step message)."""
_EPOCH = datetime.fromtimestamp(0, UTC)


@dataclass(frozen=True)
class DeadLetter:
    """One message in the DLQ. ``message_id``: awsworld's (``msg_...``, the ``messageId`` of the delivery's log
    lines; None when the body is not an envelope); ``sqs_message_id``: SQS's, in the DLQ. ``first_sent``: the
    envelope's ``createdAt`` (the first send, kept across hops and redeliveries), else when SQS received it.
    ``receives``: how often the flow queue handed it out before it came here (None: not recorded). ``kind``:
    ``flow``, ``step``, ``stored`` or ``other`` (``Kind``)."""

    sqs_message_id: str
    source_sqs_message_id: str | None
    """Its SQS id in the flow queue, which the consumer's log line names when it moved it there."""
    message_id: str | None
    first_sent: datetime | None
    receives: int | None
    kind: Kind
    run_id: str | None
    step_id: str | None
    workflow_name: str | None
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {"messageId": self.message_id, "sqsMessageId": self.sqs_message_id,
                "sourceSqsMessageId": self.source_sqs_message_id,
                "firstSent": None if self.first_sent is None else self.first_sent.isoformat(),
                "receives": self.receives, "kind": self.kind, "runId": self.run_id, "stepId": self.step_id,
                "workflow": self.workflow_name, "reason": self.reason}


class DeadLetters:
    """The DLQ of ``world``'s flow queue (``AWSConfig.dlq_url`` and ``queue_url``, from ``AWSWORLD_DLQ_URL`` and
    ``AWSWORLD_QUEUE_URL``), or of the queues given."""

    def __init__(self, world: AWSWorld, *, dlq_url: str | None = None, queue_url: str | None = None) -> None:
        dlq_url = dlq_url or world.config.dlq_url
        if not dlq_url:
            raise InvalidInputError("the World names no dead-letter queue (AWSWORLD_DLQ_URL is not set)",
                                    field="dlqUrl")
        self.queue = DeadLetterQueue(world.clients, dlq_url=dlq_url, queue_url=queue_url or world.config.queue_url)

    async def list(self, limit: int | None = None) -> list[DeadLetter]:
        """Up to ``limit`` messages (default: all), described, oldest first send first; none is taken out of the
        DLQ."""
        messages = await self.queue.peek(limit)
        max_receives = await self.queue.max_receive_count() if messages else None
        letters = [describe(message, max_receives) for message in messages]
        return sorted(letters, key=lambda letter: (letter.first_sent is None, letter.first_sent or _EPOCH))

    async def held(self) -> int:
        """About how many messages the DLQ holds (SQS's approximate count): what a list cut at its limit did not
        show."""
        return await self.queue.depth()

    async def redrive(self, limit: int | None = None) -> Redriven:
        """Move up to ``limit`` messages (default: all) back to the flow queue (``DeadLetterQueue.redrive``: a crash
        mid-way duplicates a message, never loses one, and deliveries tolerate the duplicate)."""
        return await self.queue.redrive(limit)


def describe(message: DeadMessage, max_receives: int | None) -> DeadLetter:
    """``message`` as an operator reads it. Without awsworld's reason, SQS moved it: the flow queue had handed it
    out ``max_receives`` times (its ``maxReceiveCount``) and no delivery succeeded."""
    reason = message.attributes.get(REASON_ATTRIBUTE)
    ids = message.sqs_message_id, message.attributes.get(SOURCE_ID_ATTRIBUTE)
    receives = _count(message.attributes.get(RECEIVES_ATTRIBUTE))
    if reason is None:
        receives = max_receives
        reason = (f"received {max_receives} times without success (maxReceiveCount)" if max_receives is not None
                  else "moved by SQS after the flow queue's maxReceiveCount receives")
    try:
        envelope = decode_body(message.body)
    except MalformedBody:
        return DeadLetter(*ids, None, message.sent_at, receives, "other", None, None, None, reason)
    if envelope.payload_ref is not None:
        return DeadLetter(*ids, envelope.message_id, envelope.created_at, receives, "stored",
                          payload_run(envelope.payload_ref), None, None, reason)
    try:
        flow = FlowMessage.from_payload(envelope.payload)
    except (ValueError, TypeError):  # not a flow or step message (or a forged one: its counts not numbers)
        flow = None
    if flow is None:
        return DeadLetter(*ids, envelope.message_id, envelope.created_at, receives, "other",
                          None, None, None, reason)
    return DeadLetter(*ids, envelope.message_id, envelope.created_at, receives,
                      "step" if flow.step_id else "flow", _id(flow.run_id, "runId"),
                      _id(flow.step_id, "stepId"), _id(flow.workflow_name, "workflowName"), reason)


def _id(value: object, field: str) -> str | None:
    try:
        return check_entity_id(value, field) if value is not None else None
    except InvalidInputError:
        return None


def _count(text: str | None) -> int | None:
    return int(text) if text is not None and text.isdigit() else None


__all__ = ["DeadLetter", "DeadLetters", "Redriven", "describe"]
