"""Hook heartbeats end to end: ``create_hook(..., heartbeat_timeout=...)`` fails with ``HookHeartbeatTimeoutError``
(a ``HookTimeoutError``) when neither a heartbeat (``Client.heartbeat_hook``) nor a payload arrived within the
timeout of the last one. In memory (``awsworld_env``: virtual time, the log's timestamps say when), replayed from
a stored log (the re-armed waits come from the log alone), and on ``LocalAWS`` (real seconds)."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta
from typing import Any

import pytest

from awsworld import HookHeartbeatTimeoutError, HookTimeoutError, create_hook, workflow
from awsworld._engine.execution import WorkflowExecution
from awsworld._engine.hook_timeouts import arm_heartbeat
from awsworld.authoring.definitions import REGISTRY, workflow_name
from awsworld.durable.hook_payloads import is_heartbeat
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv
from awsworld.world.errors import HookClosedError, HookNotFoundError
from awsworld.world.events import Event


def _token() -> str:
    return f"tok-{uuid.uuid4().hex}"


@workflow
async def beating(token: str, seconds: float) -> dict[str, Any]:
    got: list[Any] = []
    try:
        async with create_hook(token=token, heartbeat_timeout=seconds) as hook:
            async for payload in hook:
                got.append(payload)
                if payload == "done":
                    return {"got": got}
    except HookTimeoutError as timed_out:  # catches the heartbeat kind too
        assert isinstance(timed_out, HookHeartbeatTimeoutError)
        return {"got": got, "quiet": timed_out.heartbeat_timeout, "deadline": timed_out.deadline}
    return {"got": got}


def _heartbeats(events: list[Event]) -> list[Event]:
    return [e for e in events if e.event_type == "hook_received" and is_heartbeat((e.event_data or {}).get("payload"))]


async def test_heartbeats_keep_a_hook_alive_well_past_its_heartbeat_timeout(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(beating, token, 60)
    await run.wait_for_hook(token)
    for _ in range(5):  # 200 s in all, never 60 s without a heartbeat
        await awsworld_env.sleep(40)
        await awsworld_env.client.heartbeat_hook(token)
    await awsworld_env.sleep(40)
    await awsworld_env.client.resume_hook(token, "done")
    assert await run.result() == {"got": ["done"]}
    events = await run.events()
    assert len(_heartbeats(events)) == 5
    assert not [e for e in events if e.event_type == "wait_completed"]  # no heartbeat wait ever passed
    # Each re-armed wait is due 60 s after the heartbeat it came from (written when the old one fell due).
    created = {e.correlation_id: e for e in events if e.event_type == "wait_created"}
    assert "wait_2" in created and set(created) <= {"wait_2", *(f"wait_2_hb{n}" for n in range(1, 7))}
    assert len(created) >= 3  # re-armed at least twice: each time the previous wait fell due


async def test_a_missed_heartbeat_fails_the_hook_with_the_typed_timeout(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(beating, token, 60)
    await run.wait_for_hook(token)
    await awsworld_env.sleep(30)
    await awsworld_env.client.resume_hook(token, "first")  # a payload counts as a heartbeat
    await awsworld_env.sleep(50)
    beat = await awsworld_env.client.heartbeat_hook(token)
    result = await run.result()
    assert result["got"] == ["first"] and result["quiet"] == 60
    events = await run.events()
    [completed] = [e for e in events if e.event_type == "wait_completed"]
    assert completed.correlation_id == "wait_2_hb2"  # armed by the heartbeat (hb1 by the payload)
    assert [e.correlation_id for e in events if e.event_type == "wait_created"] == ["wait_2", "wait_2_hb1",
                                                                                    "wait_2_hb2"]
    assert completed.created_at - beat.created_at >= timedelta(seconds=60)
    assert completed.created_at - beat.created_at < timedelta(seconds=61)
    assert result["deadline"] == (beat.created_at + timedelta(seconds=60)).isoformat()
    # The hook was disposed: a late heartbeat finds no hook, as a late resume does.
    with pytest.raises(HookNotFoundError):
        await awsworld_env.client.heartbeat_hook(token)
    with pytest.raises(HookNotFoundError):
        await awsworld_env.client.resume_hook(token, "late")


async def test_the_log_replays_to_the_same_outcome(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(beating, token, 10)
    await run.wait_for_hook(token)
    for _ in range(3):
        await awsworld_env.sleep(7)
        await awsworld_env.client.heartbeat_hook(token)
    expected = await run.result()
    assert expected["got"] == [] and expected["quiet"] == 10
    events = await run.events()
    replay = WorkflowExecution(run.run_id, REGISTRY.workflow(workflow_name(beating)), REGISTRY, "seed")
    replay.append(events)
    replay.advance()
    assert replay.done and replay.task is not None and replay.task.result() == expected
    assert not replay.new_ops()  # every re-armed wait is in the log already


async def test_a_heartbeat_is_refused_as_a_resume_is(awsworld_env: WorkflowTestEnv) -> None:
    client = awsworld_env.client
    with pytest.raises(HookNotFoundError):
        await client.heartbeat_hook(_token())
    token = _token()
    run = await client.start(beating, token, 3600)
    await run.wait_for_hook(token)
    await client.resume_hook(token, "done")
    await run.result()
    for call in (client.heartbeat_hook(token), client.resume_hook(token, "x")):
        with pytest.raises(HookClosedError) as closed:  # its run's end closed it
            await call
        assert closed.value.run_id == run.run_id and closed.value.run_status == "completed"


async def test_a_hook_without_a_heartbeat_timeout_takes_and_ignores_heartbeats(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(plain, token)
    await run.wait_for_hook(token)
    await awsworld_env.client.heartbeat_hook(token)
    await awsworld_env.client.resume_hook(token, "yes")
    assert await run.result() == "yes"  # the heartbeat was no payload


@workflow
async def beat_once(token: str) -> Any:
    async with create_hook(token=token, heartbeat_timeout=60) as hook:
        return await hook


async def test_a_payload_that_ends_the_hook_writes_no_re_armed_wait(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(beat_once, token)
    await run.wait_for_hook(token)
    await awsworld_env.client.heartbeat_hook(token)
    await awsworld_env.client.resume_hook(token, "yes")  # re-arms, then the workflow disposes the hook
    assert await run.result() == "yes"
    events = await run.events()
    assert [e.correlation_id for e in events if e.event_type == "wait_created"] == ["wait_2"]
    assert [e.event_type for e in events if e.event_type == "wait_completed"] == []


@workflow
async def plain(token: str) -> Any:
    async with create_hook(token=token) as hook:
        return await hook


def test_a_heartbeat_timeout_must_be_a_positive_duration() -> None:
    with pytest.raises(ValueError, match="heartbeat_timeout"):
        arm_heartbeat(None, None, 0)  # type: ignore[arg-type]  # refused before either is used


# ----------------------------------------------------------------------------------------- LocalAWS


async def test_on_local_aws_heartbeats_keep_a_hook_alive_and_silence_fails_it(local: LocalAWS) -> None:
    client = local.client
    assert client is not None
    token = _token()
    kept = await client.start(beating, token, 3)
    await kept.wait_for_hook(token)
    await client.heartbeat_hook(token)  # (at once: the hook's first silence began before wait_for_hook saw it)
    for _ in range(3):  # 6 s of 2 s silences, under the 3 s timeout
        await _sleep(2)
        await client.heartbeat_hook(token)
    await client.resume_hook(token, "done")
    assert await kept.result(timeout=30) == {"got": ["done"]}

    quiet_token = _token()
    quiet = await client.start(beating, quiet_token, 1.5)
    result = await quiet.result(timeout=30)
    assert result["got"] == [] and result["quiet"] == 1.5


async def _sleep(seconds: float) -> None:
    await asyncio.sleep(seconds)

