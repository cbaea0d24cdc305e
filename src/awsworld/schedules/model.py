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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

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


class Spell(Protocol):
    """How a refusal names an option it speaks of, as the user wrote it: ``Schedule(...)``'s keywords
    (``python_option``) or ``awsworld schedules create``'s flags (cli/schedules.py, ``flag``). A rule is written
    once, here, and spelled by its caller."""

    def __call__(self, name: str, value: str | None = None, /) -> str: ...


def python_option(name: str, value: str | None = None, /) -> str:
    """An option as ``Schedule(...)`` takes it: ``overlap='allow_all'``, or the keyword alone (``catchup_window``)."""
    return name if value is None else f"{name}={value!r}"


def catchup_refusal(catchup: str, overlap: str, spell: Spell = python_option) -> str | None:
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


def spec_of(cron: str | None, every: Duration | None, offset: Duration, timezone: str,
            spell: Spell = python_option) -> Spec:
    """When a schedule fires, its options checked (``ValueError``, spelled by ``spell``): exactly one of ``cron``
    and ``every``; ``every`` whole seconds, at least a minute, in UTC; ``offset`` shorter than it, and only with it
    (0 means none, so a cron takes it too). The cron expression and the time zone themselves are
    ``timing.check``'s (world/schedule_timing.py)."""
    if (cron is None) == (every is None):
        raise ValueError(f"a schedule takes {spell('cron', '...')} or {spell('every', '...')}, exactly one of them")
    if cron is not None:
        # An offset of 0 in any spelling ("0", "0s", the CLI's text) means none, and was refused as one given.
        if offset and whole_seconds(offset, "offset", spell):
            raise ValueError(f"{spell('offset')} applies to {spell('every')}, not to a cron expression "
                             f"({spell('cron')})")
        return Spec(cron=" ".join(cron.split()), timezone=timezone)
    interval = whole_seconds(every, "every", spell)
    if interval < MIN_INTERVAL_SECONDS:
        raise ValueError(f"{spell('every')} must be at least {MIN_INTERVAL_SECONDS} s (schedules are evaluated once "
                         f"a minute), got {interval} s")
    shift = whole_seconds(offset, "offset", spell)
    if shift >= interval:
        raise ValueError(f"{spell('offset')} ({shift} s) must be shorter than {spell('every')} ({interval} s)")
    if timezone != "UTC":
        raise ValueError(f"{spell('every')} is absolute (UTC): for local wall-clock times use a cron expression "
                         f"({spell('cron')}) with {spell('timezone')}")
    return Spec(every=interval, offset=shift)


def window_of(catchup_window: Duration | None, spell: Spell = python_option) -> int | None:
    """The catch-up window in whole seconds (None: no window), at least ``MIN_CATCHUP_WINDOW_SECONDS``
    (``ValueError``, spelled by ``spell``)."""
    if catchup_window is None:
        return None
    window = whole_seconds(catchup_window, "catchup_window", spell)
    if window < MIN_CATCHUP_WINDOW_SECONDS:
        raise ValueError(f"{spell('catchup_window')} must be at least {MIN_CATCHUP_WINDOW_SECONDS} s (a tick may be "
                         f"noticed up to a minute late), got {window} s")
    return window


def whole_seconds(value: Duration | None, name: str, spell: Spell = python_option) -> int:
    """``value`` (option ``name``) as whole seconds: the duration parser's refusals name the option as ``spell``
    writes it, too."""
    if value is None:
        raise ValueError(f"{spell(name)} is required")
    total = seconds(value, what=spell(name))
    if total != int(total):
        raise ValueError(f"{spell(name)} must be whole seconds, got {total} s")
    return int(total)


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
        return spec_of(self.cron, self.every, self.offset, self.timezone)

    def window_seconds(self) -> int | None:
        return window_of(self.catchup_window)

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

