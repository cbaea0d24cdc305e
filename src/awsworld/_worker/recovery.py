"""No part of a run depends on a message that may never come back: what a flow does about lost messages.

Every step, wait and retry of a run is moved by a queue message, and any message can be lost (deleted, purged,
redriven under a new id, a recreated queue, an ``awsworld dev --state`` restart). A flow delivery, whatever
brought it (the run's own messages, a hook resume, the watchdog, ``awsworld wake``), therefore replays the run
and gives every open part a live way forward:

- a step started by another delivery whose lease has passed is **taken over** (run here as a new attempt;
  ``world.rules.leases`` decides, in the World, that only one delivery wins; after ``dev --state`` restored it, a
  step's lease has ended in storage, and the restart's wake tries it at once: every step started before the wake
  was sent, and no other, since whatever started later runs under a delivery of the restarted process);
- a step declared (or due to retry) longer ago than the watch horizon and still not started has lost its
  message: it is **queued again under a fresh key** (``dispatch_key``), since the idempotency key of the lost
  message may be held for days by its dedup marker (a duplicate finds the step started or ended: harmless);
- a wait that is due is completed by the flow itself (no message needed, ``Declarer.complete_due_waits``);
- a *wake* (``world.messages.WAKE_KINDS``) that finds a step still leased to another delivery queues itself again for
  when that lease ends, so one wake is enough.

And when the flow comes to rest (suspends with nothing in flight), it leaves the run's exact due on its head
(``rest``), so the watchdog (``_worker.watchdog``) wakes a sleeping run only if its wake-up is lost, or, for a
timer further away than one queue message reaches (a 30-day sleep on SQS), once shortly before it, in place of
the message (``world.watch.timer_due``); and a run waiting on hooks alone only at the end of its lifetime
(``world/rules/lifetime.py``), which the wake's flow then ends.
"""

from __future__ import annotations

import itertools
import logging
import math
from collections.abc import Sequence
from datetime import datetime

from .._engine.execution import WorkflowExecution
from .._engine.ops import StepOp
from ..world.events import Event
from ..world.messages import RESTART_WAKE, FlowMessage, queue_name_for
from ..world.protocol import World
from ..world.rules.leases import lease_expired
from ..world.rules.lifetime import context_of, lifetime_end
from ..world.watch import WatchAPI, commit_due, due_key, horizon, timer_due
from .child_runs import child_check_times

log = logging.getLogger("awsworld.flow")


def taken_over(step: StepOp, message: FlowMessage, message_id: str | None, now: datetime,
               sent_at: datetime | None = None) -> bool:
    """Started by another delivery whose lease has passed: the owner is gone, the step is anyone's to run. A
    restart's wake (``awsworld dev --state``, which ended the restored steps' leases in storage) tries every step
    started before it was sent (``sent_at``, the wake's ``Delivery.created_at``; None: every started step): the
    World's lease, not the log's, decides.

    Only those: a step started after the wake was sent was started by the restarted process, under a live lease,
    and most often by a message the wake's own flow queued. Tried as well, the World refused each inline try, and
    each was queued again under a fresh key (``dispatch_key``), at every turn of the flow's loop: a second delivery
    per step, which ran a flow reading the whole log when it came after the step had ended (``bench/dev_crash.py``:
    94 such flows after a restart at 1,000 steps, and the run's step results held behind their reads for a minute)."""
    if not step.started or step.owner == message_id:
        return False
    if message.wake == RESTART_WAKE and started_before(step, sent_at):
        return True
    return lease_expired(step.lease_until, now)


def started_before(step: StepOp, sent_at: datetime | None) -> bool:
    """Whether the step's current attempt started before ``sent_at`` (None, or an attempt of unknown time: yes)."""
    return sent_at is None or step.started_at is None or step.started_at < sent_at


def held_elsewhere(step: StepOp, message_id: str | None, now: datetime) -> bool:
    """Started by another delivery that may still be running it (its lease has not passed)."""
    return step.started and step.owner != message_id and not lease_expired(step.lease_until, now)


def overdue(step: StepOp, now: datetime) -> bool:
    """Never started although it was declared (or due to retry) longer ago than the watch horizon: its
    message is lost, or stuck behind a backlog that long (then the second message is a harmless duplicate)."""
    anchor = step.retry_after or step.declared_at
    return not step.started and anchor is not None and now - anchor >= horizon()


def dispatch_key(run_id: str, step: StepOp, now: datetime) -> str:
    """The idempotency key of a step's message: per attempt, so every flow that replays the run sends it once;
    for a step whose message is lost (taken over, or overdue) a fresh one per watch bucket, so the lost
    message's dedup marker cannot hold it back."""
    key = f"{run_id}:{step.id}:{step.attempt}"
    if step.started or overdue(step, now):
        key += f":{due_key(now)}"
    return key


def started_by(log: Sequence[Event], step_id: str) -> str | None:
    """The message id of the delivery that started the step's last attempt (``ownerMessageId``)."""
    for event in reversed(log):
        if event.event_type == "step_started" and event.correlation_id == step_id:
            owner = (event.event_data or {}).get("ownerMessageId")
            return owner if isinstance(owner, str) else None
    return None


async def wake_at_lease_end(world: World, message: FlowMessage, steps: Sequence[StepOp], now: datetime,
                            queued: set[str]) -> None:
    """A wake found steps leased to another delivery: come back when the soonest lease ends (each lease once).

    A restart's wake never needs to: what started before it had its lease ended by the restore, and its flow took
    each such step over (queued it, ran it, or was refused by a delivery of the restarted process that took it
    first); what started after it runs under a live delivery of the restarted process. Its lease-end wake, a restart
    wake sent later, would only have tried those live steps again (``taken_over``)."""
    if message.wake == RESTART_WAKE:
        return
    leased = [s for s in steps if held_elsewhere(s, None, now) and s.lease_until is not None
              and f"lease:{s.id}:{s.attempt}" not in queued]
    if not leased:
        return
    soonest = min(leased, key=lambda s: s.lease_until or now)
    assert soonest.lease_until is not None
    delay = max(1, math.ceil((soonest.lease_until - now).total_seconds()))
    again = FlowMessage(message.run_id, message.workflow_name, wake=message.wake, deployment=message.deployment)
    await world.queue(queue_name_for(message.workflow_name), again.to_payload(),
                      idempotency_key=f"{message.run_id}:lease:{soonest.id}:{soonest.attempt}",
                      delay_seconds=delay)
    queued.add(f"lease:{soonest.id}:{soonest.attempt}")


def resting_due(execution: WorkflowExecution, now: datetime,
                world_watch: WatchAPI | None = None) -> tuple[bool, datetime | None]:
    """(rests, due): whether nothing of the run is in flight (no step queued, running or due to retry), and if
    so its exact due (``world.watch.timer_due``: its soonest timer plus the horizon, or before a timer beyond the
    queue's reach, which has no message). A child call counts as a check (``child_runs.child_check_times``): its
    report may be lost; and the run is due at the end of its lifetime at the latest (``world/rules/lifetime.py``),
    when a run still running is ended: a run on hooks alone is due then, and no sooner."""
    steps = execution.pending_steps()
    if any(s.started or s.retry_after is None or s.retry_after <= now for s in steps):
        return False, None
    timers = [w.resume_at for w in execution.pending_waits()] + [s.retry_after for s in steps if s.retry_after]
    reach = None if world_watch is None else world_watch.reach_seconds
    checks = child_check_times(execution, now)
    if execution.log:  # (its lifetime's end: a check, so a run on hooks alone is woken to end it then)
        created = execution.log[0]
        checks = [*checks, lifetime_end(created.created_at, context_of(created.event_data)) - horizon()]  # (due: the
        # end itself, not a horizon after it: no message is late there, and the end must come before any expiry)
    return True, timer_due(timers, now, reach, checks=checks)


def last_commit_due(events: Sequence[Event]) -> str | None:
    """The due key the World left after the log's last commit (the trailing events written at one moment):
    ``world.watch.commit_due`` applied as the World applied it."""
    if not events:
        return None
    at = events[-1].created_at
    tail = list(itertools.takewhile(lambda e: e.created_at == at, reversed(events)))  # (not the whole log: it
    # ran at every suspension, and made each delivery of a long run cost its log's length)
    leases = [datetime.fromisoformat(lease) for e in tail if e.event_type == "step_started"
              and isinstance(lease := (e.event_data or {}).get("leaseUntil"), str)]
    due = commit_due(at, ends_run=False, leases=leases)
    return None if due is None else due_key(due)


async def rest(world: World, message: FlowMessage, execution: WorkflowExecution, now: datetime, *,
               due: datetime | None = None, resting: bool | None = None) -> None:
    """Leave the run's exact due on its head, if the flow suspends with nothing in flight and the due its last
    commit left (``last_commit_due``) is not that already; a wake always sets it (the watchdog moved it). One
    conditional write, refused harmlessly if the log moved meanwhile (the newer write's due stands)."""
    api = world.watch
    if api is None:
        return
    if resting is None:
        resting, due = resting_due(execution, now, api)
    if not resting:
        return
    wanted = None if due is None else due_key(due)
    if not message.wake and wanted == last_commit_due(execution.log):
        return
    try:
        await api.correct(message.run_id, due, seq=len(execution.log))
    except Exception as error:  # best effort: a wrong due costs one wake of the watchdog, never a run
        log.info("run %s: setting its due failed (%s)", message.run_id, type(error).__name__)
