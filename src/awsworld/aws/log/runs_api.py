"""``world.runs``: get, cross-run listing over the two run GSIs, waiting for a terminal status, attributes.

Listing merges the newest-first pages of each index partition that can hold a match (one workflow name, or
one partition per requested status) by run id, a ULID, so a cursor is simply the last run id returned. The
index projects only its filter keys; the page's run items are then read with one BatchGetItem.
"""

from __future__ import annotations

import asyncio
import heapq
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ...world.cursors import first_page, run_cursor, runs_query
from ...world.entities import RUN_STATUSES, TERMINAL_RUN_STATUSES, ResolveData, Run
from ...world.events import AttributeChange, EventResult
from ...world.pages import RunPage
from ...world.rules.requests import attr_set_event
from ...world.rules.runs import run_missing
from ..clients import AWSClients
from ..dynamodb.items import from_ddb
from ..dynamodb.reads import batch_get
from ..keys import run_key
from ..resources import GSI_BY_STATUS, GSI_BY_WORKFLOW, GSI_RUN_KEY, GSI_STATUS_KEY, GSI_WORKFLOW_KEY
from .entity_reads import EntityReads
from .event_writer import EventWriter


class RunsAPI:
    def __init__(self, clients: AWSClients, reads: EntityReads, writer: EventWriter) -> None:
        self.clients = clients
        self.reads = reads
        self.writer = writer

    async def get(self, run_id: str, *, resolve_data: ResolveData = "all") -> Run:
        fetched = await self.reads.run_items(run_id)
        head = fetched.get((run_key(run_id)["pk"], run_key(run_id)["sk"]))
        if head is None:
            raise run_missing(run_id)
        return await self.reads.run(head, resolve_data, fetched=fetched)

    async def list(
        self,
        *,
        workflow_name: str | None = None,
        status: str | Sequence[str] | None = None,
        cursor: str | None = None,
        limit: int = 50,
        resolve_data: ResolveData = "none",
    ) -> RunPage:
        query = runs_query(status, cursor, limit)
        if query is None:
            return RunPage()  # status=[] matches nothing, like SQL IN ()
        statuses, before = query.statuses, query.before
        if workflow_name is not None:
            sources = [(GSI_BY_WORKFLOW, GSI_WORKFLOW_KEY, workflow_name, statuses)]
        else:
            sources = [(GSI_BY_STATUS, GSI_STATUS_KEY, s, None) for s in (statuses or RUN_STATUSES)]
        pages = await asyncio.gather(*(self._index_page(*src, before, limit) for src in sources))
        # A run changing status can show in two status partitions for a moment (GSIs are eventually
        # consistent): keep its first appearance.
        run_ids, more = first_page(list(dict.fromkeys(heapq.merge(*pages, reverse=True))), limit)
        items = {i[GSI_RUN_KEY]: i for i in await batch_get(self.clients, [run_key(r) for r in run_ids])}
        runs = await self.reads.runs([items[r] for r in run_ids if r in items], resolve_data)
        next_cursor = run_cursor(run_ids, more)
        return RunPage(data=runs, cursor=next_cursor, has_more=more)

    async def _index_page(self, index: str, key_name: str, key_value: str, statuses: list[str] | None,
                          before: str | None, limit: int) -> list[str]:
        """Up to limit+1 run ids of one index partition, newest first, below ``before``."""
        ddb = await self.clients.dynamodb()
        values: dict[str, Any] = {":k": {"S": key_value}}
        condition = f"{key_name} = :k"
        if before is not None:
            condition += f" AND {GSI_RUN_KEY} < :before"
            values[":before"] = {"S": before}
        kwargs: dict[str, Any] = {"IndexName": index, "KeyConditionExpression": condition,
                                  "ExpressionAttributeValues": values, "ScanIndexForward": False}
        if statuses is not None:
            names = [f":s{i}" for i in range(len(statuses))]
            kwargs["FilterExpression"] = f"{GSI_STATUS_KEY} IN ({', '.join(names)})"
            values.update({n: {"S": s} for n, s in zip(names, statuses, strict=True)})
        found: list[str] = []
        start = None
        while len(found) <= limit:
            if start:
                kwargs["ExclusiveStartKey"] = start
            response = await ddb.query(TableName=self.clients.config.table_name, Limit=max(limit + 1, 25),
                                       ReturnConsumedCapacity="TOTAL", **kwargs)
            found.extend(i[GSI_RUN_KEY] for i in (from_ddb(r) for r in response.get("Items", [])) if i)
            start = response.get("LastEvaluatedKey")
            if start is None:
                break
        return found[: limit + 1]

    async def wait_for_terminal_status(self, run_id: str, *, timeout: float = 30.0,
                                       resolve_data: ResolveData = "all") -> Run:
        """The run once terminal, or its latest snapshot when ``timeout`` runs out (never later)."""
        deadline = time.monotonic() + max(0.0, timeout)
        interval = 0.05
        while True:
            run = await self.get(run_id, resolve_data=resolve_data)
            remaining = deadline - time.monotonic()
            if run.status in TERMINAL_RUN_STATUSES or remaining <= 0:
                return run
            await asyncio.sleep(min(interval, remaining))
            interval = min(interval * 1.5, 1.0)

    async def set_attributes(self, run_id: str, changes: Sequence[AttributeChange | Mapping[str, Any]], *,
                             allow_reserved: bool = False) -> EventResult:
        return await self.writer.create(run_id, attr_set_event(changes, allow_reserved))
