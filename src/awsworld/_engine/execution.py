"""One run's workflow code, replayed against its event log on a deterministic loop.

The log is consumed strictly in order; after every event the loop runs until idle, so the operations the
workflow declares depend only on the prefix of the log it has seen — which is what makes their ids (a
per-run counter in call order) and ``now()`` (the time of the last consumed event) the same on every replay.
The execution stays alive across iterations of one delivery: the flow appends the events it writes and calls
``advance`` again, so a serial workflow of N steps is replayed once, not N times. The flow may also append a
provisional event, an inline step's outcome it has not written yet (it writes it with what the workflow does
next); if that write fails, it drops the execution and replays a new one from the log.

Every event is checked against what the code declared at its position (``divergence``): a step by name and
input digest, a hook by token, a wait by its resume time; an event for a call the code did not make, or made as
something else, is a divergence too. A divergence raises ``ReplayDivergenceError`` before any value from the
mismatched event reaches the workflow.

``patched(change_id)`` is answered at a run's first call for that id and the answer holds for the rest of the
run: True when the log holds a marker for it (an ``attr_set`` event the flow wrote, key
``awsworld.patched.<change id>``, value the position of the call), False while replaying history recorded
without one, and True at the frontier of the log — recording a new marker, written before anything else the
flow writes, so no event that depends on the answer can land without it. "History" is what the code did
after the call's point: a call it had not declared yet, a hook it disposed, a step it cancelled, its end.
Bookkeeping (``run_started``, other markers) and outcomes of calls declared already (a step's result, a
hook's payload, a wait's end) are not: the code that recorded them need not have passed this point, so a
brand-new run's first statement is at the frontier though ``run_started`` follows ``run_created``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import hashlib
import hmac
import inspect
import os
import random
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from ..authoring.definitions import Registry, WorkflowDef
from ..authoring.durations import Duration, When, duration_text, parse_duration, resolve
from ..authoring.errors import (
    STEP_CANCELLED,
    CallNotAwaitedError,
    CodecError,
    DeterminismError,
    FatalError,
    HookConflictError,
    ReplayDivergenceError,
    RunLifetimeError,
    StepError,
    ValueTooLargeError,
    chain_stored_traceback,
    exit_contained,
)
from ..authoring.names import display_name
from ..authoring.poll_spec import PollSpec
from ..authoring.rebuilt_errors import rebuild
from ..authoring.runtime import MadeCall, StepRef, WorkflowMetadata, WorkflowRef, current_runtime, wakes_on
from ..durable import codecs, json_data, serde
from ..durable.class_paths import noting_classes
from ..durable.codecs import Codec, Place
from ..durable.hook_payloads import hook_failure, is_heartbeat
from ..durable.json_data import JSONValue
from ..world.errors import PayloadTooLargeError
from ..world.events import Event
from ..world.limits import (
    NUMBERS,
    encode_value,
    max_value_bytes,
    oversized_call,
    oversized_nested_call,
    too_large_text,
)
from ..world.rules import lifetime
from ..world.rules.leases import DEFAULT_LEASE_SECONDS, LEASE_UNTIL_FIELD, lease_end
from ..world.rules.skips import skipped
from . import divergence as dv
from . import hook_timeouts
from .children import ChildStart, start_child
from .ops import HookOp, Op, StepOp, WaitOp
from .replay_loop import ReplayLoop
from .time_scale import TimeScale, recorded_factor

DELIVERY_CONTEXT: list[contextvars.ContextVar[Any]] = []
"""Context variables a workflow body reads as the delivery running it now has them (``follow_deliveries``)."""
_UNSET = object()


def follow_deliveries(variable: contextvars.ContextVar[Any]) -> None:
    """Have workflow bodies read ``variable`` as the delivery that runs them has it. A body's task copies the
    context once, when it starts; a replay a worker keeps for the run's next delivery (``KeptReplays``) goes on
    in that copy, and would read the first delivery's value for good (the Lambda host's log keys: its lines
    would name a message handled long ago). Each ``advance`` sets the driving delivery's value in the body's
    context instead (``lambda_host/observability.py`` registers its log keys)."""
    if variable not in DELIVERY_CONTEXT:
        DELIVERY_CONTEXT.append(variable)


RUN_LEVEL_EVENTS = frozenset({"run_created", "run_started", "run_completed", "run_failed", "attr_set"})
CLOCK_FROM_START = "clockFromStart"
"""``executionContext.clockFromStart``: the run's clock starts at its ``run_started``, not its ``run_created``.
A start that may make the run wait for a slot (``_worker.run_limits.start_context``) records it: a run that waited
an hour for its slot once began with ``now()`` an hour old, so a ``sleep("10m")`` first thing ended at once. Only
runs that record it read it (a run started before keeps the clock its log was written with: its waits replay)."""
DECLARING_EVENTS = frozenset({"step_created", "wait_created", "hook_created", "hook_conflict"})
"""The events that record a call the code declared (a hook refused for its token is recorded as a conflict)."""
CODE_DECISIONS = frozenset({"hook_disposed", "run_completed", "run_failed"})
PATCH_MARKER_PREFIX = "awsworld.patched."
MAX_CHANGE_ID_LENGTH = 200
WAIT_TOLERANCE = timedelta(milliseconds=1)


class LogGapError(RuntimeError):
    """Events were appended out of order: the caller reloads the log from the store."""


class WorkflowExecution:
    # Slots, not an instance dict: the body's calls read these attributes many times a step, and CPython 3.11
    # keeps an instance's attributes in its fast compact form, their keys shared by the class, only up to 30 of
    # them (one more cost 13,400 instructions a step, 0.8%, in ``bench/testing.py --instructions``). Slots are as
    # fast whatever their number, and an attribute set by mistake outside this list is an AttributeError.
    __slots__ = ("_hooks", "_new", "_open_steps", "_open_waits", "attr_sets", "by_index", "calls", "classes",
                 "context", "counter", "cursor", "definition", "failure", "log", "loop", "markers", "max_value_bytes",
                 "now", "ops", "patch_answers", "pending_markers", "refused", "registry", "rng", "run_id", "seed",
                 "step_created", "task", "terminal", "undecoded")

    def __init__(self, run_id: str, definition: WorkflowDef, registry: Registry, seed: str, *,
                 max_value_bytes: int | None = None) -> None:
        """``max_value_bytes``: the bound of the World the run's flow writes to (``World.max_value_bytes``; None:
        not known here), for refusing a step's input over it before it is dumped (``declare_step``) and again
        where a replay's log goes past such a call (``_refuse_unrecordable``)."""
        self.run_id = run_id
        self.max_value_bytes = max_value_bytes
        self.definition = definition
        self.registry = registry
        self.seed = seed
        self.loop = ReplayLoop()
        self.ops: dict[str, Op] = {}
        self.by_index: dict[int, Op] = {}  # the run's call counter -> the op the code declared there
        self.markers: dict[str, int] = {}  # change id -> position of its first True answer (patched())
        self.pending_markers: dict[str, int] = {}  # answered True at the frontier, not yet recorded
        self.patch_answers: dict[str, bool] = {}  # each change id's answer, fixed by the run's first call
        # Kept incrementally (insertion-ordered dicts), so a suspension costs O(open ops), not O(all ops):
        # a serial run of N steps stays O(N) in one delivery.
        self._new: dict[str, Op] = {}
        self._open_steps: dict[str, StepOp] = {}
        self._open_waits: dict[str, WaitOp] = {}
        self._hooks: dict[str, HookOp] = {}
        self.log: list[Event] = []
        self.step_created: dict[str, Event] = {}  # step id -> its step_created in the log (``recorded_call``)
        self.attr_sets: list[Event] = []  # the log's attr_set events, in order (a parked mark: ``_engine.parking``)
        self.cursor = 0
        self.counter = 0
        self.now: datetime | None = None
        self.rng = random.Random(hashlib.sha256(f"{seed}:{run_id}".encode()).digest())
        self.task: asyncio.Task[Any] | None = None
        self.context = contextvars.Context()  # the body task's own (``_start``)
        self.terminal: str | None = None
        self.failure: BaseException | None = None  # what ``advance`` raised: raised again by every later call
        self.refused = False  # an op the World refused to record (``refuse``): a state no event in the log shows
        self.classes: dict[str, type] = {}  # the class paths its values were read with (``class_paths.noting_classes``)
        self.undecoded: list[tuple[Event, str, CodecError]] = []
        """The recorded values this replay's codecs refused (the event, the value's place, the error): raised where
        the body awaits them, as on every replay. When the replay then diverges, one is the likely cause (a codec
        changed since it decoded the value), and the divergence says so (``divergence.undecodable``)."""
        self.calls: list[MadeCall] = []
        """The step and child calls the body made (``WorkflowRuntime.calls``), checked when it returns."""

    # ------------------------------------------------------------------ the log

    def append(self, events: list[Event]) -> None:
        for event in events:
            if event.slot <= len(self.log):
                continue  # already held (a report can overlap what we appended)
            if event.slot != len(self.log) + 1:
                raise LogGapError(f"event at slot {event.slot} after {len(self.log)} events")
            self.log.append(event)
            if event.event_type == "step_created":
                self.step_created[event.correlation_id or ""] = event
            elif event.event_type == "attr_set":
                self.attr_sets.append(event)
                self._index_markers(event)

    def _index_markers(self, event: Event) -> None:
        for change in (event.event_data or {}).get("changes") or ():
            key, value = str(change.get("key") or ""), change.get("value")
            if key.startswith(PATCH_MARKER_PREFIX) and value is not None:
                try:
                    at = int(value)
                except ValueError:
                    continue
                change_id = key[len(PATCH_MARKER_PREFIX):]
                self.markers[change_id] = min(at, self.markers.get(change_id, at))

    def advance(self) -> None:
        """Consume every event not yet consumed, running the workflow until idle after each.

        A failure (a divergence, say) is sticky: the event that caused it is consumed already, so a second call
        must not carry on past it as if it had been applied. (The flow advances the workflow while an inline step
        runs, too, and leaves the failure to its main loop.)"""
        if self.failure is not None:
            raise self.failure
        try:
            with noting_classes(self.classes):  # (the body's task copies it when it starts: its reads are noted too)
                self._advance()
        except BaseException as failure:
            self.failure = failure
            raise

    def _advance(self) -> None:
        if self.task is None:
            self._start()
        else:
            for variable in DELIVERY_CONTEXT:  # (``follow_deliveries``: the body's context is not entered now)
                value = variable.get(_UNSET)
                if value is not _UNSET:
                    self.context.run(variable.set, value)
        # The determinism guard is on only while the replay loop runs workflow code (run_until_idle installs it):
        # applying an event runs none, and refuses nothing (no workflow task is running then), so it runs unhooked
        # rather than paying the profile hook on its every call.
        self.loop.run_until_idle()
        while self.cursor < len(self.log):
            event = self.log[self.cursor]
            self.cursor += 1
            while self._new and self._unmatched(event) and self._refuse_unrecordable():
                self.loop.run_until_idle()  # (at the time before this event: the body went on before it was made)
            self.now = event.created_at
            try:
                self._apply(event)
            except ReplayDivergenceError as diverged:
                if not self.undecoded or diverged.change == dv.UNREADABLE:
                    raise
                raise dv.undecodable(diverged, *self.undecoded[0]) from diverged
            self.loop.run_until_idle()

    def _start(self) -> None:
        if not self.log or self.log[0].event_type != "run_created":
            raise ReplayDivergenceError("the log does not start with run_created")
        first = self.log[0]
        self.now = self._body_starts_at(first)
        self.cursor = 1  # run_created is consumed by starting the body (positions count from after it)
        raw = (first.event_data or {}).get("input")
        # The body's first run: nothing but run-level events in the log (``all`` stops at the first call's event).
        fresh = all(event.event_type in RUN_LEVEL_EVENTS for event in self.log)
        call: json_data.Call | None = None
        if not fresh:  # a replay: the input was read before, so one the code cannot read now is the code's change
            try:
                call = self._input(raw)
            except serde.SerializationError as error:
                raise dv.unreadable("the run's input", first, str(self._input_place()), error) from error
            except Exception as error:  # a CodecError, arguments that do not bind: the body raises it again
                call = None
                if isinstance(error, CodecError):
                    self.undecoded.append((first, str(self._input_place()), error))
            if call is not None:
                unbound = _unbound(self.definition.fn, call)
                if unbound is not None:  # parameters changed since the run started: not a body that returned
                    raise dv.parameters(first, self.definition.name, *unbound, call)
        context = self.context = contextvars.copy_context()
        context.run(current_runtime.set, self)
        self.task = self.loop.create_task(self._body(raw, fresh, call), context=context)
        self.task.add_done_callback(self._body_ended)

    def _body_starts_at(self, first: Event) -> datetime:
        """``now()`` for the body's first statements: the run's creation, or (``CLOCK_FROM_START`` recorded) its
        ``run_started`` among the run-level events that lead the log (a run that waited for a slot starts then)."""
        context: object = (first.event_data or {}).get("executionContext")
        if isinstance(context, dict) and cast("dict[str, Any]", context).get(CLOCK_FROM_START) is True:
            for event in self.log[1:]:
                if event.event_type not in RUN_LEVEL_EVENTS:
                    break
                if event.event_type == "run_started":
                    return event.created_at
        return first.created_at

    def _body_ended(self, body: asyncio.Task[Any]) -> None:
        """The body returned or raised: cancel every task it left running (``map`` items still running when
        their batch completed, a task it never awaited), as ``asyncio.run`` does when its coroutine ends. As the
        body's done callback this runs at the same point of the log on every replay; the flow then records their
        open steps as cancelled before the run's end (``_worker/declarations.py``, ``Declarer.cancel_steps``)."""
        self.loop.cancel_tasks()

    def _input_place(self) -> Place:
        return Place("input", f"workflow {self.definition.name!r}", self.run_id)

    def _input(self, raw: Any) -> json_data.Call:
        return codecs.load_call(raw, self.definition.args_codec, self._input_place(), self.definition.fn)

    async def _body(self, raw: Any, fresh: bool, call: json_data.Call | None = None) -> Any:
        """The workflow called with its input, inside the task: arguments that do not fit its signature (a
        ``TypeError`` at the call) or an input that does not decode fail the run like any error the body
        raises, instead of failing every delivery of it forever.

        On the body's first run (``fresh``) the arguments are checked against its annotations too
        (``WorkflowDef.check_arguments``), for a start that could not check them (a client without the workflow's
        code, a schedule's tick): the run fails with that ``TypeError`` before the body runs. Never on a later
        replay: a run whose body has made a call was accepted, by whatever code started it, and goes on (``call``:
        its input, read by ``_start``, where one the code cannot read any more is a divergence)."""
        if call is None:
            call = self._input(raw)
        if fresh:
            self.definition.check_arguments(tuple(call.args), call.kwargs)
        try:
            result = await exit_contained(self.definition.fn(*call.args, **call.kwargs))  # sys.exit(): the run fails
        except BaseExceptionGroup as group:
            refusal = _refusal_in(group)
            if refusal is None:
                raise
            raise refusal from None
        self._check_awaited()
        return result

    def _check_awaited(self) -> None:
        """The body returned: a step or child call it made and never awaited (its coroutine never started, not
        even as a task) fails the run, naming the call and where it was made. Deterministic: the same calls are
        made, and left, on every replay."""
        never = [(kind, name, path, line) for call, kind, name, path, line in self.calls
                 if inspect.getcoroutinestate(call) == inspect.CORO_CREATED]
        if never:
            self._close_calls()
            if self.loop.refusal is not None:  # a refused timer, caught: wait_for(step(), 5) never ran the step
                raise DeterminismError(
                    f"{self.loop.refusal} (caught by the workflow, which then returned: "
                    + "; ".join(f"{kind}{f' {name!r}' if name else ''} called{_where(path, line)}"
                                for kind, name, path, line in never)
                    + " never ran)")
            raise CallNotAwaitedError(
                "; ".join(f"{kind}{f' {name!r}' if name else ''} was called{_where(path, line)} and never awaited"
                          for kind, name, path, line in never)
                + ": its call made a coroutine that nothing ran, so it did not run (write `await` before the call, "
                "or pass several calls to asyncio.gather)")

    def _close_calls(self) -> None:
        """Close the calls that never started: Python would warn of each when it is collected."""
        for call, *_ in self.calls:
            if inspect.getcoroutinestate(call) == inspect.CORO_CREATED:
                call.close()
        self.calls.clear()

    def _apply(self, event: Event) -> None:
        kind = event.event_type
        if kind in RUN_LEVEL_EVENTS:
            if kind in ("run_completed", "run_failed"):
                self.terminal = kind
            return
        if kind == "run_cancelled":
            self.terminal = kind
            return
        op = self._op_of(event)
        if op is None:
            parsed = dv.op_index(event.correlation_id)
            code_op = self.by_index.get(parsed[1]) if parsed else None
            raise dv.mismatch(event, code_op, self.done)
        data = event.event_data or {}
        if isinstance(op, StepOp):
            self._apply_step(op, kind, data, event)
        elif isinstance(op, WaitOp):
            if kind == "wait_created":
                if "resumeAt" in data:
                    logged = datetime.fromisoformat(data["resumeAt"])
                    # Written under a time scale, the wait ends that much sooner (``time_scale``): the log says.
                    declared = op.resume_at if op.declared_at is None else \
                        TimeScale(recorded_factor(data), op.declared_at).real(op.resume_at)
                    if abs(logged - declared) > WAIT_TOLERANCE:
                        raise dv.wait_mismatch(event, op, logged)
                    op.resume_at = logged
                self._created(op)
            elif kind == "wait_completed" and not op.done:
                op.done = True
                self._open_waits.pop(op.id, None)
                if not op.future.done():
                    op.future.set_result(None)
        else:
            self._apply_hook(op, kind, data, event)

    def _apply_step(self, op: StepOp, kind: str, data: dict[str, Any], event: Event) -> None:
        if kind == "step_created":
            if data.get("stepName") != op.definition.name:
                raise dv.calls("name", op, event, step_id=op.id)
            logged = data.get("inputDigest")
            if "input" in data and logged is None:
                logged = dv.input_digest(data["input"])  # a log from before digests, read with its inputs
            if logged is not None and logged != _digest(op):
                raise dv.calls("arguments", op, event, step_id=op.id)  # whose logged input tells all
            op.declared_at = event.created_at
            self._created(op)
        elif kind == "step_started":
            op.started = True
            op.attempt = int(data.get("attempt") or op.attempt + 1)
            op.retry_after = None
            op.owner = data.get("ownerMessageId")
            op.started_at = event.created_at
            lease = data.get(LEASE_UNTIL_FIELD)  # (an older event has none: the World's default lease applied)
            op.lease_until = datetime.fromisoformat(lease) if isinstance(lease, str) else \
                lease_end(event.created_at, DEFAULT_LEASE_SECONDS)
        elif kind == "step_retrying":
            op.started = False
            op.retry_after = datetime.fromisoformat(data["retryAfter"]) if data.get("retryAfter") else None
            if op.poll is not None and skipped(data) is None:  # (a skipped back-off is no poll's outcome)
                op.poll.progress.observe(data.get("error"))  # the next poll's state, the errors in a row
        elif kind in ("step_completed", "step_failed") and not op.done:
            op.done = True
            self._open_steps.pop(op.id, None)
            if op.future.done():
                return
            if kind == "step_completed":
                try:
                    value = codecs.load(data.get("result"), op.definition.codec, self._place(op, "result")) \
                        if op.poll is None else codecs.load(data.get("result"), op.poll.codec,
                                                            op.poll.place(self.run_id, op.id))
                except CodecError as error:  # the same data fails the same way on every replay
                    self.undecoded.append((event, error.place, error))
                    op.future.set_exception(error)
                except serde.SerializationError as error:  # a class of it changed: the code, not the data
                    raise dv.unreadable(dv.position(op.id), event, str(self._place(op, "result")()), error) \
                        from error
                else:
                    op.future.set_result(value)
            elif _error_of(data).get("code") == STEP_CANCELLED:
                # Recorded because the workflow cancelled its await: replay it as that cancellation, whatever
                # reached the log first (the code cancels the future at the same point, so this is a no-op then).
                op.future.cancel()
            else:
                error = _error_of(data)
                op.future.set_exception(chain_stored_traceback(rebuild(StepError, lambda kind: kind(
                    str(error.get("message", "step failed")), step_name=op.definition.name,
                    error_type=error.get("name"), qualified_type=error.get("type"), step_id=op.id,
                    attempt=op.attempt or None, stack=error.get("stack")), error.get("type"), error.get("name")),
                    error.get("stack"), f"the traceback of step {op.definition.name} (attempt {op.attempt or '?'})"))

    def _apply_hook(self, op: HookOp, kind: str, data: dict[str, Any], event: Event) -> None:
        token_differs = kind in ("hook_created", "hook_conflict") and "token" in data and data["token"] != op.token
        webhook_differs = kind == "hook_created" and bool(data.get("isWebhook")) != op.is_webhook
        if token_differs or webhook_differs:
            raise dv.calls("token", op, event)
        if kind == "hook_created":
            self._created(op)
        elif kind == "hook_conflict":
            self._created(op)
            op.disposed = True
            self._hooks.pop(op.id, None)
            op.fail(HookConflictError(op.token, str(data.get("conflictingRunId"))))
        elif kind == "hook_received":
            hook_timeouts.heard(self, op, event.created_at)  # a payload counts as a heartbeat
            if is_heartbeat(data.get("payload")):
                return
            failed = hook_failure(op.token, data.get("payload"))  # Client.fail_hook's envelope, never a user value
            if failed is not None:
                op.close(failed)
            else:
                try:
                    stored = serde.loads(data.get("payload"))
                except serde.SerializationError as error:  # a class of it changed: the code, not the data
                    raise dv.unreadable(dv.position(op.id), event, str(self._place(op, "payload")()), error) \
                        from error
                if op.codec is None:
                    op.deliver(stored)
                else:
                    try:
                        op.deliver(codecs.decode_payload(stored, op.codec, self._place(op, "payload")))
                    except CodecError as error:  # this payload's await raises it; the hook takes later ones
                        self.undecoded.append((event, error.place, error))
                        op.deliver_failure(error)
        elif kind == "hook_disposed":
            op.disposed = True
            self._hooks.pop(op.id, None)

    def note_undecoded(self, place: str, error: CodecError) -> None:
        """A recorded value this replay's codec refused, read where the event being applied settles it (a child's
        result, in its call's callback): noted with that event, as ``_apply_step`` notes a step's result."""
        if self.cursor > 0:
            self.undecoded.append((self.log[self.cursor - 1], place, error))

    def _place(self, op: StepOp | HookOp, what: str) -> Callable[[], Place]:
        """The place of ``op``'s ``what``, built only when a codec asks (``codecs.PlaceOf``)."""
        def place() -> Place:
            of = f"step {op.definition.name!r}" if isinstance(op, StepOp) else f"hook {op.token!r}"
            return Place(what, of, self.run_id, op.id)
        return place

    def _created(self, op: Op) -> None:
        op.created = True
        self._new.pop(op.id, None)
        if isinstance(op, StepOp) and not op.done:
            self._open_steps[op.id] = op
        elif isinstance(op, WaitOp) and not op.done:
            self._open_waits[op.id] = op
        elif isinstance(op, HookOp):
            self._hooks[op.id] = op

    # ------------------------------------------------------------------ declarations (from workflow code)

    def _next_id(self, kind: str) -> str:
        self.counter += 1
        return f"{kind}_{self.counter}"

    def patched(self, change_id: str) -> bool:
        """True for a run that reaches this call on code with the change, False while replaying history
        recorded before it; the first True answer is recorded, so the answer never flips for a run."""
        if type(change_id) is not str or not 0 < len(change_id) <= MAX_CHANGE_ID_LENGTH \
                or any(c.isspace() for c in change_id):
            raise ValueError(f"patched() needs a change id of 1 to {MAX_CHANGE_ID_LENGTH} characters without "
                             f"whitespace, got {change_id!r}")
        answer = self.patch_answers.get(change_id)
        if answer is None:  # the run's first call: its answer holds for every later call of the run
            if change_id in self.markers:
                answer = True  # recorded when the run first reached the call on new code
            elif self._history_ahead():
                answer = False  # history recorded without the change
            else:
                answer = True  # the frontier: new code; recorded before anything else the flow writes
                self.markers[change_id] = self.pending_markers[change_id] = self.cursor
            self.patch_answers[change_id] = answer
        return answer

    def replaying(self) -> bool:
        """Whether the code running now ran before (``WorkflowRuntime.replaying``): the log holds, past what the
        body has consumed, something it did after this point, the test ``patched`` answers False by."""
        return self._history_ahead()

    def _history_ahead(self) -> bool:
        """Whether the log holds, past what the workflow has consumed, something its code did after this point
        (see the module's doc): then the run was recorded by code that passed here without the change."""
        for event in self.log[self.cursor:]:
            kind = event.event_type
            if kind in DECLARING_EVENTS:
                if (event.correlation_id or "") not in self.ops:
                    return True
            elif kind in CODE_DECISIONS:
                return True
            elif kind == "step_failed" and _error_of(event.event_data or {}).get("code") == STEP_CANCELLED:
                return True  # the code cancelled its await of the step
        return False

    def take_markers(self) -> dict[str, int]:
        """The patch markers to record now (before anything else the flow writes)."""
        taken, self.pending_markers = self.pending_markers, {}
        return taken

    async def start_child(self, definition: WorkflowRef, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                          detached: bool, name: str | None = None, codec: Codec[Any] | None = None,
                          successor: bool = False, priority: int | None = None,
                          concurrency_key: str | None = None) -> ChildStart:
        """A child call at the next positions (``children``): its start step, then the hook its outcome comes
        back on."""
        return await start_child(self, definition, args, kwargs, detached=detached, name=name, codec=codec,
                                 successor=successor, priority=priority, concurrency_key=concurrency_key)

    def call_step(self, definition: StepRef, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                  poll: PollSpec | None = None, name: str | None = None) -> asyncio.Future[Any]:
        return self.declare_step(definition, args, kwargs, poll=poll, name=name).future

    def declare_step(self, definition: StepRef, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                     poll: PollSpec | None = None, name: str | None = None,
                     refusal: PayloadTooLargeError | None = None) -> StepOp:
        """Declare a step call at the next position without awaiting it (``call_step`` awaits it at once; a child
        workflow's start declares its step and then the hook its outcome comes back on, in one go). ``name``:
        the call's display name (``authoring.names``: recorded, never compared on replay). ``refusal``: the
        World's refusal of its input, found by its caller (``oversized_child_input``); else asked here."""
        shown = display_name(name)  # refused (InvalidNameError) before the call takes a position
        op_id = self._next_id("step")
        if refusal is None and self.max_value_bytes is not None:
            for value in args:  # (a call of numbers: a type check each, no call, under the determinism guard's hook)
                if value.__class__ not in NUMBERS:
                    refusal = self._oversized_input(definition, args, kwargs, op_id)
                    break
            else:
                if kwargs:
                    refusal = self._oversized_input(definition, args, kwargs, op_id)
        payload = None if refusal is not None else self._step_input(definition, args, kwargs, op_id)
        # The digest is taken when the op is declared or checked (``new_ops``, ``_apply_step``), outside the
        # determinism guard's profile hook: it reads only ``payload``, which no code can change.
        op = StepOp(op_id, definition, payload, self.loop.create_future(), poll=poll, name=shown,
                    wakes_on=wakes_on.get())
        self._declare(op)
        if refusal is not None:
            self.refuse(op, too_large(op, "input", refusal.message))
        return op

    def _oversized_input(self, definition: StepRef, args: tuple[Any, ...], kwargs: dict[str, Any],
                         op_id: str) -> PayloadTooLargeError | None:
        """The World's refusal of a new step call's input, found before the input is dumped
        (``limits.oversized_call``, against ``max_value_bytes``): a records list's copy and its JSON text cost
        4.4 times its size before the World refused them (``bench/oversized_values.py``). The call takes its
        position and is refused as the World's refusal is (``refuse``): no event, and every replay refuses it at
        the same point. Not asked of a call the log records (accepted when it was made, under whatever bound
        then) nor of one through an ``args_codec`` (stored as its codec's text, measured by the World)."""
        if definition.args_codec is not None or op_id in self.step_created:
            return None
        return oversized_call(args, kwargs, "eventData.input", self.max_value_bytes)

    def oversized_child_input(self, definition: WorkflowRef, args: tuple[Any, ...], kwargs: dict[str, Any],
                              start_args: tuple[Any, ...], start_kwargs: dict[str, Any]) -> PayloadTooLargeError | None:
        """``_oversized_input`` for a child call's start step at the next position, before the child's arguments
        are dumped (``start_args``: the start step's, None where they go; ``limits.oversized_nested_call``)."""
        if definition.args_codec is not None or f"step_{self.counter + 1}" in self.step_created:
            return None
        return oversized_nested_call(args, kwargs, start_args, start_kwargs, "eventData.input", self.max_value_bytes)

    def _step_input(self, definition: StepRef, args: tuple[Any, ...], kwargs: dict[str, Any], op_id: str) -> Any:
        """A step call's input as the log stores it (an args_codec's failure is a CodecError, raised at the call)."""
        try:
            return codecs.store_call(args, kwargs, definition.args_codec, definition.fn,
                                     lambda: Place("arguments", f"step {definition.name!r}", self.run_id, op_id))
        except serde.SerializationError as error:
            raise FatalError(f"arguments of step {definition.name} cannot be serialized: {error}") from None

    def recorded_call(self, definition: StepRef, args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
        """Whether the log records the next step position as this very call (the step's name, and its input's
        digest where the log has one): a call the run made before, on code that may have checked less. A check
        added since (a child's argument types, ``authoring.arguments``) lets it through, so the replay goes on as
        recorded; a call not recorded there is new, and checked. Deterministic: a call refused by the check
        takes no position, so on every replay the position holds another call (or none) and it is refused
        again."""
        op_id = f"step_{self.counter + 1}"
        event = self.step_created.get(op_id)
        if event is None:
            return False
        data = event.event_data or {}
        if data.get("stepName") != definition.name:
            return False
        logged = data.get("inputDigest")
        if logged is None and "input" in data:
            logged = dv.input_digest(data["input"])
        return logged is None or logged == dv.input_digest(self._step_input(definition, args, kwargs, op_id))

    async def sleep_until(self, resume_at: datetime, *, name: str | None = None) -> None:
        self._within_lifetime(resume_at, f"wait_{self.counter + 1}", "sleep()")  # (the id declare_wait gives it)
        await self.declare_wait(resume_at, name=name).future

    def _within_lifetime(self, ends_at: datetime, call_id: str, what: str) -> None:
        """Refuse a new wait that would end after the run's lifetime (``RunLifetimeError``, see there): before it
        takes a position, so the refused call is one the code never made, on every replay. The lifetime is the
        run's own (``world/rules/lifetime.py``: the limit its creation recorded), and a call the log records
        (``call_id``: written under a larger limit, before the record existed) is let through whatever the limit is
        by then; the log is searched only for a wait past the limit."""
        created = self.log[0].created_at
        context = lifetime.context_of(self.log[0].event_data)
        if ends_at < lifetime.lifetime_end(created, context) \
                or any(event.correlation_id == call_id for event in self.log):
            return
        after = duration_text((ends_at - created).total_seconds())
        raise RunLifetimeError(
            f"{what} would end at {ends_at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC, {after} after "
            f"run {self.run_id} was created: past the longest a run may stay running ({lifetime.limit_text(context)}),"
            " after which its oldest records expire while it waits. Raise MaxRunDays, or go on in a new run: start "
            "it with child_options(successor=True) and return")

    def declare_wait(self, resume_at: datetime, *, name: str | None = None) -> WaitOp:
        """A durable wait at the next position; its future completes with its ``wait_completed``."""
        shown = display_name(name)
        op = WaitOp(self._next_id("wait"), resume_at, self.loop.create_future(), declared_at=self.now, name=shown)
        self._declare(op)
        return op

    def declare_rearmed_wait(self, op_id: str, resume_at: datetime) -> WaitOp:
        """A wait declared while replaying an event, not by workflow code (a hook's re-armed heartbeat wait):
        its id comes from the event, not the call counter, so it takes no position of the code's. One abandoned
        before it was written (a later heartbeat in the same delivery, the hook disposed) is never written."""
        op = WaitOp(op_id, resume_at, self.loop.create_future(), declared_at=self.now, rearmed=True)
        self.ops[op.id] = op
        self._new[op.id] = op
        return op

    def declare_hook(self, token: str | None, metadata: Any, is_webhook: bool, codec: Codec[Any] | None = None, *,
                     name: str | None = None) -> HookOp:
        shown = display_name(name)
        hook_id = f"{self._next_id('hook')}_{self.run_id}"
        if token is None:
            token = self.derived_token(hook_id)
        try:
            stored = serde.dumps(metadata)
        except serde.SerializationError as error:
            raise FatalError(f"hook metadata cannot be serialized: {error}") from None
        op = HookOp(hook_id, token, stored, self.loop, is_webhook=is_webhook, codec=codec, name=shown)
        self._declare(op)
        return op

    def create_hook(self, token: str | None, metadata: Any, *, is_webhook: bool, codec: Codec[Any] | None = None,
                    name: str | None = None, timeout: When | None = None,
                    heartbeat_timeout: Duration | None = None, respond_with: JSONValue = None) -> HookOp:
        """``create_hook``/``create_webhook``: the hook at the next position, then its waits at the positions right
        after it (its timeout's, then its first heartbeat wait: ``hook_timeouts``). ``respond_with``: a webhook's
        answer as its ``hook_created`` records it (``authoring/webhook_responses.py``)."""
        now, hook_id = self.current_time(), f"hook_{self.counter + 1}_{self.run_id}"  # (the id declare_hook gives it)
        if timeout is not None:
            timeout = resolve(timeout, now, what="create_hook(timeout=...)")
            self._within_lifetime(timeout, hook_id, "create_hook(timeout=...)")
        if heartbeat_timeout is not None:
            self._within_lifetime(now + parse_duration(heartbeat_timeout, what="create_hook(heartbeat_timeout=...)"),
                                  hook_id, "create_hook(heartbeat_timeout=...)")
        op = self.declare_hook(token, metadata, is_webhook, codec, name=name)
        op.respond_with = respond_with
        if timeout is not None:
            hook_timeouts.arm(self, op, timeout)
        if heartbeat_timeout is not None:
            hook_timeouts.arm_heartbeat(self, op, heartbeat_timeout)
        return op

    def derived_token(self, hook_id: str) -> str:
        """Long and unguessable without the run's seed, and the same on every replay."""
        return hmac.new(self.seed.encode(), hook_id.encode(), hashlib.sha256).hexdigest()

    def _declare(self, op: Op) -> None:
        self.ops[op.id] = op
        self.by_index[self.counter] = op
        self._new[op.id] = op

    def refuse(self, op: Op, error: BaseException) -> None:
        """The World refused to record ``op`` for good (its input is over the value limit, say): the call
        raises ``error`` where the workflow awaits it. Replays refuse it the same way, so it stays
        deterministic without an event: the flow's declaration is refused again at the log's end, and where the
        log goes on past the call, the replay refuses it itself (``_refuse_unrecordable``)."""
        self.refused = True
        self._new.pop(op.id, None)
        if isinstance(op, HookOp):
            op.fail(error)
        elif not op.future.done():
            op.future.set_exception(error)

    def _op_of(self, event: Event) -> Op | None:
        """The code's call that a call's event records (its id and its kind), None when the code made no such call."""
        op = self.ops.get(event.correlation_id or "")
        return op if op is not None and op.kind == event.event_type.split("_", 1)[0] else None

    def _unmatched(self, event: Event) -> bool:
        """The event records a call the code has not made (yet): ``_apply`` raises a divergence for it unless the
        body goes on first (``_refuse_unrecordable``)."""
        kind = event.event_type
        return kind not in RUN_LEVEL_EVENTS and kind != "run_cancelled" and self._op_of(event) is None

    def _refuse_unrecordable(self) -> bool:
        """Refuse again the calls not in the log whose value the World refused to record (a step's input, a hook's
        metadata over the World's bound, ``max_value_bytes``, or this process's ``AWSWORLD_MAX_VALUE_BYTES`` when
        that is not known), when the log goes on past them: True if any. The flow declared them, was refused
        (``refuse``), and the body went on (a workflow may catch the
        ``ValueTooLargeError``) to calls the log records; a replay makes the same calls, blocked on calls with no
        event, and met those later events as a divergence. Checked only where an event finds no call of its
        own, so a replay pays nothing for it; a call with no event that is not over the bound is left to be
        the divergence it is."""
        limit = self.max_value_bytes if self.max_value_bytes is not None else max_value_bytes()
        refused = False
        for op in list(self._new.values()):
            value, what = (op.input, "input") if isinstance(op, StepOp) else \
                (op.metadata, "metadata") if isinstance(op, HookOp) else (None, "")
            if not what:
                continue
            try:
                encode_value(value, f"eventData.{what}", limit)
            except PayloadTooLargeError as refusal:
                self.refuse(op, too_large(op, what, refusal.message))
                refused = True
        return refused

    def current_time(self) -> datetime:
        assert self.now is not None
        return self.now

    def execution_context(self) -> dict[str, Any]:
        """The run's ``run_created`` executionContext (empty when it has none)."""
        created = (self.log[0].event_data or {}) if self.log else {}
        context = created.get("executionContext")
        return cast("dict[str, Any]", context) if isinstance(context, dict) else {}

    def workflow_metadata(self) -> WorkflowMetadata:
        """The run's identity, from its ``run_created`` (replay-stable)."""
        parent = self.execution_context().get("parentRunId")
        return WorkflowMetadata(self.run_id, self.definition.name, self.log[0].created_at,
                                parent if isinstance(parent, str) else None)

    def resume_at(self, duration: When) -> datetime:
        """The point in time ``duration`` names, a relative one measured from ``now()`` (replay-stable)."""
        return resolve(duration, self.current_time(), what="sleep()")

    # ------------------------------------------------------------------ what the flow asks

    @property
    def cancelled(self) -> bool:
        """The log records the run's cancellation (said by ``terminal``: no state of its own to keep in step)."""
        return self.terminal == "run_cancelled"

    @property
    def done(self) -> bool:
        return self.task is not None and self.task.done()

    def new_ops(self) -> list[Op]:
        """Ops to declare. A step or a sleep the workflow cancelled before the flow could declare it (in the same run
        until idle) is never declared: nothing awaits it, and every replay cancels it at the same point again. Nor is a
        re-armed heartbeat wait abandoned before it was written (every replay abandons it the same way). Nor is
        anything once the body has ended: the flow writes the run's end instead (``_worker/inline_loop.py``), so a
        ``map`` item that started in the replay where its batch decided, and slept, or a hook a task created as the
        body returned, is never written, and ``client.replay`` checks a completed log against the same list."""
        if self.done:
            return []
        for op in [op for op in self._new.values() if (isinstance(op, StepOp) and op.future.cancelled())
                   or (isinstance(op, WaitOp) and ((op.hook is None and op.future.cancelled())
                                                   or (op.rearmed and op.abandoned)))]:
            del self._new[op.id]
        for op in self._new.values():
            if isinstance(op, StepOp) and op.digest is None:
                _digest(op)
        return list(self._new.values())

    def pending_steps(self) -> list[StepOp]:
        return list(self._open_steps.values())

    def cancelled_steps(self) -> list[StepOp]:
        """Steps in the log and not ended there whose await the workflow cancelled (``task.cancel()``, a
        ``first_successful`` loser): the flow records their end as cancelled, and stops their bodies."""
        return [op for op in self._open_steps.values() if op.future.cancelled()]

    def pending_waits(self) -> list[WaitOp]:
        """Open waits something still awaits (a cancelled sleep, a disposed hook's timeout: no wake-up)."""
        return [op for op in self._open_waits.values() if op.live]

    def live_hooks(self) -> list[HookOp]:
        """Hooks created and not disposed: another writer may record a ``hook_received`` for any of them."""
        return list(self._hooks.values())

    def disposals(self) -> list[HookOp]:
        return [op for op in self._hooks.values() if op.dispose_requested and not op.disposed]

    def close(self) -> None:
        if self.task is not None and not self.task.done():
            self.task.cancel()
            self.loop.run_until_idle()
        self._close_calls()  # (a body suspended before awaiting a call it made: its later replay awaits it)
        self.loop.close()


def too_large(op: Op, what: str, detail: str | None) -> ValueTooLargeError:
    """The error a call whose value the World refused raises where the workflow made it: the call by its name (a
    step's, a hook's token) and its id, and the size against the bound, without the wire field. The flow raises
    it when the World refuses the declaration (``_worker/declarations.py``), a replay when the log goes on past
    the call (``WorkflowExecution._refuse_unrecordable``): the same words."""
    if isinstance(op, StepOp):
        call = f"step {op.definition.name!r} ({op.id})"
    elif isinstance(op, HookOp):
        call = f"hook {op.token!r} ({op.id})"
    else:
        call = op.id
    return ValueTooLargeError(too_large_text(f"the {what} of {call}", detail))


def _unbound(fn: Callable[..., Any], call: json_data.Call) -> tuple[str, TypeError] | None:
    """``fn``'s parameters and why a run's recorded arguments do not bind to them (None: they bind). A replay
    calls the workflow with the input its start recorded, so a parameter added without a default (or one
    removed) since makes the body raise at once: a divergence, said as what it is (``divergence.parameters``)."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):  # no signature to check: the call itself says
        return None
    try:
        signature.bind(*call.args, **call.kwargs)
    except TypeError as error:
        bare = signature.replace(parameters=[p.replace(annotation=p.empty) for p in signature.parameters.values()],
                                 return_annotation=inspect.Signature.empty)
        return str(bare), error
    return None


def _refusal_in(group: BaseExceptionGroup[BaseException]) -> DeterminismError | None:
    """The first refusal in an exception group the body let through: a refusal raised in a task group's task
    (``asyncio.TaskGroup``, anyio's under httpx) reaches the body wrapped in one, and the run fails with the
    refusal, which says what to do, rather than with "unhandled errors in a TaskGroup"."""
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            error = _refusal_in(cast("BaseExceptionGroup[BaseException]", error))
        if isinstance(error, DeterminismError):
            return error
    return None


def _where(path: str, line: int) -> str:
    """`` at FILE, line 12`` (the caller's file relative to the working folder when under it), or nothing."""
    if not path:
        return ""
    with contextlib.suppress(ValueError):
        relative = os.path.relpath(path)
        path = path if relative.startswith("..") else relative
    return f" at {path}, line {line}"


def _error_of(data: dict[str, Any]) -> dict[str, Any]:
    """A ``step_failed``'s (or ``step_retrying``'s) ``error`` record; empty when it has none."""
    error: dict[str, Any] = data.get("error") or {}
    return error


def _digest(op: StepOp) -> str:
    """The step's input digest (``dv.input_digest`` of its serialized input), taken once."""
    if op.digest is None:
        op.digest = dv.input_digest(op.input)
    return op.digest
