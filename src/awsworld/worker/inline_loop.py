"""The inline loop of one flow delivery (``shared/spec/inline-execution.md``).

Replay, then on suspension: declare new steps/waits (one batched write) and hooks, dispose hooks, complete
waits that are due, queue every runnable step but one with one ``queue_batch``, queue the soonest wait as a
delayed continuation, run the one owned step inline, and loop — until the run ends, only waits/hooks remain,
or the budget is spent (then a continuation is queued). Every write of the flow is in-band, fenced with the
run's in-band count: a flow whose write another flow superseded queues one follow-up delivery and stops, unless
it holds steps (claimed or started by this message), which it runs after replaying the newer log.

The loop's other jobs are in the classes it builds on: the state and the log (``flow_state``), the
provisional-outcome optimisation (``provisional``), the writes of a suspension (``declarations``), and the
run's end and divergence policy (``endings``).
"""

from __future__ import annotations

import logging
import math
import time

from ..authoring.errors import (
    EVENT_LIMIT_EXCEEDED,
    ReplayDivergenceError,
)
from ..engine.execution import WorkflowExecution
from ..engine.ops import StepOp
from ..engine.parking import parked_in_log
from ..world.clock import clock_of
from ..world.errors import InBandSupersededError, RunGoneError
from ..world.messages import queue_name_for
from .child_runs import on_run_end, report_ended_children
from .endings import Endings
from .flow_state import TERMINAL, FlowSettings, FlowStats
from .recovery import dispatch_key, rest, wake_at_lease_end
from .step_runner import StepEnd, StepOutcome, attempt_step, record_end

log = logging.getLogger("awsworld.flow")

__all__ = ["Flow", "FlowSettings", "FlowStats"]


class Flow(Endings):
    """One flow delivery: ``await Flow(world, registry, message, deadline).run()``."""

    # ------------------------------------------------------------------ entry

    async def run(self) -> str:
        try:
            status = await self._run_holding_steps()
        except InBandSupersededError as superseded:
            # Another flow wrote first: one follow-up delivery (shared by every flow refused by that write).
            await self._queue_flow(f"superseded:{superseded.seq_in_band}")
            return "superseded"
        except RunGoneError:
            status = "gone"
        finally:
            if self.execution is not None:
                self.execution.close()
        if status in ("completed", "failed", "gone"):  # child workflows: report to a parent, cancel children
            await on_run_end(self.world, self.run_id, self.execution.log if self.execution else self.ended_log)
        return status

    async def _run_holding_steps(self) -> str:
        """``_run``, replayed again from a fresh log whenever another flow's write supersedes this one while this
        delivery holds steps: no other delivery may run them while their lease runs, and a step it claimed
        (``step_started`` written, body not run yet) must run here, in that attempt. Handing them to this
        message's redelivery, as the loop once did, started each claimed step again as a new attempt whose
        predecessor never ran (a phantom "attempt 2", a second later, with no failure recorded: issue 31 item 8)
        and, since a cut-off attempt counts against ``max_attempts``, would spend a retry on nothing."""
        while True:
            try:
                return await self._run()
            except InBandSupersededError:
                if not self._holds_steps():
                    raise
                log.info("run %s: another flow wrote first; replaying its log to run the steps this delivery holds",
                         self.run_id)
                self._forget_replay()

    def _forget_replay(self) -> None:
        """Drop the replay (and what this delivery meant to run inline but never started: another flow may have
        queued it) so the next ``_run`` loads the log afresh; the claims, the messages sent and the refusals
        stay."""
        if self.execution is not None:
            self.execution.close()
        self.execution, self.log_cursor, self.seq_in_band = None, None, 0
        self.owned.clear()

    async def _run(self) -> str:
        log = await self._load_all()
        if any(e.event_type in TERMINAL for e in log):
            self.ended_log = log
            return "gone"
        definition = self.registry.workflow(self.message.workflow_name)
        created = (log[0].event_data or {}) if log else {}
        seed = str(((created.get("executionContext") or {}).get("seed")) or self.run_id)
        execution = self.execution = WorkflowExecution(self.run_id, definition, self.registry, seed)
        execution.append(log)
        self.parked = parked_in_log(log)
        if not any(e.event_type == "run_started" for e in log):
            await self._write({"eventType": "run_started"})
        try:
            return await self._loop()
        except Exception:
            if self.pending is not None:  # a consumed step result is never lost: record it before giving up
                pending = self._take_pending()
                await self._recorded(pending, await record_end(self.world, self.run_id, pending.end))
            raise

    async def _loop(self) -> str:
        while True:
            execution = self.execution
            assert execution is not None
            self.stats.iterations += 1
            if self.stats.iterations > 1 and time.monotonic() >= self.deadline and not self.claimed:
                # (Never before the first iteration: every delivery makes progress, however late it starts; never
                # with a claimed step, whose attempt is started and must run here, as an inline step started just
                # before the deadline does.)
                # The budget is spent: this same message comes back at once and goes on where we stop. Being
                # the same message, it may run the steps this delivery started (a continuation with a new id
                # could not, and a key derived from the log could be this message's own and send nothing).
                if self.pending is not None:
                    await self._settle()  # the step's outcome, on its own: the workflow has not seen it yet
                self.redeliver_after = 0.0
                return "continued"
            try:
                execution.advance()
            except ReplayDivergenceError as divergence:
                if self.pending is not None:
                    await self._settle()
                return await self._diverged(divergence)
            if self.pending is not None and self._settle_first(execution) and not await self._settle():
                continue  # the outcome was recorded the old way: replay from the log
            if execution.terminal:
                return "gone"
            if self.parked is not None and self.pending is None:  # (the first iteration: no outcome is held)
                await self._unpark()
            if execution.pending_markers:
                await self._record_markers(execution)  # before anything else this flow writes
            if len(execution.log) >= self.settings.max_events:
                return await self._fail({"message": f"the run reached its limit of {self.settings.max_events} "
                                                    "events (AWSWORLD_MAX_EVENTS_PER_RUN)", "name": "EventLimit"},
                                        EVENT_LIMIT_EXCEEDED)
            if await self._cancel_steps(execution):
                continue  # (before the run's end: every step the workflow cancelled has one end in the log)
            if execution.done:
                return await self._finish(execution)
            if await self._declare(execution) or await self._dispose(execution) or await self._due_waits(execution):
                continue
            inline = await self._dispatch(execution)
            if inline is None:
                await self._suspend(execution)
                return "suspended"
            await self._run_inline(inline)

    async def _dispatch(self, execution: WorkflowExecution) -> StepOp | None:
        assert self.pending is None
        now = clock_of(self.world).now()
        runnable = self._runnable(execution)
        inline = (next((s for s in runnable if s.id in self.claimed), None)
                  or next((s for s in runnable if s.id in self.owned or self._mine(s)), None)
                  or next((s for s in runnable if s.poll is not None), None)  # a poll runs in a flow only
                  or next((s for s in runnable if self._taken_over(s)), None))
        to_queue = [s for s in runnable if s is not inline and (not s.started or self._taken_over(s))
                    and s.poll is None and f"{s.id}:{s.attempt}" not in self.queued]
        if to_queue:
            # Keyed, unlike a retry: every flow that replays the run re-queues each declared step not started
            # yet (that is what recovers a step whose message a crash never sent), and a duplicate that finds its
            # step finished continues the flow, which would re-queue the rest again; the key stops that cascade
            # while the first message is live.
            results = await self.world.queue_batch(queue_name_for(self.message.workflow_name), [
                {"payload": self._step_message(s).to_payload(), "idempotency_key": dispatch_key(self.run_id, s, now)}
                for s in to_queue
            ])
            failed = [r.error for r in results if not r.ok]
            if failed:
                raise RuntimeError(f"queueing {len(failed)} step message(s) failed: {failed[0]}")
            self.queued.update(f"{s.id}:{s.attempt}" for s in to_queue)
            # A queued step belongs to its message now: running it inline too would run its body twice.
            self.owned.difference_update(s.id for s in to_queue)
            self.stats.queued_steps += len(to_queue)
        for poll in execution.pending_steps():  # a poll between polls: wake a flow when the next one is due
            if poll.poll is not None and not poll.started and poll.retry_after is not None \
                    and poll.retry_after > now:
                await self._queue_poll(poll, poll.attempt, (poll.retry_after - now).total_seconds())
        waits = [w for w in execution.pending_waits() if w.resume_at > now and w.id not in self.queued]
        if waits:
            soonest = min(waits, key=lambda w: w.resume_at)
            delay = max(0, math.ceil((soonest.resume_at - now).total_seconds()))
            await self.world.queue(queue_name_for(self.message.workflow_name), self._flow_message().to_payload(),
                                   idempotency_key=f"{self.run_id}:{soonest.id}", delay_seconds=delay)
            self.queued.add(soonest.id)
        return inline

    async def _run_inline(self, step: StepOp) -> None:
        self.stats.inline_steps += 1
        self.owned.discard(step.id)
        claimed = self.claimed.pop(step.id, None)
        attempt = await attempt_step(self.world, self.registry, self.run_id, step.id, step.definition.name,
                                     in_band=self.seq_in_band, on_in_band=self._set_in_band, owner=self.message_id,
                                     claimed=claimed, call_input=step.input, poll=step.poll,
                                     watch=lambda: self._watch_inline(step), inline=True, deadline=self.deadline)
        if step.done or step.future.cancelled():
            # The workflow cancelled it while it ran (or another flow recorded its end): whatever the attempt
            # ended with is dropped, so the step's one end is the cancellation (written by the loop, _cancel_steps).
            await self._append(attempt.events)
            if isinstance(attempt, StepOutcome) and attempt.status == "gone":
                raise RunGoneError(f"run {self.run_id} ended")
            return
        if isinstance(attempt, StepEnd):
            await self._append(attempt.events)
            if self._alone(step):
                self._consume_first(step, attempt)  # written with the flow's next write
                return
            outcome = await record_end(self.world, self.run_id, attempt)
        else:
            outcome = attempt
        await self._append(outcome.events)
        if outcome.status == "gone":
            raise RunGoneError(f"run {self.run_id} ended")
        await self._step_ended(step, outcome)

    async def _step_ended(self, step: StepOp, outcome: StepOutcome) -> None:
        if outcome.status == "retry":
            await self._queue_step(step, outcome.attempt, outcome.retry_after)
        elif outcome.status in ("finished-already", "running-elsewhere"):
            if outcome.status == "running-elsewhere":
                self.refused.add(step.id)  # a take-over the World refused (its lease had not passed there)
            await self._reload_tail()

    async def _suspend(self, execution: WorkflowExecution) -> None:
        """Nothing more to do now: a wake makes sure steps leased elsewhere are looked at again when their lease
        ends, and a run at rest gets its exact due (``recovery``)."""
        now = clock_of(self.world).now()
        if self.message.wake:
            await wake_at_lease_end(self.world, self.message, execution.pending_steps(), now, self.queued)
            await report_ended_children(self.world, execution)
        await rest(self.world, self.message, execution, now)

    async def _watch_inline(self, step: StepOp) -> bool:
        """Asked every ``check_seconds()`` while an inline step's body runs: whether to stop it, because the
        workflow cancelled it or its end is in the log. While the step is not the run's only open operation,
        another writer may record something the workflow reacts to (a queued step's end, a wake-up handled by
        another delivery): read the log's tail and advance the workflow, so a ``first_successful`` whose winner
        ended elsewhere returns (and cancels this loser) without waiting for this body. Never raises: a failed
        read is retried next time, a failure of the replay is the loop's to handle once the body has ended (it
        is sticky, see ``WorkflowExecution.advance``)."""
        execution = self.execution
        assert execution is not None
        if not step.done and not step.future.cancelled() and not self._alone(step):
            try:
                await self._reload_tail()
                execution.advance()
            except Exception as error:
                log.info("run %s: watching %s while it ran failed (%s)", self.run_id, step.id, type(error).__name__)
        return step.done or step.future.cancelled()
