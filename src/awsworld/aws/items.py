"""Conversions between DynamoDB items and contract models, and the codec for attribute values.

Items are handled as plain Python dicts (str, int, bool, dict, list); ``to_ddb``/``from_ddb`` convert to the
low-level wire format. Numbers are integers only (counters), so Decimal never leaks out.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

from ..world.entities import Hook, ResolveData, Run, Step, StructuredError, Wait
from ..world.events import PAYLOAD_FIELDS, Event
from ..world.ids import slot_to_event_id
from .keys import slot_of_event_sk
from .values import ValueStore

_serializer = TypeSerializer()
_deserializer = TypeDeserializer()

Item = dict[str, Any]


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def to_ddb(item: Item) -> dict[str, Any]:
    return {k: _serializer.serialize(v) for k, v in item.items() if v is not None}


def to_ddb_value(value: Any) -> dict[str, Any]:
    return _serializer.serialize(value)


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, set):
        return {_plain(v) for v in value}
    return value


def from_ddb(raw: dict[str, Any] | None) -> Item | None:
    if not raw:
        return None
    return {k: _plain(_deserializer.deserialize(v)) for k, v in raw.items()}


def _error(raw: Any) -> StructuredError | None:
    return StructuredError.model_validate(raw) if raw else None


async def run_from_item(item: Item, values: ValueStore, resolve: ResolveData = "all") -> Run:
    want = resolve != "none"
    input_, output, error = await values.load_many(
        [item.get("input") if want else None, item.get("output") if want else None, item.get("error")]
    )
    return Run(
        run_id=item["runId"],
        status=item["status"],
        workflow_name=item["workflowName"],
        deployment_id=item.get("deploymentId"),
        spec_version=item["specVersion"],
        execution_context=json.loads(item["executionContext"]) if item.get("executionContext") else None,
        input=input_,
        output=output,
        error=_error(error),
        attributes=item.get("attributes") or {},
        error_code=item.get("errorCode"),
        seq=item["seq"],
        seq_in_band=item["seqInBand"],
        open_steps=item.get("openSteps", 0),
        created_at=item["createdAt"],
        updated_at=item["updatedAt"],
        started_at=item.get("startedAt"),
        completed_at=item.get("completedAt"),
    )


async def step_from_item(item: Item, values: ValueStore, resolve: ResolveData = "all") -> Step:
    want_input = resolve == "all"
    want_output = resolve != "none"
    input_, output, error = await values.load_many(
        [item.get("input") if want_input else None, item.get("output") if want_output else None,
         item.get("error")]
    )
    return Step(
        run_id=item["runId"],
        step_id=item["stepId"],
        step_name=item["stepName"],
        status=item["status"],
        input=input_,
        output=output,
        error=_error(error),
        attempt=item.get("attempt", 0),
        retry_after=item.get("retryAfter"),
        created_at=item["createdAt"],
        updated_at=item["updatedAt"],
        started_at=item.get("startedAt"),
        completed_at=item.get("completedAt"),
        spec_version=item.get("specVersion"),
    )


async def hook_from_item(item: Item, values: ValueStore, resolve: ResolveData = "all") -> Hook:
    metadata = await values.load(item.get("metadata")) if resolve != "none" else None
    return Hook(
        run_id=item["runId"],
        hook_id=item["hookId"],
        token=item["token"],
        metadata=metadata,
        is_webhook=bool(item.get("isWebhook")),
        token_retention_until=item.get("tokenRetentionUntil"),
        created_at=item["createdAt"],
        updated_at=item["updatedAt"],
        received_at=item.get("receivedAt"),
        spec_version=item.get("specVersion"),
    )


def wait_from_item(item: Item) -> Wait:
    return Wait(
        run_id=item["runId"],
        wait_id=item["waitId"],
        status=item["status"],
        resume_at=item.get("resumeAt"),
        created_at=item["createdAt"],
        updated_at=item["updatedAt"],
        completed_at=item.get("completedAt"),
        spec_version=item.get("specVersion"),
    )


def event_payload_wanted(event_type: str, resolve: ResolveData) -> bool:
    if resolve == "none":
        return False
    return not (resolve == "skip-step-inputs" and event_type in {"step_created", "step_started"})


def event_from_item(item: Item, payload: Any = None, *, with_payload: bool = True) -> Event:
    event_type = item["eventType"]
    data = json.loads(item["data"]) if item.get("data") else {}
    fields = PAYLOAD_FIELDS.get(event_type, ())
    if fields and with_payload and "val" in item:
        data[fields[0]] = payload
    return Event(
        event_id=slot_to_event_id(slot_of_event_sk(item["sk"])),
        run_id=item["runId"],
        event_type=event_type,
        correlation_id=item.get("correlationId"),
        event_data=data,
        created_at=item["createdAt"],
        spec_version=item.get("specVersion"),
    )


async def events_from_items(items: list[Item], values: ValueStore, resolve: ResolveData) -> list[Event]:
    wanted = [event_payload_wanted(i["eventType"], resolve) for i in items]
    payloads = await values.load_many([i.get("val") if w else None for i, w in zip(items, wanted, strict=True)])
    return [
        event_from_item(i, p, with_payload=w) for i, p, w in zip(items, payloads, wanted, strict=True)
    ]
