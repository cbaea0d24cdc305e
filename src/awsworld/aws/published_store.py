"""``world.published`` on DynamoDB: one small item per consumer's publication in the stack's table.

| item | pk | sk | attributes |
|---|---|---|---|
| a publication (``world.published``) | ``PUBLISHED`` | ``WORKFLOWS#<key>`` | ``p`` (the publication as JSON) |

Written with one ``PutItem`` (``awsworld dev`` at its start; the flow function when its version is initialised
for SnapStart, else at its first cold start), read with one strongly consistent ``Query`` of the partition
(``dynamodb.reads.query_prefix``; 1 RRU per 4 KB; a client reads it once). No TTL: a version rolled back to keeps
its names (see ``_published.model``). The flow function and ``ClientPolicy`` already hold PutItem and Query on the
table, so the template grants nothing new (``tests/deploy/test_iam_trace.py``).
"""

from __future__ import annotations

from ..world.published import Publication
from .clients import AWSClients
from .dynamodb.items import to_ddb
from .dynamodb.reads import query_prefix
from .resources import PK, SK

PARTITION = "PUBLISHED"
PREFIX = "WORKFLOWS#"
PAGE = 100


class DynamoPublished:
    def __init__(self, clients: AWSClients) -> None:
        self.clients = clients

    async def publish(self, publication: Publication) -> None:
        ddb = await self.clients.dynamodb()
        item = {PK: PARTITION, SK: PREFIX + publication.key, "p": publication.to_json()}
        await ddb.put_item(TableName=self.clients.config.table_name, Item=to_ddb(item),
                           ReturnConsumedCapacity="TOTAL")

    async def read(self) -> list[Publication]:
        found: list[Publication] = []
        after: str | None = None
        while True:  # (a page is 100 publications: one per consumer version whose names differed)
            items, more = await query_prefix(self.clients, PARTITION, PREFIX, after_sk=after, limit=PAGE)
            found.extend(Publication.from_json(str(item["p"])) for item in items)
            if not more:
                return found
            after = str(items[-1][SK])
