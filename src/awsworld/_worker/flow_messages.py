"""The messages a flow delivery hands work to: a step's (its retry), a poll's next attempt and the flow's own
continuation, each remembered (``queued``) so a delivery sends one per step attempt, poll and wait.

A delayed one further away than the World's queue carries in one message (``world.watch.beyond_reach``: SQS's
15 minutes) is not sent: it would hop every 15 minutes until due. The run rests with its due before that timer
(``recovery.resting_due``), and the watchdog's wake sends it once it is within reach."""

from __future__ import annotations

import math
from datetime import datetime, timedelta
from typing import Any

from .._engine.ops import StepOp
from .._engine.parking import park_key
from ..world.clock import clock_of
from ..world.messages import FlowMessage, queue_name_for
from ..world.protocol import World
from ..world.watch import beyond_reach, park_due
from .flow_state import FlowLog
from .run_limits import recorded_priority
from .step_limits import DUE_FIELD, PRIORITY_FIELD


class FlowMessages:
    def __init__(self, world: World, message: FlowMessage, log: FlowLog) -> None:
        self.world = world
        self.message = message
        self.log = log
        self.queued: set[str] = set()  # ``<step id>:<attempt>``, ``poll:<step id>:<attempt>``, a wait's id
        self._context: dict[str, Any] | None = None  # the run's, from its run_created: the same for every step

    @property
    def queue_name(self) -> str:
        return queue_name_for(self.message.workflow_name)

    def flow_message(self) -> FlowMessage:
        return FlowMessage(self.message.run_id, self.message.workflow_name, deployment=self.message.deployment)

    def step_message(self, step: StepOp, *, due: datetime | None = None) -> FlowMessage:
        """(Addressed, like the flow's own messages, to the run's deployment: ``_deployments.routing``.) It says
        since when the step has been due to start (``due``; else its retry's time or its declaration, now for one
        being declared): a limit's wait reads it (``step_limits.DUE_FIELD``)."""
        if self._context is None:
            self._context = self._run_context()
        context = dict(self._context)
        context[DUE_FIELD] = (due or step.retry_after or step.declared_at or clock_of(self.world).now()).isoformat()
        return FlowMessage(self.message.run_id, self.message.workflow_name, step.id, step.definition.name,
                           run_context=context,
                           wakes_on=tuple(sorted(step.wakes_on)) if step.wakes_on else (),
                           deployment=self.message.deployment)

    def _run_context(self) -> dict[str, Any]:
        """What every step message of the run carries (read once: the run's first event never changes)."""
        first = self.log.replay().log[0]
        context: dict[str, Any] = {"specVersion": first.spec_version, "startedAt": first.created_at.isoformat(),
                                   "rootRunId": self.message.run_id}
        created = (first.event_data or {}).get("executionContext")
        priority = recorded_priority(created if isinstance(created, dict) else None)
        if priority:
            context[PRIORITY_FIELD] = priority  # its steps' waits for a slot inherit it (``step_limits``)
        return context

    async def queue_flow(self, key: str, *, delay_seconds: int | None = None) -> None:
        """The flow's continuation, keyed (``<run id>:<key>``): every flow that sends the same key sends one. None
        beyond reach (the module's docstring)."""
        if beyond_reach(self.world.watch, delay_seconds or 0):
            return
        await self.world.queue(self.queue_name, self.flow_message().to_payload(),
                               idempotency_key=f"{self.message.run_id}:{key}", delay_seconds=delay_seconds)

    async def queue_step(self, step: StepOp, attempt: int, delay: float) -> None:
        """A step's retry, sent without a dedup key (why that is harmless: ``dispatch.retry_step_message``)."""
        if step.poll is not None:
            return await self.queue_poll(step, attempt, delay)
        if not beyond_reach(self.world.watch, delay):
            due = clock_of(self.world).now() + timedelta(seconds=delay)
            await self.world.queue(self.queue_name, self.step_message(step, due=due).to_payload(),
                                   delay_seconds=math.ceil(delay))
        self.queued.add(f"{step.id}:{attempt}")

    async def queue_poll(self, step: StepOp, attempt: int, delay: float) -> None:
        """A poll's next attempt: a delayed continuation of the flow (the predicate lives in the workflow, so a
        poll never runs from a step message), keyed per poll so every flow that replays the run sends one."""
        key = f"poll:{step.id}:{attempt}"
        if key in self.queued:
            return
        await self.queue_flow(key, delay_seconds=math.ceil(delay))
        self.queued.add(key)

    async def queue_retry_flow(self, step: StepOp, delay: float) -> None:
        """A flow continuation for when a step's retry is due, keyed per attempt so every wake sends one: what a
        wake leaves for a retry whose own message may be lost (``inline_loop``)."""
        key = f"retry:{step.id}:{step.attempt}"
        if key in self.queued:
            return
        await self.queue_flow(key, delay_seconds=math.ceil(delay))
        self.queued.add(key)


async def queue_come_back(world: World, message: FlowMessage, now: datetime, seconds: float) -> datetime:
    """Bring a parked run back in ``seconds`` (``AWSWORLD_PARK_SECONDS``), for both ways a run is parked (a replay
    that diverged: ``endings``; code this deployment lacks: ``delivery``); returns the due the run rests with.

    Within one queue message's reach a delayed ``message`` does, keyed per period (``_engine.parking.park_key``:
    every delivery of the run in one period sends one), and the due is a horizon past it: the watchdog wakes the
    run only if the message is lost. Beyond it (an hour, on SQS's 15 minutes: the message would hop three times,
    four deliveries an hour) no message is sent: the due is that time (``world.watch.park_due``), and the
    watchdog's wake is the redelivery, one delivery an hour."""
    if not beyond_reach(world.watch, seconds):
        await world.queue(queue_name_for(message.workflow_name), message.to_payload(),
                          idempotency_key=park_key(message.run_id, now, seconds), delay_seconds=seconds)
    return park_due(now, seconds, world.watch)
