"""``world.deployments`` on DynamoDB: one small item per deployment in the stack's table.

| item | pk | sk | attributes |
|---|---|---|---|
| a deployment (``world.deployments``) | ``DEPLOYMENTS`` | ``DEPLOYMENT#<id>`` | ``d`` (the record as JSON) |

Registered with one conditional ``PutItem`` (``attribute_not_exists``: a version's second cold start keeps its first
record), read with one strongly consistent ``Query`` of the partition (``dynamodb.reads.query_prefix``), replaced
with a plain ``PutItem`` when an operator retires it. No TTL: a record is kept while its deployment may hold runs,
and a retired one stays as history (a few hundred bytes; ``awsworld deployments prune`` retires, it does not
delete). The flow function and ``ClientPolicy`` hold PutItem and Query on the table already.
"""

from __future__ import annotations

from botocore.exceptions import ClientError

from ..world.deployments import Deployment, by_registration
from .clients import AWSClients
from .dynamodb.items import to_ddb
from .dynamodb.reads import query_prefix
from .resources import PK, SK

PARTITION = "DEPLOYMENTS"
PREFIX = "DEPLOYMENT#"
PAGE = 100


class DynamoDeployments:
    def __init__(self, clients: AWSClients) -> None:
        self.clients = clients

    async def register(self, deployment: Deployment) -> bool:
        ddb = await self.clients.dynamodb()
        try:
            await ddb.put_item(TableName=self.clients.config.table_name, Item=to_ddb(self._item(deployment)),
                               ConditionExpression="attribute_not_exists(#pk)", ExpressionAttributeNames={"#pk": PK},
                               ReturnConsumedCapacity="TOTAL")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        return True

    async def read(self) -> list[Deployment]:
        found: list[Deployment] = []
        after: str | None = None
        while True:
            items, more = await query_prefix(self.clients, PARTITION, PREFIX, after_sk=after, limit=PAGE)
            found.extend(Deployment.from_json(str(item["d"])) for item in items)
            if not more:
                return by_registration(found)
            after = str(items[-1][SK])

    async def put(self, deployment: Deployment) -> None:
        ddb = await self.clients.dynamodb()
        await ddb.put_item(TableName=self.clients.config.table_name, Item=to_ddb(self._item(deployment)),
                           ReturnConsumedCapacity="TOTAL")

    @staticmethod
    def _item(deployment: Deployment) -> dict[str, str]:
        return {PK: PARTITION, SK: PREFIX + deployment.deployment_id, "d": deployment.to_json()}
