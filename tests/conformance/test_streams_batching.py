"""Streams batch by themselves: chunks written within the window share one S3 object and one commit, a live
reader sees them at most a window (plus the flush) later, closing and a step's end flush them, each writer's
order holds under concurrency, and a failed flush surfaces to its writer.

They run on both emulators and in memory (``any_world_per_module``). Requests are counted with the AWS
World's request counters (``world.stats``); the in-memory World makes none, so there only the rules are
checked. Its sessions flush as soon as chunks are in order unless a window is asked for, so the tests about a
window set one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
from botocore.exceptions import ClientError

from awsworld.authoring.step_context import StepContext, StepMetadata, StreamWriter
from awsworld.aws import AWSWorld
from awsworld.aws.streams.streams import StreamsAPI, configured_flush_ms
from awsworld.world import EntityConflictError

from .conftest import is_memory
from .helpers import new_run

S = "strm_batch"
INJECTED = ClientError({"Error": {"Code": "AccessDenied", "Message": "injected"}}, "PutObject")


@pytest.fixture
def world(any_world_per_module: Any) -> Any:
    return any_world_per_module


@pytest.fixture
async def run_id(world: Any) -> str:
    return await new_run(world, start=True)


@pytest.fixture
async def broken_s3(world: Any) -> AsyncIterator[tuple[Any, dict[str, int]]]:
    """A World on the same table and bucket whose S3 PUTs fail while ``state["fail"]`` is above zero; in
    memory, the World itself, whose appends fail the same way meanwhile."""
    state = {"fail": 0, "failed": 0}

    def failing() -> None:
        if state["fail"] > 0:
            state["fail"] -= 1
            state["failed"] += 1
            raise INJECTED

    if is_memory(world):
        store = world.streams.store
        append = store.append

        def failing_append(*args: Any) -> int:
            failing()
            return append(*args)

        store.append = failing_append
        yield world, state
        del store.append
        return

    def put_object(model: Any, **_: Any) -> None:
        if model.name == "PutObject":
            failing()

    broken = AWSWorld(world.config)
    broken.clients.register_handler("before-call.s3", put_object)
    yield broken, state
    await broken.close()


def reader_streams(world: Any) -> Any:
    """Streams whose live readers notice a new chunk within 20 ms (the in-memory World's are woken at once)."""
    return world.streams if is_memory(world) else StreamsAPI(world.clients, poll_interval=0.01,
                                                             max_poll_interval=0.02)


def commits(world: AWSWorld) -> tuple[int, int]:
    """(S3 PUTs, DynamoDB transactions) since the last reset."""
    return world.stats.requests["s3.PutObject"], world.stats.requests["dynamodb.TransactWriteItems"]


async def snapshot(world: Any, run_id: str, name: str = S) -> list[bytes]:
    chunks: list[bytes] = []
    cursor = None
    while True:
        page = await world.streams.get_chunks(run_id, name, limit=1000, cursor=cursor)
        assert [c.index for c in page.data] == list(range(len(chunks), len(chunks) + len(page.data))), "dense"
        chunks += [c.data for c in page.data]
        cursor = page.cursor
        if not page.has_more:
            return chunks


def step_context(world: Any, run_id: str) -> StepContext:
    return StepContext(world, StepMetadata(run_id, "step_batching", "batching", 1, None))


def test_the_window_is_configurable() -> None:
    assert configured_flush_ms({}) == 50
    assert configured_flush_ms({"AWSWORLD_STREAM_FLUSH_MS": "120"}) == 120
    assert configured_flush_ms({"AWSWORLD_STREAM_FLUSH_MS": "0"}) == 0


async def test_a_step_writing_100_chunks_one_await_at_a_time_makes_one_commit(world: Any, run_id: str) -> None:
    context = step_context(world, run_id)

    async def body() -> str:
        writer = context.writer(S)
        for i in range(100):
            await writer.write(f"token {i:>3} " + "x" * 90)
        return "done"

    if not is_memory(world):
        world.stats.reset()
    assert await context.run(body()) == "done"
    if not is_memory(world):
        assert commits(world) == (1, 1), "100 writes within the window are one object and one commit"
    assert await snapshot(world, run_id) == [(f"token {i:>3} " + "x" * 90).encode() for i in range(100)]


async def test_a_slow_writer_commits_once_a_window(world: Any, run_id: str) -> None:
    writer = StreamWriter(world, run_id, S)
    if not is_memory(world):
        world.stats.reset()
    started = time.monotonic()
    for i in range(60):
        await writer.write(f"{i};")
        await asyncio.sleep(0.005)
    await writer.flush()
    elapsed = time.monotonic() - started
    if not is_memory(world):
        puts, transactions = commits(world)
        assert puts == transactions
        assert transactions <= elapsed / 0.05 + 2, f"{transactions} commits in {elapsed:.2f}s with a 50 ms window"
    assert await snapshot(world, run_id) == [f"{i};".encode() for i in range(60)]


async def test_a_live_reader_sees_a_chunk_within_one_window(world: Any, run_id: str) -> None:
    window = 0.3
    live = await reader_streams(world).get(run_id, S)
    session = world.streams.create_write_session(run_id, S, "wrtr_window", flush_interval=window)
    seen: list[tuple[bytes, float]] = []

    async def read() -> None:
        async for chunk in live:
            seen.append((chunk, time.monotonic()))
            if len(seen) == 3:
                return

    reading = asyncio.create_task(read())
    if not is_memory(world):
        world.stats.reset()
    written = time.monotonic()
    await session.write(0, ["a"])
    await session.write(1, ["b"])
    assert await snapshot(world, run_id) == [], "buffered: not durable before the window ends"
    await asyncio.sleep(window + 0.1)
    late = time.monotonic()
    await session.write(2, ["c"])
    await asyncio.wait_for(reading, 10)
    assert [c for c, _ in seen] == [b"a", b"b", b"c"]
    assert window * 0.8 <= seen[0][1] - written <= window + 1.5, "one window, plus the flush and a poll"
    assert seen[2][1] - late <= window + 1.5
    if not is_memory(world):
        assert commits(world) == (2, 2), "a and b shared a commit; c had its own"
    await session.dispose()


async def test_every_chunk_is_seen_within_a_window_under_steady_writes(world: Any, run_id: str) -> None:
    window = 0.1
    live = await reader_streams(world).get(run_id, S)
    session = world.streams.create_write_session(run_id, S, "wrtr_steady", flush_interval=window)
    count = 80
    written: list[float] = []
    seen: list[float] = []

    async def read() -> None:
        async for _ in live:
            seen.append(time.monotonic())
            if len(seen) == count:
                return

    reading = asyncio.create_task(read())
    if not is_memory(world):
        world.stats.reset()
    for seq in range(count):
        written.append(time.monotonic())
        await session.write(seq, [f"{seq}"])
        await asyncio.sleep(0.01)
    await asyncio.wait_for(reading, 20)
    lag = max(s - w for s, w in zip(seen, written, strict=True))
    assert lag <= window + 1.5, f"a chunk took {lag:.2f}s to reach a live reader"
    if not is_memory(world):
        _, transactions = commits(world)
        assert transactions <= (written[-1] - written[0]) / window + 3
    await session.close()


async def test_close_flushes_first(world: Any, run_id: str) -> None:
    session = world.streams.create_write_session(run_id, S, "wrtr_close", flush_interval=60)
    for seq in range(5):
        await session.write(seq, [f"{seq}"])
    if not is_memory(world):
        world.stats.reset()
    await session.close()
    if not is_memory(world):
        assert commits(world) == (1, 1)
    assert await snapshot(world, run_id) == [b"0", b"1", b"2", b"3", b"4"]
    assert (await world.streams.get_info(run_id, S)).done


async def test_closing_the_stream_flushes_this_process_sessions(world: Any, run_id: str) -> None:
    one = world.streams.create_write_session(run_id, S, "wrtr_one", flush_interval=60)
    two = world.streams.create_write_session(run_id, S, "wrtr_two", flush_interval=60)
    await one.write(0, ["one"])
    await two.write(0, ["two"])
    await world.streams.close(run_id, S)  # the plain close, not a session's
    assert sorted(await snapshot(world, run_id)) == [b"one", b"two"]
    await two.close()  # and a session's close flushes the other sessions of the stream too
    with pytest.raises(EntityConflictError):
        await one.write(1, ["after the end"])
        await one.flush()


async def test_a_step_end_flushes_its_writers(world: Any, run_id: str) -> None:
    context = step_context(world, run_id)

    async def body() -> None:
        await context.writer(S).write("first")
        await context.writer("strm_other").write_many(["a", "b"])

    world.streams.stream_flush_interval_ms = 60_000
    try:
        await context.run(body())
    finally:
        world.streams.stream_flush_interval_ms = 0 if is_memory(world) else configured_flush_ms()
    assert await snapshot(world, run_id) == [b"first"]
    assert await snapshot(world, run_id, "strm_other") == [b"a", b"b"]

    retried = step_context(world, run_id)  # another attempt: a context each, as the step runner makes them

    async def failing() -> None:
        await retried.writer(S).write("before the error")
        raise ValueError("the body failed")

    with pytest.raises(ValueError):
        await retried.run(failing())
    assert (await snapshot(world, run_id))[-1] == b"before the error", "flushed even when the body raised"


async def test_each_writer_keeps_its_order_under_concurrency(world: Any, run_id: str) -> None:
    writers = 4
    per_writer = 40

    async def session_writer(index: int) -> None:
        session = world.streams.create_write_session(run_id, S, f"wrtr_c{index}", flush_interval=0.01)
        for n in range(per_writer):
            await session.write(n, [f"s{index}:{n}"])
            await asyncio.sleep(0.001 * ((n * 7 + index) % 4))
        await session.dispose()

    async def plain_writer(index: int) -> None:
        for n in range(per_writer):
            await world.streams.write_multi(run_id, S, [f"p{index}:{n}:0", f"p{index}:{n}:1"])

    shared = StreamWriter(world, run_id, S)
    await asyncio.gather(*(session_writer(i) for i in range(writers)), *(plain_writer(i) for i in range(2)),
                         *(shared.write(f"w:{n}") for n in range(per_writer)))
    await shared.flush()
    final = [c.decode() for c in await snapshot(world, run_id)]
    assert len(final) == writers * per_writer + 2 * per_writer * 2 + per_writer
    for index in range(writers):
        assert [c for c in final if c.startswith(f"s{index}:")] == [f"s{index}:{n}" for n in range(per_writer)]
    for index in range(2):
        mine = [c for c in final if c.startswith(f"p{index}:")]
        assert mine == [f"p{index}:{n}:{p}" for n in range(per_writer) for p in range(2)]
        for at, chunk in enumerate(final):  # every write_multi landed whole and contiguous
            if chunk.startswith(f"p{index}:") and chunk.endswith(":0"):
                assert final[at + 1] == chunk[:-1] + "1"
    assert [c for c in final if c.startswith("w:")] == [f"w:{n}" for n in range(per_writer)], "call order"


async def test_concurrent_plain_writes_share_a_commit_and_are_durable_on_return(world: AWSWorld,
                                                                               run_id: str) -> None:
    if not is_memory(world):
        world.stats.reset()
    await asyncio.gather(*(world.streams.write(run_id, S, f"{i}") for i in range(50)))
    assert (await world.streams.get_info(run_id, S)).tail_index == 49, "every write was durable when it returned"
    if not is_memory(world):
        puts, transactions = commits(world)
        assert puts == transactions <= 3, f"50 concurrent writes took {transactions} commits"
    assert await snapshot(world, run_id) == [f"{i}".encode() for i in range(50)], "in the order of the calls"


async def test_a_failed_flush_surfaces_to_the_writer(broken_s3: tuple[Any, dict[str, int]],
                                                      run_id: str) -> None:
    broken, state = broken_s3
    session = broken.streams.create_write_session(run_id, S, "wrtr_err", flush_interval=0.02)
    state["fail"] = 100
    await session.write(0, ["lost"])  # accepted; its flush fails in the background
    for _ in range(200):  # (the flush is due after 0.02 s; a new World's first S3 call builds its client first)
        if state["failed"]:
            break
        await asyncio.sleep(0.05)
    assert state["failed"] >= 1
    # The PUT failed; the flush that made it is over a moment later (the error travels back from the SDK's thread):
    # until then a write is accepted, and from then on every call raises the flush's error.
    for seq in range(1, 201):
        try:
            await session.write(seq, ["next"])
        except ClientError as error:
            assert "injected" in str(error)
            break
        await asyncio.sleep(0.05)
    else:
        raise AssertionError("no write raised the failed flush's error")
    with pytest.raises(ClientError, match="injected"):
        await session.flush()
    with pytest.raises(ClientError, match="injected"):
        await session.close()
    assert not (await broken.streams.get_info(run_id, S)).done, "a failed session does not end the stream"
    state["fail"] = 0


async def test_a_failed_flush_fails_the_step(broken_s3: tuple[Any, dict[str, int]], run_id: str) -> None:
    broken, state = broken_s3
    broken.streams.stream_flush_interval_ms = 60_000  # the chunks are still buffered when the body returns
    try:
        await _a_failed_flush_fails_the_step(broken, state, run_id)
    finally:
        broken.streams.stream_flush_interval_ms = configured_flush_ms() if not is_memory(broken) else 0


async def _a_failed_flush_fails_the_step(broken: Any, state: dict[str, int], run_id: str) -> None:
    context = step_context(broken, run_id)

    async def body() -> str:
        await context.writer(S).write("not durable")
        state["fail"] = 100
        return "finished"

    with pytest.raises(ClientError, match="injected"):
        await context.run(body())  # never a recorded end whose chunks are not durable

    other = step_context(broken, run_id)

    async def raising() -> None:
        await other.writer(S).write("not durable either")
        raise ValueError("the body failed")

    with pytest.raises(ValueError) as raised:
        await other.run(raising())
    assert any("not durable" in note for note in raised.value.__notes__)
    state["fail"] = 0


async def test_a_failed_shared_commit_fails_every_caller(broken_s3: tuple[Any, dict[str, int]],
                                                         run_id: str) -> None:
    broken, state = broken_s3
    state["fail"] = 100
    outcomes = await asyncio.gather(*(broken.streams.write(run_id, S, f"{i}") for i in range(10)),
                                    return_exceptions=True)
    assert all(isinstance(o, ClientError) for o in outcomes)
    state["fail"] = 0
    await broken.streams.write(run_id, S, "after")
    assert await snapshot(broken, run_id) == [b"after"]
