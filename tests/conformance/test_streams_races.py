"""Concurrent writers on one stream: dense indexes, no hole, no partial chunk, no reordering within a writer.

These run on both emulators and in memory (``world``): moto serializes DynamoDB, DynamoDB Local honours
transactions under real contention. Writers are separate AWSWorld instances, which is what separate processes
look like; in memory they are concurrent tasks of one process.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from awsworld.world import EntityConflictError

from .conftest import processes
from .helpers import new_run

S = "strm_race"


@pytest.fixture
def world(any_world: Any) -> Any:
    return any_world


def tagged(chunks: list[bytes]) -> dict[str, list[tuple[int, int]]]:
    """Chunks ``<writer>:<append>:<part>`` grouped by writer, in stream order."""
    by_writer: dict[str, list[tuple[int, int]]] = {}
    for chunk in chunks:
        writer, append, part = chunk.decode().split(":")
        by_writer.setdefault(writer, []).append((int(append), int(part)))
    return by_writer


async def snapshot(world: Any, run_id: str) -> list[bytes]:
    chunks: list[bytes] = []
    cursor = None
    while True:
        page = await world.streams.get_chunks(run_id, S, limit=97, cursor=cursor)
        assert [c.index for c in page.data] == list(range(len(chunks), len(chunks) + len(page.data))), "dense"
        chunks += [c.data for c in page.data]
        cursor = page.cursor
        if not page.has_more:
            return chunks


async def test_two_writers_and_a_live_reader(world: Any) -> None:
    run_id = await new_run(world, start=True)
    appends, parts = 30, 3

    async def writer(w: Any, name: str) -> None:
        for n in range(appends):
            await w.streams.write_multi(run_id, S, [f"{name}:{n}:{p}" for p in range(parts)])

    async with processes(world, 2) as (a, b):
        reader = asyncio.create_task(_read_all(world, run_id))
        await asyncio.gather(writer(a, "A"), writer(b, "B"))
        await world.streams.close(run_id, S)
        live = await asyncio.wait_for(reader, 30)

    final = await snapshot(world, run_id)
    assert live == final, "the live reader saw exactly the committed order"
    assert len(final) == 2 * appends * parts
    groups = tagged(final)
    for name in "AB":
        assert groups[name] == [(n, p) for n in range(appends) for p in range(parts)], "each writer in order"
    for i in range(0, len(final), parts):  # every write_multi landed whole and contiguous
        assert len({c.rsplit(b":", 1)[0] for c in final[i : i + parts]}) == 1
    assert (await world.streams.get_info(run_id, S)).model_dump() == {"tailIndex": len(final) - 1, "done": True}


async def _read_all(world: Any, run_id: str) -> list[bytes]:
    return [chunk async for chunk in world.streams.get(run_id, S)]


async def test_two_write_sessions_with_out_of_order_sequences(world: Any) -> None:
    run_id = await new_run(world, start=True)
    count = 40

    async def session_writer(w: Any, name: str) -> None:
        session = w.streams.create_write_session(run_id, S, f"wrtr_{name}", flush_interval=0.002)
        order = [s + 1 if s % 2 == 0 else s - 1 for s in range(count)]  # 1, 0, 3, 2, ...
        for seq in order:
            await session.write(seq, [f"{name}:{seq}:0"])
            await asyncio.sleep(0.001)
        await session.flush()
        await session.dispose()

    async with processes(world, 2) as (a, b):
        await asyncio.gather(session_writer(a, "A"), session_writer(b, "B"))
    final = await snapshot(world, run_id)
    groups = tagged(final)
    assert groups["A"] == groups["B"] == [(s, 0) for s in range(count)]


async def test_close_racing_writers(world: Any) -> None:
    run_id = await new_run(world, start=True)
    accepted: list[list[bytes]] = [[], []]
    both_writing = asyncio.Event()

    async def writer(w: Any, index: int) -> None:
        for n in range(200):
            chunk = f"{index}:{n}:0".encode()
            try:
                await w.streams.write(run_id, S, chunk)
            except EntityConflictError:
                return
            accepted[index].append(chunk)
            if min(len(a) for a in accepted) >= 20:
                both_writing.set()
        raise AssertionError("the stream was never closed under the writer")

    async def closer(w: Any) -> None:
        await both_writing.wait()  # in the middle of both writers' runs, however fast their writes are
        await w.streams.close(run_id, S)

    async with processes(world, 3) as (a, b, c):
        await asyncio.gather(writer(a, 0), writer(b, 1), closer(c))
    final = await snapshot(world, run_id)
    assert sorted(final) == sorted(accepted[0] + accepted[1]), "every acknowledged write, and nothing else"
    assert [c for c in final if c.startswith(b"0:")] == accepted[0]
    assert (await world.streams.get_info(run_id, S)).done
