"""``world.streams``: the contract's Streamer on S3 objects and a DynamoDB chunk index (see stream_store.py).

Every ``write`` is one S3 object and one transaction; ``write_multi`` and a write session's flush put many
chunks in one object and one transaction, which is what makes small chunks cheap.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..world.errors import InvalidInputError
from ..world.ids import check_entity_id
from ..world.streams import Chunk, StreamChunk, StreamChunkPage, StreamInfo, check_stream_name, chunk_bytes
from .clients import AWSClients
from .cursors import check_limit, decode_cursor, encode_cursor
from .stream_reader import ChunkReader, LiveStream
from .stream_session import WriteSession
from .stream_store import StreamStore

MAX_PAGE_CHUNKS = 1000


class StreamsAPI:
    # The contract's streamFlushIntervalMs: how long a write session gathers chunks before one flush.
    stream_flush_interval_ms: int = 10

    def __init__(self, clients: AWSClients, *, poll_interval: float = 0.05, max_poll_interval: float = 1.0,
                 run_check_interval: float = 2.0) -> None:
        self.store = StreamStore(clients)
        self.poll_interval = poll_interval
        self.max_poll_interval = max_poll_interval
        self.run_check_interval = run_check_interval

    async def write(self, run_id: str, name: str, chunk: Chunk) -> None:
        await self.write_multi(run_id, name, [chunk])

    async def write_multi(self, run_id: str, name: str, chunks: Sequence[Chunk]) -> None:
        """Append the chunks in order, as one S3 object and one commit (more only past 10,000 chunks or the
        object size cap). Closed stream: ``EntityConflictError``; finished run: ``RunGoneError``."""
        _check(run_id, name)
        if isinstance(chunks, str | bytes):
            raise InvalidInputError("chunks must be a sequence of chunks, not one chunk", field="chunks")
        data = [chunk_bytes(c, f"chunks[{i}]") for i, c in enumerate(chunks)]
        if data:
            await self.store.append(run_id, name, data)

    async def close(self, run_id: str, name: str) -> None:
        _check(run_id, name)
        await self.store.close(run_id, name)

    def get(self, run_id: str, name: str, start_index: int = 0) -> LiveStream:
        """``async for chunk in streams.get(...)``; ``await`` it first to fix a negative start now."""
        _check(run_id, name)
        if isinstance(start_index, bool) or not isinstance(start_index, int):
            raise InvalidInputError("start_index must be an integer", field="startIndex")
        return LiveStream(self.store, run_id, name, start_index, poll_interval=self.poll_interval,
                          max_poll_interval=self.max_poll_interval, run_check_interval=self.run_check_interval)

    async def get_chunks(self, run_id: str, name: str, *, limit: int = 100,
                         cursor: str | None = None) -> StreamChunkPage:
        """A snapshot page from the cursor (or the start); the cursor always points after the page."""
        _check(run_id, name)
        check_limit(limit, MAX_PAGE_CHUNKS)
        decoded = decode_cursor(cursor) or {"i": 0}
        start = decoded.get("i")
        if isinstance(start, bool) or not isinstance(start, int) or start < 0:
            raise InvalidInputError("cursor is not one this World issued", field="cursor")
        count, done = await self.store.meta(run_id, name)
        reader = ChunkReader(self.store, run_id, name, start)
        chunks = await reader.read(count, max_chunks=limit)
        return StreamChunkPage(
            data=[StreamChunk(index=start + i, data=c) for i, c in enumerate(chunks)],
            cursor=encode_cursor({"i": reader.position}), has_more=reader.position < count, done=done,
        )

    async def get_info(self, run_id: str, name: str) -> StreamInfo:
        _check(run_id, name)
        count, done = await self.store.meta(run_id, name)
        return StreamInfo(tail_index=count - 1, done=done)

    async def list(self, run_id: str) -> list[str]:
        check_entity_id(run_id, "runId")
        return await self.store.names(run_id)

    def create_write_session(self, run_id: str, name: str, writer_id: str, *, first_seq: int = 0,
                             flush_interval: float | None = None) -> WriteSession:
        """A writer's session: ``write(chunk_seq, chunks)`` in this writer's own sequence (0, 1, 2, ... from
        ``first_seq``; out-of-order calls wait for the gap), flushed in batches; ``close()`` ends the stream."""
        _check(run_id, name)
        check_entity_id(writer_id, "writerId")
        interval = self.stream_flush_interval_ms / 1000 if flush_interval is None else flush_interval
        return WriteSession(self.store, run_id, name, writer_id, first_seq=first_seq, flush_interval=interval)


def _check(run_id: str, name: str) -> None:
    check_entity_id(run_id, "runId")
    check_stream_name(name)
