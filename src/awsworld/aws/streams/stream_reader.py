"""Reading a stream in order: a position, the segments found so far, and the live iterator built on them.

Every read takes the chunk count from the meta item first and reads only below it. Segments below a
committed count are contiguous, so a segment list with a gap means a Query raced a commit (read-committed
isolation); the reader asks again rather than skip, and never yields past a hole.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Generator
from typing import Any

from ...world.entities import TERMINAL_RUN_STATUSES
from ...world.errors import RunNotFoundError, WorldError
from .stream_store import Segment, StreamStore

READ_CHUNKS = 1000
READ_BYTES = 8 * 1024 * 1024
_SEGMENTS_PER_QUERY = 100
_GAP_RETRIES = 8


class ChunkReader:
    """Chunks of one stream from ``position`` on, in order, each exactly once."""

    def __init__(self, store: StreamStore, run_id: str, name: str, position: int) -> None:
        self.store = store
        self.run_id = run_id
        self.name = name
        self.position = position
        self._segments: list[Segment] = []
        self._last_sk: str | None = None
        self._located = False

    async def read(self, count: int, *, max_chunks: int = READ_CHUNKS, max_bytes: int = READ_BYTES) -> list[bytes]:
        """Chunks from ``position`` below ``count`` (a count read from the meta item), up to ``max_chunks``
        and about ``max_bytes`` (at least one chunk); advances ``position``."""
        stop = min(count, self.position + max_chunks)
        if stop <= self.position:
            return []
        await self._cover(stop)
        plan: list[tuple[Segment, int, int]] = []
        size = 0
        at = self.position
        for segment in self._segments:
            if at >= stop or (plan and size >= max_bytes):
                break
            if segment.end <= at:
                continue
            hi = at
            while hi < min(stop, segment.end) and (hi == self.position or size < max_bytes):
                size += segment.lengths[hi - segment.first]
                hi += 1
            plan.append((segment, at, hi))
            at = hi
        parts = await asyncio.gather(*(self.store.read(s, lo, hi) for s, lo, hi in plan))
        chunks = [chunk for part in parts for chunk in part]
        self.position += len(chunks)
        self._segments = [s for s in self._segments if s.end > self.position]
        return chunks

    def _known_end(self) -> int:
        return self._segments[-1].end if self._segments else -1

    async def _cover(self, stop: int) -> None:
        """Make the known segments cover ``position .. stop-1`` without a gap."""
        self._segments = [s for s in self._segments if s.end > self.position]
        if not self._located:
            self._located = True
            if self.position > 0:
                holder = await self.store.segment_at(self.run_id, self.name, self.position)
                if holder is not None:
                    self._last_sk = holder.sk
                    if holder.end > self.position:
                        self._segments = [holder]
        gaps = 0
        while self._known_end() < stop:
            found = await self.store.segments_after(self.run_id, self.name, self._last_sk, _SEGMENTS_PER_QUERY)
            progressed = False
            for segment in found:
                expected = self._known_end()
                if expected < 0 and segment.end <= self.position:  # wholly behind the position: skip it
                    self._last_sk, progressed = segment.sk, True
                    continue
                if (segment.first != expected) if expected >= 0 else (segment.first > self.position):
                    break  # a gap: a commit this Query did not see yet
                self._segments.append(segment)
                self._last_sk, progressed = segment.sk, True
            if progressed:
                continue
            gaps += 1
            if gaps > _GAP_RETRIES:
                raise WorldError(f"stream {self.name} of run {self.run_id}: its index has no segment for chunk "
                                 f"{max(self.position, self._known_end())} below its count {stop}")
            await asyncio.sleep(0.01 * gaps)


class LiveStream:
    """``streams.get``: an async iterator of chunks that waits for new ones (polling with backoff) and ends
    when the stream is closed. ``await`` it to fix a negative start index now rather than at the first read.

    It also ends, once drained, when the run has finished: a finished run's streams take no more chunks, so
    waiting longer could only hang a reader whose writer never closed the stream. For the same reason a
    reader idling on a run that does not exist gets ``RunNotFoundError`` instead of waiting forever.
    """

    def __init__(self, store: StreamStore, run_id: str, name: str, start_index: int, *, poll_interval: float,
                 max_poll_interval: float, run_check_interval: float) -> None:
        self.store = store
        self.run_id = run_id
        self.name = name
        self.start_index = start_index
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        self.run_check_interval = run_check_interval
        self._reader: ChunkReader | None = None
        self._buffer: deque[bytes] = deque()
        self._finished = False
        self._run_over = False

    async def start(self) -> LiveStream:
        if self._reader is None:
            position = self.start_index
            if position < 0:
                count, _ = await self.store.meta(self.run_id, self.name)
                position = max(0, count + position)
            self._reader = ChunkReader(self.store, self.run_id, self.name, position)
        return self

    def __await__(self) -> Generator[Any, None, LiveStream]:
        return self.start().__await__()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    @property
    def position(self) -> int:
        """The index of the next chunk this iterator yields."""
        return (self._reader.position if self._reader else max(self.start_index, 0)) - len(self._buffer)

    async def __anext__(self) -> bytes:
        if self._buffer:
            return self._buffer.popleft()
        reader = (await self.start())._reader
        assert reader is not None
        delay = self.poll_interval
        last_run_check = time.monotonic()
        while not self._finished:
            count, done = await self.store.meta(self.run_id, self.name)
            if reader.position < count:
                self._buffer.extend(await reader.read(count))
                return self._buffer.popleft()
            if done or self._run_over:
                break
            if time.monotonic() - last_run_check >= self.run_check_interval:
                last_run_check = time.monotonic()
                # Terminal: one more meta read (after this one) sees every chunk that can ever exist.
                status = await self.store.run_status(self.run_id)
                if status is None:
                    raise RunNotFoundError(f"run {self.run_id} does not exist: its stream {self.name} can never "
                                           "receive a chunk", run_id=self.run_id)
                self._run_over = status in TERMINAL_RUN_STATUSES
                if self._run_over:
                    continue
            await asyncio.sleep(delay)
            delay = min(self.max_poll_interval, delay * 2)
        self._finished = True
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._finished = True
        self._buffer.clear()
