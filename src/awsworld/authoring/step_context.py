"""What a step body can see while it runs: its metadata, and streams of its run."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import datetime
from typing import TypeVar

from ..world.ids import new_ulid
from ..world.protocol import World
from ..world.streams import Chunk, check_chunk_sizes, chunk_bytes

log = logging.getLogger("awsworld.streams")

T = TypeVar("T")


@dataclass(frozen=True)
class StepMetadata:
    """What ``step_metadata()`` returns inside a running step.

    ``step_id`` names the step within its run (``"charge:0"``: not unique across runs). ``attempt`` counts the
    step's starts, 1 first: it goes up on every retry and also when an attempt was cut off (its delivery died,
    its lease passed) and the step is started again, which the retry policy's ``max_attempts`` counts too. So a
    key built from the attempt changes between a cut-off attempt and its re-run, whose side effect may then be
    made twice. ``idempotency_key`` does not: see there. ``started_at``: when this attempt started."""

    run_id: str
    step_id: str
    step_name: str
    attempt: int
    started_at: datetime | None

    @property
    def idempotency_key(self) -> str:
        """``"<run id>:<step id>"``: the same for every attempt and every re-run of this step in this run (a
        retry, a cut-off attempt run again, a take-over, a replay) and different for every other step and run.
        Pass it to a system the step calls (a payment provider's idempotency key) so that however often the
        body runs, the effect happens once per step. Want one effect per attempt instead? Add ``attempt``, and
        know that a cut-off attempt's re-run is a new attempt."""
        return f"{self.run_id}:{self.step_id}"


class StreamWriter:
    """Writes chunks to one of the run's streams, in the order of the calls, through a write session of its own.

    Like a buffered file write, ``write`` returns once the chunk is accepted: chunks written within the window
    (``AWSWORLD_STREAM_FLUSH_MS``, 50 ms) share one S3 object and one commit, and a live reader sees them at
    most one window (plus the flush) later. They are durable when ``flush`` or ``close`` returns, and always
    before the step's end is recorded: the step runner flushes every writer of the step first. A flush that
    failed is raised by the next ``write``/``flush``/``close``, or fails the step's attempt at its end. A chunk
    larger than the World takes (``AWSWORLD_MAX_VALUE_BYTES`` less its frame) is refused by its ``write`` with
    ``PayloadTooLargeError``; the chunks before it and the writer are untouched.
    """

    def __init__(self, world: World, run_id: str, name: str, step: StepMetadata | None = None) -> None:
        """``step``: the step whose body got this writer; once it has ended (``StepContext.run``), a write is
        refused: its chunks are made durable at the step's end, and a process may be frozen or gone after it (a
        Lambda invocation that returned), so a chunk written later could be lost without a word."""
        self.run_id = run_id
        self.name = name
        self.step = step
        self.ended = False
        self._seq = 0
        self._session = world.streams.create_write_session(run_id, name, f"wrtr_{new_ulid()}")

    async def write(self, chunk: Chunk) -> None:
        await self._write([chunk_bytes(chunk, max_chunk_bytes=self._session.max_chunk_bytes)])

    async def write_many(self, chunks: Sequence[Chunk]) -> None:
        """The chunks in order and contiguously (one batch)."""
        data = [chunk_bytes(c, f"chunks[{i}]", self._session.max_chunk_bytes) for i, c in enumerate(chunks)]
        if data:
            await self._write(data)

    async def _write(self, chunks: list[bytes]) -> None:
        if self.ended:
            of = f"step {self.step.step_name!r} ({self.step.step_id})" if self.step is not None else "its step"
            raise RuntimeError(f"stream {self.name!r} of run {self.run_id}: {of} has ended, so this writer takes no "
                               "more chunks (a chunk written after its step could be lost: the step's end is "
                               "what makes them durable); write within the step's body, awaiting any task that "
                               "writes before it returns")
        # A chunk the World cannot take is refused here, at the call, before it takes a place in the sequence
        # (a place never filled would hold up every later chunk of this writer).
        check_chunk_sizes(chunks, self._session.max_chunk_bytes)
        seq, self._seq = self._seq, self._seq + 1  # taken before any await: concurrent calls keep call order
        await self._session.write(seq, chunks)

    async def flush(self) -> None:
        """Make every chunk written so far durable."""
        await self._session.flush()

    async def close(self) -> None:
        """Flush, then end the stream."""
        await self._session.close()


@dataclass
class StepContext:
    world: World
    metadata: StepMetadata
    writers: dict[str, StreamWriter] = field(default_factory=dict)
    ended: bool = False  # the body has returned or raised: its writers take no more chunks (``StreamWriter``)

    def writer(self, name: str) -> StreamWriter:
        if name not in self.writers:
            self.writers[name] = StreamWriter(self.world, self.metadata.run_id, name, self.metadata)
            self.writers[name].ended = self.ended  # (a task the body left behind asking for a writer)
        return self.writers[name]

    async def run(self, body: Awaitable[T]) -> T:
        """Await the step body, then make every chunk its writers accepted durable, so the step's end is never
        recorded before its chunks. A failed flush fails the attempt as if the body had raised it; when the body
        raised, its chunks are flushed still and a flush failure is added to its error as a note."""
        try:
            result = await body
        except Exception as error:
            await self._flush_writers(error)
            raise
        finally:
            self.ended = True
            for writer in self.writers.values():
                writer.ended = True  # (before the flush awaits, on success: a task still writing meets it at once)
        await self._flush_writers(None)
        return result

    async def _flush_writers(self, failure: Exception | None) -> None:
        if not self.writers:  # (most bodies write no stream: no gather, no future)
            return
        writers = list(self.writers.values())
        outcomes = await asyncio.gather(*(w.flush() for w in writers), return_exceptions=True)
        errors = [(w, e) for w, e in zip(writers, outcomes, strict=True) if isinstance(e, BaseException)]
        if not errors:
            return
        if failure is None:
            first = errors[0][1]
            for writer, error in errors[1:]:
                first.add_note(f"stream {writer.name!r} failed to flush too: {error!r}")
            raise first
        for writer, error in errors:
            log.warning("stream %s of run %s: chunks written before the step failed are not durable: %r",
                        writer.name, writer.run_id, error)
            failure.add_note(f"stream {writer.name!r}: chunks written before this error are not durable ({error!r})")


current_step: ContextVar[StepContext | None] = ContextVar("awsworld_step", default=None)
"""The step whose body this task runs (set by the worker around the body: ``_worker/step_runner.py``), for
``step_metadata()``, ``get_writable()`` and ``now()`` inside a step."""
