"""``Schedule``: when a workflow starts itself, and with which arguments, checked where it is written.

    @workflow(schedule=Schedule(cron="0 2 * * *", timezone="Europe/Berlin"))
    async def nightly_report() -> None: ...

    await client.schedules.create("sync", sync_shop, Schedule(every="15m", offset="5m", args=("eu",)))

Everything is checked when the ``Schedule`` is made (a cron expression CronSim refuses, an unknown time zone,
an interval under a minute, arguments that cannot be serialized or are too large), so a mistake in a declaration
fails the import that makes it, with the reason, and never becomes a schedule that cannot fire.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..authoring.durations import Duration, seconds
from ..durable import serde
from ..world import schedule_timing as timing
from ..world.schedules import (
    MIN_CATCHUP_WINDOW_SECONDS,
    MIN_INTERVAL_SECONDS,
    ScheduleState,
    Source,
    Spec,
    check_input,
    check_schedule_id,
)
from .policies import CATCHUPS, OVERLAPS, Catchup, Overlap


def python_option(name: str, value: str) -> str:
    """An option as ``Schedule(...)`` takes it (``overlap='allow_all'``): how a refusal spells the options it names
    (the CLI passes its own, ``--overlap allow_all``)."""
    return f"{name}={value!r}"


def catchup_refusal(catchup: str, overlap: str, spell: Callable[[str, str], str] = python_option) -> str | None:
    """Why ``catchup`` and ``overlap`` cannot go together (None: they can), with the way out, spelled by ``spell``
    as the user wrote them (``Schedule(...)``, or ``awsworld schedules create``'s flags).

    ``catchup="all"`` needs ``overlap="allow_all"``: a claim settles the missed ticks together
    (world/rules/schedules.py, ``claim``), the first one's run is going when the next is looked at, so any other
    policy keeps one or two of them, the oldest."""
    if catchup != "all" or overlap == "allow_all":
        return None
    return (f"{spell('catchup', 'all')} starts every missed tick at once, which needs {spell('overlap', 'allow_all')} "
            f"(they run side by side); with {spell('overlap', overlap)} the first missed tick's run would turn the "
            f"others away, and only the oldest would run. Give {spell('overlap', 'allow_all')}, or "
            f"{spell('catchup', 'latest')} (the default: the most recent missed tick only)")


@dataclass(frozen=True)
class Schedule:
    """When and how a workflow starts itself: ``cron`` (5 fields, in ``timezone``) or ``every`` (a duration of
    at least a minute, from the Unix epoch plus ``offset``; UTC), the arguments of each run, the ``overlap``
    policy (``skip``, ``buffer_one``, ``allow_all``, ``cancel_previous``) and the catch-up policy after downtime
    or a pause (``catchup="latest"``: the most recent missed tick only; ``"all"``: each, in order, all at once,
    so only with ``overlap="allow_all"``; either within ``catchup_window`` when given). ``id``: the schedule's
    name (default: the workflow's name; give one to declare several schedules on one workflow)."""

    cron: str | None = None
    every: Duration | None = None
    offset: Duration = 0
    timezone: str = "UTC"
    args: Sequence[Any] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict[str, Any])
    overlap: Overlap = "skip"
    catchup: Catchup = "latest"
    catchup_window: Duration | None = None
    id: str | None = None

    def __post_init__(self) -> None:
        if (self.cron is None) == (self.every is None):
            raise ValueError("a Schedule takes cron='...' or every='...', exactly one of them")
        if self.overlap not in OVERLAPS:
            raise ValueError(f"overlap must be one of {', '.join(OVERLAPS)}, got {self.overlap!r}")
        if self.catchup not in CATCHUPS:
            raise ValueError(f"catchup must be one of {', '.join(CATCHUPS)}, got {self.catchup!r}")
        refused = catchup_refusal(self.catchup, self.overlap)
        if refused is not None:
            raise ValueError(refused)
        if self.id is not None:
            check_schedule_id(self.id)
        if isinstance(self.args, str | bytes) or not isinstance(self.args, Sequence):
            raise TypeError(f"args must be a sequence of positional arguments, got {type(self.args).__name__}")
        object.__setattr__(self, "args", tuple(self.args))
        object.__setattr__(self, "kwargs", dict(self.kwargs))
        timing.check(self.spec())  # the cron expression and the time zone, with the reason
        self.window_seconds()
        self.input_text()

    def spec(self) -> Spec:
        if self.cron is not None:
            if self.offset:
                raise ValueError("offset applies to every=..., not to a cron expression")
            return Spec(cron=" ".join(self.cron.split()), timezone=self.timezone)
        every = _whole_seconds(self.every, "every")
        if every < MIN_INTERVAL_SECONDS:
            raise ValueError(f"every must be at least {MIN_INTERVAL_SECONDS} s (schedules are evaluated once a "
                             f"minute), got {every} s")
        offset = _whole_seconds(self.offset, "offset")
        if offset >= every:
            raise ValueError(f"offset ({offset} s) must be shorter than every ({every} s)")
        if self.timezone != "UTC":
            raise ValueError("every=... is absolute (UTC): for local wall-clock times use a cron expression with "
                             "timezone=")
        return Spec(every=every, offset=offset)

    def window_seconds(self) -> int | None:
        if self.catchup_window is None:
            return None
        window = _whole_seconds(self.catchup_window, "catchup_window")
        if window < MIN_CATCHUP_WINDOW_SECONDS:
            raise ValueError(f"catchup_window must be at least {MIN_CATCHUP_WINDOW_SECONDS} s (a tick may be "
                             f"noticed up to a minute late), got {window} s")
        return window

    def input_text(self) -> str:
        """The runs' arguments as stored: serialized once, here (a value that cannot be is a ``TypeError`` now,
        not a failed tick later)."""
        try:
            text = serde.to_json_text({"args": list(self.args), "kwargs": dict(self.kwargs)})
        except serde.SerializationError as error:
            raise TypeError(f"the schedule's arguments cannot be serialized: {error}") from None
        return check_input(text)

    def state(self, schedule_id: str, workflow_name: str, now: datetime, *, source: Source,
              module: str | None = None) -> ScheduleState:
        """A new record of this schedule, its ticks counted from ``now``."""
        spec = self.spec()
        text = self.input_text()
        return ScheduleState(
            schedule_id=check_schedule_id(schedule_id), workflow_name=workflow_name, spec=spec, input=text,
            created_at=now, updated_at=now, cursor=now, next_at=timing.next_after(spec, now),
            overlap=self.overlap, catchup=self.catchup, catchup_window=self.window_seconds(), source=source,
            spec_hash=declaration_hash(workflow_name, spec, text, self.overlap, self.catchup,
                                       self.window_seconds()),
            module=module)


def declaration_hash(workflow_name: str, spec: Spec, text: str, overlap: str, catchup: str,
                     window: int | None) -> str:
    """What a code declaration's sync compares: any change to it (spec, arguments, policies) is a new hash."""
    canonical = json.dumps([workflow_name, spec.cron, spec.every, spec.offset, spec.timezone, text, overlap,
                            catchup, window], separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def _whole_seconds(value: Duration | None, what: str) -> int:
    if value is None:
        raise ValueError(f"{what} is required")
    total = seconds(value, what=what)
    if total != int(total):
        raise ValueError(f"{what} must be whole seconds, got {total} s")
    return int(total)
