"""Event blocks: the events one transaction appends, stored as one item.

DynamoDB bills a transactional write 2 units per started KB of *every* item, so three small events written
together (a step's result and the next step's declaration) cost one item, not three. A block lives at the
slot of its first event (``EVT#<first slot>``); its events fill the following slots densely, so the block that
holds slot ``s`` is the one with the greatest first slot ``<= s``, never more than ``BLOCK_SPAN - 1`` slots
before it. The events are one JSON array (values inline as JSON, not as JSON-in-a-string), compressed with
zlib when that makes the item smaller; the S3 keys of large values the block references are kept beside it
uncompressed (``refs``), so a reference check (interrupted writes, orphan audits) never needs to decode.

Layout (``lv`` on the run head says which layout a run was written with): ``n`` events, ``at`` the time of
the transaction (all its events share it), ``e`` the JSON text or ``z`` the compressed bytes, ``refs``.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass
from typing import Any

from ..keys import event_key, slot_of_event_sk
from ..values import StoredValue

BLOCK_SPAN = 64
"""Most events one block holds (a batch is at most 40 events, a resilient start 2)."""
BLOCK_BYTES = 48 * 1024
"""A transaction's events start a new block past this many bytes of JSON (an item holds at most 400 KB)."""
COMPRESS_OVER = 512
"""Blocks smaller than this stay plain text: zlib's header would outweigh what it saves."""


@dataclass
class BlockEvent:
    """One event as stored in a block. ``val`` is how its payload field is stored: ``{"p": value}`` inline
    (already parsed), ``{"x": sealed}`` inline and encrypted, ``{"r": key, "n": size}`` in S3, or None."""

    run_id: str
    slot: int
    event_type: str
    correlation_id: str | None
    data: dict[str, Any]
    val: StoredValue | None
    created_at: str
    spec_version: int | None


def event_record(event_type: str, correlation_id: str | None, data: dict[str, Any], val: StoredValue | None,
            spec_version: int | None) -> str:
    """One event as JSON text; an inline value's JSON text is spliced in as is (it is already valid JSON)."""
    parts = [f'"t":{json.dumps(event_type)}']
    if correlation_id is not None:
        parts.append(f'"c":{json.dumps(correlation_id, ensure_ascii=False)}')
    if data:
        parts.append(f'"d":{json.dumps(data, ensure_ascii=False, separators=(",", ":"))}')
    if val is not None:
        if "v" in val:
            parts.append(f'"p":{val["v"]}')
        elif "r" not in val:  # sealed (base64: nothing to escape)
            parts.append(f'"x":"{val["x"]}"')
        else:
            parts.append(f'"r":{json.dumps(val, separators=(",", ":"))}')
    if spec_version is not None:
        parts.append(f'"s":{int(spec_version)}')
    return "{" + ",".join(parts) + "}"


def build_blocks(run_id: str, first_slot: int, records: list[tuple[str, str | None]],
                 created_at: str) -> list[dict[str, Any]]:
    """The block items for events at ``first_slot``... (each given as its ``event_record`` text and the S3 key
    of its value, if any): as few as the size bound allows."""
    blocks: list[dict[str, Any]] = []
    texts: list[str] = []
    refs: list[str] = []
    size = 0
    start = first_slot
    for text, ref in records:
        if texts and (size + len(text) > BLOCK_BYTES or len(texts) >= BLOCK_SPAN):
            blocks.append(_item(run_id, start, texts, refs, created_at))
            start += len(texts)
            texts, refs, size = [], [], 0
        texts.append(text)
        size += len(text)
        if ref is not None:
            refs.append(ref)
    if texts:
        blocks.append(_item(run_id, start, texts, refs, created_at))
    return blocks


END_BLOCK = "endBlock"
"""On an ended run's item: the first slot of the block holding the event with its end value (a failed run's
``run_failed``, a completed run's ``run_completed``; the block's key, ``event_key(run, slot)``), written in the write
that ends the run (``commit_loop.point_at_the_end_block``). A listing reads a failed run's error from that event,
and with values a completed run's output: with its block's key it reads the block in the ``BatchGetItem`` it makes
for the runs' first blocks (``entity_reads.EntityReads.runs``), where it made a Query of its own for each such run
(the block holding a slot is found by a range Query, ``EventReader.events_at``). A dozen bytes on that write of
the run's item; a run ended before it was kept has none, and is read as before."""


def block_holding(blocks: list[dict[str, Any]], slot: int) -> int | None:
    """The first slot of the block among ``blocks`` (``build_blocks``'s items) that holds ``slot``, if one does."""
    for block in blocks:
        first = slot_of_event_sk(block["sk"])
        if first <= slot < first + int(block["n"]):
            return first
    return None


def _item(run_id: str, first: int, texts: list[str], refs: list[str], created_at: str) -> dict[str, Any]:
    body = "[" + ",".join(texts) + "]"
    item: dict[str, Any] = {**event_key(run_id, first), "n": len(texts), "at": created_at}
    raw = body.encode("utf-8")
    packed = zlib.compress(raw, 6) if len(raw) > COMPRESS_OVER else None
    if packed is not None and len(packed) < len(raw):
        item["z"] = packed
    else:
        item["e"] = body
    if refs:
        item["refs"] = refs
    return item


READ_PROJECTION = {"ProjectionExpression": "pk, sk, #at, e, z", "ExpressionAttributeNames": {"#at": "at"}}
"""What ``block_events`` reads of a block item, for a Query of the log to ask for: not its count, TTL or S3 keys
(``refs``, one per large value: a long list in a value-heavy block). Fewer bytes on the wire and fewer attributes
to parse, for every page of the log (the capacity billed is the same: DynamoDB bills the whole item)."""


def block_events(item: dict[str, Any]) -> list[BlockEvent]:
    first = slot_of_event_sk(item["sk"])
    if "z" in item:
        raw = item["z"]
        body = zlib.decompress(bytes(raw.value if hasattr(raw, "value") else raw)).decode("utf-8")
    else:
        body = item["e"]
    records = json.loads(body)
    at = item["at"]
    run_id = item["pk"].removeprefix("RUN#")
    events = []
    for i, r in enumerate(records):
        val: StoredValue | None = None
        if "p" in r:
            val = {"p": r["p"]}
        elif "x" in r:
            val = {"x": r["x"]}
        elif "r" in r:
            val = r["r"]
        events.append(BlockEvent(run_id, first + i, r["t"], r.get("c"), r.get("d") or {}, val, at, r.get("s")))
    return events
