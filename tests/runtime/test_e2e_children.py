"""Child workflows end to end, on the in-memory test environment and on ``LocalAWS`` (moto): a ``@workflow``
awaited inside a workflow runs as its own run, linked to its parent in both runs' records, exactly once per
call position, whatever replays, redeliveries and crashes happen between the parent's and the child's writes;
``start_child`` handles; failures as ``ChildWorkflowError``; cancellation of attached (not detached) children."""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from awsworld import (
    ChildWorkflowError,
    Run,
    WorkflowRunCancelledError,
    WorkflowRunFailedError,
    child_options,
    create_hook,
    sleep,
    start_child,
    step,
    workflow,
)
from awsworld._worker.child_runs import on_run_end
from awsworld._worker.dispatch import Worker
from awsworld.authoring.definitions import workflow_name
from awsworld.client.replay import replay_run
from awsworld.durable.child_calls import START_CHILD, child_run_id
from awsworld.testing import WorkflowTestEnv
from awsworld.world.entities import TERMINAL_RUN_STATUSES
from awsworld.world.messages import FlowMessage

from .conftest import Env, holder_of_hook

RESULT_TIMEOUT = 60.0
CALLS: Counter[str] = Counter()


# ----------------------------------------------------------------------------------------- workflows


@step
async def double(n: int) -> int:
    return n * 2


@workflow
async def child_double(n: int) -> int:
    return await double(n)


@workflow
async def parent_awaits(n: int) -> dict[str, Any]:
    value = await child_double(n)
    return {"value": value}


@workflow
async def child_fails(reason: str) -> int:
    raise ValueError(f"child says {reason}")


@workflow
async def parent_catches(reason: str) -> dict[str, Any]:
    try:
        await child_fails(reason)
    except ChildWorkflowError as error:
        return {"status": error.status, "type": error.error_type, "message": str(error), "run": error.run_id}
    return {"status": "no error"}


@workflow
async def parent_lets_it_fail(reason: str) -> int:
    return await child_fails(reason)


@workflow
async def parent_fans_out(n: int) -> list[int]:
    return list(await asyncio.gather(*(child_double(i) for i in range(n))))


@workflow
async def child_waits(token: str) -> str:
    async with create_hook(token=token) as hook:
        payload = await hook
    return f"got {payload}"


@workflow
async def parent_starts_then_awaits(token: str) -> dict[str, Any]:
    handle = await start_child(child_waits, token)
    before = await double(21)  # the child runs meanwhile
    return {"before": before, "child": await handle, "again": await handle, "id": handle.run_id}


@workflow
async def parent_leaves_it_running(token: str) -> str:
    handle = await start_child(child_waits, token)
    return handle.run_id


@workflow
async def parent_with_two_children(token: str) -> str:
    await start_child(child_waits, f"{token}:attached")
    await child_options(detached=True).start(child_waits, f"{token}:detached")
    async with create_hook(token=f"{token}:parent") as hook:
        return str(await hook)


@workflow
async def parent_awaiting_a_cancelled_child(token: str) -> dict[str, Any]:
    try:
        await child_waits(token)
    except ChildWorkflowError as error:
        return {"status": error.status, "message": str(error), "errorType": error.error_type,
                "original": error.original, "cause": error.__cause__ is not None}
    return {"status": "no error"}


@workflow
async def child_sleeps(n: int) -> int:
    await sleep(1)
    return await double(n)


@workflow
async def parent_sleeps_around(n: int) -> list[int]:
    first = await double(n)
    await sleep(1)
    middle = await child_sleeps(first)
    await sleep(1)
    return [first, middle, await double(middle)]


@workflow
async def parent_of_waiting_children(token: str, n: int) -> list[str]:
    return list(await asyncio.gather(*(child_waits(f"{token}:{i}") for i in range(n))))


@workflow
async def grandparent(token: str) -> str:
    return await middle(token)


@workflow
async def middle(token: str) -> str:
    return "middle: " + await child_waits(token)


# ----------------------------------------------------------------------------------------- helpers


async def _events(env: Env, run_id: str) -> list[Any]:
    return await env.client.get_run(run_id).events()


async def _assert_linked(env: Env, parent: Run[Any], child_id: str) -> None:
    """Both records show the link: the child's run_created names its parent and call position; the parent's
    hook for the call names the child, and the start step's result is the child's run id."""
    child_created = (await _events(env, child_id))[0]
    context = (child_created.event_data or {})["executionContext"]
    call_id = context["parentCallId"]
    assert context["parentRunId"] == parent.run_id
    assert child_run_id(parent.run_id, call_id) == child_id
    parent_events = await parent.events()
    linked = [e for e in parent_events if e.event_type == "hook_created"
              and ((e.event_data or {}).get("metadata") or {}).get("awsworld.child", {}).get("runId") == child_id]
    assert len(linked) == 1
    steps = {s.step_id: s for s in await parent.steps()}
    assert steps[call_id].step_name == START_CHILD
    assert steps[call_id].status == "completed"


# ----------------------------------------------------------------------------------------- tests


async def test_a_workflow_called_outside_a_workflow_is_a_plain_call() -> None:
    assert await child_double(4) == 8
    assert await parent_awaits(2) == {"value": 4}


async def test_a_parent_awaits_its_childs_result_and_both_records_show_the_link(env: Env) -> None:
    run = await env.client.start(parent_awaits, 5)
    assert (await run.result(timeout=RESULT_TIMEOUT))["value"] == 10
    [child] = await env.child_runs(run)
    assert (child.workflow_name, child.status) == (workflow_name(child_double), "completed")
    await _assert_linked(env, run, child.run_id)
    assert (await replay_run(env.world, run.run_id)).ok  # the code replays its log


async def test_a_failing_child_raises_child_workflow_error_in_the_parent(env: Env) -> None:
    run = await env.client.start(parent_catches, "no")
    outcome = await run.result(timeout=RESULT_TIMEOUT)
    assert outcome["status"] == "failed"
    assert outcome["type"] == "ValueError"
    assert "child says no" in outcome["message"]
    assert (await env.client.get_run(outcome["run"]).status()) == "failed"

    uncaught = await env.client.start(parent_lets_it_fail, "never")
    with pytest.raises(WorkflowRunFailedError) as failed:
        await uncaught.result(timeout=RESULT_TIMEOUT)
    assert failed.value.error_type == "ChildWorkflowError"
    assert "child says never" in str(failed.value)


async def test_a_fan_out_of_children_with_gather(env: Env) -> None:
    run = await env.client.start(parent_fans_out, 6)
    assert await run.result(timeout=RESULT_TIMEOUT) == [0, 2, 4, 6, 8, 10]
    children = await env.child_runs(run)
    assert len(children) == 6
    assert {c.status for c in children} == {"completed"}


async def test_start_child_left_running_then_awaited(env: Env) -> None:
    token = f"children-later-{env.name}-{id(env)}"
    run = await env.client.start(parent_starts_then_awaits, token)
    child_id = child_run_id(run.run_id, "step_1")
    await env.child_hook(child_id, token)
    await env.client.resume_hook(token, "yes")
    assert await run.result(timeout=RESULT_TIMEOUT) == {"before": 42, "child": "got yes", "again": "got yes",
                                                         "id": child_id}
    await _assert_linked(env, run, child_id)
    assert (await replay_run(env.world, run.run_id)).ok


async def test_a_child_left_running_outlives_its_completed_parent(env: Env) -> None:
    token = f"children-orphan-{env.name}-{id(env)}"
    run = await env.client.start(parent_leaves_it_running, token)
    child_id = await run.result(timeout=RESULT_TIMEOUT)
    child = env.client.get_run(child_id)
    await child.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    await env.client.resume_hook(token, "late")
    assert await child.result(timeout=RESULT_TIMEOUT) == "got late"  # its report finds no parent hook: fine
    assert await run.status() == "completed"


async def test_cancelling_a_parent_cancels_its_attached_child_and_not_the_detached_one(env: Env) -> None:
    token = f"children-cancel-{env.name}-{id(env)}"
    run = await env.client.start(parent_with_two_children, token)
    await run.wait_for_hook(f"{token}:parent", timeout=RESULT_TIMEOUT)
    attached, detached = child_run_id(run.run_id, "step_1"), child_run_id(run.run_id, "step_3")
    await env.child_hook(attached, f"{token}:attached")
    await env.child_hook(detached, f"{token}:detached")

    await env.client.cancel(run.run_id)
    with pytest.raises(WorkflowRunCancelledError):
        await run.result(timeout=RESULT_TIMEOUT)
    assert await env.wait_for_status(attached, TERMINAL_RUN_STATUSES) == "cancelled"
    cancelled = [e for e in await _events(env, attached) if e.event_type == "run_cancelled"]
    assert run.run_id in (cancelled[0].event_data or {}).get("cancelReason", "")
    assert await env.client.get_run(detached).status() == "running"
    await env.client.resume_hook(f"{token}:detached", "still here")
    assert await env.client.get_run(detached).result(timeout=RESULT_TIMEOUT) == "got still here"


async def test_grandchildren_report_up_and_are_cancelled_down(env: Env) -> None:
    token = f"children-nested-{env.name}-{id(env)}"
    run = await env.client.start(grandparent, token)
    grandchild = child_run_id(child_run_id(run.run_id, "step_1"), "step_1")
    await env.child_hook(grandchild, token)
    await env.client.resume_hook(token, "deep")
    assert await run.result(timeout=RESULT_TIMEOUT) == "middle: got deep"

    cancelled = await env.client.start(grandparent, f"{token}:cancel")
    middle_id = child_run_id(cancelled.run_id, "step_1")
    grandchild = child_run_id(middle_id, "step_1")
    await env.child_hook(grandchild, f"{token}:cancel")
    await env.client.cancel(cancelled.run_id)
    assert await env.wait_for_status(middle_id, TERMINAL_RUN_STATUSES) == "cancelled"
    assert await env.wait_for_status(grandchild, TERMINAL_RUN_STATUSES) == "cancelled"


async def test_a_second_cancel_of_a_parent_wakes_no_child(awsworld_env: WorkflowTestEnv,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A repeated cancel sends what a cancel needs, once: the first wakes the parent and, from its flow, each
    attached child; the second finds the parent cancelled, writes nothing, and wakes the parent alone (which
    recovers a first wake that was lost): it woke each child once more too, deliveries for nothing. Every queue
    send is counted, on the in-memory World (deterministic: idle between the two)."""
    env, token = awsworld_env, "children-cancel-twice"
    run = await env.client.start(parent_of_waiting_children, token, 3)
    await env.idle()
    children = [child.run_id for child in await Env("memory", env.client, env.world).child_runs(run)]
    assert [await env.client.get_run(child).status() for child in children] == ["running"] * 3
    sent: list[str] = []
    queue, queue_batch = env.world.queue, env.world.queue_batch

    async def queued_one(name: str, payload: Any, **kwargs: Any) -> Any:
        sent.append(FlowMessage.from_payload(payload).run_id)
        return await queue(name, payload, **kwargs)

    async def queued_many(name: str, messages: Any, **kwargs: Any) -> Any:
        sent.extend(FlowMessage.from_payload(m.payload).run_id for m in messages)
        return await queue_batch(name, messages, **kwargs)

    monkeypatch.setattr(env.world, "queue", queued_one)
    monkeypatch.setattr(env.world, "queue_batch", queued_many)

    await env.client.cancel(run.run_id)
    await env.idle()
    assert [await env.client.get_run(child).status() for child in children] == ["cancelled"] * 3
    assert sorted(sent) == sorted([run.run_id, *children]), "the first cancel: the parent, then each child once"

    sent.clear()
    await env.client.cancel(run.run_id, reason="again")
    await env.idle()
    assert sent == [run.run_id], "a second cancel woke more than the parent"
    reasons = [(e.event_data or {}).get("cancelReason") for e in await run.events() if e.event_type == "run_cancelled"]
    assert reasons == [None], "the second cancel wrote a second end"

    # A redelivery of the parent's flow may follow a first pass cut off between a child's cancel and its wake:
    # it wakes the cancelled children again.
    sent.clear()
    await Worker(env.world).execute(FlowMessage(run.run_id, workflow_name(parent_of_waiting_children)),
                                    deadline=time.monotonic() + 60, message_id="redelivered", attempt=2)
    await env.idle()
    assert sorted(sent) == sorted(children)


async def test_a_cancelled_child_raises_in_its_parent(env: Env) -> None:
    token = f"children-child-cancelled-{env.name}-{id(env)}"
    run = await env.client.start(parent_awaiting_a_cancelled_child, token)
    child_id = child_run_id(run.run_id, "step_1")
    await env.child_hook(child_id, token)
    await env.client.cancel(child_id, reason="order withdrawn")
    outcome = await run.result(timeout=RESULT_TIMEOUT)
    assert outcome["status"] == "cancelled"
    # Said once, with the reason (it was "... cancelled: cancelled (order withdrawn)").
    assert outcome["message"] == (f"child run {child_id} ({workflow_name(child_waits)}) cancelled "
                                  "(order withdrawn)")
    # A cancelled child raised nothing: no error type (it was "Cancelled", a type that does not exist), no
    # original error, no stored traceback as the cause.
    assert (outcome["errorType"], outcome["original"], outcome["cause"]) == (None, None, False)


async def test_replays_across_deliveries_around_a_child_start_it_once(env: Env) -> None:
    run = await env.client.start(parent_sleeps_around, 3)
    assert await run.result(timeout=RESULT_TIMEOUT) == [6, 12, 24]
    [child] = await env.child_runs(run)
    assert child.status == "completed"
    await _assert_linked(env, run, child.run_id)
    received = [e for e in await run.events() if e.event_type == "hook_received"]
    assert len(received) == 1
    assert (await replay_run(env.world, run.run_id)).ok
    assert (await replay_run(env.world, child.run_id)).ok


async def test_a_childs_end_observed_again_is_delivered_once(env: Env) -> None:
    token = f"children-twice-{env.name}-{id(env)}"
    run = await env.client.start(parent_starts_then_awaits, token)
    child_id = child_run_id(run.run_id, "step_1")
    await env.child_hook(child_id, token)
    await env.client.resume_hook(token, "once")
    await run.result(timeout=RESULT_TIMEOUT)
    before = [e for e in await run.events() if e.event_type == "hook_received"]
    child_log = await _events(env, child_id)
    for _ in range(2):  # the child's end seen by two more deliveries
        await on_run_end(env.world, child_id, child_log)
    assert [e for e in await run.events() if e.event_type == "hook_received"] == before


async def test_a_child_ended_whose_log_is_read_without_values_reports_its_error_to_its_parent(
        awsworld_env: WorkflowTestEnv) -> None:
    """A child whose key is lost, failed by an operator (``Client.fail`` writes its error unsealed), is reported by
    a flow that reads its log without values (``Flow._ended_unread``: its values cannot be read), as here: its end
    event carries no error then, and the parent's ``ChildWorkflowError`` said only "failed". Its error's type and
    message now come from the child's run (``report_to_parent``). (The lost key itself, on the emulator's KMS:
    tests/runtime/test_e2e_encryption.py.)"""
    env, token = awsworld_env, "children-lost-key"
    run = await env.client.start(parent_awaiting_a_cancelled_child, token)
    child_id = await holder_of_hook(env.world, token)
    # The operator's fail as ``Client.fail`` writes it, with no wake: the flow that would read the child's values
    # does not run, the one that reads them without does (below).
    await env.world.events.create(child_id, {"eventType": "run_failed", "eventData": {
        "error": {"name": "FailedOnRequest", "message": "failed on request: its key was deleted"},
        "errorCode": "FAILED_ON_REQUEST", "unsealedIfKeyLost": True}})
    without_values = (await env.world.events.list(child_id, resolve_data="none")).data
    assert "error" not in (without_values[-1].event_data or {})
    await on_run_end(env.world, child_id, without_values)
    outcome = await run.result(timeout=RESULT_TIMEOUT)
    assert (outcome["status"], outcome["errorType"]) == ("failed", "FailedOnRequest"), outcome
    assert outcome["message"].endswith("failed: failed on request: its key was deleted"), outcome


async def test_a_crash_after_the_childs_run_created_starts_exactly_one_child(env: Env,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """The start step's first attempt dies right after the child's run_created landed (before the step's outcome
    and before the child is woken): its retry derives the same id, finds the run, wakes it; one child."""
    crashes: Counter[str] = Counter()
    original = env.world.events.create

    async def create(run_id: Any, event: Any, **kwargs: Any) -> Any:
        result = await original(run_id, event, **kwargs)
        is_child = isinstance(event, dict) and event.get("eventType") == "run_created" \
            and ((event.get("eventData") or {}).get("executionContext") or {}).get("parentRunId")
        if is_child and not crashes[run_id]:
            crashes[run_id] += 1
            raise ConnectionError("the process died after run_created landed")
        return result

    monkeypatch.setattr(env.world.events, "create", create)
    run = await env.client.start(parent_awaits, 7)
    assert (await run.result(timeout=RESULT_TIMEOUT))["value"] == 14
    [child] = await env.child_runs(run)
    assert crashes[child.run_id] == 1
    [start] = [s for s in await run.steps() if s.step_name == START_CHILD]
    assert (start.status, start.attempt) == ("completed", 2)
    await _assert_linked(env, run, child.run_id)


async def test_a_failure_before_the_childs_run_created_retries_the_start(env: Env,
                                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    refused: Counter[str] = Counter()
    original = env.world.events.create

    async def create(run_id: Any, event: Any, **kwargs: Any) -> Any:
        is_child = isinstance(event, dict) and event.get("eventType") == "run_created" \
            and ((event.get("eventData") or {}).get("executionContext") or {}).get("parentRunId")
        if is_child and not refused[run_id]:
            refused[run_id] += 1
            raise ConnectionError("run_created did not reach the store")
        return await original(run_id, event, **kwargs)

    monkeypatch.setattr(env.world.events, "create", create)
    run = await env.client.start(parent_awaits, 8)
    assert (await run.result(timeout=RESULT_TIMEOUT))["value"] == 16
    [child] = await env.child_runs(run)
    assert refused[child.run_id] == 1


async def test_a_parent_cancelled_while_its_child_is_being_started_cancels_the_child(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race the start step closes: the parent's cancellation (and its flow's look at its children) lands
    between the start step's claim and the child's run_created; the step sees the parent cancelled."""
    original = env.world.events.create
    parents: list[str] = []

    async def create(run_id: Any, event: Any, **kwargs: Any) -> Any:
        context = ((event.get("eventData") or {}).get("executionContext") or {}) if isinstance(event, dict) else {}
        if isinstance(event, dict) and event.get("eventType") == "run_created" and context.get("parentRunId"):
            parents.append(context["parentRunId"])
            await original(context["parentRunId"], {"eventType": "run_cancelled"})
        return await original(run_id, event, **kwargs)

    monkeypatch.setattr(env.world.events, "create", create)
    token = f"children-race-{env.name}-{id(env)}"
    run = await env.client.start(parent_awaiting_a_cancelled_child, token)
    with pytest.raises(WorkflowRunCancelledError):
        await run.result(timeout=RESULT_TIMEOUT)
    assert parents == [run.run_id]
    child_id = child_run_id(run.run_id, "step_1")
    assert await env.wait_for_status(child_id, TERMINAL_RUN_STATUSES) == "cancelled"


async def test_long_parent_ids_derive_bounded_child_ids() -> None:
    parent = "wrun_" + "x" * 150
    derived = child_run_id(parent, "step_3")
    assert derived.startswith("wrun_") and len(derived) == 31
    assert derived == child_run_id(parent, "step_3") != child_run_id(parent, "step_5")
    assert child_run_id("wrun_01ABC", "step_1") == "wrun_01ABC.step_1"


async def test_time_skips_while_a_parent_waits_for_a_sleeping_child(awsworld_env: WorkflowTestEnv) -> None:
    start = awsworld_env.now()
    run = await awsworld_env.client.start(parent_sleeps_around, 1)
    assert await run.result() == [2, 4, 8]
    assert awsworld_env.now() - start >= timedelta(seconds=3)


async def test_a_failed_report_to_the_parent_is_retried_with_the_childs_delivery(
        awsworld_env: WorkflowTestEnv, monkeypatch: pytest.MonkeyPatch) -> None:
    """The child ended, and its report (the parent's hook_received) fails once: the child's delivery fails,
    comes back, finds its run ended and reports again; the parent receives the outcome once."""
    world = awsworld_env.world
    original = world.events.create
    failed: list[str] = []

    async def create(run_id: Any, event: Any, **kwargs: Any) -> Any:
        resume = ((event.get("eventData") or {}).get("resumeId") or "") if isinstance(event, dict) else ""
        report = isinstance(event, dict) and event.get("eventType") == "hook_received"
        if report and resume.startswith("awsworld.child:") and not failed:
            failed.append(run_id)
            raise ConnectionError("the report did not reach the store")
        return await original(run_id, event, **kwargs)

    monkeypatch.setattr(world.events, "create", create)
    run = await awsworld_env.client.start(parent_awaits, 4)
    assert await run.result() == {"value": 8}
    assert failed == [run.run_id]
    assert len([e for e in await run.events() if e.event_type == "hook_received"]) == 1


async def test_a_run_lists_its_children_from_its_own_steps(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(parent_fans_out, 3)
    await run.result()
    children = await run.children()
    assert len(children) == 3
    for child in children:
        record = await child.get()
        assert record.status == "completed"
        assert (record.execution_context or {}).get("parentRunId") == run.run_id
    assert await (await awsworld_env.client.start(child_double, 1)).children() == []


# ----------------------------------------------------------------------------------------- a lost report


@workflow
async def child_waits_on_a_hook(token: str) -> str:
    async with create_hook(token=token) as hook:
        return str(await hook)


@workflow
async def parent_of_a_waiting_child(token: str) -> dict[str, Any]:
    try:
        return {"value": await child_waits_on_a_hook(token)}
    except ChildWorkflowError as error:
        return {"status": error.status}


async def test_a_child_whose_end_was_never_reported_is_found_by_its_parent_on_a_wake(env: Env) -> None:
    """The child ends and its last message (the one whose flow would report to the parent) is lost: here the
    end is written straight to the World, with no message at all. The parent, waiting on a hook, still has a
    due (a child call counts as a timer), so the watchdog wakes it (memory: on the virtual clock; LocalAWS: an
    operator's wake, the path the watchdog's wake takes too), and the wake's flow reports the ended child."""
    token = f"lost-report-{time.monotonic_ns()}"
    parent = await env.client.start(parent_of_a_waiting_child, token)
    child_id = child_run_id(parent.run_id, "step_1")
    await env.child_hook(child_id, token)
    await env.world.events.create(child_id, {"eventType": "run_cancelled", "eventData": {"cancelReason": "lost"}})
    if env.name == "memory":
        await asyncio.sleep(0.2)
        assert env.world.watch.next_due() is not None, "a parent waiting on a child has a due"
    else:
        await env.client.wake(parent.run_id)
    assert await parent.result(timeout=RESULT_TIMEOUT) == {"status": "cancelled"}
