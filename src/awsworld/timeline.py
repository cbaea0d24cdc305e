"""A readable timeline of one run, from its event log: steps with attempts and durations, waits, hooks."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from .world.events import Event
from .world.pages import collect_pages


def _ms(a: datetime, b: datetime) -> str:
    return f"{(b - a).total_seconds() * 1000:8.0f} ms"


async def print_timeline(world: Any, run_id: str) -> None:
    events: list[Event] = await collect_pages(
        lambda cursor: world.events.list(run_id, cursor=cursor, resolve_data="none"))
    if not events:
        print(f"run {run_id}: no events")
        return
    t0 = events[0].created_at
    names: dict[str, str] = {}
    started: dict[str, datetime] = {}
    print(f"timeline of {run_id} ({len(events)} events)")
    print(f"  {'at':>11}  {'event':<15} {'what':<28} detail")
    for event in events:
        data = event.event_data or {}
        corr = event.correlation_id or ""
        what, detail = corr, ""
        kind = event.event_type
        if kind == "step_created":
            names[corr] = data.get("stepName", corr)
            what = names[corr]
        elif kind.startswith("step_"):
            what = names.get(corr, corr)
            if kind == "step_started":
                started[corr] = event.created_at
                detail = f"attempt {data.get('attempt')}"
            elif kind in ("step_completed", "step_failed", "step_retrying") and corr in started:
                detail = f"took {_ms(started[corr], event.created_at).strip()}"
                if kind == "step_retrying":
                    detail += f"; retry after {data.get('retryAfter', '?')[11:23]}"
        elif kind == "wait_created":
            detail = f"until {str(data.get('resumeAt', ''))[11:23]}"
        elif kind.startswith("hook_"):
            names.setdefault(corr, data.get("token") or corr)
            what = names[corr]
        print(f"  {_ms(t0, event.created_at)}  {kind:<15} {what[:28]:<28} {detail}")
    print(f"  total {_ms(t0, events[-1].created_at).strip()}")
