"""``world.streams`` of the in-memory World: the contract's Streamer over ``stream_store``'s records.

``write``/``write_multi`` append at once (durable on return, a call's chunks contiguous, calls in call order)
and then yield to the event loop once, so a writer in a tight loop does not starve readers and closers.
Write sessions (``stream_session.py``) flush as soon as a writer's chunks are in sequence unless given a
window; live readers (``stream_reader.py``) wake on every append or close. State lives in
``stream_store.py``; storage is asked only for a run's status (``storage.run_status``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..world.clock import Clock
from ..world.cursors import check_limit
from ..world.ids import check_entity_id
from ..world.limits import DEFAULT_MAX_VALUE_BYTES
from ..world.pages import CHUNKS_PAGE_BYTES, MAX_CHUNKS_PAGE
from ..world.rules.streams import end_state
from ..world.streams import (
    FRAME_BYTES,
    Chunk,
    StreamChunk,
    StreamChunkPage,
    StreamInfo,
    check_start_index,
    check_stream,
    chunks_of,
    page_cursor,
    page_start,
)
from .stream_reader import MemoryLiveStream
from .stream_session import MemoryWriteSession, OpenSessions
from .stream_store import MemoryStreamStore, RunStatuses

RUN_CHECK_INTERVAL = 0.1


class MemoryStreams:
    stream_flush_interval_ms: int
    """The contract's streamFlushIntervalMs: a write session's window. 0: flush as soon as chunks are in order
    (memory has no per-commit cost to spread)."""

    def __init__(self, clock: Clock, storage: RunStatuses, *, flush_interval_ms: int = 0,
                 run_check_interval: float = RUN_CHECK_INTERVAL,
                 max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> None:
        """``max_value_bytes``: a chunk and its frame are at most this many bytes."""
        self.clock = clock  # streams keep no time; taken for symmetry with the other parts of the World
        self.store = MemoryStreamStore(storage, max_chunk_bytes=max_value_bytes - FRAME_BYTES)
        self.stream_flush_interval_ms = flush_interval_ms
        self.run_check_interval = run_check_interval
        self.sessions = OpenSessions()
        self._closed = False

    async def write(self, run_id: str, name: str, chunk: Chunk) -> None:
        await self.write_multi(run_id, name, [chunk])

    async def write_multi(self, run_id: str, name: str, chunks: Sequence[Chunk]) -> None:
        """Append the chunks in order and contiguously. Closed stream: ``EntityConflictError``; finished run:
        ``RunGoneError``; unknown run: ``RunNotFoundError``."""
        check_stream(run_id, name)
        data = chunks_of(chunks)
        if data:
            self.store.append(run_id, name, data)
            await asyncio.sleep(0)

    async def close(self, run_id: str, name: str) -> None:
        """End the stream, after the chunks the write sessions of it hold are flushed."""
        check_stream(run_id, name)
        await self.sessions.flush(run_id, name)
        self.store.close(run_id, name)

    def get(self, run_id: str, name: str, start_index: int = 0) -> MemoryLiveStream:
        """``async for chunk in streams.get(...)``; ``await`` it first to fix a negative start now."""
        check_stream(run_id, name)
        check_start_index(start_index)
        return MemoryLiveStream(self.store, run_id, name, start_index, run_check_interval=self.run_check_interval,
                                closed=lambda: self._closed)

    async def get_chunks(self, run_id: str, name: str, *, limit: int = 100,
                         cursor: str | None = None) -> StreamChunkPage:
        """A snapshot page from the cursor (or the start); the cursor always points after the page."""
        check_stream(run_id, name)
        check_limit(limit, MAX_CHUNKS_PAGE)
        start = page_start(cursor)
        count, done = await self._end_state(run_id, name)
        state = self.store.get(run_id, name)
        chunks = state.chunks[:count] if state is not None else []
        stop = min(len(chunks), start + limit)
        end, size = start, 0
        while end < stop and (end == start or size < CHUNKS_PAGE_BYTES):
            size += len(chunks[end])
            end += 1
        return StreamChunkPage(
            data=[StreamChunk(index=i, data=chunks[i]) for i in range(start, end)],
            cursor=page_cursor(max(start, end)), has_more=max(start, end) < len(chunks), done=done,
        )

    async def get_info(self, run_id: str, name: str) -> StreamInfo:
        """The tail index and ``done``: closed, or its run has ended (``world/rules/streams.py``)."""
        check_stream(run_id, name)
        count, done = await self._end_state(run_id, name)
        return StreamInfo(tail_index=count - 1, done=done)

    async def _end_state(self, run_id: str, name: str) -> tuple[int, bool]:
        async def meta() -> tuple[int, bool]:
            return self.store.meta(run_id, name)

        async def status() -> str | None:
            return self.store.run_status(run_id)

        return await end_state(meta, status)

    async def list(self, run_id: str) -> list[str]:
        check_entity_id(run_id, "runId")
        return self.store.names(run_id)

    def create_write_session(self, run_id: str, name: str, writer_id: str, *, first_seq: int = 0,
                             flush_interval: float | None = None) -> MemoryWriteSession:
        """A writer's session: ``write(chunk_seq, chunks)`` in this writer's own sequence (0, 1, 2, ... from
        ``first_seq``; out-of-order calls wait for the gap); ``close()`` ends the stream."""
        check_stream(run_id, name)
        check_entity_id(writer_id, "writerId")
        interval = self.stream_flush_interval_ms / 1000 if flush_interval is None else flush_interval
        return MemoryWriteSession(self.store, run_id, name, writer_id, first_seq=first_seq,
                                  flush_interval=interval, registry=self.sessions)

    def wake_run(self, run_id: str) -> None:
        """Tell live readers of the run to re-read its status now (call it when the run ended, so they end at
        once instead of at their next ``run_check_interval``)."""
        self.store.wake_run(run_id)

    async def aclose(self) -> None:
        """End every live reader (they stop as if their streams were closed)."""
        self._closed = True
        self.store.wake_all()

