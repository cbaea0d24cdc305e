"""``Worker.execute``: one queue delivery, flow or step, within a wall-clock budget.

The Lambda handler and the local poller both call this; they differ only in where the deadline comes from
and how they acknowledge. The return value says what to do with the delivery: acknowledge it, or have it
redelivered after some seconds. An exception means "retry this delivery".
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

from .._deployments.pins import RUNNING_ON, Running
from ..authoring.definitions import REGISTRY, Registry
from ..durable.class_paths import kept_modules
from ..settings import SETTINGS
from ..world.clock import clock_of
from ..world.messages import FlowMessage, queue_name_for
from ..world.protocol import World
from ..world.queue import flow_function_timeout_seconds
from ..world.rules.leases import DELIVERY_MARGIN_SECONDS
from ..world.watch import beyond_reach
from .inline_loop import Flow, FlowSettings, FlowStats
from .step_limits import retried
from .step_runner import run_step

DEFAULT_MARGIN_SECONDS = DELIVERY_MARGIN_SECONDS


@dataclass
class Outcome:
    """``ack`` the delivery, or redeliver it after ``retry_after`` seconds."""

    status: str
    retry_after: float | None = None
    stats: FlowStats = field(default_factory=FlowStats)

    @property
    def ack(self) -> bool:
        return self.retry_after is None


def budget_deadline(remaining_ms: float | None, *, margin: float = DEFAULT_MARGIN_SECONDS) -> float:
    """When to stop looping: ``AWSWORLD_FLOW_BUDGET_MS`` if set, else the invocation's remaining time less a
    margin (enough to write a continuation), else the flow function's timeout less it (110 s by default)."""
    configured = SETTINGS.flow_budget_ms
    if configured is not None:
        seconds = configured / 1000
    else:
        if remaining_ms is None:
            remaining_ms = flow_function_timeout_seconds() * 1000
        seconds = max(1.0, remaining_ms / 1000 - margin)
    return time.monotonic() + seconds


class Worker:
    def __init__(self, world: World, registry: Registry | None = None, *, max_events: int | None = None,
                 deployment: str | None = None) -> None:
        """``deployment``: which deployment this worker's code (``registry``) is; its runs are pinned to it and
        it runs no delivery of a run pinned elsewhere (``deployments``). None: no pinning (one code for all)."""
        self.world = world
        self.registry = registry or REGISTRY
        limit = max_events or SETTINGS.max_events_per_run
        self.settings = FlowSettings(max_events=limit, deployment=deployment)

    @property
    def deployment(self) -> str | None:
        return self.settings.deployment

    async def execute(self, payload: Any, *, deadline: float, message_id: str | None = None,
                      attempt: int = 1, sent_at: datetime | None = None) -> Outcome:
        """Handle one delivery. ``message_id`` (stable across redeliveries) lets a redelivered flow re-run the
        steps its earlier delivery started inline and never finished; ``attempt`` (``Delivery.attempt``) > 1 says
        a delivery under that id came before (``step_runner.attempt_step``'s ``redelivered``). ``payload`` may be
        the message parsed already (``FlowMessage``): the delivery parses it once, to name the run it logs.
        ``sent_at``: when the message was sent (``Delivery.created_at``), which a restart's wake takes over by
        (``recovery.taken_over``)."""
        message = payload if isinstance(payload, FlowMessage) else FlowMessage.from_payload(payload)
        token = RUNNING_ON.set(Running(self.settings.deployment, self.registry))  # (a child's pin: ``child_pin``)
        try:
            with kept_modules(self.registry.class_modules):  # a kept version's values are of its own classes (dev)
                return await self._execute(message, deadline, message_id, attempt, sent_at)
        finally:
            RUNNING_ON.reset(token)

    async def _execute(self, message: FlowMessage, deadline: float, message_id: str | None, attempt: int,
                       sent_at: datetime | None) -> Outcome:
        if message.step_id:
            return await self._step(message, deadline, message_id, redelivered=attempt > 1)
        flow = Flow(self.world, self.registry, message, deadline, self.settings, message_id=message_id,
                    sent_at=sent_at, redelivered=attempt > 1)
        status = await flow.run()
        return Outcome(status, retry_after=flow.redeliver_after, stats=flow.stats)

    async def _step(self, message: FlowMessage, deadline: float, message_id: str | None, *,
                    redelivered: bool) -> Outcome:
        assert message.step_id and message.step_name
        outcome = await run_step(self.world, self.registry, message.run_id, message.step_id, message.step_name,
                                 owner=message_id, deadline=deadline, message=message, redelivered=redelivered)
        if outcome.status == "waiting":
            return Outcome("limit-wait")  # its slot's or token's message brings it back (``step_limits``)
        if outcome.status == "too-early":
            return Outcome("too-early", retry_after=max(1.0, outcome.retry_after))
        if outcome.status == "gone":
            return Outcome("gone")
        if outcome.status == "running-elsewhere":
            return Outcome("duplicate")  # a second message for a step another delivery runs: it records the end
        if outcome.status == "cancelled":
            return Outcome("step-cancelled")  # stopped: the flow that recorded the cancellation goes on by itself
        if outcome.status == "retry":
            await retry_step_message(self.world, message, outcome.retry_after, deployment=self.deployment)
            return Outcome("retry-queued")
        if outcome.status in ("completed", "failed") and outcome.open_steps not in (None, 0) \
                and outcome.status not in message.wakes_on:
            return Outcome(f"step-{outcome.status}")  # another step of the run is still open: its end continues
        # The last open step of the run finished here, or an end the workflow reacts to at once (a batch's item:
        # ``authoring.runtime.wakes_on``): continue the workflow inline, no queue round trip; or, when a flow of
        # the run works in this worker already, hand it the wake (``flow_state.HandedWakes``): it reads the end.
        if outcome.status in ("completed", "failed") and self.settings.wakes.hand(message.run_id):
            return Outcome(f"step-{outcome.status}-handed")
        found_finished = message.step_id if outcome.status == "finished-already" else None
        flow = Flow(self.world, self.registry, FlowMessage(message.run_id, message.workflow_name), deadline,
                    self.settings, message_id=message_id, after_finished_step=found_finished,
                    redelivered=redelivered)
        status = await flow.run()
        return Outcome(f"step-then-{status}", retry_after=flow.redeliver_after, stats=flow.stats)


async def retry_step_message(world: World, message: FlowMessage, delay: float, *, deployment: str | None) -> None:
    """Queue a step's next attempt, addressed to ``deployment``, the one that ran this attempt (None: no pinning,
    the address it came with): a message handed over to where an upgrade moved its run
    (``_deployments.routing.handed_step_target``) came addressed to the old one, which would be handed it again
    for every attempt. Without a dedup key. A duplicate (this send repeated after a crash, or a
    flow's keyed dispatch of the same due attempt) is harmless: step_started from a second delivery while the
    step runs under the first one's message id is refused (``running-elsewhere``: acknowledged as a duplicate),
    before its retry time it is too early (it comes back later), and once the step has ended it finds it
    finished (the flow goes on, and re-queues unstarted steps only with their keys). So no step body runs twice
    at once and no second outcome is recorded; at most one extra delivery per duplicate, which never
    multiplies. Step dispatches keep their keys (see ``Flow._dispatch``)."""
    if beyond_reach(world.watch, delay):
        return  # further than one message carries: the run's due brings a wake before it (``flow_messages``)
    due = clock_of(world).now() + timedelta(seconds=delay)
    if deployment is not None:
        message = replace(message, deployment=deployment, reroutes=0)
    await world.queue(queue_name_for(message.workflow_name), retried(message, due).to_payload(),
                      delay_seconds=math.ceil(delay))
