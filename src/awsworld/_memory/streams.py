"""``world.streams`` of the in-memory World: the contract's Streamer (``world/shared/streams.py``) over
``stream_store``'s records, with its live reader and its write session.

An append lands in one synchronous step (durable on return, a call's chunks contiguous, calls in call order)
and then yields to the event loop once, so a writer in a tight loop does not starve readers and closers.
State lives in ``stream_store.py``; storage is asked only for a run's status (``storage.run_status``).

A live reader (``MemoryLiveStream``) sleeps until the stream changes, never polls the chunks. When it ends is
every World's rule (``world/rules/streams.py``): when the stream is closed, or once drained when the run has
ended. Storage does not tell streams when a run ends, so an idle reader re-reads the run's status every time it
wakes: on each append or close, at least every ``run_check_interval`` seconds, and at once when ``wake_run`` is
called. ``aclose`` ends every reader.

A write session (``MemoryWriteSession``): ordering, lifecycle and when a flush is due are
``world/shared/write_sessions.py``'s, shared by every World; this is the flushing, minus the I/O. A flush is one
synchronous append, so flushes land in order, at once when one is due and otherwise by a timer set for the rest
of the window (the in-memory default window is 0: as soon as the writer's chunk is in sequence). A failed one
(the stream was closed, the run ended) is raised by the session's next call, and every later one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..world.limits import DEFAULT_MAX_VALUE_BYTES
from ..world.rules.streams import LiveReader
from ..world.shared.streams import Streamer
from ..world.shared.write_sessions import OrderedWriteSession
from ..world.streams import Chunk, page_take
from .stream_store import MemoryStreamStore, RunStatuses

RUN_CHECK_INTERVAL = 0.1


class MemoryStreams(Streamer["MemoryLiveStream", "MemoryWriteSession", MemoryStreamStore]):
    """The window (``stream_flush_interval_ms``) is 0 by default: flush as soon as chunks are in order (memory
    has no per-commit cost to spread)."""

    def __init__(self, storage: RunStatuses, *, flush_interval_ms: int = 0,
                 run_check_interval: float = RUN_CHECK_INTERVAL,
                 max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> None:
        """``max_value_bytes``: a chunk and its frame are at most this many bytes."""
        super().__init__(MemoryStreamStore(storage), flush_interval_ms=flush_interval_ms,
                         max_value_bytes=max_value_bytes)
        self.run_check_interval = run_check_interval
        self.closed = False

    async def _append(self, run_id: str, name: str, chunks: list[bytes]) -> None:
        self.store.append(run_id, name, chunks)
        await asyncio.sleep(0)

    async def _read_page(self, run_id: str, name: str, start: int, stop: int) -> list[bytes]:
        chunks = self.store.chunks(run_id, name, start, stop)
        return chunks[:page_take(len(chunk) for chunk in chunks)]

    def _live_reader(self, run_id: str, name: str, start_index: int) -> MemoryLiveStream:
        return MemoryLiveStream(self, run_id, name, start_index)

    def _write_session(self, run_id: str, name: str, writer_id: str, *, first_seq: int,
                       flush_interval: float) -> MemoryWriteSession:
        return MemoryWriteSession(self, run_id, name, writer_id, first_seq=first_seq, flush_interval=flush_interval)

    def wake_run(self, run_id: str) -> None:
        """Tell live readers of the run to re-read its status now (call it when the run ended, so they end at
        once instead of at their next ``run_check_interval``)."""
        self.store.wake_run(run_id)

    async def aclose(self) -> None:
        """End every live reader (they stop as if their streams were closed)."""
        self.closed = True
        self.store.wake_all()


class MemoryLiveStream(LiveReader):
    """``async for chunk in streams.get(...)``; ``await`` it first to fix a negative start index now. It reads
    pages as ``get_chunks`` does (memory keeps no reader state) and waits on its stream's signal."""

    def __init__(self, streams: MemoryStreams, run_id: str, name: str, start_index: int) -> None:
        super().__init__(run_id, name, start_index, meta=lambda: streams._meta(run_id, name),
                         run_status=lambda: streams._run_status(run_id))
        self.streams = streams

    async def _read(self, position: int, stop: int) -> list[bytes]:
        return await self.streams._read_page(self.run_id, self.name, position, stop)

    async def _wait(self) -> None:
        store = self.streams.store
        try:
            await store.signal(self.run_id, self.name).wait(self.streams.run_check_interval)
        finally:
            store.forget_signal(self.run_id, self.name)

    def _stopped(self) -> bool:
        return self.streams.closed


class MemoryWriteSession(OrderedWriteSession):
    def __init__(self, streams: MemoryStreams, run_id: str, name: str, writer_id: str, *, first_seq: int,
                 flush_interval: float) -> None:
        self.store = streams.store
        self._timer: asyncio.TimerHandle | None = None
        super().__init__(run_id, name, writer_id, first_seq=first_seq, flush_interval=flush_interval,
                         registry=streams.sessions, close_stream=lambda: streams.close(run_id, name),
                         max_chunk_bytes=streams.max_chunk_bytes)

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
