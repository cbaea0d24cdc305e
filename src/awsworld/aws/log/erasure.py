"""``World.delete_run`` on DynamoDB and S3: every item of an ended run's partition, every object under its
``runs/<id>/`` prefix, and the global items that name it (``world/rules/erasure.py`` decides which, and when).

The order makes a deletion cut short (a crash, throttling past the retries) one its retry finishes: the global
items first (found from the run's log, which is still there), then the S3 objects, then every partition item but
the head, and the head last, so a run still found still has everything that leads to the rest. Each global item
is deleted with the condition that it still names the run (``runId = :run``): a token claimed since by another
run's hook, say, stays that hook's. Plain ``DeleteItem`` and ``DeleteObject`` requests, bounded in parallel:
no transaction (a run's partition may hold more items than one can take), no BatchWriteItem (one more action
for the policies, for no saving: both bill one write unit per item), and no ``DeleteObjects`` (authorized per
object all the same, and its partial failures are answers to read rather than errors raised).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from botocore.exceptions import ClientError

from ...world.events import Event
from ...world.rules.erasure import check_erasable, erased_globals
from ...world.rules.requests import check_run_id
from ..clients import AWSClients
from ..dynamodb.items import to_ddb
from ..dynamodb.reads import get_item
from ..keys import Key, hook_pointer_key, resume_once_key, run_key, run_pk, token_key
from ..resources import PK, SK, run_prefix

PARALLEL_DELETES = 16
"""How many deletions run at once: a run of a thousand steps is deleted in seconds, without a burst that an
on-demand table's new partition would throttle."""

ReadLog = Callable[[str], Awaitable[list[Event]]]
"""The run's whole log, without values (its World's ``events.list``, page by page)."""


class RunEraser:
    def __init__(self, clients: AWSClients) -> None:
        self.clients = clients

    async def delete_run(self, run_id: str, read_log: ReadLog) -> bool:
        head = await get_item(self.clients, run_key(check_run_id(run_id)))
        if head is None:
            return False
        check_erasable(run_id, str(head["status"]))
        found = erased_globals(await read_log(run_id))
        named = ([token_key(t) for t in found.tokens] + [hook_pointer_key(h) for h in found.hook_ids]
                 + [resume_once_key(r) for r in found.resume_once_ids])
        await _bounded(self._delete_naming(key, run_id) for key in named)
        await self._delete_objects(run_prefix(run_id))
        head_key = run_key(run_id)
        await _bounded(self._delete(key) for key in await self._partition_keys(run_id) if key != head_key)
        await self._delete(head_key)
        return True

    async def _partition_keys(self, run_id: str) -> list[Key]:
        ddb = await self.clients.dynamodb()
        keys: list[Key] = []
        start: dict[str, Any] | None = None
        while True:
            kwargs: dict[str, Any] = {"ExclusiveStartKey": start} if start else {}
            response = await ddb.query(
                TableName=self.clients.config.table_name, KeyConditionExpression="#pk = :pk",
                ExpressionAttributeNames={"#pk": PK, "#sk": SK}, ProjectionExpression="#pk, #sk",
                ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}}, ConsistentRead=True,
                ReturnConsumedCapacity="TOTAL", **kwargs)
            keys.extend({PK: item[PK]["S"], SK: item[SK]["S"]} for item in response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if not start:
                return keys

    async def _delete(self, key: Key) -> None:
        ddb = await self.clients.dynamodb()
        await ddb.delete_item(TableName=self.clients.config.table_name, Key=to_ddb(key),
                              ReturnConsumedCapacity="TOTAL")

    async def _delete_naming(self, key: Key, run_id: str) -> None:
        """Delete a global item only while it names the run (absent, or another run's now: left as it is)."""
        ddb = await self.clients.dynamodb()
        try:
            await ddb.delete_item(TableName=self.clients.config.table_name, Key=to_ddb(key),
                                  ConditionExpression="runId = :run",
                                  ExpressionAttributeValues={":run": {"S": run_id}}, ReturnConsumedCapacity="TOTAL")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") != "ConditionalCheckFailedException":
                raise

    async def _delete_objects(self, prefix: str) -> None:
        """Every object under the run's prefix, listed a page at a time, each deleted by its own ``DeleteObject``
        (a run holds few: only values over the inline limit, stream chunks, large queue payloads)."""
        s3 = await self.clients.s3()
        bucket = self.clients.config.bucket_name

        async def delete(key: str) -> None:
            await s3.delete_object(Bucket=bucket, Key=key)

        token: str | None = None
        while True:
            kwargs: dict[str, Any] = {"ContinuationToken": token} if token else {}
            listed = await s3.list_objects_v2(Bucket=bucket, Prefix=prefix, **kwargs)
            await _bounded(delete(item["Key"]) for item in listed.get("Contents", []))
            token = listed.get("NextContinuationToken")
            if not token:
                return


async def _bounded(jobs: Iterable[Awaitable[None]]) -> None:
    """Run the deletions ``PARALLEL_DELETES`` at a time; the first failure is raised once all have settled."""
    gate = asyncio.Semaphore(PARALLEL_DELETES)

    async def one(job: Awaitable[None]) -> None:
        async with gate:
            await job

    outcomes = await asyncio.gather(*(one(job) for job in jobs), return_exceptions=True)
    for outcome in outcomes:
        if isinstance(outcome, BaseException):
            raise outcome
