"""Write sessions in memory, with the AWS World's semantics (aws/streams/stream_session.py) minus the I/O.

A session orders one writer's chunks by its own sequence numbers (holding out-of-order calls until the gap
fills) and buffers them like a file write: ``write`` returns once accepted, a flush appends everything
buffered. The flush happens when the oldest buffered chunk has waited ``flush_interval`` (0, the in-memory
default: as soon as the writer's chunk is in sequence), at once past ``flush_chunks``/``flush_bytes``, and
on ``flush``/``release``/``dispose``/``close``. A flush is one synchronous append, so flushes land in order.

A failed flush (the stream was closed, the run ended) is never swallowed: it is raised by the next
``write``/``flush``/``release``/``close`` and every later one, because the chunks it held were not kept.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Sequence

from ...world.errors import EntityConflictError, InvalidInputError
from ...world.streams import Chunk, chunk_bytes
from .stream_store import MemoryStreamStore

FLUSH_BYTES = 1024 * 1024
FLUSH_CHUNKS = 1000


class MemoryWriteSession:
    def __init__(self, store: MemoryStreamStore, run_id: str, name: str, writer_id: str, *, first_seq: int = 0,
                 flush_interval: float = 0.0, flush_bytes: int = FLUSH_BYTES, flush_chunks: int = FLUSH_CHUNKS,
                 registry: OpenSessions | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.name = name
        self.writer_id = writer_id
        self.flush_interval = flush_interval
        self.flush_bytes = flush_bytes
        self.flush_chunks = flush_chunks
        self._registry = registry
        self._next_seq = first_seq
        self._waiting: dict[int, list[bytes]] = {}
        self._ready: list[bytes] = []
        self._ready_bytes = 0
        self._timer: asyncio.TimerHandle | None = None
        self._error: BaseException | None = None
        self._state = "open"
        if registry is not None:
            registry.add(self)

    @property
    def next_seq(self) -> int:
        return self._next_seq

    @property
    def pending(self) -> int:
        """Chunks in sequence that are not flushed yet."""
        return len(self._ready)

    async def write(self, chunk_seq: int, chunks: Sequence[Chunk]) -> None:
        self._check_open()
        if isinstance(chunk_seq, bool) or not isinstance(chunk_seq, int):
            raise InvalidInputError("chunk_seq must be an integer", field="chunkSeq")
        if chunk_seq < self._next_seq or chunk_seq in self._waiting:
            raise InvalidInputError(f"chunk_seq {chunk_seq} was already written by {self.writer_id}",
                                    field="chunkSeq")
        if isinstance(chunks, str | bytes):
            chunks = [chunks]
        self._waiting[chunk_seq] = [chunk_bytes(c, "chunks") for c in chunks]
        while self._next_seq in self._waiting:
            for chunk in self._waiting.pop(self._next_seq):
                self._ready.append(chunk)
                self._ready_bytes += len(chunk)
            self._next_seq += 1
        if not self._ready:
            return
        if (self.flush_interval <= 0 or self._ready_bytes >= self.flush_bytes
                or len(self._ready) >= self.flush_chunks):
            self._flush_now()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.flush_interval, self._flush_now)

    async def flush(self) -> None:
        """Append every chunk written so far (in sequence) now."""
        self._flush_now()
        if self._error is not None:
            raise self._error

    async def release(self) -> None:
        """Flush and stay usable: later ``write``/``close`` calls still work."""
        self._check_open()
        await self.flush()

    async def close(self) -> None:
        """Flush everything, then end the stream. A sequence number that never arrived is an error."""
        if self._state == "closed":
            return
        self._check_open()
        await self.flush()
        if self._waiting:
            raise InvalidInputError(f"cannot close: chunk_seq {self._next_seq} of {self.writer_id} never arrived "
                                    f"(holding {sorted(self._waiting)[:5]} ...)", field="chunkSeq")
        if self._registry is not None:  # the other writers of the stream land before the end
            self._registry.flush(self.run_id, self.name)
        self.store.close(self.run_id, self.name)
        self._retire("closed")

    async def dispose(self) -> None:
        """Release the session without ending the stream; chunks already in sequence are still flushed."""
        if self._state != "open":
            return
        try:
            await self.flush()
        finally:
            self._retire("disposed")

    async def __aenter__(self) -> MemoryWriteSession:
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is None:
            await self.close()
        else:
            with contextlib.suppress(Exception):  # the body's error is the one to see
                await self.dispose()

    # -- internals -------------------------------------------------------------------------------------------

    def _flush_now(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._ready or self._error is not None:
            return
        batch, self._ready, self._ready_bytes = self._ready, [], 0
        try:
            self.store.append(self.run_id, self.name, batch)
        except Exception as error:
            self._error = error

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._state != "open":
            raise EntityConflictError(f"write session {self.writer_id} is {self._state}", stream=self.name)

    def _retire(self, state: str) -> None:
        self._state = state
        if self._registry is not None:
            self._registry.discard(self)


class OpenSessions:
    """The open write sessions, by stream: closing a stream first flushes every one of them, so chunks a
    writer had written before the close are not refused for arriving after it."""

    def __init__(self) -> None:
        self._by_stream: dict[tuple[str, str], weakref.WeakSet[MemoryWriteSession]] = {}

    def add(self, session: MemoryWriteSession) -> None:
        self._by_stream.setdefault((session.run_id, session.name), weakref.WeakSet()).add(session)

    def discard(self, session: MemoryWriteSession) -> None:
        sessions = self._by_stream.get((session.run_id, session.name))
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del self._by_stream[(session.run_id, session.name)]

    def flush(self, run_id: str, name: str) -> None:
        """Flush the stream's sessions. Their failures stay theirs: each is raised to its own writer."""
        for session in list(self._by_stream.get((run_id, name), ())):
            session._flush_now()
