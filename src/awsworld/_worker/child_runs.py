"""The worker's half of child runs: the body of the built-in ``awsworld.start_child`` step (create the child run,
wake it) and what a flow does once it sees its run end (a cancelled run cancels its children; a child reports
its outcome to its parent's hook).

Why here and not with ``start_child``: both do I/O against the World, and the engine that replays a workflow
does none. The engine declares the start step by name (``durable.child_calls.START_CHILD_CALL``); this module
is where that name gets its body (``resolve_step``, an explicit table rather than a registration made by
importing a module). The protocol as a whole is described in ``authoring/children.py``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from .._deployments.pins import child_pin, pinned_attributes
from .._engine.execution import WorkflowExecution
from ..authoring.definitions import REGISTRY, Registry, StepDef
from ..authoring.errors import VALUE_TOO_LARGE, ChildDepthError, FatalError, ValueTooLargeError
from ..authoring.retry import RetryPolicy
from ..authoring.step_context import current_step
from ..durable import serde
from ..durable.child_calls import DEPTH_KEY, LINK_KEY, START_CHILD, TOKEN_PREFIX, child_run_id, child_token, run_depth
from ..durable.hook_calls import RESUME_HOOK
from ..settings import SETTINGS
from ..world.entities import TERMINAL_RUN_STATUSES
from ..world.errors import (
    EntityConflictError,
    HookNotFoundError,
    PayloadTooLargeError,
    RunGoneError,
    RunNotFoundError,
    RunValuesUnreadableError,
)
from ..world.events import RUN_END_EVENT_TYPES, Event
from ..world.limits import too_large_text
from ..world.pages import collect_pages
from ..world.protocol import World
from .resume_calls import RESUME_HOOK_STEP
from .run_control import create_run, resume_hook, wake_run
from .run_limits import slot_of, start_context

log = logging.getLogger("awsworld.children")


async def _start_child_run(workflow: str, call_input: Any, detached: bool, successor: bool = False, *,
                           priority: int | None = None, concurrency_key: str | None = None) -> str:
    """The body of ``awsworld.start_child``: create the child run (idempotent by its derived id), then wake it.
    A non-detached child whose parent was cancelled meanwhile is cancelled here instead (see the module doc).
    ``priority``, ``concurrency_key`` (``child_options``): recorded in the child's executionContext as a client's
    start records them (``run_limits.start_context``); its first delivery takes its slot by them."""
    context = current_step.get()
    assert context is not None, "awsworld.start_child runs as a step"
    world, parent_id, call_id = context.world, context.metadata.run_id, context.metadata.step_id
    # A start under way is finished even when the step is cancelled (the workflow stopped awaiting the call):
    # stopping between the child's run_created and its wake-up would leave a child run that exists and never
    # runs. The cancellation is still the step's end; the finished start's outcome is not recorded.
    work = asyncio.ensure_future(_create_child(world, parent_id, call_id, workflow, call_input, detached, successor,
                                               priority, concurrency_key))
    try:
        return await asyncio.shield(work)
    except asyncio.CancelledError:
        await asyncio.wait({work})
        raise


async def _create_child(world: World, parent_id: str, call_id: str, workflow: str, call_input: Any,
                        detached: bool, successor: bool, priority: int | None = None,
                        concurrency_key: str | None = None) -> str:
    run_id = child_run_id(parent_id, call_id)
    depth = await _child_depth(world, parent_id, workflow, successor)
    # The child's own retention, from its definition where this process has it (not from the step's
    # arguments: they are recorded, and their digest must not change).
    definition = REGISTRY.workflows.get(workflow)
    retention = definition.execution_context() if definition is not None else {}
    # A key given for this call is its slot (the key function's is computed at its first delivery, as before).
    slot = slot_of(definition, (), {}, key=concurrency_key) if concurrency_key is not None else None
    try:
        created = await create_run(world, run_id, workflow, call_input, {
            "parentRunId": parent_id, "parentCallId": call_id, "detached": detached, DEPTH_KEY: depth,
            **retention, **start_context(slot, priority)}, attributes=pinned_attributes(child_pin(workflow)))
    except PayloadTooLargeError as too_large:
        raise ValueTooLargeError(too_large_text(f"the input of child workflow {workflow}", too_large.message)) from None
    run = created.run
    assert run is not None
    if run.workflow_name != workflow:
        raise FatalError(f"run {run_id} exists and runs {run.workflow_name}, not {workflow}")
    if created.event is None and run.status in TERMINAL_RUN_STATUSES:
        return run_id  # an earlier attempt started it and it has ended already
    if not detached and (await world.runs.get(parent_id, resolve_data="none")).status == "cancelled":
        await cancel_run(world, run_id, workflow, f"its parent run {parent_id} was cancelled")
        return run_id
    await wake_run(world, run_id, workflow, "start")
    return run_id


async def _child_depth(world: World, parent_id: str, workflow: str, successor: bool) -> int:
    """The depth of the child ``parent_id`` starts (its parent's, from the parent's ``run_created``, plus one:
    ``durable.child_calls.run_depth``), or ``ChildDepthError`` if that is deeper than ``AWSWORLD_MAX_CHILD_DEPTH``
    allows, before anything is written. A successor (``child_options(successor=True)``: the run continues as it)
    takes its parent's depth: a chain of successors is one run going on, not a nesting, so the limit never ends
    it (the documented continue-as-new failed at its 101st run). Decided here, in the start step's body, rather
    than as the parent's replay: the step's failure is recorded, so every replay of the parent raises it at the
    same call even after the limit changed, and the one read it costs (the parent's run record) is paid once per
    child started, never per replay."""
    parent = await world.runs.get(parent_id, resolve_data="none")
    depth = run_depth(parent.execution_context) + (0 if successor else 1)
    limit = SETTINGS.max_child_depth
    if depth > limit:
        raise ChildDepthError(
            f"child workflow {workflow} would be nested {depth} deep, and AWSWORLD_MAX_CHILD_DEPTH is {limit} (run "
            f"{parent_id} is at depth {depth - 1}; a run a client started is at 0): a workflow that calls itself "
            "as a child needs a base case; if this nesting is meant, raise AWSWORLD_MAX_CHILD_DEPTH")
    return depth


START_CHILD_STEP = StepDef(START_CHILD, _start_child_run,
                           retry=RetryPolicy(max_attempts=11, initial_delay=1.0, backoff=2.0, max_delay=60.0,
                                             no_retry_on=(ChildDepthError,)))


async def on_run_end(world: World, run_id: str, events: Sequence[Event], *, redoing: bool = False) -> None:
    """After a flow saw its run end (``events``: the log it held): a cancelled run cancels its non-detached
    children, and a child reports its outcome to its parent. Free for a run that is neither (no I/O: both are
    read from the log). Raises on a transient error, so the delivery is retried and does it again: ``redoing``
    (that retry, or any other second look at an end) wakes the children cancelled already too (``cancel_run``)."""
    if not events:
        return
    end = next((e for e in reversed(events) if e.event_type in RUN_END_EVENT_TYPES), None)
    if end is None:
        return  # ended by another writer this flow did not see: the delivery that writer wakes does this
    if end.event_type == "run_cancelled":
        await cancel_children(world, run_id, events, redoing=redoing)
    context = (events[0].event_data or {}).get("executionContext") or {}
    parent = context.get("parentRunId") if isinstance(context, dict) else None
    if isinstance(parent, str):
        await report_to_parent(world, run_id, parent, end)


async def report_to_parent(world: World, run_id: str, parent_id: str, end: Event) -> None:
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
    outcome = _outcome_payload(end)
    if outcome["status"] == "failed" and outcome["error"] is None:  # (read without values: from the run's head)
        outcome["error"] = await _error_of_a_run_read_without_values(world, run_id)
    try:
        try:
            await resume_hook(world, token, serde.dumps(outcome), idempotency_key=token)
        except PayloadTooLargeError as too_large:
            # The result fits the child's own run but not with the outcome around it: the parent's await fails
            # naming why (retrying would refuse it again, and the parent would wait for good).
            await resume_hook(world, token, serde.dumps(_too_large_payload(too_large)), idempotency_key=token)
    except (HookNotFoundError, RunGoneError):
        return  # the parent ended meanwhile


def _too_large_payload(too_large: PayloadTooLargeError) -> dict[str, Any]:
    return {"status": "failed", "code": VALUE_TOO_LARGE, "error": {
        "name": ValueTooLargeError.__name__,
        "message": f"it completed, but its result is too large to pass to its parent: {too_large.message}"}}


def _outcome_payload(end: Event) -> dict[str, Any]:
    """The child's outcome for its parent's hook, from its end event; a failure's ``error`` is None when that event
    was read without its values (``report_to_parent`` reads it then)."""
    data = end.event_data or {}
    if end.event_type == "run_completed":
        return {"status": "completed", "result": data.get("output")}
    if end.event_type == "run_failed":
        return {"status": "failed", "error": data.get("error"), "code": data.get("errorCode")}
    reason = data.get("cancelReason")
    return {"status": "cancelled", "error": {"message": f"cancelled ({reason})" if reason else "cancelled",
                                             "name": "Cancelled"}}


async def _error_of_a_run_read_without_values(world: World, run_id: str) -> dict[str, Any]:
    """The error of a failed run whose log was read without its values (its key is lost: ``Flow._ended_unread``,
    ``_worker/inline_loop.py``), for its parent: the run's head shows it all the same, as every read without values
    does, read where it can be (an operator's ``fail`` of such a run stores it unsealed: ``RunFailedData``), else
    a readable error saying why it cannot be (``aws/encryption/run_keys.unreadable_error``). The parent heard a
    bare "failed" before."""
    try:
        error = (await world.runs.get(run_id, resolve_data="none")).error
    except (RunNotFoundError, RunGoneError):
        error = None
    if error is None:
        return {"name": "RunErrorUnavailable", "message": "failed; its error could not be read (its log was read "
                "without its values, and the run's record shows none)"}
    return error.model_dump(mode="json", by_alias=True, exclude_none=True)


async def cancel_children(world: World, run_id: str, events: Sequence[Event], *, redoing: bool = False) -> None:
    """Cancel every child this run declared that was not started detached (from its log: no read); ``redoing``:
    see ``cancel_run``."""
    for event in events:
        if event.event_type != "hook_created":
            continue
        link = _link(event)
        if link is not None and not link.get("detached"):
            await cancel_run(world, str(link["runId"]), str(link["workflowName"]),
                             f"its parent run {run_id} was cancelled", redoing=redoing)


def _link(event: Event) -> dict[str, Any] | None:
    """The child a ``hook_created`` is the call of, from its metadata (None for any other hook)."""
    metadata = (event.event_data or {}).get("metadata")
    if not isinstance(metadata, dict) or LINK_KEY not in metadata:
        return None
    try:
        loaded = serde.loads(metadata)
    except serde.SerializationError:
        return None
    link = loaded.get(LINK_KEY) if isinstance(loaded, dict) else None
    return link if isinstance(link, dict) and "runId" in link and "workflowName" in link else None


async def cancel_run(world: World, run_id: str, workflow: str, reason: str, *, redoing: bool = False) -> None:
    """Cancel a child (recording why) and wake it, so its own flow cancels its children and reports to its
    parent. A child not created yet or ended already is left alone, and so is one cancelled already (the World
    writes nothing: ``world/rules/runs.py``), which the cancel that ended it woke: a parent's second cancel (its
    flow woken again, ``run_control.cancel_run``) woke each child once more, and each of those its own children,
    deliveries for nothing. ``redoing`` (a redelivery of the end's work, or a report made again: the first pass
    may have been cut off between a child's cancel and its wake) wakes such a child all the same."""
    try:
        result = await world.events.create(run_id, {"eventType": "run_cancelled",
                                                    "eventData": {"cancelReason": reason[:512]}},
                                           resolve_data="none")
    except (RunNotFoundError, EntityConflictError, RunGoneError):
        return
    if result.event is not None or redoing:
        await wake_run(world, run_id, workflow, "cancel")


def waiting_children(execution: WorkflowExecution) -> dict[str, datetime]:
    """The child runs this run still waits on (a call's hook created, its outcome not received yet), each with
    when its call was declared (the ``hook_created``'s time)."""
    calls = [hook for hook in execution.live_hooks()
             if hook.token.startswith(TOKEN_PREFIX) and not hook.dispose_requested and not hook.payloads]
    if not calls:
        return {}  # (the common case: no log walk)
    declared = {e.correlation_id: e.created_at for e in execution.log if e.event_type == "hook_created"}
    return {hook.token.removeprefix(TOKEN_PREFIX): declared[hook.id] for hook in calls if hook.id in declared}


def child_check_times(execution: WorkflowExecution, now: datetime) -> list[datetime]:
    """Timers for a run at rest that waits on children: when to look at each child's status, in case its report
    was lost together with the child's last message (a finished child leaves the watch index, so nothing else
    would ever wake this run). As long again as the call has waited so far: a child of minutes is looked at
    after minutes, one of a week about a dozen times in all (the due adds the watch horizon on top)."""
    return [now + max(now - at, timedelta(0)) for at in waiting_children(execution).values()]


async def report_ended_children(world: World, execution: WorkflowExecution) -> int:
    """On a wake: for every child this run still waits on that has ended, do its end's work again (report to
    this run, idempotent by the resume id; cancel its own children if it was cancelled): a report lost with
    the child's last message is made here. Reads one run head per waiting child, and the log of an ended one
    (rare: only when a report was lost). Returns how many ended children were found."""
    found = 0
    for child_id in waiting_children(execution):
        try:
            run = await world.runs.get(child_id, resolve_data="none")
        except (RunNotFoundError, RunGoneError):
            continue  # not created yet (its start step is still to run) or gone
        if run.status not in TERMINAL_RUN_STATUSES:
            continue
        found += 1
        events = await _log_of_an_ended_child(world, child_id)
        log.info("run %s: child run %s ended (%s) and its report had not arrived: reporting it again",
                 execution.run_id, child_id, run.status)
        await on_run_end(world, child_id, events, redoing=True)
    return found


async def _log_of_an_ended_child(world: World, child_id: str) -> list[Event]:
    """The whole log of an ended child, for its end's work done again by its parent: with its values, or without
    them when they are lost (its key is: ``RunValuesUnreadableError.lost``), as the child's own flow reads it then
    (``Flow._ended_unread``, ``_worker/inline_loop.py``), so the parent reports the error ``report_to_parent``
    reads from the child's run, as the child's report would have. A passing refusal raises (the wake is retried).
    The parent failed every delivery of its wake on such a child's values before, and waited for good."""
    try:
        return await collect_pages(lambda cursor: world.events.list(child_id, cursor=cursor))
    except RunValuesUnreadableError as unreadable:
        if not unreadable.lost:
            raise
        log.info("child run %s: its values cannot be read (%s): its end is reported from its log read without them",
                 child_id, unreadable)
        return await collect_pages(lambda cursor: world.events.list(child_id, cursor=cursor, resolve_data="none"))


BUILTIN_STEPS: Mapping[str, StepDef] = {START_CHILD: START_CHILD_STEP, RESUME_HOOK: RESUME_HOOK_STEP}
"""Steps the runtime itself declares: every registry answers them, whatever registry a worker was given (a
workflow's ``resume_hook``'s body is in ``_worker/resume_calls.py``)."""


def resolve_step(registry: Registry, name: str) -> StepDef:
    """The definition a delivery runs for step ``name``: a built-in one, else the registry's (``LookupError``
    when neither has it)."""
    builtin = BUILTIN_STEPS.get(name)
    return builtin if builtin is not None else registry.step(name)


__all__ = ["BUILTIN_STEPS", "cancel_children", "cancel_run", "child_check_times", "on_run_end", "report_ended_children",
           "report_to_parent", "resolve_step", "waiting_children"]
