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

Arguments are checked at the call site before anything is declared (``WorkflowDef.check_arguments``: the call's
shape, and each annotated parameter's type, ``authoring.arguments``): a call the child cannot take raises
``TypeError`` in the parent's body, where it was written, instead of failing inside the child later. A call the
parent's log already records (made before the check existed) replays as recorded (``recorded_call``).

A step and a hook rather than a new event type: the contract's existing rules (a step's at-least-once body made
idempotent by its input, ``run_created``'s idempotent ids, hook tokens, ``resumeId`` dedup, the terminal-run
fence on ``step_started``) already give every guarantee a child needs, on every World, with nothing to migrate.
Runs in flight that called a workflow from a workflow before this existed (its body then ran inline) diverge
at that call on replay: guard such a change with ``patched()``.

Why the races are safe:

- *The child ends before the parent's hook exists*: it cannot. The flow writes every declaration of an
  iteration (steps and waits in a batch, then hooks) before it queues or runs any step (``Flow._loop`` runs
  ``Declarer.declare`` until nothing is new, and only then ``_dispatch``), and a replay that finds the step declared
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
  (``_worker/child_runs.py``'s ``_start_child_run`` shields it): that child runs on as if left running, still
  cancelled with its parent unless detached, and its end reaches the call's hook, which nothing reads.
  Cancelling a task that awaits a started child's handle cancels that await (and the handle), never the child
  run.

The link is in both records: the child's ``run_created`` executionContext carries ``parentRunId``,
``parentCallId`` (the start step's id, the call's position) and ``detached``; the parent's ``hook_created`` for
the call carries the child's run id and workflow name in its metadata, and the start step's result is the
child's run id.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator, Mapping
from dataclasses import dataclass
from typing import Any, Generic, ParamSpec, TypeVar, overload

from ..durable.child_calls import LINK_KEY, TOKEN_PREFIX, child_run_id, child_token
from ..durable.codecs import Codec
from ..world.rules.limiters import LimitInputError, check_key, check_priority
from .definitions import Workflow, WorkflowDef, not_a_workflow
from .names import check_name
from .runtime import noted, require_runtime

P = ParamSpec("P")
R = TypeVar("R")
R_co = TypeVar("R_co", covariant=True)



class ChildWorkflowError(Exception):
    """Awaiting a child run that gave no value: it ``failed`` (``error_type`` and ``code`` are the child's
    stored error's name and error code, the message its message), was ``cancelled``, or could not be started
    (``not-started``: its arguments or the start itself were refused). ``status`` says which.

    A failed child's error is also an instance of the type the child raised (for a failed step the child let
    through, the step's own type), where that type can be rebuilt (see ``rebuilt_errors``): ``except KeyError:``
    around the child's call catches a child that raised ``KeyError``. ``original`` is that error as the child's log
    stored it (``name``, qualified ``type``, ``message``, ``stack``): the child's own exception, or the step's or
    grandchild's that the child let through (the innermost); None unless the child ``failed``, or was refused for
    nesting deeper than ``AWSWORLD_MAX_CHILD_DEPTH`` allows (``not-started``: the refusal, and this error is
    also a ``ChildDepthError``, ``authoring/errors.py``). A workflow that
    lets this error through stores it as the run's ``cause`` (``_worker/error_shapes.py``), so ``Run.result()`` of
    the parent raises the child's type too."""

    def __init__(self, message: str, *, run_id: str, workflow_name: str, status: str,
                 error_type: str | None = None, code: str | None = None,
                 original: Mapping[str, Any] | None = None) -> None:
        Exception.__init__(self, message)  # not super()'s: a rebuilt type's __init__ must not run
        self.run_id = run_id
        self.workflow_name = workflow_name
        self.status = status
        self.error_type = error_type
        self.code = code
        self.original: dict[str, Any] | None = None if original is None else dict(original)

    def __str__(self) -> str:
        return BaseException.__str__(self)  # not the rebuilt type's


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


class NoCodec:
    """``ChildOptions``' codec type when it has none: the call's value is the child workflow's own type."""


C = TypeVar("C")


@dataclass(frozen=True)
class ChildOptions(Generic[C]):
    """``child_options(...)``: ``start_child`` with options. ``detached``: the child outlives its parent's
    cancellation (a child started without it is cancelled with its parent). ``name``: what the parent's log
    shows for the call (display only, ``authoring.names``). ``codec``: how this call reads the child's result
    (in place of the child workflow's own codec; see ``child_options``). ``successor``: the child continues this
    run (continue-as-new; see ``child_options``). ``priority``, ``concurrency_key``: the child's place among the
    waiters of its workflow's concurrency limit, and its key (see ``child_options``)."""

    detached: bool = False
    name: str | None = None
    codec: Codec[C] | None = None
    successor: bool = False
    priority: int | None = None
    concurrency_key: str | None = None

    @overload
    async def start(self: ChildOptions[NoCodec], workflow: Workflow[P, R], /, *args: P.args,
                    **kwargs: P.kwargs) -> ChildRun[R]: ...

    @overload
    async def start(self: ChildOptions[C], workflow: Workflow[P, Any], /, *args: P.args,
                    **kwargs: P.kwargs) -> ChildRun[C]: ...

    @noted("child_options(...).start()")
    async def start(self, workflow: Workflow[P, Any], /, *args: P.args,
                    **kwargs: P.kwargs) -> ChildRun[Any]:
        """``start_child`` with these options."""
        definition = getattr(workflow, "__awsworld_workflow__", None)
        if not isinstance(definition, WorkflowDef):
            raise not_a_workflow(workflow, " (only workflows start child runs)")
        self._check_limit_options(definition)
        return await _start(definition, args, kwargs, detached=self.detached, name=self.name, codec=self.codec,
                            successor=self.successor, priority=self.priority, concurrency_key=self.concurrency_key)

    def _check_limit_options(self, definition: WorkflowDef) -> None:
        """``priority`` and ``concurrency_key`` by the rules a client's start follows (``world.rules.limiters``),
        here at the call, before the start step records them."""
        if self.priority is not None:
            check_priority(self.priority)
        if self.concurrency_key is not None:
            if definition.limit is None:
                raise LimitInputError(f"concurrency_key= needs a workflow with concurrency=: {definition.name} has "
                                      "none", field="concurrencyKey")
            check_key(self.concurrency_key, definition.limit.spec.name)

    @overload
    async def call(self: ChildOptions[NoCodec], workflow: Workflow[P, R], /, *args: P.args,
                   **kwargs: P.kwargs) -> R: ...

    @overload
    async def call(self: ChildOptions[C], workflow: Workflow[P, Any], /, *args: P.args,
                   **kwargs: P.kwargs) -> C: ...

    @noted("child_options(...).call()")
    async def call(self, workflow: Workflow[P, Any], /, *args: P.args,
                   **kwargs: P.kwargs) -> Any:
        """Start the child with these options and await its value (``await child_workflow(...)`` with options)."""
        return await (await self.start(workflow, *args, **kwargs))


@overload
def child_options(*, detached: bool = False, name: str | None = None, codec: None = None,
                  successor: bool = False, priority: int | None = None,
                  concurrency_key: str | None = None) -> ChildOptions[NoCodec]:
    ...


@overload
def child_options(*, detached: bool = False, name: str | None = None, codec: Codec[C],
                  successor: bool = False, priority: int | None = None,
                  concurrency_key: str | None = None) -> ChildOptions[C]: ...


def child_options(*, detached: bool = False, name: str | None = None,
                  codec: Codec[Any] | None = None, successor: bool = False, priority: int | None = None,
                  concurrency_key: str | None = None) -> ChildOptions[Any]:
    """Options for a child run: ``await child_options(detached=True).start(workflow, *args, **kwargs)``, or
    ``.call(...)`` to await its value at once.

    ``codec``: how this call reads the child's result, in place of the child workflow's own ``@workflow(codec=)``
    (the call's value is the codec's type: ``child_options(codec=PydanticCodec(Order)).call(legacy)`` is an
    ``Order``). It decodes what the child stored: the text its own codec wrote, or, for a child without one,
    awsworld's JSON of its result (plain JSON for JSON's own types). The child's input still goes through the
    child's own ``args_codec``: the child decodes it, and it knows only its own definition.

    ``successor=True``: the child continues this run (Temporal's continue-as-new): it is started detached, and
    at this run's depth rather than one deeper, so a chain of successors (start one with the state, then return)
    runs as long as it is meant to, where ``AWSWORLD_MAX_CHILD_DEPTH`` ends a workflow that calls itself and
    waits (``ChildDepthError``). Each run of the chain has a log of its own.

    ``priority`` and ``concurrency_key``: as ``client.options(priority=, concurrency_key=)`` for a client's start
    (DBOS's ``SetEnqueueOptions(priority=)`` around ``queue.enqueue`` in a workflow): where the child waits among
    its workflow's runs waiting for a slot (higher first; default 0, whatever the parent's), and its key instead
    of its key function's. A bad value is a ``LimitInputError`` at the call, as a key for a workflow without
    ``concurrency=`` is.

    (An options object rather than ``start_child(..., detached=True)``: a keyword between ``*args: P.args`` and
    ``**kwargs: P.kwargs`` is not allowed by PEP 612, and the workflow's own parameters must stay checked.)"""
    return ChildOptions(detached=detached or successor, name=None if name is None else check_name(name), codec=codec,
                        successor=successor, priority=priority, concurrency_key=concurrency_key)


@noted("awsworld.start_child()")
async def start_child(workflow: Workflow[P, R], /, *args: P.args,
                      **kwargs: P.kwargs) -> ChildRun[R]:
    """Start ``workflow(*args, **kwargs)`` as a child run of this workflow; return its handle once the child
    run exists: ``await handle`` later for the child's value, or leave it running (it runs on even if this
    workflow returns next). Durable and exactly once per call position (see this module). Raises
    ``ChildWorkflowError`` (status ``not-started``) if the child could not be started.

    The child is cancelled with this run unless started with ``child_options(detached=True)``; when this run
    completes or fails, its children run on. Only inside a workflow.

    (Returning only once the child exists, like ``Client.start``, is what makes "leave it running" hold: a
    workflow that returns right after a call it never awaited ends without the flow writing that call.)"""
    return await child_options().start(workflow, *args, **kwargs)


# ---------------------------------------------------------------------------------------------- the parent side


async def _start(definition: WorkflowDef, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                 detached: bool, name: str | None = None, codec: Codec[Any] | None = None,
                 successor: bool = False, priority: int | None = None,
                 concurrency_key: str | None = None) -> ChildRun[Any]:
    """The call through the run's runtime (``_engine/children.py`` declares the start step, then the hook its
    outcome comes back on, and awaits the start step), as the handle."""
    started = await require_runtime("awsworld.start_child()").start_child(
        definition, args, kwargs, detached=detached, name=name, codec=codec, successor=successor, priority=priority,
        concurrency_key=concurrency_key)
    return ChildRun(started.run_id, definition.name, detached, started.outcome)


__all__ = ["LINK_KEY", "TOKEN_PREFIX", "ChildOptions", "ChildRun", "ChildWorkflowError", "NoCodec", "child_options",
           "child_run_id", "child_token", "start_child"]
