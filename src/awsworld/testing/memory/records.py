"""What the in-memory World stores (plain dataclasses in dicts and lists) and how it answers in contract models.

One ``RunRecord`` per run holds its log (``events``, index = slot - 1, so a page from a cursor is a slice), its
counters and its steps, hooks and waits. Each user value is stored once, in the event that introduced it, and
entities point at that event's slot, as the AWS World does, so an entity and its event can never disagree.
Tokens and hook ids are global (``State.tokens``, ``State.hook_runs``) because the contract makes them so.

Answers are built with ``build`` from values this module already holds in the models' own types:
re-validating what the World built itself would cost more than the rest of a write. Every answer is a new
object holding copies of user values, so a caller may mutate it freely.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar

from pydantic import BaseModel

from ...world.entities import TERMINAL_RUN_STATUSES, Hook, ResolveData, Run, Step, StructuredError, Wait
from ...world.events import PAYLOAD_FIELDS, Event
from ...world.hook_ends import hook_status
from ...world.ids import slot_to_event_id
from .values import JSONValue, Value, copy_json

PAYLOAD_NAME: dict[str, str] = {t: fields[0] for t, fields in PAYLOAD_FIELDS.items()}
"""The eventData field holding each event type's user value (left out by resolve_data="none")."""

_STEP_INPUT_EVENTS = frozenset({"step_created", "step_started"})

M = TypeVar("M", bound=BaseModel)
_UNSET_FIELDS: dict[type[BaseModel], tuple[dict[str, Any], dict[str, Callable[[], Any]]]] = {}
_set_attr = object.__setattr__


def _defaults(cls: type[BaseModel]) -> tuple[dict[str, Any], dict[str, Callable[[], Any]]]:
    known = _UNSET_FIELDS.get(cls)
    if known is None:
        plain = {n: f.default for n, f in cls.model_fields.items() if f.default_factory is None}
        made: dict[str, Callable[[], Any]] = {n: f.default_factory for n, f in cls.model_fields.items()  # type: ignore[misc]
                                              if f.default_factory is not None}
        known = _UNSET_FIELDS[cls] = (plain, made)
    return known


def build(cls: type[M], **values: Any) -> M:
    """``cls.model_construct(**values)`` for a model with no extra fields, without the per-call work pydantic's
    version does to resolve defaults (it inspects each default factory's signature on every call, which costs
    more than the rest of a write). The values must already be of the fields' types."""
    plain, made = _defaults(cls)
    data = {**plain, **values}
    for name, factory in made.items():
        if name not in values:
            data[name] = factory()
    model = cls.__new__(cls)
    _set_attr(model, "__dict__", data)
    _set_attr(model, "__pydantic_fields_set__", set(values))
    _set_attr(model, "__pydantic_extra__", None)
    _set_attr(model, "__pydantic_private__", None)
    return model


@dataclass(slots=True)
class StoredEvent:
    slot: int
    event_id: str
    event_type: str
    correlation_id: str | None
    data: dict[str, JSONValue]  # eventData without its payload field
    data_text: str | None  # data's JSON when it holds containers (a read copies it deeply)
    payload: Value | None  # the payload field, when the event carries one
    created_at: datetime
    spec_version: int | None


@dataclass(slots=True)
class StepRecord:
    step_name: str
    status: str
    created_at: datetime
    updated_at: datetime
    spec_version: int | None
    attempt: int = 0
    input_slot: int | None = None
    output_slot: int | None = None
    error_slot: int | None = None
    retry_after: datetime | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    owner: str | None = None  # the message id of the delivery running it (StepRunningElsewhereError)
    lease_until: datetime | None = None  # when its owner's lease ends (world.leases)


@dataclass(slots=True)
class HookRecord:
    token: str
    is_webhook: bool
    created_at: datetime
    updated_at: datetime
    spec_version: int | None
    metadata_slot: int | None = None
    retention_until: datetime | None = None


@dataclass(slots=True)
class WaitRecord:
    status: str
    resume_at: datetime
    created_at: datetime
    updated_at: datetime
    spec_version: int | None
    completed_at: datetime | None = None


@dataclass(slots=True)
class TokenRecord:
    """Who holds a hook token. ``released``: its run ended (``end_status``: how), so the token is free, or held
    until its retention passes; kept until a new hook claims it, so a resume can say the run ended."""

    run_id: str
    hook_id: str
    retention_until: datetime | None
    released: bool = False
    end_status: str | None = None

    def free_at(self, now: datetime) -> bool:
        return self.released and (self.retention_until is None or self.retention_until < now)


@dataclass(slots=True)
class RunRecord:
    run_id: str
    workflow_name: str
    deployment_id: str | None
    spec_version: int
    status: str
    created_at: datetime
    updated_at: datetime
    context: Value | None = None  # executionContext, from run_created
    attributes: dict[str, str] = field(default_factory=dict)
    seq: int = 0
    seq_in_band: int = 0
    open_steps: int = 0
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_code: str | None = None
    end_slot: int | None = None  # the terminal event holding the output or error
    events: list[StoredEvent] = field(default_factory=list)
    by_correlation: dict[str, list[int]] = field(default_factory=dict)
    steps: dict[str, StepRecord] = field(default_factory=dict)
    hooks: dict[str, HookRecord] = field(default_factory=dict)
    waits: dict[str, WaitRecord] = field(default_factory=dict)
    resumes: dict[tuple[str, str], int] = field(default_factory=dict)  # (hook id, resume id) -> its event's slot

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES

    def append(self, event: StoredEvent) -> None:
        self.events.append(event)
        if event.correlation_id is not None:
            self.by_correlation.setdefault(event.correlation_id, []).append(event.slot)

    def value_at(self, slot: int | None) -> JSONValue:
        if not slot:
            return None
        payload = self.events[slot - 1].payload
        return payload.get() if payload is not None else None


@dataclass
class State:
    """Everything the storage holds: what a test compares before and after a write that must write nothing."""

    runs: dict[str, RunRecord] = field(default_factory=dict)
    tokens: dict[str, TokenRecord] = field(default_factory=dict)
    hook_runs: dict[str, str] = field(default_factory=dict)  # hook id -> its run (hook ids are global)
    watch: dict[str, WatchEntry] = field(default_factory=dict)
    """The watch index (``world.watch``): the due of every unfinished run, by run id."""
    schedules: dict[str, Any] = field(default_factory=dict)  # world.schedules' records (schedules/memory_store)


@dataclass(slots=True)
class WatchEntry:
    due: str  # world.watch.due_key
    wakes: int = 0  # watchdog wakes in a row that found the run still due


def new_stored_event(slot: int, event_type: str, correlation_id: str | None, data: dict[str, JSONValue],
                     data_text: str | None, payload: Value | None, created_at: datetime,
                     spec_version: int | None) -> StoredEvent:
    return StoredEvent(slot, slot_to_event_id(slot), event_type, correlation_id, data, data_text, payload,
                       created_at, spec_version)


# ---------------------------------------------------------------- answers


def payload_wanted(event_type: str, resolve: ResolveData) -> bool:
    """Whether an event's payload is part of an answer at ``resolve``: "skip-step-inputs" leaves out the
    inputs of step_created/step_started only, and any value but "none" otherwise means "all" (the contract)."""
    if resolve == "none":
        return False
    return not (resolve == "skip-step-inputs" and event_type in _STEP_INPUT_EVENTS)


def event_model(run_id: str, event: StoredEvent, resolve: ResolveData) -> Event:
    data = copy_json(event.data, event.data_text)
    if event.payload is not None and payload_wanted(event.event_type, resolve):
        data[PAYLOAD_NAME[event.event_type]] = event.payload.get()
    return build(Event, event_id=event.event_id, run_id=run_id, event_type=event.event_type,
                                 correlation_id=event.correlation_id, event_data=data,
                                 created_at=event.created_at, spec_version=event.spec_version)


def _error(value: Any) -> StructuredError | None:
    return StructuredError.model_validate(value) if value else None


def run_model(run: RunRecord, resolve: ResolveData) -> Run:
    want = resolve != "none"
    first = run.events[0].payload if want and run.events else None
    end = run.end_slot if run.terminal else None
    return build(Run,
        run_id=run.run_id,
        status=run.status,
        workflow_name=run.workflow_name,
        deployment_id=run.deployment_id,
        spec_version=run.spec_version,
        execution_context=run.context.get() if run.context is not None else None,
        input=first.get() if first is not None else None,
        output=run.value_at(end) if want and run.status == "completed" else None,
        error=_error(run.value_at(end)) if run.status == "failed" else None,
        error_code=run.error_code,
        attributes=dict(run.attributes),
        seq=run.seq,
        seq_in_band=run.seq_in_band,
        open_steps=run.open_steps,
        created_at=run.created_at,
        updated_at=run.updated_at,
        started_at=run.started_at,
        completed_at=run.completed_at,
    )


def step_model(run: RunRecord, step_id: str, step: StepRecord, resolve: ResolveData) -> Step:
    """As the AWS World answers: the input only at "all", the output unless "none", the error always."""
    return build(Step,
        run_id=run.run_id,
        step_id=step_id,
        step_name=step.step_name,
        status=step.status,
        input=run.value_at(step.input_slot) if resolve == "all" else None,
        output=run.value_at(step.output_slot) if resolve != "none" else None,
        error=_error(run.value_at(step.error_slot)),
        attempt=step.attempt,
        retry_after=step.retry_after,
        created_at=step.created_at,
        updated_at=step.updated_at,
        started_at=step.started_at,
        completed_at=step.completed_at,
        spec_version=step.spec_version,
        lease_until=step.lease_until if step.status == "running" else None,
    )


def hook_model(run: RunRecord, hook_id: str, hook: HookRecord, resolve: ResolveData) -> Hook:
    return build(Hook,
        run_id=run.run_id,
        hook_id=hook_id,
        token=hook.token,
        status=hook_status(run.status),
        metadata=run.value_at(hook.metadata_slot) if resolve != "none" else None,
        is_webhook=hook.is_webhook,
        token_retention_until=hook.retention_until,
        created_at=hook.created_at,
        updated_at=hook.updated_at,
        received_at=None,
        spec_version=hook.spec_version,
    )


def wait_model(run_id: str, wait_id: str, wait: WaitRecord) -> Wait:
    return build(Wait, run_id=run_id, wait_id=wait_id, status=wait.status, resume_at=wait.resume_at,
                                created_at=wait.created_at, updated_at=wait.updated_at,
                                completed_at=wait.completed_at, spec_version=wait.spec_version)
