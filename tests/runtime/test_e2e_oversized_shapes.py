"""A value of many parts over ``AWSWORLD_MAX_VALUE_BYTES`` is refused where it is made, before its copy, with the
size its JSON has; one at the bound is taken.

The writer of a user value (a step's result, ``Client.start``'s arguments, a workflow's return value,
``resume_hook``'s payload, a step's or a child workflow's arguments, asked by the workflow's replay) asks
``world/limits.py``'s ``oversized`` with the World's bound before it dumps the value (``serde.dumps``), and raises
what the World would have raised once handed the dumped copy: the same typed error, worded the same, the size exact
(the World's message states it too: a message that said less than the value holds, as one for a tuple did, is a
wrong message). ``bench/oversized_values.py`` prints what that saves in memory; this pins the behaviour, on the
in-memory World and on the AWS World (moto), for values shaped like data (records, a tuple of them, a dict with an
envelope's key, many small ``bytes``), each built to an exact size: at the bound it is recorded, one byte over it
is refused, and nothing is written for it. A step's or a child's call refused so is refused again, the same, by
every replay of its run (``WorkflowExecution.declare_step``).
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from awsworld import ChildWorkflowError, StepError, create_hook, sleep, step, workflow
from awsworld.authoring.errors import ValueTooLargeError, WorkflowRunFailedError
from awsworld.client.replay import replay_run
from awsworld.durable import serde
from awsworld.settings import Settings
from awsworld.world.errors import PayloadTooLargeError

from .conftest import BOTH, E2E, on_backends, with_env

BOUND = 256 * 1024
ARGUMENTS = len('{"args":[],"kwargs":{}}')
"""What a workflow's arguments add to its one argument's JSON."""
KINDS = ("records", "a tuple of records", "a dict with an envelope's key", "many small bytes")
RAN: dict[str, int] = {}
"""size -> how many times the step that builds a value of that size ran."""

e2e_backend = on_backends(BOTH)
local_env = with_env({Settings.max_value_bytes.env: str(BOUND)})


def size_of(value: Any) -> int:
    return len(serde.to_json_text(value).encode("utf-8"))


def child_input_size(value: Any) -> int:
    """The size of a child call's input as the log stores it: its start step's arguments, the child's own
    arguments dumped among them (``_engine/children.py``), so dumped twice (an envelope's ``"$t"`` escaped)."""
    return size_of({"args": ["oversized-shapes.takes", serde.dumps({"args": [value], "kwargs": {}}), False],
                    "kwargs": {}})


def child_shaped(kind: str, size: int) -> Any:
    """A value of ``kind`` whose child call's input (``child_input_size``) is exactly ``size`` bytes."""
    count = size // 128  # (an item of bytes is 50 bytes of JSON, 68 twice dumped: room for its pad)
    room = child_input_size(shaped(kind, size, count)) - size  # (the call's and the envelopes' bytes)
    return shaped(kind, size - room, count)


def shaped(kind: str, size: int, count: int | None = None) -> Any:
    """A value of ``kind`` whose stored JSON is exactly ``size`` bytes: its items (``count``, else one for 64
    bytes of it), then a text that pads it."""
    count = size // 64 if count is None else count
    if kind == "many small bytes":
        items: list[Any] = [bytes([i % 256]) * 20 for i in range(count)]
    else:
        items = [{"id": i, "name": "ünï 日本", "tags": ["a", "b"]} for i in range(count // 2)]
    if kind == "a dict with an envelope's key":
        value: Any = {"$t": "mine", **{f"k{i}": item for i, item in enumerate(items)}, "pad": ""}
        value["pad"] = "x" * (size - size_of(value))
        return value
    items.append("")
    items[-1] = "x" * (size - size_of(tuple(items) if kind == "a tuple of records" else items))
    return tuple(items) if kind == "a tuple of records" else items


def too_large(size: int) -> str:
    return f"{size} bytes of JSON; the largest value awsworld stores is {BOUND} bytes (AWSWORLD_MAX_VALUE_BYTES)"


@step(name="oversized-shapes.build", max_retries=2)
async def build(kind: str, size: int) -> Any:
    RAN[f"{kind}:{size}"] = RAN.get(f"{kind}:{size}", 0) + 1
    return shaped(kind, size)


@workflow(name="oversized-shapes.step-result")
async def step_result(kind: str, size: int) -> Any:
    try:
        return size_of(await build(kind, size))
    except StepError as error:
        return {"type": error.error_type, "message": str(error)}


@workflow(name="oversized-shapes.takes")
async def takes(value: Any) -> int:
    return size_of(value)


@step(name="oversized-shapes.measure")
async def measure(value: Any) -> int:
    RAN["measure"] = RAN.get("measure", 0) + 1
    return size_of(value)


@step(name="oversized-shapes.note")
async def note(seen: Any) -> None:
    """Records what the workflow saw at a call (its input, in the log): a replay that saw anything else diverges
    at it (the input's digest)."""


@workflow(name="oversized-shapes.step-input")
async def step_input(kind: str, size: int) -> Any:
    try:
        seen: Any = await measure(shaped(kind, size - ARGUMENTS))
    except ValueTooLargeError as error:
        seen = str(error)
    await sleep(0.1)  # (the next delivery replays the call from the log; the sleep's length is checked there)
    await note(seen)
    await sleep(0.1)  # (and the one after it, where what it sees is checked against note's input)
    return seen


@workflow(name="oversized-shapes.child-input")
async def child_input(kind: str, size: int) -> Any:
    try:
        seen: Any = await takes(child_shaped(kind, size))
    except ChildWorkflowError as error:
        seen = {"type": error.error_type, "message": str(error)}
    # Its replay went on from the refusal at another time than the first delivery had (the refusal came with
    # the write of the call's hook): this sleep's end differed, and the run failed as CORRUPTED_EVENT_LOG.
    await sleep(0.1)
    await note(seen)
    await sleep(0.1)
    return seen


@workflow(name="oversized-shapes.returns")
async def returns(kind: str, size: int) -> Any:
    return shaped(kind, size)


@workflow(name="oversized-shapes.hooked")
async def hooked(token: str) -> int:
    async with create_hook(token=token) as hook:
        return size_of(await hook)


def test_the_values_are_of_their_size() -> None:
    for kind in KINDS:
        for size in (BOUND, BOUND + 1):
            assert size_of(shaped(kind, size)) == size
            assert child_input_size(child_shaped(kind, size)) == size


async def calls_written(run: Any) -> list[str]:
    return [f"{e.event_type}:{e.correlation_id}" for e in await run.events() if e.event_type.startswith("step_")
            and e.event_type != "step_started"]


@pytest.mark.parametrize("kind", KINDS)
async def test_a_step_result_one_byte_over_fails_the_step_once_and_one_at_the_bound_is_recorded(
        e2e: E2E, kind: str) -> None:
    RAN.clear()
    assert await e2e.run(step_result, kind, BOUND) == BOUND
    refused = await e2e.run(step_result, kind, BOUND + 1)
    assert refused == {"type": "ValueTooLargeError", "message": (
        "step 'oversized-shapes.build' failed: ValueTooLargeError: the result of step 'oversized-shapes.build' "
        f"(step_1) is too large to record: {too_large(BOUND + 1)}")}, refused
    assert RAN[f"{kind}:{BOUND + 1}"] == 1  # failed for good: retries allowed, none taken


@pytest.mark.parametrize("kind", KINDS)
async def test_workflow_arguments_one_byte_over_are_refused_by_start_and_at_the_bound_taken(
        e2e: E2E, kind: str) -> None:
    runs = len((await e2e.client.list_runs(limit=100)).data)
    with pytest.raises(PayloadTooLargeError) as refused:
        await e2e.start(takes, shaped(kind, BOUND + 1 - ARGUMENTS))
    assert str(refused.value) == ("the arguments of workflow 'oversized-shapes.takes' are too large to record: "
                                  f"{too_large(BOUND + 1)}")
    assert len((await e2e.client.list_runs(limit=100)).data) == runs  # no run written
    assert await e2e.run(takes, shaped(kind, BOUND - ARGUMENTS)) == BOUND - ARGUMENTS


@pytest.mark.parametrize("kind", KINDS)
async def test_a_return_value_one_byte_over_fails_the_run_and_one_at_the_bound_is_its_result(
        e2e: E2E, kind: str) -> None:
    run = await e2e.start(returns, kind, BOUND + 1)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=60)
    assert failed.value.code == "VALUE_TOO_LARGE", failed.value
    assert f"the workflow's return value is too large to record: {too_large(BOUND + 1)}" in str(failed.value)
    assert size_of(await e2e.run(returns, kind, BOUND)) == BOUND


@pytest.mark.parametrize("kind", KINDS)
async def test_a_hook_payload_one_byte_over_is_refused_and_one_at_the_bound_resumes(e2e: E2E, kind: str) -> None:
    token = f"oversized-shapes-{os.getpid()}-{e2e.backend}-{KINDS.index(kind)}"
    run = await e2e.start(hooked, token)
    await e2e.hook_ready(token, run)
    with pytest.raises(PayloadTooLargeError) as refused:
        await e2e.client.resume_hook(token, shaped(kind, BOUND + 1))
    assert str(refused.value) == f"the payload for hook {token!r} is too large to record: {too_large(BOUND + 1)}"
    assert [e.event_type for e in await run.events()].count("hook_received") == 0  # nothing recorded
    await e2e.client.resume_hook(token, shaped(kind, BOUND))
    assert await run.result(timeout=60) == BOUND


@pytest.mark.parametrize("kind", KINDS)
async def test_a_step_input_one_byte_over_is_refused_at_the_call_on_every_replay_and_one_at_the_bound_taken(
        e2e: E2E, kind: str) -> None:
    RAN.clear()
    run = await e2e.start(step_input, kind, BOUND + 1)
    seen = await run.result(timeout=60)
    assert seen == f"the input of step 'oversized-shapes.measure' (step_1) is too large to record: " \
        f"{too_large(BOUND + 1)}", seen
    assert "measure" not in RAN  # the step never ran
    # Nothing written for the refused call (step_1); each delivery's replay saw what the first delivery did (the
    # sleep's end, note's input, the run's result), and replaying the whole log again sees it too.
    assert await calls_written(run) == ["step_created:step_3", "step_completed:step_3"]
    [noted] = [e for e in await run.events() if e.event_type == "step_created"]
    assert serde.loads((noted.event_data or {})["input"]) == {"args": [seen], "kwargs": {}}
    assert (await replay_run(e2e.world, run.run_id)).status == "ok"
    assert await e2e.run(step_input, kind, BOUND) == BOUND - ARGUMENTS
    assert RAN["measure"] == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_a_child_input_one_byte_over_is_refused_at_the_call_on_every_replay_and_one_at_the_bound_taken(
        e2e: E2E, kind: str) -> None:
    run = await e2e.start(child_input, kind, BOUND + 1)
    seen = await run.result(timeout=60)
    assert seen == {"type": "ValueTooLargeError", "message": (
        f"child run {run.run_id}.step_1 (oversized-shapes.takes) could not be started: the input of step "
        f"'awsworld.start_child' (step_1) is too large to record: {too_large(BOUND + 1)}")}, seen
    assert await run.children() == []  # no child run
    assert await calls_written(run) == ["step_created:step_4", "step_completed:step_4"]  # (its hook: hook_2)
    assert (await replay_run(e2e.world, run.run_id)).status == "ok"
    taken = await e2e.run(child_input, kind, BOUND)
    assert taken == size_of(child_shaped(kind, BOUND)), taken
