"""One round trip per serial inline step: the provisional-outcome optimisation of the flow.

When the inline step is the only open operation another writer could finish (no other open step, no live hook,
no pending wait), its outcome is not written when the body returns. The flow appends it to the execution as a
provisional event at the next slot, stamped with the time it picks (so ``now()`` after it is what the log will
say), advances the workflow, and writes the outcome together with the declarations the workflow made after
seeing it: one atomic, stamped ``create_batch`` that must land right after the events the workflow was shown
(``expect_seq``). If the workflow ends, or does anything else first (a patch marker, hooks only), or the budget
is spent, the outcome is written on its own the same way. Any failure of that write (the log moved, another
flow wrote first, the end is recorded already, a value is too large, no answer) drops the execution that
consumed it, records the outcome the old way (``step_runner.record_end``) and replays from the log, or stops
as a superseded flow does.
"""

from __future__ import annotations

import logging
from collections.abc import Coroutine
from typing import Any

from .._engine.execution import WorkflowExecution
from .._engine.ops import StepOp, WaitOp
from ..authoring.definitions import Registry
from ..world.clock import clock_of
from ..world.errors import InBandSupersededError
from ..world.events import BatchEventOutcome, Event
from ..world.ids import slot_to_event_id
from ..world.shared.answers import build
from .flow_messages import FlowMessages
from .flow_state import FlowLog, FlowSettings, FlowStats, PendingOutcome
from .step_runner import StepEnd, StepOutcome, record_end

log = logging.getLogger("awsworld.flow")


class ProvisionalOutcomes:
    """Holds one inline step's outcome (``pending``) until the flow's next write."""

    def __init__(self, log: FlowLog, messages: FlowMessages, registry: Registry, settings: FlowSettings,
                 stats: FlowStats) -> None:
        self.log = log
        self.messages = messages
        self.registry = registry
        self.settings = settings
        self.stats = stats
        self.pending: PendingOutcome | None = None

    def alone(self, step: StepOp) -> bool:
        """Nothing but this step's end may land next: it is the run's only open operation another writer
        could finish (any other writer, a client's attr_set say, only costs the fallback)."""
        execution = self.log.execution
        assert execution is not None
        return ([s.id for s in execution.pending_steps()] == [step.id] and not execution.pending_waits()
                and not execution.live_hooks() and not execution.new_ops() and not execution.pending_markers)

    def consume_first(self, step: StepOp, end: StepEnd) -> None:
        """Show the workflow the outcome before it is written: a provisional event at the next slot, stamped
        with the time its write will record."""
        execution = self.log.execution
        assert execution is not None
        at = clock_of(self.log.world).now()
        seq = len(execution.log)
        # (built, not validated: every field is this flow's own value of the field's type)
        execution.append([build(Event, event_id=slot_to_event_id(seq + 1), run_id=self.log.run_id,
                                event_type=end.kind, correlation_id=step.id, event_data=dict(end.data),
                                created_at=at)])
        self.pending = PendingOutcome(step, end, seq, at)

    def take(self) -> PendingOutcome:
        pending, self.pending = self.pending, None
        assert pending is not None
        return pending

    def settle_first(self, execution: WorkflowExecution) -> bool:
        """Whether the pending outcome is written on its own now: unless the workflow declared steps or waits
        (the outcome rides with them), anything the flow does next must find it in the log."""
        return (execution.terminal is not None or bool(execution.pending_markers) or execution.done
                or bool(execution.cancelled_steps()) or len(execution.log) >= self.settings.max_events
                or not any(isinstance(op, StepOp | WaitOp) for op in execution.new_ops()))

    async def settle(self) -> bool:
        """Write the pending outcome on its own (a one-event stamped batch at its position). False when that
        failed and the outcome was recorded the old way instead (the execution is replaced)."""
        pending = self.take()
        try:
            await self.write_with_end(pending, [])
        except Exception as error:  # any refusal, or no answer: the old way decides (see fall_back)
            await self.fall_back(pending, error)
            return False
        self.rode_with_next()
        await self.recorded(pending, written(pending.end))
        return True

    def write_with_end(self, pending: PendingOutcome, requests: list[dict[str, Any]]
                       ) -> Coroutine[Any, Any, list[BatchEventOutcome]]:
        """The write of the outcome and ``requests``: all or nothing, stamped with the time the workflow was shown,
        and only right after the events it was shown. (The write itself, not a coroutine around it: it is on every
        serial step's path. Its caller counts it once it landed: ``rode_with_next``.)"""
        return self.log.write_batch([pending.end.request, *requests], atomic=True, stamp=pending.at,
                                    expect_seq=pending.seq)

    def rode_with_next(self) -> None:
        self.stats.ends_with_next += 1

    async def recorded(self, pending: PendingOutcome, outcome: StepOutcome) -> None:
        """After a consumed outcome is in the log, however it got there: a retry is queued."""
        if outcome.status == "retry":
            await self.messages.queue_step(pending.step, outcome.attempt, outcome.retry_after)

    async def record_now(self) -> None:
        """The flow is giving up with an outcome held: record it the old way (a consumed result is never lost)."""
        pending = self.take()
        await self.recorded(pending, await record_end(self.log.world, self.log.run_id, pending.end))

    async def fall_back(self, pending: PendingOutcome, error: Exception) -> None:
        """The write carrying a consumed outcome failed (the log moved, another flow wrote first, the step's
        end is recorded already, a value is too large, or no answer came, so it may even have landed). The
        execution showed the workflow a log that may never be: drop it, record the outcome the old way (which
        answers each of those cases) and replay from the log; a superseded flow stops as it always does."""
        self.stats.fallbacks += 1
        log.info("run %s: the outcome of %s did not ride in the next write (%s); recording it on its own",
                 self.log.run_id, pending.step.id, type(error).__name__)
        outcome = await record_end(self.log.world, self.log.run_id, pending.end)
        old = self.log.replay()
        fresh = WorkflowExecution(self.log.run_id, old.definition, self.registry, old.seed,
                                  max_value_bytes=old.max_value_bytes)
        fresh.append(old.log[:pending.seq])
        old.close()
        self.log.execution = fresh
        await self.recorded(pending, outcome)
        if isinstance(error, InBandSupersededError):
            raise error
        await self.log.reload_tail()


def written(end: StepEnd) -> StepOutcome:
    return StepOutcome(end.status, [], retry_after=end.retry_after, attempt=end.attempt)
