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

Times are aware UTC datetimes; ticks are nominal times (when the schedule says a run is due, not when the
tick that noticed it ran). Which ticks are due is computed outside (cron and intervals are
``awsworld.schedules.timing``); these rules only decide what to do with them, so they stay pure.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Literal

from ulid import ULID

from ..entities import TERMINAL_RUN_STATUSES
from ..errors import EntityConflictError, InvalidInputError, NotFoundError
from ..ids import RUN_ID_PREFIX

Overlap = Literal["skip", "buffer_one", "allow_all", "cancel_previous"]
OVERLAPS: tuple[Overlap, ...] = ("skip", "buffer_one", "allow_all", "cancel_previous")
Catchup = Literal["latest", "all"]
CATCHUPS: tuple[Catchup, ...] = ("latest", "all")
Source = Literal["code", "api"]
Trigger = Literal["tick", "manual", "backfill"]

MAX_SCHEDULE_ID = 120
_SCHEDULE_ID = re.compile(r"^[A-Za-z0-9_.:=+\-]{1,120}$")
MAX_INPUT_BYTES = 256 * 1024
"""The largest serialized arguments a schedule keeps (each run's input is then stored as any run's is)."""
MIN_INTERVAL_SECONDS = 60
"""The shortest interval: the stack evaluates schedules once a minute, so a shorter one could not be kept."""
MIN_CATCHUP_WINDOW_SECONDS = 60
"""The shortest catch-up window: a tick is noticed up to a minute late in the stack, and must not count as missed."""
MAX_TICKS_PER_CLAIM = 100
"""Ticks one claim settles at most (``catchup="all"`` after a long pause): the rest in the next claims."""
MAX_BACKFILL_TICKS = 1000
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class ScheduleNotFoundError(NotFoundError):
    code = "schedule-not-found"


class ScheduleInputError(InvalidInputError, ValueError):
    """A schedule's id or arguments refused where they are given (``Schedule(id=..., args=...)``, the client's
    calls): an ``InvalidInputError`` naming the field, as every World refusal is (the CLI and the UI answer 400),
    and a ``ValueError``, as the README promises for a ``Schedule`` that cannot be made. Nothing was written."""


class ScheduleExistsError(EntityConflictError):
    """A schedule with this id exists already (create refuses; nothing was written)."""

    code = "schedule-exists"


class ScheduleDeclaredInCodeError(EntityConflictError):
    """A schedule declared in code cannot be deleted while the deployed code declares it: it would come back
    at the next tick. Remove the declaration (then delete it), or pause it."""

    code = "schedule-declared-in-code"


@dataclass(frozen=True)
class Spec:
    """When a schedule's ticks are: a 5-field cron expression in ``timezone``, or every ``every`` seconds from
    the Unix epoch plus ``offset`` (intervals are absolute: UTC, no daylight-saving shifts)."""

    cron: str | None = None
    every: int | None = None
    offset: int = 0
    timezone: str = "UTC"

    def describe(self) -> str:
        if self.cron is not None:
            return f"cron {self.cron!r} ({self.timezone})"
        offset = f" + {self.offset}s" if self.offset else ""
        return f"every {self.every}s{offset} (UTC)"


@dataclass(frozen=True)
class Action:
    """An effect a decision records in ``pending``: start ``run_id`` (for ``tick``) or cancel it."""

    kind: Literal["start", "cancel"]
    run_id: str
    tick: datetime | None = None
    trigger: Trigger = "tick"


@dataclass(frozen=True)
class ScheduleState:
    """A schedule as stored. ``cursor``: every tick at or before it is settled (fired, skipped or missed);
    ``next_at``: the first tick after it (None while paused, or when the spec has no later tick)."""

    schedule_id: str
    workflow_name: str
    spec: Spec
    input: str | None  # the serialized arguments; None: stored apart and not read yet (``input_key`` names it)
    created_at: datetime
    updated_at: datetime
    cursor: datetime
    next_at: datetime | None
    overlap: Overlap = "skip"
    catchup: Catchup = "latest"
    catchup_window: int | None = None  # seconds; None: no limit
    source: Source = "api"
    spec_hash: str = ""  # what a code declaration's sync compares (``declaration_hash``)
    module: str | None = None  # the module that declared it (code)
    input_key: str | None = None
    paused: bool = False
    note: str | None = None
    last_run_id: str | None = None
    last_tick: datetime | None = None
    buffered: Action | None = None  # buffer_one: the start that waits for the last run to end
    pending: tuple[Action, ...] = ()
    version: int = 0
    fired: int = 0
    skipped: int = 0
    missed: int = 0
    orphaned: bool = False  # declared in code that the ticking deployment no longer declares: not fired


@dataclass(frozen=True)
class Due:
    """The ticks a claim looks at: ``ticks`` after the cursor up to now (chronological), and how many due ticks
    came before them and are passed over (``catchup="latest"`` looks at the most recent one only)."""

    ticks: tuple[datetime, ...] = ()
    passed_over: int = 0


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


NextAfter = Callable[[datetime], datetime | None]
"""The spec's first tick strictly after a moment (``timing.next_after`` bound to a spec)."""


# -- what is accepted ---------------------------------------------------------------------------------------


def check_schedule_id(value: object) -> str:
    if not isinstance(value, str) or not _SCHEDULE_ID.match(value):
        raise ScheduleInputError(f"a schedule id is 1-{MAX_SCHEDULE_ID} characters of letters, digits and _.:=+- "
                                 f"(got {value!r:.80})", field="scheduleId")
    return value


def check_input(text: str) -> str:
    size = len(text.encode("utf-8"))
    if size > MAX_INPUT_BYTES:
        raise ScheduleInputError(f"a schedule's arguments are at most {MAX_INPUT_BYTES} bytes serialized, got "
                                 f"{size}: pass a reference (an S3 key, a row id) and load it in a step",
                                 field="input")
    return text


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


def refuse_backfill(start: datetime, end: datetime, now: datetime, ticks: int) -> None:
    if end <= start:
        raise InvalidInputError(f"a backfill's end ({end.isoformat()}) must be after its start "
                                f"({start.isoformat()})", field="end")
    if end > now:
        raise InvalidInputError(f"a backfill covers the past: its end ({end.isoformat()}) is after now "
                                f"({now.isoformat()}); trigger a run now instead", field="end")
    if ticks > MAX_BACKFILL_TICKS:
        raise InvalidInputError(f"the range holds more than {MAX_BACKFILL_TICKS} ticks: backfill it in parts",
                                field="start")


# -- run ids ----------------------------------------------------------------------------------------------


def tick_text(moment: datetime) -> str:
    """A tick as fixed-width UTC text (milliseconds): what run ids, run contexts and records carry."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def parse_tick(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def schedule_run_id(schedule_id: str, tick: datetime, *, manual: bool = False) -> str:
    """The run of ``schedule_id``'s tick ``tick``: ``wrun_`` and a ULID whose time is the tick and whose random
    part is a digest of the schedule and the tick, so the id is the same for every scheduler that derives it
    (a second start of a tick returns the first run) and run listings, newest first, keep scheduled runs in
    time order among the others. A backfill derives the same ids (a tick backfilled that already ran is not run
    again); a manual trigger's id is its own (``manual``). Part of the durable format."""
    millis = max(0, (tick - _EPOCH) // timedelta(milliseconds=1))
    digest = hashlib.sha256(f"{schedule_id}@{tick_text(tick)}{'#manual' if manual else ''}".encode()).digest()
    return RUN_ID_PREFIX + str(ULID.from_bytes(millis.to_bytes(6, "big") + digest[:10]))


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
