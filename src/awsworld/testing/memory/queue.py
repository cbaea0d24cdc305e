"""The in-memory queue: ``queue``/``queue_batch`` with the AWS World's rules, on the World's clock.

One queue holds every prefix's messages, as the one SQS queue does; a consumer per prefix refuses the others'
(``queue_consumer.py``). Time comes only from ``clock``: a message is visible when ``clock.now() >=
visible_at``, so a ``VirtualClock`` that jumps forward makes delayed messages, back-offs and lapsed visibility
timeouts due at once. Delays of any length are one scheduled time (SQS needs 15-minute hops; memory does not).

Cost per send or receive is O(log n): messages not yet visible sit in a heap by ``visible_at``, visible ones
in a FIFO. Rescheduling a message bumps its ``generation`` instead of searching the heap, so entries it left
behind are recognised as stale and skipped when they come up.

Payloads are kept as their JSON text: sending checks them exactly as the AWS World's envelope does (same
errors), and every delivery decodes a fresh copy, so neither the sender nor a handler can change what the
other sees.
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
from typing import TYPE_CHECKING, Any

from ...world.clock import Clock
from ...world.errors import InvalidInputError, PayloadTooLargeError
from ...world.ids import new_ulid
from ...world.limits import DEFAULT_MAX_VALUE_BYTES
from ...world.queue import QueueBatchResult, QueueMessage, check_delay, check_idempotency_key, check_queue_name
from .dedup import DedupMarkers
from .signal import Signal

if TYPE_CHECKING:
    from .queue_consumer import MemoryConsumer

log = logging.getLogger("awsworld.queue")

VISIBILITY_TIMEOUT_SECONDS = 720.0
"""The template's: six times the flow function's 120 s timeout."""
RETENTION_SECONDS = 4 * 24 * 3600.0
"""SQS retention in the template; only bounds how long an unacknowledged key stays held (as on AWS)."""
MAX_RECEIVE_COUNT = 10
"""The template's redrive policy: a message received this often since it was last sent goes to the DLQ."""
MAX_VISIBILITY_SECONDS = 43_200
MAX_PAYLOAD_BYTES = DEFAULT_MAX_VALUE_BYTES
"""AWSWORLD_MAX_VALUE_BYTES's default: the largest payload the AWS World takes (it rides in S3)."""
MESSAGE_ID_PREFIX = "msg_"

WAITING, VISIBLE, DELETED = "waiting", "visible", "deleted"


def encode_payload(payload: Any) -> str:
    """The payload as JSON text, or the AWS World's 400 for one that is not JSON."""
    try:
        return json.dumps(payload, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"payload is not JSON-serializable: {exc}", field="payload") from None


@dataclass(eq=False)
class QueuedMessage:
    """One message for its whole life: it is rescheduled in place, never copied, so its id stays put."""

    message_id: str
    queue_name: str
    body: str
    created_at: datetime
    idempotency_key: str | None
    deployment_id: str | None
    visible_at: datetime
    transport_id: str
    """Changes on every (re)send, like SQS's own message id."""
    attempt: int = 0
    """Deliveries before the latest (re)send; a delivery's attempt is this plus ``receives``."""
    receives: int = 0
    """Receives since the latest (re)send (SQS's ApproximateReceiveCount)."""
    receipt: str | None = None
    """The latest receive's handle: only it can delete the message or change its visibility."""
    generation: int = 0
    state: str = WAITING

    def payload(self) -> Any:
        return json.loads(self.body)


class MemoryQueue:
    def __init__(self, clock: Clock, *, deployment_id: str | None = None,
                 visibility_timeout: float = VISIBILITY_TIMEOUT_SECONDS,
                 max_receive_count: int | None = MAX_RECEIVE_COUNT,
                 max_payload_bytes: int = MAX_PAYLOAD_BYTES) -> None:
        self.clock = clock
        self.deployment_id = deployment_id
        self.visibility_timeout = visibility_timeout
        self.max_receive_count = max_receive_count
        self.max_payload_bytes = max_payload_bytes
        self.dedup = DedupMarkers(clock, horizon_seconds=RETENTION_SECONDS + visibility_timeout)
        self.dead_letters: list[tuple[Any, str]] = []
        """(payload, reason) of every message moved to the dead-letter queue, in order."""
        self.sends = 0
        self._live: dict[str, QueuedMessage] = {}
        self._heap: list[tuple[datetime, int, int, QueuedMessage]] = []
        self._visible: deque[tuple[int, QueuedMessage]] = deque()
        self._visible_count = 0
        self._order = itertools.count()
        self._receipts = itertools.count(1)
        self._arrived = Signal()
        self._good_names: set[str] = set()

    # -- the contract ------------------------------------------------------------------------------------

    async def get_deployment_id(self) -> str:
        return self.deployment_id or "local"

    async def queue(self, queue_name: str, payload: Any, *, idempotency_key: str | None = None,
                    delay_seconds: float | None = None, deployment_id: str | None = None) -> str:
        """Send one message; return its id. With an idempotency key whose message is still live, send nothing
        and return that message's id."""
        self._check_name(queue_name)
        message = QueueMessage.parse({"payload": payload, "idempotency_key": idempotency_key,
                                      "delay_seconds": delay_seconds, "deployment_id": deployment_id})
        return self._send(queue_name, message)

    async def queue_batch(self, queue_name: str,
                          messages: Sequence[QueueMessage | Mapping[str, Any]]) -> list[QueueBatchResult]:
        """One result per input, in input order; a rejected entry is reported, not raised. Entries are sent in
        order, so a key repeated within the batch answers with its first entry's id."""
        self._check_name(queue_name)
        results: list[QueueBatchResult] = []
        for raw in messages:
            try:
                message_id = self._send(queue_name, QueueMessage.parse(raw))
            except InvalidInputError as error:
                results.append(QueueBatchResult(error=error.message, retryable=False))
            else:
                results.append(QueueBatchResult(message_id=message_id))
        return results

    def consumer(self, prefix: str) -> MemoryConsumer:
        """The consuming side for one queue prefix (``__wkf_workflow_`` or a namespace's)."""
        from .queue_consumer import MemoryConsumer

        return MemoryConsumer(self, prefix)

    # -- for a test environment that skips time ------------------------------------------------------------

    def visible_count(self) -> int:
        """Messages a receive would hand out now."""
        self._promote()
        return self._visible_count

    def pending_count(self) -> int:
        """Every message not deleted: visible, delayed, or in flight."""
        return len(self._live)

    def next_visible_at(self) -> datetime | None:
        """When the earliest message that is invisible now (delayed, backing off, or in flight) becomes
        visible; None when there is none."""
        self._promote()
        while self._heap:
            at, _, generation, message = self._heap[0]
            if generation == message.generation and message.state == WAITING:
                return at
            heapq.heappop(self._heap)
        return None

    async def wait_for_visible(self, timeout: float | None) -> bool:
        """True as soon as a message is visible (now, after a send or redelivery, or when a delay runs out in
        the clock's real-time pace); False when ``timeout`` seconds (None: no limit) passed first."""
        deadline = None if timeout is None else _loop_time() + timeout
        while True:
            if self.visible_count():
                return True
            remaining = None if deadline is None else deadline - _loop_time()
            if remaining is not None and remaining <= 0:
                return False
            await self._arrived.wait(self._wait_time(remaining))

    def purge(self) -> int:
        """Delete every message, visible, delayed or in flight (SQS's ``PurgeQueue``, or a queue recreated):
        the messages are lost; their dedup markers stay, as the AWS World's items do. Returns how many went."""
        lost = list(self._live.values())
        for message in lost:
            self._remove(message)
        return len(lost)

    def wake(self) -> None:
        """Wake receivers and ``wait_for_visible`` callers when moving the clock made messages visible (a
        ``VirtualClock`` jump tells no one)."""
        if self.visible_count():
            self._arrived.notify()

    # -- shared with the consumer --------------------------------------------------------------------------

    def take(self, max_messages: int, visibility_timeout: float | None) -> list[tuple[QueuedMessage, str]]:
        """Up to ``max_messages`` visible messages, each now in flight under a new receipt handle."""
        self._promote()
        hidden_for = self.visibility_timeout if visibility_timeout is None else visibility_timeout
        taken: list[tuple[QueuedMessage, str]] = []
        while self._visible and len(taken) < max_messages:
            generation, message = self._visible.popleft()
            if generation != message.generation or message.state != VISIBLE:
                continue
            if self.max_receive_count is not None and message.receives >= self.max_receive_count:
                # SQS's redrive policy: a message that keeps failing leaves the queue instead of coming back
                # for ever (a redelivery is a re-send, so it starts counting again, as on AWS).
                self._dead_letter(message, f"received {message.receives} times without success (maxReceiveCount)")
                continue
            message.receives += 1
            message.receipt = f"rcpt-{next(self._receipts)}"
            self._schedule(message, self.clock.now() + timedelta(seconds=max(0.0, hidden_for)))
            taken.append((message, message.receipt))
        return taken

    async def wait_for_arrival(self, timeout: float) -> None:
        """Wait until a message may be visible: a send or redelivery, or the earliest delay running out."""
        await self._arrived.wait(self._wait_time(timeout))

    def delete(self, message: QueuedMessage, receipt: str) -> bool:
        """Delete the message if ``receipt`` is its latest receive's; a stale handle changes nothing."""
        if message.receipt != receipt or message.state == DELETED:
            return False
        self._remove(message)
        return True

    def change_visibility(self, message: QueuedMessage, receipt: str, seconds: float) -> bool:
        """Make an in-flight message visible after ``seconds`` (0: now); a stale handle changes nothing."""
        if message.receipt != receipt or message.state == DELETED:
            return False
        seconds = max(0.0, min(float(MAX_VISIBILITY_SECONDS), seconds))
        self._schedule(message, self.clock.now() + timedelta(seconds=seconds))
        return True

    def redeliver(self, message: QueuedMessage, attempt: int, seconds: float) -> None:
        """Send the message again after ``seconds``, counting ``attempt`` deliveries so far (what the AWS
        World's re-send does): new transport id, receive count from zero, its key held past the new due time."""
        message.attempt = attempt
        message.receives = 0
        message.receipt = None
        message.transport_id = _transport_id()
        if message.state == DELETED:
            message.state = WAITING
            self._live[message.message_id] = message
        due = self.clock.now() + timedelta(seconds=seconds)
        if message.idempotency_key is not None:
            self.dedup.extend(message.queue_name, message.idempotency_key, message.message_id, due)
        self._schedule(message, due)

    def dead_letter(self, message: QueuedMessage, receipt: str, reason: str) -> None:
        """Move a received message that can never succeed to ``dead_letters`` (a stale handle changes nothing)."""
        if message.receipt == receipt and message.state != DELETED:
            self._dead_letter(message, reason)

    # -- internals -------------------------------------------------------------------------------------------

    def _check_name(self, queue_name: str) -> None:
        """``check_queue_name``, remembered: a World sends to a handful of names, and checking one costs more
        than the rest of a send."""
        if queue_name in self._good_names:
            return
        check_queue_name(queue_name)
        if len(self._good_names) > 10_000:
            self._good_names.clear()
        self._good_names.add(queue_name)

    def _send(self, queue_name: str, message: QueueMessage) -> str:
        """Validate in the AWS World's order (delay, key, payload), then dedup, then schedule. Synchronous:
        two sends with one key can never both get through."""
        delay = check_delay(message.delay_seconds)
        key = check_idempotency_key(message.idempotency_key)
        body = encode_payload(message.payload)
        if len(body) > self.max_payload_bytes // 4 and len(body.encode("utf-8")) > self.max_payload_bytes:
            raise PayloadTooLargeError(f"queue payload is {len(body.encode('utf-8'))} bytes; the largest is "
                                       f"{self.max_payload_bytes}", field="payload")
        if key is not None:
            holder = self.dedup.holder(queue_name, key)
            if holder is not None:
                return holder
        now = self.clock.now()
        due = now + timedelta(seconds=delay)
        queued = QueuedMessage(
            message_id=f"{MESSAGE_ID_PREFIX}{new_ulid()}", queue_name=queue_name, body=body, created_at=now,
            idempotency_key=key, deployment_id=message.deployment_id or self.deployment_id, visible_at=due,
            transport_id=_transport_id(),
        )
        if key is not None:
            self.dedup.hold(queue_name, key, queued.message_id, due)
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
        heap = self._heap
        if not heap:
            return
        now = self.clock.now()
        while heap and heap[0][0] <= now:
            _, _, generation, message = heapq.heappop(heap)
            if generation == message.generation and message.state == WAITING:
                self._make_visible(message)

    def _wait_time(self, limit: float | None) -> float | None:
        """How long to sleep: ``limit``, or less when a delayed message falls due sooner (in clock seconds,
        which a ``VirtualClock`` runs at real pace between jumps)."""
        due = self.next_visible_at()
        if due is None:
            return limit
        until = max(0.001, (due - self.clock.now()).total_seconds())
        return until if limit is None else min(limit, until)


_transport_ids = itertools.count(1)


def _transport_id() -> str:
    """Unique in the process, cheap (a ULID costs more than the rest of a send)."""
    return f"mem-{next(_transport_ids)}"


def _loop_time() -> float:
    return asyncio.get_running_loop().time()
