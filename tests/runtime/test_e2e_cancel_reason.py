"""``Client.cancel(run_id, reason=...)`` (and ``Run.cancel``): the reason is recorded on ``run_cancelled``
(``cancelReason``) and ``Run.result()`` raises ``WorkflowRunCancelledError`` carrying it, and a second cancel keeps
it; in memory and on ``LocalAWS``."""

from __future__ import annotations

import uuid

import pytest

from awsworld import WorkflowRunCancelledError, create_hook, workflow
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
