"""Stream storage: chunk bytes in S3, the dense chunk index in DynamoDB.

An append writes ONE S3 object holding its chunks as length-prefixed frames (``>I`` length, then the bytes),
then commits one TransactWriteItems:

- a ConditionCheck on the run item: it exists and is not terminal (a finished run takes no more chunks);
- an update of the stream's meta item (``RUN#<runId>`` / ``STREAM#<name>``: ``count``, ``done``) with the
  condition ``count = :seen AND done = false``: the tail is allocated at the commit, so two writers racing
  for the same indexes cannot both win, and the loser learns the new tail from the cancellation's item;
- a put of the segment item (``SEG#<name>#<first index>``: S3 key, count, packed chunk lengths).

The object is written before the commit, so every committed segment is readable. Readers take ``count`` from
the meta item first and read only below it; segments are contiguous below any committed count, so a reader
never sees a hole, a partial chunk or a reordering.
"""

from __future__ import annotations

import asyncio
import logging
import random
import struct
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate

from botocore.exceptions import ClientError

from ...world.entities import TERMINAL_RUN_STATUSES
from ...world.errors import (
    ThrottledError,
    WorldError,
)
from ...world.ids import new_ulid
from ...world.rules.streams import append_refusal, closed_stream
from ...world.streams import check_chunk_sizes
from ..clients import AWSClients
from ..dynamodb.items import Item, from_ddb, now_iso, to_ddb, to_ddb_value
from ..dynamodb.reads import get_item, query_prefix
from ..dynamodb.transactions import TransientStoreError, TxCancelled, TxOp, transact
from ..keys import STREAM_PREFIX, run_key, run_pk, segment_prefix, segment_sk, stream_key
from ..resources import TTL_ATTRIBUTE, run_prefix
from ..retention import expiry_tagging

log = logging.getLogger("awsworld.streams")

FRAME = struct.Struct(">I")
MAX_CHUNKS_PER_OBJECT = 10_000  # packed lengths: 40 KB of the segment item at most
MAX_ATTEMPTS = 200
_HINTS_KEPT = 10_000


def frame(chunks: Sequence[bytes]) -> bytes:
    return b"".join(FRAME.pack(len(c)) + c for c in chunks)


def stream_scope(name: str) -> str:
    """What a sealed chunk is bound to: its stream (a chunk moved to another stream does not open there)."""
    return f"stream:{name}"


def pack_lengths(chunks: Sequence[bytes]) -> bytes:
    return struct.pack(f">{len(chunks)}I", *(len(c) for c in chunks))


@dataclass(frozen=True)
class Segment:
    """One committed S3 object: chunks ``first .. first+count-1``."""

    sk: str
    first: int
    key: str
    lengths: tuple[int, ...]
    offsets: tuple[int, ...]
    """Byte offset of each frame in the object, and the object's size last."""
    run_id: str = ""
    name: str = ""
    sealed: bool = False
    """Each chunk is sealed with the run's data key (``aws/encryption``); lengths are the sealed lengths."""

    @property
    def count(self) -> int:
        return len(self.lengths)

    @property
    def end(self) -> int:
        return self.first + self.count

    @classmethod
    def from_item(cls, item: Item) -> Segment:
        raw = item["lengths"]
        packed = bytes(raw.value if hasattr(raw, "value") else raw)
        count = int(item["count"])
        lengths = struct.unpack(f">{count}I", packed)
        offsets = tuple(accumulate((FRAME.size + n for n in lengths), initial=0))
        return cls(item["sk"], int(item["first"]), item["key"], lengths, offsets, item.get("runId", ""),
                   item.get("streamName", ""), bool(item.get("x")))


def framed_size(chunks: Sequence[bytes]) -> int:
    """The bytes the chunks take in an object, frames included."""
    return sum(FRAME.size + len(c) for c in chunks)


def object_fits(count: int, framed_bytes: int, max_bytes: int) -> bool:
    """Whether one object (one segment item) may hold ``count`` chunks of ``framed_bytes``: at most
    MAX_CHUNKS_PER_OBJECT chunks (the segment's packed lengths) and ``max_bytes`` (the value size cap)."""
    return count <= MAX_CHUNKS_PER_OBJECT and framed_bytes <= max_bytes


def split_parts(chunks: Sequence[bytes], max_bytes: int) -> list[list[bytes]]:
    """The chunks in order as objects that each ``object_fits``."""
    parts: list[list[bytes]] = [[]]
    size = 0
    for chunk in chunks:
        check_chunk_sizes([chunk], max_bytes - FRAME.size)
        if parts[-1] and not object_fits(len(parts[-1]) + 1, size + FRAME.size + len(chunk), max_bytes):
            parts.append([])
            size = 0
        parts[-1].append(chunk)
        size += FRAME.size + len(chunk)
    return [p for p in parts if p]


async def _backoff(attempt: int) -> None:
    await asyncio.sleep(random.uniform(0, min(0.2, 0.003 * 2 ** min(attempt, 7))))


class StreamStore:
    def __init__(self, clients: AWSClients) -> None:
        self.clients = clients
        self.bucket = clients.config.bucket_name
        # (run, name) -> the tail this process last saw: a lone writer's guess is right, so it costs no read.
        self._tails: OrderedDict[tuple[str, str], int] = OrderedDict()

    # -- writing ---------------------------------------------------------------------------------------------

    async def append(self, run_id: str, name: str, chunks: Sequence[bytes], writer_id: str | None = None) -> int:
        """Append chunks in order (one object and one commit per part); return the first chunk's index."""
        first = -1
        for part in split_parts(chunks, self.clients.config.max_value_bytes):
            index = await self._append_object(run_id, name, part, writer_id)
            first = index if first < 0 else first
        return first

    async def _append_object(self, run_id: str, name: str, chunks: list[bytes], writer_id: str | None) -> int:
        key = f"{run_prefix(run_id)}streams/{name}/{new_ulid()}.bin"
        cipher = await self.clients.keys.for_writing(run_id)
        if cipher is not None:  # each chunk sealed alone: a ranged read of any chunks still opens them
            chunks = [cipher.seal(c, stream_scope(name)) for c in chunks]
        s3 = await self.clients.s3()
        # The object expires with the segment item that indexes it (aws/retention.py), by the same retention.
        await s3.put_object(Bucket=self.bucket, Key=key, Body=frame(chunks), ContentType="application/octet-stream",
                            Tagging=expiry_tagging(self.clients.retention.object_expiry(run_id)))
        try:
            return await self._commit(run_id, name, chunks, key, writer_id, sealed=cipher is not None)
        except BaseException:
            await asyncio.shield(self._forget_object(key))
            raise

    async def _commit(self, run_id: str, name: str, chunks: list[bytes], key: str, writer_id: str | None, *,
                      sealed: bool) -> int:
        seen = self._tails.get((run_id, name), 0)
        for attempt in range(MAX_ATTEMPTS):
            try:
                await transact(self.clients, self._ops(run_id, name, chunks, key, writer_id, seen, sealed=sealed))
            except TxCancelled as cancelled:
                seen = await self._after_cancel(run_id, name, cancelled, seen)
                if cancelled.conflict:
                    await _backoff(attempt)
                continue
            except TransientStoreError:
                await _backoff(attempt)
                continue
            self._remember(run_id, name, seen + len(chunks))
            return seen
        raise ThrottledError(f"could not append to stream {name}: too many concurrent writers")

    def _ops(self, run_id: str, name: str, chunks: list[bytes], key: str, writer_id: str | None,
             seen: int, *, sealed: bool) -> list[TxOp]:
        run = TxOp("ConditionCheck", "run", key=run_key(run_id))
        statuses = ", ".join(run.expr.v(s) for s in sorted(TERMINAL_RUN_STATUSES))
        run.condition = f"attribute_exists(pk) AND NOT ({run.expr.n('status')} IN ({statuses}))"

        meta = TxOp("Update", "meta", key=stream_key(run_id, name))
        e = meta.expr
        now = e.v(now_iso())
        # The stream's items expire with the run's other items (aws/retention.py), set when each is written.
        ttl = self.clients.retention.item_ttl(run_id, now_iso())
        meta.update = (f"SET {e.n('count')} = {e.v(seen + len(chunks))}, {e.n('done')} = {e.v(False)}, "
                       f"{e.n('updatedAt')} = {now}, {e.n('createdAt')} = if_not_exists({e.n('createdAt')}, {now}), "
                       f"{e.n('runId')} = {e.v(run_id)}, {e.n('streamName')} = {e.v(name)}, "
                       f"{e.n(TTL_ATTRIBUTE)} = if_not_exists({e.n(TTL_ATTRIBUTE)}, {e.v(ttl)})")
        open_at_seen = f"({e.n('count')} = {e.v(seen)} AND {e.n('done')} = {e.v(False)})"
        meta.condition = f"attribute_not_exists(pk) OR {open_at_seen}" if seen == 0 else open_at_seen

        segment = TxOp("Put", "segment", item={
            **stream_key(run_id, name), "sk": segment_sk(name, seen), "runId": run_id, "streamName": name,
            "first": seen, "count": len(chunks), "key": key, "lengths": pack_lengths(chunks),
            "bytes": sum(len(c) for c in chunks), "writerId": writer_id, "createdAt": now_iso(), TTL_ATTRIBUTE: ttl,
            "x": True if sealed else None,
        }, condition="attribute_not_exists(pk)")
        return [run, meta, segment]

    async def _after_cancel(self, run_id: str, name: str, cancelled: TxCancelled, seen: int) -> int:
        """Map a cancelled append to its contract error, or return the tail to try next."""
        run_reason = cancelled.failed("run")
        if run_reason is not None:
            run = run_reason.item or await get_item(self.clients, run_key(run_id))
            refused = append_refusal(run_id, name, str(run["status"]) if run is not None else None, closed=False)
            if refused is not None:
                raise refused
        meta_reason = cancelled.failed("meta")
        if meta_reason is not None:
            meta = meta_reason.item or await get_item(self.clients, stream_key(run_id, name))
            if meta is None:
                return 0
            if meta.get("done"):
                self._remember(run_id, name, int(meta["count"]))
                raise closed_stream(run_id, name)
            return int(meta["count"])
        if cancelled.failed("segment") is not None:  # cannot happen below a committed count; re-read the tail
            count, _ = await self.meta(run_id, name)
            return count
        return seen

    def _remember(self, run_id: str, name: str, count: int) -> None:
        self._tails[(run_id, name)] = count
        self._tails.move_to_end((run_id, name))
        while len(self._tails) > _HINTS_KEPT:
            self._tails.popitem(last=False)

    async def _forget_object(self, key: str) -> None:
        try:
            s3 = await self.clients.s3()
            await s3.delete_object(Bucket=self.bucket, Key=key)
        except Exception as error:  # an orphan object is harmless: nothing indexes it
            log.debug("could not delete the uncommitted stream object %s: %s", key, error)

    async def close(self, run_id: str, name: str) -> None:
        """Mark the stream done. Idempotent, and allowed after the run ended (finishing is not writing)."""
        ddb = await self.clients.dynamodb()
        now = to_ddb_value(now_iso())
        await ddb.update_item(
            TableName=self.clients.config.table_name, Key=to_ddb(stream_key(run_id, name)),
            UpdateExpression="SET #done = :true, #count = if_not_exists(#count, :zero), #updatedAt = :now, "
                             "#createdAt = if_not_exists(#createdAt, :now), #runId = :run, #name = :name, "
                             "#ttl = if_not_exists(#ttl, :ttl)",
            ExpressionAttributeNames={"#done": "done", "#count": "count", "#updatedAt": "updatedAt",
                                      "#createdAt": "createdAt", "#runId": "runId", "#name": "streamName",
                                      "#ttl": TTL_ATTRIBUTE},
            ExpressionAttributeValues={":true": to_ddb_value(True), ":zero": to_ddb_value(0), ":now": now,
                                       ":run": to_ddb_value(run_id), ":name": to_ddb_value(name),
                                       ":ttl": to_ddb_value(self.clients.retention.item_ttl(run_id, now_iso()))},
            ReturnConsumedCapacity="TOTAL",
        )

    # -- reading ---------------------------------------------------------------------------------------------

    async def meta(self, run_id: str, name: str) -> tuple[int, bool]:
        """(chunk count, done), read consistently; (0, False) for a stream never written."""
        item = await get_item(self.clients, stream_key(run_id, name))
        return (int(item["count"]), bool(item.get("done"))) if item else (0, False)

    async def run_status(self, run_id: str) -> str | None:
        item = await get_item(self.clients, run_key(run_id), ProjectionExpression="#s",
                              ExpressionAttributeNames={"#s": "status"})
        return str(item["status"]) if item else None

    async def names(self, run_id: str) -> list[str]:
        names: list[str] = []
        after: str | None = None
        while True:
            items, more = await query_prefix(self.clients, run_pk(run_id), STREAM_PREFIX, after_sk=after, limit=500)
            names.extend(i["sk"][len(STREAM_PREFIX):] for i in items)
            if not more or not items:
                return names
            after = items[-1]["sk"]

    async def segment_at(self, run_id: str, name: str, index: int) -> Segment | None:
        """The segment holding chunk ``index`` (the last one starting at or before it)."""
        ddb = await self.clients.dynamodb()
        response = await ddb.query(
            TableName=self.clients.config.table_name, ConsistentRead=True, ScanIndexForward=False, Limit=1,
            KeyConditionExpression="pk = :pk AND sk BETWEEN :lo AND :hi", ReturnConsumedCapacity="TOTAL",
            ExpressionAttributeValues={":pk": {"S": run_pk(run_id)}, ":lo": {"S": segment_prefix(name)},
                                       ":hi": {"S": segment_sk(name, index)}},
        )
        items = [i for i in (from_ddb(r) for r in response.get("Items", [])) if i]
        return Segment.from_item(items[0]) if items else None

    async def segments_after(self, run_id: str, name: str, after_sk: str | None, limit: int) -> list[Segment]:
        items, _ = await query_prefix(self.clients, run_pk(run_id), segment_prefix(name), after_sk=after_sk,
                                      limit=limit)
        return [Segment.from_item(i) for i in items]

    async def read(self, segment: Segment, lo: int, hi: int) -> list[bytes]:
        """Chunks ``lo .. hi-1`` (absolute indexes, inside the segment) with one ranged GET."""
        start, stop = segment.offsets[lo - segment.first], segment.offsets[hi - segment.first]
        s3 = await self.clients.s3()
        try:
            response = await s3.get_object(Bucket=self.bucket, Key=segment.key, Range=f"bytes={start}-{stop - 1}")
        except ClientError as error:
            raise WorldError(f"stream object {segment.key} is unreadable: {error}") from error
        async with response["Body"] as body:
            data = await body.read()
        chunks: list[bytes] = []
        offset = 0
        for length in segment.lengths[lo - segment.first : hi - segment.first]:
            (framed,) = FRAME.unpack_from(data, offset) if offset + FRAME.size <= len(data) else (-1,)
            if framed != length or offset + FRAME.size + length > len(data):
                raise WorldError(f"stream object {segment.key} does not match its index")
            chunks.append(data[offset + FRAME.size : offset + FRAME.size + length])
            offset += FRAME.size + length
        if segment.sealed:
            cipher = await self.clients.keys.for_reading(segment.run_id)
            chunks = [cipher.open(c, stream_scope(segment.name)) for c in chunks]
        return chunks

