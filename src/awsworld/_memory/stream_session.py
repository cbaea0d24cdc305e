"""Write sessions in memory: ordering, lifecycle and when a flush is due are ``world/shared/write_sessions.py``'s,
shared by every World; this is the flushing, minus the I/O.

A flush is one synchronous append, so flushes land in order, at once when one is due and otherwise by a timer
set for the rest of the window (the in-memory default window is 0: as soon as the writer's chunk is in
sequence). A failed one (the stream was closed, the run ended) is raised by the session's next call, and every
later one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence

from ..world.shared.write_sessions import OrderedWriteSession, SessionRegistry
from ..world.streams import Chunk
from .stream_store import MemoryStreamStore


class MemoryWriteSession(OrderedWriteSession):
    def __init__(self, store: MemoryStreamStore, run_id: str, name: str, writer_id: str, *, first_seq: int = 0,
                 flush_interval: float = 0.0, registry: SessionRegistry[MemoryWriteSession] | None = None,
                 close_stream: Callable[[], Awaitable[None]], max_chunk_bytes: int | None = None) -> None:
        self.store = store
        self._timer: asyncio.TimerHandle | None = None
        super().__init__(run_id, name, writer_id, first_seq=first_seq, flush_interval=flush_interval,
                         registry=registry, close_stream=close_stream, max_chunk_bytes=max_chunk_bytes)

    async def write(self, chunk_seq: int, chunks: Sequence[Chunk]) -> None:
        self._accept(chunk_seq, chunks)
        if not self._ready:
            return
        loop = asyncio.get_running_loop()
        delay = self._flush_delay(loop.time())
        if delay <= 0:
            self._flush_now()
        elif self._timer is None:
            self._timer = loop.call_later(delay, self._flush_now)

    async def _flush(self) -> None:
        self._flush_now()

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
        else:
            self._durable += len(batch)


class OpenSessions(SessionRegistry[MemoryWriteSession]):
    """The open write sessions, by stream (``SessionRegistry``)."""

    async def flush(self, run_id: str, name: str) -> None:
        # No await inside: every session's chunks land before the caller's next step, as one synchronous step.
        for session in self.of(run_id, name):
            session._flush_now()
