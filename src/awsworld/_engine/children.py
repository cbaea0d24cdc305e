"""The parent side of a child call, as the engine replays it (the protocol as a whole: ``authoring/children.py``).

``start_child`` declares the call at the next positions, the built-in start step (``durable.child_calls``) and
then the hook its outcome comes back on, awaits the start step, and hands back the child's run id and an outcome
future. ``_Call`` settles that future from the hook's one payload, the child's end, as the ``hook_received`` is
replayed: its value through the codec (the child workflow's, or the call's own), or a ``ChildWorkflowError`` that
is also the type the child raised where it can be rebuilt (``authoring.rebuilt_errors``) and carries that error as
the child stored it (``original``: what a parent that lets it through stores as its own error's ``cause``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from ..authoring.children import ChildWorkflowError
from ..authoring.errors import (
    ChildDepthError,
    CodecError,
    FatalError,
    StepError,
    chain_stored_traceback,
    original_error,
)
from ..authoring.rebuilt_errors import rebuild
from ..authoring.runtime import WorkflowRef
from ..durable import codecs, serde
from ..durable.child_calls import LINK_KEY, START_CHILD_CALL, child_run_id, child_token
from ..durable.codecs import Codec, Place
from .ops import HookOp, OpDeclarer


@dataclass(frozen=True)
class ChildStart:
    """A started child call (``authoring.runtime.StartedChild``): the child's run id and the call's outcome."""

    run_id: str
    outcome: asyncio.Future[Any]


async def start_child(execution: OpDeclarer, definition: WorkflowRef, args: tuple[Any, ...],
                      kwargs: dict[str, Any], *, detached: bool, name: str | None = None,
                      codec: Codec[Any] | None = None, successor: bool = False, priority: int | None = None,
                      concurrency_key: str | None = None) -> ChildStart:
    """Declare the call (the start step, then the hook its outcome comes back on), await the start step and
    return the child's run id and the call's outcome. ``successor``: the start step's arguments say so (a fourth,
    only then: a call recorded before successors were keeps its three, and its digest). ``priority`` and
    ``concurrency_key`` (``child_options``): the start step's keyword arguments, each only when given, for the
    same reason."""
    start_kwargs: dict[str, Any] = {
        **({"priority": priority} if priority is not None else {}),
        **({"concurrency_key": concurrency_key} if concurrency_key is not None else {})}
    succeeds = (True,) if successor else ()
    # Arguments over the World's bound are refused before they are dumped, twice (``oversized_child_input``):
    # the start step is declared refused, its input never made.
    refusal = execution.oversized_child_input(definition, args, kwargs, (definition.name, None, detached, *succeeds),
                                              start_kwargs)
    call_input: Any = None
    if refusal is None:
        try:  # through the child's args_codec (a CodecError is raised here, at the call)
            call_input = codecs.store_call(args, kwargs, definition.args_codec, definition.fn,
                                           Place("input", f"workflow {definition.name!r}", execution.run_id))
        except serde.SerializationError as error:
            raise FatalError(f"arguments of child workflow {definition.name} cannot be serialized: {error}") from None
    start_args: tuple[Any, ...] = (definition.name, call_input, detached, *succeeds)
    if refusal is not None or not execution.recorded_call(START_CHILD_CALL, start_args, start_kwargs):
        # A new call: arguments the child cannot take are a TypeError here, at the call site, before anything is
        # declared (a call the log records was accepted when it was made, and replays as it was).
        definition.check_arguments(args, kwargs)
    step = execution.declare_step(START_CHILD_CALL, start_args, start_kwargs, name=name, refusal=refusal)
    run_id = child_run_id(execution.run_id, step.id)
    hook = execution.declare_hook(child_token(run_id), {LINK_KEY: {
        "runId": run_id, "workflowName": definition.name, "detached": detached}}, is_webhook=False)
    outcome: asyncio.Future[Any] = execution.loop.create_future()
    call = _Call(run_id, definition.name, hook, outcome, definition.codec if codec is None else codec,
                 per_call=codec is not None, undecoded=execution.note_undecoded)
    hook.next_payload().add_done_callback(call.ended)
    try:
        await step.future
    except Exception as error:  # the step failed for good, or its input was refused (too large)
        raise call.not_started(error) from error
    return ChildStart(run_id, outcome)


@dataclass
class _Call:
    """One child call's outcome, settled by the child's end on the hook (a callback on the replay loop, run as
    the ``hook_received`` is replayed, so every replay settles it at the same point). The end may come before
    the start step's own outcome is in the log: the handle's ``await`` only needs the end."""

    run_id: str
    workflow_name: str
    hook: HookOp
    outcome: asyncio.Future[Any]
    codec: Codec[Any] | None = None  # the child workflow's result codec, or the call's (``child_options``)
    per_call: bool = False  # the call's: it reads a result stored without a codec too
    undecoded: Callable[[str, CodecError], None] | None = None  # told of a result its codec refuses (``Execution``)

    def ended(self, future: asyncio.Future[Any]) -> None:
        if future.cancelled():
            return
        failure = future.exception()
        if failure is not None:  # the hook itself was refused
            self._settle(error=self.not_started(failure))
            return
        self.hook.dispose_requested = True  # the one payload it will ever take: free it (see the module doc)
        reported: object = future.result()
        if not isinstance(reported, dict):
            self._settle(error=FatalError(f"child run {self.run_id} reported {reported!r}, not an outcome"))
            return
        payload = cast("dict[str, Any]", reported)
        if payload.get("status") == "completed":
            place = Place("result", f"child run {self.run_id} ({self.workflow_name})", op_id=self.hook.id)
            try:
                value = codecs.load_text(payload.get("result"), self.codec, place) \
                    if self.per_call and self.codec is not None else codecs.load(payload.get("result"), self.codec,
                                                                                 place)
            except CodecError as undecodable:
                if self.undecoded is not None:
                    self.undecoded(str(place), undecodable)
                self._settle(error=undecodable)
                return
            except serde.SerializationError as unreadable:
                self._settle(error=FatalError(f"the result of child run {self.run_id} cannot be read: {unreadable}"))
                return
            self._settle(value=value)
            return
        status = str(payload.get("status") or "failed")
        stored = payload.get("error")
        error = cast("dict[str, Any]", stored) if isinstance(stored, dict) else {}
        message = str(error.get("message") or status)
        # A cancelled child's message is "cancelled" or "cancelled (why)": said once ("cancelled: cancelled" was).
        said = message if status == "cancelled" and message.startswith("cancelled") else f"{status}: {message}"
        # A step's (or a grandchild's) failure the child let through: that one's own error, the innermost.
        original = original_error(error)
        failed = status == "failed" and bool(error)
        # A cancelled child raised nothing: no error type (its report's name, "Cancelled", named no type), and
        # ``status`` says it was cancelled.
        self._settle(error=chain_stored_traceback(rebuild(ChildWorkflowError, lambda kind: kind(
            f"child run {self.run_id} ({self.workflow_name}) {said}", run_id=self.run_id,
            workflow_name=self.workflow_name, status=status,
            error_type=None if status == "cancelled" else error.get("name"),
            code=payload.get("code"), original=original if failed else None),
            original.get("type"), original.get("name")),
            original.get("stack") if failed else None,
            f"the traceback of child run {self.run_id} ({self.workflow_name})"))

    def not_started(self, cause: BaseException | None) -> ChildWorkflowError:
        if isinstance(cause, StepError) and isinstance(cause, ChildDepthError):
            # The start step refused the call for its depth (``_worker/child_runs.py``): a ChildWorkflowError
            # that is also the ChildDepthError, carrying the refusal as its original, so a run that lets it
            # through stores it as its cause and every run above raises that type too.
            refusal = {"name": cause.error_type, "type": cause.qualified_type, "message": cause.message,
                       "stack": cause.stack}
            return rebuild(ChildWorkflowError, lambda kind: kind(
                f"child run {self.run_id} ({self.workflow_name}) could not be started: {cause.message}",
                run_id=self.run_id, workflow_name=self.workflow_name, status="not-started",
                error_type=cause.error_type, original=refusal), cause.qualified_type, cause.error_type)
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
