"""A workflow resumes another run's hook (``awsworld.resume_hook``), end to end on the in-memory test environment
and on ``LocalAWS`` (moto): both runs finish; the payload is recorded once per call whatever crashes, retries and
replays (a code edit included) happen around the send, and on one hook only, also when the token changes hands
between attempts (a disposed hook, an expired run, an attempt running on after a take-over); a missing hook (after
``wait``), a disposed one and an ended run are typed errors the workflow can catch."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest
from pydantic import BaseModel

from awsworld import PydanticCodec, Run, StepError, create_hook, resume_hook, sleep, workflow
from awsworld._worker import run_control
from awsworld._worker.resume_calls import RESUME_HOOK_STEP
from awsworld.authoring.step_context import StepContext, current_step
from awsworld.aws.keys import run_pk, token_key
from awsworld.client.replay import replay_run
from awsworld.durable import serde
from awsworld.durable.hook_calls import RESUME_HOOK, resume_key
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv
from awsworld.world.errors import CodecPayloadError, HookClosedError, HookNotFoundError, HookResumedElsewhereError

from .conftest import Env, deployed

RESULT_TIMEOUT = 60.0


# ----------------------------------------------------------------------------------------- workflows


@workflow
async def receiver(token: str, count: int = 1) -> list[Any]:
    got: list[Any] = []
    async with create_hook(token=token) as hook:
        async for payload in hook:
            got.append(payload)
            if len(got) == count:
                break
    return got


@workflow
async def sender(token: str, payload: Any) -> str:
    await resume_hook(token, payload, wait="1m")
    return "sent"


@workflow
async def sender_then_waits(token: str, own: str) -> str:
    await resume_hook(token, {"n": 1}, wait="1m")
    async with create_hook(token=own) as hook:
        await hook
    return "v1"


async def sender_then_waits_v2(token: str, own: str) -> str:
    """The deploy of an edit: the call is the same, what follows it changed."""
    await resume_hook(token, {"n": 1}, wait="1m")
    async with create_hook(token=own) as hook:
        await hook
    await sleep(1)
    return "v2"


@workflow
async def receiver_then_waits(token: str, own: str) -> Any:
    async with create_hook(token=token) as hook:
        first = await hook
    async with create_hook(token=own) as hook:
        await hook
    return first


@workflow
async def sender_nowait(token: str) -> str:
    await resume_hook(token, "hello")
    return "sent"


@workflow
async def sender_catches(token: str, wait: float | None) -> str:
    try:
        await resume_hook(token, "hello", wait=wait)
    except HookClosedError as closed:
        return f"closed: {closed.run_id} {closed.run_status} {isinstance(closed, StepError)}: {closed}"
    except HookNotFoundError as missing:
        return f"missing: {missing.disposed_hook} {isinstance(missing, StepError)}: {missing}"
    return "sent"


class Order(BaseModel):
    sku: str


@workflow
async def codec_receiver(token: str) -> str:
    async with create_hook(token=token, codec=PydanticCodec(Order)) as hook:
        order = await hook
    return order.sku


@workflow
async def codec_sender(token: str, payload: Any) -> str:
    try:
        await resume_hook(token, payload, wait="1m")
    except CodecPayloadError as refused:
        return f"refused: {type(refused).__name__} {isinstance(refused, StepError)}"
    return "sent"


@workflow
async def sender_many(token: str, count: int) -> str:
    await asyncio.gather(*(resume_hook(token, i, wait="1m") for i in range(count)))
    return "sent"


@workflow
async def sender_unserializable(token: str) -> str:
    try:
        await resume_hook(token, {"items": [object()]})
    except TypeError as refused:  # (a SerializationError)
        return str(refused)
    return "sent"


@workflow
async def sender_queued(token: str, count: int) -> str:
    await asyncio.gather(*(resume_hook(token, i) for i in range(count)))  # all but one run as queued step messages
    return "sent"


# ----------------------------------------------------------------------------------------- helpers


async def _received(env: Env, run_id: str) -> list[Any]:
    return [e for e in await env.client.get_run(run_id).events() if e.event_type == "hook_received"]


async def _resume_steps(env: Env, run_id: str) -> list[Any]:
    return [s for s in await env.client.get_run(run_id).steps() if s.step_name == RESUME_HOOK]


# ----------------------------------------------------------------------------------------- tests


async def test_a_workflow_resumes_another_runs_hook_and_both_finish(env: Env) -> None:
    token = f"resume-both-{env.name}-{id(env)}"
    target = await env.client.start(receiver, token)
    await target.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    source = await env.client.start(sender, token, {"amount": 42})
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"
    assert await target.result(timeout=RESULT_TIMEOUT) == [{"amount": 42}]
    [received] = await _received(env, target.run_id)
    [step] = await _resume_steps(env, source.run_id)
    assert (received.event_data or {}).get("resumeId") == resume_key(source.run_id, step.step_id)
    assert (await replay_run(env.world, source.run_id)).ok


async def test_the_sender_may_start_first_with_wait(env: Env) -> None:
    token = f"resume-first-{env.name}-{id(env)}"
    source = await env.client.start(sender, token, "early")
    await asyncio.sleep(0.2)  # (memory: the poll's timer is what the clock skips to)
    target = await env.client.start(receiver, token)
    assert await target.result(timeout=RESULT_TIMEOUT) == ["early"]
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"


async def test_a_crash_between_the_send_and_its_record_sends_once(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The resume step's first attempt dies right after the target's hook_received landed, before the step's end
    is recorded: its retry resumes under the same key, records nothing, and the target gets one payload."""
    token = f"resume-crash-{env.name}-{id(env)}"
    target = await env.client.start(receiver, token, 2)
    await target.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    crashes: Counter[str] = Counter()
    original = env.world.events.create

    async def create(run_id: Any, event: Any, **kwargs: Any) -> Any:
        result = await original(run_id, event, **kwargs)
        if run_id == target.run_id and isinstance(event, dict) and event.get("eventType") == "hook_received" \
                and not crashes[run_id]:
            crashes[run_id] += 1
            raise ConnectionError("the process died after hook_received landed")
        return result

    monkeypatch.setattr(env.world.events, "create", create)
    source = await env.client.start(sender, token, "once")
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"
    assert crashes[target.run_id] == 1
    [step] = await _resume_steps(env, source.run_id)
    assert (step.status, step.attempt) == ("completed", 2)
    assert [(e.event_data or {}).get("payload") for e in await _received(env, target.run_id)] == ["once"]
    await env.client.resume_hook(token, "second")  # the receiver takes two: the second is the client's
    assert await target.result(timeout=RESULT_TIMEOUT) == ["once", "second"]


@pytest.mark.parametrize("wait", [None, 60.0], ids=["no-wait", "wait"])
async def test_a_retry_never_resumes_a_hook_that_claimed_the_token_after_the_first_attempt(
        env: Env, monkeypatch: pytest.MonkeyPatch, wait: float | None) -> None:
    """The first attempt resumes the receiver's hook and wakes it, then dies before the step's end is recorded.
    Before its retry, the receiver takes the payload and disposes its hook, and a second run claims the token. The
    World refuses the retry's write on the new hook (the resume id is one hook's only: ``resumeOnce``), so the
    second run receives nothing, and the call answers "sent", as the first attempt would have: it was."""
    token = f"resume-reclaimed-{env.name}-{id(env)}-{wait}"
    first = await env.client.start(receiver, token)
    await first.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    original = env.world.queue
    second: list[Run] = []

    async def queue(name: str, payload: Any, **kwargs: Any) -> Any:
        sent = await original(name, payload, **kwargs)
        if str(kwargs.get("idempotency_key", "")).startswith(f"{first.run_id}:hook:") and not second:
            # the wake of the first attempt's resume is out: the receiver runs, takes it and disposes its hook
            assert await first.result(timeout=RESULT_TIMEOUT) == ["hello"]
            second.append(await env.client.start(receiver, token))
            await second[0].wait_for_hook(token, timeout=RESULT_TIMEOUT)
            raise ConnectionError("the process died after the resume and its wake, before the step's end")
        return sent

    monkeypatch.setattr(env.world, "queue", queue)
    source = await env.client.start(sender_catches, token, wait)
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"
    [step] = await _resume_steps(env, source.run_id)
    assert (step.status, step.attempt) == ("completed", 2)
    assert await _received(env, second[0].run_id) == []
    await env.client.resume_hook(token, "its own")
    assert await second[0].result(timeout=RESULT_TIMEOUT) == ["its own"]


async def _expire(env: Env, run_id: str, token: str) -> None:
    """What a finished run's retention does days later (``aws/retention.py``): the run and its token's record are
    gone, so a look-up of the token finds "no hook owns that token", naming no disposed hook."""
    if env.name == "memory":
        state = env.world.storage.state
        for hook_id in list(state.runs[run_id].hooks):
            state.hook_runs.pop(hook_id, None)
        del state.runs[run_id]
        del state.tokens[token]
        return
    ddb = await env.world.clients.dynamodb()
    table = env.world.config.table_name
    keys = [token_key(token)]
    query: dict[str, Any] = {"TableName": table, "KeyConditionExpression": "pk = :pk",
                             "ExpressionAttributeValues": {":pk": {"S": run_pk(run_id)}}}
    while True:
        page = await ddb.query(**query)
        keys.extend({"pk": item["pk"]["S"], "sk": item["sk"]["S"]} for item in page["Items"])
        if not page.get("LastEvaluatedKey"):
            break
        query["ExclusiveStartKey"] = page["LastEvaluatedKey"]
    for key in keys:
        await ddb.delete_item(TableName=table, Key={name: {"S": str(value)} for name, value in key.items()})


def _expire_after_the_first_resume(env: Env, monkeypatch: pytest.MonkeyPatch, first: Run, token: str) -> list[bool]:
    """Make the sender's first attempt fail after its resume of ``first``'s hook and that run's wake were sent,
    before the step's end, with ``first`` (which took the payload) expired meanwhile, its token's record gone. The
    list it answers holds True once that happened."""
    expired: list[bool] = []
    queue = env.world.queue

    async def queued(name: str, payload: Any, **kwargs: Any) -> Any:
        sent = await queue(name, payload, **kwargs)
        if str(kwargs.get("idempotency_key", "")).startswith(f"{first.run_id}:hook:") and not expired:
            assert await first.result(timeout=RESULT_TIMEOUT) == ["hello"]
            await _expire(env, first.run_id, token)
            expired.append(True)
            raise ConnectionError("the attempt failed after the resume and its wake, before the step's end")
        return sent

    monkeypatch.setattr(env.world, "queue", queued)
    return expired


async def test_a_retry_after_the_first_hooks_run_expired_and_a_look_found_no_hook_sends_to_no_other_hook(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first attempt resumes the receiver's hook, which takes the payload, then the attempt fails before the
    step's end. Before the retry, the receiver's run expires with its token's record (its retention: days), so
    the retry's look finds no hook at all and the call's poll looks again. Meanwhile a second run claims the
    token. No look after that one may give it the payload: an attempt before the empty look may have delivered
    (here it did), so that look is no proof that nothing was sent. The World, which keeps the resume id's hook
    beyond that hook's run, answers the empty look already, and the call answers "sent": it was."""
    token = f"resume-expired-{env.name}-{id(env)}"
    first = await env.client.start(receiver, token)
    await first.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    second: list[Run] = []
    expired = _expire_after_the_first_resume(env, monkeypatch, first, token)
    get_by_token = env.world.hooks.get_by_token

    async def looked_up(wanted: str, **kwargs: Any) -> Any:
        try:
            return await get_by_token(wanted, **kwargs)
        except HookNotFoundError:
            if wanted == token and expired and not second:  # the empty look: the token is free, claimed next
                second.append(await env.client.start(receiver, token))
                await second[0].wait_for_hook(token, timeout=RESULT_TIMEOUT)
            raise

    monkeypatch.setattr(env.world.hooks, "get_by_token", looked_up)
    source = await env.client.start(sender_catches, token, 60.0)
    outcome = await source.result(timeout=RESULT_TIMEOUT)
    assert second, "the retry's look found no hook"
    assert await _received(env, second[0].run_id) == [], "the payload went to a second hook"
    assert outcome == "sent"
    [step] = await _resume_steps(env, source.run_id)
    # the failed send, then the empty look, which the World's record of the key answers (it looked again, and
    # the write the second hook refused answered, at attempt 3)
    assert (step.status, step.attempt) == ("completed", 2)
    await env.client.resume_hook(token, "its own")
    assert await second[0].result(timeout=RESULT_TIMEOUT) == ["its own"]


@pytest.mark.parametrize("wait", [None, 60.0], ids=["no-wait", "wait"])
async def test_a_retry_after_the_first_hooks_run_expired_answers_delivered(
        env: Env, monkeypatch: pytest.MonkeyPatch, wait: float | None) -> None:
    """The first attempt resumes the receiver's hook, which takes the payload, then the attempt fails before the
    step's end; before the retry the receiver's run expires with its token's record, and no other hook claims the
    token. The retry's look finds no hook at all: the call answers "sent", as the first attempt would have (the
    World's record of the call's key names the hook that took it), not "no hook holds that token yet" (without
    ``wait``) or, after the wait, "no run reached create_hook". Nothing is delivered twice."""
    token = f"resume-expired-alone-{env.name}-{id(env)}-{wait}"
    first = await env.client.start(receiver, token)
    await first.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    expired = _expire_after_the_first_resume(env, monkeypatch, first, token)
    source = await env.client.start(sender_catches, token, wait)
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"
    assert expired
    [step] = await _resume_steps(env, source.run_id)
    assert (step.status, step.attempt) == ("completed", 2)  # the failed send, then the retry that asked the World


async def _older_than_clock_margins(env: Env) -> None:
    """Let two seconds pass on the backend's clock (the memory World's is virtual)."""
    if env.name == "memory":
        env.world.clock.advance(2.0)
    else:
        await asyncio.sleep(2.0)


async def test_a_retry_after_a_first_attempt_that_failed_before_its_write_resumes_a_hook_made_just_before(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The receiver's hook is created an instant before the send (within the clocks' margin), and the first
    attempt's look fails (a throttled read). That attempt wrote nothing, and its end says so: the retry resumes
    the hook. (It was refused, by a clock comparison, as one that may have claimed the token after an attempt that
    delivered.)"""
    token = f"resume-look-failed-{env.name}-{id(env)}"
    target = await env.client.start(receiver, token)
    await target.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    failed: list[int] = []
    get_by_token = env.world.hooks.get_by_token

    async def looked_up(wanted: str, **kwargs: Any) -> Any:
        context = current_step.get()
        if wanted == token and context is not None and not failed:
            failed.append(context.metadata.attempt)
            raise ConnectionError("the look-up failed")
        return await get_by_token(wanted, **kwargs)

    monkeypatch.setattr(env.world.hooks, "get_by_token", looked_up)
    source = await env.client.start(sender_catches, token, None)
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"
    assert await target.result(timeout=RESULT_TIMEOUT) == ["hello"]
    [step] = await _resume_steps(env, source.run_id)
    assert (failed, step.status, step.attempt) == ([1], "completed", 2)
    retrying = [e for e in await source.events() if e.event_type == "step_retrying"]
    assert [(e.event_data or {})["error"]["name"] for e in retrying] == ["ConnectionError"]


async def test_an_attempt_that_runs_on_after_a_take_over_sends_to_no_other_hook(
        env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Attempt 1 of the send stalls before its look (a paused process), a later attempt takes the step over and
    delivers to the receiver's hook, the receiver disposes it and a second run claims the token. Then the stalled
    attempt runs on: its look finds the second run's hook. It must not give it the payload. (The stall is the
    first attempt's context kept aside while the step is retried, and its body run with it afterwards.) The World
    refuses its write (the resume id is the first hook's), and the attempt answers as the one that recorded it."""
    token = f"resume-zombie-{env.name}-{id(env)}"
    first = await env.client.start(receiver, token)
    await first.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    await _older_than_clock_margins(env)  # (so that no clock comparison refuses the first hook: not what is tested)
    stalled: list[StepContext] = []
    get_by_token = env.world.hooks.get_by_token

    async def looked_up(wanted: str, **kwargs: Any) -> Any:
        context = current_step.get()
        if wanted == token and context is not None and context.metadata.attempt == 1 and not stalled:
            stalled.append(context)
            raise ConnectionError("attempt 1 stalls here; the step is taken over")
        return await get_by_token(wanted, **kwargs)

    monkeypatch.setattr(env.world.hooks, "get_by_token", looked_up)
    source = await env.client.start(sender, token, "hello")
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"
    assert await first.result(timeout=RESULT_TIMEOUT) == ["hello"]
    second = await env.client.start(receiver, token)
    await second.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    [step] = await _resume_steps(env, source.run_id)
    assert (step.status, step.attempt, stalled[0].metadata.step_id) == ("completed", 2, step.step_id)
    reset = current_step.set(stalled[0])
    try:  # the stalled attempt runs on
        answer = await RESUME_HOOK_STEP.fn(token, "hello", True)
    finally:
        current_step.reset(reset)
    assert answer is True
    assert await _received(env, second.run_id) == [], "the stalled attempt gave the payload to a second hook"


async def test_a_refused_resume_once_wakes_the_run_whose_hook_recorded_it(local: LocalAWS) -> None:
    """The attempt that recorded the payload may have died before its wake: the write another hook refuses wakes
    the run whose hook holds it (its hook here still waits: that payload was recorded without any wake). On the
    emulator only: the test environment's watchdog, on its skipping clock, would wake the run anyway."""
    env = Env("local", local.client, local.world)
    first_token, second_token = f"resume-wake-a-{env.name}-{id(env)}", f"resume-wake-b-{env.name}-{id(env)}"
    own = f"resume-wake-own-{env.name}-{id(env)}"
    first = await env.client.start(receiver_then_waits, first_token, own)
    second = await env.client.start(receiver, second_token)
    hook = await first.wait_for_hook(first_token, timeout=RESULT_TIMEOUT)
    await second.wait_for_hook(second_token, timeout=RESULT_TIMEOUT)
    key = "awsworld.resume_hook:wrun_sender:step_1"
    await env.world.events.create(first.run_id, {"eventType": "hook_received", "correlationId": hook.hook_id,
                                                 "eventData": {"payload": serde.dumps("hello"), "resumeId": key,
                                                               "resumeOnce": True}})
    with pytest.raises(HookResumedElsewhereError):
        await run_control.resume_hook(env.world, second_token, serde.dumps("hello"), idempotency_key=key, once=True)
    await first.wait_for_hook(own, timeout=10.0)  # it took the payload and left the hook: it was woken
    assert await _received(env, second.run_id) == []


async def test_a_retry_of_a_look_that_found_the_hook_sends_once(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """The hook appears while the call waits for it (created after the step's first start): the look that finds
    it dies after the send; its retry sees the hook holds this call's payload and answers as the first."""
    token = f"resume-late-crash-{env.name}-{id(env)}"
    crashes: Counter[str] = Counter()
    original = env.world.events.create

    async def create(run_id: Any, event: Any, **kwargs: Any) -> Any:
        result = await original(run_id, event, **kwargs)
        if isinstance(event, dict) and event.get("eventType") == "hook_received" and not crashes["sent"]:
            crashes["sent"] += 1
            raise ConnectionError("the process died after hook_received landed")
        return result

    monkeypatch.setattr(env.world.events, "create", create)
    source = await env.client.start(sender, token, "late")
    await asyncio.sleep(0.2)  # (memory: the poll's timer is what the clock skips to)
    target = await env.client.start(receiver, token)
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"
    assert await target.result(timeout=RESULT_TIMEOUT) == ["late"]
    assert crashes["sent"] == 1
    assert [(e.event_data or {}).get("payload") for e in await _received(env, target.run_id)] == ["late"]


async def test_a_send_reads_no_log_to_vet_its_hook(env: Env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Which hook may take the call's payload is the World's check, in the write (``resumeOnce``): no look of the
    call, first or later, reads a step's or a hook's events (a hook created after the call, as here, is what the
    clock check this replaced read them for)."""
    token = f"resume-no-vet-{env.name}-{id(env)}"
    reads: list[tuple[str, str]] = []
    original = env.world.events.list_by_correlation_id

    async def listing(run_id: str, correlation_id: str, **kwargs: Any) -> Any:
        reads.append((run_id, correlation_id))
        return await original(run_id, correlation_id, **kwargs)

    monkeypatch.setattr(env.world.events, "list_by_correlation_id", listing)
    source = await env.client.start(sender, token, "late")
    await asyncio.sleep(0.2)  # (memory: the poll's timer is what the clock skips to)
    target = await env.client.start(receiver, token)
    assert await target.result(timeout=RESULT_TIMEOUT) == ["late"]
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"
    [step] = await _resume_steps(env, source.run_id)
    assert step.attempt == 2  # (a look that found no hook, then the send)
    assert reads == []


async def test_a_replay_on_edited_code_does_not_send_again(env: Env) -> None:
    token = f"resume-edit-{env.name}-{id(env)}"
    own = f"resume-edit-own-{env.name}-{id(env)}"
    target = await env.client.start(receiver, token, 2)
    await target.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    source = await env.client.start(sender_then_waits, token, own)
    await source.wait_for_hook(own, timeout=RESULT_TIMEOUT)
    assert len(await _received(env, target.run_id)) == 1
    with deployed(sender_then_waits, sender_then_waits_v2):
        await env.client.resume_hook(own, "go")
        assert await source.result(timeout=RESULT_TIMEOUT) == "v2"
    assert len(await _received(env, target.run_id)) == 1
    [step] = await _resume_steps(env, source.run_id)
    starts = [e for e in await source.events() if e.event_type == "step_started" and e.correlation_id == step.step_id]
    assert (step.attempt, len(starts)) == (1, 1)  # the replay on v2 read the step's end: no body ran again
    assert (await target.status()) == "running"


async def test_a_missing_hook_without_wait_fails_the_call_at_once(env: Env) -> None:
    source = await env.client.start(sender_catches, f"resume-nobody-{env.name}-{id(env)}", None)
    outcome = await source.result(timeout=RESULT_TIMEOUT)
    assert outcome.startswith("missing: None False: ") and "pass wait= to wait for it" in outcome
    [step] = await _resume_steps(env, source.run_id)
    assert (step.status, step.attempt) == ("completed", 1)  # the refusal is the call's recorded answer
    assert (await replay_run(env.world, source.run_id)).ok


async def test_a_hook_that_never_appears_fails_after_wait(env: Env) -> None:
    source = await env.client.start(sender_catches, f"resume-never-{env.name}-{id(env)}", 3.0)
    outcome = await source.result(timeout=RESULT_TIMEOUT)
    assert outcome.startswith("missing: None False: ") and "within wait=3.0" in outcome


async def test_a_hook_whose_run_ended_is_a_closed_hook_error(env: Env) -> None:
    token = f"resume-ended-{env.name}-{id(env)}"
    target = await env.client.start(receiver, token)
    await target.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    await env.client.cancel(target.run_id)
    source = await env.client.start(sender_catches, token, 5.0)
    outcome = await source.result(timeout=RESULT_TIMEOUT)
    assert outcome.startswith(f"closed: {target.run_id} cancelled False: ")
    [step] = await _resume_steps(env, source.run_id)
    assert (step.status, step.attempt) == ("completed", 1)


async def test_a_token_whose_run_was_deleted_after_its_retention_is_not_said_to_be_unreached(env: Env) -> None:
    """Once the run that held a token ended and its retention passed (``_expire``: what DynamoDB's TTL does), the
    World has no record of the token, as for one no run has used yet. On AWS the error says both (the World cannot
    tell them apart: ``world/rules/hooks.py``, ``unknown_token_reason``), to the client's ``resume_hook`` and to a
    workflow's. In memory nothing is ever deleted: a token with no record is one no run has reached, and the error
    says only that. Before, both said "no run has reached create_hook with it", for a run that had long ended."""
    token = f"resume-deleted-{env.name}-{id(env)}"
    target = await env.client.start(receiver, token)
    await target.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    await env.client.resume_hook(token, "first")
    assert await target.result(timeout=RESULT_TIMEOUT) == ["first"]
    deleted = "or the run that held it ended and was deleted once its retention passed"
    if env.name == "memory":
        with pytest.raises(HookNotFoundError) as unused:
            await env.client.resume_hook(f"{token}-never-used", "late")
        assert str(unused.value).startswith("no hook owns that token: no run has reached create_hook with it yet; "
                                            "if its run has not reached it yet, wait for the hook"), unused.value
        assert deleted not in str(unused.value)
        return
    await _expire(env, target.run_id, token)
    with pytest.raises(HookNotFoundError) as late:
        await env.client.resume_hook(token, "late")
    assert str(late.value).startswith(f"no hook owns that token: either no run has reached create_hook with it yet, "
                                      f"{deleted}; if its run has not reached it yet, wait"), late.value
    source = await env.client.start(sender_catches, token, None)
    outcome = await source.result(timeout=RESULT_TIMEOUT)
    assert outcome.startswith(f"missing: None False: resume_hook('{token}'): no hook holds that token: either") \
        and deleted in outcome, outcome


async def test_a_hook_its_run_disposed_is_not_found_naming_that_hook(env: Env) -> None:
    token = f"resume-disposed-{env.name}-{id(env)}"
    own = f"resume-disposed-own-{env.name}-{id(env)}"
    target = await env.client.start(receiver_then_waits, token, own)
    await target.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    await env.client.resume_hook(token, "first")
    await target.wait_for_hook(own, timeout=RESULT_TIMEOUT)  # it left the first hook's `async with`
    source = await env.client.start(sender_catches, token, None)
    outcome = await source.result(timeout=RESULT_TIMEOUT)
    assert outcome.startswith(f"missing: ('{target.run_id}', ") and "left its `async with" in outcome, outcome


async def test_an_uncaught_refusal_fails_the_sending_run_with_the_worlds_error(env: Env) -> None:
    token = f"resume-uncaught-{env.name}-{id(env)}"
    source = await env.client.start(sender_nowait, token)
    with pytest.raises(HookNotFoundError, match=rf"resume_hook\('{token}'\): no hook holds that token: "
                                                 r"(either )?no run has reached create_hook with it yet"):
        await source.result(timeout=RESULT_TIMEOUT)
    view = await env.client.get_run(source.run_id).get()
    assert view.error is not None and "HookNotFoundError" in str(view.error)


async def test_a_codec_hook_takes_its_codecs_text_and_refuses_anything_else(awsworld_env: WorkflowTestEnv) -> None:
    client = awsworld_env.client
    target = await client.start(codec_receiver, "resume-codec")
    refused = await client.start(codec_sender, "resume-codec", {"sku": "kettle"})
    assert await refused.result(timeout=RESULT_TIMEOUT) == "refused: StepError True"
    sent = await client.start(codec_sender, "resume-codec", Order(sku="kettle").model_dump_json())
    assert await sent.result(timeout=RESULT_TIMEOUT) == "sent"
    assert await target.result(timeout=RESULT_TIMEOUT) == "kettle"


async def test_each_call_of_a_gather_is_its_own_send(awsworld_env: WorkflowTestEnv) -> None:
    token = "resume-many"
    target = await awsworld_env.client.start(receiver, token, 200)
    source = await awsworld_env.client.start(sender_many, token, 200)
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"
    assert sorted(await target.result(timeout=RESULT_TIMEOUT)) == list(range(200))


async def test_sends_run_as_queued_steps_too(env: Env) -> None:
    token = f"resume-queued-{env.name}-{id(env)}"
    target = await env.client.start(receiver, token, 5)
    await target.wait_for_hook(token, timeout=RESULT_TIMEOUT)
    source = await env.client.start(sender_queued, token, 5)
    assert await source.result(timeout=RESULT_TIMEOUT) == "sent"
    assert sorted(await target.result(timeout=RESULT_TIMEOUT)) == list(range(5))
    starts = [e for e in await source.events() if e.event_type == "step_started"]
    assert len(starts) == 5 and sum(1 for e in starts if not (e.event_data or {}).get("inline")) >= 1


async def test_outside_a_workflow_it_says_to_use_a_client() -> None:
    with pytest.raises(RuntimeError, match=r"client\.resume_hook"):
        await resume_hook("any", 1)


async def test_a_payload_that_cannot_be_stored_is_refused_naming_the_payload(awsworld_env: WorkflowTestEnv) -> None:
    """Said at the call, where the workflow can catch it: it named the built-in step's second argument
    (``arguments of step awsworld.resume_hook cannot be serialized: value['args'][1]``) and failed the run."""
    run = await awsworld_env.client.start(sender_unserializable, "resume-unserializable")
    refused = await run.result(timeout=RESULT_TIMEOUT)
    assert refused.startswith("resume_hook('resume-unserializable') payload['items'][0]: cannot serialize"), refused
