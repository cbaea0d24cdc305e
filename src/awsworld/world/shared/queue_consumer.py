"""The consuming side of the queue, written once: the protocol's sequences and checks over a World's transport.

A consumer serves one queue prefix (``__wkf_workflow_`` or a namespace's) and turns each record it receives into
one outcome: a ``Delivery`` to run, a ``Refused`` message of another prefix (reported failed or released, so
its own consumer runs it), or whatever else the transport has to say (the SQS consumer's long-delay hops and
foreign bodies). The orderings that make it at-least-once without stranding a key are decided here, for every
World:

- ``ack``: free the delivery's idempotency key, then delete the message. A crash in between leaves a message that
  is delivered again, never a marker that silently drops the next send with the same key.
- ``redeliver_after``: keep the key past the new due time, send the next copy, then delete this one. Re-sending
  (instead of changing the visibility) starts the receive count again, so a healthy, retrying message never walks
  into the dead-letter queue; a crash between send and delete duplicates the message, never loses it.
- argument checks (the redelivery's delay, a back-off's visibility range) and the prefix refusal.

Each World implements the transport underneath, a handful of primitives (read a record, delete by receipt,
change a receipt's visibility, send a copy, free or extend a key, dead-letter): the SQS consumer in
``aws/queue/deliveries.py``, the in-memory one in ``_memory/queue.py``. Nothing here does I/O itself.
"""

from __future__ import annotations

import asyncio
import logging
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from ..queue import Delivery, Refused, check_delay, check_queue_prefix, visibility_seconds

log = logging.getLogger("awsworld.queue")

SkippedT = TypeVar("SkippedT")
"""The outcomes besides a delivery and a refusal that a World's records can have (none in memory)."""


@dataclass(slots=True)
class Receipt:
    """One receive of a record, as its World reads it: the transport's state of the message, the handle that
    deletes or hides this receive, and how often the message was received since it was last sent."""

    transport: Any
    receipt_handle: str
    receive_count: int


@dataclass(slots=True)
class Received:
    """A record opened far enough to say whose message it is and what it carries besides its payload (which is
    read only for a message under this consumer's prefix): the receive, and the World's own reading of the
    message (what ``_load`` goes on from, and a delivery's ``transport``)."""

    message_id: str
    queue_name: str
    transport_message_id: str
    receipt: Receipt
    message: Any
    created_at: datetime
    idempotency_key: str | None
    deployment_id: str | None
    attempts_before: int
    """Deliveries before the message was last (re)sent; this delivery's attempt adds the receive count."""


@dataclass(slots=True)
class Loaded:
    """A received message's payload, read."""

    payload: Any


@dataclass(slots=True)
class Resend:
    """The next copy of a redelivered message, planned: when it falls due (epoch seconds, what its key's marker
    must outlive) and the World's own description of the copy to send."""

    due_epoch: float
    copy: Any


class QueueConsumerBase(ABC, Generic[SkippedT]):
    """The protocol ``_worker.delivery`` drives (receive, poll, open, ack, redeliver_after, release, delete,
    receive_count, back_off, dead_letter), over the primitives a World's transport implements."""

    def __init__(self, prefix: str) -> None:
        self.prefix = check_queue_prefix(prefix)

    # -- the protocol ----------------------------------------------------------------------------------------

    @abstractmethod
    async def receive(self, max_messages: int = 10, wait_seconds: float = 0,
                      visibility_timeout: float | None = None) -> Sequence[Mapping[str, Any]]:
        """Raw records of any prefix, now in flight; pass each to ``open``."""

    async def poll(self, max_messages: int = 10, wait_seconds: float = 0
                   ) -> list[Delivery | Refused | SkippedT]:
        """``receive`` and ``open`` in one call: the outcomes of whatever arrived."""
        records = await self.receive(max_messages, wait_seconds)
        return list(await asyncio.gather(*(self.open(record) for record in records)))

    async def open(self, record: Mapping[str, Any]) -> Delivery | Refused | SkippedT:
        """The record's one outcome: another prefix's message is refused before anything else of it is read."""
        received = await self._read(record)
        if not isinstance(received, Received):
            return received
        if not received.queue_name.startswith(self.prefix):
            log.warning("refused message %s: queue %s is not under this consumer's prefix %s; it will be retried",
                        received.message_id, received.queue_name, self.prefix)
            return Refused(received.message_id, received.queue_name, received.transport_message_id,
                           received.receipt.receipt_handle, transport=received.receipt.transport)
        loaded = await self._load(received)
        if not isinstance(loaded, Loaded):
            return loaded
        attempt = received.attempts_before + received.receipt.receive_count
        return Delivery(message_id=received.message_id, queue_name=received.queue_name, payload=loaded.payload,
                        attempt=attempt, delivery_count=attempt, created_at=received.created_at,
                        receipt_handle=received.receipt.receipt_handle,
                        transport_message_id=received.transport_message_id,
                        idempotency_key=received.idempotency_key, deployment_id=received.deployment_id,
                        transport=received.message)

    async def ack(self, delivery: Delivery, *, delete_message: bool = True) -> None:
        """The delivery is done: free its idempotency key, then delete the message. ``delete_message=False``
        suits the Lambda handler, whose event source mapping deletes the records it reports as successful."""
        if delivery.idempotency_key is not None:
            await self._free_key(delivery.queue_name, delivery.idempotency_key, delivery.message_id)
        if delete_message:
            await self._delete(delivery.transport, delivery.receipt_handle)

    async def redeliver_after(self, delivery: Delivery, seconds: float) -> None:
        """Deliver the message again after ``seconds``, keeping its id and counting this delivery as an
        attempt: keep its key past the new due time, send the next copy, then delete this one."""
        resend = self._plan_resend(delivery, check_delay(seconds, "seconds"))
        if delivery.idempotency_key is not None:
            await self._extend_key(delivery.queue_name, delivery.idempotency_key, delivery.message_id,
                                   resend.due_epoch)
        await self._replace(resend, delivery.transport, delivery.receipt_handle)

    async def release(self, outcome: Refused | Delivery) -> None:
        """Make a refused (or abandoned) message visible again now, for a poller that shares the queue with
        consumers of other prefixes. Costs a receive count; the Lambda handler reports a failure instead."""
        await self._change_visibility(outcome.transport, outcome.receipt_handle, 0.0)

    async def delete(self, record: Mapping[str, Any]) -> None:
        """Delete a record that is done with (what Lambda's event source mapping does to a successful one)."""
        receipt = self._receipt(record)
        await self._delete(receipt.transport, receipt.receipt_handle)

    def receive_count(self, record: Mapping[str, Any]) -> int:
        """How many times the record has been received since it was last sent, this time included."""
        return self._receipt(record).receive_count

    async def back_off(self, record: Mapping[str, Any], seconds: int) -> None:
        """Make a failed record visible again after ``seconds`` (instead of the queue's visibility timeout)."""
        receipt = self._receipt(record)
        await self._change_visibility(receipt.transport, receipt.receipt_handle, visibility_seconds(seconds))

    async def dead_letter(self, record: Mapping[str, Any], reason: str) -> bool:
        """Move a record that can never succeed to the dead-letter queue now; False when there is none."""
        return await self._dead_letter(self._receipt(record), reason)

    # -- shared by the protocol and a World's own paths ------------------------------------------------------

    async def _replace(self, resend: Resend, transport: Any, receipt_handle: str) -> None:
        """Send the next copy, then delete this one: a crash in between duplicates, never loses, the message."""
        await self._send_copy(resend)
        await self._delete(transport, receipt_handle)

    # -- the transport: what each World implements -----------------------------------------------------------

    @abstractmethod
    def _receipt(self, record: Mapping[str, Any]) -> Receipt:
        """This receive of ``record``; a record of another transport is a 400."""

    @abstractmethod
    async def _read(self, record: Mapping[str, Any]) -> Received | SkippedT:
        """Whose message the record carries, or an outcome already final (a body that is not one of ours)."""

    @abstractmethod
    async def _load(self, received: Received) -> Loaded | SkippedT:
        """The payload of a message under this consumer's prefix (or an outcome that stops short of a delivery)."""

    @abstractmethod
    async def _delete(self, transport: Any, receipt_handle: str) -> None:
        """Delete the message received under ``receipt_handle`` (a stale handle changes nothing)."""

    @abstractmethod
    async def _change_visibility(self, transport: Any, receipt_handle: str, seconds: float) -> None:
        """Make the message received under ``receipt_handle`` visible again after ``seconds``."""

    @abstractmethod
    def _plan_resend(self, delivery: Delivery, seconds: float) -> Resend:
        """The copy that delivers ``delivery`` again after ``seconds``; a delivery of another transport is a 400."""

    @abstractmethod
    async def _send_copy(self, resend: Resend) -> None:
        """Send the planned copy."""

    @abstractmethod
    async def _free_key(self, queue_name: str, key: str, message_id: str) -> None:
        """Free the key if ``message_id`` still holds it (``queue_keys.frees``)."""

    @abstractmethod
    async def _extend_key(self, queue_name: str, key: str, message_id: str, due_epoch: float) -> None:
        """Keep the key held past a re-sent message's due time (``queue_keys.extended``)."""

    @abstractmethod
    async def _dead_letter(self, receipt: Receipt, reason: str) -> bool:
        """Move the received message to the dead-letter queue now; False when there is none to move it to."""
