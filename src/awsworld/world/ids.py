"""Identifiers of the contract: slot-numbered event ids, run ids, the spec version.

Event ids carry the event's 1-based position in its run's log, so a reader can tell a complete log from a
truncated one by its length alone; everything that reads positions goes through these two functions.
"""

from __future__ import annotations

import re

from ulid import ULID

from .errors import InvalidInputError

SPEC_VERSION_CURRENT = 8
"""The protocol version this World implements and stamps on every run it creates."""

IN_BAND_SEQ_AT_RUN_CREATION = 1
"""run_created counts as in-band: a new run holds seq = 1, seqInBand = 1."""

EVENT_ID_PREFIX = "evnt_"
SLOT_DIGITS = 26
RUN_ID_PREFIX = "wrun_"

_EVENT_ID = re.compile(r"^evnt_(\d{26})$")
# Ids become DynamoDB keys and S3 key segments: keep them printable, bounded and free of '#' and '/'.
_ENTITY_ID = re.compile(r"^[A-Za-z0-9_.:@=+\-]{1,200}$")


def slot_to_event_id(slot: int) -> str:
    if slot < 1:
        raise InvalidInputError(f"event slot must be >= 1, got {slot}", field="slot")
    return f"{EVENT_ID_PREFIX}{slot:0{SLOT_DIGITS}d}"


def event_id_to_slot(event_id: str) -> int:
    match = _EVENT_ID.match(event_id)
    if not match:
        raise InvalidInputError(f"not a slot-numbered event id: {event_id!r}", field="eventId")
    slot = int(match.group(1))
    if slot < 1:
        raise InvalidInputError(f"event id {event_id!r} names slot 0", field="eventId")
    return slot


def new_run_id() -> str:
    """A new run id: ``wrun_`` and a ULID, so runs sort by creation time."""
    return f"{RUN_ID_PREFIX}{ULID()}"


def new_ulid() -> str:
    return str(ULID())


def check_entity_id(value: object, field: str) -> str:
    """Reject ids that cannot safely become part of a DynamoDB key or an S3 object key."""
    if not isinstance(value, str) or not _ENTITY_ID.match(value):
        raise InvalidInputError(
            f"{field} must be 1-200 characters of letters, digits and _.:@=+- (got {value!r:.80})",
            field=field,
        )
    return value


DOT_SEGMENTS = frozenset({".", ".."})
"""Ids a URL path cannot carry: a client's URL parser drops a ``.`` or ``..`` segment (``%2e`` as well, by the
WHATWG URL rules ``fetch`` follows), so the World over HTTP would read or write another path (``steps.get(run,
".")`` reached ``GET /v1/runs/{run}/steps``, the list)."""


def check_path_id(value: object, field: str) -> str:
    """An id the World over HTTP puts in a URL path (a run's, a step's, hook's or wait's ``correlationId``, a
    stream's name): ``check_entity_id``'s, and not ``.`` or ``..`` (``DOT_SEGMENTS``). Checked where such an
    entity is made, in every World, so none exists that a TypeScript app could not reach."""
    checked = check_entity_id(value, field)
    if checked in DOT_SEGMENTS:
        raise InvalidInputError(f"{field} cannot be {checked!r}: a URL path drops a '.' or '..' segment, so the "
                                "World over HTTP could not reach it; name it otherwise", field=field)
    return checked
