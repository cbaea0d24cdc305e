"""``streams.get`` in memory: a live iterator that sleeps until the stream changes, never polls the chunks.

When it ends is every World's rule (``world/rules/streams.py``): when the stream is closed, or once drained
when the run has ended. Storage does not tell streams when a run ends, so an idle reader re-reads the run's
status every time it wakes: on each append or close, at least every ``run_check_interval`` seconds, and at once
when ``MemoryStreams.wake_run`` is called. ``MemoryStreams.aclose`` ends every reader.
"""

from __future__ import annotations

from collections.abc import Callable

from ..world.rules.streams import LiveReader
from .stream_store import MemoryStreamStore


class MemoryLiveStream(LiveReader):
    """``async for chunk in streams.get(...)``; ``await`` it first to fix a negative start index now."""

    def __init__(self, store: MemoryStreamStore, run_id: str, name: str, start_index: int, *,
                 run_check_interval: float, closed: Callable[[], bool]) -> None:
        super().__init__(run_id, name, start_index)
        self.store = store
        self.run_check_interval = run_check_interval
        self._closed = closed
        self._at = 0

    async def _meta(self) -> tuple[int, bool]:
        return self.store.meta(self.run_id, self.name)

    async def _run_status(self) -> str | None:
        return self.store.run_status(self.run_id)

    def _begin(self, position: int) -> None:
        self._at = position

    def _next_position(self) -> int:
        return self._at

    async def _read(self, count: int) -> list[bytes]:
        state = self.store.get(self.run_id, self.name)
        chunks = state.chunks[self._at:count] if state is not None else []
        self._at += len(chunks)
        return chunks

    async def _wait(self) -> None:
        try:
            await self.store.signal(self.run_id, self.name).wait(self.run_check_interval)
        finally:
            self.store.forget_signal(self.run_id, self.name)

    def _stopped(self) -> bool:
        return self._closed()
