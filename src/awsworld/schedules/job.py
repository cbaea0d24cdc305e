"""The tick's schedules job: bring the store in line with the code's declarations, then fire what is due.

Every tick (``_worker.tick``: each minute in the stack, every few seconds in ``awsworld dev``, whenever a
schedule is due on a ``WorkflowTestEnv``'s virtual clock) lists the schedules (one Query on DynamoDB) and:

1. syncs the host's declarations (``store.declared``): a declaration not stored yet is created, a changed one
   updated (``world.rules.schedules.sync``); a stored code schedule no declaration names is marked orphaned
   and no longer fires. An unchanged declaration costs nothing (its hash is compared, no cron is evaluated);
2. looks at each schedule that needs it (``needs_evaluation``: a tick due, a buffered start, an effect left
   pending) and claims its due ticks (``world.rules.schedules.claim``) under the overlap and catch-up
   policies, through ``effects.decide_and_apply``: one run per tick, whichever of two schedulers gets there.

Idempotent as a tick job must be: a duplicate or late tick finds the cursor moved and does nothing, and a
schedule whose claim failed is looked at again by the next tick. A failure in one schedule does not stop the
others; the job raises at the end so the tick message comes back.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime
from functools import partial

from .._worker.run_control import RunStarter
from ..world import schedule_timing as timing
from ..world.protocol import World
from ..world.rules.schedules import Claim, claim, code_conflict, needs_evaluation, orphan, sync
from ..world.schedules import ScheduleState, ScheduleStore
from .effects import decide_and_apply

log = logging.getLogger("awsworld.schedules")

MAX_ROUNDS = 20
"""Claims per schedule and tick at most (``catchup="all"`` settles up to 100 ticks a claim)."""


@dataclass
class JobReport:
    schedules: int = 0
    evaluated: int = 0
    started: int = 0
    skipped: int = 0
    missed: int = 0
    synced: int = 0
    invalid: int = 0  # declarations that cannot be stored (a bad cron expression, found by the tick on Lambda)
    failed: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(vars(self))

    def add(self, decision: Claim) -> None:
        self.started += len(decision.started)
        self.skipped += decision.skipped
        self.missed += decision.missed


class ScheduleJobError(RuntimeError):
    """Some schedules could not be looked at in this tick (each is looked at again by the next)."""


async def run_schedules(world: World) -> dict[str, int]:
    """The job: its report (counts). Nothing on a World without a schedule store."""
    report = JobReport()
    store = world.schedules
    if store is None:
        return report.as_dict()
    now = world.clock.now()
    states = {state.schedule_id: state for state in await store.list()}
    report.schedules = len(states)
    await _sync(store, states, now, report)
    # No registry, no names read: a scheduled run records what its schedule holds, and its delivery decides.
    starter = RunStarter(world, check_published=False)
    for state in list(states.values()):
        if not needs_evaluation(state, now):
            continue
        report.evaluated += 1
        try:
            await _evaluate(world, store, state, now, starter, report)
        except Exception as error:
            report.failed += 1
            log.warning("schedule %s: the tick could not claim it: %s: %s", state.schedule_id,
                        type(error).__name__, str(error)[:300])
    if report.started or report.missed:
        log.info("schedules: started %d run(s), skipped %d tick(s), missed %d", report.started, report.skipped,
                 report.missed)
    if report.failed:
        raise ScheduleJobError(f"{report.failed} schedule(s) could not be claimed in this tick")
    return report.as_dict()


async def _evaluate(world: World, store: ScheduleStore, state: ScheduleState, now: datetime, starter: RunStarter,
                    report: JobReport) -> None:
    def decide(current: ScheduleState, status: str | None) -> Claim | None:
        due = timing.due(current.spec, current.cursor, now, current.catchup)
        return claim(current, now, due, status, partial(timing.next_after, current.spec))

    def needs_status(current: ScheduleState) -> bool:
        return current.last_run_id is not None and (current.overlap != "allow_all" or current.buffered is not None)

    for _ in range(MAX_ROUNDS):
        state, decision = await decide_and_apply(world, store, state, decide, starter=starter,
                                                 needs_status=needs_status)
        if decision is None:
            return
        report.add(decision)
        if state.next_at is None or state.next_at > now or state.buffered is not None:
            return


async def _sync(store: ScheduleStore, states: dict[str, ScheduleState], now: datetime, report: JobReport) -> None:
    """Store what the host declares; mark stored code schedules it does not declare as orphaned."""
    declared = {d.schedule_id: d for d in store.declared}
    for declaration in declared.values():
        stored = states.get(declaration.schedule_id)
        if code_conflict(stored):
            log.warning("schedule %s is declared in code (%s) but was created through the API: the API's stays; "
                        "delete it or give the declaration another id", declaration.schedule_id, declaration.module)
            continue
        if stored is not None and stored.spec_hash == declaration.spec_hash and not stored.orphaned:
            continue  # the usual case: nothing changed, nothing evaluated
        try:
            fresh = declaration.state(now)  # evaluates the spec: a bad cron expression is refused here on Lambda
        except ValueError as error:  # not retried: the next tick meets the same code (fix it and deploy)
            report.invalid += 1
            log.error("schedule %s (declared in %s) cannot be stored: %s", declaration.schedule_id,
                      declaration.module, error)
            continue
        updated = sync(stored, fresh, now, partial(timing.next_after, fresh.spec))
        if updated is not None and await store.write(updated, expected_version=None if stored is None
                                                     else stored.version):
            states[declaration.schedule_id] = updated
            report.synced += 1
    for schedule_id, stored in list(states.items()):
        marked = orphan(stored, set(declared), now)
        if marked is not None and await store.write(marked, expected_version=stored.version):
            states[schedule_id] = marked
            report.synced += 1
            log.warning("schedule %s (declared in %s) is not declared by this deployment any more: it does not "
                        "fire; declare it again to resume it, or delete it", schedule_id, stored.module)
