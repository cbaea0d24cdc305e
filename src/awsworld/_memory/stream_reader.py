"""``streams.get`` in memory: a live iterator that sleeps until the stream changes, never polls the chunks.

When it ends is every World's rule (``world/rules/streams.py``): when the stream is closed, or once drained
when the run has ended. Storage does not tell streams when a run ends, so an idle reader re-reads the run's
status every time it wakes: on each append or close, at least every ``run_check_interval`` seconds, and at once
when ``MemoryStreams.wake_run`` is called. ``MemoryStreams.aclose`` ends every reader.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from ..world.rules.streams import LiveReader, Meta, RunStatus
from .stream_store import MemoryStreamStore


class MemoryLiveStream(LiveReader):
    """``async for chunk in streams.get(...)``; ``await`` it first to fix a negative start index now."""

    def __init__(self, store: MemoryStreamStore, run_id: str, name: str, start_index: int, *, meta: Meta,
                 run_status: RunStatus, read: Callable[[int, int], Awaitable[list[bytes]]],
                 run_check_interval: float, closed: Callable[[], bool]) -> None:
        """``read``: the Streamer's read of a page (``_read_page``: memory keeps no reader state)."""
        super().__init__(run_id, name, start_index, meta=meta, run_status=run_status)
        self.store = store
        self.run_check_interval = run_check_interval
        self._read_page = read
        self._closed = closed

    async def _read(self, position: int, stop: int) -> list[bytes]:
        return await self._read_page(position, stop)

    async def _wait(self) -> None:
        try:
            await self.store.signal(self.run_id, self.name).wait(self.run_check_interval)
        finally:
            self.store.forget_signal(self.run_id, self.name)

    def _stopped(self) -> bool:
        return self._closed()
