"""``awsworld.schedule_info()``: inside a run a schedule started, which schedule and which tick.

The run's ``run_created`` holds it (``executionContext.schedule``, written by ``effects.run_context``), and the
run's log starts with that event, so reading it costs nothing and replays the same every time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..runtime.context import require_execution
from ..world.rules.schedules import Trigger, parse_tick

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
    execution = require_execution("awsworld.schedule_info()")
    created = execution.log[0].event_data if execution.log else None
    return schedule_of((created or {}).get("executionContext"))
