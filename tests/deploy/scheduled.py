"""A workflow with a schedule declared in code, for the deployed path: ``test_schedules`` names this module in
``AWSWORLD_MODULES`` beside ``app`` (the other deploy tests do not, so nothing here fires in them)."""

from __future__ import annotations

from typing import Any

import awsworld
from awsworld import Schedule, workflow

BLOB = "r" * 20_000  # above the inline value limit: the schedule keeps it in an item of its own
SCHEDULE_ID = "deploy-every-minute"


@workflow(name="deploy.scheduled_report", schedule=Schedule(id=SCHEDULE_ID, every="1m", args=(BLOB,)))
async def scheduled_report(blob: str) -> dict[str, Any]:
    info = awsworld.schedule_info()
    assert info is not None
    return {"length": len(blob), "tick": info.tick.isoformat(), "schedule": info.schedule_id,
            "trigger": info.trigger}
