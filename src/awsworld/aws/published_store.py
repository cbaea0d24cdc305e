"""``world.published`` on DynamoDB: one small item per consumer's publication in the stack's table.

| item | pk | sk | attributes |
|---|---|---|---|
| a publication (``published.model``) | ``PUBLISHED`` | ``WORKFLOWS#<key>`` | ``p`` (the publication as JSON) |

Written with one ``PutItem`` (``awsworld dev`` at its start; the flow function when its version is initialised
for SnapStart, else at its first cold start), read with one strongly consistent ``Query`` of the partition (1 RRU per
4 KB; a client reads it once). No TTL: a version rolled back to keeps
its names (see ``published.model``). The flow function and ``ClientPolicy`` already hold PutItem and Query on the
table, so the template grants nothing new.
"""

from __future__ import annotations

from typing import Any

from ..published.model import Publication
from .clients import AWSClients
from .dynamodb.items import from_ddb, to_ddb
from .resources import PK, SK

PARTITION = "PUBLISHED"
PREFIX = "WORKFLOWS#"


class DynamoPublished:
    def __init__(self, clients: AWSClients) -> None:
        self.clients = clients

    async def publish(self, publication: Publication) -> None:
        ddb = await self.clients.dynamodb()
        item = {PK: PARTITION, SK: PREFIX + publication.key, "p": publication.to_json()}
        await ddb.put_item(TableName=self.clients.config.table_name, Item=to_ddb(item),
                           ReturnConsumedCapacity="TOTAL")

    async def read(self) -> list[Publication]:
        ddb = await self.clients.dynamodb()
        kwargs: dict[str, Any] = {
            "TableName": self.clients.config.table_name, "ConsistentRead": True,
            "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :prefix)",
            "ExpressionAttributeNames": {"#pk": PK, "#sk": SK},
            "ExpressionAttributeValues": {":pk": {"S": PARTITION}, ":prefix": {"S": PREFIX}},
            "ReturnConsumedCapacity": "TOTAL",
        }
        found: list[Publication] = []
        while True:
            response = await ddb.query(**kwargs)
            found.extend(Publication.from_json(str((from_ddb(raw) or {})["p"])) for raw in response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if start is None:
                return found
            kwargs["ExclusiveStartKey"] = start
