"""Write sessions on S3 and DynamoDB: ordering, lifecycle and when a flush is due are
``world/shared/write_sessions.py``'s; this is the flushing.

Durability is that of a buffered file write: ``write`` returns once its chunks are accepted, and a flush
makes them durable as one S3 object and one commit (a live reader sees a chunk at most one window, plus the
flush itself, after it was written). A flusher task waits out the window unless a flush is urged (a size
bound, or ``flush``/``release``/``dispose``/``close``). One flush runs at a time, so flushes land in order. The contract
allows this: only ``close`` must not resolve before every prior write is durable, and it does not; the
runtime flushes a step's writers before it records the step's end.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Sequence

from ...world.errors import WorldError
from ...world.shared.write_sessions import OrderedWriteSession, SessionRegistry
from ...world.streams import Chunk
from .stream_store import StreamStore

FLUSH_INTERVAL = 0.05
MAX_BUFFERED_BYTES = 16 * 1024 * 1024


class WriteSession(OrderedWriteSession):
    def __init__(self, store: StreamStore, run_id: str, name: str, writer_id: str, *, first_seq: int = 0,
                 flush_interval: float = FLUSH_INTERVAL, max_buffered_bytes: int = MAX_BUFFERED_BYTES,
                 registry: SessionRegistry[WriteSession] | None = None,
                 close_stream: Callable[[], Awaitable[None]], max_chunk_bytes: int | None = None) -> None:
        self.store = store
        self.max_buffered_bytes = max_buffered_bytes
        self._urgent = asyncio.Event()
        self._progress: asyncio.Future[None] | None = None
        self._flusher: asyncio.Task[None] | None = None
        super().__init__(run_id, name, writer_id, first_seq=first_seq, flush_interval=flush_interval,
                         registry=registry, close_stream=close_stream, max_chunk_bytes=max_chunk_bytes)

    async def write(self, chunk_seq: int, chunks: Sequence[Chunk]) -> None:
        self._accept(chunk_seq, chunks)
        if self._full():
            self._urgent.set()
        self._kick()
        if self._ready_bytes >= self.max_buffered_bytes:  # back-pressure: let the flusher catch up
            await self.flush()

    async def _flush(self) -> None:
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

    # -- internals -------------------------------------------------------------------------------------------

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
            delay = self._flush_delay(loop.time())
            if delay > 0 and not self._urgent.is_set():
                with contextlib.suppress(TimeoutError):  # (not wait_for: on 3.11 it can swallow a cancel)
                    async with asyncio.timeout(delay):
                        await self._urgent.wait()
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
