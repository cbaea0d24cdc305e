"""User values (inputs, outputs, results, payloads) as stored: JSON text, inline or in S3.

A value small enough rides in the DynamoDB item; a larger one is written to S3 once, before the commit, and
both the event and its entity keep the same reference. Reads resolve references transparently, and skip the
fetch when the caller asked for no data.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

from ..world.errors import InvalidInputError, PayloadTooLargeError
from .clients import AWSClients
from .resources import run_prefix

# How a value is stored in an item: {"v": json-text} inline, or {"r": s3-key, "n": size}.
StoredValue = dict[str, Any]


def encode_json(value: Any, field: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(f"{field} is not JSON-serializable: {exc}", field=field) from None


def decode_json(text: str) -> Any:
    return json.loads(text)


class ValueStore:
    def __init__(self, clients: AWSClients) -> None:
        self.clients = clients
        self.config = clients.config

    async def store(self, run_id: str, value: Any, field: str) -> StoredValue:
        text = encode_json(value, field)
        data = text.encode("utf-8")
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
        return {"r": key, "n": size}

    async def load(self, stored: StoredValue | None) -> Any:
        if stored is None:
            return None
        if "v" in stored:
            return decode_json(stored["v"])
        s3 = await self.clients.s3()
        response = await s3.get_object(Bucket=self.config.bucket_name, Key=stored["r"])
        async with response["Body"] as body:
            return decode_json((await body.read()).decode("utf-8"))

    async def load_many(self, stored: list[StoredValue | None]) -> list[Any]:
        return list(await asyncio.gather(*(self.load(s) for s in stored)))


def stored_size(stored: StoredValue | None) -> int:
    if stored is None:
        return 0
    return len(stored["v"]) if "v" in stored else len(stored["r"]) + 16
