"""The one delivery path: a queue record in, ``Worker.execute``, and what becomes of the record.

The Lambda flow handler and the local poller both hand every record to ``DeliveryPath.handle`` and only
differ in what they do with the answer, exactly as Lambda's event source mapping would: a record reported
as failed stays in the queue (its visibility already shortened to a back-off here) and comes back; any other
record is deleted by the caller. There is no second copy of this logic anywhere: a drift between two copies
once stranded runs on Lambda while every test (which ran the other copy) passed.

What ends where:

- A delivery the worker handles is acknowledged (its idempotency key released) or redelivered after the
  seconds the worker asks for. The delivery's message id goes to the worker, so a redelivered flow re-runs
  the steps its earlier delivery started and never finished.
- A record that can never succeed (not one of ours, no run id, a run that does not exist, a run id that is not
  one) goes to the dead-letter queue on its first receive, with one log line and no payload in it.
- A delivery for a run that has ended (cancelled, completed, failed) is acknowledged at once and never
  retried, whatever the World: the worker finds the end in the log (a flow) or its start refused (a step),
  and a delivery whose code is missing here reads the run's status first. This is the one place the rule is
  written, so both Worlds keep it.
- A workflow or step this deployment does not have is retried with back-off for
  ``AWSWORLD_UNKNOWN_WORKFLOW_WINDOW_SECONDS`` (15 minutes from the run's creation: a deploy may still be rolling
  out), then its run fails with ``UNKNOWN_WORKFLOW``, naming the workflow, the modules this process loaded and the
  nearest registered names, which ``Run.result()`` raises for the client to see. Meanwhile the run records what
  its deliveries find (attribute ``DELIVERY_FINDING``, written once), which ``describe`` shows. A workflow name
  that the deployment's publications make certainly unknown (``_published.model.judge``: no consumer registers it,
  and the newest publication came before its consumer's deliveries, as ``awsworld dev``'s does) fails its run at
  the first delivery instead. Under ``AWSWORLD_ON_DIVERGENCE=park`` a run that had started is parked instead of
  failed, past the window or at once when the name is certainly unknown (``_engine.parking``), so a deploy that
  lost a module, or an edit under ``awsworld dev`` that removed a workflow, fails no run in flight.
- Every log line about a delivery names its run (and step), in its text and as ``runId``/``stepId`` keys, so
  a line on a laptop's terminal and a JSON line in CloudWatch both lead back to the run.
- Anything else (a transient AWS error, a bug) fails this record only: its visibility is shortened to
  ``AWSWORLD_FAILURE_BACKOFF_SECONDS`` (10 s) doubling per receive up to 10 minutes, so a transient error is
  retried in seconds, not after the queue's 12-minute visibility timeout.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

from .._deployments.host import DeploymentHost
from .._deployments.pins import Misrouted, pin_of, pinned_run
from .._deployments.routing import delivery_target, handed_step_target, reads_step_pin
from .._engine.parking import mark, missing_code, parked_run
from .._http.push import is_push, push, sdk_run
from .._published.model import judge
from ..authoring.definitions import MODULES_ENV, StepNotRegisteredError, WorkflowNotRegisteredError
from ..authoring.errors import RUN_LIFETIME_EXCEEDED
from ..authoring.errors import UNKNOWN_WORKFLOW as UNKNOWN_WORKFLOW_CODE
from ..schedules.info import schedule_now, schedule_of, unknown_workflow_schedule_note
from ..settings import SETTINGS, Settings
from ..world.clock import clock_of
from ..world.entities import TERMINAL_RUN_STATUSES
from ..world.entities import Run as RunView
from ..world.errors import (
    EntityConflictError,
    InvalidInputError,
    RunGoneError,
    RunNotFoundError,
    StepNotFoundError,
)
from ..world.messages import WATCHDOG_WAKE, FlowMessage
from ..world.queue import Delivery
from ..world.rules.lifetime import lifetime_end, lifetime_failure
from .child_runs import resolve_step
from .dispatch import Outcome, Worker
from .flow_messages import queue_come_back
from .limiter import older_code
from .rerouting import Rerouting, Way
from .tick import is_tick, run_tick

log = logging.getLogger("awsworld.delivery")

BACKOFF_ENV = Settings.failure_backoff_seconds.env
UNKNOWN_WINDOW_ENV = Settings.unknown_workflow_window_seconds.env
DEFAULT_BACKOFF_SECONDS = Settings.failure_backoff_seconds.default
BACKOFF_MAX_SECONDS = 600
DEFAULT_UNKNOWN_WINDOW_SECONDS = Settings.unknown_workflow_window_seconds.default

# What a delivery can count; the Lambda observer reports these as CloudWatch metrics of the same names.
FLOW_DELIVERIES = "FlowDeliveries"
STEP_DELIVERIES = "StepDeliveries"
RUNS_STARTED = "RunsStarted"
DELIVERY_ERRORS = "DeliveryErrors"
UNKNOWN_WORKFLOW = "UnknownWorkflow"
MALFORMED_MESSAGES = "MalformedMessages"
REFUSED_MESSAGES = "RefusedMessages"
DEFERRED_HOPS = "DeferredHops"
DEAD_LETTERED = "DeadLettered"
QUEUE_LAG = "QueueLag"
PUSHED_DELIVERIES = "PushedDeliveries"  # messages POSTed to an app of another runtime (``_http/push.py``)
RUNS_WOKEN = "RunsWoken"  # by the watchdog: runs whose due passed with no write (a lost message, usually)
RUNS_STUCK = "RunsStuck"  # of those, runs woken again after a wake that brought no write (``_worker.watchdog``)

DELIVERY_FINDING = "awsworld.delivery"
"""The attribute a pending run of a workflow this deployment lacks carries: what its deliveries find (``describe``
shows it as what the run waits on)."""
MAX_FINDING_CHARS = 1000


class Skipped(Protocol):
    """A record that carried nothing to run (a long delay's early hop, another prefix's message, a body
    that is not ours). ``failure`` is why the caller must report it failed, or None when it is handled."""

    @property
    def kind(self) -> str: ...

    @property
    def failure(self) -> str | None: ...


class Consumer(Protocol):
    """The queue transport's consuming side (``awsworld.aws.queue.deliveries.QueueConsumer``)."""

    async def open(self, record: Mapping[str, Any]) -> Delivery | Skipped: ...

    async def ack(self, delivery: Delivery, *, delete_message: bool = True) -> None: ...

    async def redeliver_after(self, delivery: Delivery, seconds: float) -> None: ...

    def receive_count(self, record: Mapping[str, Any]) -> int: ...

    async def back_off(self, record: Mapping[str, Any], seconds: int) -> None: ...

    async def dead_letter(self, record: Mapping[str, Any], reason: str) -> bool: ...


class Observer(Protocol):
    """Where a delivery's counts, timings and log keys go (Powertools on Lambda; nowhere locally)."""

    def count(self, name: str, value: float = 1) -> None: ...

    def milliseconds(self, name: str, value: float) -> None: ...

    def bind(self, **keys: Any) -> None: ...

    def handled(self, outcome: Outcome) -> None: ...


class QuietObserver:
    """Counts nothing: the local poller's observer (a laptop has no CloudWatch)."""

    def count(self, name: str, value: float = 1) -> None:
        return None

    def milliseconds(self, name: str, value: float) -> None:
        return None

    def bind(self, **keys: Any) -> None:
        return None

    def handled(self, outcome: Outcome) -> None:
        return None


@dataclass(frozen=True)
class RecordResult:
    """What became of one record. ``failed``: report it to the event source as failed (it stays in the queue
    and comes back after the back-off already set on it); otherwise the caller deletes it."""

    status: str
    failed: bool = False


class PoisonRecordError(Exception):
    """A record that no retry can make succeed: it goes to the dead-letter queue on its first receive."""


@dataclass
class Track:
    """Which run (and step) the record being handled belongs to, once its message is read: every log line about
    the delivery names it, and so can a host that stops the delivery from outside (the invoker's timeout)."""

    run_id: str | None = None
    step_id: str | None = None
    message_id: str | None = None

    def label(self) -> str:
        """``run R step S`` (or ``run R``), or ``a record`` before its message was read."""
        if self.run_id is None:
            return "a record" if self.message_id is None else f"message {self.message_id}"
        return f"run {self.run_id}" + (f" step {self.step_id}" if self.step_id else "")

    def keys(self, **more: Any) -> dict[str, Any]:
        """The same ids as structured keys (``extra=``: JSON logs carry them as fields)."""
        keys = {"runId": self.run_id, "stepId": self.step_id, "messageId": self.message_id, **more}
        return {k: v for k, v in keys.items() if v is not None}


SAY_AGAIN_SECONDS = 60.0
"""How often a delivery path logs the same finding about the same run (``RepeatedFindings``)."""
FINDINGS_KEPT = 10_000


class RepeatedFindings:
    """What the deliveries of one run found about code this deployment lacks, said once per ``every`` seconds (of
    the process's own clock) with the count of the deliveries that found the same since. A fan-out queued before a
    step's rename (``dev`` restarted on the new code, say) is one message per step, each backing off: 200 queued
    steps printed some 1,600 identical lines in the unknown-code window. The run's recorded finding (``describe``)
    and the ``UnknownWorkflow`` metric still count each delivery."""

    def __init__(self, every: float = SAY_AGAIN_SECONDS) -> None:
        self.every = every
        self._said: dict[tuple[str, str], tuple[float, int]] = {}  # (run, finding) -> (said at, found since)

    def say(self, run_id: str, finding: str) -> str | None:
        """None: said less than ``every`` seconds ago (counted); else the suffix the line ends with ("" or how many
        deliveries found the same since it was last said)."""
        now, key = time.monotonic(), (run_id, finding)
        last = self._said.pop(key, None)
        if last is not None and now - last[0] < self.every:
            self._said[key] = (last[0], last[1] + 1)
            return None
        self._said[key] = (now, 0)
        while len(self._said) > FINDINGS_KEPT:
            del self._said[next(iter(self._said))]
        return f" ({last[1]} more deliveries of the run found the same since)" if last and last[1] else ""


def backoff_seconds(count: int) -> int:
    """Visibility for a failed record: the base after the first receive, doubling, at most 10 minutes."""
    base = SETTINGS.failure_backoff_seconds
    return int(max(0, min(BACKOFF_MAX_SECONDS, base * 2 ** max(0, min(count - 1, 16)))))


def unknown_window_seconds() -> float:
    return SETTINGS.unknown_workflow_window_seconds


class DeliveryPath:
    def __init__(self, worker: Worker, consumer: Consumer, observer: Observer | None = None,
                 host: DeploymentHost | None = None) -> None:
        """``host``: how this deployment reaches the others (``_deployments.host``), for a delivery of a run
        pinned to another one; None: it reaches none (such a delivery is treated as for a deployment gone)."""
        self.worker = worker
        self.consumer = consumer
        self.observer: Observer = observer or QuietObserver()
        self.host = host
        self.reroute = Rerouting(self)
        self.findings = RepeatedFindings()

    async def handle(self, record: Mapping[str, Any], deadline: float, track: Track | None = None, *,
                     handed: int | None = None) -> RecordResult:
        """Run one record to its end; never raises for a record's own failure (only ``BaseException`` that is
        not an ``Exception``, such as a cancellation, gets through). ``track`` is filled in with the record's run
        and step as soon as they are known (a host that stops the delivery names them). ``handed``: the record
        was handed to this deployment by another one (``_deployments.host``), re-routed that many times so far."""
        track = track if track is not None else Track()
        try:
            if is_tick(record):  # the schedule's tick: periodic jobs (the watchdog), no run of its own
                jobs = await run_tick(self.worker.world)
                self.observer.count(RUNS_WOKEN, float(jobs.get("watchdog", {}).get("woken", 0)))
                self.observer.count(RUNS_STUCK, float(jobs.get("watchdog", {}).get("stuck", 0)))
                log.info("tick handled", extra={"jobs": jobs})
                return RecordResult("tick")
            opened = await self.consumer.open(record)
            if not isinstance(opened, Delivery):
                return await self._skipped(record, opened)
            return await self._deliver(record, opened, deadline, track, handed)
        except PoisonRecordError as poison:
            return await self._dead_letter(record, str(poison), track)
        except Exception as error:
            self.observer.count(DELIVERY_ERRORS)
            log.warning("%s: record failed: %s: %s", track.label(), type(error).__name__, _short(error),
                        exc_info=error, extra=track.keys())
            return await self._failed(record, track)

    # -- outcomes ---------------------------------------------------------------------------------------

    async def _skipped(self, record: Mapping[str, Any], skipped: Skipped) -> RecordResult:
        self.observer.count({"deferred": DEFERRED_HOPS, "refused": REFUSED_MESSAGES}.get(skipped.kind,
                                                                                          MALFORMED_MESSAGES))
        if skipped.failure is None:
            return RecordResult(skipped.kind)
        log.warning("record failed (it names no run): %s", skipped.failure)
        return await self._failed(record, Track(), skipped.kind)

    async def _deliver(self, record: Mapping[str, Any], delivery: Delivery, deadline: float,
                       track: Track, handed: int | None = None) -> RecordResult:
        track.message_id = delivery.message_id
        if is_push(delivery.payload):  # a message for an app of another runtime (``awsworld serve``)
            return await self._push(record, delivery, track)
        try:
            message = FlowMessage.from_payload(delivery.payload)
        except ValueError as error:
            raise PoisonRecordError(str(error)) from None
        track.run_id, track.step_id = message.run_id, message.step_id
        self.observer.bind(messageId=delivery.message_id, runId=message.run_id, stepId=message.step_id,
                           workflow=message.workflow_name, attempt=delivery.attempt, wake=message.wake)
        self.observer.count(STEP_DELIVERIES if message.step_id else FLOW_DELIVERIES)
        lag = clock_of(self.worker.world).now() - delivery.created_at
        self.observer.milliseconds(QUEUE_LAG, lag.total_seconds() * 1000)
        if not message.step_id and delivery.attempt == 1 and (delivery.idempotency_key or "").endswith(":start"):
            self.observer.count(RUNS_STARTED)
        way = Way(record, delivery, message, track, max(message.reroutes, handed or 0))
        target = delivery_target(message.deployment, self.worker.deployment, handed=handed is not None)
        if target is not None:  # addressed to another deployment by its run's own flow: handed over unread
            return await self.reroute.hand_over(way, target)
        if message.step_id and reads_step_pin(message.deployment, self.worker.deployment, handed=handed is not None) \
                and (moved := await self._moved_since(message)) is not None:
            return await self.reroute.hand_over(way, moved)  # upgraded since it was queued: the new code runs it
        missing = self._missing_code(message)
        if missing is not None:
            run = await self._run(message)
            if (core := sdk_run(run)) is not None:  # the TypeScript runtime's run: its app has its code
                log.info("%s: run of the Workflow SDK's TypeScript runtime (@workflow/core %s), whose deliveries go "
                         "to its app: this flow message (%s) is acknowledged unread", track.label(), core,
                         message.wake or "no wake", extra=track.keys())
                await self.consumer.ack(delivery, delete_message=False)
                return RecordResult("sdk-run")
            pin = pin_of(run.attributes)
            if run.status not in TERMINAL_RUN_STATUSES and pin not in (None, self.worker.deployment) \
                    and self.worker.deployment is not None:
                return await self.reroute.hand_over(way, pin)  # its deployment has the code this one lacks
            if run.status not in TERMINAL_RUN_STATUSES:
                if message.step_id:
                    await self._step_of_run(message)
                return await self._unknown(record, delivery, message, missing, track, run)
            if message.step_id:
                return await self._ended(delivery, f"is {run.status}", track)
            # A flow message of an ended run needs no workflow code: the worker finds the end in the log and does
            # what a run's end asks (tell a parent), acknowledged as for any workflow.
        started = time.monotonic()
        try:
            # (handed over: this is older code than the live deployment's, whose limits' numbers it leaves alone)
            with older_code() if handed is not None else contextlib.nullcontext():
                outcome = await self.worker.execute(message, deadline=deadline, message_id=delivery.message_id,
                                                    attempt=delivery.attempt, sent_at=delivery.created_at)
        except Misrouted as misrouted:  # the flow read the run's pin in its log: another deployment's run
            return await self.reroute.hand_over(way, misrouted.pin)
        except StepNotRegisteredError as missing:  # the workflow called a step this deployment lacks
            run = await self._run(message)
            if run.status in TERMINAL_RUN_STATUSES:
                return await self._ended(delivery, f"is {run.status}", track)
            return await self._unknown(record, delivery, message, missing, track, run)
        except RunNotFoundError as error:
            raise PoisonRecordError(f"run {message.run_id} does not exist ({_short(error)})") from None
        except InvalidInputError as error:
            if error.field in ("runId", "run_id"):
                raise PoisonRecordError(f"not a run id ({_short(error)})") from None
            raise
        self.observer.handled(outcome)
        if outcome.ack:
            await self.consumer.ack(delivery, delete_message=False)
            action = "ack"
        else:
            await self.consumer.redeliver_after(delivery, outcome.retry_after or 0.0)
            action = f"redeliver in {outcome.retry_after}s"
        log.info("%s: delivery handled", track.label(), extra=track.keys(
            outcome=outcome.status, action=action, iterations=outcome.stats.iterations,
            inlineSteps=outcome.stats.inline_steps, queuedSteps=outcome.stats.queued_steps,
            durationMs=round((time.monotonic() - started) * 1000)))
        return RecordResult(outcome.status)

    async def _push(self, record: Mapping[str, Any], delivery: Delivery, track: Track) -> RecordResult:
        """POST a pushed message to its app (``_http/push.py``) and do what its answer says."""
        self.observer.count(PUSHED_DELIVERIES)
        result = await push(delivery)
        if result.outcome == "ack":
            await self.consumer.ack(delivery, delete_message=False)
            return RecordResult("pushed")
        if result.outcome == "redeliver":
            await self.consumer.redeliver_after(delivery, result.seconds)
            return RecordResult("push-redeliver")
        log.warning("%s: push failed: %s", track.label(), result.reason, extra=track.keys(outcome=result.outcome))
        if result.outcome == "gone":
            return await self._dead_letter(record, result.reason, track)
        return await self._failed(record, track, "push-failed")

    def _missing_code(self, message: FlowMessage) -> LookupError | None:
        registry = self.worker.registry
        try:
            registry.workflow(message.workflow_name)
            if message.step_id and message.step_name:
                resolve_step(registry, message.step_name)
        except LookupError as missing:
            return missing
        return None

    async def _run(self, message: FlowMessage) -> RunView:
        """The run, read for a delivery whose code is missing here (one read, on that path only): an ended run's
        delivery is acknowledged at once (a cancelled run must not be retried for the window), and the window
        counts from the run's creation."""
        try:
            return await self.worker.world.runs.get(message.run_id, resolve_data="none")
        except RunNotFoundError:
            raise PoisonRecordError(f"run {message.run_id} does not exist") from None

    async def _moved_since(self, message: FlowMessage) -> str | None:
        """The deployment a step message's run is pinned to now, when that is not this one
        (``_deployments.routing.handed_step_target``); None: run the step here. One read, for a step message of a
        pinned run only (``routing.reads_step_pin``; a run missing here is left to the path that follows, which
        says so)."""
        if self.worker.deployment is None:
            return None  # (no pinning here: nothing to hand on to)
        try:
            run = await self.worker.world.runs.get(message.run_id, resolve_data="none")
        except RunNotFoundError:
            return None
        return handed_step_target(pinned_run(run.status, run.attributes), self.worker.deployment)

    async def _step_of_run(self, message: FlowMessage) -> None:
        """A step message whose code is missing here must name a step its run has, under that name: else it is
        not the run's (forged, corrupted, another stack's), and waiting out the unknown-code window for it, then
        failing (or parking) the run, would end a healthy run over one bad record. One read, on that path only."""
        assert message.step_id is not None
        try:
            step = await self.worker.world.steps.get(message.run_id, message.step_id, resolve_data="none")
        except StepNotFoundError:
            raise PoisonRecordError(f"run {message.run_id} has no step {message.step_id}") from None
        if message.step_name and step.step_name != message.step_name:
            raise PoisonRecordError(f"step {message.step_id} of run {message.run_id} is {step.step_name!r}, "
                                    f"not {message.step_name!r}")

    async def _unknown(self, record: Mapping[str, Any], delivery: Delivery, message: FlowMessage,
                       missing: LookupError, track: Track, run: RunView) -> RecordResult:
        """Code this deployment lacks, for a run still going: back off while a deploy may still bring the code,
        and past the window fail the run for good.

        The window counts from the run's creation, not from this message's: a run is woken by messages of its
        own besides its start (the watchdog's, an operator's), and each must not open a window of its own. A
        watchdog wake inside the window is acknowledged rather than retried: the message it came to stand in
        for may still be backing off here, and the watchdog comes again (less often each time, ``world.watch``),
        so retrying the wake as well would only multiply the run's deliveries."""
        world = self.worker.world
        waited = (clock_of(world).now() - run.created_at).total_seconds()
        # A run a schedule started: the schedule, not its starter, names the workflow (and goes on naming it).
        info = schedule_of(run.execution_context) if isinstance(missing, WorkflowNotRegisteredError) else None
        scheduled = "" if info is None else unknown_workflow_schedule_note(
            run.execution_context, message.workflow_name, await schedule_now(world, info.schedule_id))
        what = _missing_text(missing, message) + scheduled
        self.observer.count(UNKNOWN_WORKFLOW)
        parks = run.started_at is not None and SETTINGS.on_divergence == "park"
        certain = await self._certainly_unknown(message, missing, named_by_starter=not scheduled)
        if certain is not None:  # no deploy is rolling out that may bring it: no window to wait out
            certain += scheduled
            if parks:  # a started run, under dev say, whose workflow an edit removed: parked at once, not failed
                return await self._park_missing(delivery, message, what, track, run)
            return await self._fail_unknown(delivery, message, certain, track)
        if waited < unknown_window_seconds():
            # What then: a run that has started is parked under the park policy, not failed (``_park_missing``).
            then = f"is parked ({Settings.on_divergence.env}=park)" if parks else f"fails with {UNKNOWN_WORKFLOW_CODE}"
            await self._record_finding(run, what, track, then)
            said = self.findings.say(run.run_id, what)
            if message.wake == WATCHDOG_WAKE:
                if said is not None:
                    log.error("%s: %s; the watchdog's wake is acknowledged (the watchdog comes again until the run "
                              "%s, %d s after it was created)%s", track.label(), what, then,
                              round(unknown_window_seconds()), said, extra=track.keys())
                await self.consumer.ack(delivery, delete_message=False)
                return RecordResult("unknown-workflow-wake")
            if said is not None:
                log.error("%s: record failed: %s; retried with back-off until a deploy provides it (for %d s after "
                          "the run was created), then the run %s%s", track.label(), what,
                          round(unknown_window_seconds()), then, said, extra=track.keys())
            return await self._failed(record, track)
        if parks:
            return await self._park_missing(delivery, message, what, track, run)
        return await self._fail_unknown(delivery, message, f"{_missing_text(missing, message)}; this deployment "
                                        f"still lacked it {round(waited)} s after the run was created (check "
                                        f"AWSWORLD_MODULES and the deployed code){scheduled}", track)

    async def _certainly_unknown(self, message: FlowMessage, missing: LookupError, *,
                                 named_by_starter: bool) -> str | None:
        """Why the run's workflow is certainly unknown to every consumer of the queue (the deployment's
        publications say so, ``_published.model.judge``), or None: then the window applies. One read, on this path
        only. ``named_by_starter`` False: a schedule named the workflow (``Verdict.error``)."""
        store = self.worker.world.published
        if store is None or message.step_id or not isinstance(missing, WorkflowNotRegisteredError):
            return None
        verdict = judge(message.workflow_name, await store.read())
        return str(verdict.error(message.workflow_name, named_by_starter=named_by_starter)) if verdict.sure else None

    async def _record_finding(self, run: RunView, what: str, track: Track, then: str) -> None:
        """Record on the run (as read for this delivery) what its delivery found, so ``describe`` says why it
        waits: once, since every delivery of the same code finds the same. Best effort: a refused write (the run
        ended meanwhile, say) changes nothing else."""
        until = run.created_at + timedelta(seconds=unknown_window_seconds())
        found = f"{what}; retried until {until.isoformat(timespec='seconds')}, then the run {then}"[:MAX_FINDING_CHARS]
        if run.attributes.get(DELIVERY_FINDING) == found:
            return
        try:
            await self.worker.world.runs.set_attributes(run.run_id, [{"key": DELIVERY_FINDING, "value": found}])
        except Exception as error:
            log.warning("%s: could not record what its delivery found: %s", track.label(), type(error).__name__,
                        extra=track.keys())

    async def _fail_unknown(self, delivery: Delivery, message: FlowMessage, text: str, track: Track
                            ) -> RecordResult:
        """Fail the run with ``UNKNOWN_WORKFLOW`` (its error's message ``text``) and acknowledge the delivery."""
        return await self.fail_run(delivery, message, {"name": "UnknownWorkflowError", "message": text},
                                   UNKNOWN_WORKFLOW_CODE, track, "unknown-workflow-failed")

    async def fail_run(self, delivery: Delivery, message: FlowMessage, error: dict[str, Any], code: str,
                       track: Track, status: str) -> RecordResult:
        """Fail the run with ``error`` and ``code`` and acknowledge the delivery (``status``: what became of it)."""
        world = self.worker.world
        try:
            await world.events.create(message.run_id, {
                "eventType": "run_failed", "eventData": {"error": error, "errorCode": code}})
        except (RunGoneError, EntityConflictError):
            # The run ended meanwhile (cancelled, say). Both refusals mean it: a World refuses a second end of a
            # run with a conflict, or with "gone" when the end raced this write.
            return await self._ended(delivery, "ended meanwhile", track)
        except RunNotFoundError:
            raise PoisonRecordError(f"run {message.run_id} does not exist") from None
        log.error("%s: run failed with %s: %s", track.label(), code, error["message"], extra=track.keys())
        await self.consumer.ack(delivery, delete_message=False)
        return RecordResult(status)

    async def _park_missing(self, delivery: Delivery, message: FlowMessage, what: str, track: Track,
                            run: RunView) -> RecordResult:
        """Under the park policy a run that has started is not failed for code this deployment lacks (a deploy that
        dropped a module, a renamed workflow): a bad deploy must not end every run in flight. It is marked parked
        (``_engine.parking``, once), this record is acknowledged, and it comes back every ``AWSWORLD_PARK_SECONDS``,
        so the deploy that restores the code resumes it (its flow clears the mark): by a delayed flow message within
        one queue message's reach, else by the watchdog's wake at the due left here (``flow_messages.queue_come_back``,
        as a diverged run comes back). The ``UnknownWorkflow`` metric and alarm count
        every such delivery."""
        world = self.worker.world
        now = clock_of(world).now()
        if now >= lifetime_end(run.created_at, run.execution_context):  # (no code to replay: ended as the flow would)
            return await self.fail_run(delivery, message, lifetime_failure(run.run_id, run.created_at,
                                                                           run.execution_context),
                                       RUN_LIFETIME_EXCEEDED, track, "lifetime-ended")
        earlier = parked_run(run.status, run.attributes)
        parked = missing_code(what, now).kept_since(earlier)
        seq = run.seq
        if not parked.same_place(earlier):
            try:
                written = await world.events.create(run.run_id, {"eventType": "attr_set",
                                                                 "eventData": {"changes": [mark(parked)]}})
            except (RunGoneError, EntityConflictError):
                return await self._ended(delivery, "ended meanwhile", track)
            seq = written.run.seq if written.run is not None else seq + 1
        seconds = SETTINGS.park_seconds
        due = await queue_come_back(world, FlowMessage(run.run_id, message.workflow_name), now, seconds)
        await self._park_due(run.run_id, due, seq, track)
        said = self.findings.say(run.run_id, f"parked: {what}")
        if said is not None:
            log.error("%s: %s; the run has started, so it is parked, not failed (%s=park): it comes back every %d s "
                      "until a deploy provides the code; `awsworld fail %s` ends it%s", track.label(), what,
                      Settings.on_divergence.env, round(seconds), run.run_id, said, extra=track.keys(outcome="parked"))
        await self.consumer.ack(delivery, delete_message=False)
        return RecordResult("parked")

    async def _park_due(self, run_id: str, due: datetime, seq: int, track: Track) -> None:
        """Leave a run parked for missing code its due (``world.watch.park_due``): when it comes back, the
        watchdog's wake being its redelivery beyond one message's reach. One conditional write, refused harmlessly
        when the run moved since it was read (the newer write's due stands, and the watchdog's wake then parks it
        again); best effort: a due left as it was costs wakes of the watchdog, never the run."""
        api = self.worker.world.watch
        if api is None:
            return
        try:
            await api.correct(run_id, due, seq=seq)
        except Exception as error:
            log.info("%s: setting the parked run's due failed (%s)", track.label(), type(error).__name__,
                     extra=track.keys())

    async def ended(self, delivery: Delivery, how: str, track: Track) -> RecordResult:
        return await self._ended(delivery, how, track)

    async def settled(self, delivery: Delivery, status: str) -> RecordResult:
        """Acknowledge the delivery: nothing more is to be done with it here (``status``: what became of it)."""
        await self.consumer.ack(delivery, delete_message=False)
        return RecordResult(status)

    def left_in_flight(self, status: str) -> RecordResult:
        """The record is another deployment's to finish (handed over): reported failed to the event source, so
        it is not deleted, and left as it is (no back-off: the receive belongs to the target now)."""
        return RecordResult(status, failed=True)

    async def _ended(self, delivery: Delivery, how: str, track: Track) -> RecordResult:
        """The rule for a delivery of a run that has ended: acknowledged, never retried."""
        log.info("%s: the run %s: its delivery is acknowledged, not retried", track.label(), how,
                 extra=track.keys(outcome="run-ended"))
        await self.consumer.ack(delivery, delete_message=False)
        return RecordResult("run-ended")

    async def _failed(self, record: Mapping[str, Any], track: Track, status: str = "error") -> RecordResult:
        """Shorten the record's visibility to the back-off (best effort: on error the queue's own visibility
        timeout applies) and report it failed."""
        try:
            await self.consumer.back_off(record, backoff_seconds(self.consumer.receive_count(record)))
        except Exception as error:
            log.warning("%s: could not shorten a failed record's visibility: %s", track.label(),
                        type(error).__name__, extra=track.keys())
        return RecordResult(status, failed=True)

    async def _dead_letter(self, record: Mapping[str, Any], reason: str, track: Track) -> RecordResult:
        self.observer.count(DEAD_LETTERED)
        if await self.consumer.dead_letter(record, reason):
            return RecordResult("dead-lettered")
        return await self._failed(record, track, "poison")


def _missing_text(missing: LookupError, message: FlowMessage) -> str:
    """What is missing, for the log and the run's error: an unknown workflow with the modules this process
    loaded (so a typo shows next to the real names), or an unknown step (which the workflow calls, when its own
    flow met it)."""
    if isinstance(missing, WorkflowNotRegisteredError):
        return f"no workflow named {missing.name!r} is registered here ({missing.loaded()}){missing.did_you_mean()}"
    if isinstance(missing, StepNotRegisteredError) and not message.step_id:
        return (f"workflow {message.workflow_name!r} calls step {missing.name!r}, which is not registered here "
                f"(its module was not imported where this deployment's code was: {MODULES_ENV}, or a test's "
                f"`Registry.capture()` block){missing.did_you_mean()}")
    return str(missing).strip("'\"")


def _short(error: BaseException) -> str:
    """An error's text for a log line, capped (it never carries a payload, but may carry a long id)."""
    return str(error)[:300]


__all__ = ["Consumer", "DeliveryPath", "Observer", "QuietObserver", "RecordResult", "Skipped", "Track",
           "backoff_seconds"]
