"""The contract's Streamer, written once: every public ``world.streams`` method, its argument checks and its
sequence of steps, over a few primitives each World implements.

Both Worlds answer alike because they run this code: a call checks its arguments in the same order (so the same
bad input gets the same ``InvalidInputError``), ``close`` flushes this process's write sessions of the stream
before it ends it, ``get_info`` and ``get_chunks`` take the stream's end from ``rules.streams.end_state``, and
a page holds what ``streams.page_take`` allows. What is a World's own is the storage below: how an append
becomes durable (one synchronous step in memory; an S3 object and a DynamoDB commit, shared by concurrent
writers, on AWS), how chunks are read, how a live reader waits and how a write session flushes. The shape is
DBOS's ``SystemDatabase``: the rules in the base class, the engine's details in thin subclasses.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Generic, Protocol, TypeVar

from ..cursors import check_limit
from ..ids import check_entity_id
from ..pages import MAX_CHUNKS_PAGE
from ..rules.streams import LiveReader, end_state
from ..streams import (
    Chunk,
    StreamChunk,
    StreamChunkPage,
    StreamInfo,
    check_chunk_sizes,
    check_start_index,
    check_stream,
    chunks_of,
    max_chunk_bytes,
    page_cursor,
    page_start,
)
from .write_sessions import OrderedWriteSession, SessionRegistry


class StreamRecords(Protocol):
    """Where a World keeps its streams (a dict in memory; DynamoDB's meta items on AWS): what ``Streamer`` closes
    and reads through, the same calls in every World."""

    async def close(self, run_id: str, name: str) -> None:
        """Mark the stream done (idempotent; allowed on a finished run and on a stream never written, which it
        creates)."""
        ...

    async def meta(self, run_id: str, name: str) -> tuple[int, bool]:
        """The stream's (chunk count, closed flag) now; (0, False) for a stream never written."""
        ...

    async def run_status(self, run_id: str) -> str | None:
        """The run's status now; None when there is no such run."""
        ...

    async def names(self, run_id: str) -> list[str]:
        """The run's stream names in name order."""
        ...


ReaderT = TypeVar("ReaderT", bound=LiveReader)
SessionT = TypeVar("SessionT", bound=OrderedWriteSession)
StoreT = TypeVar("StoreT", bound=StreamRecords)


class Streamer(ABC, Generic[ReaderT, SessionT, StoreT]):
    """``world.streams`` of a World, over its ``store`` (``StreamRecords``); a subclass gives how chunks are
    appended and read, how a live reader waits and how a session flushes (the abstract ``_`` methods below)."""

    stream_flush_interval_ms: int
    """The contract's streamFlushIntervalMs: how long a write session gathers chunks before one flush."""

    def __init__(self, store: StoreT, *, flush_interval_ms: int, max_value_bytes: int) -> None:
        """``max_value_bytes``: the World's largest value; a chunk and its frame fit it (``max_chunk_bytes``)."""
        self.store = store
        self.stream_flush_interval_ms = flush_interval_ms
        self.sessions = SessionRegistry[SessionT]()
        """This process's open write sessions, which ``close`` flushes before it ends a stream."""
        self.max_chunk_bytes = max_chunk_bytes(max_value_bytes)

    # -- what a World gives ----------------------------------------------------------------------------------

    @abstractmethod
    async def _append(self, run_id: str, name: str, chunks: list[bytes]) -> None:
        """Append the chunks (at least one, each within ``max_chunk_bytes``) in order and contiguously; return
        when they are durable. Refusals are ``rules.streams.append_refusal``'s."""

    @abstractmethod
    async def _read_page(self, run_id: str, name: str, start: int, stop: int) -> list[bytes]:
        """The chunks from ``start`` below ``stop`` (a bound within the stream's count) that one page holds
        (``streams.page_take``'s rule); none when ``start >= stop``."""

    @abstractmethod
    def _live_reader(self, run_id: str, name: str, start_index: int) -> ReaderT:
        """``get``'s iterator: a ``LiveReader`` on ``_meta``/``_run_status`` with the World's way of waiting."""

    @abstractmethod
    def _write_session(self, run_id: str, name: str, writer_id: str, *, first_seq: int,
                       flush_interval: float) -> SessionT:
        """A write session registered in ``sessions``, taking chunks up to ``max_chunk_bytes``, flushing the
        World's way."""

    # -- the contract ----------------------------------------------------------------------------------------

    async def write(self, run_id: str, name: str, chunk: Chunk) -> None:
        await self.write_multi(run_id, name, [chunk])

    async def write_multi(self, run_id: str, name: str, chunks: Sequence[Chunk]) -> None:
        """Append the chunks in order and contiguously; returns when they are durable. Closed stream:
        ``EntityConflictError``; finished run: ``RunGoneError``; unknown run: ``RunNotFoundError``; a chunk over
        ``max_chunk_bytes``: ``PayloadTooLargeError``, before anything is written (so a call too big for one
        commit fails alone, never a commit it would have shared)."""
        check_stream(run_id, name)
        data = chunks_of(chunks, self.max_chunk_bytes)
        check_chunk_sizes(data, self.max_chunk_bytes)
        if data:
            await self._append(run_id, name, data)

    async def close(self, run_id: str, name: str) -> None:
        """End the stream, after the chunks this process's write sessions of it hold are flushed."""
        check_stream(run_id, name)
        await self.sessions.flush(run_id, name)
        await self.store.close(run_id, name)

    def get(self, run_id: str, name: str, start_index: int = 0) -> ReaderT:
        """``async for chunk in streams.get(...)``; ``await`` it first to fix a negative start now."""
        check_stream(run_id, name)
        check_start_index(start_index)
        return self._live_reader(run_id, name, start_index)

    async def get_chunks(self, run_id: str, name: str, *, limit: int = 100,
                         cursor: str | None = None) -> StreamChunkPage:
        """A snapshot page from the cursor (or the start); the cursor always points after the page. ``done``: the
        stream is closed, or its run has ended."""
        check_stream(run_id, name)
        check_limit(limit, MAX_CHUNKS_PAGE)
        start = page_start(cursor)
        count, done = await self._end_state(run_id, name)
        chunks = await self._read_page(run_id, name, start, min(count, start + limit))
        end = start + len(chunks)
        return StreamChunkPage(
            data=[StreamChunk(index=start + i, data=chunk) for i, chunk in enumerate(chunks)],
            cursor=page_cursor(end), has_more=end < count, done=done,
        )

    async def get_info(self, run_id: str, name: str) -> StreamInfo:
        """The tail index and ``done``: closed, or its run has ended (``world/rules/streams.py``)."""
        check_stream(run_id, name)
        count, done = await self._end_state(run_id, name)
        return StreamInfo(tail_index=count - 1, done=done)

    async def list(self, run_id: str) -> list[str]:
        check_entity_id(run_id, "runId")
        return await self.store.names(run_id)

    def create_write_session(self, run_id: str, name: str, writer_id: str, *, first_seq: int = 0,
                             flush_interval: float | None = None) -> SessionT:
        """A writer's session: ``write(chunk_seq, chunks)`` in this writer's own sequence (0, 1, 2, ... from
        ``first_seq``; out-of-order calls wait for the gap), flushed by the window (``flush_interval`` seconds;
        default: ``stream_flush_interval_ms``); ``close()`` ends the stream."""
        check_stream(run_id, name)
        check_entity_id(writer_id, "writerId")
        interval = self.stream_flush_interval_ms / 1000 if flush_interval is None else flush_interval
        return self._write_session(run_id, name, writer_id, first_seq=first_seq, flush_interval=interval)

    async def _meta(self, run_id: str, name: str) -> tuple[int, bool]:
        return await self.store.meta(run_id, name)

    async def _run_status(self, run_id: str) -> str | None:
        return await self.store.run_status(run_id)

    async def _end_state(self, run_id: str, name: str) -> tuple[int, bool]:
        return await end_state(lambda: self._meta(run_id, name), lambda: self._run_status(run_id))
