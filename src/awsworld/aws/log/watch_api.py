"""``world.watch`` on DynamoDB: the ``byDue`` index the watchdog reads, and the two writes that move a due.

Every commit sets the run head's due (``plan.run_update_op``, the rule in ``world.watch``); this module only
reads the index and writes the two corrections, each one plain conditional ``UpdateItem`` of the head (under
1 KB: 1 WRU, plus 2 on the index when the due's key changes, 1 when it leaves the index):

- ``snooze``: the watchdog pushes the due of a run it is about to wake, only if the due is still the one the
  index showed it (the index is eventually consistent, and a run that wrote since is alive: left alone), and
  never past the end of the run's lifetime: when the first write's condition finds that end before the new due
  (or the run moved), a second one sets the end instead (or finds the run moved too);
- ``correct``: a resting flow sets the exact due, only if the log still holds the events it has seen and the
  run has not ended.

The index is queried shard by shard (``world.watch.SHARDS`` partitions, each sorted by due): one Query per shard
and tick when nothing is due, 0.5 RRU each (eventually consistent reads of up to 4 KB).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from ...world.watch import SHARDS, DueRun, due_key, now_key, parse_key, shard_of, snooze_due
from ..clients import AWSClients
from ..dynamodb.items import from_ddb, to_ddb, to_ddb_value
from ..keys import run_key, run_pk
from ..resources import GSI_BY_DUE, GSI_DUE_KEY, GSI_DUE_SHARD, GSI_WORKFLOW_KEY, WATCH_END, WATCH_WAKES

_ALIVE = "#status IN (:pending, :running)"


class WatchAPI:
    def __init__(self, clients: AWSClients, reach: Callable[[], float] | None = None) -> None:
        self.clients = clients
        self._reach = reach

    @property
    def reach_seconds(self) -> float | None:
        """One SQS message's longest delay (``SqsQueue.max_hop_seconds``, read when asked): a timer further away
        would hop every 15 minutes, so the flow sends none and the watchdog wakes the run before it
        (``world.watch.beyond_reach``)."""
        return None if self._reach is None else self._reach()

    async def due(self, now: datetime, *, limit: int = 1000) -> list[DueRun]:
        pages = await asyncio.gather(*(self._shard(str(shard), now, limit) for shard in range(SHARDS)))
        return sorted((run for page in pages for run in page), key=lambda r: r.due)[:limit]

    async def _shard(self, shard: str, now: datetime, limit: int) -> list[DueRun]:
        ddb = await self.clients.dynamodb()
        kwargs: dict[str, Any] = {
            "TableName": self.clients.config.table_name, "IndexName": GSI_BY_DUE,
            "KeyConditionExpression": "#shard = :shard AND #due <= :now",
            "ExpressionAttributeNames": {"#shard": GSI_DUE_SHARD, "#due": GSI_DUE_KEY},
            "ExpressionAttributeValues": {":shard": {"S": shard}, ":now": {"S": now_key(now)}},
            "ReturnConsumedCapacity": "TOTAL",
        }
        found: list[DueRun] = []
        while len(found) < limit:
            response = await ddb.query(Limit=min(1000, limit - len(found)), **kwargs)
            for raw in response.get("Items", []):
                item = from_ddb(raw) or {}
                found.append(DueRun(str(item["pk"]).removeprefix(run_pk("")), str(item.get(GSI_WORKFLOW_KEY, "")),
                                    str(item[GSI_DUE_KEY]), int(item.get(WATCH_WAKES) or 0)))
            start = response.get("LastEvaluatedKey")
            if start is None:
                break
            kwargs["ExclusiveStartKey"] = start
        return found

    async def snooze(self, run: DueRun, now: datetime) -> datetime | None:
        """``snooze_due`` with the end of the run's lifetime its head keeps (``WATCH_END``; the index does not
        project it, and reading the head first would cost every wake a read): the backoff's due, unless the end
        lies between now and it; then, with a second write, the end (once per run: the wake there ends it). A head
        written before the attribute existed gets the backoff alone."""
        due = snooze_due(now, run.wakes)
        names = {"#due": GSI_DUE_KEY, "#wakes": WATCH_WAKES, "#end": WATCH_END}
        values = {":due": due_key(due), ":wakes": run.wakes + 1, ":seen": run.due, ":now": now_key(now)}
        if await self._update(run.run_id, "SET #due = :due, #wakes = :wakes",
                              f"#due = :seen AND {_ALIVE} AND (attribute_not_exists(#end) OR #end >= :due "
                              "OR #end <= :now)", names, values) is not None:
            return due
        capped = await self._update(run.run_id, "SET #due = #end, #wakes = :wakes",
                                    f"#due = :seen AND {_ALIVE} AND #end < :due AND #end > :now", names, values)
        return None if capped is None else parse_key(str(capped[GSI_DUE_KEY]))

    async def correct(self, run_id: str, due: datetime | None, *, seq: int) -> bool:
        names = {"#seq": "seq", "#due": GSI_DUE_KEY, "#shard": GSI_DUE_SHARD, "#wakes": WATCH_WAKES}
        values: dict[str, Any] = {":seq": seq}
        if due is None:
            update = "REMOVE #due, #shard, #wakes"
        else:
            update = "SET #due = :due, #shard = :shard REMOVE #wakes"
            values.update({":due": due_key(due), ":shard": shard_of(run_id)})
        return await self._update(run_id, update, "#seq = :seq AND " + _ALIVE, names, values) is not None

    async def _update(self, run_id: str, update: str, condition: str, names: dict[str, str],
                      values: dict[str, Any]) -> dict[str, Any] | None:
        """The attributes the update set (``UPDATED_NEW``), or None when its condition failed."""
        ddb = await self.clients.dynamodb()
        values = {**values, ":pending": "pending", ":running": "running"}
        try:
            response = await ddb.update_item(
                TableName=self.clients.config.table_name, Key=to_ddb(run_key(run_id)), UpdateExpression=update,
                ConditionExpression=condition, ExpressionAttributeNames={**names, "#status": "status"},
                ExpressionAttributeValues={k: to_ddb_value(v) for k, v in values.items()},
                ReturnValues="UPDATED_NEW", ReturnConsumedCapacity="TOTAL")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return None
            raise
        return from_ddb(response.get("Attributes") or {}) or {}
