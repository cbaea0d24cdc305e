"""``world.schedules`` on DynamoDB: one small item per schedule in the stack's table, written whole and
conditioned on its version (``world.rules.schedules.may_write`` as a ``ConditionExpression``).

Layout (one partition, ``SCHEDULES``, so a tick lists every schedule with one Query and no index):

| item | pk | sk | attributes |
|---|---|---|---|
| a schedule | ``SCHEDULES`` | ``SCHED#<id>`` | ``v`` (version), ``s`` (the record as JSON) |
| its arguments, when over 1 KB | ``SCHEDULES`` | ``INPUT#<id>#<digest>`` | ``input`` |

The listing's key condition (``begins_with(sk, "SCHED#")``) reads the records alone, so arguments of any size
cost the tick nothing; a schedule's record stays under 1 KB (a write is 1 WRU, the listing 0.5 RRU per 4 KB
of records, eventually consistent: a stale read only loses its conditional write and reads again). The items
carry no TTL: a schedule lives until it is deleted. The flow function and ``ClientPolicy`` already hold the
table actions these use (GetItem, Query, PutItem, DeleteItem), so the template grants nothing new.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from ..world.schedules import (
    Action,
    DeclaredSchedule,
    ScheduleNotFoundError,
    ScheduleState,
    Spec,
    check_input,
    parse_tick,
    tick_text,
)
from .clients import AWSClients
from .dynamodb.items import from_ddb, to_ddb
from .resources import PK, SK

PARTITION = "SCHEDULES"
HEAD_PREFIX = "SCHED#"
INPUT_PREFIX = "INPUT#"
INLINE_INPUT_BYTES = 1024
"""Arguments up to this size ride in the record; larger ones in an item of their own, read when a run starts."""


class DynamoSchedules:
    def __init__(self, clients: AWSClients) -> None:
        self.clients = clients
        self.declared: tuple[DeclaredSchedule, ...] = ()

    @property
    def _table(self) -> str:
        return self.clients.config.table_name

    async def list(self) -> list[ScheduleState]:
        ddb = await self.clients.dynamodb()
        kwargs: dict[str, Any] = {
            "TableName": self._table, "KeyConditionExpression": "#pk = :pk AND begins_with(#sk, :head)",
            "ExpressionAttributeNames": {"#pk": PK, "#sk": SK},
            "ExpressionAttributeValues": {":pk": {"S": PARTITION}, ":head": {"S": HEAD_PREFIX}},
            "ReturnConsumedCapacity": "TOTAL",
        }
        found: list[ScheduleState] = []
        while True:
            response = await ddb.query(**kwargs)
            found.extend(decode(str((from_ddb(raw) or {})["s"])) for raw in response.get("Items", []))
            start = response.get("LastEvaluatedKey")
            if start is None:
                return found
            kwargs["ExclusiveStartKey"] = start

    async def get(self, schedule_id: str) -> ScheduleState:
        ddb = await self.clients.dynamodb()
        response = await ddb.get_item(TableName=self._table, Key=to_ddb(_head_key(schedule_id)), ConsistentRead=True,
                                      ReturnConsumedCapacity="TOTAL")
        item = from_ddb(response.get("Item"))
        if item is None:
            raise ScheduleNotFoundError(f"no schedule {schedule_id!r}")
        return decode(str(item["s"]))

    async def input(self, state: ScheduleState) -> str:
        if state.input is not None:
            return state.input
        assert state.input_key is not None, "a record without its arguments names their item"
        ddb = await self.clients.dynamodb()
        response = await ddb.get_item(TableName=self._table, Key=to_ddb(_input_key(state.schedule_id, state.input_key)),
                                      ConsistentRead=True, ReturnConsumedCapacity="TOTAL")
        item = from_ddb(response.get("Item"))
        if item is None:
            raise ScheduleNotFoundError(f"schedule {state.schedule_id!r} lost its arguments (item {state.input_key})")
        return str(item["input"])

    async def write(self, state: ScheduleState, *, expected_version: int | None) -> bool:
        key = state.input_key
        if state.input is not None:
            text = check_input(state.input)
            if len(text.encode("utf-8")) > INLINE_INPUT_BYTES:
                key = hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]
                await self._put_input(state.schedule_id, key, text)  # immutable: written before the record
            else:
                key = None
        record = encode(state, key)
        ddb = await self.clients.dynamodb()
        condition: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(#pk)",
                                     "ExpressionAttributeNames": {"#pk": PK}}
        if expected_version is not None:
            condition = {"ConditionExpression": "#v = :seen", "ExpressionAttributeNames": {"#v": "v"},
                         "ExpressionAttributeValues": {":seen": {"N": str(expected_version)}}}
        try:
            item = to_ddb({**_head_key(state.schedule_id), "v": state.version, "s": record})
            response = await ddb.put_item(TableName=self._table, Item=item, ReturnValues="ALL_OLD",
                                          ReturnConsumedCapacity="TOTAL", **condition)
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        old = from_ddb(response.get("Attributes"))
        old_key = json.loads(str(old["s"])).get("inputKey") if old else None
        if old_key and old_key != key:  # a declaration's arguments changed: the old item is nobody's now
            await self._delete_items([_input_key(state.schedule_id, str(old_key))])
        return True

    async def delete(self, schedule_id: str, *, expected_version: int) -> bool:
        ddb = await self.clients.dynamodb()
        try:
            response = await ddb.delete_item(
                TableName=self._table, Key=to_ddb(_head_key(schedule_id)), ConditionExpression="#v = :seen",
                ExpressionAttributeNames={"#v": "v"}, ExpressionAttributeValues={":seen": {"N": str(expected_version)}},
                ReturnValues="ALL_OLD", ReturnConsumedCapacity="TOTAL")
        except ClientError as error:
            if error.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise
        old = from_ddb(response.get("Attributes"))
        old_key = json.loads(str(old["s"])).get("inputKey") if old else None
        if old_key:
            await self._delete_items([_input_key(schedule_id, str(old_key))])
        return True

    async def _put_input(self, schedule_id: str, key: str, text: str) -> None:
        ddb = await self.clients.dynamodb()
        await ddb.put_item(TableName=self._table, Item=to_ddb({**_input_key(schedule_id, key), "input": text}),
                           ReturnConsumedCapacity="TOTAL")

    async def _delete_items(self, keys: list[dict[str, str]]) -> None:
        ddb = await self.clients.dynamodb()
        for key in keys:
            await ddb.delete_item(TableName=self._table, Key=to_ddb(key), ReturnConsumedCapacity="TOTAL")


def _head_key(schedule_id: str) -> dict[str, str]:
    return {PK: PARTITION, SK: f"{HEAD_PREFIX}{schedule_id}"}


def _input_key(schedule_id: str, key: str) -> dict[str, str]:
    return {PK: PARTITION, SK: f"{INPUT_PREFIX}{schedule_id}#{key}"}


# -- the record as JSON ------------------------------------------------------------------------------------


def _time(moment: datetime | None) -> str | None:
    return None if moment is None else tick_text(moment)


def _parse(text: Any) -> datetime | None:
    return None if text is None else parse_tick(str(text))


def _action(action: Action) -> dict[str, Any]:
    return {"k": action.kind, "r": action.run_id, "t": _time(action.tick), "g": action.trigger}


def _load_action(raw: dict[str, Any]) -> Action:
    return Action(raw["k"], raw["r"], _parse(raw.get("t")), raw.get("g", "tick"))


def encode(state: ScheduleState, input_key: str | None) -> str:
    """The record's JSON (short keys: the record is rewritten by every claim, and billed by the KB)."""
    spec = state.spec
    record: dict[str, Any] = {
        "id": state.schedule_id, "wf": state.workflow_name,
        "spec": {"cron": spec.cron, "every": spec.every, "offset": spec.offset, "tz": spec.timezone},
        "input": state.input if input_key is None else None, "inputKey": input_key,
        "created": _time(state.created_at), "updated": _time(state.updated_at), "cursor": _time(state.cursor),
        "next": _time(state.next_at), "overlap": state.overlap, "catchup": state.catchup,
        "window": state.catchup_window, "source": state.source, "hash": state.spec_hash, "module": state.module,
        "paused": state.paused, "note": state.note, "lastRun": state.last_run_id, "lastTick": _time(state.last_tick),
        "buffered": None if state.buffered is None else _action(state.buffered),
        "pending": [_action(a) for a in state.pending], "v": state.version, "fired": state.fired,
        "skipped": state.skipped, "missed": state.missed, "orphaned": state.orphaned,
    }
    return json.dumps({k: v for k, v in record.items() if v not in (None, [], False)}, separators=(",", ":"))


def decode(text: str) -> ScheduleState:
    raw: dict[str, Any] = json.loads(text)
    spec = raw["spec"]
    created = _parse(raw["created"])
    assert created is not None
    return ScheduleState(
        schedule_id=raw["id"], workflow_name=raw["wf"],
        spec=Spec(cron=spec.get("cron"), every=spec.get("every"), offset=spec.get("offset", 0),
                  timezone=spec.get("tz", "UTC")),
        input=raw.get("input"), input_key=raw.get("inputKey"), created_at=created,
        updated_at=_parse(raw["updated"]) or created, cursor=_parse(raw["cursor"]) or created,
        next_at=_parse(raw.get("next")), overlap=raw.get("overlap", "skip"), catchup=raw.get("catchup", "latest"),
        catchup_window=raw.get("window"), source=raw.get("source", "api"), spec_hash=raw.get("hash", ""),
        module=raw.get("module"), paused=bool(raw.get("paused")), note=raw.get("note"),
        last_run_id=raw.get("lastRun"), last_tick=_parse(raw.get("lastTick")),
        buffered=None if raw.get("buffered") is None else _load_action(raw["buffered"]),
        pending=tuple(_load_action(a) for a in raw.get("pending", [])), version=int(raw.get("v", 0)),
        fired=int(raw.get("fired", 0)), skipped=int(raw.get("skipped", 0)), missed=int(raw.get("missed", 0)),
        orphaned=bool(raw.get("orphaned")))
