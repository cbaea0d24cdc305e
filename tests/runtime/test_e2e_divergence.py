"""Replay is never silently wrong: every change class of workflow code is caught as a divergence, in production
(the flow fails the run naming the position and both calls) and by the replayer (``awsworld.client.replay``),
and ``asyncio.as_completed`` over bare coroutines declares in a replay-stable order."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from typing import Any

import pytest

from awsworld import WorkflowRunFailedError, create_hook, sleep, step, workflow
from awsworld.authoring.definitions import REGISTRY, Registry, WorkflowDef, workflow_name
from awsworld.authoring.errors import CORRUPTED_EVENT_LOG
from awsworld.client.replay import read_run, replay_events

from .conftest import deployed

CALLS: Counter[str] = Counter()


@step
async def charge(order: str, amount: float) -> str:
    CALLS[f"charge:{order}:{amount}"] += 1
    return f"receipt {order} {amount}"


@step
async def charge_v2(order: str, amount: float) -> str:
    return f"receipt v2 {order} {amount}"


@step
async def audit(order: str) -> str:
    return f"audited {order}"


@step
async def ship(order: str, address: Any) -> str:
    return f"label {order} -> {address}"


@workflow
async def shop(order: str) -> dict[str, Any]:
    receipt = await charge(order, 42.5)
    await sleep(0.5)
    async with create_hook(token=f"ship:{order}") as hook:
        address = await hook
    label = await ship(order, address)
    return {"receipt": receipt, "label": label}


def with_code(fn: Any, of: Any = shop) -> Registry:
    """A registry where the workflow ``of`` runs ``fn`` instead (new code under the old name)."""
    registry = Registry()
    registry.steps.update(REGISTRY.steps)
    registry.workflows.update(REGISTRY.workflows)
    name = workflow_name(of)
    registry.workflows[name] = WorkflowDef(name, fn)
    return registry


# The change classes, as new code for ``shop``.


async def renamed(order: str) -> Any:
    await charge_v2(order, 42.5)
    await sleep(0.5)
    async with create_hook(token=f"ship:{order}") as hook:
        address = await hook
    return {"receipt": None, "label": await ship(order, address)}


async def argument_changed(order: str) -> Any:
    receipt = await charge(order, 40.0)
    await sleep(0.5)
    async with create_hook(token=f"ship:{order}") as hook:
        address = await hook
    return {"receipt": receipt, "label": await ship(order, address)}


async def step_removed(order: str) -> Any:
    await sleep(0.5)
    async with create_hook(token=f"ship:{order}") as hook:
        address = await hook
    return {"receipt": None, "label": await ship(order, address)}


async def step_inserted(order: str) -> Any:
    receipt = await charge(order, 42.5)
    await sleep(0.5)
    await audit(order)
    async with create_hook(token=f"ship:{order}") as hook:
        address = await hook
    return {"receipt": receipt, "label": await ship(order, address)}


async def hook_moved(order: str) -> Any:
    receipt = await charge(order, 42.5)
    async with create_hook(token=f"ship:{order}") as hook:
        address = await hook
    await sleep(0.5)
    return {"receipt": receipt, "label": await ship(order, address)}


async def hook_token_changed(order: str) -> Any:
    receipt = await charge(order, 42.5)
    await sleep(0.5)
    async with create_hook(token=f"deliver:{order}") as hook:
        address = await hook
    return {"receipt": receipt, "label": await ship(order, address)}


async def wait_changed(order: str) -> Any:
    receipt = await charge(order, 42.5)
    await sleep(60)
    async with create_hook(token=f"ship:{order}") as hook:
        address = await hook
    return {"receipt": receipt, "label": await ship(order, address)}


async def result_changed(order: str) -> Any:
    receipt = await charge(order, 42.5)
    await sleep(0.5)
    async with create_hook(token=f"ship:{order}") as hook:
        address = await hook
    await ship(order, address)
    return {"receipt": receipt, "label": "changed"}


async def extra_call_at_end(order: str) -> Any:
    receipt = await charge(order, 42.5)
    await sleep(0.5)
    async with create_hook(token=f"ship:{order}") as hook:
        address = await hook
    label = await ship(order, address)
    await audit(order)
    return {"receipt": receipt, "label": label}


@pytest.fixture
async def shop_log(e2e) -> list[Any]:
    """One completed run of ``shop``, read back with its inputs (a few ms in memory: one per test)."""
    order = f"A-{uuid.uuid4().hex[:6]}"
    run = await e2e.start(shop, order)
    await e2e.hook_ready(f"ship:{order}", run)
    await e2e.client.resume_hook(f"ship:{order}", "1 Main St")
    result = await run.result(timeout=30)
    assert result["label"] == f"label {order} -> 1 Main St"
    return await read_run(e2e.world, run.run_id)


async def test_unchanged_code_replays_the_stored_run(shop_log) -> None:
    result = replay_events(shop_log)
    assert result.ok, result.describe()
    assert result.events == len(shop_log)


@pytest.mark.parametrize(("code", "change", "expected"), [
    # A rename says both registered names: the log's and the code's (a name= changed, the function kept).
    (renamed, "name", ["step 1 (event", f"the log has {__name__}.charge('{{order}}', 42.5)",
                       f"the code called {__name__}.charge_v2('{{order}}', 42.5)"]),
    (argument_changed, "arguments", ["step 1 (event", "the log has charge('{order}', 42.5)",
                                     "the code called charge('{order}', 40.0)"]),
    (step_removed, "kind", ["step 1 (event", "the log has charge('{order}', 42.5)", "the code called sleep until",
                            "the code's calls and the log's are not the same"]),
    (step_inserted, "kind", ["hook 3 (event", "the log has create_hook(token='ship:{order}')",
                             "the code called audit('{order}') there"]),
    (hook_moved, "kind", ["wait 2 (event", "the log has sleep until", "the code called "
                          "create_hook(token='ship:{order}') there"]),
    (hook_token_changed, "token", ["hook 3 (event", "the log has create_hook(token='ship:{order}')",
                                   "the code called create_hook(token='deliver:{order}')"]),
    (wait_changed, "duration", ["wait 2 (event", "(0.5 s after the call)", "(60 s after the call)"]),
    (extra_call_at_end, "end", ["the end of the log", "the log has the run completed",
                                "the code called audit('{order}')"]),
    (result_changed, "result", ["the end of the log", "the code returned {{'label': 'changed'"]),
], ids=lambda v: v.__name__ if callable(v) else None)
async def test_each_change_class_is_reported_with_both_calls(shop_log, code: Any, change: str,
                                                             expected: list[str]) -> None:
    order = shop_log[0].event_data["input"]["args"][0]
    result = replay_events(shop_log, registry=with_code(code))
    assert result.status == "diverged", result.describe()
    assert result.change == change, result.describe()
    for text in expected:
        assert text.format(order=order) in result.message, (text, result.message)
    assert "corrupt" not in result.message


# ----------------------------------------------------------------------------------------- swapped arguments


@workflow
async def pays_two(first: str, second: str, token: str) -> list[str]:
    receipts = [await charge(first, 1.0), await charge(second, 2.0)]
    decision = await create_hook(token=token)
    CALLS[f"decided:{token}"] += 1
    return [*receipts, decision]


async def pays_two_swapped(first: str, second: str, token: str) -> list[str]:
    receipts = [await charge(second, 2.0), await charge(first, 1.0)]
    decision = await create_hook(token=token)
    CALLS[f"decided:{token}"] += 1
    return [*receipts, decision]


async def test_swapped_arguments_fail_the_run_naming_both_calls_and_return_nothing_wrong(e2e) -> None:
    token = f"pay-{uuid.uuid4().hex}"
    first, second = f"X-{uuid.uuid4().hex[:4]}", f"Y-{uuid.uuid4().hex[:4]}"
    run = await e2e.start(pays_two, first, second, token)
    await e2e.hook_ready(token, run)
    await e2e.idle()
    with deployed(pays_two, pays_two_swapped):
        async with e2e.counting() as deliveries:
            await e2e.client.resume_hook(token, "yes")
            with pytest.raises(WorkflowRunFailedError) as failed:
                await run.result(timeout=30)
    assert deliveries.statuses == ["diverged", "diverged", "diverged", "failed"], deliveries.statuses
    error = failed.value
    assert error.code == CORRUPTED_EVENT_LOG  # the spec's code (ErrCorruptedEventLog); the message says what
    assert error.error_type == "ReplayDivergenceError"
    message = str(error)
    assert "step 1 (event" in message
    assert f"the log has charge('{first}', 1.0), the code called charge('{second}', 2.0)" in message, message
    assert "corrupt" not in message.lower()
    # What differs, and both causes: new code, or a workflow that read something that changes between replays.
    assert "failed: replaying this run did not make the calls its log records: step 1 (event" in message, message
    assert "the workflow's code is not the code that recorded the run" in message
    assert "read something that changes between replays" in message and "no longer matches" not in message
    assert CALLS[f"decided:{token}"] == 0, "no replay went past the mismatched call"
    assert CALLS[f"charge:{first}:1.0"] == 1 and CALLS[f"charge:{second}:2.0"] == 1


@workflow
async def pays_one(order: str, token: str) -> str:
    receipt = await charge(order, 1.0)
    return f"{receipt} {await create_hook(token=token)}"


async def pays_one_renamed(order: str, token: str) -> str:
    receipt = await charge_v2(order, 1.0)
    return f"{receipt} {await create_hook(token=token)}"


async def pays_one_without_charging(order: str, token: str) -> str:
    return f"free {await create_hook(token=token)}"


@pytest.mark.parametrize(("code", "expected"), [
    (pays_one_renamed, "the log has {module}.charge('{order}', 1.0), the code called {module}.charge_v2('{order}', "
                       "1.0)"),
    (pays_one_without_charging, "the log has charge('{order}', 1.0), the code called create_hook(token='{token}') "
                                "there"),
], ids=["renamed", "another_call"])
async def test_a_failed_runs_message_quotes_the_logged_step_where_the_code_calls_another(e2e, code: Any,
                                                                                          expected: str) -> None:
    # The flow compares a step's name without loading its input, and loads it once for the run's error: a rename,
    # or another call where the log has the step, said the log's call as charge(…) while quoting the code's.
    token, order = f"pay-{uuid.uuid4().hex}", f"Z-{uuid.uuid4().hex[:4]}"
    run = await e2e.start(pays_one, order, token)
    await e2e.hook_ready(token, run)
    await e2e.idle()
    with deployed(pays_one, code):
        await e2e.client.resume_hook(token, "yes")
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result(timeout=30)
    message = str(failed.value)
    assert expected.format(module=__name__, order=order, token=token) in message, message


# ----------------------------------------------------------------------------------------- as_completed


@step
async def fetch(i: int) -> int:
    await asyncio.sleep(0.01 * (4 - i))
    return i * 100


@workflow
async def first_two(n: int) -> list[int]:
    """A min-successful pattern over bare coroutines (asyncio wraps them from a set, in object-id order)."""
    results = []
    for next_done in asyncio.as_completed([fetch(i) for i in range(n)]):
        results.append(await next_done)
        if len(results) == 2:
            break
    return sorted(results)


async def test_as_completed_over_coroutines_declares_in_argument_order_on_every_replay(e2e) -> None:
    run = await e2e.start(first_two, 6)
    result = await run.result(timeout=30)
    assert len(result) == 2 and len(set(result)) == 2
    events = await read_run(e2e.world, run.run_id)
    declared = [(e.correlation_id, e.event_data["input"]["args"][0]) for e in events
                if e.event_type == "step_created"]
    assert declared == [(f"step_{i + 1}", i) for i in range(6)]
    for _ in range(5):  # new coroutine objects (other ids) on every replay
        replayed = replay_events(events)
        assert replayed.ok, replayed.describe()
