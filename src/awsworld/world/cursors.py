"""Opaque pagination cursors, the same for every World: URL-safe base64 of a small JSON object. A bad cursor is
a 400 naming ``cursor``, not a crash."""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, cast

from .errors import InvalidInputError


def encode_cursor(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> dict[str, Any] | None:
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidInputError("cursor is not one this World issued", field="cursor") from None
    if not isinstance(value, dict):
        raise InvalidInputError("cursor is not one this World issued", field="cursor")
    return cast(dict[str, Any], value)


def check_limit(limit: int, maximum: int) -> int:
    given = cast(object, limit)  # callers may be untyped: check what was really passed
    if not isinstance(given, int) or given < 1 or given > maximum:
        raise InvalidInputError(f"limit must be between 1 and {maximum}", field="limit")
    return limit
