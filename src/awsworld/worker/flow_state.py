"""The state one flow delivery carries, and its plainest moves: reading and appending the run's log (every write
in-band, fenced with the run's in-band count), asking which steps are this delivery's to run, and queueing the
messages it hands work to (a step, a poll, its own continuation).

Apart from the loop (``inline_loop``) so that each of the loop's jobs (provisional outcomes, declarations,
endings) builds on one shared base, in one direction: ``FlowState`` <- ``provisional`` <- ``declarations`` <-
``endings`` <- ``inline_loop.Flow``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from ..authoring.definitions import Registry
from ..engine.execution import LogGapError, WorkflowExecution
from ..engine.ops import StepOp
from ..world.clock import clock_of
from ..world.events import Event
from ..world.messages import FlowMessage, queue_name_for
from ..world.protocol import World
from .recovery import taken_over
from .step_runner import StepEnd

MAX_DIVERGENT_RECOVERIES = 3

log = logging.getLogger("awsworld.flow")
BATCH = 39  # declarations per create_batch: with a born-running pair that is the World's cap of 40 events
TERMINAL = frozenset({"run_completed", "run_failed", "run_cancelled"})

@dataclass
class FlowStats:
    iterations: int = 0
    inline_steps: int = 0
    queued_steps: int = 0
    replays: int = 0
    ends_with_next: int = 0  # inline step outcomes shown to the workflow first, then written by the flow's next write
    fallbacks: int = 0  # such writes that failed: the outcome was recorded the old way



@dataclass
class FlowSettings:
    max_events: int = 10_000



@dataclass
class PendingOutcome:
    """An inline step's outcome the workflow has consumed (a provisional event at slot ``seq + 1``, stamped
    ``at``) and the log does not hold yet: the flow's next write carries it, landing right after ``seq``
    events."""

    step: StepOp
    end: StepEnd
    seq: int
    at: datetime



@dataclass
class FlowState:
    """What a flow delivery knows: its message, its budget, the execution it replays and what it holds."""

    world: World
    registry: Registry
    message: FlowMessage
    deadline: float  # time.monotonic() by which to hand over to a continuation
    settings: FlowSettings = field(default_factory=FlowSettings)
    stats: FlowStats = field(default_factory=FlowStats)
    log_cursor: str | None = None
    seq_in_band: int = 0
    execution: WorkflowExecution | None = None
    message_id: str | None = None  # this delivery's id: recorded as the owner of steps it starts
    owned: set[str] = field(default_factory=set)
    queued: set[str] = field(default_factory=set)
    claimed: dict[str, Any] = field(default_factory=dict)  # steps declared born running, to run inline
    refused: set[str] = field(default_factory=set)  # steps whose take-over the World refused (still leased)
    pending: PendingOutcome | None = None
    redeliver_after: float | None = None
    """Set when this delivery must come back as itself (same message id) rather than be acknowledged: it
    holds steps it started and did not finish, which only a delivery with its id may run again."""
    ended_log: list[Event] = field(default_factory=list[Event])  # the log of a run found ended (on_run_end)

    @property
    def run_id(self) -> str:
        return self.message.run_id

    # ------------------------------------------------------------------ the log

    async def _load_all(self) -> list[Event]:
        events: list[Event] = []
        cursor = self.log_cursor
        first = True
        while True:
            page = await self.world.events.list(self.run_id, cursor=cursor, resolve_data="skip-step-inputs")
            if first and page.snapshot is not None and self.log_cursor is None:
                self.seq_in_band = page.snapshot.seq_in_band
            first = False
            events.extend(page.data)
            cursor = page.cursor or cursor
            if not page.has_more:
                break
        self.log_cursor = cursor
        return events

    async def _reload_tail(self) -> None:
        assert self.execution is not None
        self.execution.append(await self._load_all())

    async def _append(self, events: list[Event]) -> None:
        assert self.execution is not None
        try:
            self.execution.append(sorted(events, key=lambda e: e.slot))
        except LogGapError:
            await self._reload_tail()

    async def _write(self, event: dict[str, Any]) -> None:
        assert self.execution is not None
        result = await self.world.events.create(self.run_id, event, event_count=len(self.execution.log),
                                                in_band=True, expected_seq_in_band=self.seq_in_band,
                                                resolve_data="skip-step-inputs")
        if result.seq_in_band is not None:
            self.seq_in_band = result.seq_in_band
        await self._append([*result.events, *([result.event] if result.event else [])])

    def _set_in_band(self, count: int) -> None:
        self.seq_in_band = count

    def _holds_steps(self) -> bool:
        """Steps this delivery started (or an earlier delivery of this message did) and has not finished."""
        if self.claimed:
            return True
        return self.execution is not None and any(self._mine(s) for s in self.execution.pending_steps())

    def _mine(self, step: StepOp) -> bool:
        """Started by an earlier delivery of this same message (which stopped mid-step): ours to run again."""
        return bool(self.message_id) and step.started and step.owner == self.message_id

    def _taken_over(self, step: StepOp) -> bool:
        """Started by another delivery whose lease has passed (its message is lost): ours to run (``recovery``)."""
        return (step.id not in self.claimed and step.id not in self.refused
                and taken_over(step, self.message, self.message_id, clock_of(self.world).now()))

    def _runnable(self, execution: WorkflowExecution) -> list[StepOp]:
        now = clock_of(self.world).now()
        return [s for s in execution.pending_steps()
                if (not s.started or self._mine(s) or s.id in self.claimed or self._taken_over(s))
                and (s.retry_after is None or s.retry_after <= now)]

    def _has_inline_work(self, execution: WorkflowExecution) -> bool:
        return any(s.id in self.owned or s.id in self.claimed or self._mine(s) or self._taken_over(s)
                   for s in self._runnable(execution))

    # ------------------------------------------------------------------ messages

    def _flow_message(self) -> FlowMessage:
        return FlowMessage(self.run_id, self.message.workflow_name)

    def _step_message(self, step: StepOp) -> FlowMessage:
        return FlowMessage(self.run_id, self.message.workflow_name, step.id, step.definition.name,
                           run_context=self._run_context(), wakes_on=tuple(sorted(step.wakes_on)))

    def _run_context(self) -> dict[str, Any]:
        assert self.execution is not None and self.execution.log
        first = self.execution.log[0]
        return {"specVersion": first.spec_version, "startedAt": first.created_at.isoformat(),
                "rootRunId": self.run_id}

    async def _queue_flow(self, key: str) -> None:
        await self.world.queue(queue_name_for(self.message.workflow_name), self._flow_message().to_payload(),
                               idempotency_key=f"{self.run_id}:{key}")

    async def _queue_step(self, step: StepOp, attempt: int, delay: float) -> None:
        """A step's retry, sent without a dedup key (why that is harmless: ``runtime.retry_step_message``)."""
        if step.poll is not None:
            return await self._queue_poll(step, attempt, delay)
        await self.world.queue(queue_name_for(self.message.workflow_name), self._step_message(step).to_payload(),
                               delay_seconds=math.ceil(delay))
        self.queued.add(f"{step.id}:{attempt}")


    async def _queue_poll(self, step: StepOp, attempt: int, delay: float) -> None:
        """A poll's next attempt: a delayed continuation of the flow (the predicate lives in the workflow, so a
        poll never runs from a step message), keyed per poll so every flow that replays the run sends one."""
        key = f"poll:{step.id}:{attempt}"
        if key in self.queued:
            return
        await self.world.queue(queue_name_for(self.message.workflow_name), self._flow_message().to_payload(),
                               idempotency_key=f"{self.run_id}:{key}", delay_seconds=math.ceil(delay))
        self.queued.add(key)
