"""What the value round-trip modules (``test_e2e_values*.py``) share: the size classes, values of an exact
serialized size, the byte-exact comparison, and the backends they run on.

Every module that uses these runs on the three backends (``ALL_BACKENDS``: the in-memory World, LocalAWS on
moto, LocalAWS with DynamoDB Local) with ``AWSWORLD_MAX_VALUE_BYTES`` set to ``MAX_VALUE_BYTES`` (256 KiB), which
every World honours: "near the maximum" is then a few hundred kilobytes, cheap enough to send through every
boundary, and the mechanism is the one a 64 MiB value goes through (inline up to 16 KiB, S3 beyond, refused
past the limit with ``PayloadTooLargeError``).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from awsworld.aws.config import DEFAULT_INLINE_VALUE_LIMIT
from awsworld.durable import serde

MAX_VALUE_BYTES = 256 * 1024
INLINE = DEFAULT_INLINE_VALUE_LIMIT
ENVELOPE_ROOM = 1024
"""What a value may gain on its way (``{"args": [...], "kwargs": {}}``, a child's ``{"status", "result"}``)."""
SIZES = {"small": 1000, "over-inline": INLINE + 2048, "near-max": MAX_VALUE_BYTES - ENVELOPE_ROOM}
"""Serialized sizes (bytes of UTF-8 JSON) of the values each round trip carries."""
LIMIT_ENV = {"AWSWORLD_MAX_VALUE_BYTES": str(MAX_VALUE_BYTES)}

_UNIT = "日本語🚀é"
_UNIT_BYTES = len(_UNIT.encode())


def size_of(value: Any) -> int:
    """The bytes a value takes as the World stores it: its serialized JSON in UTF-8."""
    return len(serde.to_json_text(value).encode("utf-8"))


def blob(n: int) -> bytes:
    """``n`` bytes cycling through every byte value (no valid UTF-8 beyond the first 128)."""
    return (bytes(range(256)) * (n // 256 + 1))[:n]


def text_of(n: int) -> str:
    """Non-ASCII text of exactly ``n`` bytes of UTF-8 (CJK, an emoji, an accent; ASCII for the rest)."""
    return _UNIT * (n // _UNIT_BYTES) + "x" * (n % _UNIT_BYTES)


def sample(size: int) -> dict[str, Any]:
    """A value whose serialized JSON is exactly ``size`` bytes: non-ASCII text, bytes, nested containers and
    the typed values that travel in envelopes (datetime, Decimal, UUID, tuple); half the room is bytes."""
    value: dict[str, Any] = {
        "text": "héllo wörld — \u202eRTL\u202c — \x00\t\n \"quoted\" \\",
        "raw": bytes(range(256)),
        "nested": {"list": [1, -2.5, None, True, {"deep": [[], {}, ""]}], "pair": (1, "two"),
                   "when": datetime(2024, 2, 29, 23, 59, 59, 123456, tzinfo=UTC), "amount": Decimal("1234.5600"),
                   "id": UUID(int=2**127 + 12345), "$t": "a user key that looks like an envelope"},
        "blob": b"",
        "pad": "",
    }
    room = size - size_of(value)
    assert room >= 0, f"a sample is at least {size_of(value)} bytes"
    value["blob"] = blob(room // 2 // 4 * 3)
    value["pad"] = text_of(size - size_of(value))
    assert size_of(value) == size
    return value


def assert_same(got: Any, sent: Any) -> None:
    """Equal to the byte: both sides serialized compare exactly (so types, digits and key order count too)."""
    assert serde.to_json_text(got) == serde.to_json_text(sent)
    assert got == sent


def tag() -> str:
    return uuid.uuid4().hex[:12]
