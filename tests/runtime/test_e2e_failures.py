"""Runs that must fail clearly, and runs two deliveries drive at once: a return value that cannot be stored,
workflow code that no longer matches its log, and overlapping flow deliveries of one run. In memory
(WorkflowTestEnv); the overlapping deliveries also on AWS (moto), where the two deliveries interleave at every
DynamoDB request and only its conditional writes keep them apart."""

from __future__ import annotations

import asyncio
import inspect
import os
import secrets
import threading
import time
import uuid
from collections import Counter

import pytest

from awsworld import (
    StepError,
    WorkflowRunFailedError,
    create_hook,
    map,
    poll_until,
    sleep,
    start_child,
    step,
    with_name,
    workflow,
)
from awsworld._worker.dispatch import Worker
from awsworld.authoring.definitions import workflow_name
from awsworld.authoring.errors import CORRUPTED_EVENT_LOG, SERIALIZATION_ERROR, CallNotAwaitedError
from awsworld.durable import serde

from .conftest import deployed

CALLS: Counter[str] = Counter()


# ----------------------------------------------------------------------------------------- unserializable values


@workflow
async def returns_a_lock() -> object:
    return {"ok": [1, threading.Lock()]}


async def test_a_non_serializable_return_value_fails_the_run_clearly(e2e) -> None:
    run = await e2e.start(returns_a_lock)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    error = failed.value
    assert error.code == SERIALIZATION_ERROR
    assert "cannot be serialized" in str(error)
    assert "lock" in str(error).lower(), "the message names the type that cannot be stored"
    assert await run.status() == "failed"


@step(name="failures.charge")
async def charge_for(order_id: str) -> str:
    return f"receipt-{order_id}"


@workflow(name="failures.forgets_await")
async def forgets_await(order_id: str) -> dict[str, object]:
    receipt = charge_for(order_id)  # the newcomer's mistake: no await
    return {"receipt": receipt}


async def test_a_step_called_without_await_is_named_with_the_fix(e2e) -> None:
    """A step called without ``await`` gives a coroutine that nothing runs: the run said only ``cannot serialize
    <class 'coroutine'>`` (when the body returned it) or completed without the step (when it dropped it). It now
    fails naming the call, where it was made, and the fix."""
    run = await e2e.start(forgets_await, "A-17")
    with pytest.raises(CallNotAwaitedError) as failed:
        await run.result(timeout=30)
    assert str(failed.value) == f"run {run.run_id} (failures.forgets_await) failed: " + (
        f"step 'failures.charge' was called at {HERE}, line {FORGETS_LINE} and never awaited: its call made a "
        "coroutine that nothing ran, so it did not run (write `await` before the call, or pass several calls to "
        "asyncio.gather)"), failed.value


@workflow(name="failures.child")
async def child_of(order_id: str) -> str:
    return order_id


@workflow(name="failures.drops_calls")
async def drops_calls(order_id: str) -> str:
    charge_for(order_id)  # a statement of its own: the coroutine is dropped, and the step never runs
    child_of(order_id)
    with_name("pay").call(charge_for, order_id)
    return "done"


@workflow(name="failures.awaits_later")
async def awaits_later(order_id: str) -> list[str]:
    first = charge_for(f"{order_id}-1")  # made now, awaited after another call: a call may wait for its await
    second = await charge_for(f"{order_id}-2")
    return [await first, second, await child_of(order_id)]


async def test_a_dropped_step_or_child_call_fails_the_run_instead_of_completing_without_it(e2e) -> None:
    run = await e2e.start(drops_calls, "A-18")
    with pytest.raises(CallNotAwaitedError) as failed:
        await run.result(timeout=30)
    message = str(failed.value)
    assert message.startswith(
        f"run {run.run_id} (failures.drops_calls) failed: step 'failures.charge' was called at {HERE}, "
        f"line {DROPS_LINE} and never awaited; "
        f"child workflow 'failures.child' was called at {HERE}, line {DROPS_LINE + 1} and never awaited; "
        f"step 'failures.charge' was called at {HERE}, line {DROPS_LINE + 2} and never awaited: "), message
    assert [e.event_type for e in await run.events() if e.event_type.startswith("step_")] == [], "nothing ran"

    later = await e2e.start(awaits_later, "A-19")
    assert await later.result(timeout=30) == ["receipt-A-19-1", "receipt-A-19-2", "A-19"]


@workflow(name="failures.drops_waits")
async def drops_waits(order_id: str) -> str:
    sleep(60)  # the newcomer's mistake: the run went on at once, as if it had slept
    start_child(child_of, order_id)
    map(charge_for, [order_id])
    poll_until(charge_for, order_id)
    return "done"


async def test_a_dropped_sleep_child_start_or_batch_fails_the_run_instead_of_completing_without_it(e2e) -> None:
    """``sleep(60)`` without ``await`` (or ``start_child``, ``map``, ``poll_until``: awsworld's own ``async def``s,
    not a step's wrapper) made a coroutine nothing ran: the run completed at once, as if it had slept and started
    its child, and only Python's ``RuntimeWarning`` said anything. It now fails as a dropped step call does."""
    run = await e2e.start(drops_waits, "A-20")
    with pytest.raises(CallNotAwaitedError) as failed:
        await run.result(timeout=30)
    assert str(failed.value) == f"run {run.run_id} (failures.drops_waits) failed: " + "; ".join(
        f"{what} was called at {HERE}, line {WAITS_LINE + offset} and never awaited"
        for offset, what in enumerate(["awsworld.sleep()", "awsworld.start_child()", "awsworld.map()",
                                       "awsworld.poll_until()"])) + (
        ": its call made a coroutine that nothing ran, so it did not run (write `await` before the call, or pass "
        "several calls to asyncio.gather)"), failed.value
    assert [e.event_type for e in await run.events()
            if e.event_type.startswith(("step_", "wait_"))] == [], "nothing ran"


HERE = os.path.relpath(__file__)
WAITS_LINE = inspect.getsourcelines(drops_waits)[1] + 2
FORGETS_LINE = inspect.getsourcelines(forgets_await)[1] + 2
DROPS_LINE = inspect.getsourcelines(drops_calls)[1] + 2


@step
async def step_returns_a_lock(tag: str) -> object:
    CALLS[tag] += 1
    return threading.Lock()


@workflow
async def catches_unserializable_step_result(tag: str) -> dict[str, object]:
    try:
        await step_returns_a_lock(tag)
    except StepError as error:
        return {"message": str(error), "type": error.error_type}
    return {"message": None}


async def test_a_non_serializable_step_result_fails_the_step_without_retries(e2e) -> None:
    tag = uuid.uuid4().hex
    result = await e2e.run(catches_unserializable_step_result, tag)
    assert "cannot be serialized" in result["message"]
    assert result["type"] == "FatalError"
    await e2e.idle()
    assert CALLS[tag] == 1


# ----------------------------------------------------------------------------------------- divergence


@step
async def divergent_step() -> str:
    CALLS["divergent_step"] += 1
    return "new code"


@workflow
async def waits_then_diverges(token: str) -> object:
    return await create_hook(token=token)


async def changed_code(token: str) -> object:
    """What ``waits_then_diverges`` becomes: a step first, where the log has a hook."""
    await divergent_step()
    return await create_hook(token=token)


async def test_changed_workflow_code_is_reported_as_divergence(e2e) -> None:
    CALLS["divergent_step"] = 0
    token = f"tok-{uuid.uuid4().hex}"
    run = await e2e.start(waits_then_diverges, token)
    await e2e.hook_ready(token, run)
    await e2e.idle()
    with deployed(waits_then_diverges, changed_code):
        async with e2e.counting() as deliveries:
            await e2e.client.resume_hook(token, "wake up")
            with pytest.raises(WorkflowRunFailedError) as failed:
                await run.result(timeout=30)
    assert failed.value.code == CORRUPTED_EVENT_LOG  # the spec's code; the message names the divergence
    message = str(failed.value)
    assert "corrupt" not in message.lower()
    assert f"hook 1 (event 3): the log has create_hook(token='{token}'), the code called divergent_step() there" \
        in message, message
    assert deliveries.statuses == ["diverged", "diverged", "diverged", "failed"], deliveries.statuses
    assert deliveries.errors == []
    assert CALLS["divergent_step"] == 0
    types = [t for t, _ in await e2e.event_types(run)]
    assert "step_created" not in types
    assert types[-1] == "run_failed"


# ----------------------------------------------------------------------------------------- overlapping deliveries


@step
async def overlap_step(tag: str, i: int) -> int:
    CALLS[f"{tag}:{i}"] += 1
    await asyncio.sleep(0.2)
    return i * 10


@workflow
async def overlapped(tag: str) -> list[int]:
    serial = [await overlap_step(tag, i) for i in range(3)]
    fanned = await asyncio.gather(*(overlap_step(tag, i) for i in range(3, 8)))
    serial.append(await overlap_step(tag, 8))
    return [*serial, *fanned]


async def _create_unwoken_run(e2e, workflow_fn, *args: object) -> str:
    """A run_created event as ``Client.start`` writes it, but without queueing its first flow message."""
    result = await e2e.world.events.create(None, {
        "eventType": "run_created",
        "eventData": {"workflowName": workflow_name(workflow_fn),
                      "input": serde.dumps({"args": list(args), "kwargs": {}}),
                      "executionContext": {"seed": secrets.token_hex(32)}},
    }, resolve_data="none")
    return result.run.run_id


# On both backends, except one message delivered twice "together": in memory the two deliveries do not
# interleave until one of them awaits a step, so the second always finds step_1 already started under its own
# message id, which is the redelivery-while-running case below (outside Lambda's contract, taken to mean the
# first delivery died). Only real I/O (AWS) starts them together.
@pytest.mark.parametrize(("e2e_backend", "same_message", "staggered"), [
    pytest.param("memory", False, False, id="together-memory"),
    pytest.param("memory", False, True, id="mid-step-memory"),
    pytest.param("aws", False, False, id="together-aws"),
    pytest.param("aws", True, False, id="together-same-message-aws"),
    pytest.param("aws", False, True, id="mid-step-aws"),
])
async def test_overlapping_flow_deliveries_never_both_drive_a_run(e2e, same_message: bool, staggered: bool) -> None:
    """Two flow deliveries of one run at once: started together (two messages, or one message delivered
    twice), or a second message's delivery while the first runs a step. (A redelivery of the same message
    while its first delivery still runs cannot happen on Lambda: the visibility timeout outlives the function,
    and the runtime takes such a redelivery to mean the first delivery died; see the next test.)"""
    tag = uuid.uuid4().hex
    await e2e.idle()
    run_id = await _create_unwoken_run(e2e, overlapped, tag)
    run = e2e.client.get_run(run_id)
    payload = {"runId": run_id, "workflowName": workflow_name(overlapped)}
    deadline = time.monotonic() + 60
    message_ids = ["msg_overlap", "msg_overlap"] if same_message else [None, None]

    async def deliver(message_id: str | None) -> str:
        return (await Worker(e2e.world).execute(payload, deadline=deadline, message_id=message_id)).status

    first = asyncio.create_task(deliver(message_ids[0]))
    if staggered:
        await e2e.wait_for_event(run, "step_started")
    statuses = [*await asyncio.gather(first, deliver(message_ids[1]))]
    assert await run.result(timeout=30) == [0, 10, 20, 80, 30, 40, 50, 60, 70]
    await e2e.idle()
    events = await run.events()
    created = Counter(e.correlation_id for e in events if e.event_type == "step_created")
    started = Counter(e.correlation_id for e in events if e.event_type == "step_started")
    assert len(created) == 9 and set(created.values()) == {1}, (created, statuses)
    assert set(started) == set(created)
    assert set(started.values()) == {1}, f"a step was started twice: {started} (outcomes {statuses})"
    assert {i: CALLS[f"{tag}:{i}"] for i in range(9)} == dict.fromkeys(range(9), 1)
    assert [e.event_type for e in events].count("run_completed") == 1


@step
async def killed_step(tag: str, i: int) -> int:
    CALLS[f"{tag}:start:{i}"] += 1
    await asyncio.sleep(0.5)
    CALLS[f"{tag}:end:{i}"] += 1
    return i


@workflow
async def survives_a_killed_delivery(tag: str) -> list[int]:
    return [await killed_step(tag, i) for i in range(3)]


async def test_a_redelivery_after_its_delivery_died_mid_step_finishes_the_run(e2e) -> None:
    tag = uuid.uuid4().hex
    await e2e.idle()
    run_id = await _create_unwoken_run(e2e, survives_a_killed_delivery, tag)
    run = e2e.client.get_run(run_id)
    payload = {"runId": run_id, "workflowName": workflow_name(survives_a_killed_delivery)}

    async def deliver() -> str:
        outcome = await Worker(e2e.world).execute(payload, deadline=time.monotonic() + 60,
                                                         message_id="msg_killed")
        return outcome.status

    first = asyncio.create_task(deliver())
    await e2e.wait_for_event(run, "step_started")
    first.cancel()  # the Lambda dies in the middle of the inline step
    with pytest.raises(asyncio.CancelledError):
        await first
    assert CALLS[f"{tag}:start:0"] == 1 and CALLS[f"{tag}:end:0"] == 0
    assert await deliver() == "completed"  # SQS delivers the same message again
    assert await run.result(timeout=10) == [0, 1, 2]
    events = await run.events()
    started = Counter(e.correlation_id for e in events if e.event_type == "step_started")
    completed = Counter(e.correlation_id for e in events if e.event_type == "step_completed")
    assert started == {"step_1": 2, "step_2": 1, "step_3": 1}, "only the interrupted step runs again"
    assert completed == {"step_1": 1, "step_2": 1, "step_3": 1}
    assert [CALLS[f"{tag}:end:{i}"] for i in range(3)] == [1, 1, 1]
