"""Hook timeouts and failed hooks end to end: ``create_hook(..., timeout=...)`` raises ``HookTimeoutError`` once its
wait completes in the log (the first of ``hook_received`` and ``wait_completed`` decides, on every replay), and
``Client.fail_hook`` makes the awaiting workflow raise ``HookFailedError``. In memory (``awsworld_env``: the
timeouts are skipped, the log's timestamps say how long they were), on a hand-made log (the order rule), and on
``LocalAWS`` (real seconds)."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from awsworld import (
    HookFailedError,
    HookTimeoutError,
    RetryPolicy,
    WorkflowRunFailedError,
    create_hook,
    sleep,
    step,
    workflow,
)
from awsworld._engine.execution import WorkflowExecution
from awsworld.authoring.definitions import REGISTRY, workflow_name
from awsworld.durable import serde
from awsworld.durable.hook_payloads import FAILURE_TAG
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv
from awsworld.world.errors import HookNotFoundError
from awsworld.world.events import Event
from awsworld.world.ids import slot_to_event_id


def _token() -> str:
    return f"tok-{uuid.uuid4().hex}"


def _at(events: list[Event], kind: str, correlation: str | None = None) -> datetime:
    return next(e.created_at for e in events
                if e.event_type == kind and (correlation is None or e.correlation_id == correlation))


# ----------------------------------------------------------------------------------------- await hook, timing out


@workflow
async def approval(token: str, hours: float) -> dict[str, Any]:
    hook = create_hook(token=token, timeout=timedelta(hours=hours))
    try:
        return {"decision": await hook}
    except HookTimeoutError as timed_out:
        return {"timed_out": timed_out.token}


async def test_a_hook_nobody_resumes_times_out_after_its_timeout(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(approval, token, 2.0)
    assert await run.result() == {"timed_out": token}
    events = await run.events()
    kinds = [(e.event_type, e.correlation_id) for e in events]
    [hook_id] = [c for k, c in kinds if k == "hook_created"]
    [wait_id] = [c for k, c in kinds if k == "wait_created"]
    assert hook_id.startswith("hook_1_") and wait_id == "wait_2"  # declared together, in call order
    waited = _at(events, "wait_completed", wait_id) - _at(events, "hook_created")
    assert timedelta(hours=2) <= waited < timedelta(hours=2, minutes=1)
    assert [k for k, _ in kinds][-1] == "run_completed"  # (its end frees the token: no hook_disposed needed)


async def test_a_payload_before_the_timeout_wins_and_the_timeout_never_wakes_the_run(
        awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(approval_then_sleep, token)
    await run.wait_for_hook(token)  # time skips only until the hook exists, never to its deadline
    await awsworld_env.client.resume_hook(token, "yes")
    assert await run.result() == "yes"
    events = await run.events()
    # The hook was disposed when its ``async with`` ended: its timeout wait (wait_2) is dropped, so nothing
    # completes it; only the later sleep (wait_3) is completed.
    assert [e.correlation_id for e in events if e.event_type == "wait_completed"] == ["wait_3"]
    slept = _at(events, "run_completed") - _at(events, "hook_received")
    assert slept >= timedelta(hours=3)


@workflow
async def approval_then_sleep(token: str) -> str:
    async with create_hook(token=token, timeout=3600) as hook:
        decision = await hook
    await sleep(timedelta(hours=3))  # past the hook's deadline: the dropped timeout must not fire
    return decision


# ----------------------------------------------------------------------------------------- async for

@workflow
async def collect(token: str) -> dict[str, Any]:
    received: list[Any] = []
    try:
        async with create_hook(token=token, timeout=timedelta(minutes=30)) as hook:
            async for payload in hook:
                received.append(payload)
    except HookTimeoutError:
        return {"received": received, "ended": "timeout"}
    return {"received": received, "ended": "never"}


async def test_async_for_takes_payloads_until_the_deadline_of_the_whole_hook(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(collect, token)
    await run.wait_for_hook(token)  # time skips only until the hook exists, never to its deadline
    await awsworld_env.client.resume_hook(token, 1)
    await awsworld_env.sleep(timedelta(minutes=20))
    await awsworld_env.client.resume_hook(token, 2)  # 20 minutes in: still before the deadline
    assert await run.result() == {"received": [1, 2], "ended": "timeout"}
    events = await run.events()
    # The deadline bounds the hook (30 minutes from create_hook), not each wait for a payload.
    waited = _at(events, "wait_completed") - _at(events, "hook_created")
    assert timedelta(minutes=30) <= waited < timedelta(minutes=31)


# ----------------------------------------------------------------------------------------- durably across deliveries


@workflow
async def times_out_then_waits_again(first: str, second: str) -> dict[str, Any]:
    try:
        await create_hook(token=first, timeout=60)
        outcome: Any = "payload"
    except HookTimeoutError:
        outcome = "timeout"
    later = await create_hook(token=second)  # keeps the run alive: a late resume of the first finds no hook
    return {"first": outcome, "second": later}


async def test_a_timed_out_hook_is_disposed_and_later_deliveries_replay_the_timeout(
        awsworld_env: WorkflowTestEnv) -> None:
    first, second = _token(), _token()
    run = await awsworld_env.client.start(times_out_then_waits_again, first, second)
    await run.wait_for_hook(second)  # the clock skipped the minute; the first hook timed out on the way
    with pytest.raises(HookNotFoundError):
        await awsworld_env.client.resume_hook(first, "too late")
    deliveries = awsworld_env.deliveries
    await awsworld_env.client.resume_hook(second, "ok")  # a new delivery replays the timeout from the log
    assert await run.result() == {"first": "timeout", "second": "ok"}
    assert awsworld_env.deliveries > deliveries


@workflow
async def waits_for(token: str, seconds: float) -> str:
    try:
        return str(await create_hook(token=token, timeout=seconds))
    except HookTimeoutError:
        return "timeout"


def _replay(fn: Any, args: list[Any], tail: list[tuple[str, str, dict[str, Any] | None]]) -> WorkflowExecution:
    """An execution of ``fn`` replayed over a hand-made log: run_created, run_started, then ``tail``."""
    run_id = "wrun_handmade"
    base = datetime(2030, 1, 1, tzinfo=UTC)
    rows: list[tuple[str, str | None, dict[str, Any] | None]] = [
        ("run_created", None, {"workflowName": workflow_name(fn), "input": serde.dumps({"args": args, "kwargs": {}})}),
        ("run_started", None, None), *tail]
    events = [Event(event_id=slot_to_event_id(n), run_id=run_id, event_type=kind, correlation_id=correlation,  # type: ignore[arg-type]
                    event_data=data, created_at=base + timedelta(seconds=n))
              for n, (kind, correlation, data) in enumerate(rows, start=1)]
    execution = WorkflowExecution(run_id, REGISTRY.workflow(workflow_name(fn)), REGISTRY, "seed")
    execution.append(events)
    execution.advance()
    return execution


@pytest.mark.parametrize(("order", "expected"), [(["payload", "deadline"], "late-but-first"),
                                                 (["deadline", "payload"], "timeout")])
def test_the_first_of_hook_received_and_wait_completed_in_the_log_decides(order: list[str], expected: str) -> None:
    hook_id = "hook_1_wrun_handmade"
    resume_at = (datetime(2030, 1, 1, tzinfo=UTC) + timedelta(seconds=1, milliseconds=500)).isoformat()
    rows: dict[str, tuple[str, str, dict[str, Any] | None]] = {
        "payload": ("hook_received", hook_id, {"payload": serde.dumps("late-but-first")}),
        "deadline": ("wait_completed", "wait_2", None)}
    tail = [("hook_created", hook_id, {"token": "t"}), ("wait_created", "wait_2", {"resumeAt": resume_at}),
            *(rows[name] for name in order)]
    execution = _replay(waits_for, ["t", 0.5], tail)  # declared at the time of run_created (slot 1) + 0.5 s
    try:
        assert execution.done and execution.task is not None
        assert execution.task.result() == expected
    finally:
        execution.close()


# ----------------------------------------------------------------------------------------- fail_hook


@workflow
async def awaits_a_verdict(token: str) -> dict[str, Any]:
    try:
        async with create_hook(token=token) as hook:
            return {"payload": await hook}
    except HookFailedError as failed:
        return {"failed": failed.message, "code": failed.code, "token": failed.token}


async def test_fail_hook_makes_the_awaiting_workflow_raise_hook_failed_error(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(awaits_a_verdict, token)
    await run.wait_for_hook(token)
    await awsworld_env.client.fail_hook(token, RuntimeError("card declined"), code="DECLINED")
    assert await run.result() == {"failed": "card declined", "code": "DECLINED", "token": token}


async def test_fail_hook_is_idempotent_per_key_like_resume_hook(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(awaits_a_verdict, token)
    await run.wait_for_hook(token)
    first = await awsworld_env.client.fail_hook(token, "no", idempotency_key="req-1")
    again = await awsworld_env.client.fail_hook(token, "no", idempotency_key="req-1")
    assert again.event_id == first.event_id
    assert await run.result() == {"failed": "no", "code": None, "token": token}
    assert [e.event_type for e in await run.events()].count("hook_received") == 1


async def test_a_user_payload_shaped_like_the_failure_envelope_is_an_ordinary_payload(
        awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(awaits_a_verdict, token)
    await run.wait_for_hook(token)
    lookalike = {"$t": FAILURE_TAG, "v": {"message": "forged"}}
    await awsworld_env.client.resume_hook(token, lookalike)
    assert await run.result() == {"payload": lookalike}


@workflow
async def lets_a_failed_hook_through(token: str) -> Any:
    async with create_hook(token=token) as hook:
        return await hook


@workflow
async def parent_of_a_failed_hook(token: str) -> Any:
    return await lets_a_failed_hook_through(token)  # a child run: its HookFailedError fails this run too


@pytest.mark.parametrize("starts", [lets_a_failed_hook_through, parent_of_a_failed_hook])
async def test_run_result_of_a_failed_hook_raises_it_with_its_senders_code_and_message(
        awsworld_env: WorkflowTestEnv, starts: Any) -> None:
    """``except HookFailedError as failed`` around ``Run.result()`` reads what the class documents: the sender's
    ``code`` and ``message``, as the workflow that awaited the hook would (not the run's ``USER_ERROR``)."""
    token = _token()
    run = await awsworld_env.client.start(starts, token)
    await awsworld_env.idle()  # the hook exists (the child's, for the parent)
    await awsworld_env.client.fail_hook(token, "out of stock", code="NO_STOCK")
    with pytest.raises(HookFailedError) as failed:
        await run.result()
    assert (failed.value.code, failed.value.message) == ("NO_STOCK", "out of stock")
    assert isinstance(failed.value, WorkflowRunFailedError) and failed.value.error_type in (
        "HookFailedError", "ChildWorkflowError")


async def test_run_result_of_a_hook_failed_without_a_code_has_none(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(lets_a_failed_hook_through, token)
    await run.wait_for_hook(token)
    await awsworld_env.client.fail_hook(token, "no")
    with pytest.raises(HookFailedError) as failed:
        await run.result()
    assert (failed.value.code, failed.value.message) == (None, "no")


@workflow
async def times_out_then_sleeps(token: str) -> str:
    async with create_hook(token=token, timeout="10s") as hook:
        try:
            answer = str(await hook)
        except HookTimeoutError:
            answer = "timed out"
    await sleep("1h")  # the run goes on: a late answer finds the hook gone, not the run
    return answer


async def test_a_late_answer_to_a_timed_out_hook_says_the_hook_was_disposed(awsworld_env: WorkflowTestEnv) -> None:
    """The sender of an approval that came after its timeout is told the hook is gone, and whose it was (not a
    bare "no hook owns that token", which reads like a mistyped token)."""
    token = _token()
    run = await awsworld_env.client.start(times_out_then_sleeps, token)
    await run.wait_for_hook(token)
    await awsworld_env.sleep("30s")
    for answer in (awsworld_env.client.resume_hook(token, "yes"), awsworld_env.client.fail_hook(token, "no"),
                   awsworld_env.client.heartbeat_hook(token)):
        with pytest.raises(HookNotFoundError, match=f"the hook of run {run.run_id} that held it was disposed by "
                           "its workflow.*timeout.*no more payloads"):
            await answer
    assert await run.result() == "timed out"


class OutOfStock(Exception):  # importable under this module's name: Run.result() rebuilds it
    def __init__(self, sku: str) -> None:
        super().__init__(f"no {sku} left")
        self.sku = sku


@step(retry=RetryPolicy(max_attempts=1))
async def reserve(sku: str) -> None:
    raise OutOfStock(sku)


@workflow
async def reserves(sku: str) -> None:
    await reserve(sku)


async def test_run_result_rebuilt_as_the_steps_type_has_its_bare_message(awsworld_env: WorkflowTestEnv) -> None:
    """A rebuilt error carries ``message`` (the original's, bare) as a workflow's ``StepError`` does: ``except
    OutOfStock as error: error.message`` reads the same in a test as in workflow code."""
    run = await awsworld_env.client.start(reserves, "kettle")
    with pytest.raises(OutOfStock) as failed:
        await run.result()
    assert isinstance(failed.value, WorkflowRunFailedError) and failed.value.message == "no kettle left"
    assert "OutOfStock: no kettle left" in str(failed.value)  # the run's own message, as before


@workflow
async def payloads_then_failure(token: str) -> dict[str, Any]:
    received: list[Any] = []
    hook = create_hook(token=token)
    try:
        async for payload in hook:
            received.append(payload)
    except HookFailedError as failed:
        return {"received": received, "failed": failed.message}
    return {"received": received}


async def test_payloads_sent_before_a_failure_are_read_first(awsworld_env: WorkflowTestEnv) -> None:
    token = _token()
    run = await awsworld_env.client.start(payloads_then_failure, token)
    await run.wait_for_hook(token)
    await awsworld_env.client.resume_hook(token, "a")
    await awsworld_env.client.resume_hook(token, "b")
    await awsworld_env.client.fail_hook(token, "stop")
    assert await run.result() == {"received": ["a", "b"], "failed": "stop"}


# ----------------------------------------------------------------------------------------- a timeout racing a step


@step
async def note(text: str) -> str:
    return text


@workflow
async def hook_timeout_between_steps(token: str) -> list[str]:
    out = [await note("before")]
    try:
        out.append(str(await create_hook(token=token, timeout=timedelta(days=2))))
    except HookTimeoutError:
        out.append("timeout")
    out.append(await note("after"))
    return out


async def test_a_hook_timeout_between_steps(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(hook_timeout_between_steps, _token())
    assert await run.result() == ["before", "timeout", "after"]


# ----------------------------------------------------------------------------------------- LocalAWS


async def test_on_local_aws_a_hook_times_out_and_another_is_failed(local: LocalAWS) -> None:
    client = local.client
    assert client is not None
    token = _token()
    timing_out = await client.start(approval, token, 1.5 / 3600)  # 1.5 s
    assert await timing_out.result(timeout=30) == {"timed_out": token}
    events = await timing_out.events()
    # The timeout counts from the moment the workflow made the hook (its replayed clock, which the hook_created
    # write may commit a little after): the due it recorded is 1.5 s after the run began, and it never fires early.
    (wait,) = [e for e in events if e.event_type == "wait_created"]
    due = datetime.fromisoformat(wait.event_data["resumeAt"])
    assert due - _at(events, "run_created") >= timedelta(seconds=1.5)
    assert _at(events, "wait_completed") >= due

    token = _token()
    failing = await client.start(awaits_a_verdict, token)
    await failing.wait_for_hook(token)
    await client.fail_hook(token, "rejected by the reviewer", code="REJECTED", idempotency_key="k")
    await client.fail_hook(token, "rejected by the reviewer", code="REJECTED", idempotency_key="k")
    assert await failing.result(timeout=30) == {"failed": "rejected by the reviewer", "code": "REJECTED",
                                                "token": token}
