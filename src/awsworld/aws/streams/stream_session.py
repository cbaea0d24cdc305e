"""Write sessions: one writer's chunks, ordered by its own sequence numbers, flushed in batches.

The runtime may hand a writer's chunks over out of order (``write(2, ...)`` before ``write(1, ...)``); the
session holds them until the gap fills, so the stream gets this writer's chunks in its sequence.

Durability is that of a buffered file write: ``write`` returns once its chunks are accepted, and a flush
makes them durable as one S3 object and one commit. A flush starts when the oldest buffered chunk has waited
``flush_interval`` (the window: a live reader sees a chunk at most one window, plus the flush itself, after it
was written), at once when ``flush_bytes`` or ``flush_chunks`` are buffered (a burst does not wait), and on
``flush``/``release``/``dispose``/``close``. One flush runs at a time, so flushes land in order. The contract
allows this: only ``close`` must not resolve before every prior write is durable, and it does not; the
runtime flushes a step's writers before it records the step's end.

A failed flush is never swallowed: it is raised by the next ``write``/``flush``/``release``/``close`` of the
session (and every later one: the chunks it held are not durable, so the writer must learn it).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import Sequence

from ...world.errors import EntityConflictError, InvalidInputError, WorldError
from ...world.streams import Chunk, chunk_bytes
from .stream_store import StreamStore

FLUSH_INTERVAL = 0.05
FLUSH_BYTES = 1024 * 1024
FLUSH_CHUNKS = 1000  # the segment item's packed lengths stay near 4 KB
MAX_BUFFERED_BYTES = 16 * 1024 * 1024


class WriteSession:
    def __init__(self, store: StreamStore, run_id: str, name: str, writer_id: str, *, first_seq: int = 0,
                 flush_interval: float = FLUSH_INTERVAL, flush_bytes: int = FLUSH_BYTES,
                 flush_chunks: int = FLUSH_CHUNKS, max_buffered_bytes: int = MAX_BUFFERED_BYTES,
                 registry: OpenSessions | None = None) -> None:
        self.store = store
        self.run_id = run_id
        self.name = name
        self.writer_id = writer_id
        self.flush_interval = flush_interval
        self.flush_bytes = flush_bytes
        self.flush_chunks = flush_chunks
        self.max_buffered_bytes = max_buffered_bytes
        self._registry = registry
        self._next_seq = first_seq
        self._waiting: dict[int, list[bytes]] = {}
        self._ready: list[bytes] = []
        self._ready_bytes = 0
        self._ready_since = 0.0
        self._accepted = 0  # chunks put in sequence so far
        self._durable = 0  # of those, chunks committed
        self._urgent = asyncio.Event()
        self._progress: asyncio.Future[None] | None = None
        self._flusher: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._state = "open"
        if registry is not None:
            registry.add(self)

    @property
    def next_seq(self) -> int:
        """The sequence number the session waits for next."""
        return self._next_seq

    @property
    def pending(self) -> int:
        """Chunks in sequence that are not durable yet."""
        return self._accepted - self._durable

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
                if not self._ready:
                    self._ready_since = asyncio.get_running_loop().time()
                self._ready.append(chunk)
                self._ready_bytes += len(chunk)
                self._accepted += 1
            self._next_seq += 1
        if self._ready_bytes >= self.flush_bytes or len(self._ready) >= self.flush_chunks:
            self._urgent.set()
        self._kick()
        if self._ready_bytes >= self.max_buffered_bytes:  # back-pressure: let the flusher catch up
            await self.flush()

    async def flush(self) -> None:
        """Make every chunk written so far (in sequence) durable now; chunks written meanwhile by others do not
        hold this call up."""
        target = self._accepted
        while self._durable < target and self._error is None:
            self._urgent.set()
            self._kick()
            if self._flusher is None or self._flusher.done():  # nothing buffered, nothing in flight: lost
                self._error = WorldError(f"stream {self.name}: {target - self._durable} chunks were never flushed")
                break
            # Waiting does not cancel the flush with this caller; the flusher's end stops a wait that no
            # progress would (a task cancelled before it ran).
            await asyncio.wait({self._next_progress(), self._flusher}, return_when=asyncio.FIRST_COMPLETED)
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
            missing = self._next_seq
            raise InvalidInputError(f"cannot close: chunk_seq {missing} of {self.writer_id} never arrived "
                                    f"(holding {sorted(self._waiting)[:5]} ...)", field="chunkSeq")
        if self._registry is not None:  # this process's other writers of the stream land before the end
            await self._registry.flush(self.run_id, self.name)
        await self.store.close(self.run_id, self.name)
        self._retire("closed")

    async def dispose(self) -> None:
        """Release the session without ending the stream; chunks already in sequence are still flushed."""
        if self._state != "open":
            return
        try:
            await self.flush()
        finally:
            self._retire("disposed")

    async def __aenter__(self) -> WriteSession:
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is None:
            await self.close()
        else:
            with contextlib.suppress(Exception):
                await self.dispose()

    # -- internals -------------------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._state != "open":
            raise EntityConflictError(f"write session {self.writer_id} is {self._state}", stream=self.name)

    def _retire(self, state: str) -> None:
        self._state = state
        if self._registry is not None:
            self._registry.discard(self)

    def _next_progress(self) -> asyncio.Future[None]:
        """Resolved when the flush in flight (or the next one) ends, whether it succeeded or not."""
        if self._progress is None or self._progress.done():
            self._progress = asyncio.get_running_loop().create_future()
        return self._progress

    def _kick(self) -> None:
        if self._ready and self._error is None and (self._flusher is None or self._flusher.done()):
            self._flusher = asyncio.create_task(self._flush_loop(), name=f"awsworld-stream-flush-{self.writer_id}")

    async def _flush_loop(self) -> None:
        loop = asyncio.get_running_loop()
        while self._ready and self._error is None:
            delay = self._ready_since + self.flush_interval - loop.time()
            if delay > 0 and not self._urgent.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._urgent.wait(), delay)
            self._urgent.clear()
            batch, self._ready, self._ready_bytes = self._ready, [], 0
            try:
                await self.store.append(self.run_id, self.name, batch, self.writer_id)
            except BaseException as error:
                # Cancelled (the loop is shutting down) or failed: the batch is not known durable; say so.
                self._error = error if isinstance(error, Exception) else WorldError(
                    f"a flush of stream {self.name} was cancelled: {len(batch)} chunks may not be durable")
                if not isinstance(error, Exception):
                    raise
            else:
                self._durable += len(batch)
            finally:
                if self._progress is not None and not self._progress.done():
                    self._progress.set_result(None)


class OpenSessions:
    """The open write sessions of this process, by stream: closing a stream first flushes every one of them,
    so chunks a writer here had written before the close are not refused for arriving after it."""

    def __init__(self) -> None:
        self._by_stream: dict[tuple[str, str], weakref.WeakSet[WriteSession]] = {}

    def add(self, session: WriteSession) -> None:
        self._by_stream.setdefault((session.run_id, session.name), weakref.WeakSet()).add(session)

    def discard(self, session: WriteSession) -> None:
        sessions = self._by_stream.get((session.run_id, session.name))
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del self._by_stream[(session.run_id, session.name)]

    async def flush(self, run_id: str, name: str) -> None:
        """Flush the stream's sessions. Their failures stay theirs: each is raised to its own writer."""
        sessions = [s for s in self._by_stream.get((run_id, name), ()) if s.pending]
        await asyncio.gather(*(s.flush() for s in sessions), return_exceptions=True)
