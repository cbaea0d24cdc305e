"""``world.streams``: the contract's Streamer on S3 objects and a DynamoDB chunk index (see stream_store.py).
The public methods, their checks and their order are every World's (``world/shared/streams.py``); this is how an
append becomes durable, how a page is read, how a reader waits and how a session flushes on AWS.

A commit (one S3 object and one transaction) costs the same for one chunk or a thousand, so chunks travel in
batches:

- A write session (``create_write_session``, what a step's ``get_writable`` uses) buffers: ``write`` returns
  once accepted and a flush commits everything buffered when the oldest chunk has waited the window
  (``AWSWORLD_STREAM_FLUSH_MS``, 50 ms by default; the contract's ``streamFlushIntervalMs``), at once past a
  size bound, and on flush/release/dispose/close (see stream_session.py).
- ``write``/``write_multi`` have no lifetime to flush into (a caller may write and exit), so they return
  only when their chunks are durable. Concurrent ones on one stream in this process share a commit: a write
  that arrives while a commit is in flight joins the next one (a group commit; a lone writer waits no
  window). Each call's chunks stay contiguous and calls land in the order they were made.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from ...settings import SETTINGS, Settings
from ...world.errors import WorldError
from ...world.shared.streams import Streamer
from ..clients import AWSClients
from .stream_reader import ChunkReader, LiveStream
from .stream_session import WriteSession
from .stream_store import StreamStore, framed_size, object_fits

FLUSH_ENV = Settings.stream_flush_ms.env
DEFAULT_FLUSH_MS = Settings.stream_flush_ms.default


def configured_flush_ms(environ: Mapping[str, str] | None = None) -> int:
    """The write window from ``AWSWORLD_STREAM_FLUSH_MS`` (milliseconds, 0 = flush at once), else 50."""
    return (SETTINGS if environ is None else Settings(environ)).stream_flush_ms


class StreamsAPI(Streamer[LiveStream, WriteSession, StreamStore]):
    """A durable append is one S3 object and one commit, shared with concurrent writes to the stream (more only
    past 10,000 chunks or the object size cap)."""

    def __init__(self, clients: AWSClients, *, poll_interval: float = 0.05, max_poll_interval: float = 1.0,
                 run_check_interval: float = 2.0, flush_interval_ms: int | None = None) -> None:
        super().__init__(StreamStore(clients),
                         flush_interval_ms=configured_flush_ms() if flush_interval_ms is None else flush_interval_ms,
                         max_value_bytes=clients.config.max_value_bytes)
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        self.run_check_interval = run_check_interval
        self._commits = GroupCommits(self.store, clients.config.max_value_bytes)

    async def _append(self, run_id: str, name: str, chunks: list[bytes]) -> None:
        await self._commits.append(run_id, name, chunks)

    async def _read_page(self, run_id: str, name: str, start: int, stop: int) -> list[bytes]:
        return await ChunkReader(self.store, run_id, name, start).read(stop)

    def _live_reader(self, run_id: str, name: str, start_index: int) -> LiveStream:
        return LiveStream(self.store, run_id, name, start_index, meta=lambda: self._meta(run_id, name),
                          run_status=lambda: self._run_status(run_id), poll_interval=self.poll_interval,
                          max_poll_interval=self.max_poll_interval, run_check_interval=self.run_check_interval)

    def _write_session(self, run_id: str, name: str, writer_id: str, *, first_seq: int,
                       flush_interval: float) -> WriteSession:
        return WriteSession(self.store, run_id, name, writer_id, first_seq=first_seq, flush_interval=flush_interval,
                            registry=self.sessions, close_stream=lambda: self.close(run_id, name),
                            max_chunk_bytes=self.max_chunk_bytes)


@dataclass
class _Batch:
    chunks: list[bytes] = field(default_factory=list)
    size: int = 0
    done: asyncio.Future[None] = field(default_factory=lambda: asyncio.get_running_loop().create_future())

    def __post_init__(self) -> None:  # an outcome no caller stayed for is not an "unretrieved" error
        self.done.add_done_callback(lambda done: done.cancelled() or done.exception())

    def fits(self, chunks: list[bytes], max_bytes: int) -> bool:
        return object_fits(len(self.chunks) + len(chunks), self.size + framed_size(chunks), max_bytes)

    def add(self, chunks: list[bytes]) -> None:
        self.chunks.extend(chunks)
        self.size += framed_size(chunks)


class GroupCommits:
    """Durable appends that share commits: per stream, one commit in flight; writes arriving meanwhile gather
    into the next batch (a call too big for one object gets a batch of its own, split as before)."""

    def __init__(self, store: StreamStore, max_bytes: int) -> None:
        self.store = store
        self.max_bytes = max_bytes
        self._queues: dict[tuple[str, str], deque[_Batch]] = {}
        self._tasks: dict[tuple[str, str], asyncio.Task[None]] = {}

    async def append(self, run_id: str, name: str, chunks: list[bytes]) -> None:
        key = (run_id, name)  # (a chunk over the size cap was refused by write_multi: no batch takes it)
        queue = self._queues.get(key)
        running = self._tasks.get(key)
        if queue is None or running is None or running.done() or running.get_loop() is not asyncio.get_running_loop():
            queue = self._queues[key] = deque()  # (a commit left on a loop that is gone never blocks this one)
            self._tasks[key] = asyncio.create_task(self._commit_all(key, queue),
                                                   name=f"awsworld-stream-commit-{name}")
        if not queue or not queue[-1].fits(chunks, self.max_bytes):
            queue.append(_Batch())
        batch = queue[-1]
        batch.add(chunks)
        await asyncio.wait({batch.done})  # a cancelled caller does not cancel the others' commit
        batch.done.result()

    async def _commit_all(self, key: tuple[str, str], queue: deque[_Batch]) -> None:
        await asyncio.sleep(0)  # let the writes of this turn of the loop join the first batch
        batch: _Batch | None = None
        try:
            while queue:
                batch = queue.popleft()
                try:
                    await self.store.append(*key, batch.chunks)
                except Exception as error:
                    batch.done.set_exception(error)
                else:
                    batch.done.set_result(None)
        finally:
            if self._queues.get(key) is queue:
                del self._queues[key], self._tasks[key]
            for left in [batch, *queue] if batch is not None else queue:  # cancelled: no writer may hang
                if not left.done.done():
                    left.done.set_exception(WorldError(f"a commit of stream {key[1]} was cancelled: its chunks "
                                                       "may not be durable"))
