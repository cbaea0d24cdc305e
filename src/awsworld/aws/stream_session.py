"""Write sessions: one writer's chunks, ordered by its own sequence numbers, flushed in batches.

The runtime may hand a writer's chunks over out of order (``write(2, ...)`` before ``write(1, ...)``); the
session holds them until the gap fills, so the stream gets this writer's chunks in its sequence. Ready chunks
are gathered for ``flush_interval`` and written as one S3 object and one commit; one flush runs at a time, so
flushes land in order. ``write`` returns once the chunks are accepted (buffered); ``close`` returns only
when every chunk is durable, then ends the stream. A failed flush (closed stream, finished run) is raised by
the next ``write``/``flush``/``close``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Sequence

from ..world.errors import EntityConflictError, InvalidInputError
from ..world.streams import Chunk, chunk_bytes
from .stream_store import StreamStore

FLUSH_BYTES = 4 * 1024 * 1024
MAX_BUFFERED_BYTES = 16 * 1024 * 1024


class WriteSession:
    def __init__(self, store: StreamStore, run_id: str, name: str, writer_id: str, *, first_seq: int = 0,
                 flush_interval: float = 0.01, flush_bytes: int = FLUSH_BYTES,
                 max_buffered_bytes: int = MAX_BUFFERED_BYTES) -> None:
        self.store = store
        self.run_id = run_id
        self.name = name
        self.writer_id = writer_id
        self.flush_interval = flush_interval
        self.flush_bytes = flush_bytes
        self.max_buffered_bytes = max_buffered_bytes
        self._next_seq = first_seq
        self._waiting: dict[int, list[bytes]] = {}
        self._ready: list[bytes] = []
        self._ready_bytes = 0
        self._urgent = asyncio.Event()
        self._flusher: asyncio.Task[None] | None = None
        self._error: BaseException | None = None
        self._state = "open"

    @property
    def next_seq(self) -> int:
        """The sequence number the session waits for next."""
        return self._next_seq

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
        if self._ready_bytes >= self.flush_bytes:
            self._urgent.set()
        self._kick()
        if self._ready_bytes >= self.max_buffered_bytes:  # back-pressure: let the flusher catch up
            await self._drain()

    async def flush(self) -> None:
        """Make every chunk written so far (in sequence) durable now."""
        self._urgent.set()
        self._kick()
        await self._drain()

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
        await self.store.close(self.run_id, self.name)
        self._state = "closed"

    async def dispose(self) -> None:
        """Release the session without ending the stream; chunks already in sequence are still flushed."""
        if self._state != "open":
            return
        try:
            await self.flush()
        finally:
            self._state = "disposed"

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

    def _kick(self) -> None:
        if self._ready and (self._flusher is None or self._flusher.done()):
            self._flusher = asyncio.create_task(self._flush_loop(), name=f"awsworld-stream-flush-{self.writer_id}")

    async def _flush_loop(self) -> None:
        while self._ready and self._error is None:
            if not self._urgent.is_set():
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._urgent.wait(), self.flush_interval)
            self._urgent.clear()
            batch, self._ready, self._ready_bytes = self._ready, [], 0
            try:
                await self.store.append(self.run_id, self.name, batch, self.writer_id)
            except Exception as error:
                self._error = error

    async def _drain(self) -> None:
        while self._flusher is not None and not self._flusher.done():
            await asyncio.shield(self._flusher)
            self._kick()
        if self._error is not None:
            raise self._error
