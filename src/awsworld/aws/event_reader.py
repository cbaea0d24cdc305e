"""Reading a run's log: ``events.list`` (ascending, with a cursor even on the last page and the run's
counters as a snapshot), ``list_by_correlation_id``, and the skipped-events report of a write."""

from __future__ import annotations

from typing import Any

from ..world.entities import ResolveData
from ..world.errors import InvalidInputError, RunNotFoundError
from ..world.events import LogSnapshot
from ..world.pages import EventPage
from .clients import AWSClients
from .cursors import check_limit, decode_cursor, encode_cursor
from .items import Item, events_from_items, from_ddb
from .keys import HOOK_PREFIX, event_sk, run_key, run_pk, slot_of_event_sk
from .reads import get_item
from .values import ValueStore

MAX_PAGE = 1000
_LAST_SLOT = 10**26 - 1


class EventReader:
    def __init__(self, clients: AWSClients, values: ValueStore) -> None:
        self.clients = clients
        self.values = values

    async def _query(self, **kwargs: Any) -> tuple[list[Item], dict[str, Any] | None]:
        ddb = await self.clients.dynamodb()
        response = await ddb.query(TableName=self.clients.config.table_name, ConsistentRead=True,
                                   ReturnConsumedCapacity="TOTAL", **kwargs)
        items = [i for i in (from_ddb(r) for r in response.get("Items", [])) if i]
        return items, response.get("LastEvaluatedKey")

    async def snapshot(self, run_id: str) -> LogSnapshot:
        item = await get_item(self.clients, run_key(run_id), ProjectionExpression="seq, seqInBand")
        if item is None:
            raise RunNotFoundError(f"run {run_id} not found")
        return LogSnapshot(seq=item["seq"], seq_in_band=item["seqInBand"])

    async def _slots(self, run_id: str, after: int, before: int, limit: int,
                     extra: dict[str, Any] | None = None) -> tuple[list[Item], bool]:
        """Events with after < slot < before, ascending, at most ``limit``; and whether more exist."""
        values = {":pk": {"S": run_pk(run_id)}, ":lo": {"S": event_sk(after + 1)},
                  ":hi": {"S": event_sk(max(after + 1, before - 1))}}
        kwargs: dict[str, Any] = {
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": values,
        }
        if extra:
            kwargs["FilterExpression"] = extra["filter"]
            values.update(extra["values"])
        items: list[Item] = []
        start: dict[str, Any] | None = None
        while True:
            if start:
                kwargs["ExclusiveStartKey"] = start
            page, start = await self._query(Limit=limit + 1 - len(items) if not extra else MAX_PAGE, **kwargs)
            items.extend(page)
            if len(items) > limit or start is None:
                break
        return items[:limit], len(items) > limit

    async def list(self, run_id: str, *, cursor: str | None = None, limit: int = MAX_PAGE,
                   resolve_data: ResolveData = "all") -> EventPage:
        check_limit(limit, MAX_PAGE)
        after = _after(cursor)
        snapshot = await self.snapshot(run_id)
        items, more = await self._slots(run_id, after, _LAST_SLOT + 1, limit)
        return await self._page(items, more, after, resolve_data, snapshot)

    async def list_by_correlation_id(self, run_id: str, correlation_id: str, *, cursor: str | None = None,
                                     limit: int = MAX_PAGE, resolve_data: ResolveData = "all") -> EventPage:
        check_limit(limit, MAX_PAGE)
        if not correlation_id:
            raise InvalidInputError("correlation_id is required", field="correlationId")
        after = _after(cursor)
        snapshot = await self.snapshot(run_id)
        extra = {"filter": "correlationId = :c", "values": {":c": {"S": correlation_id}}}
        items, more = await self._slots(run_id, after, _LAST_SLOT + 1, limit, extra)
        return await self._page(items, more, after, resolve_data, snapshot)

    async def between(self, run_id: str, after: int, before: int, resolve: ResolveData) -> EventPage:
        """The report of a write that landed at ``before`` while its writer held ``after`` events."""
        items, more = await self._slots(run_id, after, before, min(MAX_PAGE, before - after - 1))
        return await self._page(items, more, after, resolve, None)

    async def _page(self, items: list[Item], more: bool, after: int, resolve: ResolveData,
                    snapshot: LogSnapshot | None) -> EventPage:
        events = await events_from_items(items, self.values, resolve)
        last = slot_of_event_sk(items[-1]["sk"]) if items else after
        return EventPage(data=events, cursor=encode_cursor({"s": last}), has_more=more, snapshot=snapshot)

    async def live_hook_items(self, run_id: str) -> list[Item]:
        items: list[Item] = []
        start = None
        while True:
            kwargs: dict[str, Any] = {
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :h)",
                "ExpressionAttributeValues": {":pk": {"S": run_pk(run_id)}, ":h": {"S": HOOK_PREFIX}},
            }
            if start:
                kwargs["ExclusiveStartKey"] = start
            page, start = await self._query(**kwargs)
            items.extend(page)
            if start is None:
                return items


def _after(cursor: str | None) -> int:
    decoded = decode_cursor(cursor)
    if decoded is None:
        return 0
    slot = decoded.get("s")
    if not isinstance(slot, int) or slot < 0:
        raise InvalidInputError("cursor is not one this World issued", field="cursor")
    return slot
