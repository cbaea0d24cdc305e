"""The tick: periodic work with no run to carry it, as a small dispatcher of jobs.

A tick is a queue message ``{"awsworldTick": 1}`` (what the stack's EventBridge schedule sends to the flow
queue every minute) or a direct call (``awsworld dev``'s poller on the real clock, ``WorkflowTestEnv``'s driver
on its virtual one). Whoever gets it runs every job in ``JOBS``, in order, each on its own: one failing does not
stop the next, and the tick as a whole fails (a queue message comes back later) only if one did.

The watchdog (``_worker.watchdog``) is the first job. A later job (cron-scheduled workflow starts, say) is one
more entry: it gets the World and answers a small report; it must be idempotent, because a tick may arrive
twice or late.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..schedules.job import run_schedules
from ..world.protocol import World
from . import watchdog

log = logging.getLogger("awsworld.tick")

TICK_FIELD = "awsworldTick"
TICK_BODY = json.dumps({TICK_FIELD: 1})
"""The body of a tick message (the schedule's input in template.yaml)."""


async def _watchdog(world: World) -> dict[str, Any]:
    return (await watchdog.sweep(world)).as_dict()


Job = Callable[[Any], Awaitable[dict[str, Any]]]
JOBS: dict[str, Job] = {"watchdog": _watchdog, "schedules": run_schedules}  # schedules: docs/how-to/schedules.md


class TickFailedError(Exception):
    """At least one job of the tick failed (each is retried with the next tick, or with the message)."""


def is_tick(record: Mapping[str, Any]) -> bool:
    """Whether a queue record (Lambda's or ReceiveMessage's shape) is a tick rather than a delivery."""
    body = record.get("body", record.get("Body"))
    if not isinstance(body, str) or TICK_FIELD not in body:
        return False
    try:
        parsed = json.loads(body)
    except ValueError:
        return False
    return isinstance(parsed, dict) and parsed.get(TICK_FIELD) == 1


async def run_tick(world: World, jobs: Mapping[str, Job] | None = None) -> dict[str, Any]:
    """Run every job once; their reports by name. Raises ``TickFailedError`` after all ran if one failed."""
    reports: dict[str, Any] = {}
    failed: list[str] = []
    for name, job in (JOBS if jobs is None else jobs).items():
        try:
            reports[name] = await job(world)
        except Exception as error:
            failed.append(name)
            log.warning("tick: job %s failed: %s: %s", name, type(error).__name__, str(error)[:300])
    if failed:
        raise TickFailedError(f"tick job(s) failed: {', '.join(failed)}")
    return reports
