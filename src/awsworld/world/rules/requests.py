"""The contract's rules for a write request that hold before any storage is consulted: who may write an event
type, the in-band count an in-band write must carry, a run id, how a batch splits into units that each
write one entity (an event, or the step_created + step_started pair that makes a step born running), and what a
request carries (its value, and the rest of its data as the event stores it).

Every World checks these the same way and in the same order, so the same bad request gets the same 400 from
each; they live here, once, and each World builds its own unit type from ``batch_groups``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence, Sized
from datetime import datetime, timedelta
from typing import Any, TypeVar

from pydantic import BaseModel

from ..errors import InvalidInputError, MissingInBandCountError, RunNotSupportedError, WorldError
from ..events import (
    BATCH_FORBIDDEN_EVENT_TYPES,
    PAYLOAD_FIELDS,
    WRITER_ONLY_EVENT_TYPES,
    AttributeChange,
    AttrSetData,
    BatchEventOutcome,
    CreateEventRequest,
    EventData,
    parse_event_request,
)
from ..ids import SPEC_VERSION_CURRENT, check_entity_id

D = TypeVar("D", bound=EventData)

BORN_RUNNING_PAIR = ("step_created", "step_started")
MAX_BATCH_EVENTS = 40
"""The AWS World's bound (each event is an event item and at most one entity item; a transaction holds 100),
kept by every World so a batch that passes a test passes deployed."""
BATCH_REFUSED_EVENT_TYPES = BATCH_FORBIDDEN_EVENT_TYPES | {"run_completed", "run_failed"}
STAMP_SLACK = timedelta(seconds=1)
MAX_TOKEN_BYTES = 2048 - len("TOKEN#")
"""The AWS World keeps a hook token in a DynamoDB partition key (``TOKEN#<token>``, at most 2,048 bytes): a longer
token is refused by every World, so a workflow tested in memory does not fail on AWS for it."""
MAX_TOKEN_RETENTION = timedelta(days=30)


def token_fits(token: str) -> bool:
    """Whether ``token`` can be a hook token at all (a lookup of one that cannot is "not found" at once)."""
    try:
        size = len(token.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: not representable in DynamoDB
        return False
    return 0 < size <= MAX_TOKEN_BYTES


def check_hook_token(token: str, retention_until: datetime | None, now: datetime) -> None:
    """hook_created's token rules: it fits a key, and its retention is at most 30 days ahead of ``now``."""
    if not token_fits(token):
        raise InvalidInputError(f"token must fit a key: at most {MAX_TOKEN_BYTES} bytes of UTF-8",
                                field="eventData.token")
    if retention_until is not None and retention_until - now > MAX_TOKEN_RETENTION:
        raise InvalidInputError("tokenRetentionUntil may be at most 30 days ahead",
                                field="eventData.tokenRetentionUntil")


def check_write_params(req: CreateEventRequest, in_band: bool, expected: int | None,
                       event_count: int | None) -> None:
    if not 1 <= req.spec_version <= SPEC_VERSION_CURRENT:
        raise RunNotSupportedError(f"specVersion {req.spec_version} is not one this World implements (1 to "
                                   f"{SPEC_VERSION_CURRENT})", run_spec_version=req.spec_version,
                                   world_spec_version=SPEC_VERSION_CURRENT)
    if req.event_type in WRITER_ONLY_EVENT_TYPES:
        raise InvalidInputError(f"{req.event_type} is written by the World, not by callers", field="eventType")
    if in_band and req.event_type != "run_created" and (expected is None or expected < 0):
        raise MissingInBandCountError()
    if event_count is not None and event_count < 0:
        raise InvalidInputError("event_count must be >= 0", field="eventCount")


def check_run_id(run_id: str | None) -> str:
    if not run_id:
        raise InvalidInputError("run_id is required", field="runId")
    return check_entity_id(run_id, "runId")


def attr_set_event(changes: Sequence[AttributeChange | Mapping[str, Any]], allow_reserved: bool) -> dict[str, Any]:
    """The attr_set event ``runs.set_attributes`` writes; a ``$``-prefixed key is reserved unless ``allow_reserved``.
    The changes are checked as the event's own (a change that is not ``{key: str, value: str | null}`` is a 400
    naming it, ``eventData.changes.0.key``), not left to raise pydantic's error (a 500 over HTTP)."""
    wire = [c.model_dump() if isinstance(c, AttributeChange) else c for c in changes]
    data = parse_event_request({"eventType": "attr_set", "eventData": {"changes": wire}}).event_data
    assert isinstance(data, AttrSetData)
    for c in data.changes:
        if c.key.startswith("$") and not allow_reserved:
            raise InvalidInputError(f"attribute {c.key!r} is reserved ($-prefixed)", field="changes.key")
    return {"eventType": "attr_set", "eventData": {"changes": [{"key": c.key, "value": c.value} for c in data.changes]}}


def failed_outcome(error: WorldError) -> BatchEventOutcome:
    """A batch entry refused with ``error``."""
    return BatchEventOutcome(status=error.status, error=error.code, message=error.message)


def in_request_order(units: Sequence[Sized], outcomes: Sequence[BatchEventOutcome],
                     paired: Mapping[int, BatchEventOutcome]) -> list[BatchEventOutcome]:
    """A batch's answer, one outcome per request in the order given: each unit's (``outcomes``, by unit), and
    before a born-running pair's (its step_started's) the step_created's, with its own event (``paired``, by the
    unit's position; a pair refused whole answers with the unit's refusal twice)."""
    flat: list[BatchEventOutcome] = []
    for i, (unit, outcome) in enumerate(zip(units, outcomes, strict=True)):
        if len(unit) == 2:
            flat.append(paired.get(i, outcome))
        flat.append(outcome)
    return flat


def batch_groups(reqs: list[CreateEventRequest]) -> list[list[CreateEventRequest]]:
    """A batch's requests grouped into units; refuses two events for one entity, except the born-running pair
    (whose input rides on step_created)."""
    groups: list[list[CreateEventRequest]] = []
    seen: set[str] = set()
    i = 0
    while i < len(reqs):
        req = reqs[i]
        nxt = reqs[i + 1] if i + 1 < len(reqs) else None
        key = f"{req.event_type.split('_')[0]}:{req.correlation_id}"
        if key in seen:
            raise InvalidInputError(f"the batch has more than one event for {req.correlation_id}",
                                    field=f"events.{i}")
        seen.add(key)
        if (nxt is not None and (req.event_type, nxt.event_type) == BORN_RUNNING_PAIR
                and nxt.correlation_id == req.correlation_id):
            nxt_data = nxt.data()
            if ("input" in nxt_data.__pydantic_fields_set__
                    or (nxt_data.__pydantic_extra__ or {}).get("input") is not None):
                raise InvalidInputError("in a step_created + step_started pair the input rides on step_created",
                                        field=f"events.{i + 1}.eventData.input")
            groups.append([req, nxt])
            i += 2
        else:
            groups.append([req])
            i += 1
    return groups


def batch_requests(events: Sequence[Any], *, in_band: bool, expected_seq_in_band: int | None,
                   stamp: datetime | None, now: datetime) -> list[list[CreateEventRequest]]:
    """A ``create_batch`` call's events parsed, checked and grouped into units, or the 400 its first problem
    gets. ``now``: the World's time, which a ``stamp`` may not be ahead of by more than ``STAMP_SLACK``."""
    if stamp is not None:
        if not in_band or stamp.tzinfo is None:
            raise InvalidInputError("stamp needs an in-band write and a timezone-aware time", field="stamp")
        if stamp > now + STAMP_SLACK:
            raise InvalidInputError("stamp is in the future", field="stamp")
    reqs = [parse_event_request(e) for e in events]
    if not reqs:
        raise InvalidInputError("a batch needs at least one event", field="events")
    if len(reqs) > MAX_BATCH_EVENTS:
        raise InvalidInputError(f"a batch holds at most {MAX_BATCH_EVENTS} events (got {len(reqs)})",
                                field="events")
    for i, req in enumerate(reqs):
        check_write_params(req, in_band, expected_seq_in_band, None)
        if req.event_type in BATCH_REFUSED_EVENT_TYPES:
            raise InvalidInputError(f"{req.event_type} cannot be written in a batch", field=f"events.{i}")
    return batch_groups(reqs)


VALUE_FIELD: dict[str, str] = {t: fields[0] for t, fields in PAYLOAD_FIELDS.items()}
"""The eventData field holding each event type's user value (stored apart, left out by resolve_data="none")."""
_WITHOUT_VALUE: dict[str, set[str]] = {t: {name} for t, name in VALUE_FIELD.items()}


def data_as(req: CreateEventRequest, model: type[D]) -> D:
    """The request's data as its event type's model (``parse_event_request`` made it one)."""
    data = req.data()
    if not isinstance(data, model):
        raise InvalidInputError(f"{req.event_type} carries {type(data).__name__}, not {model.__name__}",
                                field="eventData")
    return data


def carried_value(req: CreateEventRequest) -> tuple[bool, Any]:
    """(True, the value) when the request carries its event type's value field, even a null; (False, None) when
    it does not. The value is the one given (a model as its JSON dump), not pydantic's JSON rendering of it,
    which would quietly turn NaN into null where the World must refuse it."""
    name = VALUE_FIELD.get(req.event_type)
    if name is None:
        return False, None
    data = req.data()
    extra = data.__pydantic_extra__ or {}  # model_extra / model_fields_set without their property calls
    if name in data.__pydantic_fields_set__:
        value: Any = getattr(data, name)
    elif name in extra:
        value = extra[name]
    else:
        return False, None
    if isinstance(value, BaseModel):
        value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return True, value


def event_data(req: CreateEventRequest, **extra: Any) -> dict[str, Any]:
    """The eventData an event keeps: the request's data as its model dumps it (unknown fields kept), without the
    value field, plus ``extra``."""
    data = req.data()
    raw: dict[str, Any] = data.__pydantic_serializer__.to_python(
        data, mode="json", by_alias=True, exclude_none=True, exclude=_WITHOUT_VALUE.get(req.event_type))
    if extra:
        raw.update(extra)
    return raw
