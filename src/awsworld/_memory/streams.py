"""``world.streams`` of the in-memory World: the contract's Streamer (``world/shared/streams.py``) over
``stream_store``'s records.

An append lands in one synchronous step (durable on return, a call's chunks contiguous, calls in call order)
and then yields to the event loop once, so a writer in a tight loop does not starve readers and closers.
Write sessions (``stream_session.py``) flush as soon as a writer's chunks are in sequence unless given a
window; live readers (``stream_reader.py``) wake on every append or close. State lives in
``stream_store.py``; storage is asked only for a run's status (``storage.run_status``).
"""

from __future__ import annotations

import asyncio

from ..world.clock import Clock
from ..world.limits import DEFAULT_MAX_VALUE_BYTES
from ..world.shared.streams import Streamer
from ..world.streams import page_take
from .stream_reader import MemoryLiveStream
from .stream_session import MemoryWriteSession, OpenSessions
from .stream_store import MemoryStreamStore, RunStatuses

RUN_CHECK_INTERVAL = 0.1


class MemoryStreams(Streamer[MemoryLiveStream, MemoryWriteSession, MemoryStreamStore]):
    """The window (``stream_flush_interval_ms``) is 0 by default: flush as soon as chunks are in order (memory
    has no per-commit cost to spread)."""

    def __init__(self, clock: Clock, storage: RunStatuses, *, flush_interval_ms: int = 0,
                 run_check_interval: float = RUN_CHECK_INTERVAL,
                 max_value_bytes: int = DEFAULT_MAX_VALUE_BYTES) -> None:
        """``max_value_bytes``: a chunk and its frame are at most this many bytes."""
        super().__init__(MemoryStreamStore(storage), flush_interval_ms=flush_interval_ms, sessions=OpenSessions(),
                         max_value_bytes=max_value_bytes)
        self.clock = clock  # streams keep no time; taken for symmetry with the other parts of the World
        self.run_check_interval = run_check_interval
        self._closed = False

    async def _append(self, run_id: str, name: str, chunks: list[bytes]) -> None:
        self.store.append(run_id, name, chunks)
        await asyncio.sleep(0)

    async def _read_page(self, run_id: str, name: str, start: int, stop: int) -> list[bytes]:
        chunks = self.store.chunks(run_id, name, start, stop)
        return chunks[:page_take(len(chunk) for chunk in chunks)]

    def _live_reader(self, run_id: str, name: str, start_index: int) -> MemoryLiveStream:
        return MemoryLiveStream(self.store, run_id, name, start_index, meta=lambda: self._meta(run_id, name),
                                run_status=lambda: self._run_status(run_id),
                                read=lambda position, stop: self._read_page(run_id, name, position, stop),
                                run_check_interval=self.run_check_interval, closed=lambda: self._closed)

    def _write_session(self, run_id: str, name: str, writer_id: str, *, first_seq: int,
                       flush_interval: float) -> MemoryWriteSession:
        return MemoryWriteSession(self.store, run_id, name, writer_id, first_seq=first_seq,
                                  flush_interval=flush_interval, registry=self.sessions,
                                  close_stream=lambda: self.close(run_id, name), max_chunk_bytes=self.max_chunk_bytes)

    def wake_run(self, run_id: str) -> None:
        """Tell live readers of the run to re-read its status now (call it when the run ended, so they end at
        once instead of at their next ``run_check_interval``)."""
        self.store.wake_run(run_id)

    async def aclose(self) -> None:
        """End every live reader (they stop as if their streams were closed)."""
        self._closed = True
        self.store.wake_all()
