"""Reading a run's log: ``events.list``'s pages (ascending, with a cursor even on the last page and the run's
counters as a snapshot), ``list_by_correlation_id``'s, the events entities point at, and the skipped-events report
of a write."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import Any

from ...world.entities import ResolveData
from ...world.events import LogSnapshot
from ...world.pages import MAX_EVENTS_PAGE
from ...world.rules.runs import run_missing
from ...world.shared.storage import LogSlice
from ..clients import AWSClients
from ..dynamodb.items import Item, events_from_blocks, from_ddb
from ..dynamodb.reads import get_item
from ..keys import HOOK_PREFIX, event_sk, run_key, run_pk
from ..values import ValueStore
from .blocks import BLOCK_SPAN, READ_PROJECTION, BlockEvent, block_events


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
            raise run_missing(run_id)
        return LogSnapshot(seq=item["seq"], seq_in_band=item["seqInBand"])

    async def _blocks(self, run_id: str, lo: int, hi: int, *,
                      limit_events: int | None = None) -> tuple[list[BlockEvent], bool]:
        """Events with lo <= slot <= hi, ascending (at most ``limit_events`` + 1, to tell whether more exist).
        The Query starts up to a block's span early: the block holding ``lo`` may begin before it. With
        ``limit_events`` it ends at slot ``lo + limit_events`` (slots are dense, so that range holds the page and
        the one event that tells whether more exist): a Query's ``Limit`` counts items, and a block holds up to
        ``BLOCK_SPAN`` events, so without that bound a page of 1,000 events read (and was billed for) up to 1,001
        blocks, the rest of the log, and the next page read most of them again."""
        if limit_events is not None:
            hi = min(hi, lo + limit_events)
        values = {":pk": {"S": run_pk(run_id)}, ":lo": {"S": event_sk(max(1, lo - BLOCK_SPAN + 1))},
                  ":hi": {"S": event_sk(max(1, hi))}}
        kwargs: dict[str, Any] = {"KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
                                  "ExpressionAttributeValues": values, **READ_PROJECTION}
        events: list[BlockEvent] = []
        start: dict[str, Any] | None = None
        while True:
            if start:
                kwargs["ExclusiveStartKey"] = start
            wanted = None if limit_events is None else limit_events + 1 - len(events)
            page, start = await self._query(Limit=max(2, wanted) if wanted is not None else MAX_EVENTS_PAGE, **kwargs)
            for item in page:
                events.extend(e for e in block_events(item) if lo <= e.slot <= hi)
            if start is None or (limit_events is not None and len(events) > limit_events):
                break
        if limit_events is None:
            return events, False
        return events[:limit_events], len(events) > limit_events

    async def events_at(self, run_id: str, slots: Iterable[int]) -> dict[int, BlockEvent]:
        """The events at ``slots`` (entities point at the events that hold their values): one Query per
        block for a few, one range Query when they are many."""
        wanted = sorted({s for s in slots if s and s > 0})
        if not wanted:
            return {}
        found: dict[int, BlockEvent] = {}
        if len(wanted) > 3:
            events, _ = await self._blocks(run_id, wanted[0], wanted[-1])
            found = {e.slot: e for e in events}
        else:
            for block in await asyncio.gather(*(self._block_at(run_id, s) for s in wanted)):
                found.update((e.slot, e) for e in block)
        return {s: found[s] for s in wanted if s in found}

    async def _block_at(self, run_id: str, slot: int) -> list[BlockEvent]:
        values = {":pk": {"S": run_pk(run_id)}, ":lo": {"S": event_sk(max(1, slot - BLOCK_SPAN + 1))},
                  ":hi": {"S": event_sk(slot)}}
        items, _ = await self._query(KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi",
                                     ExpressionAttributeValues=values, ScanIndexForward=False, Limit=1,
                                     **READ_PROJECTION)
        return block_events(items[0]) if items else []

    async def events(self, run_id: str, after: int, limit: int, resolve: ResolveData) -> LogSlice:
        """``events.list``'s page (its arguments checked by ``world/shared/storage.py``)."""
        snapshot = await self.snapshot(run_id)
        events, more = await self._blocks(run_id, after + 1, snapshot.seq, limit_events=limit)
        return LogSlice(await events_from_blocks(run_id, events, self.values, resolve), more, snapshot)

    async def correlated_events(self, run_id: str, correlation_id: str, after: int, limit: int,
                                resolve: ResolveData) -> LogSlice:
        """``events.list_by_correlation_id``'s page."""
        snapshot = await self.snapshot(run_id)
        # Blocks are compressed: the filter runs here, over the run's log after the cursor.
        events, _ = await self._blocks(run_id, after + 1, snapshot.seq)
        matching = [e for e in events if e.correlation_id == correlation_id]
        return LogSlice(await events_from_blocks(run_id, matching[:limit], self.values, resolve), len(matching) > limit,
                        snapshot)

    async def between(self, run_id: str, after: int, before: int, count: int, resolve: ResolveData) -> LogSlice:
        """The report of a write that landed at ``before`` while its writer held ``after`` events: ``count`` of
        the events between (``world.rules.log.skipped_over``)."""
        events, more = await self._blocks(run_id, after + 1, before - 1, limit_events=count)
        return LogSlice(await events_from_blocks(run_id, events, self.values, resolve), more)

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
