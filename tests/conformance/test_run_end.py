"""What a run's end does to what it owns, the same on every World (moto, DynamoDB Local, memory):

- its streams end for readers (``world/rules/streams.py``): a stream its writer never closed reads as closed
  (``get_info``/``get_chunks`` ``done``, a live ``get`` ends once drained) as soon as the run is over, whether
  it completed, failed or was cancelled, and however its chunks were written (a step attempt that failed and
  one that succeeded, each through a write session of its own, none closing the stream);
- its hooks close (``world/rules/hooks.py``): released ones disappear and a resume of their token raises
  ``HookClosedError`` naming the run and how it ended (still a ``HookNotFoundError`` and a ``RunGoneError``);
  a retained one reads ``status="closed"``; the token is free for a new hook at once (unless retained).
"""

from __future__ import annotations

import asyncio
import os

import pytest

from awsworld.world import HookClosedError, HookNotFoundError, RunGoneError

from .helpers import (
    AnyWorld,
    future,
    hook_created,
    hook_disposed,
    module_world,
    new_run,
    on_aws,
    run_cancelled,
    run_completed,
    run_failed,
    step_completed,
    step_created,
    step_retrying,
    step_started,
    unique,
)

module_local_aws, world = module_world()

RUN_ENDS = {"completed": run_completed, "failed": run_failed, "cancelled": run_cancelled}
BIG = 20 * 1024  # above the inline value limit (16 KB): a chunk the size a real step writes


async def read_all(world: AnyWorld, run_id: str, name: str, start: int = 0, timeout: float = 10.0) -> list[bytes]:
    async def read() -> list[bytes]:
        return [chunk async for chunk in world.streams.get(run_id, name, start)]

    return await asyncio.wait_for(read(), timeout)


async def snapshot(world: AnyWorld, run_id: str, name: str) -> tuple[list[bytes], bool]:
    chunks: list[bytes] = []
    cursor = None
    while True:
        page = await world.streams.get_chunks(run_id, name, cursor=cursor)
        chunks.extend(c.data for c in page.data)
        if not page.has_more:
            return chunks, page.done
        cursor = page.cursor


# -- streams -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("end", RUN_ENDS)
async def test_a_stream_left_open_ends_for_every_reader_when_its_run_ends(world: AnyWorld, end: str) -> None:
    run_id = await new_run(world, start=True)
    name = unique("strm")
    big = os.urandom(BIG)
    await world.streams.write_multi(run_id, name, [b"first", big])
    info = await world.streams.get_info(run_id, name)
    assert (info.tail_index, info.done) == (1, False), "open while the run runs"
    live = asyncio.create_task(read_all(world, run_id, name, timeout=30))
    await asyncio.sleep(0.05)
    assert not live.done(), "a live reader waits while the run runs"

    await world.events.create(run_id, RUN_ENDS[end]())

    info = await world.streams.get_info(run_id, name)
    assert (info.tail_index, info.done) == (1, True)
    assert await snapshot(world, run_id, name) == ([b"first", big], True)
    assert await read_all(world, run_id, name, timeout=2) == [b"first", big], "a reader after the end ends at once"
    assert await read_all(world, run_id, name, start=-1, timeout=2) == [big]
    assert await live == [b"first", big], "a reader from before the end ends too, with every chunk"


async def test_a_retried_steps_unclosed_stream_ends_when_the_run_completes(world: AnyWorld) -> None:
    """The ported Vercel example at the World's level: attempt 1 writes through its own session and fails,
    attempt 2 writes through another and succeeds, neither closes the stream; the run completes."""
    run_id = await new_run(world, start=True)
    step_id = unique("step")
    big = os.urandom(BIG)
    await world.events.create(run_id, step_created(step_id))
    await world.events.create(run_id, step_started(step_id))
    first = world.streams.create_write_session(run_id, "default", unique("wrtr"))
    await first.write(0, [b"attempt 1\n"])
    await first.release()  # flushed (as the step runner does before recording the attempt's end), not closed
    await world.events.create(run_id, step_retrying(step_id))
    await world.events.create(run_id, step_started(step_id))
    second = world.streams.create_write_session(run_id, "default", unique("wrtr"))
    await second.write(0, [b"attempt 2\n", big])
    await second.release()
    await world.events.create(run_id, step_completed(step_id, "ok"))
    assert not (await world.streams.get_info(run_id, "default")).done
    await world.events.create(run_id, run_completed("ok"))

    assert await read_all(world, run_id, "default", timeout=2) == [b"attempt 1\n", b"attempt 2\n", big]
    assert (await world.streams.get_info(run_id, "default")).done
    assert await snapshot(world, run_id, "default") == ([b"attempt 1\n", b"attempt 2\n", big], True)


async def test_a_cancelled_runs_stream_ends_and_takes_no_more_chunks(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    session = world.streams.create_write_session(run_id, "progress", unique("wrtr"))
    await session.write(0, [b"10%"])
    await session.flush()
    reader = asyncio.create_task(read_all(world, run_id, "progress", timeout=30))
    await asyncio.sleep(0.05)
    await world.events.create(run_id, run_cancelled("customer left"))
    assert await reader == [b"10%"]
    with pytest.raises(RunGoneError):
        await world.streams.write(run_id, "progress", b"20%")
    assert await snapshot(world, run_id, "progress") == ([b"10%"], True)


async def test_a_closed_stream_and_an_open_one_of_a_running_run_are_unchanged(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    await world.streams.write(run_id, "closed", b"x")
    await world.streams.close(run_id, "closed")
    await world.streams.write(run_id, "open", b"y")
    assert (await world.streams.get_info(run_id, "closed")).done
    assert not (await world.streams.get_info(run_id, "open")).done
    assert await snapshot(world, run_id, "open") == ([b"y"], False)
    assert await read_all(world, run_id, "closed") == [b"x"]


async def test_what_deriving_the_end_costs_a_stream_read_on_aws(world: AnyWorld) -> None:
    """``end_state``'s reads, counted: a closed stream's info is one GetItem, an open one's two (its count, the
    run's status), an open one of an ended run three (the count again, now final). The run's end writes none."""
    aws = on_aws(world)
    if aws is None:
        pytest.skip("counts the AWS World's requests")
    run_id = await new_run(aws, start=True)
    await aws.streams.write(run_id, "closed", b"x")
    await aws.streams.close(run_id, "closed")
    await aws.streams.write(run_id, "open", b"y")

    async def requests_of(name: str) -> int:
        before = aws.stats.total("dynamodb")
        await aws.streams.get_info(run_id, name)
        return aws.stats.total("dynamodb") - before

    assert (await requests_of("closed"), await requests_of("open")) == (1, 2)
    plain = await new_run(aws, start=True)
    ends = []
    for run in (run_id, plain):  # with two streams (one open), and with none: the end costs the same
        before = aws.stats.total()
        await aws.events.create(run, run_completed())
        ends.append(aws.stats.total() - before)
    assert ends[0] == ends[1]
    assert await requests_of("open") == 3


# -- hooks -------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("end", RUN_ENDS)
async def test_a_runs_end_closes_its_hooks_and_a_resume_says_how_it_ended(world: AnyWorld, end: str) -> None:
    run_id = await new_run(world, start=True)
    other = await new_run(world, start=True)
    token, hook_id = unique("tok"), unique("hook")
    await world.events.create(run_id, hook_created(hook_id, token, metadata={"big": "m" * BIG}))
    assert (await world.hooks.get_by_token(token)).status == "open"

    await world.events.create(run_id, RUN_ENDS[end]())

    assert (await world.hooks.list(run_id)).data == []
    with pytest.raises(HookClosedError) as closed:
        await world.hooks.get_by_token(token)
    error = closed.value
    assert (error.run_id, error.run_status, error.status) == (run_id, end, 410)
    assert f"run {run_id} ended ({end})" in str(error)
    assert isinstance(error, HookNotFoundError) and isinstance(error, RunGoneError)
    with pytest.raises(HookNotFoundError):
        await world.hooks.get(hook_id)
    # The token is free at once: a new hook takes it, and then the token is that hook's (live, open).
    taken = await world.events.create(other, hook_created(unique("hook"), token))
    assert taken.event is not None and taken.event.event_type == "hook_created"
    held = await world.hooks.get_by_token(token)
    assert (held.run_id, held.status) == (other, "open")


async def test_a_retained_hook_reads_closed_after_its_run_ends(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    token, hook_id = unique("tok"), unique("hook")
    await world.events.create(run_id, hook_created(hook_id, token, retention_until=future(3600)))
    await world.events.create(run_id, run_cancelled())
    held = await world.hooks.get_by_token(token)
    listed = (await world.hooks.list(run_id)).data
    by_id = await world.hooks.get(hook_id)
    assert (held.run_id, held.status) == (run_id, "closed")
    assert [(h.hook_id, h.status) for h in listed] == [(hook_id, "closed")]
    assert by_id.status == "closed"


async def test_a_disposed_hooks_token_is_simply_not_found(world: AnyWorld) -> None:
    """hook_disposed frees a token at once and forgets it: only a run's end leaves the record of the end."""
    run_id = await new_run(world, start=True)
    token, hook_id = unique("tok"), unique("hook")
    await world.events.create(run_id, hook_created(hook_id, token))
    await world.events.create(run_id, hook_disposed(hook_id))
    await world.events.create(run_id, run_completed())
    with pytest.raises(HookNotFoundError) as missing:
        await world.hooks.get_by_token(token)
    assert not isinstance(missing.value, HookClosedError)


async def test_more_hooks_than_one_commit_releases_all_say_their_run_ended(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    tokens = [unique("tok") for _ in range(33)]  # the AWS World's commit releases 30; the rest right after it
    for i, token in enumerate(tokens):
        await world.events.create(run_id, hook_created(f"{unique('hook')}-{i}", token))
    await world.events.create(run_id, run_failed("boom"))
    for token in (tokens[0], tokens[-1]):
        with pytest.raises(HookClosedError) as closed:
            await world.hooks.get_by_token(token)
        assert closed.value.run_status == "failed"
