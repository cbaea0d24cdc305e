"""The seam between workflow code and the engine that replays it: ``WorkflowRuntime``.

Every call a workflow body makes (``sleep``, ``create_hook``, a step or child call, ``map``/``parallel``'s items,
``poll_until``, ``patched``, ``now``, ``random``, ``uuid4``, ``schedule_info``, ``workflow_metadata``) asks the run it
is made in, through ``current_runtime``: the engine's ``WorkflowExecution`` (``_engine/execution.py``) implements
``WorkflowRuntime`` and sets itself there in the body's task. So this package imports no engine module, as Temporal's
``temporalio/workflow.py`` declares a ``_Runtime`` that the worker's instance implements and never imports the
worker. Outside a workflow body ``current_runtime`` is None, and the calls say so (or, for ``now`` and a step called
as a plain function, do the plain thing).

What the calls pass across (a step's or a workflow's definition, a poll's spec) and what comes back (a hook, a
started child) are typed by the small protocols here, which the definitions (``definitions``) and the engine's ops
satisfy.

``wakes_on`` is the other context a batch (``batch``) sets for its items: the ends of a step that wake the
workflow at once. The step side of the seam (what a step body sees) is ``step_context.current_step``, set by the
worker around a step's body.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import random
import sys
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, ParamSpec, Protocol, TypeVar

from ..durable.codecs import Codec
from ..durable.json_data import JSONValue
from .durations import Duration, When
from .poll_spec import PollSpec
from .step_context import current_step

StepEnd = Literal["completed", "failed"]


class StepRef(Protocol):
    """What a step call carries to the engine: its name (recorded, compared on replay) and its codecs. A
    ``StepDef`` is one; so is a built-in step the worker runs (``durable.child_calls.BuiltinStep``)."""

    @property
    def name(self) -> str: ...

    @property
    def codec(self) -> Codec[Any] | None: ...  # the result's (``@step(codec=...)``); None: awsworld's JSON

    @property
    def args_codec(self) -> Codec[tuple[Any, ...]] | None: ...  # the arguments' (``@step(args_codec=...)``)

    @property
    def fn(self) -> Callable[..., Any]: ...  # the body (an args_codec binds the arguments to its signature)


class WorkflowRef(Protocol):
    """What a child call carries to the engine: the child workflow's name, codecs and body, and the check its
    arguments get at the call site (a ``WorkflowDef``)."""

    @property
    def name(self) -> str: ...

    @property
    def codec(self) -> Codec[Any] | None: ...

    @property
    def args_codec(self) -> Codec[tuple[Any, ...]] | None: ...

    @property
    def fn(self) -> Callable[..., Any]: ...

    def check_arguments(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None: ...


class HookHandle(Protocol):
    """A hook the run declared (``create_hook``): its token and id, its payloads in order, its disposal."""

    @property
    def token(self) -> str: ...

    @property
    def id(self) -> str: ...

    def next_payload(self) -> Awaitable[Any]: ...

    def dispose(self) -> None: ...


class StartedChild(Protocol):
    """A child run the run started (``start_child``): its id, and its outcome, settled once the child's end
    reaches the run (its value, or a ``ChildWorkflowError``)."""

    @property
    def run_id(self) -> str: ...

    @property
    def outcome(self) -> asyncio.Future[Any]: ...


@dataclass(frozen=True)
class WorkflowMetadata:
    """What ``workflow_metadata()`` returns inside a workflow body (Temporal's ``workflow.info()``, the Workflow
    SDK's ``getWorkflowMetadata()``). Read from the run's log, so it is the same on every replay and code may
    branch on it. ``created_at``: when the run was recorded (``run_created``, in UTC; a run that waits for a
    concurrency slot starts later). ``parent_run_id``: the run that started this one as a child, else None."""

    run_id: str
    workflow_name: str
    created_at: datetime
    parent_run_id: str | None


T = TypeVar("T")
P = ParamSpec("P")
MadeCall = tuple[Coroutine[Any, Any, Any], str, str, str, int]
"""A call a workflow body made: its coroutine (not started when made), ``step`` or ``child workflow`` (or, for
awsworld's own calls, what was called: ``awsworld.sleep()``), the step's or workflow's name (empty for awsworld's
own), and the file and line that made it."""


class WorkflowRuntime(Protocol):
    """What a workflow body's calls ask of the run they are made in. Every answer is replay-stable: it depends on
    the run's log and the body's calls only (see ``_engine/execution.py``)."""

    @property
    def run_id(self) -> str: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The loop the body runs on (the engine's replay loop: no I/O, no clock)."""
        ...

    @property
    def rng(self) -> random.Random:
        """The run's own generator, seeded per run (``random()``, ``uuid4()``)."""
        ...

    def current_time(self) -> datetime:
        """``now()``: the time of the last event replayed."""
        ...

    def execution_context(self) -> dict[str, Any]:
        """The run's ``run_created`` executionContext (a scheduled run's schedule, a child's parent)."""
        ...

    def workflow_metadata(self) -> WorkflowMetadata: ...

    def resume_at(self, duration: When) -> datetime:
        """The point in time ``duration`` names, a relative one counted from ``current_time()``."""
        ...

    async def sleep_until(self, resume_at: datetime, *, name: str | None = None) -> None: ...

    def patched(self, change_id: str) -> bool: ...

    def replaying(self) -> bool:
        """Whether the body is running code it ran before, in an earlier delivery (the log holds what it did
        next): a line it logs now was logged then too. Not replay-stable, so never a branch of the body's: it
        marks the body's log lines (``lambda_host/observability.py``)."""
        ...

    def create_hook(self, token: str | None, metadata: Any, *, is_webhook: bool, codec: Codec[Any] | None = None,
                    name: str | None = None, timeout: When | None = None,
                    heartbeat_timeout: Duration | None = None, respond_with: JSONValue = None) -> HookHandle: ...

    def call_step(self, definition: StepRef, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                  poll: PollSpec | None = None, name: str | None = None) -> Awaitable[Any]:
        """Declare the step call at the next position now, and return what the workflow awaits for its result
        (a plain function, not a coroutine: every call and return of the workflow body's stack passes through the
        determinism guard's profile hook, and a coroutine in between is two more of each per step)."""
        ...

    async def start_child(self, definition: WorkflowRef, args: tuple[Any, ...], kwargs: dict[str, Any], *,
                          detached: bool, name: str | None = None, codec: Codec[Any] | None = None,
                          successor: bool = False, priority: int | None = None,
                          concurrency_key: str | None = None) -> StartedChild: ...

    @property
    def calls(self) -> list[MadeCall]:
        """The step and child calls the body made, each appended by ``made`` as the call is made (a list the
        wrapper fills, not a method of the engine's: under the determinism guard every Python call of a step's
        path costs twice): a call the body never awaits fails the run when the body returns
        (``CallNotAwaitedError``) instead of the run completing without it."""
        ...


current_runtime: ContextVar[WorkflowRuntime | None] = ContextVar("awsworld_runtime", default=None)
"""The run whose workflow body this task belongs to (None outside a workflow body)."""


def made(runtime: WorkflowRuntime, call: Coroutine[Any, Any, T], kind: str, name: str) -> Coroutine[Any, Any, T]:
    """Note in ``runtime.calls`` a call the body just made (``kind``: ``step`` or ``child workflow``), with the file
    and line of the code that called the wrapper calling this, and hand the call back."""
    caller = sys._getframe(2)  # pyright: ignore[reportPrivateUsage]  (inspect.currentframe: a call more per step)
    runtime.calls.append((call, kind, name, caller.f_code.co_filename, caller.f_lineno))
    return call


def noted(what: str) -> Callable[[Callable[P, Coroutine[Any, Any, T]]], Callable[P, Coroutine[Any, Any, T]]]:
    """Make an ``async def`` of awsworld's that a workflow body awaits (``sleep``, ``start_child``, ``poll_until``,
    ``map``, ...) note its call in the run, as a step call is (``made``): ``sleep(60)`` without ``await`` made a
    coroutine nothing ran, and the run went on as if it had slept (Python only warns, ``coroutine 'sleep' was
    never awaited``, once the coroutine is collected). Noted, a call the body never awaits fails the run with
    ``CallNotAwaitedError`` naming ``what`` and the line (``_engine/execution.py``, ``_check_awaited``). Outside a
    workflow body the call is the plain coroutine."""
    def note(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, Coroutine[Any, Any, T]]:
        @functools.wraps(fn)
        def call(*args: P.args, **kwargs: P.kwargs) -> Coroutine[Any, Any, T]:
            coroutine = fn(*args, **kwargs)
            runtime = current_runtime.get()
            return coroutine if runtime is None else made(runtime, coroutine, what, "")

        if sys.version_info >= (3, 12):  # still a coroutine function to inspect (3.11: no way to mark one)
            inspect.markcoroutinefunction(call)
        return call
    return note


def require_runtime(what: str) -> WorkflowRuntime:
    runtime = current_runtime.get()
    if runtime is None:
        raise RuntimeError(f"{what} can only be used inside a @workflow{outside_any_run()}")
    return runtime


OUTSIDE_ANY_RUN = ("; it was called outside any run (a workflow or step called as a plain function, as a unit test "
                   "does): start the workflow instead, in a test `run = await awsworld_env.client.start(workflow, "
                   "...)` and `await run.result()` (docs/get-started/first-test.md)")


def outside_any_run() -> str:
    """What to do, for the refusal of a workflow-only or step-only call made where no run is: a workflow or step
    called directly is a plain call (docs/concepts/steps-and-workflows.md), so a unit test that calls one that
    sleeps or reads ``step_metadata()`` meets the refusal, and the way out is to run it. Nothing inside a run (the
    call there is a mistake of place, which the refusal names)."""
    return OUTSIDE_ANY_RUN if current_runtime.get() is None and current_step.get() is None else ""


async def call_step(runtime: WorkflowRuntime, definition: StepRef, args: tuple[Any, ...], kwargs: dict[str, Any],
                    name: str | None = None) -> Any:
    """``await a_step(...)`` (``name``: from ``with_name``) inside a workflow, as it is awaited: its position is
    declared when it starts running (at its ``await``, or its task's first turn), as it always was, so calls
    awaited in another order than made replay as they were recorded."""
    if name is None:  # (the plain call: no keyword to pass on, on every step's path)
        return await runtime.call_step(definition, args, kwargs)
    return await runtime.call_step(definition, args, kwargs, name=name)


async def call_workflow(runtime: WorkflowRuntime, definition: WorkflowRef, args: tuple[Any, ...],
                        kwargs: dict[str, Any], *, name: str | None = None) -> Any:
    """``await child_workflow(...)`` inside a workflow (``name``: from ``with_name``): a child run, started and
    awaited at once (``children`` describes child runs)."""
    started = await runtime.start_child(definition, args, kwargs, detached=False, name=name)
    return await started.outcome


wakes_on: ContextVar[frozenset[StepEnd]] = ContextVar("awsworld_wakes_on", default=frozenset())
"""The ends of a step declared here that wake the workflow at once, though other steps of the run are still open
(by default a queued step's end continues the workflow only when it was the run's last open step, which is all a
``gather`` needs). Set by a batch in each item's task (``authoring/batch.py``): an item's end may decide the batch
or free a slot. Carried by the step's queue message (``FlowMessage.wakes_on``)."""
