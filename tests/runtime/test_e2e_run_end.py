"""A run's end, through workflows, on both Worlds (memory and LocalAWS): its unclosed streams end for readers and
its hooks close (listings say so; a resume says the run ended, with its status).

The stream case is the one a ported Vercel example found: a step writes the default stream, fails its first
attempt and succeeds on its second, never closing the stream. A reader starting after the run completed used
to see the end at once in memory and not within 2 s on AWS (its reader asked the run's status only after its
check interval); now both end at once, by one rule (``world/rules/streams.py``).
"""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter

import pytest

from awsworld import create_hook, get_writable, step, workflow
from awsworld.world import HookClosedError, RunGoneError

from .conftest import BOTH, E2E

pytestmark = pytest.mark.parametrize("e2e_backend", BOTH)

ATTEMPTS: Counter[str] = Counter()
BIG = "b" * (20 * 1024)  # a chunk above the inline value limit (16 KB)


@step(name="run_end.chatty", max_retries=2)
async def chatty(tag: str) -> str:
    ATTEMPTS[tag] += 1
    out = get_writable()
    await out.write(f"attempt {ATTEMPTS[tag]}\n")
    if ATTEMPTS[tag] == 1:
        await out.write(BIG)
        raise RuntimeError("the first attempt fails")
    return "ok"


@workflow(name="run_end.retried")
async def retried(tag: str) -> str:
    return await chatty(tag)


@step(name="run_end.progress", max_retries=0)
async def progress(tag: str) -> None:
    await get_writable("progress").write(f"{tag}: started\n")


@workflow(name="run_end.waits")
async def waits(tag: str) -> object:
    await progress(tag)
    async with create_hook(token=f"run-end:{tag}") as hook:
        return await hook


@workflow(name="run_end.first_payload")
async def first_payload(tag: str) -> object:
    return await create_hook(token=f"run-end:{tag}")  # never disposed: its run's end closes it


async def read_all(e2e: E2E, run_id: str, name: str) -> list[bytes]:
    return [chunk async for chunk in e2e.world.streams.get(run_id, name)]


async def test_a_retried_steps_open_stream_ends_for_a_reader_after_the_run(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(retried, tag)
    assert await run.result(timeout=30) == "ok"
    assert ATTEMPTS[tag] == 2
    chunks = await asyncio.wait_for(read_all(e2e, run.run_id, "default"), 2.0)  # the bound: 2 s
    assert chunks == [b"attempt 1\n", BIG.encode(), b"attempt 2\n"]
    info = await e2e.world.streams.get_info(run.run_id, "default")
    assert (info.tail_index, info.done) == (2, True)


async def test_cancel_ends_the_runs_streams_and_closes_its_hooks(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    token = f"run-end:{tag}"
    run = await e2e.start(waits, tag)
    await e2e.hook_ready(token, run)
    reader = asyncio.create_task(read_all(e2e, run.run_id, "progress"))
    await asyncio.sleep(0.05)
    assert not reader.done()
    assert [h.status for h in (await e2e.world.hooks.list(run.run_id)).data] == ["open"]

    await e2e.client.cancel(run.run_id, reason="customer left")

    assert await asyncio.wait_for(reader, 15) == [f"{tag}: started\n".encode()]
    assert (await e2e.world.streams.get_info(run.run_id, "progress")).done
    assert (await e2e.world.hooks.list(run.run_id)).data == []
    with pytest.raises(HookClosedError) as closed:
        await e2e.client.resume_hook(token, {"approved": True})
    assert (closed.value.run_id, closed.value.run_status) == (run.run_id, "cancelled")
    assert f"run {run.run_id} ended (cancelled)" in str(closed.value)
    with pytest.raises(RunGoneError):  # what a caller catching the old error still catches
        await e2e.client.fail_hook(token, "too late")


async def test_a_hook_of_a_completed_run_says_completed(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    token = f"run-end:{tag}"
    run = await e2e.start(first_payload, tag)
    await e2e.hook_ready(token, run)
    await e2e.client.resume_hook(token, {"big": BIG})
    assert await run.result(timeout=30) == {"big": BIG}
    with pytest.raises(HookClosedError) as closed:
        await e2e.client.resume_hook(token, "again")
    assert closed.value.run_status == "completed"
