"""The in-memory queue, both sides: ``queue``/``queue_batch`` and the consumer ``_worker.delivery`` drives.

One queue holds every prefix's messages, as the one SQS queue does; a consumer per prefix refuses the others'.
Time comes only from ``clock``: a message is visible when ``clock.now() >= visible_at``, so a ``VirtualClock``
that jumps makes delayed messages, back-offs and lapsed visibility timeouts due at once (delays of any length are
one scheduled time: SQS needs 15-minute hops, memory does not). Messages not yet visible sit in a heap by
``visible_at``, visible ones in a FIFO; rescheduling bumps a message's ``generation`` instead of searching the
heap, so the entries it left behind are skipped when they come up.

A send is checked by the contract's rules (``world.queue``) and is one synchronous step, so an idempotency key's
marker is born confirmed; when a repeated key answers with its holder's id, what an ack or a redelivery does to
it and when it lapses are ``world.queue_keys``'s decisions, applied here to a dict. The consumer is
``world.shared.queue_consumer``'s protocol over this queue. Payloads are kept as JSON text: every delivery decodes a
fresh copy, so neither the sender nor a handler can change what the other sees.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import json
import logging
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Never

from ..world import queue_keys
from ..world.clock import Clock
from ..world.errors import InvalidInputError
from ..world.ids import new_ulid
from ..world.limits import DEFAULT_MAX_VALUE_BYTES
from ..world.queue import (
    DEFAULT_DEPLOYMENT_ID,
    QUEUE_MAX_RECEIVE_COUNT,
    QUEUE_RETENTION_SECONDS,
    QUEUE_VISIBILITY_TIMEOUT_SECONDS,
    Delivery,
    QueueBatchResult,
    QueueMessage,
    check_queue_name,
    key_horizon_seconds,
    payload_json,
    queue_visibility_timeout_seconds,
)
from ..world.shared.queue_consumer import Loaded, QueueConsumerBase, Receipt, Received, Resend
from .signal import Signal

log = logging.getLogger("awsworld.queue")

VISIBILITY_TIMEOUT_SECONDS = float(QUEUE_VISIBILITY_TIMEOUT_SECONDS)
"""The visibility timeout with the default flow timeout (a queue made with none takes the deployed one's)."""
RETENTION_SECONDS = float(QUEUE_RETENTION_SECONDS)
"""Only bounds how long an unacknowledged key stays held (as on SQS): nothing here expires a message."""
WAITING, VISIBLE, DELETED = "waiting", "visible", "deleted"


@dataclass(eq=False)
class QueuedMessage:
    """One message for its whole life: rescheduled in place, never copied, so its id stays put."""

    message_id: str
    queue_name: str
    body: str
    created_at: datetime
    idempotency_key: str | None
    deployment_id: str | None
    visible_at: datetime
    transport_id: str  # changes on every (re)send, like SQS's own message id
    attempt: int = 0  # deliveries before the latest (re)send; a delivery's attempt is this plus ``receives``
    receives: int = 0  # since the latest (re)send (SQS's ApproximateReceiveCount)
    receipt: str | None = None  # the latest receive's handle: only it can delete or hide the message
    generation: int = 0
    state: str = WAITING

    def payload(self) -> Any:
        return json.loads(self.body)


class MemoryQueue:
    def __init__(self, clock: Clock, *, deployment_id: str | None = None,
                 visibility_timeout: float | None = None,
                 max_receive_count: int | None = QUEUE_MAX_RECEIVE_COUNT,
                 max_payload_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> None:
        self.clock = clock
        self.deployment_id = deployment_id
        if visibility_timeout is None:  # as the stack's queue: six times the flow timeout
            visibility_timeout = float(queue_visibility_timeout_seconds())
        self.visibility_timeout = visibility_timeout
        self.max_receive_count = max_receive_count
        self.max_payload_bytes = max_payload_bytes
        self.dead_letters: list[tuple[Any, str]] = []
        """(payload, reason) of every message moved to the dead-letter queue, in order."""
        self.sends = 0
        self._markers: dict[tuple[str, str], queue_keys.KeyMarker] = {}
        self._horizon = key_horizon_seconds(RETENTION_SECONDS, visibility_timeout)
        self._live: dict[str, QueuedMessage] = {}
        self._heap: list[tuple[datetime, int, int, QueuedMessage]] = []
        self._visible: deque[tuple[int, QueuedMessage]] = deque()
        self._visible_count = 0
        self._order = itertools.count()
        self._receipts = itertools.count(1)
        self._arrived = Signal()

    # -- the contract ------------------------------------------------------------------------------------

    async def get_deployment_id(self) -> str:
        return self.deployment_id or DEFAULT_DEPLOYMENT_ID

    async def queue(self, queue_name: str, payload: Any, *, idempotency_key: str | None = None,
                    delay_seconds: float | None = None, deployment_id: str | None = None) -> str:
        check_queue_name(queue_name)
        return self._send(queue_name, QueueMessage.of_call(payload, idempotency_key, delay_seconds, deployment_id))

    async def queue_batch(self, queue_name: str,
                          messages: Sequence[QueueMessage | Mapping[str, Any]]) -> list[QueueBatchResult]:
        """One result per input, in order; entries are sent in order, so a key repeated within the batch answers
        with its first entry's id."""
        check_queue_name(queue_name)
        results: list[QueueBatchResult] = []
        for raw in messages:
            try:
                results.append(QueueBatchResult(message_id=self._send(queue_name, QueueMessage.parse(raw))))
            except InvalidInputError as error:
                results.append(QueueBatchResult(error=error.message, retryable=False))
        return results

    def consumer(self, prefix: str) -> MemoryConsumer:
        """The consuming side for one queue prefix (``__wkf_workflow_`` or a namespace's)."""
        return MemoryConsumer(self, prefix)

    # -- for a test environment that skips time ------------------------------------------------------------

    def visible_count(self) -> int:
        self._promote()
        return self._visible_count

    def pending_count(self) -> int:
        """Every message not deleted: visible, delayed, or in flight."""
        return len(self._live)

    def next_visible_at(self) -> datetime | None:
        """When the earliest message invisible now (delayed, backing off, in flight) becomes visible."""
        self._promote()
        while self._heap:
            at, _, generation, message = self._heap[0]
            if generation == message.generation and message.state == WAITING:
                return at
            heapq.heappop(self._heap)
        return None

    async def wait_for_visible(self, timeout: float | None) -> bool:
        """True as soon as a message is visible; False when ``timeout`` seconds (None: no limit) pass first."""
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        while not self.visible_count():
            remaining = None if deadline is None else deadline - loop.time()
            if remaining is not None and remaining <= 0:
                return False
            await self._arrived.wait(self._wait_time(remaining))
        return True

    def purge(self) -> int:
        """Delete every message (SQS's ``PurgeQueue``): they are lost, their keys stay held."""
        lost = list(self._live.values())
        for message in lost:
            self._remove(message)
        return len(lost)

    def marker(self, queue_name: str, key: str) -> queue_keys.KeyMarker | None:
        """The key's marker as stored (lapsed ones included, as on AWS until TTL runs)."""
        return self._markers.get((queue_name, key))

    def wake(self) -> None:
        """Wake waiters when moving the clock made messages visible (a ``VirtualClock`` jump tells no one)."""
        if self.visible_count():
            self._arrived.notify()

    # -- what the consumer does --------------------------------------------------------------------------

    def take(self, max_messages: int, visibility_timeout: float | None) -> list[QueuedMessage]:
        """Up to ``max_messages`` visible messages, each now in flight under a new receipt handle."""
        self._promote()
        hidden_for = self.visibility_timeout if visibility_timeout is None else visibility_timeout
        taken: list[QueuedMessage] = []
        while self._visible and len(taken) < max_messages:
            generation, message = self._visible.popleft()
            if generation != message.generation or message.state != VISIBLE:
                continue
            if self.max_receive_count is not None and message.receives >= self.max_receive_count:
                # SQS's redrive policy (a redelivery is a re-send: it starts counting again)
                self._dead_letter(message, f"received {message.receives} times without success (maxReceiveCount)")
                continue
            message.receives += 1
            message.receipt = f"rcpt-{next(self._receipts)}"
            self._schedule(message, self.clock.now() + timedelta(seconds=max(0.0, hidden_for)))
            taken.append(message)
        return taken

    def hide(self, message: QueuedMessage, receipt: str, seconds: float | None) -> None:
        """Make an in-flight message visible after ``seconds`` (0: now; in SQS's range, as the consumer checks),
        or delete it (None); a stale handle changes nothing."""
        if message.receipt != receipt or message.state == DELETED:
            return
        if seconds is None:
            self._remove(message)
        else:
            self._schedule(message, self.clock.now() + timedelta(seconds=seconds))

    def redeliver(self, message: QueuedMessage, attempt: int, due: datetime) -> None:
        """Send the message again, due at ``due``, counting ``attempt`` deliveries so far (a re-send): a new
        transport id, the receive count from zero."""
        message.attempt, message.receives, message.receipt = attempt, 0, None
        message.transport_id = _transport_id()
        if message.state == DELETED:
            message.state = WAITING
            self._live[message.message_id] = message
        self._schedule(message, due)

    def release_key(self, queue_name: str, key: str, message_id: str) -> None:
        """Free the key if ``message_id`` still holds it (``queue_keys.frees``)."""
        if queue_keys.frees(self._markers.get((queue_name, key)), message_id):
            del self._markers[(queue_name, key)]

    def extend_key(self, queue_name: str, key: str, message_id: str, due_epoch: float) -> None:
        """Keep the key held past a re-sent message's due time (``queue_keys.extended``)."""
        kept = queue_keys.extended(self._markers.get((queue_name, key)), message_id,
                                   queue_keys.live_until(due_epoch, self._horizon))
        if kept is not None:
            self._markers[(queue_name, key)] = kept

    def dead_letter(self, message: QueuedMessage, receipt: str, reason: str) -> None:
        if message.receipt == receipt and message.state != DELETED:
            self._dead_letter(message, reason)

    # -- internals -------------------------------------------------------------------------------------------

    def _send(self, queue_name: str, message: QueueMessage) -> str:
        """Checked in the contract's order (delay, key, payload), then deduplicated, then scheduled."""
        delay, key = message.checked()
        body = payload_json(message.payload, self.max_payload_bytes)
        now = self.clock.now()
        if key is not None:
            holder = queue_keys.holder(self._markers.get((queue_name, key)), now.timestamp())
            if holder is not None:
                return holder.message_id
        due = now + timedelta(seconds=delay)
        queued = QueuedMessage(f"msg_{new_ulid()}", queue_name, body, now, key,
                               message.deployment_id or self.deployment_id, due, _transport_id())
        if key is not None:
            self._markers[(queue_name, key)] = queue_keys.KeyMarker(
                queued.message_id, queue_keys.live_until(due.timestamp(), self._horizon))
        self._live[queued.message_id] = queued
        self.sends += 1
        self._schedule(queued, due)
        return queued.message_id

    def _dead_letter(self, message: QueuedMessage, reason: str) -> None:
        self.dead_letters.append((message.payload(), reason))
        self._remove(message)
        log.error("undeliverable queue message %s moved to the dead-letter list: %s", message.message_id, reason)

    def _remove(self, message: QueuedMessage) -> None:
        if message.state == VISIBLE:
            self._visible_count -= 1
        message.state = DELETED
        message.generation += 1
        self._live.pop(message.message_id, None)

    def _schedule(self, message: QueuedMessage, visible_at: datetime) -> None:
        message.generation += 1
        if message.state == VISIBLE:
            self._visible_count -= 1
        message.visible_at = visible_at
        if visible_at <= self.clock.now():
            self._make_visible(message)
            self._arrived.notify()
        else:
            message.state = WAITING
            heapq.heappush(self._heap, (visible_at, next(self._order), message.generation, message))

    def _make_visible(self, message: QueuedMessage) -> None:
        message.state = VISIBLE
        self._visible.append((message.generation, message))
        self._visible_count += 1

    def _promote(self) -> None:
        """Move every message whose time has come from the heap to the visible FIFO."""
        heap, now = self._heap, self.clock.now()
        while heap and heap[0][0] <= now:
            _, _, generation, message = heapq.heappop(heap)
            if generation == message.generation and message.state == WAITING:
                self._make_visible(message)

    def _wait_time(self, limit: float | None) -> float | None:
        """``limit``, or less when a delayed message falls due sooner (in clock seconds)."""
        due = self.next_visible_at()
        if due is None:
            return limit
        until = max(0.001, (due - self.clock.now()).total_seconds())
        return until if limit is None else min(limit, until)


class MemoryRecord(dict[str, Any]):
    """One receive of one message, shaped like an SQS ReceiveMessage record (what ``Consumer`` takes), with
    what that receive was, as the shared consumer reads it (``receipt``: its handle and receive count;
    ``received``: whose message it is and the deliveries before it was last sent)."""

    def __init__(self, message: QueuedMessage) -> None:
        super().__init__(MessageId=message.transport_id, ReceiptHandle=message.receipt,
                         Attributes={"ApproximateReceiveCount": str(message.receives)})
        self.message = message
        self.receipt = Receipt(self, message.receipt or "", message.receives)
        self.received = Received(message.message_id, message.queue_name, message.transport_id, self.receipt, self,
                                 message.created_at, message.idempotency_key, message.deployment_id, message.attempt)


class MemoryConsumer(QueueConsumerBase[Never]):
    """``world.shared.queue_consumer``'s protocol over this queue; every transport state (a delivery's, a refusal's) is
    the ``MemoryRecord`` received. There are no hops and no foreign bodies in memory: every message was checked
    when it was sent."""

    def __init__(self, queue: MemoryQueue, prefix: str) -> None:
        super().__init__(prefix)
        self.queue = queue

    async def receive(self, max_messages: int = 10, wait_seconds: float = 0.0,
                      visibility_timeout: float | None = None) -> list[MemoryRecord]:
        """Visible messages of any prefix, now in flight; with ``wait_seconds``, waits (real time, woken by
        sends) for one when none is visible."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + max(0.0, wait_seconds)
        while True:
            taken = self.queue.take(max(1, max_messages), visibility_timeout)
            remaining = deadline - loop.time()
            if taken or remaining <= 0:
                return [MemoryRecord(message) for message in taken]
            await self.queue.wait_for_visible(remaining)

    # -- the transport -----------------------------------------------------------------------------------

    def _receipt(self, record: Mapping[str, Any]) -> Receipt:
        return _record(record).receipt

    async def _read(self, record: Mapping[str, Any]) -> Received:
        return _record(record).received

    async def _load(self, received: Received) -> Loaded:
        return Loaded(_transport(received.message).message.payload())

    async def _delete(self, transport: Any, receipt_handle: str) -> None:
        self.queue.hide(_transport(transport).message, receipt_handle, None)

    async def _change_visibility(self, transport: Any, receipt_handle: str, seconds: float) -> None:
        self.queue.hide(_transport(transport).message, receipt_handle, seconds)

    def _plan_resend(self, delivery: Delivery, seconds: float) -> Resend:
        due = self.queue.clock.now() + timedelta(seconds=seconds)
        return Resend(due.timestamp(), (_transport(delivery.transport).message, delivery.attempt, due))

    async def _send_copy(self, resend: Resend) -> None:
        message, attempt, due = resend.copy
        self.queue.redeliver(message, attempt, due)

    async def _free_key(self, queue_name: str, key: str, message_id: str) -> None:
        self.queue.release_key(queue_name, key, message_id)

    async def _extend_key(self, queue_name: str, key: str, message_id: str, due_epoch: float) -> None:
        self.queue.extend_key(queue_name, key, message_id, due_epoch)

    async def _dead_letter(self, receipt: Receipt, reason: str) -> bool:
        self.queue.dead_letter(_transport(receipt.transport).message, receipt.receipt_handle, reason)
        return True


def _record(record: Mapping[str, Any]) -> MemoryRecord:
    if not isinstance(record, MemoryRecord):
        raise InvalidInputError("not a record of this in-memory queue", field="record")
    return record


def _transport(transport: Any) -> MemoryRecord:
    if not isinstance(transport, MemoryRecord):
        raise InvalidInputError("needs a Delivery that an in-memory consumer opened", field="delivery")
    return transport


_transport_ids = itertools.count(1)


def _transport_id() -> str:
    """Unique in the process, cheap (a ULID costs more than the rest of a send)."""
    return f"mem-{next(_transport_ids)}"
