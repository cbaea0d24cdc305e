"""The Streamer part of the contract: chunk pages, stream info, write sessions, and the protocol.

A stream is named within a run; its chunks have dense 0-based indexes. ``get`` is a live iterator that waits
for new chunks and ends when the stream is closed; ``get_chunks`` is a paginated snapshot; ``get_info`` gives
the tail index (-1 when empty) and whether the stream is closed. Nothing here does I/O.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterable, Sequence
from typing import Protocol, runtime_checkable

from pydantic import ConfigDict, Field

from .cursors import decode_cursor, encode_cursor
from .errors import InvalidInputError, PayloadTooLargeError
from .ids import check_entity_id, check_path_id
from .limits import text_size_over
from .pages import CHUNKS_PAGE_BYTES
from .wire_model import WireModel

Chunk = str | bytes | bytearray | memoryview
FRAME_BYTES = 4
"""Every stored chunk carries a 4-byte length frame: a chunk and its frame fit ``AWSWORLD_MAX_VALUE_BYTES``."""


def max_chunk_bytes(max_value_bytes: int) -> int:
    """The largest chunk a World whose values may have ``max_value_bytes`` takes: the chunk and its frame fit."""
    return max_value_bytes - FRAME_BYTES


def check_chunk_sizes(chunks: Sequence[bytes], max_chunk_bytes: int | None, field: str = "chunk") -> None:
    """Refuse a chunk larger than ``max_chunk_bytes`` (None: no bound) with ``PayloadTooLargeError``, the same
    on every World and before anything is taken: a refused write leaves the stream and its writer as they were."""
    if max_chunk_bytes is None:
        return
    for chunk in chunks:
        if len(chunk) > max_chunk_bytes:
            raise _chunk_too_large(len(chunk), max_chunk_bytes, field)


def _chunk_too_large(size: int, max_chunk_bytes: int, field: str = "chunk") -> PayloadTooLargeError:
    return PayloadTooLargeError(f"a stream chunk is {size} bytes; the largest is {max_chunk_bytes} "
                                "(AWSWORLD_MAX_VALUE_BYTES less its 4-byte frame)", field=field)


def chunk_bytes(chunk: object, field: str = "chunk", max_chunk_bytes: int | None = None) -> bytes:
    """A chunk as bytes: strings are UTF-8. Anything else is a 400 naming the field. A chunk over
    ``max_chunk_bytes`` (None: no bound) is refused here as ``check_chunk_sizes`` refuses it, before its bytes
    are made: a text (``limits.text_size_over``) or a buffer over the bound costs no copy of itself."""
    if isinstance(chunk, bytes):
        return chunk
    if isinstance(chunk, str):
        if max_chunk_bytes is not None and (size := text_size_over(chunk, max_chunk_bytes)) is not None:
            raise _chunk_too_large(size, max_chunk_bytes)
        return chunk.encode("utf-8")
    if isinstance(chunk, bytearray | memoryview):
        size = chunk.nbytes if isinstance(chunk, memoryview) else len(chunk)
        if max_chunk_bytes is not None and size > max_chunk_bytes:
            raise _chunk_too_large(size, max_chunk_bytes)
        return bytes(chunk) if isinstance(chunk, bytearray) else chunk.tobytes()
    raise InvalidInputError(f"{field} must be str or bytes, not {type(chunk).__name__}", field=field)


def check_stream_name(name: object) -> str:
    """Stream names become DynamoDB sort keys, S3 key segments and URL path segments: the entity-id character set,
    and not ``.`` or ``..`` (``ids.check_path_id``)."""
    return check_path_id(name, "streamName")


def check_stream(run_id: str, name: str) -> None:
    """Every streams call names a run and a stream: both must be ids."""
    check_entity_id(run_id, "runId")
    check_stream_name(name)


def chunks_of(chunks: Sequence[Chunk], max_chunk_bytes: int | None = None) -> list[bytes]:
    """A ``write_multi``'s chunks as bytes, or the 400 of the first that is not a chunk (or the 413 of the first
    over ``max_chunk_bytes``: ``chunk_bytes``)."""
    if isinstance(chunks, str | bytes):
        raise InvalidInputError("chunks must be a sequence of chunks, not one chunk", field="chunks")
    return [chunk_bytes(c, f"chunks[{i}]", max_chunk_bytes) for i, c in enumerate(chunks)]


def check_start_index(start_index: object) -> int:
    if isinstance(start_index, bool) or not isinstance(start_index, int):
        raise InvalidInputError("start_index must be an integer", field="startIndex")
    return start_index


def start_position(start_index: int, count: int) -> int:
    """The index a read from ``start_index`` starts at in a stream of ``count`` chunks: a negative one counts
    from the tail (-2: the last two), and one past the head starts at 0. A live reader fixes it at its first
    read (``rules.streams.LiveReader``), ``awsworld streams --from`` when it starts."""
    return max(0, count + start_index) if start_index < 0 else start_index


def page_start(cursor: str | None) -> int:
    """Where a ``get_chunks`` page starts: after the chunks its cursor's page held (0 without one)."""
    decoded = decode_cursor(cursor) or {"i": 0}
    start = decoded.get("i")
    if isinstance(start, bool) or not isinstance(start, int) or start < 0:
        raise InvalidInputError("cursor is not one this World issued", field="cursor")
    return start


def page_cursor(position: int) -> str:
    return encode_cursor({"i": position})


def page_take(lengths: Iterable[int], max_bytes: int = CHUNKS_PAGE_BYTES) -> int:
    """How many of the chunks whose byte lengths ``lengths`` gives, in stream order, one page (a ``get_chunks``
    page or a live reader's read) takes: at least one, then more while the page holds under ``max_bytes``. One
    rule for every World, so a page ends at the same chunk whichever World serves it; ``lengths`` is bounded
    by the caller (the page's chunk limit and the stream's count) and read only as far as needed."""
    taken, size = 0, 0
    for length in lengths:
        if taken and size >= max_bytes:
            break
        size += length
        taken += 1
    return taken


class StreamChunk(WireModel):
    model_config = WireModel.model_config | ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")
    index: int
    data: bytes


class StreamChunkPage(WireModel):
    """A snapshot page. ``cursor`` always points after the last chunk returned, so a caller can come back
    later for chunks written since; ``has_more`` says whether the snapshot holds more; ``done`` is the
    stream's closed flag, read before the page."""

    data: list[StreamChunk] = Field(default_factory=list[StreamChunk])
    cursor: str | None = None
    has_more: bool = False
    done: bool = False


class StreamInfo(WireModel):
    tail_index: int = -1
    done: bool = False


@runtime_checkable
class StreamWriteSession(Protocol):
    """One writer's lifetime on one stream. ``write`` orders this writer's chunks by its own sequence numbers
    (buffering out-of-order calls); ``flush`` makes every chunk written so far durable; ``close`` ends the stream
    and returns only when every chunk is durable; ``dispose`` releases resources without ending the stream;
    ``release`` flushes and stays usable. ``max_chunk_bytes``: the largest chunk ``write`` takes (None: any)."""

    @property
    def max_chunk_bytes(self) -> int | None: ...

    async def write(self, chunk_seq: int, chunks: Sequence[Chunk]) -> None: ...

    async def flush(self) -> None: ...

    async def close(self) -> None: ...

    async def dispose(self) -> None: ...

    async def release(self) -> None: ...


@runtime_checkable
class StreamsAPI(Protocol):
    async def write(self, run_id: str, name: str, chunk: Chunk) -> None: ...

    async def write_multi(self, run_id: str, name: str, chunks: Sequence[Chunk]) -> None: ...

    async def close(self, run_id: str, name: str) -> None: ...

    def get(self, run_id: str, name: str, start_index: int = 0) -> AsyncIterator[bytes]: ...

    async def get_chunks(self, run_id: str, name: str, *, limit: int = 100,
                         cursor: str | None = None) -> StreamChunkPage: ...

    async def get_info(self, run_id: str, name: str) -> StreamInfo: ...

    async def list(self, run_id: str) -> list[str]: ...

    def create_write_session(self, run_id: str, name: str, writer_id: str) -> StreamWriteSession: ...

