"""Write sessions in memory: ordering and lifecycle are ``world/stream_sessions.py``'s, shared by every World;
this is the flushing, minus the I/O.

A session buffers like a file write: ``write`` returns once accepted, a flush appends everything buffered.
The flush happens when the oldest buffered chunk has waited ``flush_interval`` (0, the in-memory default: as
soon as the writer's chunk is in sequence), at once past ``flush_chunks``/``flush_bytes``, and on
``flush``/``release``/``dispose``/``close``. A flush is one synchronous append, so flushes land in order; a
failed one (the stream was closed, the run ended) is raised by the session's next call, and every later one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..world.stream_sessions import FLUSH_BYTES, FLUSH_CHUNKS, OrderedWriteSession, SessionRegistry
from ..world.streams import Chunk
from .stream_store import MemoryStreamStore


class MemoryWriteSession(OrderedWriteSession):
    def __init__(self, store: MemoryStreamStore, run_id: str, name: str, writer_id: str, *, first_seq: int = 0,
                 flush_interval: float = 0.0, flush_bytes: int = FLUSH_BYTES, flush_chunks: int = FLUSH_CHUNKS,
                 registry: OpenSessions | None = None) -> None:
        self.store = store
        self.flush_interval = flush_interval
        self.flush_bytes = flush_bytes
        self.flush_chunks = flush_chunks
        self._timer: asyncio.TimerHandle | None = None
        super().__init__(run_id, name, writer_id, first_seq=first_seq, registry=registry,
                         max_chunk_bytes=store.max_chunk_bytes)

    @property
    def pending(self) -> int:
        """Chunks in sequence that are not flushed yet."""
        return len(self._ready)

    async def write(self, chunk_seq: int, chunks: Sequence[Chunk]) -> None:
        self._accept(chunk_seq, chunks)
        if not self._ready:
            return
        if self.flush_interval <= 0 or self._full():
            self._flush_now()
        elif self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(self.flush_interval, self._flush_now)

    async def flush(self) -> None:
        """Append every chunk written so far (in sequence) now."""
        self._flush_now()
        if self._error is not None:
            raise self._error

    async def _close_stream(self) -> None:
        self.store.close(self.run_id, self.name)

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


class OpenSessions(SessionRegistry[MemoryWriteSession]):
    """The open write sessions, by stream (``SessionRegistry``)."""

    async def flush(self, run_id: str, name: str) -> None:
        # No await inside: every session's chunks land before the caller's next step, as one synchronous step.
        for session in self.of(run_id, name):
            session._flush_now()
