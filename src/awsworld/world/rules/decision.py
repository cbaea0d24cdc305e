"""What a rule decides about one write, and which error a commit that finds the state moved gets.

A decision is either a no-op (an idempotent repeat: answer, write nothing) or the events to append and the
state each touched entity has afterwards, plus the ``checks`` the commit must still find true. A World makes
the decision from what it read, then commits it with those checks (the AWS World as DynamoDB conditions in the
same transaction, the in-memory World against its records, with no ``await`` between) and, when some fail,
asks ``refusal`` (one write) or ``refusals`` (the writes of one request) which contract error that is, in the
contract's order, or whether the state merely moved (then it reads again and decides again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from types import MappingProxyType
from typing import Any, Literal

from ..errors import (
    EntityConflictError,
    HookAlreadyReceivedError,
    HookNotFoundError,
    HookResumedElsewhereError,
    RunGoneError,
    WorldError,
)
from ..ids import slot_to_event_id
from .state import EventRef, HookState, StepState, TokenState, WaitState, frozen


class Check(Enum):
    """A fact a decision was made on that its commit re-checks, with what its failure means."""

    RESUME_NEW = "resume-new"  # no hook_received of this hook has this resume id: else HookAlreadyReceivedError
    RESUME_ONCE = "resume-once"  # no other hook recorded this resume id (resumeOnce): else HookResumedElsewhereError
    RUN_ALIVE = "run-alive"  # the run is pending or running: else RunGoneError (for the whole request)
    RUN_AS_READ = "run-as-read"  # the run's status is the one decided on: else decide again
    ABSENT = "absent"  # the entity does not exist yet: else EntityConflictError
    TOKEN_FREE = "token-free"  # the hook token is free: else EntityConflictError (this hook holds it) or decide again
    HOOK_ID_FREE = "hook-id-free"  # no hook of any run has this id: else EntityConflictError
    TOKEN_HELD = "token-held"  # the token is still held by the run a hook_conflict names: else decide again
    TOKEN_OWNED = "token-owned"  # the disposed hook still holds its token: else decide again (and leave it)
    EXISTS = "exists"  # the hook exists: else HookNotFoundError
    AS_READ = "as-read"  # the entity is as read: else decide again


@frozen
class NewEvent:
    """An event to append. ``data`` is its eventData without the value field; ``carries_value``: the event holds
    the request's value (each World stores that value its own way)."""

    event_type: str
    correlation_id: str | None
    data: dict[str, Any]
    carries_value: bool = False
    spec_version: int | None = None


@frozen
class NewRun:
    """A run as its first event makes it (run_created, or a run_started that creates its run)."""

    run_id: str
    workflow_name: str
    deployment_id: str | None
    spec_version: int
    status: str
    created_at: datetime
    started_at: datetime | None
    attributes: dict[str, str]
    execution_context: dict[str, Any] | None


@frozen
class RunChange:
    """How the run changes (None fields stay as they are). ``attributes``: in order, a None value removes."""

    status: str | None = None
    started_at: datetime | None = None
    completed_at: datetime | None = None
    end_value: EventRef | None = None
    error_code: str | None = None
    attributes: tuple[tuple[str, str | None], ...] = ()


@frozen
class HookEnd:
    """What a run's end does to one of its live hooks: ``retained`` hooks stay (closed, their token reserved until
    its retention passes), ``released`` ones go with their id. ``token`` is the token afterwards, written where
    this hook still holds it."""

    hook: HookState
    fate: Literal["released", "retained"]
    token: TokenState


Shown = Literal["run", "step", "hook", "wait"]


@dataclass(slots=True)
class Decision:
    event_type: str
    entity_id: str
    """The correlation id (the step, hook or wait); "" for run events."""
    events: list[NewEvent] = field(default_factory=list[NewEvent])
    checks: tuple[Check, ...] = ()
    noop: bool = False
    shows: Shown | None = None
    """The entity the write's answer carries."""
    run: RunChange | None = None
    creates_run: NewRun | None = None
    step: StepState | None = None
    hook: HookState | None = None
    wait: WaitState | None = None
    token: TokenState | None = None
    """The hook token after the write: claimed by hook_created, released by hook_disposed."""
    token_holder: str | None = None
    """hook_conflict: the run whose hold on the token the commit re-checks (``Check.TOKEN_HELD``)."""
    hook_gone: bool = False
    """hook_disposed: the hook and its id go."""
    hook_ends: tuple[HookEnd, ...] = ()
    resume_id: str | None = None
    """hook_received: the resume id the commit records (a repeat of it is refused)."""
    resume_once: bool = False
    """hook_received: the resume id is also recorded as this hook's alone (``Check.RESUME_ONCE``)."""
    open_steps: int = 0
    """How the run's count of declared, unfinished steps moves."""

    @property
    def kind(self) -> str:
        return self.event_type.split("_")[0]

    @property
    def ends_run(self) -> bool:
        return self.run is not None and self.run.completed_at is not None

    @property
    def checked_token(self) -> str | None:
        """The hook token this decision's token checks are about: the one it claims or releases, or the one a
        hook_conflict found held (its event names it)."""
        if self.token is not None:
            return self.token.token
        if self.token_holder is not None and self.events:
            return str(self.events[0].data["token"])
        return None


@frozen
class Failed:
    """What a World found against a decision's checks: which failed, and what it learned doing so (the run's
    status, the slot of the first hook_received with the resume id, the token's holder)."""

    checks: frozenset[Check]
    run_status: str | None = None
    resume_slot: int | None = None
    token: TokenState | None = None
    resume_holder: tuple[str, str] | None = None
    """``Check.RESUME_ONCE`` failed: the (run id, hook id) of the hook that recorded the resume id."""


NOTHING_FAILED = Failed(frozenset())


def refusal(decision: Decision, run_id: str, failed: Failed) -> WorldError | None:
    """The error of the first failed check, in the contract's order (a repeated resume id first, then the run's
    status, then the entity's checks in the decision's order); None when what failed only says the state moved
    since it was read: decide again from a fresh read."""
    if not failed.checks:
        return None
    if Check.RESUME_NEW in failed.checks:
        return _repeated(decision, failed)
    if Check.RESUME_ONCE in failed.checks:
        return _elsewhere(decision, failed)
    if Check.RUN_ALIVE in failed.checks:
        return RunGoneError(f"run {run_id} is {failed.run_status or 'ended'}")
    for check in decision.checks:
        if check not in failed.checks:
            continue
        if check in (Check.ABSENT, Check.HOOK_ID_FREE):
            return EntityConflictError(f"{decision.kind} {decision.entity_id} already exists")
        if check is Check.EXISTS:
            return hook_missing(decision.entity_id, run_id)
        if check is Check.TOKEN_FREE:
            holder = failed.token
            if holder is not None and (holder.run_id, holder.hook_id) == (run_id, decision.entity_id):
                return EntityConflictError(f"hook {decision.entity_id} already exists")
            return None  # held by another hook: decide again knowing it (a hook_conflict)
        return None  # the state moved: decide again
    return None


def hook_missing(hook_id: str, run_id: str | None = None) -> HookNotFoundError:
    """What a write to, or a read of, a hook that does not exist raises (``run_id``: in the run it names)."""
    return HookNotFoundError(f"hook {hook_id} not found" + (f" in run {run_id}" if run_id is not None else ""))


def _repeated(decision: Decision, failed: Failed) -> HookAlreadyReceivedError:
    slot = failed.resume_slot
    return HookAlreadyReceivedError(f"hook {decision.entity_id} already received this resume id",
                                    hook_id=decision.entity_id,
                                    event_id=slot_to_event_id(slot) if slot is not None else None)


def _elsewhere(decision: Decision, failed: Failed) -> HookResumedElsewhereError:
    run_id, hook_id = failed.resume_holder or ("?", "?")
    return HookResumedElsewhereError(
        f"hook {decision.entity_id} refuses this resume id: hook {hook_id} of run {run_id} recorded it already, "
        "and it is one hook's only (resumeOnce); nothing was written", hook_id=hook_id, run_id=run_id)


@frozen
class Refusals:
    """The refusals of one request's writes: ``request`` refuses all of them (the run ended), else ``writes``
    refuses some by index; the others land (or, where something only moved, are decided again). ``first`` is
    what a strict request (one event, an atomic batch) is refused with."""

    request: WorldError | None
    writes: Mapping[int, WorldError]
    first: WorldError | None


NOTHING_REFUSED = Refusals(None, MappingProxyType({}), None)
"""The usual answer (every check held), one shared instance rather than one built per write."""


def refusals(run_id: str, decided: Sequence[tuple[Decision, Failed]]) -> Refusals:
    """``refusal`` for the writes of one request, in the contract's order across them: repeated resume ids first
    (each refuses its own write; so does one another hook recorded, for a ``resumeOnce``), then the run's status
    (an ended run refuses the whole request), then each write's own checks."""
    for _decision, failed in decided:  # a loop, not any(): no generator per write
        if failed.checks:
            break
    else:
        return NOTHING_REFUSED  # the usual case: every check held
    writes: dict[int, WorldError] = {}
    first: WorldError | None = None
    for i, (decision, failed) in enumerate(decided):
        if Check.RESUME_NEW in failed.checks or Check.RESUME_ONCE in failed.checks:
            writes[i] = error = _repeated(decision, failed) if Check.RESUME_NEW in failed.checks \
                else _elsewhere(decision, failed)
            first = first or error
    for i, (_decision, failed) in enumerate(decided):
        if i not in writes and Check.RUN_ALIVE in failed.checks:
            gone = RunGoneError(f"run {run_id} is {failed.run_status or 'ended'}")
            return Refusals(gone, writes, first or gone)
    for i, (decision, failed) in enumerate(decided):
        if i not in writes:
            error = refusal(decision, run_id, failed)
            if error is not None:
                writes[i] = error
                first = first or error
    return Refusals(None, writes, first)
