"""``awsworld.schedule_info()``: inside a run a schedule started, which schedule and which tick.

The run's ``run_created`` holds it (``executionContext.schedule``, written by ``effects.run_context``), and the
run's log starts with that event, so reading it costs nothing and replays the same every time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..authoring.runtime import require_runtime
from ..world.schedules import Trigger, parse_tick, tick_text

CONTEXT_KEY = "schedule"
"""Where a scheduled run's ``run_created`` executionContext says which schedule and tick started it."""


@dataclass(frozen=True)
class ScheduleInfo:
    """``schedule_id`` started this run for its nominal ``tick`` (UTC; for a manual trigger, when it was
    triggered); ``trigger``: ``tick``, ``manual`` or ``backfill``."""

    schedule_id: str
    tick: datetime
    trigger: Trigger


def schedule_of(context: dict[str, Any] | None) -> ScheduleInfo | None:
    """The schedule an executionContext names (None: the run was not started by a schedule)."""
    raw = (context or {}).get(CONTEXT_KEY)
    if not isinstance(raw, dict):
        return None
    return ScheduleInfo(str(raw.get("id")), parse_tick(str(raw.get("tick"))), raw.get("trigger", "tick"))


def schedule_info() -> ScheduleInfo | None:
    """Inside a workflow: the schedule and tick that started this run, or None (started otherwise)."""
    return schedule_of(require_runtime("awsworld.schedule_info()").execution_context())


def schedule_json(context: dict[str, Any] | None) -> dict[str, str] | None:
    """What ``awsworld runs``, ``describe`` and the UI show of the schedule that started a run (None: none)."""
    info = schedule_of(context)
    if info is None:
        return None
    return {"id": info.schedule_id, "tick": tick_text(info.tick), "trigger": info.trigger}


def unknown_workflow_schedule_note(context: dict[str, Any] | None, workflow: str) -> str:
    """What a run of ``workflow``, which no deployment registers, adds to its error when a schedule started it
    (``_worker/delivery.py``): the schedule starts such a run at each tick until it is changed, and naming another
    workflow is not the fix its starter can make (the schedule named it); empty when no schedule started the
    run. A schedule created through the API keeps its workflow's name when the workflow is renamed
    (docs/how-to/schedules.md)."""
    info = schedule_of(context)
    if info is None:
        return ""
    return (f"; schedule {info.schedule_id!r} started this run and starts one of {workflow!r} at each tick: pause "
            f"or delete it (`awsworld schedules pause {info.schedule_id}`, `awsworld schedules delete "
            f"{info.schedule_id}`), and if the workflow was renamed, create the schedule on its new name")


def schedule_label(context: dict[str, Any] | None) -> str | None:
    """``schedule nightly 2026-03-01T01:00:00.000Z`` (``(manual)``/``(backfill)`` when not its own tick)."""
    shown = schedule_json(context)
    if shown is None:
        return None
    how = "" if shown["trigger"] == "tick" else f" ({shown['trigger']})"
    return f"schedule {shown['id']} {shown['tick']}{how}"
