"""A stream's rules, for every World: who may append, and when a stream ends for its readers.

An append is refused, in this order, when its run does not exist, when the run has ended, and when the stream is
closed (``append_refusal``); closing is allowed on a finished run (finishing is not writing) and on a stream
never written, which it creates.

A stream ends for its readers when it is closed, or when its run has ended.

A run's end closes its streams: a finished run takes no more chunks (both Worlds refuse an append to a terminal
run in the same step that appends), so a stream its writer never closed (a step that returned or failed with
it open, a retried step, a cancelled run) holds, once the run is over, every chunk it will ever hold. Readers
therefore treat it as closed from then on: ``get_info`` and ``get_chunks`` say ``done``, a live ``get`` ends
once drained. The rule is derived at read time from the run's status, not written at the run's end, so the
run's end costs nothing per stream and no race can leave a stream open.

The order matters: the status is read *after* the stream's count, and when it is terminal the count is read
once more, because a chunk may have landed between the first count and the run's end. ``end_state`` is that
sequence; ``LiveReader`` is ``streams.get``'s loop built on it, which both Worlds subclass with their own
reads and their own way of waiting (polling S3/DynamoDB, or a signal in memory).
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from typing import Any, Self

from ..entities import TERMINAL_RUN_STATUSES
from ..errors import RunGoneError, RunNotFoundError, StreamClosedError, StreamNotFoundError, WorldError
from ..pages import MAX_CHUNKS_PAGE
from ..streams import start_position

Meta = Callable[[], Awaitable[tuple[int, bool]]]
"""The stream's (chunk count, closed flag), read now; (0, False) for a stream never written."""
RunStatus = Callable[[], Awaitable[str | None]]
"""The run's status, read now; None when there is no such run."""


def run_over(status: str | None) -> bool:
    """Whether a run in ``status`` has ended, and with it every stream it left open."""
    return status is not None and status in TERMINAL_RUN_STATUSES


def append_refusal(run_id: str, name: str, run_status: str | None, closed: bool) -> WorldError | None:
    """Why an append to the stream cannot land, given its run's status (None: no such run) and its closed flag."""
    if run_status is None:
        return RunNotFoundError(f"run {run_id} does not exist", run_id=run_id)
    if run_status in TERMINAL_RUN_STATUSES:
        return RunGoneError(f"run {run_id} is {run_status}: its streams take no more chunks", run_id=run_id)
    return closed_stream(run_id, name) if closed else None


def streams_so_far(names: list[str]) -> str:
    """A run's stream names as a reader of a name not among them is told them (``Run.stream``, ``awsworld streams
    RUN NAME --follow``): a typo shows next to the name meant."""
    return ", ".join(repr(n) for n in names) if names else "none"


def missing_stream(run_id: str, name: str, names: list[str]) -> StreamNotFoundError:
    """What a reader of stream ``name`` gets once run ``run_id`` has ended without a step writing it (``names``:
    the streams it did write): the run's end means none ever will, so the name is likely a typo."""
    return StreamNotFoundError(f"run {run_id} ended with no stream {name!r} (its streams: {streams_so_far(names)})",
                               run_id=run_id, stream=name, names=names)


def closed_stream(run_id: str, name: str) -> StreamClosedError:
    """What an append to a closed stream raises."""
    return StreamClosedError(f"stream {name!r} of run {run_id} is closed (a writer's close() ended it): it takes no "
                               f"more chunks; write them before the close, or to a stream of another name",
                               run_id=run_id, stream=name)


async def end_state(meta: Meta, run_status: RunStatus) -> tuple[int, bool]:
    """(chunk count, done) as a reader must see them: done when closed or when the run has ended; the count read
    after the run's status was found terminal (so it is final). A closed stream costs one read, an open one two,
    an open one of an ended run three."""
    count, done = await meta()
    if done:
        return count, True
    if run_over(await run_status()):
        count, _ = await meta()
        return count, True
    return count, False


class LiveReader(ABC):
    """``streams.get``: an async iterator of chunks that waits for new ones and ends when the stream is closed or,
    once drained, when its run has ended (``end_state``'s rule, applied as it waits). A reader idling on a run
    that does not exist gets ``RunNotFoundError`` instead of waiting forever. ``await`` it to fix a negative
    start index now rather than at the first read.

    The first time a reader finds nothing more to read it asks the run's status at once (a reader that starts
    after its run ended ends at once); later, as often as ``_check_due`` allows (a World whose reads cost money
    asks every few seconds; memory on every wake)."""

    def __init__(self, run_id: str, name: str, start_index: int, *, meta: Meta, run_status: RunStatus) -> None:
        """``meta`` and ``run_status``: the World's reads of the stream's (count, closed flag) and the run's
        status (its Streamer's, so a reader asks exactly what ``get_info`` asks)."""
        self.run_id = run_id
        self.name = name
        self.start_index = start_index
        self._read_meta = meta
        self._read_run_status = run_status
        self.status_read_at = float("-inf")
        """When this reader last read the run's status (``time.monotonic()``): what ``_check_due`` may go by."""
        self._buffer: deque[bytes] = deque()
        self._next = 0  # the index of the next chunk ``_read`` is asked for, once begun
        self._begun = False
        self._finished = False
        self._run_over = False
        self._checked = False

    # -- what a World gives ----------------------------------------------------------------------------------

    @abstractmethod
    async def _read(self, position: int, stop: int) -> list[bytes]:
        """The chunks from ``position`` below ``stop`` that one read holds (at least one, as a page:
        ``streams.page_take``). Positions only grow: each call asks for the chunk after the last one returned."""

    @abstractmethod
    async def _wait(self) -> None:
        """Idle until the stream (or its run) may have changed."""

    def _check_due(self) -> bool:
        """Whether an idle reader should read the run's status again now (the first check is always made)."""
        return True

    def _stopped(self) -> bool:
        """The World is closing: end as if the stream were closed."""
        return False

    # -- the loop ----------------------------------------------------------------------------------------------

    async def _meta(self) -> tuple[int, bool]:
        """The stream's (chunk count, closed flag) now."""
        return await self._read_meta()

    async def _run_status(self) -> str | None:
        """The run's status now (None: no such run)."""
        self.status_read_at = time.monotonic()
        return await self._read_run_status()

    async def start(self) -> Self:
        if not self._begun:
            position = self.start_index
            if position < 0:
                count, _ = await self._meta()
                position = start_position(position, count)
            self._next = position
            self._begun = True
        return self

    def __await__(self) -> Generator[Any, None, Self]:
        return self.start().__await__()

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self

    @property
    def position(self) -> int:
        """The index of the next chunk this iterator yields."""
        return (self._next if self._begun else max(self.start_index, 0)) - len(self._buffer)

    async def __anext__(self) -> bytes:
        if self._buffer:
            return self._buffer.popleft()
        await self.start()
        while not self._finished and not self._stopped():
            count, done = await self._meta()
            if self._next < count:  # a read holds what a page holds: MAX_CHUNKS_PAGE chunks and the byte bound
                chunks = await self._read(self._next, min(count, self._next + MAX_CHUNKS_PAGE))
                self._next += len(chunks)
                self._buffer.extend(chunks)
                return self._buffer.popleft()
            if done or self._run_over:
                break
            if not self._checked or self._check_due():
                self._checked = True
                status = await self._run_status()
                if status is None:
                    raise RunNotFoundError(f"run {self.run_id} does not exist: its stream {self.name} can never "
                                           "receive a chunk", run_id=self.run_id)
                if run_over(status):
                    self._run_over = True  # one more count (the loop's next) sees every chunk there will be
                    continue
            await self._wait()
        self._finished = True
        raise StopAsyncIteration

    async def aclose(self) -> None:
        self._finished = True
        self._buffer.clear()
