"""Write sessions: a writer's own sequence numbers order its chunks; flushes batch them; close is durable.

On moto, LocalStack and in memory (``stream_world``); how few commits a burst takes is checked on the AWS World only.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from typing import Any

import pytest

from awsworld.world import EntityConflictError, InvalidInputError, PayloadTooLargeError, RunGoneError

from .conftest import is_memory
from .helpers import new_run, run_completed

S = "strm_session"


@pytest.fixture
def world(stream_world: Any) -> Any:
    """Stream tests are isolated by their run ids: they share one World per module (and kind)."""
    return stream_world


@pytest.fixture
async def run_id(world: Any) -> str:
    return await new_run(world, start=True)


async def chunks_of(world: Any, run_id: str, name: str = S) -> list[bytes]:
    page = await world.streams.get_chunks(run_id, name, limit=1000)
    assert not page.has_more
    return [c.data for c in page.data]


async def test_out_of_order_writes_land_in_sequence(world: Any, run_id: str) -> None:
    session = world.streams.create_write_session(run_id, S, "wrtr_a")
    await session.write(2, ["c"])
    await session.write(0, ["a0", "a1"])
    await session.write(4, [b"e"])
    await session.write(1, "b")  # one chunk on its own is accepted too
    await session.write(3, [])
    await session.close()
    # close() returned, so every chunk is durable and the stream is done
    assert await chunks_of(world, run_id) == [b"a0", b"a1", b"b", b"c", b"e"]
    assert (await world.streams.get_info(run_id, S)).done


async def test_a_burst_of_writes_is_batched(world: Any, run_id: str) -> None:
    session = world.streams.create_write_session(run_id, S, "wrtr_burst")
    if not is_memory(world):
        world.stats.reset()
    for seq in range(1000):
        await session.write(seq, [f"{seq};"])
    await session.close()
    if not is_memory(world):  # what it costs on AWS
        commits = world.stats.requests["dynamodb.TransactWriteItems"]
        assert commits <= 5, f"1000 chunks took {commits} commits"
        assert world.stats.requests["s3.PutObject"] == commits
    assert await chunks_of(world, run_id) == [f"{seq};".encode() for seq in range(1000)]


async def test_flush_and_release_make_chunks_durable_without_closing(world: Any, run_id: str) -> None:
    session = world.streams.create_write_session(run_id, S, "wrtr_f", flush_interval=60)
    await session.write(0, ["x"])
    assert await chunks_of(world, run_id) == [], "gathered for the flush interval"
    await session.release()
    assert await chunks_of(world, run_id) == [b"x"]
    await session.write(1, ["y"])
    await session.flush()
    assert await chunks_of(world, run_id) == [b"x", b"y"]
    assert not (await world.streams.get_info(run_id, S)).done


async def test_dispose_flushes_but_does_not_end_the_stream(world: Any, run_id: str) -> None:
    session = world.streams.create_write_session(run_id, S, "wrtr_d")
    await session.write(0, ["kept"])
    await session.dispose()
    await session.dispose()
    assert await chunks_of(world, run_id) == [b"kept"]
    assert not (await world.streams.get_info(run_id, S)).done
    with pytest.raises(EntityConflictError):
        await session.write(1, ["after dispose"])
    await world.streams.write(run_id, S, "others still write")


async def test_close_with_a_missing_sequence_number_fails(world: Any, run_id: str) -> None:
    session = world.streams.create_write_session(run_id, S, "wrtr_gap")
    await session.write(0, ["a"])
    await session.write(2, ["c"])
    with pytest.raises(InvalidInputError) as raised:
        await session.close()
    assert "chunk_seq 1" in raised.value.message
    assert await chunks_of(world, run_id) == [b"a"], "what was in sequence is durable; nothing skipped"
    assert not (await world.streams.get_info(run_id, S)).done


async def test_repeated_or_bad_sequence_numbers(world: Any, run_id: str) -> None:
    session = world.streams.create_write_session(run_id, S, "wrtr_r", first_seq=1)
    await session.write(1, ["a"])
    await session.write(3, ["c"])
    for seq in (1, 3, 0, "2"):
        with pytest.raises(InvalidInputError):
            await session.write(seq, ["again"])  # type: ignore[arg-type]
    await session.write(2, ["b"])
    await session.close()
    await session.close()
    assert await chunks_of(world, run_id) == [b"a", b"b", b"c"]


async def test_session_errors_surface_on_the_next_call(world: Any, run_id: str) -> None:
    await world.streams.close(run_id, S)
    session = world.streams.create_write_session(run_id, S, "wrtr_late")
    await session.write(0, ["too late"])  # accepted into the buffer
    with pytest.raises(EntityConflictError):
        await session.close()
    with pytest.raises(EntityConflictError):
        await session.write(1, ["still too late"])

    finished = await new_run(world, start=True)
    other = world.streams.create_write_session(finished, S, "wrtr_gone")
    await world.events.create(finished, run_completed())
    await other.write(0, ["x"])
    with pytest.raises(RunGoneError):
        await other.flush()


async def test_session_as_a_context_manager(world: Any, run_id: str) -> None:
    async with world.streams.create_write_session(run_id, S, "wrtr_cm") as session:
        await session.write(0, ["a"])
        await asyncio.sleep(0)
    assert (await world.streams.get_info(run_id, S)).model_dump() == {"tailIndex": 0, "done": True}


def test_writer_id_is_validated(world: Any) -> None:
    with pytest.raises(InvalidInputError):
        world.streams.create_write_session("wrun_x", S, "wrtr bad")


@pytest.fixture
async def small_world(world: Any) -> AsyncIterator[Any]:
    """A World on ``world``'s backend (and its streams' encryption) taking values of at most 1,000 bytes."""
    from awsworld._memory import MemoryWorld
    from awsworld.aws import AWSWorld

    small = (MemoryWorld(storage=world.storage, max_value_bytes=1000) if is_memory(world)
             else AWSWorld(dataclasses.replace(world.config, max_value_bytes=1000)))
    yield small
    await small.close()


async def test_a_chunk_over_the_limit_is_refused_by_its_write_and_the_session_goes_on(small_world: Any) -> None:
    """Refused where it is made, before it takes its sequence number: the chunks before it, the session and the
    stream are as they were (it used to be refused by the flush, failing the session and its whole batch)."""
    run_id = await new_run(small_world, start=True)
    session = small_world.streams.create_write_session(run_id, S, "wrtr_big", flush_interval=60.0)
    await session.write(0, [b"before"])
    with pytest.raises(PayloadTooLargeError):
        await session.write(1, [b"x" * 997])  # with its 4-byte frame, one byte past the limit
    await session.write(1, [b"y" * 996])  # the largest chunk, under the same number
    await session.close()
    assert await chunks_of(small_world, run_id) == [b"before", b"y" * 996]
    with pytest.raises(PayloadTooLargeError):  # a plain write is refused the same way, and writes nothing
        await small_world.streams.write(run_id, "plain", b"x" * 997)
    assert not (await small_world.streams.get_chunks(run_id, "plain")).data
