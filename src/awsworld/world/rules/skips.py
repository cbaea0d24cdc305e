"""Skips, for every World: a wait, or a step's retry back-off, ended before its time by an operator
(``Client.skip_wait``, ``awsworld skip``), and recorded as such.

A skip is an ordinary event of the entity, so a replay reads it as it reads the normal one, and carries
``skipped`` (``{"by": "operator"}``) so the log says who ended the wait early; the World adds when it was due
(``dueAt``, from the entity's own state), so the record does not depend on what the operator's client read:

- a wait's skip is its ``wait_completed``: the wait completes as if its time had come (a sleep returns, a hook's
  timeout passes). Replaying it is replaying a normal wake.
- a retry back-off's skip is a ``step_retrying`` of a step that waits for its retry (pending, with a
  ``retryAfter``): the step stays pending at the same attempt, with the error the request repeats, and may start
  at once (its ``retryAfter`` is cleared, so the next ``step_started`` is not too early). Anything else (a step
  running, queued without a back-off, or ended) is refused with 409 and nothing is written. The engine replays
  it as the back-off's end only: a poll does not count it as a poll.

What moves the run afterwards is the caller's: a wake (one flow message), since the run's own delayed message
is still hours away; that message, when it comes, finds nothing left to do.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal, cast

from ..errors import EntityConflictError, InvalidInputError
from ..events import CreateEventRequest

SKIPPED_FIELD = "skipped"
"""``wait_completed``'s and ``step_retrying``'s field: the wait was ended early, and by whom."""
SkippedBy = Literal["operator"]
BY_OPERATOR: SkippedBy = "operator"
SKIPPERS: frozenset[str] = frozenset({BY_OPERATOR})
DUE_FIELD = "dueAt"
"""In ``skipped``: when the wait would have ended (written by the World, from the entity it skipped)."""


def skip_request(by: SkippedBy = BY_OPERATOR) -> dict[str, Any]:
    """The ``skipped`` a caller writes (the World fills in ``dueAt``)."""
    return {SKIPPED_FIELD: {"by": by}}


def requested(req: CreateEventRequest) -> dict[str, Any] | None:
    """The request's ``skipped``, checked (400 for a malformed one, before any state is read), or None."""
    extra = req.data().__pydantic_extra__ or {}
    raw: object = extra.get(SKIPPED_FIELD)
    if raw is None:
        return None
    by = cast("dict[str, object]", raw).get("by") if isinstance(raw, dict) else None
    if by not in SKIPPERS:
        raise InvalidInputError(f"{SKIPPED_FIELD} must be an object whose \"by\" is one of {sorted(SKIPPERS)}",
                                field=f"eventData.{SKIPPED_FIELD}")
    return {"by": by}


def recorded(skip: dict[str, Any], due: datetime | None) -> dict[str, Any]:
    """``skipped`` as the event keeps it: who skipped, and when the wait was due."""
    return {**skip, DUE_FIELD: None if due is None else due.astimezone(UTC).isoformat(timespec="microseconds")}


def check_retry_skip(step_id: str | None, status: str, retry_after: datetime | None) -> None:
    """A back-off can only be skipped while the step waits for its retry."""
    if status != "pending" or retry_after is None:
        state = "running" if status == "running" else "queued without a back-off" if status == "pending" else status
        raise EntityConflictError(f"step {step_id} is not waiting for a retry (it is {state}): there is no "
                                  "back-off to skip")


def skipped(data: dict[str, Any] | None) -> dict[str, Any] | None:
    """An event's ``skipped`` record (for the log's readers), or None for a wait that ended on its own."""
    value = (data or {}).get(SKIPPED_FIELD)
    return cast("dict[str, Any]", value) if isinstance(value, dict) else None
