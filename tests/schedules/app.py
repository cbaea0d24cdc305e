"""Scheduled workflows the schedule tests fire (declared in code; each test env names the ones it fires)."""

from __future__ import annotations

from typing import Any

import awsworld
from awsworld import Schedule, workflow


@workflow(schedule=Schedule(cron="0 2 * * *", timezone="Europe/Berlin", args=("nightly",)))
async def nightly(label: str) -> dict[str, Any]:
    info = awsworld.schedule_info()
    assert info is not None
    return {"label": label, "tick": info.tick.isoformat(), "trigger": info.trigger, "id": info.schedule_id}


@workflow
async def slow(minutes: int) -> str:
    """Runs longer than its schedule's interval: what the overlap policies are about."""
    await awsworld.sleep(minutes * 60)
    info = awsworld.schedule_info()
    return "unscheduled" if info is None else info.tick.isoformat()


@workflow
async def echo(value: Any) -> Any:
    info = awsworld.schedule_info()
    return {"value": value, "tick": None if info is None else info.tick.isoformat()}


@workflow
async def tagged(value: str) -> str:
    return value


awsworld.schedule(tagged, Schedule(id="tagged-6h", every="6h", offset="1h", args=("declared apart",)))


@workflow(schedule=[Schedule(id="spring", cron="30 2 * * *", timezone="Europe/Berlin"),
                    Schedule(id="hourly-berlin", cron="15 * * * *", timezone="Europe/Berlin")])
async def dst() -> str:
    info = awsworld.schedule_info()
    assert info is not None
    return info.tick.isoformat()
