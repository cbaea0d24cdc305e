"""Opaque pagination cursors, in the same shape the AWS World issues (URL-safe base64 of a small JSON object:
``{"s": slot}`` for events, ``{"k": "STEP#id"}`` / ``{"k": "HOOK#id"}`` for steps and hooks, ``{"r": run id}``
for runs), so a cursor of one listing is refused by another and a bad one is a 400 naming ``cursor`` on both.
The codec is ``world/cursors.py``, the one every World uses; what each listing puts in it is read here."""

from __future__ import annotations

from ...world.cursors import check_limit, decode_cursor, encode_cursor
from ...world.errors import InvalidInputError

__all__ = ["check_limit", "encode_cursor", "key_after", "run_before", "slot_after"]


def _decode(cursor: str) -> dict[str, object]:
    value = decode_cursor(cursor)
    assert value is not None
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
