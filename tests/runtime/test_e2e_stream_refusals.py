"""What a step is told when it writes where a stream takes no more chunks, on the in-memory World and on moto: a
write after its own writer's ``close()``, a write to a stream another step's writer closed, and a write from a
task the step left running, after the step has ended (before: accepted, and lost without a word when the run
ended, or the process was frozen, before the write's flush). Each says which
stream of which run and what to do instead. Before, the first said ``write session wrtr_… is closed`` (a
session the user never made) and the second ``stream x of run … is closed``, neither saying what to change; and
the second was retried as if it could pass (6 attempts, minutes of back-off on a stack)."""

from __future__ import annotations

import asyncio

import pytest

from awsworld import create_hook, get_writable, step, workflow
from awsworld.world import EntityConflictError

from .conftest import BOTH, E2E

pytestmark = pytest.mark.parametrize("e2e_backend", BOTH)


@step(name="refusals.write_after_close")
async def write_after_close() -> str:
    out = get_writable("answer")
    await out.write("one")
    await out.close()
    try:
        await out.write("two")
    except EntityConflictError as error:  # (a StreamClosedError is one)
        return f"{type(error).__name__}: {error}"
    return "accepted"


@step(name="refusals.closing")
async def closing() -> None:
    out = get_writable("shared")
    await out.write("one")
    await out.close()


@step(name="refusals.late")  # the default retry policy: a closed stream is not retried
async def late() -> None:
    await get_writable("shared").write("two")


@workflow(name="refusals.own")
async def own() -> str:
    return await write_after_close()


@workflow(name="refusals.other")
async def other() -> str:
    await closing()
    try:
        await late()
    except Exception as error:
        return str(error)
    return "accepted"


async def test_a_write_after_the_writers_own_close_says_so(e2e: E2E) -> None:
    run = await e2e.start(own)
    assert await run.result(timeout=60) == (
        f"StreamClosedError: stream 'answer' of run {run.run_id} was closed by this writer's close(): it takes no "
        "more chunks; write them before the close")
    assert [chunk async for chunk in run.stream("answer")] == [b"one"]


async def test_a_write_to_a_stream_another_step_closed_says_what_to_do(e2e: E2E) -> None:
    run = await e2e.start(other)
    assert await run.result(timeout=60) == (
        f"step 'refusals.late' failed: StreamClosedError: stream 'shared' of run {run.run_id} is closed (a "
        "writer's close() ended it): it takes no more chunks; write them before the close, or to a stream of another "
        "name")
    assert [chunk async for chunk in run.stream("shared")] == [b"one"]
    attempts = {s.step_name: s.attempt for s in await run.steps()}
    assert attempts["refusals.late"] == 1, "a closed stream never reopens: not retried (before: 6 attempts)"


told_late: list[str] = []
"""What the task a step left behind was told when it wrote."""


async def _write_later(writer: object) -> None:
    await asyncio.sleep(0.05)  # the step has returned by now
    try:
        await writer.write("late")  # type: ignore[attr-defined]
        told_late.append("accepted")
    except RuntimeError as error:
        told_late.append(str(error))


@step(name="refusals.leaves_a_writer")
async def leaves_a_writer() -> None:
    out = get_writable("progress")
    await out.write("first")
    asyncio.get_running_loop().create_task(_write_later(out))  # the mistake under test: a task left writing


@workflow(name="refusals.after")
async def after(token: str) -> None:
    await leaves_a_writer()
    async with create_hook(token) as hook:
        await hook


async def test_a_write_after_the_step_ended_is_refused_saying_where_to_write(e2e: E2E) -> None:
    told_late.clear()
    token = f"after:{e2e.backend}"
    run = await e2e.start(after, token)
    await run.wait_for_hook(token)
    for _ in range(100):
        if told_late:
            break
        await asyncio.sleep(0.05)
    told = (f"stream 'progress' of run {run.run_id}: step 'refusals.leaves_a_writer' (step_1) has ended, so this "
            "writer takes no more chunks (a chunk written after its step could be lost: the step's end is what makes "
            "them durable); write within the step's body, awaiting any task that writes before it returns")
    assert told_late == [told]
    await e2e.client.resume_hook(token, "go")
    await run.result(timeout=60)
    assert [chunk async for chunk in run.stream("progress")] == [b"first"]
