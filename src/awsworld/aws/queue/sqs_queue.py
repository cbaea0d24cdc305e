"""The publishing side of the queue: ``queue`` and ``queue_batch`` on one standard SQS queue.

Delays up to one hop (SQS's 900 s ``DelaySeconds`` cap, or less when configured) are SQS delays. A longer
delay is written into the envelope as ``dueAt`` and sent with one hop's delay; the consumer re-sends the
remainder until it is due (see ``deliveries.py``), so such a message costs a delivery per 15 minutes and never
wakes user code early. A flow sends none for its own timers (a sleep of days): the watch index brings the run
before such a timer instead (``world.watch.beyond_reach``); hops remain for any other sender's long delay.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from ...world.errors import InvalidInputError, WorldError
from ...world.queue import (
    DEFAULT_DEPLOYMENT_ID,
    QueueBatchResult,
    QueueMessage,
    check_payload_size,
    check_queue_name,
)
from ...world.queue_keys import KeyMarker
from ..clients import AWSClients
from ..resources import MAX_SQS_DELAY_SECONDS, QUEUE_RETENTION_SECONDS
from .dedup import Claim, DedupMarkers
from .deliveries import QueueConsumer
from .queue_envelope import INLINE_BODY_LIMIT, Envelope, QueuePayloads, from_epoch, new_message_id
from .sqs_errors import sqs_error

log = logging.getLogger("awsworld.queue")

MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024 - 1024  # SQS caps a batch's bodies at 256 KiB in total; keep a margin
@dataclass
class _Entry:
    """One message on its way out."""

    index: int
    envelope: Envelope
    delay: int
    body: str = ""
    """The message's body as sent: until ``fit``, the envelope's JSON when it may ride inline, else ""."""
    leader: int | None = None
    """For a repeated idempotency key within one batch: the index of the entry that sends it."""


class SqsQueue:
    """``queue``/``queue_batch`` plus the sending helpers the consumer shares (hops and redeliveries)."""

    def __init__(
        self,
        clients: AWSClients,
        *,
        queue_url: str | None = None,
        dlq_url: str | None = None,
        max_hop_seconds: int = MAX_SQS_DELAY_SECONDS,
        retention_seconds: int = QUEUE_RETENTION_SECONDS,
        visibility_seconds: int | None = None,
        inline_body_limit: int = INLINE_BODY_LIMIT,
        max_parallel_sends: int = 16,
        clock: Callable[[], float] = time.time,
        dedup_lease_seconds: float | None = None,
    ) -> None:
        if not 1 <= max_hop_seconds <= MAX_SQS_DELAY_SECONDS:
            raise ValueError(f"max_hop_seconds must be between 1 and {MAX_SQS_DELAY_SECONDS}")
        self.clients = clients
        self.queue_url = queue_url or clients.config.queue_url
        self.dlq_url = dlq_url or clients.config.dlq_url
        self.max_hop_seconds = max_hop_seconds
        self.clock = clock
        self.dedup = DedupMarkers(clients, retention_seconds=retention_seconds,
                                  visibility_seconds=visibility_seconds, clock=clock,
                                  lease_seconds=dedup_lease_seconds)
        self.payloads = QueuePayloads(clients, inline_limit=inline_body_limit)
        self._sends = asyncio.Semaphore(max_parallel_sends)

    # -- the contract ------------------------------------------------------------------------------------

    async def get_deployment_id(self) -> str:
        return self.clients.config.deployment_id or DEFAULT_DEPLOYMENT_ID

    async def queue(self, queue_name: str, payload: Any, *, idempotency_key: str | None = None,
                    delay_seconds: float | None = None, deployment_id: str | None = None) -> str:
        """Send one message; return its id. With an idempotency key whose message is still queued or in
        flight, send nothing and return that message's id."""
        check_queue_name(queue_name)
        entry = self._entry(0, queue_name, QueueMessage.of_call(payload, idempotency_key, delay_seconds,
                                                                 deployment_id))
        key = entry.envelope.idempotency_key
        if key is not None:
            holder = await self.dedup.claim(self._claim(entry))
            if holder is not None:
                return holder
        try:
            entry.envelope, entry.body = await self.payloads.fit(entry.envelope, entry.body)
            await self.send_body(entry.body, entry.delay)
        except BaseException:
            if key is not None:
                await asyncio.shield(self.dedup.release(queue_name, key, entry.envelope.message_id))
            raise
        if key is not None:
            await self.dedup.confirm([self._claim(entry)])
        return entry.envelope.message_id

    async def queue_batch(self, queue_name: str,
                          messages: Sequence[QueueMessage | Mapping[str, Any]]) -> list[QueueBatchResult]:
        """One result per input, in input order; a rejected entry is reported, not raised. Raises only when
        no SendMessageBatch call got through, so nothing can be said about any message."""
        check_queue_name(queue_name)
        results: list[QueueBatchResult | None] = [None] * len(messages)
        entries: list[_Entry] = []
        leaders: dict[str, _Entry] = {}
        for index, raw in enumerate(messages):
            try:
                entry = self._entry(index, queue_name, QueueMessage.parse(raw))
            except InvalidInputError as error:
                results[index] = QueueBatchResult(error=error.message, retryable=False)
                continue
            key = entry.envelope.idempotency_key
            if key is not None and key in leaders:
                entry.leader = leaders[key].index
            elif key is not None:
                leaders[key] = entry
            entries.append(entry)

        held = await self._claim_batch([e for e in entries if e.leader is None], results)
        to_send = [e for e in entries if e.leader is None and results[e.index] is None and e.index not in held]
        through, failure = await self._publish(to_send, results)
        if failure is not None and not through:
            raise failure
        if held:
            # Keys other senders hold are settled only now: this batch's own messages are sent and confirmed
            # first, so two batches that each hold keys the other wants never wait on each other.
            taken = await self._settle(entries, held, results)
            more, failure = await self._publish(taken, results)
            if failure is not None and not through + more:
                raise failure
        for entry in entries:
            if entry.leader is not None:
                results[entry.index] = results[entry.leader]
        assert all(r is not None for r in results)
        return [r for r in results if r is not None]

    def consumer(self, prefix: str) -> QueueConsumer:
        """The consuming side for one queue prefix (``__wkf_workflow_`` or a namespace's)."""
        return QueueConsumer(self, prefix)

    # -- shared with the consumer --------------------------------------------------------------------------

    def plan_delay(self, delay: float) -> tuple[int, datetime | None]:
        """SQS DelaySeconds for a delay, and the due time when it takes more than one hop."""
        if delay <= self.max_hop_seconds:
            return math.ceil(delay), None
        return self.max_hop_seconds, from_epoch(self.clock() + delay)

    def hop_for(self, due_at: datetime) -> int:
        """The next hop towards ``due_at``: rounded up, so a message never arrives before it is due."""
        return max(1, min(self.max_hop_seconds, math.ceil(due_at.timestamp() - self.clock())))

    async def send_body(self, body: str, delay: int) -> str:
        sqs = await self.clients.sqs()
        try:
            async with self._sends:
                response = await sqs.send_message(QueueUrl=self.url, MessageBody=body, DelaySeconds=delay)
        except ClientError as error:
            raise sqs_error(error, "SendMessage") from error
        return str(response["MessageId"])

    @property
    def url(self) -> str:
        """The queue's URL (``AWSConfig.queue_url`` unless given); a ``WorldError`` when none is configured."""
        if not self.queue_url:
            raise WorldError("no SQS queue is configured: set AWSWORLD_QUEUE_URL (AWSConfig.queue_url)")
        return self.queue_url

    # -- internals -------------------------------------------------------------------------------------------

    def _entry(self, index: int, queue_name: str, message: QueueMessage) -> _Entry:
        delay_seconds, key = message.checked()
        delay, due_at = self.plan_delay(delay_seconds)
        envelope = Envelope(
            message_id=new_message_id(), queue_name=queue_name, created_at=from_epoch(self.clock()),
            due_at=due_at, idempotency_key=key,
            deployment_id=message.deployment_id or self.clients.config.deployment_id, payload=message.payload,
        )
        entry = _Entry(index, envelope, delay)
        check_payload_size(message.payload, self.clients.config.max_value_bytes)  # (before its JSON, when it can)
        body = envelope.to_body()  # fails early (a 400) on a payload that is not JSON
        # A body too long to ride inline is not kept: ``fit`` sizes the payload on its own text (refused past the
        # bound before its bytes are made), so a payload over the bound is not held twice meanwhile.
        entry.body = body if len(body) <= self.payloads.inline_limit else ""
        return entry

    def _claim(self, entry: _Entry) -> Claim:
        envelope = entry.envelope
        due = envelope.due_at.timestamp() if envelope.due_at else self.clock() + entry.delay
        assert envelope.idempotency_key is not None
        return Claim(envelope.queue_name, envelope.idempotency_key, envelope.message_id, due)

    async def _claim_batch(self, entries: list[_Entry],
                           results: list[QueueBatchResult | None]) -> dict[int, KeyMarker]:
        """Claim the keyed entries' keys; the ones another message holds, by entry index (to ``_settle``)."""
        keyed = [e for e in entries if e.envelope.idempotency_key is not None]
        if not keyed:
            return {}
        holders = await self.dedup.claim_many([self._claim(e) for e in keyed])
        failure = next((h for h in holders if isinstance(h, BaseException) and not isinstance(h, WorldError)), None)
        if failure is not None:  # nothing is sent: free the keys this batch did claim before saying so
            await self._release([e for e, h in zip(keyed, holders, strict=True) if h is None])
            raise failure
        held: dict[int, KeyMarker] = {}
        for entry, holder in zip(keyed, holders, strict=True):
            if isinstance(holder, WorldError):
                results[entry.index] = QueueBatchResult(error=holder.message, retryable=True)
            elif isinstance(holder, KeyMarker):
                held[entry.index] = holder
        return held

    async def _settle(self, entries: list[_Entry], held: dict[int, KeyMarker],
                      results: list[QueueBatchResult | None]) -> list[_Entry]:
        """Wait for the holders of held keys (briefly, see ``DedupMarkers.settle``): a confirmed holder's id is
        the entry's result; a key that turned out free is now this batch's, and its entry is returned to send."""
        waiting = [e for e in entries if e.index in held]
        outcomes = await asyncio.gather(*(self.dedup.settle(self._claim(e), held[e.index]) for e in waiting),
                                        return_exceptions=True)
        taken = []
        for entry, outcome in zip(waiting, outcomes, strict=True):
            if isinstance(outcome, WorldError):
                results[entry.index] = QueueBatchResult(error=outcome.message, retryable=True)
            elif isinstance(outcome, Exception):  # messages of this batch went out: report, do not raise
                results[entry.index] = QueueBatchResult(error=f"idempotency key check failed: {outcome}",
                                                        retryable=True)
            elif isinstance(outcome, BaseException):
                raise outcome
            elif outcome is not None:
                results[entry.index] = QueueBatchResult(message_id=outcome)
            else:
                taken.append(entry)
        return taken

    async def _publish(self, entries: list[_Entry], results: list[QueueBatchResult | None]
                       ) -> tuple[int, BaseException | None]:
        """Fit, send and confirm: how many SendMessageBatch calls got through, and the first that did not."""
        await asyncio.gather(*(self._fit(entry, results) for entry in entries))
        to_send = [e for e in entries if results[e.index] is None]
        through, failure = await self._send_batches(to_send, results)
        sent = [e for e in to_send if e.envelope.idempotency_key is not None and results[e.index] is not None
                and results[e.index].ok]  # type: ignore[union-attr]
        if sent:
            await self.dedup.confirm([self._claim(e) for e in sent])
        return through, failure

    async def _fit(self, entry: _Entry, results: list[QueueBatchResult | None]) -> None:
        try:
            entry.envelope, entry.body = await self.payloads.fit(entry.envelope, entry.body)
        except InvalidInputError as error:
            results[entry.index] = QueueBatchResult(error=error.message, retryable=False)
        except ClientError as error:
            results[entry.index] = QueueBatchResult(error=f"payload upload failed: {error}", retryable=True)
        if results[entry.index] is not None:
            await self._release([entry])

    async def _send_batches(self, entries: list[_Entry], results: list[QueueBatchResult | None]
                            ) -> tuple[int, BaseException | None]:
        """Send in batches (10 entries, 256 KiB at most); every entry gets its result, and the keys of the ones
        not sent are freed. Returns how many SendMessageBatch calls got through, and the first that did not."""
        batches: list[list[_Entry]] = []
        size = 0
        for entry in entries:
            length = len(entry.body.encode("utf-8"))
            if not batches or len(batches[-1]) == MAX_BATCH_ENTRIES or size + length > MAX_BATCH_BYTES:
                batches.append([])
                size = 0
            batches[-1].append(entry)
            size += length
        outcomes = await asyncio.gather(*(self._send_batch(b, results) for b in batches), return_exceptions=True)
        failures = [o for o in outcomes if isinstance(o, BaseException)]
        for batch, outcome in zip(batches, outcomes, strict=True):
            if isinstance(outcome, BaseException):
                for entry in batch:
                    results[entry.index] = QueueBatchResult(error=f"SendMessageBatch failed: {outcome}",
                                                            retryable=True)
                await self._release(batch)
        return len(batches) - len(failures), failures[0] if failures else None

    async def _send_batch(self, batch: list[_Entry], results: list[QueueBatchResult | None]) -> None:
        sqs = await self.clients.sqs()
        request = [{"Id": str(n), "MessageBody": e.body, "DelaySeconds": e.delay} for n, e in enumerate(batch)]
        try:
            async with self._sends:
                response = await sqs.send_message_batch(QueueUrl=self.url, Entries=request)
        except ClientError as error:
            raise sqs_error(error, "SendMessageBatch") from error
        for ok in response.get("Successful", []):
            entry = batch[int(ok["Id"])]
            results[entry.index] = QueueBatchResult(message_id=entry.envelope.message_id)
        rejected = []
        for failed in response.get("Failed", []):
            entry = batch[int(failed["Id"])]
            code = failed.get("Code", "")
            results[entry.index] = QueueBatchResult(error=f"SQS rejected the message ({code})",
                                                    retryable=not failed.get("SenderFault", False))
            rejected.append(entry)
        for entry in batch:
            if results[entry.index] is None:  # neither listed as sent nor as failed
                results[entry.index] = QueueBatchResult(error="SQS did not report this message", retryable=True)
                rejected.append(entry)
        await self._release(rejected)

    async def _release(self, entries: list[_Entry]) -> None:
        """Free the keys of messages that were not sent, so publishing them again is not mistaken for a
        duplicate. Best effort: a marker left behind expires by its ``liveUntil``."""
        jobs = [self.dedup.release(e.envelope.queue_name, e.envelope.idempotency_key, e.envelope.message_id)
                for e in entries if e.envelope.idempotency_key is not None]
        for outcome in await asyncio.gather(*jobs, return_exceptions=True):
            if isinstance(outcome, Exception):
                log.warning("could not free an idempotency key after a failed send: %s", outcome)

