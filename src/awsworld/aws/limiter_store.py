"""``world.limiters`` on DynamoDB: a limit's pools and waiters in the stack's table, each pool one small item
rewritten whole and conditioned on its version (``world.limiters.LimiterStore``; the rules are
``world.rules.limiters``).

| item | pk | sk | attributes |
|---|---|---|---|
| a pool | ``LIMIT#<name>`` | ``P#<pool>`` | ``v`` (version), ``s`` (the pool as JSON), ``expiresAt`` |
| a waiter | ``LIMIT#<name>`` | ``W#<pool>#<holder>`` | ``s`` (the waiter as JSON) |
| a start reserved far ahead | ``LIMIT#<name>`` | ``R#<pool>#<holder>`` | ``at`` (ISO 8601 UTC), ``expiresAt`` |
| a waiter whose step is in no log yet | ``LIMIT#<name>`` | ``U#<run>#<holder>`` | ``pool``, ``expiresAt`` |

(The last is put in that waiter's transaction, for ``unlogged_waiters``: a flow asks before it declares a step to
be born running.)
| a limit's name | ``LIMITS`` | ``<name>`` | (after a pool's first write, once per process: ``awsworld limits``) |

Priced by the byte: a pool holds its holders and the keys that wait (tens of bytes each), so a pool of a limit
of 20 stays under 1 KB and a write that only takes or frees a slot is one ``PutItem`` of 1 WRU (read first with
one strongly consistent ``GetItem``, 1 RRU). A write that adds or grants waiters is one ``TransactWriteItems``
of the pool and those waiter items (2 WRU per item): only a contended limit pays it. Waiters live in items of
their own so a backlog of any length costs a write nothing; a hand-off reads them (one ``Query``, 0.5 RRU per
4 KB of waiters, strongly consistent: 1 RRU per 4 KB).

A pool nothing holds lives on for ``IDLE_DAYS`` (its TTL, moved by every write) so a key's next run pays no
creation; a pool with an override or waiters carries no TTL (it must not vanish). The flow function and
``ClientPolicy`` hold the table actions this needs already (GetItem, Query, PutItem, TransactWriteItems).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from ..world.rules.limiters import Holding, KeyState, LimitSpec, Pool, Rate, Waiter, epoch, from_epoch
from .clients import AWSClients
from .dynamodb.items import from_ddb, to_ddb
from .dynamodb.transactions import TxCancelled, TxOp, put, transact
from .resources import PK, SK, TTL_ATTRIBUTE

PARTITION_PREFIX = "LIMIT#"
NAMES_PARTITION = "LIMITS"
POOL_PREFIX = "P#"
WAITER_PREFIX = "W#"
RESERVED_PREFIX = "R#"
UNLOGGED_PREFIX = "U#"
IDLE_DAYS = 30
RESERVATION_KEPT_SECONDS = 3600
"""A kept reservation's item outlives its start by this much (its TTL), then goes."""


class DynamoLimiters:
    delay_step = 1.0  # SQS delays count whole seconds

    def __init__(self, clients: AWSClients) -> None:
        self.clients = clients
        self.named: set[str] = set()  # limit names this process has listed already (``LIMITS``): once each

    @property
    def _table(self) -> str:
        return self.clients.config.table_name

    async def read(self, limit: str, pool: str) -> Pool | None:
        ddb = await self.clients.dynamodb()
        response = await ddb.get_item(TableName=self._table, Key=to_ddb(_pool_key(limit, pool)), ConsistentRead=True,
                                      ReturnConsumedCapacity="TOTAL")
        item = from_ddb(response.get("Item"))
        return None if item is None else decode_pool(str(item["s"]), int(item["v"]), limit, pool)

    async def waiters(self, limit: str, pool: str) -> list[Waiter]:
        return [decode_waiter(str(item["s"])) for item in await self._query(
            PARTITION_PREFIX + limit, f"{WAITER_PREFIX}{pool}#")]

    async def waiter(self, limit: str, pool: str, holder: str) -> Waiter | None:
        ddb = await self.clients.dynamodb()
        response = await ddb.get_item(TableName=self._table, Key=to_ddb(_waiter_key(limit, pool, holder)),
                                      ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
        item = from_ddb(response.get("Item"))
        return None if item is None else decode_waiter(str(item["s"]))

    async def commit(self, pool: Pool, *, expected_version: int, add: Sequence[Waiter] = (),
                     remove: Sequence[str] = (), unlogged_run: str | None = None) -> bool:
        item: dict[str, Any] = {**_pool_key(pool.limit, pool.pool), "v": expected_version + 1, "s": encode_pool(pool)}
        if not pool.keys and pool.total is None:  # nothing that must outlive an idle spell
            item[TTL_ATTRIBUTE] = int(datetime.now(UTC).timestamp() + IDLE_DAYS * 86400)
        op = put("pool", item, if_absent=expected_version == 0)
        if expected_version:
            op.condition = f"{op.expr.n('v')} = {op.expr.v(expected_version)}"
        try:
            if not add and not remove:
                await self._put(op)
            else:
                ops = [op, *(put("waiter", {**_waiter_key(pool.limit, pool.pool, w.holder), "s": encode_waiter(w)},
                                 if_absent=True) for w in add),
                       *(TxOp("Delete", "gone", key=_waiter_key(pool.limit, pool.pool, h)) for h in remove)]
                if unlogged_run is not None:  # (2 WRU each, in a flow's ask for a step not declared yet only)
                    until = int(datetime.now(UTC).timestamp() + self.clients.config.max_run_seconds + 86400)
                    ops += [put("unlogged", {**_unlogged_key(pool.limit, unlogged_run, w.holder), "pool": pool.pool,
                                             TTL_ATTRIBUTE: until}) for w in add]
                await transact(self.clients, ops)
        except _Lost:
            return False
        except TxCancelled as cancelled:
            if cancelled.conflict or cancelled.failed("pool") or cancelled.failed("waiter"):
                return False
            raise
        if expected_version == 0 and pool.limit not in self.named:  # the limit's name, for the listing: at a
            ddb = await self.clients.dynamodb()                         # pool's creation, once per process
            await ddb.put_item(TableName=self._table, Item=to_ddb({PK: NAMES_PARTITION, SK: pool.limit}),
                               ReturnConsumedCapacity="TOTAL")
            self.named.add(pool.limit)
        return True

    async def _put(self, op: TxOp) -> None:
        request = op.to_request(self._table)["Put"]
        request.pop("ReturnValuesOnConditionCheckFailure", None)
        ddb = await self.clients.dynamodb()
        try:
            await ddb.put_item(**request, ReturnConsumedCapacity="TOTAL")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise _Lost from None
            raise

    async def keep_reservation(self, limit: str, pool: str, holder: str, at: datetime) -> None:
        ddb = await self.clients.dynamodb()
        await ddb.put_item(TableName=self._table, ReturnConsumedCapacity="TOTAL", Item=to_ddb({
            **_reserved_key(limit, pool, holder), "at": at.astimezone(UTC).isoformat(),
            TTL_ATTRIBUTE: int(epoch(at) + RESERVATION_KEPT_SECONDS)}))

    async def reservation(self, limit: str, pool: str, holder: str) -> datetime | None:
        ddb = await self.clients.dynamodb()
        response = await ddb.get_item(TableName=self._table, Key=to_ddb(_reserved_key(limit, pool, holder)),
                                      ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
        item = from_ddb(response.get("Item"))
        return None if item is None else datetime.fromisoformat(str(item["at"]))

    async def unlogged_waiters(self, limit: str, run_id: str) -> list[tuple[str, str]]:
        prefix = f"{UNLOGGED_PREFIX}{run_id}#"
        return sorted((str(item["pool"]), str(item[SK])[len(prefix):])
                      for item in await self._query(PARTITION_PREFIX + limit, prefix))

    async def limits(self) -> list[str]:
        return sorted(str(item[SK]) for item in await self._query(NAMES_PARTITION, ""))

    async def pools(self, limit: str) -> list[Pool]:
        return [decode_pool(str(item["s"]), int(item["v"]), limit, str(item[SK])[len(POOL_PREFIX):])
                for item in await self._query(PARTITION_PREFIX + limit, POOL_PREFIX)]

    async def _query(self, partition: str, prefix: str) -> list[dict[str, Any]]:
        ddb = await self.clients.dynamodb()
        condition = "#pk = :pk" + (" AND begins_with(#sk, :prefix)" if prefix else "")
        values: dict[str, Any] = {":pk": {"S": partition}}
        if prefix:
            values[":prefix"] = {"S": prefix}
        kwargs: dict[str, Any] = {
            "TableName": self._table, "KeyConditionExpression": condition, "ConsistentRead": True,
            "ExpressionAttributeNames": {"#pk": PK, **({"#sk": SK} if prefix else {})},
            "ExpressionAttributeValues": values, "ReturnConsumedCapacity": "TOTAL",
        }
        found: list[dict[str, Any]] = []
        while True:
            response = await ddb.query(**kwargs)
            found.extend(item for raw in response.get("Items", []) if (item := from_ddb(raw)) is not None)
            start = response.get("LastEvaluatedKey")
            if start is None:
                return found
            kwargs["ExclusiveStartKey"] = start


class _Lost(Exception):
    """A pool's conditional put found another version."""


def _pool_key(limit: str, pool: str) -> dict[str, str]:
    return {PK: PARTITION_PREFIX + limit, SK: POOL_PREFIX + pool}


def _waiter_key(limit: str, pool: str, holder: str) -> dict[str, str]:
    return {PK: PARTITION_PREFIX + limit, SK: f"{WAITER_PREFIX}{pool}#{holder}"}


def _unlogged_key(limit: str, run_id: str, holder: str) -> dict[str, str]:
    return {PK: PARTITION_PREFIX + limit, SK: f"{UNLOGGED_PREFIX}{run_id}#{holder}"}


def _reserved_key(limit: str, pool: str, holder: str) -> dict[str, str]:
    return {PK: PARTITION_PREFIX + limit, SK: f"{RESERVED_PREFIX}{pool}#{holder}"}


# -- the records as JSON (short keys: a pool is rewritten by every take and release, and billed by the KB) --------


def _rate(rate: Rate | None) -> list[float] | None:
    return None if rate is None else [rate.tokens, rate.period, rate.burst]


def _load_rate(raw: Any) -> Rate | None:
    return None if raw is None else Rate(int(raw[0]), float(raw[1]), int(raw[2]))


def _t(moment: datetime | None) -> float | None:
    return None if moment is None else round(epoch(moment), 6)


def _load_t(raw: Any) -> datetime | None:
    return None if raw is None else from_epoch(float(raw))


def _compact(record: dict[str, Any]) -> dict[str, Any]:
    """Without what is absent (None, False, empty): a 0 is a value (a concurrency of 0 stops a key)."""
    return {k: v for k, v in record.items() if v is not None and v is not False and v != {} and v != []}


def encode_pool(pool: Pool) -> str:
    spec = pool.spec
    record = {
        "c": spec.concurrency, "T": spec.total, "r": _rate(spec.rate), "sv": pool.served or None, "t": pool.total,
        "h": {h: _compact({"k": v.key, "s": _t(v.since), "l": _t(v.lease_until), "w": dict(v.wake or {})})
              for h, v in pool.holders.items()},
        "k": {key: _compact({"w": s.waiting or None, "n": s.round or None, "c": s.concurrency, "r": _rate(s.rate),
                             "p": s.paused, "a": _t(s.tat)}) for key, s in pool.keys.items()},
    }
    return json.dumps(_compact(record), separators=(",", ":"))


def decode_pool(text: str, version: int, limit: str, pool: str) -> Pool:
    raw: dict[str, Any] = json.loads(text)
    spec = LimitSpec(limit, raw.get("c"), raw.get("T"), _load_rate(raw.get("r")))
    holders = {h: Holding(str(v.get("k", "")), _load_t(v.get("s")) or datetime.now(UTC), _load_t(v.get("l")),
                          v.get("w") or None) for h, v in (raw.get("h") or {}).items()}
    keys = {key: KeyState(int(s.get("w", 0)), int(s.get("n", 0)), s.get("c"), _load_rate(s.get("r")),
                          bool(s.get("p")), _load_t(s.get("a"))) for key, s in (raw.get("k") or {}).items()}
    return Pool(limit, pool, spec, version, holders, keys, int(raw.get("sv", 0)), raw.get("t"))


def encode_waiter(waiter: Waiter) -> str:
    return json.dumps({"h": waiter.holder, "k": waiter.key, "p": waiter.priority, "n": waiter.round,
                       "a": _t(waiter.arrival), "s": _t(waiter.since), "w": dict(waiter.wake)}, separators=(",", ":"))


def decode_waiter(text: str) -> Waiter:
    raw: dict[str, Any] = json.loads(text)
    arrival = _load_t(raw.get("a")) or datetime.now(UTC)
    return Waiter(str(raw["h"]), str(raw.get("k", "")), int(raw.get("p", 0)), int(raw.get("n", 0)), arrival,
                  _load_t(raw.get("s")) or arrival, dict(raw.get("w") or {}))


