"""``Client.cancel(run_id, reason=...)`` (and ``Run.cancel``): the reason is recorded on ``run_cancelled``
(``cancelReason``) and ``Run.result()`` raises ``WorkflowRunCancelledError`` carrying it, and a second cancel keeps
it; in memory and on ``LocalAWS``."""

from __future__ import annotations

import sys
import uuid

import pytest

from awsworld import WorkflowRunCancelledError, create_hook, sleep, step, workflow
from awsworld.client.client import Client
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv


@workflow
async def waits_for_approval(token: str) -> object:
    async with create_hook(token=token) as hook:
        return await hook


async def cancel_and_check(client: Client, reason: str | None) -> None:
    token = f"approve:{uuid.uuid4().hex}"
    run = await client.start(waits_for_approval, token)
    await run.wait_for_hook(token)
    await client.cancel(run.run_id, reason=reason)
    with pytest.raises(WorkflowRunCancelledError) as cancelled:
        await run.result(timeout=30)
    assert cancelled.value.reason == reason
    assert cancelled.value.run_id == run.run_id
    if reason:
        assert reason in str(cancelled.value)
    events = await run.events()
    assert events[-1].event_type == "run_cancelled"
    assert (events[-1].event_data or {}).get("cancelReason") == reason
    assert await run.status() == "cancelled"
    # A second cancel (a user's retry, or one racing the first) succeeds and changes nothing: the first reason stays.
    await client.cancel(run.run_id, reason="cancelled again")
    assert await run.events() == events


@pytest.mark.parametrize("reason", ["the customer withdrew the order", None])
async def test_cancel_records_its_reason(awsworld_env: WorkflowTestEnv, reason: str | None) -> None:
    await cancel_and_check(awsworld_env.client, reason)


async def test_a_run_handle_cancels_its_run(awsworld_env: WorkflowTestEnv) -> None:
    """``run.cancel(reason=...)``, the handle's own (Temporal's ``handle.cancel()``, the SDK's ``run.cancel()``)."""
    token = f"approve:{uuid.uuid4().hex}"
    run = await awsworld_env.client.start(waits_for_approval, token)
    await run.wait_for_hook(token)
    await run.cancel(reason="changed my mind")
    with pytest.raises(WorkflowRunCancelledError) as cancelled:
        await run.result(timeout=30)
    assert cancelled.value.reason == "changed my mind"
    await run.cancel()  # a second cancel changes nothing
    assert await run.status() == "cancelled"


async def test_a_reason_over_512_characters_is_refused(awsworld_env: WorkflowTestEnv) -> None:
    with pytest.raises(ValueError, match="512"):
        await awsworld_env.client.cancel("run_whatever", reason="x" * 513)


async def test_cancel_records_its_reason_on_local_aws(local: LocalAWS) -> None:
    assert local.client is not None
    await cancel_and_check(local.client, "duplicate order")


FINALLY_SEEN: dict[str, list[str]] = {}
UNDONE: dict[str, int] = {}


@step
async def undo(tag: str) -> None:
    UNDONE[tag] = UNDONE.get(tag, 0) + 1


@workflow
async def cleans_up_in_finally(tag: str) -> str:
    try:
        await sleep("10s")
        await sleep("10s")
        return "done"
    except Exception:
        FINALLY_SEEN.setdefault(tag, []).append("except Exception")
        raise
    finally:
        FINALLY_SEEN.setdefault(tag, []).append(type(sys.exc_info()[1]).__name__)
        await undo(tag)


async def test_a_cancel_runs_a_finally_but_nothing_it_calls(awsworld_env: WorkflowTestEnv) -> None:
    """As docs/how-to/saga.md and docs/concepts/determinism.md say: the cancel closes the replay, so the body's
    ``finally`` runs with ``CancelledError`` (not its ``except Exception``), and the step it calls is neither run
    nor recorded: a cancel does not compensate."""
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(cleans_up_in_finally, tag)
    await awsworld_env.sleep("5s")
    await awsworld_env.client.cancel(run.run_id)
    await awsworld_env.sleep("1m")
    assert FINALLY_SEEN[tag] == ["CancelledError"]
    assert tag not in UNDONE
    assert [e.event_type for e in await run.events()][-1] == "run_cancelled"
    assert not [s for s in await run.steps()]


async def test_a_closed_replay_runs_a_finally_again_and_records_its_calls_once(
        awsworld_env: WorkflowTestEnv) -> None:
    """A process that keeps no replay (short of memory) closes it after every delivery: the ``finally`` runs at each
    close, but only the run's real end records (and runs) its step."""
    awsworld_env.worker.settings.kept.max_events = 0
    tag = uuid.uuid4().hex
    run = await awsworld_env.client.start(cleans_up_in_finally, tag)
    assert await run.result() == "done"
    assert FINALLY_SEEN[tag] == ["CancelledError", "CancelledError", "NoneType"]
    assert UNDONE[tag] == 1
    assert [s.status for s in await run.steps()] == ["completed"]
