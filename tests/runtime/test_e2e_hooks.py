"""Hooks and cancellation end to end: payloads in order, tokens reusable once their run ends, and a cancelled
run that sleeps or waits on a hook ends without starting another step. In memory (WorkflowTestEnv); the
hook payload order and the cancelling of a sleeping run also on AWS (moto, the local poller)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter, defaultdict

import pytest

from awsworld import WorkflowRunCancelledError, create_hook, sleep, step, workflow
from awsworld.world.errors import HookNotFoundError, RunGoneError

CALLS: Counter[str] = Counter()
GATES: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)  # steps wait on these until the test sets them


# ----------------------------------------------------------------------------------------- three payloads


@workflow
async def three_payloads(token: str) -> list[object]:
    received = []
    async with create_hook(token=token) as hook:
        async for payload in hook:
            received.append(payload)
            if len(received) == 3:
                break
    return received


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_a_hook_resumed_three_times_delivers_the_payloads_in_order(e2e) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    run = await e2e.start(three_payloads, token)
    await e2e.hook_ready(token, run)
    payloads = [{"n": 1}, "two", [3, "\x00"]]
    for payload in payloads:  # back to back: the run has not consumed the first when the third arrives
        await e2e.client.resume_hook(token, payload)
    assert await run.result(timeout=30) == payloads


async def test_a_hook_resumed_three_times_with_replays_between_keeps_order(e2e) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    run = await e2e.start(three_payloads, token)
    await e2e.hook_ready(token, run)
    for n in range(3):
        await e2e.client.resume_hook(token, n)
        await e2e.idle(quiet=0.2)  # the run suspends again before the next payload
    assert await run.result(timeout=30) == [0, 1, 2]


# ----------------------------------------------------------------------------------------- token reuse


@workflow
async def holds_token(token: str, label: str) -> dict[str, object]:
    hook = create_hook(token=token)  # not disposed: the token is released when the run ends
    payload = await hook
    return {"label": label, "payload": payload}


async def test_a_hook_token_is_reusable_after_its_run_ends(e2e) -> None:
    token = f"tok-{uuid.uuid4().hex}"
    first = await e2e.start(holds_token, token, "first")
    await e2e.hook_ready(token, first)
    await e2e.client.resume_hook(token, 1)
    assert await first.result(timeout=30) == {"label": "first", "payload": 1}

    second = await e2e.start(holds_token, token, "second")
    await e2e.hook_ready(token, second)
    await e2e.client.resume_hook(token, 2)
    assert await second.result(timeout=30) == {"label": "second", "payload": 2}


# ----------------------------------------------------------------------------------------- cancellation


@step
async def after_wait(tag: str) -> str:
    CALLS[tag] += 1
    return tag


@workflow
async def sleeps_then_steps(tag: str) -> str:
    await after_wait(f"{tag}:before")
    await sleep(2)
    return await after_wait(tag)


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_cancelling_a_sleeping_run(e2e) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(sleeps_then_steps, tag)
    await e2e.wait_for_event(run, "wait_created")
    await e2e.client.cancel(run.run_id)
    with pytest.raises(WorkflowRunCancelledError):
        await run.result(timeout=10)
    assert await run.status() == "cancelled"
    await e2e.sleep(2.5)  # past the sleep: its continuation comes and must start nothing
    await e2e.idle()
    assert await e2e.queue_depth() == 0, "the sleep's continuation was delivered"
    assert CALLS[f"{tag}:before"] == 1
    assert CALLS[tag] == 0, "a step started after the run was cancelled"
    types = [t for t, _ in await e2e.event_types(run)]
    after = types[types.index("run_cancelled"):]
    assert "step_created" not in after and "step_started" not in after
    assert await run.status() == "cancelled"


@workflow
async def hook_then_steps(tag: str, token: str) -> str:
    payload = await create_hook(token=token)
    return await after_wait(f"{tag}:{payload}")


async def test_cancelling_a_run_waiting_on_a_hook(e2e) -> None:
    tag = uuid.uuid4().hex
    token = f"tok-{tag}"
    run = await e2e.start(hook_then_steps, tag, token)
    await e2e.hook_ready(token, run)
    await e2e.client.cancel(run.run_id)
    with pytest.raises(WorkflowRunCancelledError):
        await run.result(timeout=10)
    assert await run.status() == "cancelled"
    with pytest.raises((RunGoneError, HookNotFoundError)):  # the run is gone: a payload must not be taken
        await e2e.client.resume_hook(token, "late")
    await e2e.idle()
    assert not [key for key in CALLS if key.startswith(tag)], "a step started after the run was cancelled"
    types = [t for t, _ in await e2e.event_types(run)]
    assert "step_created" not in types and "step_started" not in types
    assert types[-1] == "run_cancelled"


@step
async def slow_in_flight(tag: str) -> str:
    """Runs until the test releases it (after the cancel)."""
    CALLS[f"{tag}:slow-start"] += 1
    await GATES[tag].wait()
    CALLS[f"{tag}:slow-end"] += 1
    return "slow"


@workflow
async def in_flight_then_more(tag: str) -> str:
    await slow_in_flight(tag)
    return await after_wait(f"{tag}:next")


async def test_cancel_lets_an_in_flight_step_finish_and_starts_no_other(e2e) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(in_flight_then_more, tag)
    try:
        await e2e.wait_for_event(run, "step_started")
        await e2e.client.cancel(run.run_id)
        with pytest.raises(WorkflowRunCancelledError):
            await run.result(timeout=10)
        assert CALLS[f"{tag}:slow-end"] == 0, "the step was still in flight when the run was cancelled"
    finally:
        GATES[tag].set()
    await e2e.idle()  # the step ends, and its outcome's flow delivery runs
    assert CALLS[f"{tag}:slow-start"] == 1
    assert CALLS[f"{tag}:slow-end"] == 1, "the in-flight step was not allowed to finish"
    assert CALLS[f"{tag}:next"] == 0, "a step started after the run was cancelled"
    assert await run.status() == "cancelled"
    types = [t for t, _ in await e2e.event_types(run)]
    after = types[types.index("run_cancelled"):]
    assert "step_created" not in after and "step_started" not in after
