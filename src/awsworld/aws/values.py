"""User values (inputs, outputs, results, payloads) as stored: JSON text, inline or in S3.

A value small enough rides in the DynamoDB item; a larger one is written to S3 once, before the commit, and
both the event and its entity keep the same reference. Reads resolve references transparently, and skip the
fetch when the caller asked for no data. A run with a data key (``aws/encryption``) has every value sealed
before it is stored, inline or in S3; size limits apply to the value as given. An S3 value carries its run's
expiry class as a tag, so the bucket's lifecycle keeps it as long as the items that reference it
(``aws/retention.py``).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import logging
import uuid
from collections import OrderedDict
from typing import Any

from ..world.limits import encode_value, value_json
from .clients import AWSClients
from .encryption.run_keys import EncryptionKeyError
from .resources import run_prefix
from .retention import expiry_tag_set, expiry_tagging

log = logging.getLogger("awsworld.values")

# How a value is stored: {"v": json-text} inline (as written), {"p": value} inline (as read back from an
# event block), {"x": base64 of the sealed json-text} inline and encrypted, or {"r": s3-key, "n": size} in S3
# ("x": 1 beside them when the object is sealed; ``n`` is the value's size before sealing).
StoredValue = dict[str, Any]


encode_json = value_json


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

    async def store(self, run_id: str, value: Any, field: str, *, expiry: int | None = None,
                    unsealed_if_key_lost: bool = False) -> StoredValue:
        """``value`` as an event holds it: inline, or a reference to the S3 object written here, tagged with the
        expiry class ``expiry`` (days; default: the run's as this process knows it).

        ``unsealed_if_key_lost``: stored in plain text when the run's key is lost (``EncryptionKeyError.lost``:
        KMS refuses it for good), instead of refusing the write: an operator's error that ends such a run
        (``Client.fail``, ``world.events.RunFailedData``), which no one could seal and no one could read sealed.
        A run whose key opens seals it as every value; a passing KMS fault still refuses the write."""
        text, data = encode_value(value, field, self.config.max_value_bytes)
        size = len(data)
        try:
            cipher = await self.clients.keys.for_writing(run_id)
        except EncryptionKeyError as error:
            if not (unsealed_if_key_lost and error.lost):
                raise
            log.warning("%s: its %s is stored unsealed", error, field)
            cipher = None
        if size <= self.config.inline_value_limit:
            return {"v": text} if cipher is None else {"x": cipher.seal_text(data)}
        key = f"{run_prefix(run_id)}values/{uuid.uuid4().hex}.json"
        days = expiry if expiry is not None else self.clients.retention.object_expiry(run_id)
        s3 = await self.clients.s3()
        body, content_type = (data, "application/json") if cipher is None else (cipher.seal(data),
                                                                                  "application/octet-stream")
        await s3.put_object(Bucket=self.config.bucket_name, Key=key, Body=body, ContentType=content_type,
                            Tagging=expiry_tagging(days))
        self._remember(key, size, value)
        return {"r": key, "n": size} if cipher is None else {"r": key, "n": size, "x": 1}

    async def retag(self, stored: StoredValue | None, expiry: int) -> None:
        """Give a stored value's object the expiry class ``expiry``: for a value stored before this process knew
        its run's retention (the commit that references it read the head). S3 still counts from the object's
        creation. Best effort: the value is recorded already, and a failure only leaves the class it had."""
        if not stored or "r" not in stored:
            return
        try:
            s3 = await self.clients.s3()
            await s3.put_object_tagging(Bucket=self.config.bucket_name, Key=stored["r"],
                                        Tagging=expiry_tag_set(expiry))
        except Exception as error:
            log.warning("could not set the expiry class of %s to %s days: %s", stored["r"], expiry, error)

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
    def _plain(stored: StoredValue) -> Any:
        if "p" in stored:  # inline in an event block, parsed with it
            return stored["p"]
        return decode_json(stored["v"])

    async def load(self, stored: StoredValue | None, run_id: str) -> Any:
        if stored is None:
            return None
        if "p" in stored or "v" in stored:
            return self._plain(stored)
        if "r" not in stored:  # inline, sealed
            cipher = await self.clients.keys.for_reading(run_id)
            return decode_json(cipher.open_text(stored["x"]).decode("utf-8"))
        key = stored["r"]
        hit = self._cache.get(key)
        if hit is not None:
            self._cache.move_to_end(key)
            return copy.deepcopy(hit[1])
        s3 = await self.clients.s3()
        response = await s3.get_object(Bucket=self.config.bucket_name, Key=key)
        async with response["Body"] as body:
            raw = await body.read()
        if stored.get("x"):
            raw = (await self.clients.keys.for_reading(run_id)).open(raw)
        value = decode_json(raw.decode("utf-8"))
        self._remember(key, len(raw), value)
        return copy.deepcopy(value)

    async def load_many(self, stored: list[StoredValue | None], run_id: str) -> list[Any]:
        """The values, those in S3 fetched at once. Inline ones (plain or sealed) are read here, without a task
        each: a page of the log asks for 1,000 values, nearly always all of them in hand."""
        values = [self._plain(s) if s is not None and ("p" in s or "v" in s) else None for s in stored]
        sealed = [i for i, s in enumerate(stored) if s is not None and "x" in s and "r" not in s]
        if sealed:
            cipher = await self.clients.keys.for_reading(run_id)
            for i in sealed:
                values[i] = decode_json(cipher.open_text((stored[i] or {})["x"]).decode("utf-8"))
        remote = [i for i, s in enumerate(stored) if s is not None and "r" in s]
        if remote:
            loaded = await asyncio.gather(*(self.load(stored[i], run_id) for i in remote))
            for i, value in zip(remote, loaded, strict=True):
                values[i] = value
        return values

