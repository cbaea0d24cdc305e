"""What the in-memory World stores, and how it answers in contract models.

One ``RunRecord`` per run holds its log (``events``, index = slot - 1, so a page from a cursor is a slice), its
counters and its steps, hooks and waits as the rulebook's states (``world.rules.state``: a decision hands back an
entity's new state, which is stored as it is). Each user value is stored once, in the event that brought it;
entities point at that event's slot, so an entity and its event can never disagree. Tokens and hook ids are
global (``State.tokens``, ``State.hook_runs``) because the contract makes them so.

Answers are built with ``build`` from values already of the models' types: re-validating what the World built
itself would cost more than the rest of a write. Every answer holds copies of user values, so a caller may
mutate it freely.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, TypeVar, cast, get_origin

from pydantic import BaseModel

from ..world.entities import (
    TERMINAL_RUN_STATUSES,
    Hook,
    ResolveData,
    Run,
    Step,
    StructuredError,
    Wait,
    event_value_shown,
    run_end_shown,
    step_input_shown,
    step_lease_shown,
    values_shown,
)
from ..world.events import Event
from ..world.rules.hooks import hook_status
from ..world.rules.requests import VALUE_FIELD
from ..world.rules.state import HookState, Slot, StepState, TokenState, WaitState
from ..world.schedules import ScheduleState
from .values import JSONValue, Value, copy_json

M = TypeVar("M", bound=BaseModel)
_DEFAULTS: dict[type[BaseModel], tuple[dict[str, Any], dict[str, Callable[[], Any]]]] = {}
# BaseModel's own slots, set through their descriptors (what ``object.__setattr__`` finds by name, a third
# cheaper called directly: every answer sets four)
_set_dict, _set_fields_set, _set_extra, _set_private = (
    vars(BaseModel)[name].__set__
    for name in ("__dict__", "__pydantic_fields_set__", "__pydantic_extra__", "__pydantic_private__"))


def build(cls: type[M], **values: Any) -> M:
    """``cls.model_construct(**values)`` without the per-call work pydantic's version does to resolve defaults
    (it inspects each default factory on every call, which costs more than the rest of a write). The values must
    already be of the fields' types."""
    known = _DEFAULTS.get(cls)
    if known is None:
        plain = {n: f.default for n, f in cls.model_fields.items() if f.default_factory is None}
        # (the models' factories take no argument; a parameterized one, ``list[Event]``, is called as its origin:
        # calling the alias also tries to tag the new list with it, an AttributeError raised and caught each time)
        made = {n: cast(Callable[[], Any], get_origin(f.default_factory) or f.default_factory)
                for n, f in cls.model_fields.items() if f.default_factory is not None}
        known = _DEFAULTS[cls] = (plain, made)
    plain, made = known
    data = {**plain, **values}
    for name, factory in made.items():
        if name not in values:
            data[name] = factory()
    model = cls.__new__(cls)
    _set_dict(model, data)
    _set_fields_set(model, set(values))
    _set_extra(model, None)
    _set_private(model, None)
    return model


@dataclass(slots=True)
class StoredEvent:
    slot: int
    event_id: str
    event_type: str
    correlation_id: str | None
    data: dict[str, JSONValue]  # eventData without its value field
    data_text: str | None  # data's JSON when it holds containers (a read copies it deeply)
    value: Value | None  # the value field, when the event carries one
    created_at: datetime
    spec_version: int | None


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
    attributes: dict[str, str] = field(default_factory=dict[str, str])
    seq: int = 0
    seq_in_band: int = 0
    open_steps: int = 0
    started_at: datetime | None = None
    completed_at: datetime | None = None
    error_code: str | None = None
    end_slot: int | None = None  # the terminal event holding the output or error
    events: list[StoredEvent] = field(default_factory=list[StoredEvent])
    by_correlation: dict[str, list[int]] = field(default_factory=dict[str, list[int]])
    steps: dict[str, StepState] = field(default_factory=dict[str, StepState])
    hooks: dict[str, HookState] = field(default_factory=dict[str, HookState])
    waits: dict[str, WaitState] = field(default_factory=dict[str, WaitState])
    resumes: dict[tuple[str, str], int] = field(default_factory=dict[tuple[str, str], int])
    """(hook id, resume id) -> the slot of the hook_received that recorded it."""

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL_RUN_STATUSES

    def append(self, event: StoredEvent) -> None:
        self.events.append(event)
        if event.correlation_id is not None:
            self.by_correlation.setdefault(event.correlation_id, []).append(event.slot)

    def value_at(self, slot: Slot) -> JSONValue:
        if not isinstance(slot, int) or not slot:
            return None
        value = self.events[slot - 1].value
        return value.get() if value is not None else None


@dataclass(slots=True)
class WatchEntry:
    due: str  # world.watch.due_key
    wakes: int = 0  # watchdog wakes in a row that found the run still due


@dataclass
class State:
    """Everything the storage holds: what a test compares before and after a write that must write nothing."""

    runs: dict[str, RunRecord] = field(default_factory=dict[str, RunRecord])
    tokens: dict[str, TokenState] = field(default_factory=dict[str, TokenState])
    hook_runs: dict[str, str] = field(default_factory=dict[str, str])  # hook id -> its run (hook ids are global)
    watch: dict[str, WatchEntry] = field(default_factory=dict[str, WatchEntry])
    """The watch index (``world.watch``): the due of every unfinished run, by run id."""
    schedules: dict[str, ScheduleState] = field(default_factory=dict[str, ScheduleState])
    """world.schedules' records, by schedule id (``memory/schedules.py``)."""


# ---------------------------------------------------------------- answers


def event_model(run_id: str, event: StoredEvent, resolve: ResolveData) -> Event:
    data = copy_json(event.data, event.data_text)
    if event.value is not None and event_value_shown(event.event_type, resolve):
        data[VALUE_FIELD[event.event_type]] = event.value.get()
    return build(Event, event_id=event.event_id, run_id=run_id, event_type=event.event_type,
                 correlation_id=event.correlation_id, event_data=data, created_at=event.created_at,
                 spec_version=event.spec_version)


def _error(value: Any) -> StructuredError | None:
    return StructuredError.model_validate(value) if value else None


def run_model(run: RunRecord, resolve: ResolveData) -> Run:
    first = run.events[0].value if values_shown(resolve) and run.events else None
    shown = run_end_shown(run.status, resolve)
    end = run.value_at(run.end_slot) if shown is not None else None
    return build(Run, run_id=run.run_id, status=run.status, workflow_name=run.workflow_name,
                 deployment_id=run.deployment_id, spec_version=run.spec_version,
                 execution_context=run.context.get() if run.context is not None else None,
                 input=first.get() if first is not None else None,
                 output=end if shown == "output" else None,
                 error=_error(end) if shown == "error" else None, error_code=run.error_code,
                 attributes=dict(run.attributes), seq=run.seq, seq_in_band=run.seq_in_band,
                 open_steps=run.open_steps, created_at=run.created_at, updated_at=run.updated_at,
                 started_at=run.started_at, completed_at=run.completed_at)


def step_model(run: RunRecord, step: StepState, resolve: ResolveData) -> Step:
    return build(Step, run_id=run.run_id, step_id=step.step_id, step_name=step.step_name, status=step.status,
                 input=run.value_at(step.input) if step_input_shown(resolve) else None,
                 output=run.value_at(step.output) if values_shown(resolve) else None,
                 error=_error(run.value_at(step.error)), attempt=step.attempt, retry_after=step.retry_after,
                 created_at=step.created_at, updated_at=step.updated_at, started_at=step.started_at,
                 completed_at=step.completed_at, spec_version=step.spec_version,
                 lease_until=step.lease_until if step_lease_shown(step.status) else None)


def hook_model(run: RunRecord, hook: HookState, resolve: ResolveData) -> Hook:
    return build(Hook, run_id=run.run_id, hook_id=hook.hook_id, token=hook.token, status=hook_status(run.status),
                 metadata=run.value_at(hook.metadata) if values_shown(resolve) else None, is_webhook=hook.is_webhook,
                 token_retention_until=hook.retention_until, created_at=hook.created_at,
                 updated_at=hook.updated_at, received_at=None, spec_version=hook.spec_version)


def wait_model(run_id: str, wait: WaitState) -> Wait:
    return build(Wait, run_id=run_id, wait_id=wait.wait_id, status=wait.status, resume_at=wait.resume_at,
                 created_at=wait.created_at, updated_at=wait.updated_at, completed_at=wait.completed_at,
                 spec_version=wait.spec_version)
