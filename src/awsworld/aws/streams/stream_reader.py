"""Reading a stream in order: a position, the segments found so far, and the live iterator built on them.

Every read takes the chunk count from the meta item first and reads only below it. Segments below a
committed count are contiguous, so a segment list with a gap means a Query raced a commit (read-committed
isolation); the reader asks again rather than skip, and never yields past a hole.
"""

from __future__ import annotations

import asyncio
import time

from ...world.errors import WorldError
from ...world.rules.streams import LiveReader, Meta, RunStatus
from ...world.streams import page_take
from .stream_store import Segment, StreamStore

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

    async def read(self, stop: int) -> list[bytes]:
        """The chunks from ``position`` below ``stop`` (within a count read from the meta item, and the page's
        chunk limit) that one page holds (``streams.page_take``); advances ``position``."""
        if stop <= self.position:
            return []
        await self._cover(stop)
        lengths = (segment.lengths[i - segment.first] for segment in self._segments
                   for i in range(max(self.position, segment.first), min(stop, segment.end)))
        end = self.position + page_take(lengths)
        plan = [(segment, max(self.position, segment.first), min(end, segment.end)) for segment in self._segments
                if segment.first < end and segment.end > self.position]
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


class LiveStream(LiveReader):
    """``streams.get``: an async iterator of chunks that waits for new ones (polling with backoff). When it ends
    is every World's rule (``world/rules/streams.py``): when the stream is closed, or once drained when the run
    has ended; an idle reader asks the run's status at once the first time, then every ``run_check_interval``.
    ``await`` it to fix a negative start index now rather than at the first read.
    """

    def __init__(self, store: StreamStore, run_id: str, name: str, start_index: int, *, meta: Meta,
                 run_status: RunStatus, poll_interval: float, max_poll_interval: float,
                 run_check_interval: float) -> None:
        super().__init__(run_id, name, start_index, meta=meta, run_status=run_status)
        self.store = store
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        self.run_check_interval = run_check_interval
        self._reader: ChunkReader | None = None
        self._delay = poll_interval

    async def _read(self, position: int, stop: int) -> list[bytes]:
        if self._reader is None:  # one reader for the iterator's life: it keeps the segments found so far
            self._reader = ChunkReader(self.store, self.run_id, self.name, position)
        self._delay = self.poll_interval  # the stream moves: poll briskly again
        return await self._reader.read(stop)

    async def _wait(self) -> None:
        await asyncio.sleep(self._delay)
        self._delay = min(self.max_poll_interval, self._delay * 2)

    def _check_due(self) -> bool:
        return time.monotonic() - self.status_read_at >= self.run_check_interval
