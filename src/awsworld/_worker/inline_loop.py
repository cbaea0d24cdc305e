"""The inline loop of one flow delivery (why and how: ``docs/concepts/inline-loop.md``).

Replay, then on suspension: declare new steps/waits (one batched write) and hooks, dispose hooks, complete
waits that are due, queue every runnable step but one with one ``queue_batch``, queue the soonest wait as a
delayed continuation, run the one owned step inline, and loop — until the run ends, only waits/hooks remain,
or the budget is spent (then a continuation is queued). Every write of the flow is in-band, fenced with the
run's in-band count: a flow whose write another flow superseded queues one follow-up delivery and stops, unless
it holds steps (claimed or started by this message), which it runs after replaying the newer log.

``Flow`` is the loop; it composes the collaborators that do its other jobs, each given what it needs: the log
as this delivery reads and writes it and the steps it may run (``flow_state.FlowLog``, ``StepClaims``), the
messages it sends (``flow_messages``), the provisional-outcome optimisation (``provisional``), the writes of a
suspension (``declarations.Declarer``), and the run's end and divergence policy (``endings.RunEndings``).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from datetime import datetime

from .._deployments.pins import pin_change
from .._deployments.routing import flow_pin
from .._engine.execution import WorkflowExecution
from .._engine.ops import StepOp
from .._engine.parking import parked_in_log
from ..authoring.definitions import Registry, WorkflowDef
from ..authoring.errors import (
    EVENT_LIMIT_EXCEEDED,
    RUN_LIFETIME_EXCEEDED,
    USER_ERROR,
    ReplayDivergenceError,
)
from ..durable.class_paths import same_classes
from ..world.clock import clock_of
from ..world.cursors import slot_cursor
from ..world.errors import InBandSupersededError, RunGoneError, RunValuesUnreadableError
from ..world.events import RUN_END_EVENT_TYPES, Event
from ..world.messages import FlowMessage
from ..world.protocol import World
from ..world.rules.lifetime import context_of, lifetime_end, lifetime_failure
from ..world.rules.limiters import LimitInputError
from .child_runs import on_run_end, report_ended_children, resolve_step
from .cut_off import cut_off_reason
from .declarations import Declarer
from .endings import RunEndings
from .flow_messages import FlowMessages
from .flow_state import FlowLog, FlowSettings, FlowStats, StepClaims
from .provisional import ProvisionalOutcomes
from .recovery import dispatch_key, rest, started_by, wake_at_lease_end
from .run_control import cancel_for_limit
from .run_limits import admit_in_flow, leave_in_flow
from .step_limits import free_run_steps, give_back
from .step_runner import StepEnd, StepOutcome, attempt_step, interrupted_end, record_end, run_ended

log = logging.getLogger("awsworld.flow")

__all__ = ["Flow", "FlowSettings", "FlowStats"]


@dataclass
class Flow:
    """One flow delivery: ``await Flow(world, registry, message, deadline).run()``."""

    world: World
    registry: Registry
    message: FlowMessage
    deadline: float  # time.monotonic() by which to hand over to a continuation
    settings: FlowSettings = field(default_factory=FlowSettings)
    stats: FlowStats = field(default_factory=FlowStats)
    message_id: str | None = None  # this delivery's id: recorded as the owner of steps it starts
    sent_at: datetime | None = None  # when this delivery's message was sent (``Delivery.created_at``)
    redeliver_after: float | None = None
    """Set when this delivery must come back as itself (same message id) rather than be acknowledged: it
    holds steps it started and did not finish, which only a delivery with its id may run again."""
    ended_log: list[Event] = field(default_factory=list[Event])  # the log of a run found ended (on_run_end)
    redelivered: bool = False
    """A delivery under this message's id came before (``Delivery.attempt`` > 1): the end's work it did may have
    been cut short between a child's cancel and its wake, so this one wakes a cancelled child again
    (``child_runs.cancel_run``)."""
    after_finished_step: str | None = None
    """The step whose queued message this delivery is, found finished already: the delivery that finished it
    (and went on with the run, starting inline steps under its own message id) died. Its message may come back
    under another id (a limited step's redelivery waits for a slot and is sent again by the limit's wake,
    ``_worker/step_limits.py``), and then no delivery owns the steps the dead one left started: come back when
    their lease ends (``recovery.wake_at_lease_end``), as a wake does. Only for steps started by that
    step's own delivery: a step another message runs has that message to come back."""

    def __post_init__(self) -> None:
        self.run_id = self.message.run_id
        self.log = FlowLog(self.world, self.run_id)
        self.claims = StepClaims(self.world, self.message, self.message_id, self.sent_at)
        self.messages = FlowMessages(self.world, self.message, self.log)
        self.provisional = ProvisionalOutcomes(self.log, self.messages, self.registry, self.settings, self.stats)
        self.declarer = Declarer(self.log, self.claims, self.provisional, self.registry, self.deadline, self.messages)
        self.endings = RunEndings(self.log, self.messages)
        self.open_to_wakes = False  # step deliveries of the run may hand this flow their wakes (``HandedWakes``)
        self.created: Event | None = None  # the run's run_created, and the end of its lifetime by it
        self.lifetime_end: datetime | None = None

    # ------------------------------------------------------------------ entry

    async def run(self) -> str:
        stopped: str | None = None  # how it stopped, for the finally (None: an error)
        self.open_to_wakes = self.settings.wakes.open(self.run_id)
        try:
            status = stopped = await self._run_holding_steps()
        except InBandSupersededError as superseded:
            self._close_to_wakes()  # (before the follow-up: a wake handed from now on is its delivery's own)
            # Another flow wrote first: one follow-up delivery (shared by every flow refused by that write).
            await self.messages.queue_flow(f"superseded:{superseded.seq_in_band}")
            stopped = "superseded"
            return stopped
        except RunGoneError:
            status = stopped = "gone"
        finally:
            self._close_to_wakes()
            if self.log.execution is not None:
                if self._keepable(stopped):  # read up to its last event (what it wrote, too)
                    self.settings.kept.keep(self.run_id, self.log.execution, slot_cursor(len(self.log.execution.log)))
                else:
                    self.log.execution.close()
        if status in ("completed", "failed", "gone"):  # child workflows: report to a parent, cancel children
            execution = self.log.execution
            ended = execution.log if execution else self.ended_log
            await on_run_end(self.world, self.run_id, ended, redoing=self.redelivered)
            # (its end is near the log's end: looked for from there; its slot of a limit: world/rules/limiters.py)
            if any(e.event_type in RUN_END_EVENT_TYPES for e in reversed(ended)):
                await leave_in_flow(self.world, self.registry.workflows.get(self.message.workflow_name),
                                    self.run_id, ended)
                await free_run_steps(self.world, self.registry, self.run_id, ended)
        if status == "gone" and self.claims.taken:
            # Slots taken for steps to be born running whose declaration the run's end refused (a cancel between
            # the take and the write): no step of them is in the log for the end's tidy to find, and no message
            # comes for them, so they were held until their lease passed (``Declarer._take``).
            taken, self.claims.taken = list(self.claims.taken.values()), {}
            for each in taken:
                await give_back(self.world, each)
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
                if not self.claims.holds_steps(self.log.execution):
                    if self._handed():  # a step's end was handed to this flow: go on (from the kept replay)
                        self._keep_and_forget("superseded")
                        continue
                    raise
                log.info("run %s: another flow wrote first; replaying its log to run the steps this delivery holds",
                         self.run_id)
                self._forget_replay()

    def _handed(self) -> bool:
        """Whether a step delivery handed this flow its wake since it last looked (``HandedWakes``); when not,
        the flow is closed to wakes from now on (in the same call: none can be handed in between)."""
        if not self.open_to_wakes:
            return False
        if self.settings.wakes.handed(self.run_id):
            self.stats.handed_wakes += 1
            return True
        self.open_to_wakes = False
        return False

    def _close_to_wakes(self) -> None:
        if self.open_to_wakes:
            self.settings.wakes.close(self.run_id)
            self.open_to_wakes = False

    def _keep_and_forget(self, status: str) -> None:
        """Hand the replay to ``KeptReplays`` (when it may be kept, else drop it) for the next ``_run`` to take;
        what this delivery meant to run inline is forgotten, as ``_forget_replay`` does."""
        execution = self.log.execution
        if execution is not None and self._keepable(status):
            self.settings.kept.keep(self.run_id, execution, slot_cursor(len(execution.log)))
            self.log.execution = None
            self.log.cursor, self.log.seq_in_band = None, 0
        self._forget_replay()

    def _forget_replay(self) -> None:
        """Drop the replay (and what this delivery meant to run inline but never started: another flow may have
        queued it) so the next ``_run`` loads the log afresh; the claims, the messages sent and the refusals
        stay."""
        self.log.forget()
        self.claims.owned.clear()

    async def _run(self) -> str:
        known = self.registry.workflows.get(self.message.workflow_name)
        try:
            resumed = await self._resume(known)
            log = self.log.replay().log if resumed else await self.log.load_all()
        except RunValuesUnreadableError as unreadable:
            self.ended_log = await self._ended_unread(unreadable)
            return "gone"
        if any(e.event_type in RUN_END_EVENT_TYPES for e in log[self.log.held if resumed else 0:]):
            self.ended_log = log
            return "gone"
        pin = flow_pin(self.run_id, log, self.settings.deployment, pinned_workflow=known is None or known.pinned)
        self.message.deployment = pin.address  # (Misrouted, above, when the run is pinned elsewhere)
        definition = self.registry.workflow(self.message.workflow_name)
        if resumed:
            execution = self.log.replay()
        else:
            created = (log[0].event_data or {}) if log else {}
            seed = str(((created.get("executionContext") or {}).get("seed")) or self.run_id)
            execution = self.log.execution = WorkflowExecution(
                self.run_id, definition, self.registry, seed, max_value_bytes=self.world.max_value_bytes)
            execution.append(log)
        self.endings.parked = parked_in_log(execution.attr_sets)  # (its attr_set events: not the whole log again)
        if execution.log:  # (replayed, not run: the run's end is written to, and reported from, its replay's log)
            self.created = execution.log[0]
            self.lifetime_end = lifetime_end(self.created.created_at, context_of(self.created.event_data))
            if clock_of(self.world).now() >= self.lifetime_end:
                return await self._end_at_lifetime()  # (before its code runs again: as a cancel ends a run)
        if pin.record is not None:  # before run_started: a crash in between leaves the run pinned, never unpinned
            await self.log.write({"eventType": "attr_set", "eventData": {"changes": [pin_change(pin.record)]}})
        if not any(e.event_type == "run_started" for e in log):
            admitted = await self._admit(definition, log)
            if admitted is not None:
                return admitted
            await self.log.write({"eventType": "run_started"})
        try:
            return await self._loop()
        except Exception:
            if self.provisional.pending is not None:  # a consumed step result is never lost: record it first
                await self.provisional.record_now()
            raise

    async def _ended_unread(self, unreadable: RunValuesUnreadableError) -> list[Event]:
        """The log of a run whose values are lost (``unreadable.lost``), read without them, when it holds the run's
        end: an operator's ``awsworld fail`` or ``cancel`` of such a run wakes it, and its flow does the end's work
        from that (``on_run_end``: tell a parent, cancel children; free its slots), none of which needs a value.
        Else (a passing refusal, or a run not ended) ``unreadable`` again: retried, as every delivery that fails.
        Reading the values of such a run failed every delivery of the wake until it reached the dead-letter queue."""
        if not unreadable.lost:
            raise unreadable
        self.log.forget()  # (a kept replay taken, or part of a log read: neither is this delivery's any more)
        events = await self.log.read_without_values()
        if not any(e.event_type in RUN_END_EVENT_TYPES for e in events):
            raise unreadable
        log.info("run %s: ended, and its values cannot be read (%s): its end's work is done from its log read "
                 "without them", self.run_id, unreadable)
        return events

    async def _end_at_lifetime(self) -> str:
        """Fail a run still running at its lifetime's end (``world/rules/lifetime.py``) with ``RunLifetimeError``,
        before any of its items can expire: its error says the limit and the way out (a successor run)."""
        created = self.created
        assert created is not None
        error = lifetime_failure(self.run_id, created.created_at, context_of(created.event_data))
        return await self.endings.fail(error, RUN_LIFETIME_EXCEEDED)

    async def _resume(self, known: WorkflowDef | None) -> bool:
        """Go on from the replay an earlier delivery of this worker kept for the run (``KeptReplays``), when it
        replays this same code: True when the flow now holds it, the events past it read and appended (not yet
        applied: the loop's ``advance`` does that, as for a fresh replay)."""
        kept = self.settings.kept.take(self.run_id)
        if kept is None:
            return False
        execution, cursor = kept
        if known is None or execution.definition is not known or execution.registry is not self.registry \
                or not same_classes(execution.classes):
            execution.close()  # (the code was reloaded or edited since: replay it afresh, reading every value again)
            return False
        if not await self.log.resume(execution, cursor):
            return False
        self.settings.kept.resumed += 1
        self.stats.resumed = True
        return True

    def _keepable(self, status: str | None) -> bool:
        """Whether this flow's replay may be kept for the run's next delivery (``KeptReplays``): when the workflow
        suspended, or another flow's write superseded this one's (nothing of the refused write landed: the
        replay holds the log as read, and what the code declared at its end, which the next delivery's replay
        would declare there too); never with anything that is not a function of the log (a consumed outcome not
        written, a patch marker answered and not recorded, an op the World refused, a failure), nor when this
        delivery comes back as itself."""
        execution = self.log.execution
        return (status in ("suspended", "superseded") and execution is not None and self.redeliver_after is None
                and execution.failure is None and execution.terminal is None and not execution.done
                and not execution.refused and not execution.pending_markers and self.provisional.pending is None)

    async def _admit(self, definition: WorkflowDef, log: list[Event]) -> str | None:
        """A pending run's slot of its workflow's limit (``run_limits``): None when it may start; ``waiting``
        when it waits for one (the write that frees a slot for it queues its message); ``gone`` when a busy key
        skipped it (cancelled); ``failed`` when its key cannot be computed from its input."""
        try:
            admitted = await admit_in_flow(self.world, definition, self.run_id, log,
                                           deployment=self.message.deployment)  # (its pin, set above)
        except LimitInputError as bad:
            return await self.endings.fail({"message": bad.message, "name": "LimitInputError"}, USER_ERROR)
        await cancel_for_limit(self.world, admitted)
        if admitted.kind == "wait":
            return "waiting"
        if admitted.kind == "skip":
            self.ended_log = [*log, *(await self.log.load_all())]
            return "gone"
        return None

    async def _loop(self) -> str:
        flow_log, provisional, declarer, endings, stats = self.log, self.provisional, self.declarer, self.endings, \
            self.stats  # (the collaborators, once: the loop turns twice per step)
        while True:
            execution = flow_log.execution
            assert execution is not None
            stats.iterations += 1
            if stats.iterations > 1 and time.monotonic() >= self.deadline and not self.claims.claimed:
                # (Never before the first iteration: every delivery makes progress, however late it starts; never
                # with a claimed step, whose attempt is started and must run here, as an inline step started just
                # before the deadline does.)
                # The budget is spent: this same message comes back at once and goes on where we stop. Being
                # the same message, it may run the steps this delivery started (a continuation with a new id
                # could not, and a key derived from the log could be this message's own and send nothing).
                if provisional.pending is not None:
                    await provisional.settle()  # the step's outcome, on its own: the workflow has not seen it yet
                self.redeliver_after = 0.0
                return "continued"
            if self.lifetime_end is not None and clock_of(self.world).now() >= self.lifetime_end:
                # (a delivery that runs steps inline for minutes: its lifetime may end meanwhile)
                if provisional.pending is not None:
                    await provisional.settle()
                return await self._end_at_lifetime()
            try:
                execution.advance()
            except ReplayDivergenceError as divergence:
                if provisional.pending is not None:
                    await provisional.settle()
                return await endings.diverged(divergence)
            if provisional.pending is not None and provisional.settle_first(execution) \
                    and not await provisional.settle():
                continue  # the outcome was recorded the old way: replay from the log
            if execution.terminal:
                return "gone"
            if endings.parked is not None and provisional.pending is None:  # (the first iteration: none held)
                await endings.unpark()
            if execution.pending_markers:
                await endings.record_markers(execution)  # before anything else this flow writes
            if len(execution.log) >= self.settings.max_events:
                return await endings.fail({"message": f"the run reached its limit of {self.settings.max_events} "
                                                    "events (AWSWORLD_MAX_EVENTS_PER_RUN)", "name": "EventLimit"},
                                        EVENT_LIMIT_EXCEEDED)
            if await declarer.cancel_steps(execution):
                continue  # (before the run's end: every step the workflow cancelled has one end in the log)
            if execution.done:
                return await endings.finish(execution)
            if await declarer.declare(execution) or await declarer.dispose(execution) \
                    or await declarer.complete_due_waits(execution):
                continue
            inline = await self._dispatch(execution)
            if inline is None:
                await self._suspend(execution)
                if self._handed():  # a step's end landed meanwhile, its wake handed here: read it and go on
                    await flow_log.reload_tail()
                    continue
                return "suspended"
            if self._handed():  # first what was handed (the step stays this delivery's: the next turn runs it)
                await flow_log.reload_tail()
                continue
            await self._run_inline(inline)  # (closed to wakes meanwhile: one waits for no other step's body)
            self.open_to_wakes = self.settings.wakes.open(self.run_id)

    async def _dispatch(self, execution: WorkflowExecution) -> StepOp | None:
        assert self.provisional.pending is None
        claims, messages = self.claims, self.messages
        now = clock_of(self.world).now()
        runnable = claims.runnable(execution)
        inline = (next((s for s in runnable if s.id in claims.claimed), None)
                  or next((s for s in runnable if claims.mine(s)
                           or (s.id in claims.owned and not claims.beside_wakes(execution, s))), None)
                  or next((s for s in runnable if s.poll is not None), None)  # a poll runs in a flow only
                  or next((s for s in runnable if claims.taken_over(s)), None))
        to_queue = [s for s in runnable if s is not inline and (not s.started or claims.taken_over(s))
                    and s.poll is None and f"{s.id}:{s.attempt}" not in messages.queued]
        for cut in (s for s in (inline, *to_queue) if s is not None and s.started and claims.taken_over(s)):
            log.warning("run %s: attempt %d of step %s (%s) was started by another delivery and never finished (%s); "
                        "taking it over", self.run_id, cut.attempt, cut.definition.name, cut.id,
                        cut_off_reason(getattr(cut.definition, "timeout", None), cut.started_at, cut.lease_until))
        if to_queue:
            # Keyed, unlike a retry: every flow that replays the run re-queues each declared step not started
            # yet (that is what recovers a step whose message a crash never sent), and a duplicate that finds its
            # step finished continues the flow, which would re-queue the rest again; the key stops that cascade
            # while the first message is live.
            results = await self.world.queue_batch(messages.queue_name, [
                {"payload": messages.step_message(s).to_payload(), "idempotency_key": dispatch_key(self.run_id, s, now)}
                for s in to_queue
            ])
            failed = [r.error for r in results if not r.ok]
            if failed:
                raise RuntimeError(f"queueing {len(failed)} step message(s) failed: {failed[0]}")
            messages.queued.update(f"{s.id}:{s.attempt}" for s in to_queue)
            # A queued step belongs to its message now: running it inline too would run its body twice.
            claims.owned.difference_update(s.id for s in to_queue)
            claims.hand(to_queue)
            self.stats.queued_steps += len(to_queue)
        for pending in execution.pending_steps():
            if pending.started or pending.retry_after is None or pending.retry_after <= now:
                continue
            if pending.poll is not None:  # a poll between polls: wake a flow when the next one is due
                await messages.queue_poll(pending, pending.attempt, (pending.retry_after - now).total_seconds())
            elif self.message.wake:
                # A wake stands for messages that may be lost (``awsworld dev``'s restart loses its whole queue),
                # a retry's own among them: a flow at its time dispatches it (a duplicate of a retry message that
                # lives finds the step started: harmless). Without it the watchdog brought it a horizon late.
                await messages.queue_retry_flow(pending, (pending.retry_after - now).total_seconds())
        waits = [w for w in execution.pending_waits() if w.resume_at > now and w.id not in messages.queued]
        if waits:
            soonest = min(waits, key=lambda w: w.resume_at)
            delay = max(0, math.ceil((soonest.resume_at - now).total_seconds()))
            await messages.queue_flow(soonest.id, delay_seconds=delay)
            messages.queued.add(soonest.id)
        return inline

    async def _run_inline(self, step: StepOp) -> None:
        self.stats.inline_steps += 1
        self.claims.owned.discard(step.id)
        claimed = self.claims.claimed.pop(step.id, None)
        taken = self.claims.taken.pop(step.id, None)  # the slot and token its born-running start took
        definition = resolve_step(self.registry, step.definition.name)
        # (the step's message is what a limited step's wait for its slot or token sends: built for those only)
        message = self.messages.step_message(step) if definition.limit is not None else None
        attempt = await attempt_step(self.world, self.registry, self.run_id, step.id, step.definition.name,
                                     in_band=self.log.seq_in_band, on_in_band=self.log.set_in_band,
                                     owner=self.message_id,
                                     claimed=claimed, call_input=step.input, poll=step.poll,
                                     watch=lambda: self._watch_inline(step), inline=True, deadline=self.deadline,
                                     message=message, taken=taken)
        if isinstance(attempt, StepOutcome) and attempt.status == "waiting":
            if self.claims.mine(step):
                # An attempt this message started, cut off after its body gave its slot back (a crash): it cannot
                # wait as itself (only this message may run it while its lease runs), so it ends as cut off and is
                # retried per its policy, as a new attempt that waits for a slot like any other.
                attempt = interrupted_end(self.world, definition, step.id, step.attempt, step.started_at,
                                          step.lease_until)
            else:
                self.messages.queued.add(f"{step.id}:{step.attempt}")  # its limit's message brings it
                return
        if step.done or step.future.cancelled():
            # The workflow cancelled it while it ran (or another flow recorded its end): whatever the attempt
            # ended with is dropped, so the step's one end is the cancellation (written by the loop:
            # Declarer.cancel_steps).
            await self.log.append(attempt.events)
            if isinstance(attempt, StepOutcome) and attempt.status == "gone":
                raise RunGoneError(f"run {self.run_id} ended")
            return
        if isinstance(attempt, StepEnd):
            await self.log.append(attempt.events)
            if self.provisional.alone(step):
                self.provisional.consume_first(step, attempt)  # written with the flow's next write
                return
            outcome = await record_end(self.world, self.run_id, attempt)
        else:
            outcome = attempt
        await self.log.append(outcome.events)
        if outcome.status == "gone":
            raise RunGoneError(f"run {self.run_id} ended")
        await self._step_ended(step, outcome)

    async def _step_ended(self, step: StepOp, outcome: StepOutcome) -> None:
        """After an inline attempt that recorded no end of its own: read what ended it where the next turn needs it.

        ``cancelled`` here (the workflow did not cancel the step: ``_run_inline`` returned before) is the run's end,
        which the watch read alone (``step_runner.run_ended``) and the replay has not: read into it, the next turn
        ends the flow as ``gone``. Without it the replay still held the step as this message's own unfinished
        attempt (``StepClaims.mine``), and the next turn ran it again: the World refuses that start (the terminal-run
        fence, ``world/rules/steps.py``), but a limited step asks its limit first, and with the slot given to a
        waiting run, that turn ended as a cut-off attempt: a ``step_failed`` "its delivery was cut off" recorded
        after ``run_cancelled`` (``tests/runtime/test_e2e_step_cancel.py``)."""
        if outcome.status == "retry":
            await self.messages.queue_step(step, outcome.attempt, outcome.retry_after)
        elif outcome.status in ("finished-already", "running-elsewhere", "cancelled"):
            if outcome.status == "running-elsewhere":
                self.claims.refused.add(step.id)  # a take-over the World refused (its lease had not passed there)
            await self.log.reload_tail()

    async def _suspend(self, execution: WorkflowExecution) -> None:
        """Nothing more to do now: a wake makes sure steps leased elsewhere are looked at again when their lease
        ends, and a run at rest gets its exact due (``recovery``)."""
        now = clock_of(self.world).now()
        if self.message.wake:
            await wake_at_lease_end(self.world, self.message, execution.pending_steps(), now, self.messages.queued)
            await report_ended_children(self.world, execution)
        elif self.after_finished_step is not None:
            finisher = started_by(execution.log, self.after_finished_step)
            left = [s for s in execution.pending_steps() if finisher is not None and s.owner == finisher]
            await wake_at_lease_end(self.world, self.message, left, now, self.messages.queued)
        await rest(self.world, self.message, execution, now)

    async def _watch_inline(self, step: StepOp) -> bool:
        """Asked every ``check_seconds()`` while an inline step's body runs: whether to stop it, because the
        workflow cancelled it, its end is in the log, or the run ended (cancelled, failed on request: for a step
        alone, one metadata-only read of the run, ``step_runner.run_ended``). While the step is not the run's only
        open operation, another writer may record something the workflow reacts to (a queued step's end, a wake-up
        handled by another delivery, the run's end): read the log's tail and advance the workflow, so a
        ``first_successful`` whose winner ended elsewhere returns (and cancels this loser) without waiting for this
        body. Never raises: a failed read is retried next time, a failure of the replay is the loop's to handle
        once the body has ended (it is sticky, see ``WorkflowExecution.advance``)."""
        execution = self.log.replay()
        if step.done or step.future.cancelled():
            return True
        if self.provisional.alone(step):  # nothing else can change the workflow: only the run's end stops it
            return await run_ended(self.world, self.run_id)
        try:
            await self.log.reload_tail()
            execution.advance()
        except Exception as error:
            log.info("run %s: watching %s while it ran failed (%s)", self.run_id, step.id, type(error).__name__)
        return step.done or step.future.cancelled() or execution.terminal is not None
