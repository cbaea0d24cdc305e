"""The watchdog: find the runs whose due passed with no write, and wake them.

A run's due (``world.watch``) is when, if its messages are alive, something will have written to it. The
watchdog asks the World's watch index for the runs whose due has passed (an index query per shard, never a
scan), and for each one:

1. snoozes it: pushes its due forward (doubling with each wake in a row that finds it still due, up to a day),
   only if the due is still the one the index showed (a run that wrote meanwhile is alive and left alone, and
   of two watchdogs racing, one wins);
2. queues a flow message marked as a watchdog wake. Its flow takes over steps whose lease passed, re-queues
   steps that never started, completes due waits, and sets the run's exact due when it comes to rest
   (``_worker.recovery``). Waking a run whose messages were fine after all costs one delivery that finds
   nothing to do.

It runs as the first job of the tick (``_worker.tick``): every minute in the stack (an EventBridge schedule
sends the tick to the flow queue), on the real clock in ``awsworld dev``, and on the virtual clock in
``WorkflowTestEnv``, when the soonest due comes.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Any

from ..world.messages import WATCHDOG_WAKE, FlowMessage, queue_name_for
from ..world.protocol import World
from ..world.watch import DueRun

log = logging.getLogger("awsworld.watchdog")

MAX_RUNS_PER_SWEEP = 1000
"""Runs woken per sweep at most (the rest next tick): a sweep fits in one delivery whatever piled up."""
PARALLEL = 16
STUCK_AFTER = 1
"""Wakes in a row after which a run still due is stuck: its last wake's flow wrote nothing (a planned wake, of a
sleep beyond one message's reach or a parked run's hour, is followed by a write that resets the count; a lost
message's wake, by the write of the flow it brings). Such a run cannot move by itself (a flow that fails on every
delivery, a deployment that lacks its code), or waits for a limit's slot or token, which rests it with no due of
its own (``world.watch.snooze_due``): over 10 minutes of that counts too. ``RunsStuck`` counts them, and an
alarm watches it (``deploy/monitoring.yaml``)."""
STUCK_NAMED = 10
"""Stuck runs named in the sweep's log line at most (the ``RunsStuck`` metric counts them all)."""


@dataclass
class SweepReport:
    due: int = 0
    woken: list[str] = field(default_factory=list)
    moved: int = 0  # found due, but written to (or ended) before the snooze: alive, left alone
    failed: int = 0
    stuck: list[str] = field(default_factory=list)  # woken again: the last wake brought no write (``STUCK_AFTER``)

    def as_dict(self) -> dict[str, Any]:
        return {"due": self.due, "woken": len(self.woken), "stuck": len(self.stuck), "moved": self.moved,
                "failed": self.failed}


async def sweep(world: World, *, limit: int = MAX_RUNS_PER_SWEEP) -> SweepReport:
    """Wake every run whose due has passed (at most ``limit``); nothing on a World without a watch index."""
    report = SweepReport()
    api = world.watch
    if api is None:
        return report
    now = world.clock.now()
    found = await api.due(now, limit=limit)
    report.due = len(found)
    slots = asyncio.Semaphore(PARALLEL)

    async def wake(run: DueRun) -> None:
        async with slots:
            try:
                if await api.snooze(run, now) is None:
                    report.moved += 1
                    return
                message = FlowMessage(run.run_id, run.workflow_name, wake=WATCHDOG_WAKE)
                await world.queue(queue_name_for(run.workflow_name), message.to_payload())
                report.woken.append(run.run_id)
                if run.wakes >= STUCK_AFTER:
                    report.stuck.append(run.run_id)
            except Exception as error:  # one run's failure must not stop the others; it is due again later
                report.failed += 1
                log.warning("watchdog: waking run %s failed: %s", run.run_id, type(error).__name__)

    await asyncio.gather(*(wake(run) for run in found))
    if report.woken or report.failed:
        log.info("watchdog: woke %d run(s) whose due had passed (%d moved meanwhile, %d failed)",
                 len(report.woken), report.moved, report.failed)
    if report.stuck:
        named = ", ".join(sorted(report.stuck)[:STUCK_NAMED]) + (", ..." if len(report.stuck) > STUCK_NAMED else "")
        log.warning("watchdog: %d run(s) still due after a wake that moved nothing, woken again: %s (`awsworld "
                    "describe RUN` says what each waits for)", len(report.stuck), named,
                    extra={"stuckRuns": sorted(report.stuck)[:STUCK_NAMED]})
    return report
