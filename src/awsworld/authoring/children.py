"""Child workflows: a ``@workflow`` called (or passed to ``start_child``) inside a workflow runs as a run of its own.

Built only from operations the World contract already has (no new event type, no new storage):

1. A **step**, ``awsworld.start_child``, starts the child. The child's run id is derived from the parent's run
   id and the step's id (its call position), never drawn at random, so starting is idempotent: ``run_created``
   for an id that exists returns that run and writes nothing. A retry after a crash between the child's
   ``run_created`` and the step's outcome finds the same run (and wakes it, in case the crash came before the
   wake). A replay declares the same step id, so it can never start a second child. The step's result is the
   child's run id.
2. A **hook** on the parent, token ``awsworld.child:<child run id>``, declared in the same call, takes the
   child's outcome. The child's flow, once it sees its run ended, resumes that hook with ``{"status", "result"
   | "error"}`` through ``Client.resume_hook_outcome`` (the same code a client resumes a hook with) under the
   idempotency key ``awsworld.child:<child run id>``: however many deliveries observe the end, the parent
   receives it once. The parent awaits that hook; once it has received, the hook is disposed (a live hook would
   keep the run's later inline steps from riding the flow's next write).
3. ``start_child`` returns the handle once the start step has completed, i.e. once the child run exists and is
   woken. A workflow that returns right after a call it never awaited ends without the flow writing that call,
   so a handle returned before the start would make "leave it running" a promise the runtime cannot keep.

A step and a hook rather than a new event type: the contract's existing rules (a step's at-least-once body made
idempotent by its input, ``run_created``'s idempotent ids, hook tokens, ``resumeId`` dedup, the terminal-run
fence on ``step_started``) already give every guarantee a child needs, on every World, with nothing to migrate.
Runs in flight that called a workflow from a workflow before this existed (its body then ran inline) diverge
at that call on replay: guard such a change with ``patched()``.

Why the races are safe:

- *The child ends before the parent's hook exists*: it cannot. The flow writes every declaration of an
  iteration (steps and waits in a batch, then hooks) before it queues or runs any step (``Flow._loop`` runs
  ``_declare`` until nothing is new, and only then ``_dispatch``), and a replay that finds the step declared
  but not the hook declares the hook again before dispatching. So the step's body, which starts the child,
  runs only once the hook is in the parent's log.
- *The child's end is observed twice* (a redelivery, a retried delivery): one ``hook_received``, because the
  World refuses a second one with the same resume id, and once the hook is disposed a repeat finds no hook.
- *Crash between the parent's step write and the child's run_created*: the step has not completed, so it runs
  again (a redelivery of the same message, or a retry) and derives the same child id.
- *The parent is cancelled*: a flow that observes ``run_cancelled`` cancels the children it declared (their run
  ids are in its log, in the metadata of each call's ``hook_created``) unless they were started detached.
  A start step not started yet never starts (the World refuses ``step_started`` on an ended run); one already
  running reads the parent after creating the child, and cancels the child itself if the parent is cancelled
  by then, so a child is never orphaned whichever of the two looks first.
- *The child ends after its parent* (detached, or left running when the parent completed): the parent's hooks
  went with its run, so there is nothing to deliver and nothing is.
- *The child's result fits its own run but not the outcome around it* (within a few dozen bytes of
  ``AWSWORLD_MAX_VALUE_BYTES``): the parent receives a failure instead (``ChildWorkflowError`` with
  ``error_type`` ``ValueTooLargeError``, code ``VALUE_TOO_LARGE``), never a report retried for good.
- *The workflow cancels the call* (the task awaiting ``start_child`` or a child call, a ``first_successful``
  loser) while the start step is open: the step's end is recorded as cancelled and the awaiting task raises
  ``CancelledError``. A start not begun yet never begins (no child run). A start under way is finished
  (``_start_child_run`` shields it): that child runs on as if left running, still cancelled with its parent
  unless detached, and its end reaches the call's hook, which nothing reads. Cancelling a task that awaits a
  started child's handle cancels that await (and the handle), never the child run.

The link is in both records: the child's ``run_created`` executionContext carries ``parentRunId``,
``parentCallId`` (the start step's id, the call's position) and ``detached``; the parent's ``hook_created`` for
the call carries the child's run id and workflow name in its metadata, and the start step's result is the
child's run id.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable, Coroutine, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar

from ..client.client import Client, _wake
from ..engine import serde
from ..engine.child_calls import START_CHILD, child_run_id
from ..engine.ops import HookOp
from ..world.entities import TERMINAL_RUN_STATUSES
from ..world.errors import (
    EntityConflictError,
    HookNotFoundError,
    PayloadTooLargeError,
    RunGoneError,
    RunNotFoundError,
)
from ..world.events import Event
from .definitions import BUILTIN_STEPS, REGISTRY, StepDef, WorkflowDef
from .errors import VALUE_TOO_LARGE, FatalError, ValueTooLargeError
from .names import check_name
from .retry import RetryPolicy
from .scope import current_step, require_execution

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)

log = logging.getLogger("awsworld.children")

TOKEN_PREFIX = "awsworld.child:"
LINK_KEY = "awsworld.child"  # the key of a call's hook metadata: {"runId", "workflowName", "detached"}
ENDS = frozenset({"run_completed", "run_failed", "run_cancelled"})


class ChildWorkflowError(Exception):
    """Awaiting a child run that gave no value: it ``failed`` (``error_type`` and ``code`` are the child's
    stored error's name and error code, the message its message), was ``cancelled``, or could not be started
    (``not-started``: its arguments or the start itself were refused). ``status`` says which."""

    def __init__(self, message: str, *, run_id: str, workflow_name: str, status: str,
                 error_type: str | None = None, code: str | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.workflow_name = workflow_name
        self.status = status
        self.error_type = error_type
        self.code = code


class ChildRun(Generic[R_co]):
    """A child run started from a workflow: ``await child`` returns its return value or raises
    ``ChildWorkflowError``; it may be awaited any number of times, or never (the child runs on either way).
    ``run_id`` is derived from the parent run and the call's position (``<parent run id>.step_<n>``)."""

    def __init__(self, run_id: str, workflow_name: str, detached: bool, outcome: asyncio.Future[Any]) -> None:
        self.run_id = run_id
        self.workflow_name = workflow_name
        self.detached = detached
        self._outcome = outcome

    def __repr__(self) -> str:
        return f"ChildRun({self.run_id!r}, {self.workflow_name!r}{', detached' if self.detached else ''})"

    def done(self) -> bool:
        """Whether the child's outcome has reached this run (the same answer on every replay)."""
        return self._outcome.done()

    def __await__(self) -> Generator[Any, None, R_co]:
        return self._outcome.__await__()


@dataclass(frozen=True)
class ChildOptions:
    """``child_options(...)``: ``start_child`` with options. ``detached``: the child outlives its parent's
    cancellation (a child started without it is cancelled with its parent). ``name``: what the parent's log
    shows for the call (display only, ``authoring.names``)."""

    detached: bool = False
    name: str | None = None

    async def start(self, workflow: Callable[P, Coroutine[Any, Any, R]], /, *args: P.args,
                    **kwargs: P.kwargs) -> ChildRun[R]:
        """``start_child`` with these options."""
        definition = getattr(workflow, "__awsworld_workflow__", None)
        if not isinstance(definition, WorkflowDef):
            raise TypeError(f"{workflow!r} is not a @workflow: only workflows start child runs")
        return await _start(definition, args, kwargs, detached=self.detached, name=self.name)


def child_options(*, detached: bool = False, name: str | None = None) -> ChildOptions:
    """Options for a child run: ``await child_options(detached=True).start(workflow, *args, **kwargs)``.

    (An options object rather than ``start_child(..., detached=True)``: a keyword between ``*args: P.args`` and
    ``**kwargs: P.kwargs`` is not allowed by PEP 612, and the workflow's own parameters must stay checked.)"""
    return ChildOptions(detached=detached, name=None if name is None else check_name(name))


async def start_child(workflow: Callable[P, Coroutine[Any, Any, R]], /, *args: P.args,
                      **kwargs: P.kwargs) -> ChildRun[R]:
    """Start ``workflow(*args, **kwargs)`` as a child run of this workflow; return its handle once the child
    run exists: ``await handle`` later for the child's value, or leave it running (it runs on even if this
    workflow returns next). Durable and exactly once per call position (see this module). Raises
    ``ChildWorkflowError`` (status ``not-started``) if the child could not be started.

    The child is cancelled with this run unless started with ``child_options(detached=True)``; when this run
    completes or fails, its children run on. Only inside a workflow.

    (Returning only once the child exists, like ``Client.start``, is what makes "leave it running" hold: a
    workflow that returns right after a call it never awaited ends without the flow writing that call.)"""
    return await ChildOptions().start(workflow, *args, **kwargs)


async def call_child(definition: WorkflowDef, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                     name: str | None = None) -> Any:
    """``await child_workflow(...)`` inside a workflow (``name``: from ``with_name``): start the child and await
    its value."""
    return await (await _start(definition, args, kwargs, detached=False, name=name))


def child_token(run_id: str) -> str:
    """The token of the parent's hook that takes child ``run_id``'s outcome: the child derives it from its own id.
    (Guessable, unlike ``create_hook()``'s: it is never reachable over HTTP, only webhooks are, and anyone who
    can resume a hook through the World can read its token there anyway.)"""
    return f"{TOKEN_PREFIX}{run_id}"


# ---------------------------------------------------------------------------------------------- the parent side


async def _start(definition: WorkflowDef, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                 detached: bool, name: str | None = None) -> ChildRun[Any]:
    """Declare the call (the start step, then the hook its outcome comes back on), await the start step and
    return the handle."""
    execution = require_execution("awsworld.start_child()")
    try:
        call_input = serde.dumps({"args": list(args), "kwargs": kwargs})
    except serde.SerializationError as error:
        raise FatalError(f"arguments of child workflow {definition.name} cannot be serialized: {error}") from None
    step = execution.declare_step(START_CHILD_STEP, (definition.name, call_input, detached), {}, name=name)
    run_id = child_run_id(execution.run_id, step.id)
    hook = execution.declare_hook(child_token(run_id), {LINK_KEY: {
        "runId": run_id, "workflowName": definition.name, "detached": detached}}, is_webhook=False)
    outcome: asyncio.Future[Any] = execution.loop.create_future()
    call = _Call(run_id, definition.name, hook, outcome)
    hook.next_payload().add_done_callback(call.ended)
    try:
        await step.future
    except Exception as error:  # the step failed for good, or its input was refused (too large)
        raise call.not_started(error) from error
    return ChildRun(run_id, definition.name, detached, outcome)


@dataclass
class _Call:
    """One child call's outcome, settled by the child's end on the hook (a callback on the replay loop, run as
    the ``hook_received`` is replayed, so every replay settles it at the same point). The end may come before
    the start step's own outcome is in the log: the handle's ``await`` only needs the end."""

    run_id: str
    workflow_name: str
    hook: HookOp
    outcome: asyncio.Future[Any]

    def ended(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            return
        failure = future.exception()
        if failure is not None:  # the hook itself was refused
            self._settle(error=self.not_started(failure))
            return
        self.hook.dispose_requested = True  # the one payload it will ever take: free it (see the module doc)
        payload = future.result()
        if not isinstance(payload, dict):
            self._settle(error=FatalError(f"child run {self.run_id} reported {payload!r}, not an outcome"))
            return
        if payload.get("status") == "completed":
            try:
                value = serde.loads(payload.get("result"))
            except serde.SerializationError as unreadable:
                self._settle(error=FatalError(f"the result of child run {self.run_id} cannot be read: {unreadable}"))
                return
            self._settle(value=value)
            return
        status = str(payload.get("status") or "failed")
        stored = payload.get("error")
        error: dict[str, Any] = stored if isinstance(stored, dict) else {}
        message = str(error.get("message") or status)
        self._settle(error=ChildWorkflowError(
            f"child run {self.run_id} ({self.workflow_name}) {status}: {message}", run_id=self.run_id,
            workflow_name=self.workflow_name, status=status, error_type=error.get("name"),
            code=payload.get("code")))

    def not_started(self, cause: BaseException | None) -> ChildWorkflowError:
        return ChildWorkflowError(f"child run {self.run_id} ({self.workflow_name}) could not be started: {cause}",
                                  run_id=self.run_id, workflow_name=self.workflow_name, status="not-started",
                                  error_type=type(cause).__name__ if cause is not None else None)

    def _settle(self, *, value: Any = None, error: BaseException | None = None) -> None:
        if self.outcome.done():
            return
        if error is not None:
            self.outcome.set_exception(error)
        else:
            self.outcome.set_result(value)


# ---------------------------------------------------------------------------------------------- the start step


async def _start_child_run(workflow: str, call_input: Any, detached: bool) -> str:
    """The body of ``awsworld.start_child``: create the child run (idempotent by its derived id), then wake it.
    A non-detached child whose parent was cancelled meanwhile is cancelled here instead (see the module doc)."""
    context = current_step.get()
    assert context is not None, "awsworld.start_child runs as a step"
    world, parent_id, call_id = context.world, context.metadata.run_id, context.metadata.step_id
    # A start under way is finished even when the step is cancelled (the workflow stopped awaiting the call):
    # stopping between the child's run_created and its wake-up would leave a child run that exists and never
    # runs. The cancellation is still the step's end; the finished start's outcome is not recorded.
    work = asyncio.ensure_future(_create_child(world, parent_id, call_id, workflow, call_input, detached))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        await asyncio.wait({work})
        raise


async def _create_child(world: Any, parent_id: str, call_id: str, workflow: str, call_input: Any,
                        detached: bool) -> str:
    run_id = child_run_id(parent_id, call_id)
    # The child's own retention, from its definition where this process has it (not from the step's
    # arguments: they are recorded, and their digest must not change).
    definition = REGISTRY.workflows.get(workflow)
    retention = definition.execution_context() if definition is not None else {}
    try:
        created = await world.events.create(run_id, {"eventType": "run_created", "eventData": {
            "workflowName": workflow, "input": call_input,
            "executionContext": {"seed": secrets.token_hex(32), "parentRunId": parent_id, "parentCallId": call_id,
                                 "detached": detached, **retention}}}, resolve_data="none")
    except PayloadTooLargeError as too_large:
        raise ValueTooLargeError(f"the input of child workflow {workflow} is too large to record: "
                                 f"{too_large.message}") from None
    run = created.run
    assert run is not None
    if run.workflow_name != workflow:
        raise FatalError(f"run {run_id} exists and runs {run.workflow_name}, not {workflow}")
    if created.event is None and run.status in TERMINAL_RUN_STATUSES:
        return run_id  # an earlier attempt started it and it has ended already
    if not detached and (await world.runs.get(parent_id, resolve_data="none")).status == "cancelled":
        await cancel_run(world, run_id, workflow, f"its parent run {parent_id} was cancelled")
        return run_id
    await _wake(world, run_id, workflow, "start")
    return run_id


START_CHILD_STEP = StepDef(START_CHILD, _start_child_run,
                           retry=RetryPolicy(max_attempts=11, initial_delay=1.0, backoff=2.0, max_delay=60.0))
BUILTIN_STEPS[START_CHILD] = START_CHILD_STEP


# ---------------------------------------------------------------------------------------------- a run's end


async def on_run_end(world: Any, run_id: str, events: Sequence[Event]) -> None:
    """After a flow saw its run end (``events``: the log it held): a cancelled run cancels its non-detached
    children, and a child reports its outcome to its parent. Free for a run that is neither (no I/O: both are
    read from the log). Raises on a transient error, so the delivery is retried and does it again."""
    if not events:
        return
    end = next((e for e in reversed(events) if e.event_type in ENDS), None)
    if end is None:
        return  # ended by another writer this flow did not see: the delivery that writer wakes does this
    if end.event_type == "run_cancelled":
        await cancel_children(world, run_id, events)
    context = (events[0].event_data or {}).get("executionContext") or {}
    parent = context.get("parentRunId") if isinstance(context, dict) else None
    if isinstance(parent, str):
        await report_to_parent(world, run_id, parent, end)


async def report_to_parent(world: Any, run_id: str, parent_id: str, end: Event) -> None:
    """Resume the parent's hook for this child with its outcome, once (the resume id is the token)."""
    token = child_token(run_id)
    try:
        hook = await world.hooks.get_by_token(token, resolve_data="none")
    except HookNotFoundError:
        return  # the parent ended (its hooks with it) or has taken this outcome already (and disposed the hook)
    if hook.run_id != parent_id:
        log.warning("run %s: the hook for its outcome is held by run %s, not its parent %s: not reported",
                    run_id, hook.run_id, parent_id)
        return
    client = Client(world)
    try:
        try:
            await client.resume_hook_outcome(token, _outcome_payload(end), idempotency_key=token)
        except PayloadTooLargeError as too_large:
            # The result fits the child's own run but not with the outcome around it: the parent's await fails
            # naming why (retrying would refuse it again, and the parent would wait for good).
            await client.resume_hook_outcome(token, _too_large_payload(too_large), idempotency_key=token)
    except (HookNotFoundError, RunGoneError):
        return  # the parent ended meanwhile


def _too_large_payload(too_large: PayloadTooLargeError) -> dict[str, Any]:
    return {"status": "failed", "code": VALUE_TOO_LARGE, "error": {
        "name": ValueTooLargeError.__name__,
        "message": f"it completed, but its result is too large to pass to its parent: {too_large.message}"}}


def _outcome_payload(end: Event) -> dict[str, Any]:
    data = end.event_data or {}
    if end.event_type == "run_completed":
        return {"status": "completed", "result": data.get("output")}
    if end.event_type == "run_failed":
        return {"status": "failed", "error": data.get("error") or {"message": "failed"}, "code": data.get("errorCode")}
    reason = data.get("cancelReason")
    return {"status": "cancelled", "error": {"message": f"cancelled ({reason})" if reason else "cancelled",
                                             "name": "Cancelled"}}


async def cancel_children(world: Any, run_id: str, events: Sequence[Event]) -> None:
    """Cancel every child this run declared that was not started detached (from its log: no read)."""
    for event in events:
        if event.event_type != "hook_created":
            continue
        link = _link(event)
        if link is not None and not link.get("detached"):
            await cancel_run(world, str(link["runId"]), str(link["workflowName"]),
                             f"its parent run {run_id} was cancelled")


def _link(event: Event) -> dict[str, Any] | None:
    """The child a ``hook_created`` is the call of, from its metadata (None for any other hook)."""
    metadata = (event.event_data or {}).get("metadata")
    if not isinstance(metadata, dict) or LINK_KEY not in metadata:
        return None
    try:
        link = serde.loads(metadata).get(LINK_KEY)
    except (serde.SerializationError, AttributeError):
        return None
    return link if isinstance(link, dict) and "runId" in link and "workflowName" in link else None


async def cancel_run(world: Any, run_id: str, workflow: str, reason: str) -> None:
    """Cancel a child (recording why) and wake it, so its own flow cancels its children and reports to its
    parent. A child not created yet or ended already is left alone."""
    try:
        await world.events.create(run_id, {"eventType": "run_cancelled", "eventData": {"cancelReason": reason[:512]}})
    except (RunNotFoundError, EntityConflictError, RunGoneError):
        return
    await _wake(world, run_id, workflow, "cancel")


__all__ = ["ChildOptions", "ChildRun", "ChildWorkflowError", "call_child", "child_options", "child_run_id",
           "on_run_end", "start_child"]
