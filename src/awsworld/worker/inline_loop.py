"""The inline loop of one flow delivery (``shared/spec/inline-execution.md``).

Replay, then on suspension: declare new steps/waits (one batched write) and hooks, dispose hooks, complete
waits that are due, queue every runnable step but one with one ``queue_batch``, queue the soonest wait as a
delayed continuation, run the one owned step inline, and loop — until the run ends, only waits/hooks remain,
or the budget is spent (then a continuation is queued). Every write of the flow is in-band, fenced with the
run's in-band count: a flow whose write another flow superseded queues one follow-up delivery and stops.

One round trip per serial inline step: when the inline step is the only open operation another writer could
finish (no other open step, no live hook, no pending wait), its outcome is not written when the body returns.
The flow appends it to the execution as a provisional event at the next slot, stamped with the time it picks
(so ``now()`` after it is what the log will say), advances the workflow, and writes the outcome together with
the declarations the workflow made after seeing it: one atomic, stamped ``create_batch`` that must land right
after the events the workflow was shown (``expect_seq``). If the workflow ends, or does anything else first
(a patch marker, hooks only), or the budget is spent, the outcome is written on its own the same way. Any
failure of that write (the log moved, another flow wrote first, the end is recorded already, a value is too
large, no answer) drops the execution that consumed it, records the outcome the old way
(``step_runner.record_end``) and replays from the log, or stops as a superseded flow does.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from ..authoring.children import on_run_end
from ..authoring.definitions import Registry
from ..authoring.errors import (
    CORRUPTED_EVENT_LOG,
    EVENT_LIMIT_EXCEEDED,
    SERIALIZATION_ERROR,
    USER_ERROR,
    VALUE_TOO_LARGE,
    ReplayDivergenceError,
    ValueTooLargeError,
    step_cancelled_error,
)
from ..client.messages import FlowMessage, queue_name_for
from ..engine import divergence as dv
from ..engine import serde
from ..engine.execution import PATCH_MARKER_PREFIX, LogGapError, WorkflowExecution
from ..engine.ops import HookOp, StepOp, WaitOp, named
from ..settings import SETTINGS
from ..world.clock import clock_of
from ..world.errors import EntityConflictError, InBandSupersededError, PayloadTooLargeError, RunGoneError
from ..world.events import BatchEventOutcome, Event
from ..world.ids import slot_to_event_id
from ..world.watch import quiet_due
from .error_shapes import log_failure, structured_error
from .recovery import dispatch_key, rest, taken_over, wake_at_lease_end
from .step_runner import StepEnd, StepOutcome, attempt_step, record_end, start_data, step_lease

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
class _Pending:
    """An inline step's outcome the workflow has consumed (a provisional event at slot ``seq + 1``, stamped
    ``at``) and the log does not hold yet: the flow's next write carries it, landing right after ``seq``
    events."""

    step: StepOp
    end: StepEnd
    seq: int
    at: datetime


@dataclass
class FlowSettings:
    max_events: int = 10_000


@dataclass
class Flow:
    world: Any
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
    pending: _Pending | None = None
    redeliver_after: float | None = None
    """Set when this delivery must come back as itself (same message id) rather than be acknowledged: it
    holds steps it started and did not finish, which only a delivery with its id may run again."""
    ended_log: list[Event] = field(default_factory=list[Event])  # the log of a run found ended (on_run_end)

    @property
    def run_id(self) -> str:
        return self.message.run_id

    # ------------------------------------------------------------------ entry

    async def run(self) -> str:
        try:
            status = await self._run()
        except InBandSupersededError as superseded:
            if self._holds_steps():
                # Our own redelivery replays the newer log and runs the steps we started: no other delivery may.
                self.redeliver_after = 1.0
                return "superseded"
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
            if self.stats.iterations > 1 and time.monotonic() >= self.deadline:
                # (Never before the first iteration: every delivery makes progress, however late it starts.)
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

    # ------------------------------------------------------------------ suspension work

    async def _declare(self, execution: WorkflowExecution) -> bool:
        new = execution.new_ops()
        if not new:
            return False
        batchable = [op for op in new if isinstance(op, StepOp | WaitOp)]
        # The first new step is declared born running (step_created + step_started in the same write) when
        # this flow will run it inline: one write instead of two.
        born = next((op for op in batchable if isinstance(op, StepOp)), None)
        if born is not None and self._has_inline_work(execution):
            born = None
        if self.pending is not None:
            # The step's outcome and the first declarations the workflow made after seeing it: one write.
            first = batchable[:BATCH - 1]
            if not await self._declare_with_end(execution, first, born):
                return True  # the outcome was recorded the old way: replay from the log
            batchable = batchable[len(first):]
        for start in range(0, len(batchable), BATCH):
            chunk = batchable[start:start + BATCH]
            try:
                await self._declare_chunk(execution, chunk, born)
            except PayloadTooLargeError:
                # A value in the chunk is over the limit and the World refuses the whole batch: declare them one
                # by one, so only that call fails (a rare path: its extra writes do not matter).
                for op in chunk:
                    try:
                        await self._declare_chunk(execution, [op], born)
                    except PayloadTooLargeError as too_large:
                        execution.refuse(op, _too_large(op, "input", too_large.message))
        for op in new:
            if isinstance(op, HookOp):
                try:
                    await self._write({"eventType": "hook_created", "correlationId": op.id,
                                       "eventData": named(op, {"token": op.token, "metadata": op.metadata,
                                                               "isWebhook": op.is_webhook})})
                except PayloadTooLargeError as too_large:
                    execution.refuse(op, _too_large(op, "metadata", too_large.message))
        return True

    def _declarations(self, chunk: list[StepOp | WaitOp], born: StepOp | None) -> list[dict[str, Any]]:
        requests: list[dict[str, Any]] = []
        for op in chunk:
            requests.append(_declaration(op))
            if born is not None and op is born:
                requests.append({"eventType": "step_started", "correlationId": op.id, "eventData": start_data(
                    self.message_id, inline=True, lease=step_lease(born.definition, self.deadline))})
        return requests

    async def _declare_chunk(self, execution: WorkflowExecution, chunk: list[StepOp | WaitOp],
                             born: StepOp | None) -> None:
        requests = self._declarations(chunk, born)
        result = await self.world.events.create_batch(
            self.run_id, requests, in_band=True, expected_seq_in_band=self.seq_in_band,
            resolve_data="skip-step-inputs")
        if result.seq_in_band is not None:
            self.seq_in_band = result.seq_in_band
        await self._landed(execution, chunk, born, result.results, len(requests))

    async def _declare_with_end(self, execution: WorkflowExecution, chunk: list[StepOp | WaitOp],
                                born: StepOp | None) -> bool:
        """The pending outcome with ``chunk``: False when that write failed and the outcome was recorded the
        old way instead (the execution is replaced)."""
        pending = self._take_pending()
        requests = self._declarations(chunk, born)
        try:
            results = await self._write_with_end(pending, requests)
        except Exception as error:  # any refusal, or no answer: the old way decides (see _fall_back)
            await self._fall_back(pending, error)
            return False
        await self._landed(execution, chunk, born, results[1:], len(requests))
        await self._recorded(pending, _written(pending.end))
        return True

    async def _landed(self, execution: WorkflowExecution, chunk: list[StepOp | WaitOp], born: StepOp | None,
                      results: list[BatchEventOutcome], requested: int) -> None:
        outcomes = iter(results)
        landed = []
        for op in chunk:
            outcome = next(outcomes)
            started = next(outcomes) if op is born else None
            if outcome.ok and outcome.result is not None and outcome.result.event is not None:
                landed.append(outcome.result.event)
                if isinstance(op, StepOp):
                    self.owned.add(op.id)
                if started is not None and started.result is not None and started.result.event is not None:
                    landed.append(started.result.event)
                    self.claimed[op.id] = started.result
            elif outcome.status == 413:
                execution.refuse(op, _too_large(op, "input", outcome.message))
            elif outcome.status != 409:
                raise RuntimeError(f"declaring {op.id} failed: {outcome.message}")
        await self._append(landed)
        if len(landed) < requested:
            await self._reload_tail()  # someone else declared some of them: take their events

    async def _cancel_steps(self, execution: WorkflowExecution) -> bool:
        """Record the end of every step whose await the workflow cancelled, as ``step_failed`` marked cancelled
        (one batched write): that is what a queued attempt's status check finds (it stops its body), what makes a
        message for a step not started yet find it ended (it never runs), and what replays turn back into the
        ``CancelledError`` the workflow saw. A 409 means the step ended first (its outcome landed before the
        cancellation): that end stays, and the workflow still sees the cancellation on every replay, because its
        code cancels the future at the same point before that event is replayed."""
        steps = execution.cancelled_steps()
        if not steps:
            return False
        for step in steps:  # never to run here: their end is the cancellation
            self.owned.discard(step.id)
            self.claimed.pop(step.id, None)
        for start in range(0, len(steps), BATCH):
            chunk = steps[start:start + BATCH]
            result = await self.world.events.create_batch(self.run_id, [
                {"eventType": "step_failed", "correlationId": step.id,
                 "eventData": {"error": step_cancelled_error(step.definition.name)}} for step in chunk
            ], in_band=True, expected_seq_in_band=self.seq_in_band, resolve_data="skip-step-inputs")
            if result.seq_in_band is not None:
                self.seq_in_band = result.seq_in_band
            landed = [o.result.event for o in result.results if o.ok and o.result is not None and o.result.event]
            failed = [o for o in result.results if not o.ok and o.status != 409]
            if failed:
                raise RuntimeError(f"recording a cancelled step failed: {failed[0].message}")
            await self._append(landed)
            if len(landed) < len(chunk):
                await self._reload_tail()  # ended first by another writer: take its end
        return True

    async def _dispose(self, execution: WorkflowExecution) -> bool:
        hooks = execution.disposals()
        for hook in hooks:
            try:
                await self._write({"eventType": "hook_disposed", "correlationId": hook.id})
            except EntityConflictError:
                await self._reload_tail()
        return bool(hooks)

    async def _due_waits(self, execution: WorkflowExecution) -> bool:
        now = clock_of(self.world).now()
        due = [w for w in execution.pending_waits() if w.resume_at <= now]
        for wait in due:
            try:
                await self._write({"eventType": "wait_completed", "correlationId": wait.id})
            except EntityConflictError:
                await self._reload_tail()
        return bool(due)

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

    # ------------------------------------------------------------------ an outcome with the next write

    def _alone(self, step: StepOp) -> bool:
        """Nothing but this step's end may land next: it is the run's only open operation another writer
        could finish (any other writer, a client's attr_set say, only costs the fallback)."""
        execution = self.execution
        assert execution is not None
        return ([s.id for s in execution.pending_steps()] == [step.id] and not execution.pending_waits()
                and not execution.live_hooks() and not execution.new_ops() and not execution.pending_markers)

    def _consume_first(self, step: StepOp, end: StepEnd) -> None:
        """Show the workflow the outcome before it is written: a provisional event at the next slot, stamped
        with the time its write will record."""
        execution = self.execution
        assert execution is not None
        at = clock_of(self.world).now()
        seq = len(execution.log)
        execution.append([Event(event_id=slot_to_event_id(seq + 1), run_id=self.run_id, event_type=end.kind,
                                correlation_id=step.id, event_data=dict(end.data), created_at=at)])
        self.pending = _Pending(step, end, seq, at)

    def _take_pending(self) -> _Pending:
        pending, self.pending = self.pending, None
        assert pending is not None
        return pending

    def _settle_first(self, execution: WorkflowExecution) -> bool:
        """Whether the pending outcome is written on its own now: unless the workflow declared steps or waits
        (the outcome rides with them), anything the flow does next must find it in the log."""
        return (execution.terminal is not None or bool(execution.pending_markers) or execution.done
                or bool(execution.cancelled_steps()) or len(execution.log) >= self.settings.max_events
                or not any(isinstance(op, StepOp | WaitOp) for op in execution.new_ops()))

    async def _settle(self) -> bool:
        """Write the pending outcome on its own (a one-event stamped batch at its position). False when that
        failed and the outcome was recorded the old way instead (the execution is replaced)."""
        pending = self._take_pending()
        try:
            await self._write_with_end(pending, [])
        except Exception as error:  # any refusal, or no answer: the old way decides (see _fall_back)
            await self._fall_back(pending, error)
            return False
        await self._recorded(pending, _written(pending.end))
        return True

    async def _write_with_end(self, pending: _Pending, requests: list[dict[str, Any]]) -> list[BatchEventOutcome]:
        """The outcome and ``requests``: all or nothing, stamped with the time the workflow was shown, and only
        right after the events it was shown."""
        result = await self.world.events.create_batch(
            self.run_id, [pending.end.request, *requests], in_band=True, expected_seq_in_band=self.seq_in_band,
            resolve_data="skip-step-inputs", atomic=True, stamp=pending.at, expect_seq=pending.seq)
        if result.seq_in_band is not None:
            self.seq_in_band = result.seq_in_band
        self.stats.ends_with_next += 1
        return result.results

    async def _recorded(self, pending: _Pending, outcome: StepOutcome) -> None:
        """After a consumed outcome is in the log, however it got there: a retry is queued."""
        if outcome.status == "retry":
            await self._queue_step(pending.step, outcome.attempt, outcome.retry_after)

    async def _fall_back(self, pending: _Pending, error: Exception) -> None:
        """The write carrying a consumed outcome failed (the log moved, another flow wrote first, the step's
        end is recorded already, a value is too large, or no answer came, so it may even have landed). The
        execution showed the workflow a log that may never be: drop it, record the outcome the old way (which
        answers each of those cases) and replay from the log; a superseded flow stops as it always does."""
        self.stats.fallbacks += 1
        log.info("run %s: the outcome of %s did not ride in the next write (%s); recording it on its own",
                 self.run_id, pending.step.id, type(error).__name__)
        outcome = await record_end(self.world, self.run_id, pending.end)
        old = self.execution
        assert old is not None
        fresh = WorkflowExecution(self.run_id, old.definition, self.registry, old.seed)
        fresh.append(old.log[:pending.seq])
        old.close()
        self.execution = fresh
        await self._recorded(pending, outcome)
        if isinstance(error, InBandSupersededError):
            raise error
        await self._reload_tail()

    # ------------------------------------------------------------------ endings

    async def _finish(self, execution: WorkflowExecution) -> str:
        assert execution.task is not None
        error = execution.task.exception() if not execution.task.cancelled() else None
        if error is None and not execution.task.cancelled():
            try:
                output = serde.dumps(execution.task.result())
            except serde.SerializationError as bad:
                return await self._fail({"message": f"the workflow's return value cannot be serialized: {bad}",
                                         "name": "FatalError"}, SERIALIZATION_ERROR)
            try:
                await self._write({"eventType": "run_completed", "eventData": {"output": output}})
            except EntityConflictError:
                return "gone"
            except PayloadTooLargeError as too_large:
                return await self._fail({"message": f"the workflow's return value is too large to record: "
                                                    f"{too_large.message}", "name": "ValueTooLargeError"},
                                        VALUE_TOO_LARGE)
            return "completed"
        return await self._fail(structured_error(error) if error else {"message": "cancelled"}, USER_ERROR)

    async def _fail(self, error: dict[str, Any], code: str) -> str:
        try:
            await self._write({"eventType": "run_failed", "eventData": {"error": error, "errorCode": code}})
        except EntityConflictError:
            return "gone"
        log_failure(self.run_id, self.message.workflow_name, error, code)
        return "failed"

    async def _record_markers(self, execution: WorkflowExecution) -> None:
        """``patched()`` answered True at the log's frontier: record it (one attr_set for all change ids)."""
        markers = execution.take_markers()
        await self._write({"eventType": "attr_set", "eventData": {"changes": [
            {"key": f"{PATCH_MARKER_PREFIX}{change_id}", "value": str(at)} for change_id, at in markers.items()]}})

    async def _diverged(self, divergence: ReplayDivergenceError) -> str:
        """Recover with a new delivery (replay from the start) up to three times; then fail the run naming the
        divergence, or under ``AWSWORLD_ON_DIVERGENCE=park`` keep it running and redeliver it every
        ``AWSWORLD_PARK_SECONDS`` (an hour) so a code rollback picks it up. The log line names the position and
        the kind of change only: the calls may quote user payloads."""
        count = self.message.divergence
        park = SETTINGS.on_divergence == "park"
        log.warning("replay of run %s diverged from its log at %s (event %s, %s changed); recovery %d",
                    self.run_id, divergence.position, divergence.slot, divergence.change, count + 1)
        if count >= MAX_DIVERGENT_RECOVERIES and not park:
            message = await self._divergence_message(divergence)
            return await self._fail({"message": message, "name": "ReplayDivergenceError"}, CORRUPTED_EVENT_LOG)
        follow_up = FlowMessage(self.run_id, self.message.workflow_name, divergence=count + 1)
        delay = SETTINGS.park_seconds if park and count >= MAX_DIVERGENT_RECOVERIES else None
        await self.world.queue(queue_name_for(self.message.workflow_name), follow_up.to_payload(),
                               idempotency_key=f"{self.run_id}:diverged:{follow_up.divergence}", delay_seconds=delay)
        if delay is not None and self.execution is not None:  # parked: its next delivery is due in an hour
            now = clock_of(self.world).now()
            await rest(self.world, self.message, self.execution, now, resting=True,
                       due=quiet_due([now + timedelta(seconds=delay)]))
        return "parked" if delay is not None else "diverged"

    async def _divergence_message(self, divergence: ReplayDivergenceError) -> str:
        """The run's error: where, what the log holds, what the code did — with the logged arguments, which the
        flow reads without (one read, once per failed run)."""
        step_id = getattr(divergence, "step_id", None)
        text = str(divergence)
        if step_id is not None:
            try:
                step = await self.world.steps.get(self.run_id, step_id)
                logged = dv.step_call(step.step_name, step.input)
                text = text.replace(divergence.log or "", logged, 1) if divergence.log else text
            except Exception:  # the message is best effort; the failure itself must be recorded
                pass
        return (f"the workflow's code no longer matches this run's history: {text}. Roll the code back (or "
                "branch with awsworld.patched()) to keep such runs going; awsworld replay checks stored runs "
                "against new code before a deploy")

    # ------------------------------------------------------------------ messages

    def _flow_message(self) -> FlowMessage:
        return FlowMessage(self.run_id, self.message.workflow_name)

    def _step_message(self, step: StepOp) -> FlowMessage:
        return FlowMessage(self.run_id, self.message.workflow_name, step.id, step.definition.name,
                           run_context=self._run_context())

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


def _too_large(op: StepOp | WaitOp | HookOp, what: str, detail: str | None) -> ValueTooLargeError:
    return ValueTooLargeError(f"the {what} of {op.id} is too large to record: {detail}")


def _written(end: StepEnd) -> StepOutcome:
    return StepOutcome(end.status, [], retry_after=end.retry_after, attempt=end.attempt)


def _declaration(op: StepOp | WaitOp) -> dict[str, Any]:
    if isinstance(op, StepOp):
        return {"eventType": "step_created", "correlationId": op.id, "eventData": named(op, {
            "stepName": op.definition.name, "input": op.input, "inputDigest": op.digest})}
    return {"eventType": "wait_created", "correlationId": op.id,
            "eventData": named(op, {"resumeAt": op.resume_at.astimezone(UTC).isoformat()})}
