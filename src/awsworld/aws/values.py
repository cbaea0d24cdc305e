"""User values (inputs, outputs, results, payloads) as stored: JSON text, inline or in S3.

A value small enough rides in the DynamoDB item; a larger one is written to S3 once, before the commit, and
both the event and its entity keep the same reference. Reads resolve references transparently, and skip the
fetch when the caller asked for no data.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import uuid
from collections import OrderedDict
from typing import Any

from ..world.errors import InvalidInputError, PayloadTooLargeError
from .clients import AWSClients
from .resources import run_prefix

# How a value is stored: {"v": json-text} inline (as written), {"p": value} inline (as read back from an
# event block), or {"r": s3-key, "n": size} in S3.
StoredValue = dict[str, Any]


def encode_json(value: Any, field: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{field} is not JSON-serializable: {exc}", field=field) from None


def decode_json(text: str) -> Any:
    return json.loads(text)


class ValueStore:
    """Stores and loads values. S3 objects are immutable (each key is written once), so recently stored or
    loaded ones are kept in a small byte-bounded cache: answering a write does not read back what it wrote."""

    CACHE_BYTES = 64 * 1024 * 1024

    def __init__(self, clients: AWSClients) -> None:
        self.clients = clients
        self.config = clients.config
        self._cache: OrderedDict[str, tuple[int, Any]] = OrderedDict()
        self._cached_bytes = 0

    def _remember(self, key: str, size: int, value: Any) -> None:
        if size > self.CACHE_BYTES // 4:
            return
        self._cache[key] = (size, value)
        self._cached_bytes += size
        while self._cached_bytes > self.CACHE_BYTES:
            _, (old_size, _) = self._cache.popitem(last=False)
            self._cached_bytes -= old_size

    async def store(self, run_id: str, value: Any, field: str) -> StoredValue:
        text = encode_json(value, field)
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            # A lone surrogate is not UTF-8: escape it (JSON's \uXXXX), so it still round-trips exactly.
            text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
            data = text.encode("ascii")
        size = len(data)
        if size > self.config.max_value_bytes:
            raise PayloadTooLargeError(
                f"{field} is {size} bytes; the largest value awsworld stores is "
                f"{self.config.max_value_bytes} bytes (AWSWORLD_MAX_VALUE_BYTES)",
                field=field,
            )
        if size <= self.config.inline_value_limit:
            return {"v": text}
        key = f"{run_prefix(run_id)}values/{uuid.uuid4().hex}.json"
        s3 = await self.clients.s3()
        await s3.put_object(Bucket=self.config.bucket_name, Key=key, Body=data, ContentType="application/json")
        self._remember(key, size, value)
        return {"r": key, "n": size}

    async def discard(self, stored: StoredValue | None) -> None:
        """Delete the S3 object of a value whose write was refused (nothing references it). Best effort."""
        if not stored or "r" not in stored:
            return
        key = stored["r"]
        entry = self._cache.pop(key, None)
        if entry is not None:
            self._cached_bytes -= entry[0]
        with contextlib.suppress(Exception):
            s3 = await self.clients.s3()
            await s3.delete_object(Bucket=self.config.bucket_name, Key=key)

    @staticmethod
    def _inline(stored: StoredValue) -> Any:
        if "p" in stored:  # inline in an event block, parsed with it
            return stored["p"]
        return decode_json(stored["v"])

    async def load(self, stored: StoredValue | None) -> Any:
        if stored is None:
            return None
        if "r" not in stored:
            return self._inline(stored)
        key = stored["r"]
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return copy.deepcopy(hit[1])
        s3 = await self.clients.s3()
        response = await s3.get_object(Bucket=self.config.bucket_name, Key=key)
        async with response["Body"] as body:
            raw = await body.read()
        value = decode_json(raw.decode("utf-8"))
        self._remember(key, len(raw), value)
        return copy.deepcopy(value)

    async def load_many(self, stored: list[StoredValue | None]) -> list[Any]:
        """The values, those in S3 fetched at once. Absent and inline ones are read here, without a task each:
        a page of the log asks for 1,000 values, nearly always all of them already in hand."""
        values = [None if s is None or "r" in s else self._inline(s) for s in stored]
        remote = [i for i, s in enumerate(stored) if s is not None and "r" in s]
        if remote:
            for i, value in zip(remote, await asyncio.gather(*(self.load(stored[i]) for i in remote)), strict=True):
                values[i] = value
        return values

