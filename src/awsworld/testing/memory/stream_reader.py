"""``streams.get`` in memory: a live iterator that sleeps until the stream changes, never polls the chunks.

It ends when the stream is closed, and, as the AWS World's reader does, once drained when the run has
finished (a finished run's streams take no more chunks, so waiting longer could only hang a reader whose
writer never closed the stream). A reader idling on a run that does not exist gets ``RunNotFoundError``.
Storage does not tell streams when a run ends, so an idle reader re-reads the run's status every
``run_check_interval`` seconds (or at once when ``MemoryStreams.wake_run`` is called); ``MemoryStreams.aclose``
ends every reader.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Generator
from typing import Any

from ...world.entities import TERMINAL_RUN_STATUSES
from ...world.errors import RunNotFoundError
from .stream_store import MemoryStreamStore


class MemoryLiveStream:
    """``async for chunk in streams.get(...)``; ``await`` it first to fix a negative start index now."""

    def __init__(self, store: MemoryStreamStore, run_id: str, name: str, start_index: int, *,
                 run_check_interval: float, closed: Callable[[], bool]) -> None:
        self.store = store
        self.run_id = run_id
        self.name = name
        self.start_index = start_index
        self.run_check_interval = run_check_interval
        self._closed = closed
        self._position: int | None = None
        self._finished = False

    def start(self) -> MemoryLiveStream:
        if self._position is None:
            position = self.start_index
            if position < 0:
                count, _ = self.store.meta(self.run_id, self.name)
                position = max(0, count + position)
            self._position = position
        return self

    def __await__(self) -> Generator[Any, None, MemoryLiveStream]:
        return self._started().__await__()

    async def _started(self) -> MemoryLiveStream:
        return self.start()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    @property
    def position(self) -> int:
        """The index of the next chunk this iterator yields."""
        return self._position if self._position is not None else max(self.start_index, 0)

    async def __anext__(self) -> bytes:
        self.start()
        assert self._position is not None
        while not self._finished and not self._closed():
            state = self.store.get(self.run_id, self.name)
            if state is not None and self._position < len(state.chunks):
                chunk = state.chunks[self._position]
                self._position += 1
                return chunk
            if state is not None and state.done:
                break
            # Read after the chunks: a run that is terminal now has every chunk it will ever have above.
            status = self.store.run_status(self.run_id)
            if status is None:
                raise RunNotFoundError(f"run {self.run_id} does not exist: its stream {self.name} can never "
                                       "receive a chunk", run_id=self.run_id)
            if status in TERMINAL_RUN_STATUSES:
                break
            try:
                await self.store.signal(self.run_id, self.name).wait(self.run_check_interval)
            finally:
                self.store.forget_signal(self.run_id, self.name)
        self._finished = True
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._finished = True
