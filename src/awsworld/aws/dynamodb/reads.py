"""Small read helpers shared by the storage namespaces: a consistent GetItem and a partition Query page."""

from __future__ import annotations

from typing import Any

from ..clients import AWSClients
from .items import Item, from_ddb, to_ddb


async def get_item(clients: AWSClients, key: dict[str, str], **kwargs: Any) -> Item | None:
    ddb = await clients.dynamodb()
    response = await ddb.get_item(TableName=clients.config.table_name, Key=to_ddb(key), ConsistentRead=True,
                                  ReturnConsumedCapacity="TOTAL", **kwargs)
    return from_ddb(response.get("Item"))


async def batch_get(clients: AWSClients, keys: list[dict[str, str]]) -> list[Item]:
    """Consistent BatchGetItem, following UnprocessedKeys, in chunks of 100."""
    ddb = await clients.dynamodb()
    table = clients.config.table_name
    items: list[Item] = []
    for start in range(0, len(keys), 100):
        pending: list[dict[str, Any]] = [to_ddb(k) for k in keys[start : start + 100]]
        while pending:
            response = await ddb.batch_get_item(
                RequestItems={table: {"Keys": pending, "ConsistentRead": True}}, ReturnConsumedCapacity="TOTAL"
            )
            items.extend(i for i in (from_ddb(r) for r in response["Responses"].get(table, [])) if i)
            pending = response.get("UnprocessedKeys", {}).get(table, {}).get("Keys", [])
    return items


async def query_prefix(clients: AWSClients, pk: str, prefix: str, *, after_sk: str | None,
                       limit: int) -> tuple[list[Item], bool]:
    """Items of one partition whose sort key starts with ``prefix``, after ``after_sk``, ascending; and
    whether more exist."""
    ddb = await clients.dynamodb()
    values: dict[str, Any] = {":pk": {"S": pk}, ":lo": {"S": prefix if after_sk is None else after_sk + "\x00"},
                              ":hi": {"S": prefix + "\uffff"}}
    items: list[Item] = []
    start = None
    while True:
        kwargs: dict[str, Any] = {"KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
                                  "ExpressionAttributeValues": values, "Limit": limit + 1 - len(items)}
        if start:
            kwargs["ExclusiveStartKey"] = start
        response = await ddb.query(TableName=clients.config.table_name, ConsistentRead=True,
                                   ReturnConsumedCapacity="TOTAL", **kwargs)
        items.extend(i for i in (from_ddb(r) for r in response.get("Items", [])) if i)
        start = response.get("LastEvaluatedKey")
        if len(items) > limit or start is None:
            return items[:limit], len(items) > limit
