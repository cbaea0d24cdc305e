"""Values cross every boundary intact (issue 21 item 1): workflow input and result, step arguments and results,
child workflow inputs and results, hook metadata and payloads, in every size class (small and inline; just
over the inline limit, so in S3 on AWS; near the largest value the World accepts), on every backend (memory,
moto, DynamoDB Local), each through its public path, compared byte for byte (``values_support``). A value just
past the limit is refused where it is made with ``PayloadTooLargeError`` or ``ValueTooLargeError``, and nothing
is lost or stranded. The large run result is also read back by ``awsworld result RUN --json`` as a process.

Regression: a child's result over the inline limit reached its parent as ``None`` on the AWS World (a write's
answer dropped a value it had stored in S3, and the child reported its outcome from that answer).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest

from awsworld import (
    ChildWorkflowError,
    FatalError,
    StepError,
    create_hook,
    sleep,
    start_child,
    step,
    workflow,
)
from awsworld.authoring.errors import ValueTooLargeError, WorkflowRunFailedError
from awsworld.aws.resources import run_prefix
from awsworld.cli.dev import environment
from awsworld.durable import serde
from awsworld.world.errors import PayloadTooLargeError

from .conftest import ALL_BACKENDS, AWS, DYNAMODB_LOCAL, E2E, on_backends, with_env
from .values_support import LIMIT_ENV, MAX_VALUE_BYTES, SIZES, assert_same, sample, size_of, tag, text_of

RESULT_TIMEOUT = 60.0
CHILD_OUTCOME_ROOM = len('{"status":"completed","result":}')
"""What a child's outcome adds to its result on the way to the parent's hook."""
RECEIVED: dict[str, list[str]] = {}
"""tag -> the serialized argument each step body received (steps run in this process on every backend)."""


e2e_backend = on_backends(ALL_BACKENDS)


local_env = with_env(LIMIT_ENV)


# ----------------------------------------------------------------------------------------- workflows


@step(name="values.echo")
async def echo(key: str, value: Any) -> Any:
    RECEIVED.setdefault(key, []).append(serde.to_json_text(value))
    return value


def _check_same(value: Any, *copies: Any) -> None:
    """Inside a workflow: every copy serializes to the value's bytes (else the run fails, naming which)."""
    expected = serde.to_json_text(value)
    differ = [i for i, c in enumerate(copies) if serde.to_json_text(c) != expected]
    if differ:
        raise FatalError(f"copies {differ} differ from the value ({len(expected)} characters)")


@workflow(name="values.carry")
async def carry(key: str, value: Any) -> Any:
    """The value as a step argument and result: one step inline and one queued (its message reads the input
    from the World), then after a sleep (a new delivery, replaying every result from the log) once more."""
    first, second = await asyncio.gather(echo(key, value), echo(key, value))
    await sleep(1)
    third = await echo(key, value)
    _check_same(value, first, second, third)
    return value


@workflow(name="values.child")
async def child(key: str, value: Any) -> Any:
    return await echo(key, value)


@workflow(name="values.parent")
async def parent(key: str, value: Any) -> Any:
    """The value to an awaited child and back, then to a ``start_child`` handle and back."""
    awaited = await child(key, value)
    handle = await start_child(child, key, value)
    _check_same(value, awaited, await handle)
    return value


@workflow(name="values.bare-child")
async def bare_child(size: int) -> Any:
    return text_of(size - 2)  # a string: its JSON is ``size`` bytes


@workflow(name="values.takes-anything")
async def takes_anything(value: Any) -> None:
    """A workflow whose parameter any value fits (``Any`` is not type-checked): a value's size is all it tests."""


@workflow(name="values.parent-of-bare")
async def parent_of_bare(size: int) -> dict[str, Any]:
    try:
        got = await bare_child(size)
    except ChildWorkflowError as error:
        return {"status": error.status, "type": error.error_type, "code": error.code, "message": str(error)}
    return {"status": "completed", "same": got == text_of(size - 2)}


@workflow(name="values.hooked")
async def hooked(token: str, metadata: Any) -> Any:
    async with create_hook(token=token, metadata=metadata) as hook:
        return await hook


@workflow(name="values.too-large-step-argument")
async def too_large_step_argument(key: str, size: int) -> str:
    try:
        await echo(key, sample(size))
    except ValueTooLargeError as error:
        return f"refused: {error}"
    return "accepted"


@workflow(name="values.goes-on-after-a-refused-call")
async def goes_on_after_a_refused_call(key: str, size: int) -> list[str]:
    said = []
    try:
        await echo(key, sample(size))
    except ValueTooLargeError:
        said.append("step refused")
    try:
        async with create_hook(token=f"{key}-hook", metadata=sample(size + 100)) as hook:
            await hook
    except ValueTooLargeError:
        said.append("hook refused")
    await sleep(0.2)  # a later call, so the run is replayed past the refusals (each delivery replays its log)
    said.append(await echo(key, "small"))
    return said


@workflow(name="values.too-large-step-result")
async def too_large_step_result(key: str, size: int) -> dict[str, Any]:
    try:
        await grow(key, size)
    except StepError as error:
        return {"type": error.error_type, "message": str(error)}
    return {"type": None}


@step(name="values.grow", max_retries=0)
async def grow(key: str, size: int) -> Any:
    RECEIVED.setdefault(key, []).append("ran")
    return sample(size)


@workflow(name="values.returns")
async def returns(size: int) -> Any:
    return sample(size)


# ----------------------------------------------------------------------------------------- helpers


async def _stored_outside_the_table(e2e: E2E, run_id: str) -> int:
    """How many S3 value objects the AWS World keeps for the run (0 on memory, which has no S3)."""
    if e2e.memory:
        return 0
    s3 = await e2e.world.clients.s3()
    page = await s3.list_objects_v2(Bucket=e2e.world.config.bucket_name, Prefix=f"{run_prefix(run_id)}values/")
    return int(page.get("KeyCount", 0))


def _args(value: Any) -> dict[str, Any]:
    """A run's or step's stored input, read back as its arguments."""
    return serde.loads(value)


# ----------------------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("size", SIZES)
async def test_workflow_input_result_and_step_values_round_trip(e2e: E2E, size: str) -> None:
    value, key = sample(SIZES[size]), tag()
    run = await e2e.start(carry, key, value)
    assert_same(await run.result(timeout=RESULT_TIMEOUT), value)
    # Each step body got the argument to the byte (a clean run runs each body once).
    assert RECEIVED[key] == [serde.to_json_text(value)] * 3
    view = await run.get()
    assert_same(_args(view.input), {"args": [key, value], "kwargs": {}})
    assert_same(serde.loads(view.output), value)
    steps = [s for s in await run.steps() if s.step_name == "values.echo"]
    assert len(steps) == 3
    for s in steps:
        assert_same(_args(s.input), {"args": [key, value], "kwargs": {}})
        assert_same(serde.loads(s.output), value)
    events = await run.events()
    results = [e.event_data["result"] for e in events if e.event_type == "step_completed" and e.event_data]
    assert len(results) == 3
    for result in results:
        assert_same(serde.loads(result), value)
    if not e2e.memory:  # the classes are what they say: out of line in S3 beyond the inline limit
        assert (await _stored_outside_the_table(e2e, run.run_id) > 0) == (size != "small")


@pytest.mark.parametrize("size", SIZES)
async def test_a_child_result_and_input_reach_the_parent_intact(e2e: E2E, size: str) -> None:
    value, key = sample(SIZES[size]), tag()
    run = await e2e.start(parent, key, value)
    assert_same(await run.result(timeout=RESULT_TIMEOUT), value)
    assert RECEIVED[key] == [serde.to_json_text(value)] * 2
    children = await run.children()
    assert len(children) == 2
    for handle in children:
        view = await handle.get()
        assert view.status == "completed"
        assert_same(_args(view.input), {"args": [key, value], "kwargs": {}})
        assert_same(serde.loads(view.output), value)
    outcomes = [serde.loads(e.event_data["payload"]) for e in await run.events()
                if e.event_type == "hook_received" and e.event_data]
    assert [o["status"] for o in outcomes] == ["completed", "completed"]
    for outcome in outcomes:
        assert_same(serde.loads(outcome["result"]), value)


@pytest.mark.parametrize("size", SIZES)
async def test_hook_metadata_and_payload_round_trip(e2e: E2E, size: str) -> None:
    metadata, payload, token = sample(SIZES[size]), sample(SIZES[size]), f"values:{tag()}"
    payload["pad"] = payload["pad"][::-1]  # not the metadata: each is checked on its own
    run = await e2e.start(hooked, token, metadata)
    await e2e.hook_ready(token, run)
    hook = await e2e.world.hooks.get_by_token(token)
    assert_same(serde.loads(hook.metadata), metadata)
    event = await e2e.client.resume_hook(token, payload)
    assert event.event_type == "hook_received"
    assert_same(await run.result(timeout=RESULT_TIMEOUT), payload)
    received = [e for e in await run.events() if e.event_type == "hook_received"]
    assert len(received) == 1 and received[0].event_data is not None
    assert_same(serde.loads(received[0].event_data["payload"]), payload)


# ----------------------------------------------------------------------------------------- past the limit


async def test_values_just_past_the_limit_are_refused_where_they_are_made(e2e: E2E) -> None:
    over = sample(MAX_VALUE_BYTES + 1 - len('{"args":[],"kwargs":{}}'))  # as arguments, one byte past the limit
    assert size_of({"args": [over], "kwargs": {}}) == MAX_VALUE_BYTES + 1
    runs_before = len((await e2e.client.list_runs(limit=100)).data)
    with pytest.raises(PayloadTooLargeError) as refused:  # a workflow input: refused by Client.start, no run written
        await e2e.start(takes_anything, over)
    assert len((await e2e.client.list_runs(limit=100)).data) == runs_before
    # Each refusal names the value as its writer knows it (the workflow, the step, the hook), its size and the
    # bound, not the World's wire field (it said "eventData.input is ... bytes", naming no workflow or step).
    assert str(refused.value) == (
        f"the arguments of workflow 'values.takes-anything' are too large to record: {MAX_VALUE_BYTES + 1} bytes "
        f"of JSON; the largest value awsworld stores is {MAX_VALUE_BYTES} bytes (AWSWORLD_MAX_VALUE_BYTES)")

    key = tag()  # a step argument: refused at the call, in the workflow, and the body never runs
    answer = await e2e.run(too_large_step_argument, key, MAX_VALUE_BYTES - 20, timeout=RESULT_TIMEOUT)
    assert answer.startswith("refused: the input of step 'values.echo' (step_1) is too large to record: ") and (
        answer.endswith("bytes (AWSWORLD_MAX_VALUE_BYTES)") and "eventData" not in answer), answer
    assert key not in RECEIVED

    key = tag()  # a step result: the step fails once with ValueTooLargeError, the body is not re-run
    result = await e2e.run(too_large_step_result, key, MAX_VALUE_BYTES + 1, timeout=RESULT_TIMEOUT)
    assert result["type"] == "ValueTooLargeError" and RECEIVED[key] == ["ran"]
    assert "ValueTooLargeError: the result of step 'values.grow' (step_1) is too large to record: " in \
        result["message"], result  # (it named the step by its id alone: "the result of step step_1")

    run = await e2e.start(returns, MAX_VALUE_BYTES + 1)  # a return value: the run fails with VALUE_TOO_LARGE
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=RESULT_TIMEOUT)
    assert failed.value.code == "VALUE_TOO_LARGE" and "eventData" not in str(failed.value), failed.value
    exact = await e2e.run(returns, MAX_VALUE_BYTES, timeout=RESULT_TIMEOUT)  # the limit itself is accepted
    assert size_of(exact) == MAX_VALUE_BYTES

    token = f"values:{tag()}"  # a hook payload: resume_hook raises, the run keeps waiting for a good one
    run = await e2e.start(hooked, token, None)
    await e2e.hook_ready(token, run)
    with pytest.raises(PayloadTooLargeError) as refused:
        await e2e.client.resume_hook(token, sample(MAX_VALUE_BYTES + 1))
    assert str(refused.value).startswith(f"the payload for hook {token!r} is too large to record: "), refused.value
    assert await run.status() == "running"
    await e2e.client.resume_hook(token, "small")
    assert await run.result(timeout=RESULT_TIMEOUT) == "small"


async def test_a_child_result_too_large_to_report_fails_the_parents_await_instead_of_stranding_it(
        e2e: E2E) -> None:
    """A child's result that fits the limit but not with the outcome's envelope around it cannot reach the
    parent's hook: the parent's await raises ``ChildWorkflowError`` naming why; nothing is retried forever."""
    run = await e2e.start(parent_of_bare, MAX_VALUE_BYTES - 8)  # the child's output: 8 bytes under the limit
    outcome = await run.result(timeout=RESULT_TIMEOUT)
    assert outcome["status"] == "failed" and outcome["type"] == "ValueTooLargeError", outcome
    assert outcome["code"] == "VALUE_TOO_LARGE" and "too large" in outcome["message"]
    [handle] = await run.children()
    assert (await handle.status()) == "completed"  # the child itself completed, with its value
    assert size_of(serde.loads((await handle.get()).output)) == MAX_VALUE_BYTES - 8
    # With the outcome around it, exactly the limit: reported.
    ok = await e2e.run(parent_of_bare, MAX_VALUE_BYTES - CHILD_OUTCOME_ROOM, timeout=RESULT_TIMEOUT)
    assert ok == {"status": "completed", "same": True}


# ----------------------------------------------------------------------------------------- the CLI


@pytest.mark.parametrize("e2e_backend", [AWS, DYNAMODB_LOCAL], scope="module")  # memory lives in this process
@pytest.mark.parametrize("size", ["over-inline", "near-max"])
async def test_the_cli_reads_a_large_run_result_exactly(e2e: E2E, size: str) -> None:
    value = sample(SIZES[size])
    run = await e2e.start(carry, tag(), value)
    assert_same(await run.result(timeout=RESULT_TIMEOUT), value)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS", "AWSWORLD"))}
    env.update(environment(e2e.world.config, "http://127.0.0.1:9"))
    command = shutil.which("awsworld", path=os.path.dirname(sys.executable))
    argv = [command] if command else [sys.executable, "-m", "awsworld.cli"]
    done = await asyncio.to_thread(subprocess.run, [*argv, "result", run.run_id, "--json"], env=env,
                                   capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    document = json.loads(done.stdout.decode("utf-8"))
    assert document["status"] == "completed" and document["runId"] == run.run_id
    assert_same(serde.loads(document["output"]), value)


async def test_a_workflow_that_caught_a_refused_call_replays_past_it(e2e: E2E) -> None:
    """A call whose value the World refuses (a step's input, a hook's metadata) raises ``ValueTooLargeError`` in
    the workflow, which may catch it and go on, as the guarantees page says. The refused call has no event, so a
    replay (the next delivery, after the sleep) was blocked on it while the log went on: the run failed with
    ``CORRUPTED_EVENT_LOG`` at the sleep. The replay refuses it again where the log goes past it
    (``WorkflowExecution._refuse_unrecordable``), and the run completes."""
    key = tag()
    said = await e2e.run(goes_on_after_a_refused_call, key, MAX_VALUE_BYTES - 20, timeout=RESULT_TIMEOUT)
    assert said == ["step refused", "hook refused", "small"]
    assert RECEIVED[key] == [serde.to_json_text("small")]  # (the refused step never ran)
