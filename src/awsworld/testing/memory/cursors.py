"""Opaque pagination cursors, in the same shape the AWS World issues (URL-safe base64 of a small JSON object:
``{"s": slot}`` for events, ``{"k": "STEP#id"}`` / ``{"k": "HOOK#id"}`` for steps and hooks, ``{"r": run id}``
for runs), so a cursor of one listing is refused by another and a bad one is a 400 naming ``cursor`` on both.
Kept here rather than imported from ``awsworld.aws`` so the in-memory World needs no AWS client libraries."""

from __future__ import annotations

import base64
import binascii
import json

from ...world.errors import InvalidInputError

CursorValue = str | int


def encode_cursor(value: dict[str, CursorValue]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode().rstrip("=")


def _decode(cursor: str) -> dict[str, object]:
    try:
        value = json.loads(base64.urlsafe_b64decode((cursor + "=" * (-len(cursor) % 4)).encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise InvalidInputError("cursor is not one this World issued", field="cursor") from None
    if not isinstance(value, dict):
        raise InvalidInputError("cursor is not one this World issued", field="cursor")
    return value


def _refused() -> InvalidInputError:
    return InvalidInputError("cursor is not one this World issued", field="cursor")


def slot_after(cursor: str | None) -> int:
    """The slot an events cursor resumes after (0 without a cursor)."""
    if cursor is None:
        return 0
    slot = _decode(cursor).get("s")
    if not isinstance(slot, int) or slot < 0:
        raise _refused()
    return slot


def key_after(cursor: str | None, prefix: str) -> str | None:
    """The entity id a steps (``STEP#``) or hooks (``HOOK#``) cursor resumes after."""
    if cursor is None:
        return None
    key = _decode(cursor).get("k")
    if not isinstance(key, str) or not key.startswith(prefix):
        raise _refused()
    return key.removeprefix(prefix)


def run_before(cursor: str | None) -> str | None:
    """The run id a runs cursor resumes below (runs list newest first)."""
    if cursor is None:
        return None
    run_id = _decode(cursor).get("r")
    if not isinstance(run_id, str):
        raise _refused()
    return run_id


def check_limit(limit: int, maximum: int) -> int:
    if not isinstance(limit, int) or limit < 1 or limit > maximum:
        raise InvalidInputError(f"limit must be between 1 and {maximum}", field="limit")
    return limit
