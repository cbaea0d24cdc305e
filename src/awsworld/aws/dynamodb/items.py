"""Conversions between DynamoDB items and contract models, and the codec for attribute values.

Items are handled as plain Python dicts (str, int, bool, dict, list); ``to_ddb``/``from_ddb`` convert to the
low-level wire format. Numbers are integers only (counters), so Decimal never leaks out.
"""

from __future__ import annotations

from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

from ...world.entities import ResolveData, Run, event_value_shown, run_end_shown, stored_error, values_shown
from ...world.events import PAYLOAD_FIELDS, Event
from ...world.ids import slot_to_event_id
from ..encryption.run_keys import EncryptionKeyError, unreadable_error
from ..keys import ATTRIBUTE_PREFIX
from ..log.blocks import BlockEvent
from ..resources import GSI_RUN_KEY, GSI_WORKFLOW_KEY
from ..values import ValueStore

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
    try:
        input_, end_value = await values.load_many([
            first.val if values_shown(resolve) and first is not None else None,
            end.val if shown is not None and end is not None else None,
        ], head[GSI_RUN_KEY])
    except EncryptionKeyError as error:
        if values_shown(resolve):
            raise
        input_, end_value = None, unreadable_error(error)  # (a failed run's error, the one value shown)
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
        error=stored_error(end_value) if shown == "error" else None,
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
