"""Idempotency-key dedup for the queue: a ``DEDUP#<queue>#<key>`` marker item holding the message id.

A send with a key first claims the marker with a conditional put; a second send while the first message is
still queued or in flight finds the marker and returns the original message id instead of sending. The
consumer deletes the marker when it acknowledges the delivery, so the key is free again afterwards.

Neither SQS FIFO dedup nor TTL expiry is relied on (moto implements neither faithfully, and TTL deletes
whenever it likes). Instead each marker carries ``liveUntil``: the latest moment its message can still exist
(its due time plus the queue's retention and visibility timeout). A marker past that was orphaned by a crash
between the claim and the send, or between the acknowledgement and the delete, and the claim's condition
treats it as free. ``expiresAt`` (TTL) is set a day later, only to keep the table tidy.
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

from ..world.errors import ThrottledError
from .clients import AWSClients
from .items import from_ddb, now_iso, to_ddb, to_ddb_value
from .keys import dedup_key
from .reads import get_item
from .resources import QUEUE_RETENTION_SECONDS, QUEUE_VISIBILITY_TIMEOUT_SECONDS, TTL_ATTRIBUTE
from .transactions import TransientStoreError, TxCancelled, TxOp, transact

MAX_TRANSACTION_ITEMS = 100
MAX_ATTEMPTS = 30
TTL_SLACK_SECONDS = 24 * 3600
_CLAIM_CONDITION = "attribute_not_exists(pk) OR #liveUntil < :now"


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
                 visibility_seconds: int = QUEUE_VISIBILITY_TIMEOUT_SECONDS,
                 clock: Callable[[], float] = time.time) -> None:
        self.clients = clients
        self.horizon = retention_seconds + visibility_seconds
        self.clock = clock

    def live_until(self, due_epoch: float) -> int:
        return math.ceil(due_epoch + self.horizon)

    def _item(self, claim: Claim) -> dict[str, Any]:
        live_until = self.live_until(claim.due_epoch)
        return {**dedup_key(claim.queue_name, claim.key), "messageId": claim.message_id,
                "queueName": claim.queue_name, "createdAt": now_iso(), "liveUntil": live_until,
                TTL_ATTRIBUTE: live_until + TTL_SLACK_SECONDS}

    async def claim(self, claim: Claim) -> str | None:
        """Claim the key for ``claim.message_id``: None when claimed, else the id of the message holding it."""
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
                    return None if holder["messageId"] == claim.message_id else str(holder["messageId"])
                if code in ("ThrottlingException", "ProvisionedThroughputExceededException",
                            "TransactionConflictException"):
                    await _backoff(attempt)
                    continue
                raise
        raise ThrottledError("could not claim the idempotency key: DynamoDB kept throttling")

    async def claim_many(self, claims: Sequence[Claim]) -> list[str | None]:
        """``claim`` for many distinct keys, up to 100 per TransactWriteItems, transactions in parallel.

        A transaction is all-or-nothing, so when some keys are taken its cancellation reasons (with the
        holders' items) say which; the rest are claimed again without them.
        """
        results: list[str | None] = [None] * len(claims)
        chunks = [list(range(i, min(i + MAX_TRANSACTION_ITEMS, len(claims))))
                  for i in range(0, len(claims), MAX_TRANSACTION_ITEMS)]
        await asyncio.gather(*(self._claim_chunk(claims, chunk, results) for chunk in chunks))
        return results

    async def _claim_chunk(self, claims: Sequence[Claim], pending: list[int], results: list[str | None]) -> None:
        for attempt in range(MAX_ATTEMPTS):
            if not pending:
                return
            if len(pending) == 1:
                results[pending[0]] = await self.claim(claims[pending[0]])
                return
            ops = []
            for index in pending:
                op = TxOp("Put", str(index), item=self._item(claims[index]), condition=_CLAIM_CONDITION)
                op.expr.names["#liveUntil"] = "liveUntil"
                op.expr.values[":now"] = int(self.clock())
                ops.append(op)
            try:
                await transact(self.clients, ops)
                return
            except TxCancelled as cancelled:
                still: list[int] = []
                for index, reason in zip(pending, cancelled.reasons, strict=False):
                    if reason.code != "ConditionalCheckFailed":
                        still.append(index)
                    elif reason.item is None:  # this emulator gave no item: ask the key on its own
                        results[index] = await self.claim(claims[index])
                    elif reason.item["messageId"] != claims[index].message_id:
                        results[index] = str(reason.item["messageId"])
                pending = still
                if cancelled.conflict:
                    await _backoff(attempt)
            except TransientStoreError:
                await _backoff(attempt)
        raise ThrottledError("could not claim idempotency keys: DynamoDB kept cancelling the transaction")

    async def release(self, queue_name: str, key: str, message_id: str) -> None:
        """Free the key, but only if ``message_id`` still holds it (a later message may have taken it over)."""
        ddb = await self.clients.dynamodb()
        try:
            await ddb.delete_item(
                TableName=self.clients.config.table_name, Key=to_ddb(dedup_key(queue_name, key)),
                ConditionExpression="#messageId = :id", ExpressionAttributeNames={"#messageId": "messageId"},
                ExpressionAttributeValues={":id": to_ddb_value(message_id)}, ReturnConsumedCapacity="TOTAL",
            )
        except ClientError as error:
            if _code(error) != "ConditionalCheckFailedException":
                raise

    async def extend(self, queue_name: str, key: str, message_id: str, due_epoch: float) -> None:
        """Keep the marker live past a re-send's new due time (a redelivery pushes the message's life out)."""
        live_until = self.live_until(due_epoch)
        ddb = await self.clients.dynamodb()
        try:
            await ddb.update_item(
                TableName=self.clients.config.table_name, Key=to_ddb(dedup_key(queue_name, key)),
                UpdateExpression="SET #liveUntil = :live, #ttl = :ttl",
                ConditionExpression="#messageId = :id AND #liveUntil < :live",
                ExpressionAttributeNames={"#messageId": "messageId", "#liveUntil": "liveUntil",
                                          "#ttl": TTL_ATTRIBUTE},
                ExpressionAttributeValues={":id": to_ddb_value(message_id), ":live": to_ddb_value(live_until),
                                           ":ttl": to_ddb_value(live_until + TTL_SLACK_SECONDS)},
                ReturnConsumedCapacity="TOTAL",
            )
        except ClientError as error:
            if _code(error) != "ConditionalCheckFailedException":
                raise
