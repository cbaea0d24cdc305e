"""Opaque pagination cursors, the same for every World: URL-safe base64 of a small JSON object (``{"s": slot}``
for events, ``{"k": "STEP#id"}`` / ``{"k": "HOOK#id"}`` for steps and hooks, ``{"r": run id}`` for runs), so a
cursor of one listing is refused by another. A bad cursor is a 400 naming ``cursor``, not a crash."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from .entities import run_status_filter
from .errors import InvalidInputError
from .pages import MAX_ENTITIES_PAGE, MAX_RUNS_PAGE

STEP_KEYS = "STEP#"
"""The prefix of a steps cursor's key (the AWS World's step sort keys are these keys)."""
HOOK_KEYS = "HOOK#"
"""The prefix of a hooks cursor's key (the AWS World's hook sort keys are these keys)."""


def encode_cursor(value: dict[str, Any]) -> str:
    return base64.urlsafe_b64encode(json.dumps(value, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> dict[str, Any] | None:
    if cursor is None:
        return None
    try:
        padded = cursor + "=" * (-len(cursor) % 4)
        value = json.loads(base64.urlsafe_b64decode(padded.encode()))
    except (binascii.Error, ValueError, UnicodeDecodeError):
        raise _refused() from None
    if not isinstance(value, dict):
        raise _refused()
    return cast(dict[str, Any], value)


def slot_cursor(slot: int) -> str:
    """An events page's cursor, after ``slot`` (its last event, or where it started when empty): an events page
    always has one, so a reader can come back for what is written later."""
    return encode_cursor({"s": slot})


def key_cursor(keys: Sequence[str], more: bool) -> str | None:
    """A steps or hooks page's cursor: after its last key (``STEP#id``, ``HOOK#id``), only when more exist."""
    return encode_cursor({"k": keys[-1]}) if keys and more else None


def run_cursor(run_ids: Sequence[str], more: bool) -> str | None:
    """A runs page's cursor: below its last (oldest) run id, only when more exist."""
    return encode_cursor({"r": run_ids[-1]}) if run_ids and more else None


def events_page_after(cursor: str | None, limit: int, maximum: int, *, correlation_id: str | None = None,
                      by_correlation: bool = False) -> int:
    """An events listing's arguments checked in every World's order (the limit, the correlation id of a listing
    by one, the cursor): the slot the page starts after."""
    check_limit(limit, maximum)
    if by_correlation and not correlation_id:
        raise InvalidInputError("correlation_id is required", field="correlationId")
    return slot_after(cursor)


@dataclass(frozen=True, slots=True)
class RunsQuery:
    """A runs listing's checked arguments: the statuses asked for (None: any) and the run id the page starts
    below (None: the newest)."""

    statuses: list[str] | None
    before: str | None


def runs_query(status: str | Sequence[str] | None, cursor: str | None, limit: int) -> RunsQuery | None:
    """A runs listing's arguments checked in every World's order (the limit, the status filter, the cursor); None
    when the filter matches nothing (``status=[]``, like SQL ``IN ()``): the answer is an empty page."""
    check_limit(limit, MAX_RUNS_PAGE)
    statuses = run_status_filter(status)
    if statuses == []:
        return None
    return RunsQuery(statuses, run_before(cursor))


def entities_page_after(cursor: str | None, limit: int, prefix: str) -> str | None:
    """A steps (``STEP#``) or hooks (``HOOK#``) listing's arguments checked in every World's order (the limit,
    then the cursor): the key the page starts after."""
    check_limit(limit, MAX_ENTITIES_PAGE)
    return key_after(cursor, prefix)


def first_page(keys: Sequence[str], limit: int) -> tuple[list[str], bool]:
    """The page of a listing that found ``keys`` in its order (at least ``limit`` + 1 when more exist): the first
    ``limit`` of them, and whether more exist."""
    return list(keys[:limit]), len(keys) > limit


def _refused() -> InvalidInputError:
    return InvalidInputError("cursor is not one this World issued", field="cursor")


def slot_after(cursor: str | None) -> int:
    """The slot an events cursor resumes after (0 without a cursor)."""
    decoded = decode_cursor(cursor)
    if decoded is None:
        return 0
    slot = decoded.get("s")
    if not isinstance(slot, int) or slot < 0:
        raise _refused()
    return slot


def key_after(cursor: str | None, prefix: str) -> str | None:
    """The key (``prefix`` + entity id) a steps (``STEP#``) or hooks (``HOOK#``) cursor resumes after."""
    decoded = decode_cursor(cursor)
    if decoded is None:
        return None
    key = decoded.get("k")
    if not isinstance(key, str) or not key.startswith(prefix):
        raise _refused()
    return key


def run_before(cursor: str | None) -> str | None:
    """The run id a runs cursor resumes below (runs list newest first)."""
    decoded = decode_cursor(cursor)
    if decoded is None:
        return None
    run_id = decoded.get("r")
    if not isinstance(run_id, str):
        raise _refused()
    return run_id


def check_limit(limit: int, maximum: int) -> int:
    given = cast(object, limit)  # callers may be untyped: check what was really passed
    if not isinstance(given, int) or given < 1 or given > maximum:
        raise InvalidInputError(f"limit must be between 1 and {maximum}", field="limit")
    return limit
