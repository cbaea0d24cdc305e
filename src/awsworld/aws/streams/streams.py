"""``world.streams``: the contract's Streamer on S3 objects and a DynamoDB chunk index (see stream_store.py).

A commit (one S3 object and one transaction) costs the same for one chunk or a thousand, so chunks travel in
batches:

- A write session (``create_write_session``, what a step's ``get_writable`` uses) buffers: ``write`` returns
  once accepted and a flush commits everything buffered when the oldest chunk has waited the window
  (``AWSWORLD_STREAM_FLUSH_MS``, 50 ms by default; the contract's ``streamFlushIntervalMs``), at once past a
  size bound, and on flush/release/dispose/close (see stream_session.py).
- ``write``/``write_multi`` have no lifetime to flush into (a caller may write and exit), so they return
  only when their chunks are durable. Concurrent ones on one stream in this process share a commit: a write
  that arrives while a commit is in flight joins the next one (a group commit; a lone writer waits no
  window). Each call's chunks stay contiguous and calls land in the order they were made.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...settings import SETTINGS, Settings
from ...world.cursors import check_limit
from ...world.errors import WorldError
from ...world.ids import check_entity_id
from ...world.pages import MAX_CHUNKS_PAGE
from ...world.rules.streams import end_state
from ...world.streams import (
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
from ..clients import AWSClients
from .stream_reader import ChunkReader, LiveStream
from .stream_session import OpenSessions, WriteSession
from .stream_store import FRAME, MAX_CHUNKS_PER_OBJECT, StreamStore, split_parts

FLUSH_ENV = Settings.stream_flush_ms.env
DEFAULT_FLUSH_MS = Settings.stream_flush_ms.default


def configured_flush_ms(environ: Mapping[str, str] | None = None) -> int:
    """The write window from ``AWSWORLD_STREAM_FLUSH_MS`` (milliseconds, 0 = flush at once), else 50."""
    return (SETTINGS if environ is None else Settings(environ)).stream_flush_ms


class StreamsAPI:
    stream_flush_interval_ms: int
    """The contract's streamFlushIntervalMs: how long a write session gathers chunks before one flush."""

    def __init__(self, clients: AWSClients, *, poll_interval: float = 0.05, max_poll_interval: float = 1.0,
                 run_check_interval: float = 2.0, flush_interval_ms: int | None = None) -> None:
        self.store = StreamStore(clients)
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        self.run_check_interval = run_check_interval
        self.stream_flush_interval_ms = configured_flush_ms() if flush_interval_ms is None else flush_interval_ms
        self.sessions = OpenSessions()
        self._commits = GroupCommits(self.store, clients.config.max_value_bytes)

    async def write(self, run_id: str, name: str, chunk: Chunk) -> None:
        await self.write_multi(run_id, name, [chunk])

    async def write_multi(self, run_id: str, name: str, chunks: Sequence[Chunk]) -> None:
        """Append the chunks in order and contiguously; returns when they are durable (one S3 object and one
        commit, shared with concurrent writes to the stream; more only past 10,000 chunks or the object size
        cap). Closed stream: ``EntityConflictError``; finished run: ``RunGoneError``."""
        check_stream(run_id, name)
        data = chunks_of(chunks)
        if data:
            await self._commits.append(run_id, name, data)

    async def close(self, run_id: str, name: str) -> None:
        """End the stream, after the chunks this process's write sessions of it hold are flushed."""
        check_stream(run_id, name)
        await self.sessions.flush(run_id, name)
        await self.store.close(run_id, name)

    def get(self, run_id: str, name: str, start_index: int = 0) -> LiveStream:
        """``async for chunk in streams.get(...)``; ``await`` it first to fix a negative start now."""
        check_stream(run_id, name)
        check_start_index(start_index)
        return LiveStream(self.store, run_id, name, start_index, poll_interval=self.poll_interval,
                          max_poll_interval=self.max_poll_interval, run_check_interval=self.run_check_interval)

    async def get_chunks(self, run_id: str, name: str, *, limit: int = 100,
                         cursor: str | None = None) -> StreamChunkPage:
        """A snapshot page from the cursor (or the start); the cursor always points after the page. ``done``: the
        stream is closed, or its run has ended."""
        check_stream(run_id, name)
        check_limit(limit, MAX_CHUNKS_PAGE)
        start = page_start(cursor)
        count, done = await self._end_state(run_id, name)
        reader = ChunkReader(self.store, run_id, name, start)
        chunks = await reader.read(count, max_chunks=limit)
        return StreamChunkPage(
            data=[StreamChunk(index=start + i, data=c) for i, c in enumerate(chunks)],
            cursor=page_cursor(reader.position), has_more=reader.position < count, done=done,
        )

    async def get_info(self, run_id: str, name: str) -> StreamInfo:
        """The tail index and ``done``: closed, or its run has ended (``world/rules/streams.py``)."""
        check_stream(run_id, name)
        count, done = await self._end_state(run_id, name)
        return StreamInfo(tail_index=count - 1, done=done)

    async def _end_state(self, run_id: str, name: str) -> tuple[int, bool]:
        return await end_state(lambda: self.store.meta(run_id, name), lambda: self.store.run_status(run_id))

    async def list(self, run_id: str) -> list[str]:
        check_entity_id(run_id, "runId")
        return await self.store.names(run_id)

    def create_write_session(self, run_id: str, name: str, writer_id: str, *, first_seq: int = 0,
                             flush_interval: float | None = None) -> WriteSession:
        """A writer's session: ``write(chunk_seq, chunks)`` in this writer's own sequence (0, 1, 2, ... from
        ``first_seq``; out-of-order calls wait for the gap), flushed in batches; ``close()`` ends the stream."""
        check_stream(run_id, name)
        check_entity_id(writer_id, "writerId")
        interval = self.stream_flush_interval_ms / 1000 if flush_interval is None else flush_interval
        return WriteSession(self.store, run_id, name, writer_id, first_seq=first_seq, flush_interval=interval,
                            registry=self.sessions)


@dataclass
class _Batch:
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def __post_init__(self) -> None:  # an outcome no caller stayed for is not an "unretrieved" error
        self.done.add_done_callback(lambda done: done.cancelled() or done.exception())

    def fits(self, chunks: list[bytes], max_bytes: int) -> bool:
        framed = sum(FRAME.size + len(c) for c in chunks)
        return len(self.chunks) + len(chunks) <= MAX_CHUNKS_PER_OBJECT and self.size + framed <= max_bytes

    def add(self, chunks: list[bytes]) -> None:
        self.chunks.extend(chunks)
        self.size += sum(FRAME.size + len(c) for c in chunks)


class GroupCommits:
    """Durable appends that share commits: per stream, one commit in flight; writes arriving meanwhile gather
    into the next batch (a call too big for one object gets a batch of its own, split as before)."""

    def __init__(self, store: StreamStore, max_bytes: int) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self._queues: dict[tuple[str, str], deque[_Batch]] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def append(self, run_id: str, name: str, chunks: list[bytes]) -> None:
        split_parts(chunks, self.max_bytes)  # a chunk over the size cap fails its own call, not the batch
        key = (run_id, name)
        queue = self._queues.get(key)
        running = self._tasks.get(key)
        if queue is None or running is None or running.done() or running.get_loop() is not asyncio.get_running_loop():
            queue = self._queues[key] = deque()  # (a commit left on a loop that is gone never blocks this one)
            self._tasks[key] = asyncio.create_task(self._commit_all(key, queue),
                                                   name=f"awsworld-stream-commit-{name}")
        if not queue or not queue[-1].fits(chunks, self.max_bytes):
            queue.append(_Batch())
        batch = queue[-1]
        batch.add(chunks)
        await asyncio.wait({batch.done})  # a cancelled caller does not cancel the others' commit
        batch.done.result()

    async def _commit_all(self, key: tuple[str, str], queue: deque[_Batch]) -> None:
        await asyncio.sleep(0)  # let the writes of this turn of the loop join the first batch
        batch: _Batch | None = None
        try:
            while queue:
                batch = queue.popleft()
                try:
                    await self.store.append(*key, batch.chunks)
                except Exception as error:
                    batch.done.set_exception(error)
                else:
                    batch.done.set_result(None)
        finally:
            if self._queues.get(key) is queue:
                del self._queues[key], self._tasks[key]
            for left in [batch, *queue] if batch is not None else queue:  # cancelled: no writer may hang
                if not left.done.done():
                    left.done.set_exception(WorldError(f"a commit of stream {key[1]} was cancelled: its chunks "
                                                       "may not be durable"))
