"""Streams: writes, reads, snapshots, live reads, errors.

The contract's rules run on the AWS World (S3 with a DynamoDB chunk index, on moto and on LocalStack) and in
memory (``stream_world``); how the AWS World lays chunks out in S3 and what it asks AWS is checked on the AWS
World alone, on both SQS/S3 engines (``sqs_s3_world_per_module``).
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import struct
from typing import Any

import pytest

from awsworld.aws import AWSWorld
from awsworld.aws.streams.streams import StreamsAPI
from awsworld.world import (
    EntityConflictError,
    InvalidInputError,
    RunGoneError,
    RunNotFoundError,
    StreamChunkPage,
)
from awsworld.world.pages import CHUNKS_PAGE_BYTES

from .conftest import is_memory
from .helpers import new_run, run_cancelled, run_completed, run_failed

S = "strm_out"


async def collect(streams: Any, run_id: str, name: str, start: int = 0, timeout: float = 10) -> list[bytes]:
    async def read() -> list[bytes]:
        return [chunk async for chunk in streams.get(run_id, name, start)]

    return await asyncio.wait_for(read(), timeout)


async def all_pages(streams: Any, run_id: str, name: str, limit: int) -> list[StreamChunkPage]:
    pages = [await streams.get_chunks(run_id, name, limit=limit)]
    while pages[-1].has_more:
        pages.append(await streams.get_chunks(run_id, name, limit=limit, cursor=pages[-1].cursor))
    return pages


def checking_streams(world: Any) -> Any:
    """Streams whose idle live readers re-read the run's status every 0.2 s at most (the AWS World's default
    is 2 s; the in-memory World's 0.1 s)."""
    return world.streams if is_memory(world) else StreamsAPI(world.clients, run_check_interval=0.2)


@pytest.fixture
def world(stream_world: Any) -> Any:
    """Stream tests are isolated by their run ids: they share one World per module (and kind)."""
    return stream_world


@pytest.fixture
async def run_id(world: Any) -> str:
    return await new_run(world, start=True)


@pytest.fixture
async def aws_run_id(sqs_s3_world_per_module: AWSWorld) -> str:
    return await new_run(sqs_s3_world_per_module, start=True)


# -- writing and reading back ----------------------------------------------------------------------------------------


async def test_write_then_read_everything_back(world: Any, run_id: str) -> None:
    streams = world.streams
    assert (await streams.get_info(run_id, S)).model_dump() == {"tailIndex": -1, "done": False}
    await streams.write(run_id, S, "héllo")
    await streams.write(run_id, S, b"\x00\xff")
    await streams.write_multi(run_id, S, ["a", b"b", bytearray(b"c")])
    await streams.write_multi(run_id, S, [])  # nothing to do
    expected = ["héllo".encode(), b"\x00\xff", b"a", b"b", b"c"]

    assert (await streams.get_info(run_id, S)).model_dump() == {"tailIndex": 4, "done": False}
    page = await streams.get_chunks(run_id, S)
    assert [(c.index, c.data) for c in page.data] == list(enumerate(expected))
    assert (page.has_more, page.done) == (False, False)

    await streams.close(run_id, S)
    await streams.close(run_id, S)  # idempotent
    assert (await streams.get_info(run_id, S)).model_dump() == {"tailIndex": 4, "done": True}
    assert await collect(streams, run_id, S) == expected
    assert await collect(streams, run_id, S, 3) == expected[3:]
    assert await streams.list(run_id) == [S]


async def test_get_chunks_pages_with_cursors(world: Any, run_id: str) -> None:
    streams = world.streams
    for n in range(5):  # five segments of three chunks: pages cut across segments
        await streams.write_multi(run_id, S, [f"{n}.{i}" for i in range(3)])
    pages = await all_pages(streams, run_id, S, limit=4)
    assert [len(p.data) for p in pages] == [4, 4, 4, 3]
    assert [c.index for p in pages for c in p.data] == list(range(15))
    assert [c.data for p in pages for c in p.data] == [f"{n}.{i}".encode() for n in range(5) for i in range(3)]
    assert all(not p.done for p in pages)

    # The last cursor points after the tail: later chunks come from it, and `done` once closed.
    await streams.write(run_id, S, "late")
    await streams.close(run_id, S)
    later = await streams.get_chunks(run_id, S, cursor=pages[-1].cursor)
    assert [(c.index, c.data) for c in later.data] == [(15, b"late")]
    assert later.done and not later.has_more
    wire = later.to_wire()
    assert wire["data"] == [{"index": 15, "data": "bGF0ZQ=="}] and wire["hasMore"] is False


async def test_empty_and_closed_stream(world: Any, run_id: str) -> None:
    streams = world.streams
    await streams.close(run_id, "empty")
    assert (await streams.get_info(run_id, "empty")).model_dump() == {"tailIndex": -1, "done": True}
    assert await collect(streams, run_id, "empty") == []
    page = await streams.get_chunks(run_id, "empty")
    assert (page.data, page.has_more, page.done) == ([], False, True)


async def test_negative_start_index_counts_back_from_the_tail(world: Any, run_id: str) -> None:
    streams = world.streams
    await streams.write_multi(run_id, S, [str(i) for i in range(6)])
    reader = await streams.get(run_id, S, -2)  # awaited: the start is fixed now, at tail 5
    await streams.write(run_id, S, "6")
    await streams.close(run_id, S)
    assert [c async for c in reader] == [b"4", b"5", b"6"]
    assert await collect(streams, run_id, S, -100) == [str(i).encode() for i in range(7)]
    assert await collect(streams, run_id, S, -1) == [b"6"]


async def test_list_names_of_a_run(world: Any, run_id: str) -> None:
    other = await new_run(world, start=True)
    for name in ("b", "a", "a.1", "c:d"):
        await world.streams.write(run_id, name, "x")
    await world.streams.write(other, "z", "x")
    assert sorted(await world.streams.list(run_id)) == ["a", "a.1", "b", "c:d"]
    assert await world.streams.list(await new_run(world, start=True)) == []


async def test_write_multi_is_one_object_and_one_commit(sqs_s3_world_per_module: AWSWorld, aws_run_id: str) -> None:
    world, run_id = sqs_s3_world_per_module, aws_run_id
    chunks = [os.urandom(n) for n in range(50)]
    world.stats.reset()
    await world.streams.write_multi(run_id, S, chunks)
    assert world.stats.requests["s3.PutObject"] == 1
    assert world.stats.requests["dynamodb.TransactWriteItems"] == 1
    assert world.stats.total() == 2, "a lone writer knows the tail: no read before the commit"

    s3 = await world.clients.s3()
    listed = await s3.list_objects_v2(Bucket=world.config.bucket_name, Prefix=f"runs/{run_id}/streams/{S}/")
    [obj] = listed["Contents"]
    body = await (await s3.get_object(Bucket=world.config.bucket_name, Key=obj["Key"]))["Body"].read()
    offset, framed = 0, []
    while offset < len(body):  # length-prefixed frames, readable without the index
        (length,) = struct.unpack_from(">I", body, offset)
        framed.append(body[offset + 4 : offset + 4 + length])
        offset += 4 + length
    assert framed == chunks
    assert [c.data for c in (await world.streams.get_chunks(run_id, S, limit=100)).data] == chunks


@pytest.mark.parametrize("total", [1 << 20, 10 << 20], ids=["1MiB", "10MiB"])
async def test_large_streams_round_trip_byte_exact(world: Any, run_id: str, total: int) -> None:
    streams = world.streams
    data = os.urandom(total)
    await streams.write(run_id, S, data[:300_000])                       # one big chunk
    sizes = [1, 65_536, 7, 100_000, 3_000]
    pieces, at = [], 300_000
    while at < total:  # then uneven chunks, in write_multi batches of up to 40
        size = min(sizes[len(pieces) % len(sizes)], total - at)
        pieces.append(data[at : at + size])
        at += size
    for start in range(0, len(pieces), 40):
        await streams.write_multi(run_id, S, pieces[start : start + 40])
    await streams.close(run_id, S)

    read = b"".join(await collect(streams, run_id, S, timeout=60))
    assert len(read) == total and hashlib.sha256(read).digest() == hashlib.sha256(data).digest()
    pages = await all_pages(streams, run_id, S, limit=1000)
    assert b"".join(c.data for p in pages for c in p.data) == data
    assert [c.index for p in pages for c in p.data] == list(range(1 + len(pieces)))


async def test_pages_end_at_the_byte_bound_on_every_world(world: Any, run_id: str) -> None:
    """``get_chunks`` pages hold at least one chunk, then more while under CHUNKS_PAGE_BYTES (8 MiB): the same
    cut on every World (``streams.page_take``), across segments, a sealed chunk's overhead included."""
    streams = world.streams
    sizes = [CHUNKS_PAGE_BYTES - 1000, 500, 500, CHUNKS_PAGE_BYTES + 1, 10, 10]
    chunks = [bytes([65 + i]) * size for i, size in enumerate(sizes)]
    await streams.write(run_id, S, chunks[0])  # segments [0], [1..3], [4..5]: pages cut inside the second
    await streams.write_multi(run_id, S, chunks[1:4])
    await streams.write_multi(run_id, S, chunks[4:])

    pages = await all_pages(streams, run_id, S, limit=100)
    # 8 MiB - 500 is under the bound, so chunk 2 joins; 8 MiB is not, so the page ends there. Chunk 3 is over
    # the bound alone and still makes a page; the last two share one.
    assert [[c.index for c in p.data] for p in pages] == [[0, 1, 2], [3], [4, 5]]
    assert [c.data for p in pages for c in p.data] == chunks
    assert [p.has_more for p in pages] == [True, True, False]
    assert len((await streams.get_chunks(run_id, S, limit=2)).data) == 2  # the chunk limit bounds it first
    await streams.close(run_id, S)
    assert await collect(streams, run_id, S, timeout=60) == chunks  # a live reader reads by the same rule


# -- live reads -------------------------------------------------------------------------------------------------------


async def test_live_get_receives_chunks_written_after_it_started(world: Any, run_id: str) -> None:
    streams = world.streams
    await streams.write(run_id, S, "before")
    reader = asyncio.create_task(collect(streams, run_id, S))
    await asyncio.sleep(0.3)
    assert not reader.done()
    for i in range(5):
        await streams.write(run_id, S, f"live {i}")
        await asyncio.sleep(0.05 * i)
    await streams.write_multi(run_id, S, ["x", "y"])
    await asyncio.sleep(0.2)
    assert not reader.done(), "an open stream keeps its reader waiting"
    await streams.close(run_id, S)
    assert await reader == [b"before", *(f"live {i}".encode() for i in range(5)), b"x", b"y"]


async def test_live_get_yields_as_chunks_arrive(world: Any, run_id: str) -> None:
    streams = world.streams
    iterator = streams.get(run_id, S).__aiter__()
    first = asyncio.create_task(iterator.__anext__())
    await asyncio.sleep(0.2)
    await streams.write(run_id, S, "one")
    assert await asyncio.wait_for(first, 3) == b"one", "delivered without waiting for the stream to close"
    await streams.write(run_id, S, "two")
    assert await asyncio.wait_for(iterator.__anext__(), 3) == b"two"


async def test_live_get_ends_when_the_run_finished_without_closing(world: Any, run_id: str) -> None:
    streams = checking_streams(world)
    await streams.write(run_id, S, "last words")
    reader = asyncio.create_task(collect(streams, run_id, S))
    await asyncio.sleep(0.3)
    assert not reader.done()
    await world.events.create(run_id, run_completed())
    assert await asyncio.wait_for(reader, 5) == [b"last words"]


async def test_live_get_of_an_unknown_run_fails_instead_of_hanging(world: Any) -> None:
    streams = checking_streams(world)
    with pytest.raises(RunNotFoundError):
        await collect(streams, "wrun_nobody", S, timeout=5)


# -- errors -----------------------------------------------------------------------------------------------------------


async def test_writing_to_a_closed_stream_is_a_conflict(world: Any, run_id: str) -> None:
    streams = world.streams
    await streams.write(run_id, S, "a")
    await streams.close(run_id, S)
    for write in (streams.write(run_id, S, "b"), streams.write_multi(run_id, S, ["b", "c"])):
        with pytest.raises(EntityConflictError) as raised:
            await write
        assert raised.value.status == 409
    assert (await streams.get_info(run_id, S)).tail_index == 0


async def test_a_refused_write_leaves_no_object_behind(sqs_s3_world_per_module: AWSWorld, aws_run_id: str) -> None:
    world, run_id, streams = sqs_s3_world_per_module, aws_run_id, sqs_s3_world_per_module.streams
    await streams.write(run_id, S, "a")
    await streams.close(run_id, S)
    with pytest.raises(EntityConflictError):
        await streams.write(run_id, S, "b")
    other = StreamsAPI(world.clients)  # no tail hint: learns it from the refusal
    with pytest.raises(EntityConflictError):
        await other.write(run_id, S, "b")
    assert (await streams.get_info(run_id, S)).tail_index == 0
    s3 = await world.clients.s3()
    listed = await s3.list_objects_v2(Bucket=world.config.bucket_name, Prefix=f"runs/{run_id}/streams/")
    assert len(listed["Contents"]) == 1, "refused writes leave no object behind"


@pytest.mark.parametrize("ending", [run_completed(), run_failed(), run_cancelled()], ids=lambda e: e["eventType"])
async def test_writing_to_a_finished_run_is_gone(world: Any, run_id: str, ending: dict[str, Any]) -> None:
    streams = world.streams
    await streams.write(run_id, S, "during")
    await world.events.create(run_id, ending)
    with pytest.raises(RunGoneError) as raised:
        await streams.write(run_id, S, "after")
    assert raised.value.status == 410
    with pytest.raises(RunGoneError):
        await streams.write_multi(run_id, "fresh", ["after"])
    await streams.close(run_id, S)  # finishing a stream is still allowed
    assert (await streams.get_info(run_id, S)).model_dump() == {"tailIndex": 0, "done": True}


async def test_writing_to_an_unknown_run_is_not_found(world: Any) -> None:
    with pytest.raises(RunNotFoundError) as raised:
        await world.streams.write("wrun_missing", S, "x")
    assert raised.value.status == 404


async def test_bad_input_is_400(world: Any, run_id: str) -> None:
    streams, r = world.streams, run_id
    cases: list[tuple[Any, str]] = [
        (streams.write("bad/run", S, "x"), "runId"),
        (streams.write(r, "a#b", "x"), "streamName"),
        (streams.write(r, "a/b", "x"), "streamName"),
        (streams.write(r, "", "x"), "streamName"),
        (streams.write(r, S, 12), "chunks[0]"),  # type: ignore[arg-type]
        (streams.write_multi(r, S, "abc"), "chunks"),
        (streams.write_multi(r, S, ["ok", None]), "chunks[1]"),  # type: ignore[list-item]
        (streams.get_chunks(r, S, limit=0), "limit"),
        (streams.get_chunks(r, S, limit=1001), "limit"),
        (streams.get_chunks(r, S, cursor="garbage!"), "cursor"),
        (streams.get_info(r, "x" * 201), "streamName"),
        (streams.list("no spaces"), "runId"),
    ]
    if not is_memory(world):
        world.stats.reset()
    for call, field in cases:
        with pytest.raises(InvalidInputError) as raised:
            await call
        assert raised.value.field == field
    if not is_memory(world):
        assert world.stats.total() == 0, "nothing was written or read"


def test_get_validates_its_arguments_at_once(world: Any) -> None:
    with pytest.raises(InvalidInputError):
        world.streams.get("wrun_x", S, "0")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        world.streams.get("wrun_x", "a b")
