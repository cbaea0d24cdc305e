"""What the in-memory World stores, and how it answers in contract models.

One ``RunRecord`` per run holds its log (``events``, index = slot - 1, so a page from a cursor is a slice), its
counters and its steps, hooks and waits as the rulebook's states (``world.rules.state``: a decision hands back an
entity's new state, which is stored as it is). Each user value is stored once, in the event that brought it;
entities point at that event's slot, so an entity and its event can never disagree. Tokens and hook ids are
global (``State.tokens``, ``State.hook_runs``) because the contract makes them so.

A step, hook or wait answers as every World's does (``world/shared/answers.py``, from its state); a run and an event
are made here from their records. Every answer holds copies of user values, so a caller may mutate it freely.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..world.deployments import Deployment
from ..world.entities import (
    TERMINAL_RUN_STATUSES,
    ResolveData,
    Run,
    event_value_shown,
    run_end_shown,
    stored_error,
    values_shown,
)
from ..world.events import Event
from ..world.published import Publication
from ..world.rules.requests import VALUE_FIELD
from ..world.rules.state import HookState, Slot, StepState, TokenState, WaitState
from ..world.schedules import ScheduleState
from ..world.shared.answers import build
from .values import JSONValue, Value, copy_json


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
    resumes_once: dict[str, tuple[str, str]] = field(default_factory=dict[str, tuple[str, str]])
    """A ``resumeOnce`` resume id -> the (run id, hook id) that recorded it (``world/rules/hooks.py``): global, and
    kept when that hook, its token and its run go, as the AWS World's marker outlives them."""
    watch: dict[str, WatchEntry] = field(default_factory=dict[str, WatchEntry])
    """The watch index (``world.watch``): the due of every unfinished run, by run id."""
    schedules: dict[str, ScheduleState] = field(default_factory=dict[str, ScheduleState])
    """world.schedules' records, by schedule id (``_memory/schedules.py``)."""
    published: dict[str, Publication] = field(default_factory=dict[str, Publication])
    """world.published's publications, by key (``_memory/published.py``)."""
    deployments: dict[str, Deployment] = field(default_factory=dict[str, Deployment])
    """world.deployments' records, by deployment id (``_memory/deployments.py``)."""
    limiters: dict[str, Any] = field(default_factory=dict[str, Any])
    """world.limiters' pools and waiters (``_memory/limiters.py``)."""


# ---------------------------------------------------------------- answers


def event_model(run_id: str, event: StoredEvent, resolve: ResolveData) -> Event:
    data = copy_json(event.data, event.data_text)
    if event.value is not None and event_value_shown(event.event_type, resolve):
        data[VALUE_FIELD[event.event_type]] = event.value.get()
    return build(Event, event_id=event.event_id, run_id=run_id, event_type=event.event_type,
                 correlation_id=event.correlation_id, event_data=data, created_at=event.created_at,
                 spec_version=event.spec_version)


def run_model(run: RunRecord, resolve: ResolveData) -> Run:
    first = run.events[0].value if values_shown(resolve) and run.events else None
    shown = run_end_shown(run.status, resolve)
    end = run.value_at(run.end_slot) if shown is not None else None
    return build(Run, run_id=run.run_id, status=run.status, workflow_name=run.workflow_name,
                 deployment_id=run.deployment_id, spec_version=run.spec_version,
                 execution_context=run.context.get() if run.context is not None else None,
                 input=first.get() if first is not None else None,
                 output=end if shown == "output" else None,
                 error=stored_error(end) if shown == "error" else None, error_code=run.error_code,
                 attributes=dict(run.attributes), seq=run.seq, seq_in_band=run.seq_in_band,
                 open_steps=run.open_steps, created_at=run.created_at, updated_at=run.updated_at,
                 started_at=run.started_at, completed_at=run.completed_at)
