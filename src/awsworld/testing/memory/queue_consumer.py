"""The consuming side of the in-memory queue: what ``runtime.delivery.DeliveryPath`` drives.

``MemoryConsumer`` implements the ``Consumer`` protocol the AWS World's ``QueueConsumer`` does, over records
of this queue (``MemoryRecord``), so the one delivery path runs unchanged against memory. A record is a
``Mapping`` shaped like an SQS ReceiveMessage record (``MessageId``, ``ReceiptHandle``, ``Attributes``) only
so it fits the protocol's signature and reads well in a debugger; the consumer uses its fields.

``open`` gives a ``Delivery``, or ``Refused`` for another prefix's message (the caller reports it failed, or
``release``s it, and its own consumer takes it). There are no hops (``Deferred``) and no foreign bodies
(``Malformed``) in memory: every message was checked when it was sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...world.errors import InvalidInputError
from ...world.queue import Delivery, check_delay, check_queue_prefix
from ...world.queue import Refused as ContractRefused
from .queue import MemoryQueue, QueuedMessage


@dataclass(frozen=True, eq=False)
class MemoryRecord(Mapping[str, Any]):
    """One receive of one message."""

    message: QueuedMessage = field(repr=False)
    receipt_handle: str
    transport_message_id: str
    receive_count: int
    attempt: int

    def _view(self) -> dict[str, Any]:
        return {"MessageId": self.transport_message_id, "ReceiptHandle": self.receipt_handle,
                "Attributes": {"ApproximateReceiveCount": str(self.receive_count)}}

    def __getitem__(self, key: str) -> Any:
        return self._view()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._view())

    def __len__(self) -> int:
        return 3


@dataclass(frozen=True)
class Refused(ContractRefused):
    """The contract's ``Refused``, holding its record so ``release`` can make the message visible again."""

    record: MemoryRecord = field(repr=False, compare=False)


Outcome = Delivery | Refused


def _record(record: Mapping[str, Any]) -> MemoryRecord:
    if not isinstance(record, MemoryRecord):
        raise InvalidInputError("not a record of this in-memory queue", field="record")
    return record


class MemoryConsumer:
    def __init__(self, queue: MemoryQueue, prefix: str) -> None:
        self.queue = queue
        self.prefix = check_queue_prefix(prefix)

    async def receive(self, max_messages: int = 10, wait_seconds: float = 0.0,
                      visibility_timeout: float | None = None) -> list[MemoryRecord]:
        """Visible messages of any prefix (pass each to ``open``), now in flight for the visibility timeout.
        With ``wait_seconds``, waits (real time, woken by sends) for one when none is visible."""
        deadline = asyncio.get_running_loop().time() + max(0.0, wait_seconds)
        while True:
            taken = self.queue.take(max(1, max_messages), visibility_timeout)
            remaining = deadline - asyncio.get_running_loop().time()
            if taken or remaining <= 0:
                return [MemoryRecord(message, receipt, message.transport_id, message.receives,
                                     message.attempt + message.receives) for message, receipt in taken]
            await self.queue.wait_for_arrival(remaining)

    async def poll(self, max_messages: int = 10, wait_seconds: float = 0.0) -> list[Outcome]:
        """``receive`` and ``open`` in one call: the outcomes of whatever arrived."""
        return [await self.open(record) for record in await self.receive(max_messages, wait_seconds)]

    async def open(self, record: Mapping[str, Any]) -> Outcome:
        memory = _record(record)
        message = memory.message
        if not message.queue_name.startswith(self.prefix):
            return Refused(message.message_id, message.queue_name, memory.transport_message_id,
                           memory.receipt_handle, memory)
        return Delivery(
            message_id=message.message_id, queue_name=message.queue_name, payload=message.payload(),
            attempt=memory.attempt, delivery_count=memory.attempt, created_at=message.created_at,
            receipt_handle=memory.receipt_handle, transport_message_id=memory.transport_message_id,
            idempotency_key=message.idempotency_key, deployment_id=message.deployment_id, transport=message,
        )

    async def ack(self, delivery: Delivery, *, delete_message: bool = True) -> None:
        """The delivery is done: free its idempotency key, then (unless the caller deletes the record itself,
        as the poller does) delete the message."""
        if delivery.idempotency_key is not None:
            self.queue.dedup.release(delivery.queue_name, delivery.idempotency_key, delivery.message_id)
        if delete_message:
            self.queue.delete(_message(delivery), delivery.receipt_handle)

    async def redeliver_after(self, delivery: Delivery, seconds: float) -> None:
        """Deliver the message again after ``seconds``, keeping its id and counting this delivery."""
        delay = check_delay(seconds, "seconds")
        self.queue.redeliver(_message(delivery), delivery.attempt, delay)

    async def release(self, outcome: Refused | Delivery) -> None:
        """Make a refused (or abandoned) message visible again now, for the consumer it belongs to."""
        message = outcome.record.message if isinstance(outcome, Refused) else _message(outcome)
        self.queue.change_visibility(message, outcome.receipt_handle, 0)

    async def delete(self, record: Mapping[str, Any]) -> None:
        """Delete a record that is done with; a stale one (redelivered meanwhile) changes nothing."""
        memory = _record(record)
        self.queue.delete(memory.message, memory.receipt_handle)

    def receive_count(self, record: Mapping[str, Any]) -> int:
        return _record(record).receive_count

    async def back_off(self, record: Mapping[str, Any], seconds: int) -> None:
        """Make a failed record visible again after ``seconds`` of the clock."""
        memory = _record(record)
        self.queue.change_visibility(memory.message, memory.receipt_handle, seconds)

    async def dead_letter(self, record: Mapping[str, Any], reason: str) -> bool:
        """Move a record that can never succeed to ``queue.dead_letters`` now."""
        memory = _record(record)
        self.queue.dead_letter(memory.message, memory.receipt_handle, reason)
        return True


def _message(delivery: Delivery) -> QueuedMessage:
    if not isinstance(delivery.transport, QueuedMessage):
        raise InvalidInputError("needs a Delivery that an in-memory consumer opened", field="delivery")
    return delivery.transport


__all__ = ["MemoryConsumer", "MemoryRecord", "Outcome", "Refused"]
