"""What every World's write session does alike: order one writer's chunks by its own sequence numbers, when a
flush is due, and the session's lifecycle (``release``, ``close``, ``dispose``, the context manager). How
buffered chunks are flushed (and what "durable" takes) is each World's own: subclasses give ``_flush`` and the
registry's ``flush``. A flush is due (``_flush_delay``) once the oldest chunk in sequence has waited the window
(``flush_interval``), and at once past ``flush_bytes``/``flush_chunks``. A session ends its stream as
``streams.close`` does (``close_stream``: the stream's other sessions flush first).

The runtime may hand a writer's chunks over out of order (``write(2, ...)`` before ``write(1, ...)``); the
session holds them until the gap fills, so the stream gets this writer's chunks in its sequence. A failed
flush is never swallowed: it is raised by the next ``write``/``flush``/``release``/``close`` of the session
(and every later one: the chunks it held are not durable, so the writer must learn it).
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Generic, Self, TypeVar

from ..errors import EntityConflictError, InvalidInputError, StreamClosedError
from ..streams import Chunk, check_chunk_sizes, chunk_bytes

FLUSH_BYTES = 1024 * 1024
FLUSH_CHUNKS = 1000  # the AWS World's segment item keeps the packed lengths near 4 KB


class OrderedWriteSession(ABC):
    flush_bytes: int = FLUSH_BYTES
    flush_chunks: int = FLUSH_CHUNKS
    """A session flushes at once, whatever its window, when this many bytes or chunks are buffered in sequence
    (a burst does not wait)."""

    def __init__(self, run_id: str, name: str, writer_id: str, *, first_seq: int, flush_interval: float,
                 registry: SessionRegistry[Any] | None, close_stream: Callable[[], Awaitable[None]],
                 max_chunk_bytes: int | None = None, flush_bytes: int = FLUSH_BYTES,
                 flush_chunks: int = FLUSH_CHUNKS) -> None:
        """``flush_interval``: the window, in seconds (0: flush as soon as chunks are in sequence).
        ``close_stream``: the World's ``streams.close`` of this stream (``world/shared/streams.py``), what ``close``
        ends it with once this session's chunks are flushed.
        ``max_chunk_bytes``: the World's largest chunk. A larger one is refused by ``write`` itself, before
        it is taken, so the session and the chunks written before it stay as they were (were it refused by the
        flush, the flush's failure would stick to the session and take the other chunks of its batch along)."""
        self.run_id = run_id
        self.name = name
        self.writer_id = writer_id
        self.max_chunk_bytes = max_chunk_bytes
        self.flush_interval = flush_interval
        self.flush_bytes = flush_bytes
        self.flush_chunks = flush_chunks
        self._ready_since = 0.0  # the event loop's time when the oldest chunk in sequence became ready
        self._accepted = 0  # chunks put in sequence so far
        self._durable = 0  # of those, chunks flushed (a subclass counts them as its flushes land)
        self._registry = registry
        self._close_stream = close_stream
        self._next_seq = first_seq
        self._waiting: dict[int, list[bytes]] = {}
        self._ready: list[bytes] = []
        self._ready_bytes = 0
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
        """Chunks in sequence that are not flushed yet."""
        return self._accepted - self._durable

    async def flush(self) -> None:
        """Flush every chunk written so far (in sequence); raise the session's flush failure, if any."""
        await self._flush()
        if self._error is not None:
            raise self._error

    @abstractmethod
    async def _flush(self) -> None:
        """Flush every chunk written so far (in sequence) now; a failure is kept in ``_error``, not raised."""

    def _full(self) -> bool:
        """The chunks in sequence reached ``flush_bytes`` or ``flush_chunks``: flush them now."""
        return self._ready_bytes >= self.flush_bytes or len(self._ready) >= self.flush_chunks

    def _flush_delay(self, now: float) -> float:
        """How long the chunks in sequence may still wait for their flush, at event-loop time ``now``: none when
        they are past a size bound, else what is left of the oldest one's window (0 or less: flush now)."""
        if self._full():
            return 0.0
        return self._ready_since + self.flush_interval - now

    def _accept(self, chunk_seq: object, chunks: Sequence[Chunk]) -> int:
        """Take ``chunk_seq``'s chunks (checked here: callers pass what they were given); move every chunk now
        in sequence to ``_ready``; return how many moved."""
        self._check_open()
        if isinstance(chunk_seq, bool) or not isinstance(chunk_seq, int):
            raise InvalidInputError("chunk_seq must be an integer", field="chunkSeq")
        if chunk_seq < self._next_seq or chunk_seq in self._waiting:
            raise InvalidInputError(f"chunk_seq {chunk_seq} was already written by {self.writer_id}",
                                    field="chunkSeq")
        if isinstance(chunks, str | bytes):
            chunks = [chunks]
        data = [chunk_bytes(c, "chunks", self.max_chunk_bytes) for c in chunks]
        check_chunk_sizes(data, self.max_chunk_bytes)
        self._waiting[chunk_seq] = data
        if not self._ready and self._next_seq in self._waiting:
            self._ready_since = asyncio.get_running_loop().time()
        moved = 0
        while self._next_seq in self._waiting:
            for chunk in self._waiting.pop(self._next_seq):
                self._ready.append(chunk)
                self._ready_bytes += len(chunk)
                moved += 1
            self._next_seq += 1
        self._accepted += moved
        return moved

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
        await self._close_stream()  # the stream's other writers land before the end
        self._retire("closed")

    async def dispose(self) -> None:
        """Release the session without ending the stream; chunks already in sequence are still flushed."""
        if self._state != "open":
            return
        try:
            await self.flush()
        finally:
            self._retire("disposed")

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, exc_type: object, exc: object, tb: object) -> None:
        if exc is None:
            await self.close()
        else:
            with contextlib.suppress(Exception):  # the body's error is the one to see
                await self.dispose()

    def _check_open(self) -> None:
        if self._error is not None:
            raise self._error
        if self._state == "closed":
            raise StreamClosedError(f"stream {self.name!r} of run {self.run_id} was closed by this writer's close(): "
                                      "it takes no more chunks; write them before the close", stream=self.name,
                                      writer=self.writer_id)
        if self._state != "open":
            raise EntityConflictError(f"write session {self.writer_id} of stream {self.name!r} is {self._state}",
                                      stream=self.name)

    def _retire(self, state: str) -> None:
        self._state = state
        if self._registry is not None:
            self._registry.discard(self)


S = TypeVar("S", bound=OrderedWriteSession)


class SessionRegistry(Generic[S]):
    """A World's open write sessions, by stream: closing a stream first flushes every one of them, so chunks a
    writer had written before the close are not refused for arriving after it."""

    def __init__(self) -> None:
        self._by_stream: dict[tuple[str, str], weakref.WeakSet[S]] = {}

    def add(self, session: S) -> None:
        self._by_stream.setdefault((session.run_id, session.name), weakref.WeakSet()).add(session)

    def discard(self, session: S) -> None:
        sessions = self._by_stream.get((session.run_id, session.name))
        if sessions is not None:
            sessions.discard(session)
            if not sessions:
                del self._by_stream[(session.run_id, session.name)]

    def of(self, run_id: str, name: str) -> list[S]:
        return list(self._by_stream.get((run_id, name), ()))

    async def flush(self, run_id: str, name: str) -> None:
        """Flush the stream's sessions that hold chunks, at once. Their failures stay theirs: each is raised to
        its own writer."""
        sessions = [s for s in self.of(run_id, name) if s.pending]
        await asyncio.gather(*(s.flush() for s in sessions), return_exceptions=True)
