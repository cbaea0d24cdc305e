"""Schedules in the contract: the record a World's schedule store keeps (``ScheduleState``), its parts, what it
accepts, the ids of its runs, and the store every World gives (``ScheduleStore``, ``world.schedules``).

A schedule is one small record that every change rewrites whole, conditioned on the version it read: what the
store accepts and refuses and what one tick does with a record are the rulebook's (``world/rules/schedules.py``),
when a spec's ticks are is ``world/schedule_timing.py``'s. Each World keeps the records in its own store
(``_memory/schedules.py``, ``aws/schedule_store.py``); the client, the CLI and the tick's job sit above
(``awsworld.schedules``). Times are aware UTC datetimes; ticks are nominal times (when the schedule says a run
is due, not when the tick that noticed it ran).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal, Protocol

from ulid import ULID

from ..schedules.policies import CATCHUPS as CATCHUPS  # the policies' words (their module: without the models)
from ..schedules.policies import OVERLAPS as OVERLAPS
from ..schedules.policies import Catchup, Overlap
from .errors import EntityConflictError, InvalidInputError, NotFoundError
from .ids import RUN_ID_PREFIX

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
        """How people read when it fires, in every message that names it (a refusal) as in `awsworld schedules`."""
        return when_text(self.cron, self.timezone, self.every, self.offset)


def interval_text(seconds: int) -> str:
    """An interval as ``--every`` and ``Schedule(every=)`` take it: ``15m``, ``1h30m``, ``1d``, ``90s``."""
    parts: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        count, seconds = divmod(seconds, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"


def when_text(cron: str | None, timezone: str, every: int | None, offset: int | None) -> str:
    """When a schedule fires, one way for every reader (``Spec.describe``; the CLI's ``WHEN``, from the JSON it
    prints): ``cron '0 2 * * *' Europe/Berlin``, ``every 15m offset 5m`` (an interval is counted in UTC)."""
    if cron is not None:
        return f"cron {cron!r} {timezone}"
    return f"every {interval_text(every or 0)}" + (f" offset {interval_text(offset)}" if offset else "")


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


class DeclaredSchedule(Protocol):
    """A schedule declared in code, as a store's host names it (``awsworld.schedules.declared.Declaration``)."""

    @property
    def schedule_id(self) -> str: ...

    @property
    def module(self) -> str: ...

    @property
    def spec_hash(self) -> str:
        """The hash a record of this declaration holds (``ScheduleState.spec_hash``)."""
        ...

    def state(self, now: datetime) -> ScheduleState:
        """The record a first sync of this declaration stores."""
        ...


class ScheduleStore(Protocol):
    """A World's schedule store (``world.schedules``): awsworld's extension, like the watch index. Every write is
    conditioned on the version its writer read (``rules.schedules.may_write``) and answers whether it won."""

    declared: tuple[DeclaredSchedule, ...]
    """The schedules declared in code that this World's host deploys (its ticks create and update them)."""

    async def list(self) -> list[ScheduleState]:
        """Every schedule, by id (``input`` may be None: read it with ``input``)."""
        ...

    async def get(self, schedule_id: str) -> ScheduleState:
        """One schedule, read strongly; ``ScheduleNotFoundError`` when there is none."""
        ...

    async def input(self, state: ScheduleState) -> str:
        """The serialized arguments of ``state``'s runs."""
        ...

    async def write(self, state: ScheduleState, *, expected_version: int | None) -> bool:
        """Store ``state`` if the stored record is at ``expected_version`` (None: if there is none); False when
        another writer moved it first (read it again and decide afresh)."""
        ...

    async def delete(self, schedule_id: str, *, expected_version: int) -> bool:
        """Remove the schedule if it is at ``expected_version``; False when it moved (or is gone)."""
        ...
