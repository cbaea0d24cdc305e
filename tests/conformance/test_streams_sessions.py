"""Write sessions: a writer's own sequence numbers order its chunks; flushes batch them; close is durable.

On moto, LocalStack and in memory (``stream_world``); how few commits a burst takes is checked on the AWS World only.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from awsworld.world import EntityConflictError, InvalidInputError, RunGoneError

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
