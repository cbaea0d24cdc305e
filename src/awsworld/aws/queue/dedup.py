"""Idempotency-key dedup for the queue: a ``DEDUP#<queue>#<key>`` marker item holding the message id.

A keyed send is claim, send, confirm:

1. **Claim** the marker with a conditional put, as *pending* for a short lease (``AWSWORLD_DEDUP_LEASE_SECONDS``,
   30 s): the sender holds the key while it sends.
2. **Send** the message. A send that fails releases the key at once.
3. **Confirm**: the marker becomes *sent* and lives as long as its message can (its due time plus the queue's
   retention and visibility timeout); the consumer deletes it when it acknowledges the delivery, so the key is
   free again afterwards.

A second send with the key finds the marker. A *sent* marker answers with the original message id (nothing
is sent). A *pending* one is another sender mid-send, or one that crashed between claim and send: the second
sender waits briefly for it to be confirmed and, if it is not, is told to retry (``DedupInDoubtError``, a
retryable 429) rather than being told "already queued" when perhaps nothing was. Once the lease lapses the
claim's condition treats the marker as free. So a crash at any point of a keyed send blocks the key for at
most the lease, never the days a message can live; a crash between send and confirm can at worst let a
later send through twice, which the runtime's fenced storage writes make harmless (at-least-once).

What it costs: three single-item conditional writes per keyed message, none transactional, 1 WRU each for
a marker under 1 KB (a batch claims its keys as parallel PutItems): claim (PutItem), confirm (UpdateItem), and
the consumer's release (DeleteItem). A duplicate costs one refused PutItem. None of the three can go:

- Claim and confirm cannot be one write. A marker written as *sent* before the send (our message id is known
  before it) would hold the key for the message's whole life when the sender dies before sending; one written
  only after the send cannot stop a concurrent sender with the same key from sending too.
- The release cannot be skipped: a confirmed marker lives as long as its message could, so it is always live
  when its delivery is acknowledged, and leaving it would hold the key for days after the acknowledgement.

Nor can the write be saved elsewhere: the release folded into the consumer's transaction (a step's end) would
bill 2 WRU in a transaction for the 1 of a plain delete, and a marker left after the acknowledgement for the
runtime's step messages alone (a flow sends their key, ``<run>:<step>:<attempt>``, again only while the step
has not started) would change when a key is free on every World (``world.queue_keys``: freed at the
acknowledgement), for $0.63 of the fan-out's $6.99 per million steps (``bench/bill.py --only fanout``: 3.00 DEDUP
WRU a step, 27%).

A sender that needs no dedup, because its own storage write refuses a second execution, passes no idempotency
key: no marker, and no DynamoDB request at the send or at the acknowledgement. A step's retry is sent so
(``_worker/dispatch.py``'s ``retry_step_message``: ``step_started`` refuses a second delivery while the step runs
under another message's id). A step's first message is keyed (``_worker/inline_loop.py``): every flow that replays
the run queues again each declared step not started yet, and the key keeps that to one message while the first
lives.

When a key is held, what frees it and how long a marker lives are ``world.queue_keys``'s decisions, the in-memory
World's too; each condition below is one of them written for DynamoDB (its ``liveUntil`` in whole seconds:
``live_until`` rounded up, ``now`` down). Neither SQS FIFO dedup nor TTL expiry is relied on (moto implements
neither faithfully, and TTL deletes whenever it likes): ``liveUntil`` in the claim's condition decides.
``expiresAt`` (TTL) is set a day later, only to keep the table tidy. A marker written before markers had a state
counts as sent.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from ...settings import SETTINGS, Settings
from ...world import queue_keys
from ...world.errors import ThrottledError
from ...world.queue import key_horizon_seconds, queue_visibility_timeout_seconds
from ...world.queue_keys import KeyMarker
from ..clients import AWSClients
from ..dynamodb.items import from_ddb, now_iso, to_ddb, to_ddb_value
from ..dynamodb.reads import get_item
from ..keys import dedup_key
from ..resources import QUEUE_RETENTION_SECONDS, TTL_ATTRIBUTE

MAX_ATTEMPTS = 30
TTL_SLACK_SECONDS = 24 * 3600
LEASE_ENV = Settings.dedup_lease_seconds.env
DEFAULT_LEASE_SECONDS = Settings.dedup_lease_seconds.default
SETTLE_SECONDS = 2.0
"""How long a second sender waits for a pending marker to be confirmed before answering "in doubt"."""
_CLAIM_CONDITION = "attribute_not_exists(pk) OR #liveUntil < :now"
"""``queue_keys.holder(marker, now) is None``: no marker, or one that lapsed."""
_HOLDER_CONDITION = "#messageId = :id"
"""``queue_keys.frees`` (the release) and ``queue_keys.confirmed`` (the confirmation): ``:id`` still holds the key."""
_LONGER_CONDITION = " AND #liveUntil < :live"
"""With ``_HOLDER_CONDITION``, ``queue_keys.extended``: the marker would live longer than it does."""
_PARALLELISM = 32
"""Marker writes of one batch in flight at once (claims, confirmations)."""


class DedupInDoubtError(ThrottledError):
    """Another sender claimed the key and has not confirmed its send: retry once its lease lapses."""


def marker_of(item: dict[str, Any]) -> KeyMarker:
    """A marker item as ``queue_keys`` reads it (one written before markers had a state counts as sent)."""
    return KeyMarker(str(item["messageId"]), int(item.get("liveUntil", 0)), bool(item.get("sent", True)))


@dataclass(frozen=True)
class Claim:
    queue_name: str
    key: str
    message_id: str
    due_epoch: float
    """When the message becomes deliverable (now, or its long delay's due time)."""


def _code(error: ClientError) -> str:
    return str(error.response.get("Error", {}).get("Code", ""))


async def _backoff(attempt: int) -> None:
    await asyncio.sleep(random.uniform(0, min(0.25, 0.005 * 2 ** min(attempt, 6))))


class DedupMarkers:
    def __init__(self, clients: AWSClients, *, retention_seconds: int = QUEUE_RETENTION_SECONDS,
                 visibility_seconds: int | None = None,
                 clock: Callable[[], float] = time.time, lease_seconds: float | None = None) -> None:
        """``visibility_seconds``: the queue's visibility timeout (None: the deployed flow timeout's,
        ``world.queue.queue_visibility_timeout_seconds``), so a key is held while its message may be in flight."""
        self.clients = clients
        if visibility_seconds is None:
            visibility_seconds = queue_visibility_timeout_seconds()
        self.horizon = key_horizon_seconds(retention_seconds, visibility_seconds)
        self.clock = clock
        if lease_seconds is None:
            self.lease = SETTINGS.dedup_lease_seconds
        else:
            self.lease = max(1, int(float(lease_seconds))) if lease_seconds else DEFAULT_LEASE_SECONDS

    def live_until(self, due_epoch: float) -> int:
        """``queue_keys.live_until`` in DynamoDB's whole seconds, rounded up (never shorter)."""
        return math.ceil(queue_keys.live_until(due_epoch, self.horizon))

    def _item(self, claim: Claim) -> dict[str, Any]:
        lease_until = math.ceil(self.clock() + self.lease)
        return {**dedup_key(claim.queue_name, claim.key), "messageId": claim.message_id,
                "createdAt": now_iso(), "sent": False, "liveUntil": lease_until,
                TTL_ATTRIBUTE: self.live_until(claim.due_epoch) + TTL_SLACK_SECONDS}

    async def read(self, queue_name: str, key: str) -> KeyMarker | None:
        """The key's marker as stored (lapsed ones included, until TTL deletes them)."""
        item = await get_item(self.clients, dedup_key(queue_name, key))
        return None if item is None else marker_of(item)

    async def claim(self, claim: Claim) -> str | None:
        """Claim the key for ``claim.message_id``: None when claimed, else the id of the message holding it
        (after waiting briefly for a pending holder; ``DedupInDoubtError`` if it stays pending)."""
        holder = await self._claim_once(claim)
        return None if holder is None else await self.settle(claim, holder)

    async def settle(self, claim: Claim, holder: KeyMarker) -> str | None:
        """A key held by another message: its id once its send is confirmed; None when it turns out free and
        this claim takes it; ``DedupInDoubtError`` while it stays pending past ``SETTLE_SECONDS``."""
        waited = 0.0
        attempt = 0
        while True:
            if holder.message_id == claim.message_id:
                return None
            if holder.sent:
                return holder.message_id
            if waited >= SETTLE_SECONDS:
                raise DedupInDoubtError(
                    f"idempotency key {claim.key[:80]!r} is claimed by message {holder.message_id}, whose send is "
                    "not confirmed; retry once its lease lapses",
                    retry_after=max(1.0, holder.live_until - self.clock()))
            pause = min(0.25, 0.01 * 2 ** attempt)
            await asyncio.sleep(pause)
            waited += pause
            attempt += 1
            item = await get_item(self.clients, dedup_key(claim.queue_name, claim.key))
            live = queue_keys.holder(None if item is None else marker_of(item), int(self.clock()))
            if live is None:
                taken = await self._claim_once(claim)
                if taken is None:
                    return None
                holder = taken
            else:
                holder = live

    async def _claim_once(self, claim: Claim) -> KeyMarker | None:
        ddb = await self.clients.dynamodb()
        for attempt in range(MAX_ATTEMPTS):
            try:
                await ddb.put_item(
                    TableName=self.clients.config.table_name, Item=to_ddb(self._item(claim)),
                    ConditionExpression=_CLAIM_CONDITION, ExpressionAttributeNames={"#liveUntil": "liveUntil"},
                    ExpressionAttributeValues={":now": to_ddb_value(int(self.clock()))},
                    ReturnValuesOnConditionCheckFailure="ALL_OLD", ReturnConsumedCapacity="TOTAL",
                )
                return None
            except ClientError as error:
                code = _code(error)
                if code == "ConditionalCheckFailedException":
                    holder = from_ddb(error.response.get("Item")) or await get_item(
                        self.clients, dedup_key(claim.queue_name, claim.key))
                    if holder is None:  # released between our put and our read: try again
                        continue
                    if holder.get("messageId") == claim.message_id:  # our own put, its answer lost and retried
                        return None
                    return marker_of(holder)
                if code in ("ThrottlingException", "ProvisionedThroughputExceededException",
                            "TransactionConflictException"):
                    await _backoff(attempt)
                    continue
                raise
        raise ThrottledError("could not claim the idempotency key: DynamoDB kept throttling")

    async def claim_many(self, claims: Sequence[Claim]) -> list[KeyMarker | BaseException | None]:
        """Try to claim many distinct keys, without waiting for anyone: per claim None (claimed), the
        ``KeyMarker`` of a key another message holds (``settle`` it once this batch's own messages are sent and
        confirmed, so two batches holding keys the other wants never wait on each other), or the error.

        Each key is its own conditional PutItem, ``_PARALLELISM`` at a time: no key's claim needs to be atomic
        with another's, and a transaction would bill twice the write units (2 per KB per item).
        """
        gate = asyncio.Semaphore(_PARALLELISM)

        async def one(claim: Claim) -> KeyMarker | None:
            async with gate:
                return await self._claim_once(claim)

        outcomes = await asyncio.gather(*(one(c) for c in claims), return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, BaseException) and not isinstance(outcome, Exception):
                raise outcome
        return list(outcomes)

    async def confirm(self, claims: Sequence[Claim]) -> None:
        """The messages were sent: their markers now live as long as the messages can (``queue_keys.confirmed``).
        A marker already released (the message was delivered and acknowledged first) or taken over stays as it is."""
        gate = asyncio.Semaphore(_PARALLELISM)

        async def one(claim: Claim) -> None:
            async with gate:
                await self._set_live(claim.queue_name, claim.key, claim.message_id, self.live_until(claim.due_epoch),
                                     only_if_longer=False)

        await asyncio.gather(*(one(c) for c in claims))

    async def release(self, queue_name: str, key: str, message_id: str) -> None:
        """Free the key if ``message_id`` still holds it (``queue_keys.frees``)."""
        ddb = await self.clients.dynamodb()
        try:
            await ddb.delete_item(
                TableName=self.clients.config.table_name, Key=to_ddb(dedup_key(queue_name, key)),
                ConditionExpression=_HOLDER_CONDITION, ExpressionAttributeNames={"#messageId": "messageId"},
                ExpressionAttributeValues={":id": to_ddb_value(message_id)}, ReturnConsumedCapacity="TOTAL",
            )
        except ClientError as error:
            if _code(error) != "ConditionalCheckFailedException":
                raise

    async def extend(self, queue_name: str, key: str, message_id: str, due_epoch: float) -> None:
        """Keep the marker live past a re-send's new due time (``queue_keys.extended``)."""
        await self._set_live(queue_name, key, message_id, self.live_until(due_epoch), only_if_longer=True)

    async def _set_live(self, queue_name: str, key: str, message_id: str, live_until: int, *,
                        only_if_longer: bool) -> None:
        condition = _HOLDER_CONDITION + (_LONGER_CONDITION if only_if_longer else "")
        ddb = await self.clients.dynamodb()
        try:
            await ddb.update_item(
                TableName=self.clients.config.table_name, Key=to_ddb(dedup_key(queue_name, key)),
                UpdateExpression="SET #liveUntil = :live, #ttl = :ttl, #sent = :sent",
                ConditionExpression=condition,
                ExpressionAttributeNames={"#messageId": "messageId", "#liveUntil": "liveUntil",
                                          "#ttl": TTL_ATTRIBUTE, "#sent": "sent"},
                ExpressionAttributeValues={":id": to_ddb_value(message_id), ":live": to_ddb_value(live_until),
                                           ":ttl": to_ddb_value(live_until + TTL_SLACK_SECONDS),
                                           ":sent": to_ddb_value(True)},
                ReturnConsumedCapacity="TOTAL",
            )
        except ClientError as error:
            if _code(error) != "ConditionalCheckFailedException":
                raise
