"""The rulebook's index: the rule of each event type a caller may write, what it reads, and ``decide``.

A World asks ``decide`` (or ``decide_unit``, for a batch's unit) with a ``View`` of what it read; the rule
refuses with the contract's error, answers a no-op, or returns a ``Decision`` the World commits. ``Rule.reads``
says what a rule looks at beyond the request, so a World that reads before it writes reads only that: the run,
the entity the event is about, the run's live hooks, who holds a hook token (``read_token`` says which).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from ..errors import InvalidInputError
from ..events import CreateEventRequest, HookCreatedData
from ..watch import commit_due
from .decision import Decision
from .hooks import hook_created, hook_disposed, hook_received
from .requests import data_as
from .runs import attr_set, run_ended, run_missing, run_started
from .state import HookState, View
from .steps import born_running, step_created, step_outcome, step_started, wait_completed, wait_created

Read = Literal["run", "entity", "hooks", "token"]


@dataclass(frozen=True)
class Rule:
    decide: Callable[[CreateEventRequest, View], Decision]
    reads: frozenset[Read] = frozenset()


RULES: dict[str, Rule] = {
    "run_started": Rule(run_started, frozenset({"run"})),
    "run_completed": Rule(run_ended("completed"), frozenset({"run", "hooks"})),
    "run_failed": Rule(run_ended("failed"), frozenset({"run", "hooks"})),
    "run_cancelled": Rule(run_ended("cancelled"), frozenset({"run", "hooks"})),
    "attr_set": Rule(attr_set, frozenset({"run"})),
    "step_created": Rule(step_created),
    "step_started": Rule(step_started, frozenset({"entity"})),
    "step_retrying": Rule(step_outcome(None, "error"), frozenset({"entity"})),
    "step_completed": Rule(step_outcome("completed", "output"), frozenset({"entity"})),
    "step_failed": Rule(step_outcome("failed", "error"), frozenset({"entity"})),
    "hook_created": Rule(hook_created, frozenset({"token"})),
    "hook_received": Rule(hook_received),
    "hook_disposed": Rule(hook_disposed, frozenset({"entity", "token"})),
    "wait_created": Rule(wait_created),
    "wait_completed": Rule(wait_completed, frozenset({"entity"})),
}
"""Every event type a caller may write except run_created (each World's create path: it makes the run)."""


READS: dict[str, frozenset[Read]] = {event_type: rule.reads for event_type, rule in RULES.items()}
"""What the rule of each event type reads beyond its request (a World on its write path looks it up here)."""
_NOTHING: frozenset[Read] = frozenset()


def reads(event_type: str, what: Read) -> bool:
    return what in READS.get(event_type, _NOTHING)


def read_token(req: CreateEventRequest, hook: HookState | None) -> str | None:
    """The hook token whose holder the rule of ``req`` reads (``View.token``): the one a hook_created claims, the
    one the hook a hook_disposed disposes holds (``hook``, as read); None when it reads none."""
    if req.event_type == "hook_created":
        return data_as(req, HookCreatedData).token
    return hook.token if hook is not None and reads(req.event_type, "token") else None


def decide(req: CreateEventRequest, view: View) -> Decision:
    rule = RULES.get(req.event_type)
    if rule is None:
        raise InvalidInputError(f"{req.event_type} cannot be written by a caller", field="eventType")
    if view.run is None and view.run_read and req.event_type != "run_started":
        raise run_missing(view.run_id)
    return rule.decide(req, view)


def decide_unit(reqs: Sequence[CreateEventRequest], view: View) -> Decision:
    """A batch's unit: one event, or the step_created + step_started pair (``requests.batch_groups``)."""
    if len(reqs) == 2:
        if view.run is None and view.run_read:
            raise run_missing(view.run_id)
        return born_running(reqs[0], reqs[1], view)
    return decide(reqs[0], view)


def due_after(decisions: Iterable[Decision], now: datetime, *, run_over: bool = False,
              lifetime_end: datetime | None = None) -> datetime | None:
    """The run's due after a commit of ``decisions`` (``world.watch.commit_due``): none once the run has ended
    (``run_over``: before the commit) or the commit ends it; else the latest of the watch's horizon and the
    leases of the steps the commit starts, no later than ``lifetime_end`` (given by the commit that creates the
    run)."""
    ends = run_over
    leases: list[datetime] = []
    for decision in decisions:
        ends = ends or decision.ends_run
        step = decision.step
        if step is not None and step.lease_until is not None and decision.events \
                and decision.events[-1].event_type == "step_started":
            leases.append(step.lease_until)
    return commit_due(now, ends_run=ends, leases=leases, lifetime_end=lifetime_end)
