"""Cross-run listing over the two run GSIs (the AWS World's ``run_ids``, under ``world/shared/storage.py``'s
``runs.list``).

A listing merges the newest-first pages of each index partition that can hold a match (one workflow name, or one
partition per requested status) by run id, a ULID, so a cursor is simply the last run id returned. The index
projects only its filter keys; the page's run items are then read with one BatchGetItem (``DynamoStorage.runs``).
"""

from __future__ import annotations

import asyncio
import heapq
from typing import Any

from ...world.entities import RUN_STATUSES
from ..clients import AWSClients
from ..dynamodb.items import from_ddb
from ..resources import GSI_BY_STATUS, GSI_BY_WORKFLOW, GSI_RUN_KEY, GSI_STATUS_KEY, GSI_WORKFLOW_KEY

MAX_FILTERED_READS = 1000
"""The most index items one Query of a filtered listing reads (``workflow`` and ``status`` both given: the workflow's
partition, filtered by status). Each Query after the first reads twice as many as the one before, up to this: a
listing of a workflow's running runs read its whole history ``limit + 1`` items a Query (40 Queries and 5.6 s for
an empty page over 2,000 finished runs on ``awsworld dev``, measured), and reads at most twice the items it needs
now. An index item is ~100 bytes: 1,000 fit DynamoDB's 1 MB page."""


class RunIndex:
    def __init__(self, clients: AWSClients) -> None:
        self.clients = clients

    async def run_ids(self, workflow_name: str | None, statuses: list[str] | None, before: str | None,
                      wanted: int) -> list[str]:
        """Up to ``wanted`` run ids, newest first, below ``before``."""
        if workflow_name is not None:
            sources = [(GSI_BY_WORKFLOW, GSI_WORKFLOW_KEY, workflow_name, statuses)]
        else:
            sources = [(GSI_BY_STATUS, GSI_STATUS_KEY, s, None) for s in (statuses or RUN_STATUSES)]
        pages = await asyncio.gather(*(self._index_page(*src, before, wanted - 1) for src in sources))
        # A run changing status can show in two status partitions for a moment (GSIs are eventually
        # consistent): keep its first appearance.
        return list(dict.fromkeys(heapq.merge(*pages, reverse=True)))[:wanted]

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
        reads = max(limit + 1, 25)
        while len(found) <= limit:
            if start:
                kwargs["ExclusiveStartKey"] = start
            response = await ddb.query(TableName=self.clients.config.table_name, Limit=reads,
                                       ReturnConsumedCapacity="TOTAL", **kwargs)
            found.extend(i[GSI_RUN_KEY] for i in (from_ddb(r) for r in response.get("Items", [])) if i)
            start = response.get("LastEvaluatedKey")
            if start is None:
                break
            reads = min(reads * 2, MAX_FILTERED_READS)  # filtered out: read further at each Query
        return found[: limit + 1]
