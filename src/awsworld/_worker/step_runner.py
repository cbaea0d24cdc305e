"""Running one attempt of a step: claim it (step_started), run the body, record the outcome.

``attempt_step`` claims and runs the body and builds the outcome event without writing it; ``record_end`` is
the one place that writes an outcome on its own (out of band, patient); ``run_step`` is the two together, as a
queued step message runs. A flow running a step inline may instead record the outcome in its next write, with
the declarations the workflow made after seeing it (see ``flow``), and falls back to ``record_end``.

The claim is the liveness check: the World refuses step_started on a finished run, so a queued step never
needs to read the run first. Retries follow the step's ``RetryPolicy``, whose ``max_attempts`` counts every
started attempt: one that failed, and one that was cut off (its delivery died, its lease passed) and so was
started again as the next attempt. Each start names ``maxAttempts``, and the World refuses to start a step over
an unfinished attempt that was its last (``world.rules.at_most_once``): that attempt is recorded failed
(``interrupted_end``) and the step fails "after N attempts", N being the attempts that really started. The time
of the next attempt (back-off and jitter applied) is chosen here and recorded in ``step_retrying``'s
``retryAfter``, so a replay reads it rather than computing it again.

A step with a ``timeout`` runs its body as a task that is cancelled when the time is up; the attempt then fails
with ``StepTimeoutError`` (retryable). A body that swallows the cancellation gets ``CANCEL_GRACE_SECONDS`` more
to stop and is then left behind (logged): the timeout is recorded anyway, so the run never hangs on it.

A step the workflow cancels (``task.cancel()`` on its await, a ``first_successful`` loser) has its end recorded
by the flow as a ``step_failed`` marked cancelled (``errors.STEP_CANCELLED``). The body is stopped where it runs:
inline, the flow's ``watch`` (it advances the workflow while the body runs) says so; queued, ``status_watch``
reads the step's status every ``check_seconds()`` and finds it ended. Either way the body is cancelled
(``CancelledError`` at its next await) and nothing of the attempt is recorded (``cancelled``): the cancellation
is the step's one end. A queued message for a step not started yet finds it ended (``step_started`` is refused
with 409) and never runs it.

An at-most-once step (``@step(semantics="at_most_once")``) asks for its starts with ``atMostOnce``: where the
World finds its current attempt started but unfinished (a redelivery after a crash, a take-over past the lease)
it refuses the start, and ``interrupted_end`` records that attempt failed with ``StepInterruptedError`` (retried
per its policy) instead of running the body again (``world.rules.at_most_once``). Any step's last attempt found
unfinished ends the same way, as failed.

A poll (``poll_until``: ``poll`` given) is judged here too: a result the predicate rejects is recorded as
``step_retrying`` at the next poll's time (see ``poll``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from .._engine.time_scale import TimeScale
from ..authoring.definitions import Registry, StepDef
from ..authoring.errors import (
    BodyCancelledError,
    BodyExitError,
    CodecError,
    FatalError,
    StepInterruptedError,
    StepTimeoutError,
    ValueTooLargeError,
    cancel_contained,
    exit_contained,
)
from ..authoring.poll_spec import ATTEMPTS_EXHAUSTED, POLL_NOT_READY, STATE_FIELD, TIMED_OUT, PollSpec
from ..authoring.retry import seeded
from ..authoring.step_context import StepContext, StepMetadata, current_step
from ..durable import codecs, serde
from ..durable.codecs import Place
from ..settings import SETTINGS, Settings
from ..world.clock import clock_of
from ..world.entities import TERMINAL_RUN_STATUSES, TERMINAL_STEP_STATUSES, Step
from ..world.errors import (
    EntityConflictError,
    PayloadTooLargeError,
    RunGoneError,
    StepAttemptInterruptedError,
    StepNotFoundError,
    StepRunningElsewhereError,
    TooEarlyError,
)
from ..world.events import Event, EventResult
from ..world.limits import oversized, too_large_text
from ..world.messages import FlowMessage
from ..world.protocol import World
from ..world.rules.at_most_once import AT_MOST_ONCE_FIELD, INTERRUPTED_FIELD, MAX_ATTEMPTS_FIELD
from ..world.rules.leases import LEASE_SECONDS_FIELD, lease_seconds
from ..world.rules.limiters import LimitInputError
from . import step_limits
from .child_runs import resolve_step
from .cut_off import CANCEL_GRACE_SECONDS, cut_off_reason
from .error_shapes import log_retry, structured_error
from .step_limits import Taken

CHECK_SECONDS_ENV = Settings.step_check_seconds.env
DEFAULT_CHECK_SECONDS = Settings.step_check_seconds.default
"""A running attempt asks whether its step ended under it at most this often (a queued one: one metadata-only
``steps.get``), so a step the workflow cancelled stops within about this long, and a shorter step never asks."""

log = logging.getLogger("awsworld.steps")

Status = Literal["completed", "failed", "retry", "gone", "finished-already", "too-early", "running-elsewhere",
                 "cancelled", "waiting"]
"""``cancelled``: the attempt was stopped because its step ended under it (the workflow cancelled it), or its run
did (cancelled, failed on request); nothing of the attempt is recorded: the step's end is the cancellation already
in the log, or the run's. ``waiting``: the step's limit
(``step_limits``) had no slot or token for it: not started, its message brings it back."""
Watch = Callable[[], Awaitable[bool]]
"""Asked every ``check_seconds()`` while a body runs: True when its step has ended elsewhere (stop the body)."""


@dataclass
class StepOutcome:
    status: Status
    events: list[Event]
    retry_after: float = 0.0
    attempt: int = 0
    open_steps: int | None = None


INLINE = "inline"
"""``step_started``'s mark of an attempt the flow ran in its replay loop (see ``start_event``)."""


def start_event(step_id: str, definition: StepDef, poll: PollSpec | None, owner: str | None, *, inline: bool,
                deadline: float | None, taken: Taken | None = None) -> dict[str, Any]:
    """The ``step_started`` request that claims an attempt of ``definition``, on every path (a queued step, an
    inline one, the flow's born-running batch). Its data: the delivery's message id (``ownerMessageId``: a
    redelivery of that message may start the step again, see ``attempt_step``), the lease it asks for
    (``leaseSeconds``: how long it may still report about the attempt; past it, another delivery may take the
    step over, ``world.rules.leases``), the attempts its policy allows (``maxAttempts``: the World does not start
    the step over an unfinished last attempt) and ``"inline": true`` when the flow runs the attempt in its replay
    loop rather than a step message of its own. Only the inline path is marked: a fan-out queues N-1 steps and
    runs one inline, so the common case costs no bytes, and an event without the mark (every older one too)
    reads as queued. The run viewer shows it; nothing in the runtime reads it back. ``limit`` (a limited step,
    ``step_limits``): the limit and key that let it start, and when it was admitted. ``atMostOnce``: the World
    refuses to start the step over any unfinished attempt (``world.rules.at_most_once``). A poll's check is at
    least once whatever its step says, and its attempts are the polls, bounded by the poll's timeout rather than
    by a retry policy: it asks for neither."""
    data: dict[str, Any] = {"ownerMessageId": owner} if owner else {}
    lease = step_lease(definition, deadline)
    if lease is not None:
        data[LEASE_SECONDS_FIELD] = lease
    if poll is None:
        data[MAX_ATTEMPTS_FIELD] = definition.retry.max_attempts
        if definition.at_most_once:
            data[AT_MOST_ONCE_FIELD] = True
    if inline:
        data[INLINE] = True
    if taken is not None:
        data[step_limits.LIMIT_FIELD] = taken.recorded()  # which limit let it start, and when
    return {"eventType": "step_started", "correlationId": step_id, "eventData": data}


def step_lease(definition: StepDef, deadline: float | None) -> float | None:
    """The lease a delivery with budget ``deadline`` (``time.monotonic()``) asks for when it starts ``definition``
    (``world.rules.leases.lease_seconds``): None without a deadline (the World's default lease applies)."""
    if deadline is None:
        return None
    return lease_seconds(step_timeout=definition.timeout, budget_left=deadline - time.monotonic(),
                         cancel_grace=CANCEL_GRACE_SECONDS)


StepEndKind = Literal["step_completed", "step_failed", "step_retrying"]


@dataclass
class StepEnd:
    """A step attempt's outcome, built and not yet written: ``step_completed``, ``step_failed`` or
    ``step_retrying`` with the data the log stores. ``events`` are the ones its claim wrote (step_started)."""

    step_id: str
    kind: StepEndKind
    data: dict[str, Any]
    attempt: int
    events: list[Event]
    retry_after: float = 0.0  # seconds, for step_retrying
    taken: Taken | None = None
    """A queued attempt's slot (``attempt_step(hold=True)``): given back once the outcome is in the log
    (``record_end``), so a redelivery after a crash between the body and its record runs the body again in its
    slot, never waits for a slot while its own attempt is started."""
    step_name: str | None = None
    """The step's name, for a completed one: a result the log refuses as too large is named by it, as every
    other refused value is (``the result of step 'x' (step_1)``), not by its id alone."""

    @property
    def request(self) -> dict[str, Any]:
        return {"eventType": self.kind, "correlationId": self.step_id, "eventData": self.data}

    @property
    def status(self) -> Status:
        return _STATUS[self.kind]


_STATUS: dict[str, Status] = {"step_completed": "completed", "step_failed": "failed", "step_retrying": "retry"}


async def run_step(world: World, registry: Registry, run_id: str, step_id: str, step_name: str, *,
                   in_band: int | None = None, on_in_band: Any = None, owner: str | None = None,
                   claimed: EventResult | None = None, call_input: Any = None,
                   poll: PollSpec | None = None, deadline: float | None = None,
                   message: FlowMessage | None = None, redelivered: bool = False) -> StepOutcome:
    """``owner`` is the delivery's message id, recorded on step_started so a redelivery of the same message
    knows the step is its own to run again (``redelivered``: this is one, see ``attempt_step``); ``deadline``
    (the delivery's budget) sets the attempt's lease.
    ``claimed`` is a step_started already written (a step declared born running in the flow's batch). The
    outcome is written out of band (``record_end``). The body is stopped if its step ends under it (the workflow
    cancelled it: ``status_watch``)."""
    attempt = await attempt_step(world, registry, run_id, step_id, step_name, in_band=in_band,
                                 on_in_band=on_in_band, owner=owner, claimed=claimed, call_input=call_input,
                                 poll=poll, watch=status_watch(world, run_id, step_id), deadline=deadline,
                                 message=message, hold=True, redelivered=redelivered)
    if isinstance(attempt, StepOutcome):
        return attempt
    return await record_end(world, run_id, attempt)


def attempt_step(world: World, registry: Registry, run_id: str, step_id: str, step_name: str, *,
                 in_band: int | None = None, on_in_band: Any = None, owner: str | None = None,
                 claimed: EventResult | None = None, call_input: Any = None,
                 poll: PollSpec | None = None, watch: Watch | None = None,
                 inline: bool = False, deadline: float | None = None,
                 message: FlowMessage | None = None, taken: Taken | None = None,
                 hold: bool = False, redelivered: bool = False) -> Coroutine[Any, Any, StepOutcome | StepEnd]:
    """Claim the step and run its body: the outcome to record (``StepEnd``, not written yet), or a
    ``StepOutcome`` saying why the body did not run (gone, finished already, running elsewhere, too early,
    ``waiting`` for a slot or a token of its limit: ``message``, the step's message, brings it back) or was
    stopped (``cancelled``: ``watch`` said its step ended under it).
    ``poll``: the step is a ``poll_until`` and this attempt one poll, judged by its predicate. ``inline``: the
    flow runs it in its replay loop (recorded on step_started, see ``start_event``). ``taken``: the slot and token
    its limit gave a step declared born running (``claimed``). The slot is given back once the body has ended, or,
    with ``hold`` (a queued step's message), once its outcome is recorded (``record_end``): a redelivery of that
    message after a crash in between finds the slot still its own and runs the body again in it. An attempt
    refused because another delivery runs the step (``running-elsewhere``) gives nothing back: the slot is the
    step's (``step_holder``), held for the attempt that runs; giving it back let a second body in beside that one
    and left that attempt's own redelivery (after a crash) waiting for a slot while no delivery could run its
    step (the run stranded: the limits crash sweep's k=150). Nor does an attempt that raised (k=97): its
    redelivery runs it in the same slot, or the slot's lease frees it.

    ``redelivered``: a queued step's message delivered before under this message id (``Delivery.attempt`` > 1).
    Its step may have ended already, and the earlier delivery gone on with the run (``dispatch.Worker._step``)
    and started steps inline under this message id before it died: only a delivery with that id may run them
    while their lease runs. So a limited step's redelivery looks at its step before asking its limit: one that
    ended is ``finished-already`` (``step_limits.ended_already``: its slot, if still held, freed) and goes on
    with the run as itself, rather than wait for a slot, which ends
    this delivery and brings the step back under the limit's new message id, owner of nothing (the run
    stranded: a slot's wake for a step another delivery ran, which went on, started ``leave`` and died).

    A step without a limit has nothing to take or give back: its attempt is ``_attempt`` itself, handed to the
    caller's ``await`` without a coroutine around it (the hot path of every unlimited step)."""
    definition = resolve_step(registry, step_name)
    if definition.limit is None and taken is None:
        return _attempt(world, definition, run_id, step_id, step_name, in_band=in_band, on_in_band=on_in_band,
                        owner=owner, claimed=claimed, call_input=call_input, poll=poll, watch=watch, inline=inline,
                        deadline=deadline, refused=None, taken=None)
    return _limited_attempt(world, definition, run_id, step_id, step_name, in_band=in_band, on_in_band=on_in_band,
                            owner=owner, claimed=claimed, call_input=call_input, poll=poll, watch=watch,
                            inline=inline, deadline=deadline, message=message, taken=taken, hold=hold,
                            redelivered=redelivered)


async def _limited_attempt(world: World, definition: StepDef, run_id: str, step_id: str, step_name: str, *,
                           in_band: int | None, on_in_band: Any, owner: str | None, claimed: EventResult | None,
                           call_input: Any, poll: PollSpec | None, watch: Watch | None, inline: bool,
                           deadline: float | None, message: FlowMessage | None, taken: Taken | None, hold: bool,
                           redelivered: bool) -> StepOutcome | StepEnd:
    """``attempt_step`` of a limited step: its slot and token taken first (``step_limits.take``), given back once
    its body has ended (or, with ``hold``, once its outcome is recorded)."""
    refused: LimitInputError | None = None
    if claimed is None and definition.limit is not None and poll is None and message is not None:
        try:
            if redelivered and await step_limits.ended_already(world, definition, run_id, step_id):
                return StepOutcome("finished-already", [])
        except StepNotFoundError:
            return StepOutcome("gone", [])
        try:
            key = await step_limits.step_key(world, definition, run_id, step_id, call_input)
        except LimitInputError as bad:
            refused = bad  # started, then failed without its body: nothing is taken under a key that is none
        else:
            verdict = await step_limits.take(world, definition, run_id, step_id, key, wake=message,
                                             lease_seconds=step_lease(definition, deadline))
            if verdict == step_limits.ENDED:
                return StepOutcome("gone", [])  # its run has ended: nothing taken
            if not isinstance(verdict, Taken):
                return StepOutcome("waiting", [])
            taken = verdict
    # An attempt that raises keeps its slot (its lease bounds it): its start may have landed (an error after the
    # write), and then only this message's redelivery may run the step while its lease runs; it finds the slot
    # its own. Given back here, the redelivery waited for one, and the limit's wake under a new id was refused
    # the step: the run stranded (the limits crash sweep's k=97).
    attempt = await _attempt(world, definition, run_id, step_id, step_name, in_band=in_band,
                             on_in_band=on_in_band, owner=owner, claimed=claimed, call_input=call_input,
                             poll=poll, watch=watch, inline=inline, deadline=deadline, refused=refused,
                             taken=taken)
    if hold and isinstance(attempt, StepEnd):
        attempt.taken = taken  # given back once the outcome is recorded
    elif not (isinstance(attempt, StepOutcome) and attempt.status == "running-elsewhere"):
        # (Refused because another delivery runs the step: the slot is the step's, that attempt's to give back.)
        await step_limits.give_back(world, taken)
    return attempt


async def release_slot(world: World, end: StepEnd) -> None:
    """Give back the slot of an attempt whose outcome is in the log (or will never be written: dropped)."""
    taken, end.taken = end.taken, None
    await step_limits.give_back(world, taken)


async def _attempt(world: World, definition: StepDef, run_id: str, step_id: str, step_name: str, *,
                   in_band: int | None, on_in_band: Any, owner: str | None, claimed: EventResult | None,
                   call_input: Any, poll: PollSpec | None, watch: Watch | None, inline: bool,
                   deadline: float | None, refused: LimitInputError | None,
                   taken: Taken | None) -> StepOutcome | StepEnd:
    """``attempt_step`` once its slot and token are held: start, run the body (``refused``: fail without it)."""
    start_kwargs: dict[str, Any] = {}
    if in_band is not None:
        start_kwargs = {"in_band": True, "expected_seq_in_band": in_band}
    started = claimed
    if started is None:
        event = start_event(step_id, definition, poll, owner, inline=inline, deadline=deadline, taken=taken)
        try:
            started = await world.events.create(run_id, event, **start_kwargs)
        except RunGoneError:
            return StepOutcome("gone", [])
        except StepRunningElsewhereError:
            return StepOutcome("running-elsewhere", [])
        except StepAttemptInterruptedError as cut_off:
            return interrupted_end(world, definition, step_id, cut_off.attempt,
                                   *await _attempt_times(world, run_id, step_id, cut_off.attempt))
        except EntityConflictError:
            return StepOutcome("finished-already", [])
        except TooEarlyError as early:
            return StepOutcome("too-early", [], retry_after=early.retry_after)
        except StepNotFoundError:
            return StepOutcome("gone", [])
    if claimed is None and on_in_band is not None and started.seq_in_band is not None:
        # (A claim from the flow's batch was counted there; its count may be stale by now: the flow wrote since.)
        on_in_band(started.seq_in_band)
    step = started.step
    assert step is not None and started.event is not None
    events = [] if claimed is not None else [*started.events, started.event]
    if refused is not None:
        return StepEnd(step_id, "step_failed", {"error": structured_error(refused)}, step.attempt, events)
    raw_input = call_input if call_input is not None else step.input
    try:  # an args_codec's failure fails the step at once (CodecError: never retried), its body unrun
        call = codecs.load_call(raw_input, definition.args_codec,
                                lambda: Place("arguments", f"step {step_name!r}", run_id, step_id), definition.fn)
    except CodecError as error:
        return StepEnd(step_id, "step_failed", {"error": structured_error(error)}, step.attempt, events)
    metadata = StepMetadata(run_id, step_id, step_name, step.attempt, step.started_at)
    context = StepContext(world, metadata)
    token = current_step.set(context)
    accepted = True
    try:  # context.run: the chunks the body wrote to streams are durable before its outcome is recorded
        body = cancel_contained(exit_contained(definition.fn(
            *(call.args if poll is None else poll.arguments(call.args, run_id, step_id)), **call.kwargs)))
        result = await context.run(_supervised(body, definition, watch))
        # A result over the World's bound is refused before it is dumped (and before the flow decodes it to show
        # its workflow: ``provisional.py``), as it would be once written: the step fails for good.
        too_large = oversized(result, "eventData.result", world.max_value_bytes) \
            if poll is None and definition.codec is None else None
        if too_large is not None:
            completed = StepEnd(step_id, "step_completed", {}, step.attempt, events, step_name=step_name)
            return _too_large_end(completed, too_large)
        try:  # (a codec's failure is a CodecError: a FatalError, so the step fails at once)
            place: codecs.PlaceOf = (lambda: Place("result", f"step {step_name!r}", run_id, step_id)) \
                if poll is None else poll.place(run_id, step_id)
            encoded = codecs.store(result, definition.codec if poll is None else poll.codec, place)
        except serde.SerializationError as error:
            raise FatalError(f"the result of step {step_name} cannot be serialized: {error}") from None
        if poll is not None:
            accepted = _accepts(poll, result, step_name)
    except _StepEnded:
        return StepOutcome("cancelled", events, attempt=step.attempt)
    except FatalError as error:
        return StepEnd(step_id, "step_failed", {"error": structured_error(error)}, step.attempt, events)
    except BodyExitError as exited:  # sys.exit() in the body: the SystemExit is the attempt's error
        return _failed_attempt(world, definition, step, exited.exit, events, poll)
    except BodyCancelledError as raised:  # CancelledError the body raised itself: the attempt's error too
        return _failed_attempt(world, definition, step, raised.cancelled, events, poll)
    except Exception as error:  # a step body may raise anything: retried per its policy
        return _failed_attempt(world, definition, step, error, events, poll)
    finally:
        current_step.reset(token)
    if not accepted:
        assert poll is not None
        return _rejected_poll(world, poll, step, events, encoded)
    return StepEnd(step_id, "step_completed", {"result": encoded}, step.attempt, events, step_name=step_name)


class _StepEnded(Exception):
    """The attempt was stopped because its step ended elsewhere (the workflow cancelled it), or its run did."""


def check_seconds() -> float:
    """How often a running attempt asks whether its step has ended under it (``AWSWORLD_STEP_CHECK_SECONDS``)."""
    return SETTINGS.step_check_seconds


def status_watch(world: World, run_id: str, step_id: str) -> Watch:
    """A queued attempt's check: has its step ended (a flow recorded its cancellation), or its run (cancelled,
    failed on request)? Two metadata-only reads."""

    async def ended() -> bool:
        try:
            step = await world.steps.get(run_id, step_id, resolve_data="none")
        except Exception as error:  # a failed check is not a reason to stop a body: look again next time
            log.info("step %s of run %s: status check failed (%s)", step_id, run_id, type(error).__name__)
            return False
        return step.status in TERMINAL_STEP_STATUSES or await run_ended(world, run_id)

    return ended


async def run_ended(world: World, run_id: str) -> bool:
    """Whether run ``run_id`` has ended (cancelled, or failed on request, while a step of it runs): its running
    bodies are stopped, as the docs promise a cancel does (docs/concepts/steps-and-workflows.md). One
    metadata-only read; a failed read says no (the next check looks again)."""
    try:
        run = await world.runs.get(run_id, resolve_data="none")
    except Exception as error:
        log.info("run %s: status check failed (%s)", run_id, type(error).__name__)
        return False
    return run.status in TERMINAL_RUN_STATUSES


async def _supervised(body: Coroutine[Any, Any, Any], definition: StepDef, watch: Watch | None) -> Any:
    """The step body, cancelled if it outlives the step's timeout (then ``StepTimeoutError``) or if ``watch``,
    asked every ``check_seconds()`` while it runs, says its step has ended (then ``_StepEnded``). Without either
    the body is simply awaited: a short step pays nothing.

    With either, the body runs as its own task, never in the caller's: a body that swallows its cancellation is
    left behind after ``CANCEL_GRACE_SECONDS`` (``_stop``), which a body awaited in the delivery's own task would
    hold up, and inside the body ``asyncio.current_task()`` (what ``asyncio.timeout`` and ``asyncio.TaskGroup`` in
    a body cancel) is the body's, not the delivery's. What is saved is the wait for it: the caller first yields one
    turn of the loop (``asyncio.sleep(0)``), in which the body's first step runs before the caller's (the loop
    runs its callbacks in the order they were scheduled), so a body that returns without suspending, as a quick
    step does, is done when the caller looks, after one turn. Waiting for its end instead (``_done_by``) took
    three: the body's step, its done callback, the caller's wake-up. ``bench/testing.py --instructions``: 1,734,156
    instructions per step on Python 3.11, 1,688,741 with the turn; on 3.13, 2,345,086 and 2,297,539. (Started
    eagerly, ``asyncio.Task(eager_start=True)`` on 3.12+, a quick body would be done with no turn at all, 2,256,409
    on 3.13; but then an in-memory World's delivery running steps inline never gives its loop a turn until its
    budget ends, where a test's other tasks, a cancel among them, ran between any two steps: the promises this
    keeps are ``tests/runtime/test_step_body_task.py``'s.)"""
    if definition.timeout is None and watch is None:
        return await body
    loop = asyncio.get_running_loop()
    task = loop.create_task(body)  # copies the context: the body still sees its step
    deadline = None if definition.timeout is None else loop.time() + definition.timeout
    interval = check_seconds()
    next_check = None if watch is None else loop.time() + interval
    try:
        await asyncio.sleep(0)  # the body's first step runs in this turn, before this task goes on
        while True:
            wake = min(t for t in (deadline, next_check) if t is not None)
            if await _done_by(task, wake):
                if deadline is not None and loop.time() > deadline + CANCEL_GRACE_SECONDS:
                    _blocked(definition, loop.time() - deadline)
                return task.result()
            if deadline is not None and loop.time() >= deadline:
                await _stop(task, definition, f"after its timeout of {definition.timeout:g} s")
                raise StepTimeoutError(f"step {definition.name} ran longer than its timeout of "
                                       f"{definition.timeout:g} s: the attempt was cancelled")
            if watch is not None and next_check is not None and loop.time() >= next_check:
                if await watch():
                    await _stop(task, definition, "once its step had ended")
                    raise _StepEnded(definition.name)
                next_check = loop.time() + interval
    finally:
        if not task.done():  # the attempt itself was cancelled (the delivery is stopping): stop the body too
            task.cancel()


async def _done_by(task: asyncio.Future[Any], wake_at: float) -> bool:
    """Whether ``task`` is done when this returns: once it is, or at loop time ``wake_at`` (it is never cancelled
    here). ``asyncio.wait({task}, timeout=...)`` for one task, cheaper: every step body that outlives its first
    turn (``_supervised``) is awaited this way. The timer for ``wake_at`` is armed only after the task's next turn
    (the ready callback queued behind it: a cancelled body's, ``_stop``), so a task that ends in that turn puts no
    timer on the loop's heap (with ``asyncio.wait``'s own sets and checks, 2% of what a serial step cost in the
    test environment: ``bench/testing.py --instructions``)."""
    if task.done():
        return True
    loop = task.get_loop()
    waiter: asyncio.Future[None] = loop.create_future()

    def wake(_: object = None) -> None:
        if not waiter.done():
            waiter.set_result(None)

    timer: asyncio.TimerHandle | None = None

    def arm() -> None:
        nonlocal timer
        if not task.done():
            timer = loop.call_at(wake_at, wake)

    first_turn = loop.call_soon(arm)
    task.add_done_callback(wake)
    try:
        await waiter
    finally:
        first_turn.cancel()
        if timer is not None:
            timer.cancel()
        task.remove_done_callback(wake)
    return task.done()


def _blocked(definition: StepDef, past: float) -> None:
    """The body ended ``past`` seconds after its timeout without being cancelled: it never awaited meanwhile (a
    CPU loop, ``time.sleep``, a blocking client), so its outcome stands and the timeout is not recorded. Said,
    because the step's ``timeout`` promised otherwise, and the body held up every other one of its process."""
    assert definition.timeout is not None
    log.warning("step %s ran %.1f s past its timeout of %g s without an await where it could be cancelled (a "
                "blocking call, such as time.sleep or a synchronous client, holds up every step and run of this "
                "process: use its async form, or asyncio.to_thread); its outcome is kept", definition.name, past,
                definition.timeout)


async def _stop(task: asyncio.Future[Any], definition: StepDef, why: str) -> None:
    """Cancel the body and give it ``CANCEL_GRACE_SECONDS`` to stop; a body that swallows the cancellation is left
    behind (logged), so the attempt never hangs on it."""
    task.cancel()
    if not await _done_by(task, task.get_loop().time() + CANCEL_GRACE_SECONDS):
        log.warning("step %s ignored its cancellation %s; abandoned", definition.name, why)
        task.add_done_callback(_discard_outcome)
    elif not task.cancelled():
        task.exception()  # whatever it ended with is superseded (and counts as retrieved)


def _discard_outcome(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()


def _accepts(poll: PollSpec, result: Any, step_name: str) -> bool:
    """The predicate's verdict; an exception from it is a bug in the workflow, not a condition: fatal."""
    try:
        return bool(poll.predicate(result))
    except Exception as error:
        raise FatalError(f"the predicate of poll_until({step_name}) raised {type(error).__name__}: {error}") from error


def _failed_attempt(world: World, definition: StepDef, step: Step, error: BaseException,
                    events: list[Event], poll: PollSpec | None) -> StepEnd:
    """The end of an attempt whose body raised: ``step_retrying`` at the policy's next time, or ``step_failed``
    when the error does not retry or the attempts are spent (a poll: when its deadline has passed)."""
    end = _attempt_end(world, definition, step, error, events, poll)
    if end.kind == "step_retrying":  # the news a person watching `awsworld dev` needs now, not at the run's end
        log_retry(step.run_id, definition.name, step.step_id, step.attempt, definition.retry.max_attempts,
                  end.data["error"], str(end.data["retryAfter"]), end.retry_after)
    return end


def _attempt_end(world: World, definition: StepDef, step: Step, error: BaseException,
                 events: list[Event], poll: PollSpec | None) -> StepEnd:
    policy = definition.retry
    step_id = step.step_id
    failed = StepEnd(step_id, "step_failed", {"error": structured_error(error)}, step.attempt, events)
    if not policy.retries(error):
        return failed
    now = clock_of(world).now()
    draw = seeded(step.run_id, step_id, str(step.attempt))  # the jitter, fixed by the attempt (see ``retry``)
    if poll is not None:  # the polls are the attempts; the policy's max_attempts bounds polls raising in a row
        if poll.progress.errors_in_a_row + 1 >= policy.max_attempts:
            return failed
        raised = f"the last poll raised {type(error).__name__}: {error}"
        if poll.exhausted(step.attempt):
            return _poll_ended(ATTEMPTS_EXHAUSTED, step_id, step.attempt, events, raised)
        scale = _time_scale(step.created_at)  # a poll's schedule and timeout count from its call
        logical = scale.logical(now)
        at = poll.next_poll(step.attempt, logical, policy.retry_at(error, step.attempt, logical, rand=draw)
                            if getattr(error, "retry_after", None) is not None else None)
        if at is None:
            return _poll_ended(TIMED_OUT, step_id, step.attempt, events, raised)
        return _retrying(step_id, structured_error(error), at, now, step.attempt, events, scale)
    if step.attempt >= policy.max_attempts:  # every attempt counts, one cut off before this one too
        return failed
    return _retrying(step_id, structured_error(error), policy.retry_at(error, step.attempt, now, rand=draw), now,
                     step.attempt, events, _time_scale(now))


async def _attempt_times(world: World, run_id: str, step_id: str,
                         attempt: int) -> tuple[datetime | None, datetime | None]:
    """When the step's unfinished ``attempt`` began and when its lease ends, read from the World (a queued step's
    delivery found it cut off and has no log to read them from); (None, None) when the read fails or the step has
    moved on."""
    try:
        step = await world.steps.get(run_id, step_id, resolve_data="none")
    except Exception:  # (only the error's wording depends on it)
        return None, None
    if step.status != "running" or step.attempt != attempt:
        return None, None
    return step.updated_at, step.lease_until


def interrupted_end(world: World, definition: StepDef, step_id: str, attempt: int,
                    started_at: datetime | None = None, lease_until: datetime | None = None) -> StepEnd:
    """The end of an attempt found started but unfinished where the World refused to start the step over it
    (``world.rules.at_most_once``): an at-most-once step's, or any step's last allowed attempt. Failed with
    ``StepInterruptedError``, retried as its policy says (a new attempt, with a durable start of its own) while
    attempts are left. The body is not run. The end names the attempt, so it lands only while that attempt is
    the running one. ``started_at`` and ``lease_until``: the attempt's start and lease, when known, say how long
    its delivery could run it and whether the flow function's timeout cut it off (``cut_off.cut_off_reason``)."""
    policy = definition.retry
    why = cut_off_reason(definition.timeout, started_at, lease_until)
    if definition.at_most_once:
        error = StepInterruptedError(f"attempt {attempt} of at-most-once step {definition.name} was started but "
                                     f"never finished ({why}); its body is not run again")
    else:
        error = StepInterruptedError(f"attempt {attempt} of step {definition.name} was started but never finished "
                                     f"({why}), and its retry policy allows {policy.max_attempts} attempt(s)")
    log.warning("%s", error)
    data: dict[str, Any] = {"error": structured_error(error), INTERRUPTED_FIELD: attempt}
    if not policy.retries(error) or attempt >= policy.max_attempts:
        return StepEnd(step_id, "step_failed", data, attempt, [])
    now = clock_of(world).now()
    return _retrying(step_id, data["error"], policy.retry_at(error, attempt, now), now, attempt, [],
                     _time_scale(now), data)


def _rejected_poll(world: World, poll: PollSpec, step: Step, events: list[Event], encoded: Any) -> StepEnd:
    """A result the predicate rejected: the next poll at its time (with the result as its state, for a poll with
    state), or the poll's end when a limit is reached."""
    step_id, attempt = step.step_id, step.attempt
    rejected = "the last result did not satisfy the predicate"
    if poll.exhausted(attempt):
        return _poll_ended(ATTEMPTS_EXHAUSTED, step_id, attempt, events, rejected)
    now = clock_of(world).now()
    scale = _time_scale(step.created_at)  # a poll's schedule and timeout count from its call
    at = poll.next_poll(attempt, scale.logical(now))
    if at is None:
        return _poll_ended(TIMED_OUT, step_id, attempt, events, rejected)
    error: dict[str, Any] = {"message": f"poll {attempt}: {poll.not_ready}", "name": POLL_NOT_READY}
    if poll.stateful:
        error[STATE_FIELD] = encoded
    return _retrying(step_id, error, at, now, attempt, events, scale)


def _poll_ended(kind: str, step_id: str, attempt: int, events: list[Event], detail: str) -> StepEnd:
    """The poll failed on a limit: ``PollTimeoutError`` (its timeout) or ``PollAttemptsExhaustedError``."""
    why = "timed out" if kind == TIMED_OUT else "ran out of attempts"
    error = {"message": f"poll_until {why} after {attempt} polls ({detail})", "name": kind}
    return StepEnd(step_id, "step_failed", {"error": error}, attempt, events)


def _retrying(step_id: str, error: dict[str, Any], at: datetime, now: datetime, attempt: int,
              events: list[Event], scale: TimeScale, data: dict[str, Any] | None = None) -> StepEnd:
    """``step_retrying`` for a next attempt due at ``at`` by the workflow's durations: under a time scale, that
    much sooner, the factor recorded (``_engine.time_scale``)."""
    real = scale.real(at)
    recorded = scale.mark({**(data or {}), "error": error, "retryAfter": real.isoformat()})
    return StepEnd(step_id, "step_retrying", recorded, attempt, events,
                   retry_after=max(0.0, (real - now).total_seconds()))


def _time_scale(anchor: datetime | None) -> TimeScale:
    """This worker's time scale (``AWSWORLD_TIME_SCALE``), counted from ``anchor``."""
    return TimeScale(SETTINGS.time_scale, anchor or datetime.now(UTC))


async def record_end(world: World, run_id: str, end: StepEnd) -> StepOutcome:
    """Write a step's outcome on its own, out of band and patient (a lost result would run the body again): the
    one place an outcome is recorded when it does not ride in the flow's next write. A 409 means someone
    recorded the step's end first; a 410 that the run ended before an interrupted attempt's end could land; a
    result or error too large for the log fails the step for good."""
    try:
        # The event with its value (the flow replays it), not the step's input: no read of its block.
        result = await world.events.create(run_id, end.request, after_step_body=True,
                                           resolve_data="skip-step-inputs")
    except EntityConflictError:
        await release_slot(world, end)
        return StepOutcome("finished-already", end.events, attempt=end.attempt)
    except RunGoneError:
        # Only the end of an attempt found cut off (``interrupted_end``) is refused so: the run ended since this
        # delivery judged it (world/rules/at_most_once.py interrupted_end_of). Nothing more is recorded for the
        # run, and the delivery ends as gone (acknowledged), not retried.
        await release_slot(world, end)
        return StepOutcome("gone", end.events, attempt=end.attempt)
    except PayloadTooLargeError as too_large:
        if end.kind == "step_failed":
            raise  # even the error does not fit (structured_error caps it, so this does not happen)
        # Running the body again would produce the same value: fail the step for good, with an error the
        # workflow can catch (StepError with error_type "ValueTooLargeError"), instead of a re-run loop.
        return await record_end(world, run_id, _too_large_end(end, too_large))
    assert result.event is not None
    await release_slot(world, end)
    return StepOutcome(end.status, [*end.events, result.event], retry_after=end.retry_after, attempt=end.attempt,
                       open_steps=result.open_steps)


def _too_large_end(end: StepEnd, too_large: PayloadTooLargeError) -> StepEnd:
    """The step_failed that replaces an outcome whose result (or error) the log refused as too large."""
    step = f"step {end.step_name!r} ({end.step_id})" if end.step_name else f"step {end.step_id}"
    error = ValueTooLargeError(too_large_text(
        f"the {'result' if end.kind == 'step_completed' else 'error'} of {step}", too_large.message))
    return StepEnd(end.step_id, "step_failed", {"error": structured_error(error)}, end.attempt, end.events,
                   taken=end.taken)
