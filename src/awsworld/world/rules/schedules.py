"""Schedules: what a schedule store accepts and refuses, and the per-tick claim, written once for both Worlds.

A schedule is one small record (``ScheduleState``) that every change rewrites whole, conditioned on the
version it read (``may_write``): the DynamoDB store as a ``ConditionExpression`` on the version attribute, the
in-memory store by calling ``may_write`` itself. Whoever wins the write owns the decision it records; a loser
reads the record again and decides afresh. That is what makes two schedulers (two deliveries of one tick, two
processes, a retried Lambda) start one run per tick:

1. A decision (``claim``, ``trigger``) never starts anything itself. It returns the record it leads to, whose
   ``pending`` holds the effects (start run R for tick T, cancel run P), and the caller writes it.
2. Only after its write won does the caller carry out ``pending``, then writes the record once more with it
   cleared (``settle``). Every effect is idempotent: a start names its run id (``schedule_run_id``: derived
   from the schedule and the tick's nominal time, so a second start of a tick returns the first run), and a
   cancel of an ended run changes nothing. So whoever next reads a record that still holds ``pending`` (the
   writer crashed in between) carries it out again first, and nothing is lost or doubled.

The record and its parts are the contract's (``world/schedules.py``); which ticks are due is computed outside
(cron and intervals are ``world/schedule_timing.py``'s); these rules only decide what to do with them, so they
stay pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from ..entities import TERMINAL_RUN_STATUSES
from ..errors import InvalidInputError
from ..schedules import (
    MAX_BACKFILL_TICKS,
    Action,
    DeclaredSchedule,
    Due,
    NextAfter,
    Overlap,
    ScheduleDeclaredInCodeError,
    ScheduleExistsError,
    ScheduleState,
    Trigger,
    schedule_run_id,
)


@dataclass(frozen=True)
class Claim:
    """A decision: the record to write (``state``, holding ``pending``) and what it did, for reports."""

    state: ScheduleState
    started: list[Action] = field(default_factory=list[Action])
    skipped: int = 0
    missed: int = 0
    buffered: bool = False
    cancelled: list[str] = field(default_factory=list[str])

    @property
    def outcome(self) -> str:
        """``started``, ``buffered`` or ``skipped``: what a manual trigger did."""
        return "started" if self.started else "buffered" if self.buffered else "skipped"




def may_write(stored: ScheduleState | None, expected_version: int | None) -> bool:
    """The condition of every write: a create (``expected_version`` None) needs no record; any other write
    needs the record at the version its writer read."""
    if expected_version is None:
        return stored is None
    return stored is not None and stored.version == expected_version


def refuse_create(existing: ScheduleState | None, schedule_id: str) -> None:
    if existing is not None:
        raise ScheduleExistsError(f"schedule {schedule_id!r} exists already ({existing.source}: "
                                  f"{existing.workflow_name}, {existing.spec.describe()}); delete it first")


def refuse_delete(state: ScheduleState) -> None:
    if state.source == "code" and not state.orphaned:
        raise ScheduleDeclaredInCodeError(
            f"schedule {state.schedule_id!r} is declared in code ({state.module or state.workflow_name}) and would "
            "come back at the next tick: remove the declaration and deploy (then delete it), or pause it now")


def refuse_backfill(start: datetime, end: datetime, now: datetime, ticks: Sequence[datetime]) -> None:
    """A backfill's range, checked before anything is written. ``ticks``: the range's first ticks, up to one past
    ``MAX_BACKFILL_TICKS`` (that one is where a first part must end, which the refusal says)."""
    if end <= start:
        raise InvalidInputError(f"a backfill's end ({end.isoformat()}) must be after its start "
                                f"({start.isoformat()}): swap them", field="end")
    if end > now:
        raise InvalidInputError(f"a backfill covers the past: its end ({end.isoformat()}) is after now "
                                f"({now.isoformat()}); end it at now at the latest, or trigger a run now instead",
                                field="end")
    if len(ticks) > MAX_BACKFILL_TICKS:
        raise InvalidInputError(f"the range holds more than {MAX_BACKFILL_TICKS} ticks: backfill it in parts "
                                f"(the first {MAX_BACKFILL_TICKS} end before {ticks[MAX_BACKFILL_TICKS].isoformat()}: "
                                "end a first part there, and start the next one there)", field="start")





def _start(state: ScheduleState, tick: datetime, trigger: Trigger) -> Action:
    return Action("start", schedule_run_id(state.schedule_id, tick, manual=trigger == "manual"), tick, trigger)


# -- decisions --------------------------------------------------------------------------------------------


def needs_evaluation(state: ScheduleState, now: datetime) -> bool:
    """Whether a tick must look at this schedule (everything else costs the tick nothing but the listing)."""
    if state.pending:
        return True
    if state.paused or state.orphaned:
        return False
    return state.buffered is not None or (state.next_at is not None and state.next_at <= now)


def is_running(status: str | None) -> bool:
    return status is not None and status not in TERMINAL_RUN_STATUSES


@dataclass
class _Plan:
    """A decision under way: ``running`` is whether the schedule's last run is still going."""

    state: ScheduleState
    running: bool
    last_run_id: str | None
    last_tick: datetime | None
    buffered: Action | None
    actions: list[Action] = field(default_factory=list[Action])
    started: list[Action] = field(default_factory=list[Action])
    cancelled: list[str] = field(default_factory=list[str])
    skipped: int = 0
    newly_buffered: bool = False

    def fire(self, action: Action, overlap: Overlap) -> None:
        """One start, under ``overlap`` against the last run."""
        if self.running and overlap == "skip":
            self.skipped += 1
            return
        if self.running and overlap == "buffer_one":
            if self.buffered is None:
                self.buffered, self.newly_buffered = action, True
            else:
                self.skipped += 1
            return
        if self.running and overlap == "cancel_previous" and self.last_run_id is not None:
            self.actions.append(Action("cancel", self.last_run_id))
            self.cancelled.append(self.last_run_id)
        self._start(action)

    def _start(self, action: Action) -> None:
        self.actions.append(action)
        self.started.append(action)
        self.last_run_id, self.last_tick, self.running = action.run_id, action.tick, True

    def start_buffered(self) -> None:
        """A buffered start goes once the last run has ended."""
        if self.buffered is not None and not self.running:
            action, self.buffered = self.buffered, None
            self._start(action)


def claim(state: ScheduleState, now: datetime, due: Due, last_status: str | None,
          next_after: NextAfter) -> Claim | None:
    """What one tick does with ``state``: start a buffered run whose predecessor ended, then settle the due
    ticks under the catch-up window and the overlap policy (``last_status``: the status of the schedule's last
    run, None if it has none). None when nothing changes (nothing to write)."""
    if state.paused or state.orphaned:
        return None
    plan = _Plan(state, is_running(last_status), state.last_run_id, state.last_tick, state.buffered)
    plan.start_buffered()
    window = state.catchup_window
    eligible = [t for t in due.ticks if window is None or (now - t).total_seconds() <= window]
    missed = due.passed_over + len(due.ticks) - len(eligible)
    for tick in eligible:
        plan.fire(_start(state, tick, "tick"), state.overlap)
    cursor = max(state.cursor, due.ticks[-1]) if due.ticks else state.cursor
    if not plan.actions and cursor == state.cursor and plan.buffered == state.buffered and not missed:
        return None
    new = replace(state, cursor=cursor, next_at=next_after(cursor), last_run_id=plan.last_run_id,
                  last_tick=plan.last_tick, buffered=plan.buffered, pending=tuple(plan.actions),
                  version=state.version + 1, updated_at=now, fired=state.fired + len(plan.started),
                  skipped=state.skipped + plan.skipped, missed=state.missed + missed)
    return Claim(new, plan.started, plan.skipped, missed, plan.newly_buffered, plan.cancelled)


def trigger(state: ScheduleState, now: datetime, last_status: str | None, overlap: Overlap | None = None) -> Claim:
    """Start a run now, outside the spec (``awsworld schedules trigger``), under ``overlap`` (default: the
    schedule's own); works on a paused schedule too. The run's tick is ``now``."""
    plan = _Plan(state, is_running(last_status), state.last_run_id, state.last_tick, state.buffered)
    plan.fire(_start(state, now, "manual"), overlap or state.overlap)
    new = replace(state, last_run_id=plan.last_run_id, last_tick=plan.last_tick, buffered=plan.buffered,
                  pending=tuple(plan.actions), version=state.version + 1, updated_at=now,
                  fired=state.fired + len(plan.started), skipped=state.skipped + plan.skipped)
    return Claim(new, plan.started, plan.skipped, 0, plan.newly_buffered, plan.cancelled)


def backfill(state: ScheduleState, ticks: Sequence[datetime]) -> list[Action]:
    """The starts a backfill of ``ticks`` makes: every tick, each with the id its regular run has (so a tick
    that ran already is not run again), all at once, outside the overlap policy and the schedule's record."""
    return [_start(state, tick, "backfill") for tick in ticks]


def settle(state: ScheduleState, now: datetime) -> ScheduleState:
    """The record once its ``pending`` effects are done."""
    return replace(state, pending=(), version=state.version + 1, updated_at=now)


def pause(state: ScheduleState, now: datetime, note: str | None) -> ScheduleState:
    """Paused: no tick fires (a pending effect is still carried out). Its ticks count as missed on resume."""
    return replace(state, paused=True, note=note, next_at=None, version=state.version + 1, updated_at=now)


def resume(state: ScheduleState, now: datetime, next_after: NextAfter) -> ScheduleState:
    """Resumed: the ticks that passed while paused are due at once, and the catch-up policy decides which of
    them fire (default: the most recent one only)."""
    return replace(state, paused=False, note=None, next_at=next_after(state.cursor), version=state.version + 1,
                   updated_at=now)


# -- schedules declared in code ---------------------------------------------------------------------------


def sync(stored: ScheduleState | None, declared: ScheduleState, now: datetime,
         next_after: NextAfter) -> ScheduleState | None:
    """The record a code declaration leads to (``declared``: the declaration as a new record would hold it),
    or None when the stored one already matches (or is not code's: a schedule created through the API keeps
    its id, and the declaration is refused, see ``code_conflict``). A changed declaration keeps the state
    (pause, counters, the last run) and counts its ticks from now: the ticks the old spec passed are not
    replayed under the new one."""
    if stored is None:
        return declared
    if stored.source != "code":
        return None
    if stored.spec_hash == declared.spec_hash:
        return None if not stored.orphaned else replace(stored, orphaned=False, version=stored.version + 1,
                                                        updated_at=now)
    cursor = max(stored.cursor, now)
    return replace(stored, workflow_name=declared.workflow_name, spec=declared.spec, input=declared.input,
                   input_key=None, overlap=declared.overlap, catchup=declared.catchup,
                   catchup_window=declared.catchup_window, spec_hash=declared.spec_hash, module=declared.module,
                   orphaned=False, cursor=cursor, next_at=None if stored.paused else next_after(cursor),
                   buffered=None, version=stored.version + 1, updated_at=now)


def code_conflict(stored: ScheduleState | None) -> bool:
    """A code declaration whose id a schedule created through the API holds: the API's stays as it is."""
    return stored is not None and stored.source != "code"


def orphan(stored: ScheduleState, declared_ids: set[str], now: datetime) -> ScheduleState | None:
    """A code schedule the ticking deployment does not declare (any more) is kept, not fired: deploying the
    declaration again resumes it where it was, ``delete`` removes it."""
    if stored.source != "code" or stored.orphaned or stored.schedule_id in declared_ids:
        return None
    return replace(stored, orphaned=True, version=stored.version + 1, updated_at=now)


# -- when a tick must next look -----------------------------------------------------------------------------


BUFFER_POLL = timedelta(minutes=1)
"""How often a buffered start looks whether the run before it ended (the stack's tick: every minute)."""


def next_look(states: Iterable[ScheduleState], declared: Iterable[DeclaredSchedule], now: datetime,
              listed_at: datetime | None) -> datetime | None:
    """When a tick must next look at the schedules (a test driver's skipping clock stops there, so a daily
    schedule over 30 simulated days is 30 ticks, not 43,200): now for a pending effect, a declaration not stored
    yet or one whose code changed, or a stored code record no declaration names (orphaned by the next tick); a
    minute after the last tick's listing (``listed_at``) for a buffered start (the stack's pace: it cannot know
    when the run before it ends); else the soonest ``next_at``. None: no tick is needed."""
    times: list[datetime] = []
    hashes = {d.schedule_id: d.spec_hash for d in declared}
    unstored = set(hashes)
    for state in states:
        unstored.discard(state.schedule_id)
        if state.source == "code":
            expected = hashes.get(state.schedule_id)
            if (expected is None and not state.orphaned) or (expected is not None and expected != state.spec_hash):
                times.append(now)
        if state.pending:
            times.append(now)
        elif state.paused or state.orphaned:
            continue
        elif state.buffered is not None:
            times.append(now if listed_at is None else listed_at + BUFFER_POLL)
        elif state.next_at is not None:
            times.append(state.next_at)
    if unstored:
        times.append(now)
    return min(times, default=None)
