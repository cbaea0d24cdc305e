"""``awsworld.schedule_info()``: inside a run a schedule started, which schedule and which tick.

The run's ``run_created`` holds it (``executionContext.schedule``, written by ``effects.run_context``), and the
run's log starts with that event, so reading it costs nothing and replays the same every time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ..authoring.runtime import require_runtime
from ..world.protocol import World
from ..world.schedules import ScheduleNotFoundError, ScheduleState, Trigger, parse_tick, tick_text

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


async def schedule_now(world: World, schedule_id: str) -> ScheduleState | None:
    """The schedule ``schedule_id`` as it is now (None: deleted since, or a World without schedules): what a note
    about a run it started can truthfully say depends on it (``renamed_schedule_text``)."""
    store = world.schedules
    if store is None:
        return None
    try:
        return await store.get(schedule_id)
    except ScheduleNotFoundError:
        return None


def renamed_schedule_text(schedule_id: str, workflow: str, state: ScheduleState | None) -> str | None:
    """What is true of the schedule that started a run of ``workflow``, which no deployment registers, given the
    schedule as it is now; None for a schedule created through the API that still names ``workflow`` (it starts
    one such run at each tick: the callers' advice, pause or delete it and create it on the new name, holds).

    That advice was given for every schedule, and was false for one declared in code (``@workflow(schedule=...)``):
    renamed with its workflow, a declaration with its own ``id`` names the new workflow at the next sync, and one
    without is ``orphaned`` (it fires nothing) while the new name's starts afresh; a schedule declared in code
    cannot be deleted while declared (docs/how-to/schedules.md). Told to delete it, the user deleted nothing that
    mattered, or was refused."""
    if state is None:
        return f"schedule {schedule_id!r} started this run and has been deleted since: it starts no more runs"
    if state.workflow_name != workflow:
        how = "declared in code on" if state.source == "code" else "changed to"
        return (f"schedule {schedule_id!r} started this run and is now {how} {state.workflow_name!r}: its next "
                "ticks start that; nothing to change in the schedule")
    if state.source != "code":
        return None
    if state.orphaned:
        return (f"schedule {schedule_id!r} (declared in code) started this run; no deployment declares it now, so it "
                f"starts nothing: a declaration on the new name is a schedule of its own (`awsworld schedules list`); "
                f"`awsworld schedules delete {schedule_id}` removes the old one's record")
    return (f"schedule {schedule_id!r} started this run and is declared in code (`@workflow(schedule=...)`) on "
            f"{workflow!r} by a deployment that ticks: deploy code that registers {workflow!r} or declares the "
            "schedule on the new name (a schedule declared in code is not deleted while declared)")


def unknown_workflow_schedule_note(context: dict[str, Any] | None, workflow: str, state: ScheduleState | None) -> str:
    """What a run of ``workflow``, which no deployment registers, adds to its error when a schedule started it
    (``_worker/delivery.py``, which reads ``state``, the schedule now, with ``schedule_now``): the schedule starts
    such a run at each tick until it is changed, and naming another workflow is not the fix its starter can make
    (the schedule named it); empty when no schedule started the run. A schedule created through the API keeps its
    workflow's name when the workflow is renamed (docs/how-to/schedules.md); one declared in code follows the code
    (``renamed_schedule_text`` says what is true of it)."""
    info = schedule_of(context)
    if info is None:
        return ""
    told = renamed_schedule_text(info.schedule_id, workflow, state)
    if told is not None:
        return f"; {told}"
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
