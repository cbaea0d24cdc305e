"""Conversions between DynamoDB items and contract models, and the codec for attribute values.

Items are handled as plain Python dicts (str, int, bool, dict, list); ``to_ddb``/``from_ddb`` convert to the
low-level wire format. Numbers are integers only (counters), so Decimal never leaks out.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from ...world.entities import (
    Hook,
    ResolveData,
    Run,
    Step,
    Wait,
    event_value_shown,
    run_end_shown,
    step_input_shown,
    step_lease_shown,
    stored_error,
    values_shown,
)
from ...world.events import PAYLOAD_FIELDS, Event
from ...world.ids import slot_to_event_id
from ..keys import ATTRIBUTE_PREFIX, HOOK_PREFIX, STEP_PREFIX, WAIT_PREFIX
from ..log.blocks import BlockEvent
from ..resources import GSI_RUN_KEY, GSI_WORKFLOW_KEY
from ..values import StoredValue, ValueStore

Item = dict[str, Any]


class _Codec:
    """boto3's attribute-value codec, made on first use: importing ``boto3`` imports botocore's session and
    client machinery, which the flow function loads with its first client, not at import
    (docs/operate/cold-starts.md). A leaf import: boto3 imports nothing of awsworld."""

    def __init__(self) -> None:
        from boto3.dynamodb.types import TypeDeserializer, TypeSerializer

        self.serialize = TypeSerializer().serialize
        self.deserialize = TypeDeserializer().deserialize


_codec: _Codec | None = None


def codec() -> _Codec:
    global _codec
    if _codec is None:
        _codec = _Codec()
    return _codec


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


def to_ddb(item: Item) -> dict[str, Any]:
    serialize = codec().serialize
    return {k: serialize(v) for k, v in item.items() if v is not None}


def to_ddb_value(value: Any) -> dict[str, Any]:
    return codec().serialize(value)


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
    deserialize = codec().deserialize
    return {k: _plain(deserialize(v)) for k, v in raw.items()}


_error = stored_error  # (one reading of a stored error: world.entities)


def _val(events: Mapping[int, BlockEvent], slot: Any) -> StoredValue | None:
    event = events.get(int(slot)) if slot else None
    return event.val if event is not None else None


def attributes_of(item: Item | None) -> dict[str, str]:
    """A run's attributes item holds each attribute as its own top-level attribute, ``a:<key>``: attr_set
    updates exactly the keys it names, with no read and no map that must exist first."""
    if not item:
        return {}
    return {k[len(ATTRIBUTE_PREFIX):]: v for k, v in item.items() if k.startswith(ATTRIBUTE_PREFIX)}


async def run_from_head(head: Item, values: ValueStore, resolve: ResolveData, *, first: BlockEvent | None,
                        end: BlockEvent | None, attributes: dict[str, str]) -> Run:
    """A run from its thin head, the run_created event (input, execution context) and its terminal event."""
    status = head["status"]
    shown = run_end_shown(status, resolve)
    input_, end_value = await values.load_many([
        first.val if values_shown(resolve) and first is not None else None,
        end.val if shown is not None and end is not None else None,
    ], head[GSI_RUN_KEY])
    context = (first.data if first is not None else {}).get("executionContext")
    return Run(
        run_id=head[GSI_RUN_KEY],
        status=status,
        workflow_name=head[GSI_WORKFLOW_KEY],
        deployment_id=head.get("deploymentId"),
        spec_version=head["specVersion"],
        execution_context=context,
        input=input_,
        output=end_value if shown == "output" else None,
        error=_error(end_value) if shown == "error" else None,
        attributes=attributes,
        error_code=head.get("errorCode"),
        seq=head["seq"],
        seq_in_band=head["seqInBand"],
        open_steps=head.get("openSteps", 0),
        created_at=head["createdAt"],
        updated_at=head["updatedAt"],
        started_at=head.get("startedAt"),
        completed_at=head.get("completedAt"),
    )


def step_value_slots(item: Item, resolve: ResolveData) -> list[int]:
    """The slots whose events hold what ``step_from_item`` needs to answer at ``resolve``."""
    slots = [item.get("err")]
    if values_shown(resolve):
        slots.append(item.get("out"))
    if step_input_shown(resolve):
        slots.append(item.get("in"))
    return [int(s) for s in slots if s]


async def step_from_item(item: Item, values: ValueStore, resolve: ResolveData,
                         events: Mapping[int, BlockEvent]) -> Step:
    want_input = step_input_shown(resolve)
    want_output = values_shown(resolve)
    run_id = item["pk"].removeprefix("RUN#")
    input_, output, error = await values.load_many([
        _val(events, item.get("in")) if want_input else None,
        _val(events, item.get("out")) if want_output else None,
        _val(events, item.get("err")),
    ], run_id)
    return Step(
        run_id=run_id,
        step_id=item["sk"].removeprefix(STEP_PREFIX),
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
        lease_until=item.get("leaseUntil") if step_lease_shown(item["status"]) else None,
    )


def hook_value_slots(item: Item, resolve: ResolveData) -> list[int]:
    return [int(item["in"])] if values_shown(resolve) and item.get("in") else []


async def hook_from_item(item: Item, values: ValueStore, resolve: ResolveData,
                         events: Mapping[int, BlockEvent]) -> Hook:
    run_id = item["pk"].removeprefix("RUN#")
    metadata = await values.load(_val(events, item.get("in")), run_id) if values_shown(resolve) else None
    return Hook(
        run_id=run_id,
        hook_id=item["sk"].removeprefix(HOOK_PREFIX),
        token=item["token"],
        status=item.get("status") or "open",  # "closed" once its run ended (a retained hook)
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
        run_id=item["pk"].removeprefix("RUN#"),
        wait_id=item["sk"].removeprefix(WAIT_PREFIX),
        status=item["status"],
        resume_at=item.get("resumeAt"),
        created_at=item["createdAt"],
        updated_at=item["updatedAt"],
        completed_at=item.get("completedAt"),
        spec_version=item.get("specVersion"),
    )


def event_from_block(event: BlockEvent, payload: Any = None, *, with_payload: bool = True) -> Event:
    data = dict(event.data)
    fields = PAYLOAD_FIELDS.get(event.event_type, ())
    if fields and with_payload and event.val is not None:
        data[fields[0]] = payload
    # Validated from the stored strings (the event type and the ISO timestamp become Event's types).
    return Event.model_validate({
        "event_id": slot_to_event_id(event.slot),
        "run_id": event.run_id,
        "event_type": event.event_type,
        "correlation_id": event.correlation_id,
        "event_data": data,
        "created_at": event.created_at,
        "spec_version": event.spec_version,
    })


async def events_from_blocks(run_id: str, events: list[BlockEvent], values: ValueStore,
                             resolve: ResolveData) -> list[Event]:
    """``run_id``'s events, with their payloads as ``resolve`` asks."""
    wanted = [event_value_shown(e.event_type, resolve) for e in events]
    payloads = await values.load_many([e.val if w else None for e, w in zip(events, wanted, strict=True)], run_id)
    return [event_from_block(e, p, with_payload=w) for e, p, w in zip(events, payloads, wanted, strict=True)]
