"""What the schedule tests read back: the runs a World holds, with the schedule and tick that started each."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from awsworld.schedules.info import schedule_of
from awsworld.world.pages import collect_pages


@dataclass(frozen=True)
class Started:
    run_id: str
    schedule_id: str
    tick: datetime
    trigger: str
    status: str


async def scheduled_runs(world: Any, schedule_id: str | None = None) -> list[Started]:
    """Every run a schedule started (``schedule_id``: that one's only), in tick order."""
    runs = await collect_pages(lambda cursor: world.runs.list(cursor=cursor, limit=100, resolve_data="none"))
    found: list[Started] = []
    for run in runs:
        info = schedule_of(run.execution_context)
        if info is None or (schedule_id is not None and info.schedule_id != schedule_id):
            continue
        found.append(Started(run.run_id, info.schedule_id, info.tick, info.trigger, run.status))
    return sorted(found, key=lambda s: (s.tick, s.run_id))


def hhmm(runs: list[Started]) -> list[str]:
    return [s.tick.strftime("%m-%d %H:%MZ") for s in runs]
