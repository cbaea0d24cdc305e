"""The in-memory streams on their own: live readers woken by writes (no polling), ended by a close, a
finished run, or the World closing; copies; session windows; the errors storage's run status decides.

The contract rules they share with the AWS World are in tests/conformance/test_streams*.py (``[memory]``).
"""

from __future__ import annotations

import asyncio
import time

import pytest

from awsworld._memory.streams import MemoryStreams
from awsworld.world import EntityConflictError, RunGoneError, RunNotFoundError

RUN = "wrun_memory"
S = "strm_mem"


class Statuses:
    """Stands in for MemoryStorage: only ``run_status`` is asked."""

    def __init__(self) -> None:
        self.status: dict[str, str] = {RUN: "running"}

    def run_status(self, run_id: str) -> str | None:
        return self.status.get(run_id)


@pytest.fixture
def storage() -> Statuses:
    return Statuses()


@pytest.fixture
def streams(storage: Statuses) -> MemoryStreams:
    return MemoryStreams(storage, run_check_interval=30)


async def read_all(streams: MemoryStreams, name: str = S, start: int = 0) -> list[bytes]:
    return [chunk async for chunk in streams.get(RUN, name, start)]


async def test_a_live_reader_is_woken_by_each_write(streams: MemoryStreams) -> None:
    iterator = streams.get(RUN, S).__aiter__()
    first = asyncio.create_task(iterator.__anext__())
    await asyncio.sleep(0.02)
    assert not first.done()
    started = time.monotonic()
    await streams.write(RUN, S, "one")
    assert await asyncio.wait_for(first, 1) == b"one"
    assert time.monotonic() - started < 0.05, "woken by the write, not by a poll"
    second = asyncio.create_task(iterator.__anext__())
    await asyncio.sleep(0.01)
    await streams.close(RUN, S)
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(second, 1)


async def test_a_reader_ends_when_the_run_ends(streams: MemoryStreams, storage: Statuses) -> None:
    await streams.write(RUN, S, "last")
    reader = asyncio.create_task(read_all(streams))
    await asyncio.sleep(0.02)
    storage.status[RUN] = "completed"
    streams.wake_run(RUN)  # at once; otherwise at the next run check
    assert await asyncio.wait_for(reader, 1) == [b"last"]
    assert await read_all(streams) == [b"last"], "a finished run's open stream reads to its end"


async def test_an_idle_reader_rechecks_the_run_on_its_own(storage: Statuses) -> None:
    streams = MemoryStreams(storage, run_check_interval=0.05)
    reader = asyncio.create_task(read_all(streams))
    await asyncio.sleep(0.02)
    storage.status[RUN] = "failed"  # storage tells no one
    assert await asyncio.wait_for(reader, 1) == []


async def test_a_reader_of_an_unknown_run_fails(streams: MemoryStreams) -> None:
    with pytest.raises(RunNotFoundError):
        await asyncio.wait_for(read_all_of(streams, "wrun_nobody"), 1)


async def read_all_of(streams: MemoryStreams, run_id: str) -> list[bytes]:
    return [chunk async for chunk in streams.get(run_id, S)]


async def test_aclose_ends_every_live_reader(streams: MemoryStreams) -> None:
    readers = [asyncio.create_task(read_all(streams, f"s{i}")) for i in range(3)]
    await streams.write(RUN, "s0", "x")
    await asyncio.sleep(0.02)
    await streams.aclose()
    assert await asyncio.wait_for(asyncio.gather(*readers), 1) == [[b"x"], [], []]


async def test_chunks_are_copies(streams: MemoryStreams) -> None:
    data = bytearray(b"abc")
    view = memoryview(bytearray(b"xyz"))
    await streams.write_multi(RUN, S, [data, view])
    data[0] = ord("Z")
    view[0] = ord("Z")
    page = await streams.get_chunks(RUN, S)
    assert [c.data for c in page.data] == [b"abc", b"xyz"]
    assert all(type(c.data) is bytes for c in page.data)


async def test_errors_follow_the_run_and_the_stream(streams: MemoryStreams, storage: Statuses) -> None:
    with pytest.raises(RunNotFoundError):
        await streams.write("wrun_missing", S, "x")
    await streams.close(RUN, S)
    with pytest.raises(EntityConflictError):
        await streams.write(RUN, S, "x")
    storage.status[RUN] = "cancelled"
    with pytest.raises(RunGoneError):
        await streams.write(RUN, "other", "x")
    await streams.close(RUN, "other")  # finishing is not writing
    assert await streams.list(RUN) == ["other", S]


async def test_a_session_flushes_as_soon_as_chunks_are_in_order(streams: MemoryStreams) -> None:
    session = streams.create_write_session(RUN, S, "wrtr_now")
    await session.write(1, ["b"])
    assert (await streams.get_info(RUN, S)).tail_index == -1, "waits for the gap"
    await session.write(0, ["a"])
    assert [c.data for c in (await streams.get_chunks(RUN, S)).data] == [b"a", b"b"]


async def test_a_session_window_is_honoured(streams: MemoryStreams) -> None:
    session = streams.create_write_session(RUN, S, "wrtr_window", flush_interval=0.05)
    await session.write(0, ["a"])
    await session.write(1, ["b"])
    assert (await streams.get_info(RUN, S)).tail_index == -1
    await asyncio.sleep(0.1)
    assert (await streams.get_info(RUN, S)).tail_index == 1, "flushed when the window ran out"
    await session.close()


async def test_a_failed_flush_is_sticky(streams: MemoryStreams, storage: Statuses) -> None:
    session = streams.create_write_session(RUN, S, "wrtr_sticky")
    storage.status[RUN] = "completed"
    await session.write(0, ["lost"])  # accepted; its flush failed
    for call in (session.write(1, ["x"]), session.flush(), session.close()):
        with pytest.raises(RunGoneError):
            await call
