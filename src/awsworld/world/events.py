"""Events: the per-type data models, the write request, the stored event and the write result.

``parse_event_request`` is the single entry point for input: it accepts a model or the spec's wire-shape
mapping and raises :class:`InvalidInputError` naming the field, before anything is written.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, Literal, cast

from pydantic import Field, ValidationError
from pydantic.alias_generators import to_camel

from .entities import ERROR_TAGS, HookRecord, Run, Step, StoredError, Wait
from .errors import InvalidInputError
from .ids import SPEC_VERSION_CURRENT, check_entity_id, event_id_to_slot
from .wire_model import WireModel

EventType = Literal[
    "run_created",
    "run_started",
    "run_completed",
    "run_failed",
    "run_cancelled",
    "attr_set",
    "step_created",
    "step_started",
    "step_retrying",
    "step_completed",
    "step_failed",
    "hook_created",
    "hook_received",
    "hook_disposed",
    "hook_conflict",
    "wait_created",
    "wait_completed",
]


class EventData(WireModel):
    # Unknown fields are kept (forward compatibility with newer writers); known ones are validated.
    model_config = WireModel.model_config | {"extra": "allow"}


MAX_DEFINITION_NAME_LENGTH = 512
"""The longest workflow or step name (``workflowName``, ``stepName``) a World records; ``@workflow``/``@step``
refuse a longer ``name=`` when they register it (``authoring.definitions``), so a run never starts that its first
write, or its step's declaration, would refuse."""


class RunCreatedData(EventData):
    workflow_name: str = Field(min_length=1, max_length=MAX_DEFINITION_NAME_LENGTH)
    deployment_id: str | None = None
    input: Any = None
    execution_context: dict[str, Any] | None = None
    attributes: dict[str, str] | None = None


class RunStartedData(EventData):
    """Empty normally; carries the run_created fields when the start must create the run (resilient start)."""

    workflow_name: str | None = None
    deployment_id: str | None = None
    input: Any = None
    execution_context: dict[str, Any] | None = None


class RunCompletedData(EventData):
    output: Any = None


class RunFailedData(EventData):
    error: StoredError
    error_code: str | None = None
    unsealed_if_key_lost: bool | None = None
    """awsworld's: an operator's end (``Client.fail``) whose error a World that seals values (``aws/values.py``)
    stores in plain text when the run's key is lost, so a run no one can resume can still be failed, readably.
    The error is the operator's words, never a value of the run; a run whose key opens has it sealed."""


class RunCancelledData(EventData):
    cancel_reason: str | None = Field(default=None, max_length=512)


class AttributeChange(WireModel):
    key: str = Field(min_length=1, max_length=256)
    value: str | None = None


class AttrSetData(EventData):
    changes: list[AttributeChange] = Field(min_length=1)


MAX_DISPLAY_NAME_LENGTH = 512
"""The longest ``displayName`` a ``*_created`` event may carry: a call's name for people (never compared on
replay; see ``authoring.names``)."""


class StepCreatedData(EventData):
    step_name: str = Field(min_length=1, max_length=MAX_DEFINITION_NAME_LENGTH)
    display_name: str | None = Field(default=None, min_length=1, max_length=MAX_DISPLAY_NAME_LENGTH)
    input: Any = None
    input_digest: str | None = Field(default=None, max_length=64)
    """A digest of ``input`` the runtime writes (16 bytes, base64url) so a replay can check a call's arguments
    without loading inputs. Optional: older events lack it."""


class StepStartedData(EventData):
    """``attempt`` is filled in by the World with the attempt this start begins."""

    attempt: int | None = None


class StepRetryingData(EventData):
    error: StoredError
    retry_after: datetime | None = None


class StepCompletedData(EventData):
    result: Any = None


class StepFailedData(EventData):
    error: StoredError


# The longest hook token a hook may be created with. A token longer than this can never be held, so a lookup
# of one can answer "not found" without asking the store (the webhook route relies on it).
MAX_HOOK_TOKEN_LENGTH = 1024
# A resume id is stored in its event; longer idempotency ids are hashed by their callers to fit.
MAX_RESUME_ID_LENGTH = 256


class HookCreatedData(EventData):
    token: str = Field(min_length=1, max_length=MAX_HOOK_TOKEN_LENGTH)
    metadata: Any = None
    is_webhook: bool | None = None
    token_retention_until: datetime | None = None
    display_name: str | None = Field(default=None, min_length=1, max_length=MAX_DISPLAY_NAME_LENGTH)
    payload_codec: bool | None = None
    """The hook decodes its payloads with a codec (``create_hook(codec=...)``; ``_engine.ops.PAYLOAD_CODEC_FIELD``):
    kept on the hook (``HookRecord.payload_codec``), never compared on replay."""


class HookReceivedData(EventData):
    """``resumeId`` makes the delivery idempotent per hook: a second ``hook_received`` with the same id is
    refused with :class:`HookAlreadyReceivedError` and writes nothing, so a sender may retry a request whose
    answer it never saw (the webhook route passes the request's idempotency key) without the run receiving
    the payload twice. ``heartbeat``: the event is a heartbeat (``Client.heartbeat_hook``), not a payload, said
    outside the payload so a reader that leaves payloads out (``resolve_data="none"``) can tell. ``resumeOnce``
    (with a ``resumeId``): the resume id is one hook's only, in the whole World: once a hook recorded it, any other
    hook refuses it (:class:`HookResumedElsewhereError`, naming the hook), even after that hook was disposed or
    its run's data expired (a workflow's ``resume_hook``: ``world/rules/hooks.py``)."""

    payload: Any = None
    resume_id: str | None = Field(default=None, min_length=1, max_length=MAX_RESUME_ID_LENGTH)
    resume_once: bool | None = None
    heartbeat: bool | None = None


class HookDisposedData(EventData):
    pass


class HookConflictData(EventData):
    token: str
    conflicting_run_id: str


class WaitCreatedData(EventData):
    resume_at: datetime
    display_name: str | None = Field(default=None, min_length=1, max_length=MAX_DISPLAY_NAME_LENGTH)
    # A hook's own wait (engine.ops.HOOK_ID_FIELD): the hook's id, and "timeout" or "heartbeat". Display only.
    hook_id: str | None = None
    hook_wait: Literal["timeout", "heartbeat"] | None = None


class WaitCompletedData(EventData):
    pass


EntityKind = Literal["run", "step", "hook", "wait"]


@dataclass(frozen=True)
class EventTypeSpec:
    """What the contract says about one event type, in one place: its data model, the field that carries the
    user's payload (left out by resolve_data="none", stored in S3 when large), the entity it is about (its
    correlation id names a step, hook or wait), whether a batch may hold it (the spec forbids those that change
    run-level state or claim a token) and whether only the World writes it. How a World stores it lives with
    the World (the AWS World: ``aws/log/transitions.py``)."""

    data_model: type[EventData]
    entity: EntityKind
    payload_field: str | None = None
    batchable: bool = True
    writer_only: bool = False


EVENT_TYPES: dict[str, EventTypeSpec] = {
    "run_created": EventTypeSpec(RunCreatedData, "run", "input", batchable=False),
    "run_started": EventTypeSpec(RunStartedData, "run", "input", batchable=False),
    "run_completed": EventTypeSpec(RunCompletedData, "run", "output"),
    "run_failed": EventTypeSpec(RunFailedData, "run", "error"),
    "run_cancelled": EventTypeSpec(RunCancelledData, "run", batchable=False),
    "attr_set": EventTypeSpec(AttrSetData, "run", batchable=False),
    "step_created": EventTypeSpec(StepCreatedData, "step", "input"),
    "step_started": EventTypeSpec(StepStartedData, "step"),
    "step_retrying": EventTypeSpec(StepRetryingData, "step", "error"),
    "step_completed": EventTypeSpec(StepCompletedData, "step", "result"),
    "step_failed": EventTypeSpec(StepFailedData, "step", "error"),
    "hook_created": EventTypeSpec(HookCreatedData, "hook", "metadata", batchable=False),
    "hook_received": EventTypeSpec(HookReceivedData, "hook", "payload"),
    "hook_disposed": EventTypeSpec(HookDisposedData, "hook", batchable=False),
    "hook_conflict": EventTypeSpec(HookConflictData, "hook", writer_only=True),
    "wait_created": EventTypeSpec(WaitCreatedData, "wait"),
    "wait_completed": EventTypeSpec(WaitCompletedData, "wait"),
}

# Views of EVENT_TYPES, for the places that ask one question.
EVENT_DATA_MODELS: dict[str, type[EventData]] = {t: spec.data_model for t, spec in EVENT_TYPES.items()}
CORRELATED_EVENT_TYPES = frozenset(t for t, spec in EVENT_TYPES.items() if spec.entity != "run")
WRITER_ONLY_EVENT_TYPES = frozenset(t for t, spec in EVENT_TYPES.items() if spec.writer_only)
BATCH_FORBIDDEN_EVENT_TYPES = frozenset(t for t, spec in EVENT_TYPES.items() if not spec.batchable)
RUN_END_EVENT_TYPES = frozenset({"run_completed", "run_failed", "run_cancelled"})
"""The events that end a run (its status becomes one of ``entities.TERMINAL_RUN_STATUSES``): what a flow, a
parent waiting on its child and the run viewer look for in a log."""
PAYLOAD_FIELDS: dict[str, tuple[str, ...]] = {
    t: (spec.payload_field,) for t, spec in EVENT_TYPES.items() if spec.payload_field
}


class CreateEventRequest(WireModel):
    """One event to write. ``event_data`` is validated against the model of ``event_type``.

    ``spec_version``: the protocol version the writer speaks. The Workflow SDK's runtime sends it on every event
    (its ``BaseEventSchema`` reads an event without one as legacy data); awsworld's own writers (``Client.cancel``,
    ``runs.set_attributes``, the Python runtime) do not, and speak this World's version, so a request without one
    is written with ``SPEC_VERSION_CURRENT``, as world-local does (``data.specVersion ?? SPEC_VERSION_CURRENT``).
    Every event, and the step, hook or wait it makes, then carries one."""

    event_type: EventType
    correlation_id: str | None = None
    event_data: EventData | None = None
    spec_version: int = SPEC_VERSION_CURRENT

    def data(self) -> EventData:
        assert self.event_data is not None
        return self.event_data


class Event(WireModel):
    event_id: str
    run_id: str
    event_type: EventType
    correlation_id: str | None = None
    event_data: dict[str, Any] | None = None
    created_at: datetime
    spec_version: int | None = None

    @property
    def slot(self) -> int:
        return _slot_of(self.event_id)


_slot_of = lru_cache(maxsize=1 << 16)(event_id_to_slot)
"""An event id's slot, parsed once per id: ids are the same in every run (slot n is always one id), readers ask
for slots several times per event, and a malformed id is not cached (it raises each time, as it did)."""


class LogSnapshot(WireModel):
    """The run's counters read before a listing: a full load covers every position up to ``seq``."""

    seq: int
    seq_in_band: int


class EventResult(WireModel):
    """What a write returns: the event it committed and the entity it changed.

    ``events``/``cursor``/``has_more`` carry the events the writer skipped over when it held a stale
    ``event_count``; ``seq_in_band`` is the count after an accepted in-band write.
    """

    event: Event | None = None
    run: Run | None = None
    step: Step | None = None
    hook: HookRecord | None = None
    wait: Wait | None = None
    events: list[Event] = Field(default_factory=list[Event])
    cursor: str | None = None
    has_more: bool = False
    seq_in_band: int | None = None
    open_steps: int | None = None
    """Steps of the run declared and not yet completed or failed, after this write (when known)."""
    step_created: bool | None = None
    """True when a step_started created the step it starts (a lazy start: ``world/rules/steps.py``)."""


class BatchEventOutcome(WireModel):
    """One event's outcome in a batch: ``status`` 200 with ``result``, or an error status with ``error``."""

    status: int = 200
    result: EventResult | None = None
    error: str | None = None
    message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


class EventBatchResult(WireModel):
    """Index-aligned with the request. Events that were accepted landed at consecutive slots in order."""

    results: list[BatchEventOutcome]
    seq_in_band: int | None = None


def _field_path(loc: tuple[Any, ...]) -> str:
    return ".".join(to_camel(str(p)) if isinstance(p, str) else str(p) for p in loc if p not in ERROR_TAGS)


def parse_event_request(event: CreateEventRequest | dict[str, Any] | Any) -> CreateEventRequest:
    """Validate an event request (model or wire mapping) into a typed request, or raise InvalidInputError."""
    if isinstance(event, CreateEventRequest):
        raw: dict[str, Any] = event.model_dump(by_alias=True, exclude_none=True)
        if isinstance(event.event_data, EventData):
            raw["eventData"] = event.event_data.model_dump(by_alias=True, exclude_none=True)
    elif isinstance(event, dict):
        raw = dict(cast("dict[str, Any]", event))  # a wire mapping: its keys are field names (validated below)
    else:
        raise InvalidInputError(f"an event must be a CreateEventRequest or a mapping, not {type(event).__name__}")
    event_type = raw.get("eventType", raw.get("event_type"))
    if event_type is None:
        raise InvalidInputError("eventType is required", field="eventType")
    model = EVENT_DATA_MODELS.get(event_type) if isinstance(event_type, str) else None
    if model is None:
        raise InvalidInputError(f"unknown event type {event_type!r}", field="eventType")
    data = raw.pop("eventData", raw.pop("event_data", None))
    for key in ("specVersion", "spec_version"):  # (a null one is none given: the default applies)
        if key in raw and raw[key] is None:
            del raw[key]
    if data is None:
        data = {}
    if not isinstance(data, dict):
        raise InvalidInputError("eventData must be an object", field="eventData")
    try:
        parsed_data = model.model_validate(data)
        request = CreateEventRequest.model_validate(raw)  # (its eventData was taken out above)
    except ValidationError as exc:
        first = exc.errors()[0]
        prefix = "" if request_has_field(first["loc"]) else "eventData."
        path = prefix + _field_path(first["loc"])
        raise InvalidInputError(f"invalid {event_type} event: {path}: {first['msg']}", field=path) from None
    # What pydantic's assignment does on a model without validate_assignment, without its per-call dispatch:
    vars(request)["event_data"] = parsed_data
    request.__pydantic_fields_set__.add("event_data")
    if event_type in CORRELATED_EVENT_TYPES and not request.correlation_id:
        raise InvalidInputError(f"{event_type} needs a correlationId", field="correlationId")
    if request.correlation_id is not None:
        check_entity_id(request.correlation_id, "correlationId")
    return request


def request_has_field(loc: tuple[Any, ...]) -> bool:
    return bool(loc) and loc[0] in {"event_type", "eventType", "correlation_id", "correlationId", "spec_version"}
