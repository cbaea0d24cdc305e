"""The wire's conventions, one copy for the server (``_http/app.py``) and the Python client
(``client/http_world.py``), and what the TypeScript package (``packages/world-awsworld``) reads.

- Bodies are JSON in the contract's shapes (``WireModel.to_wire``: camelCase, ISO-8601 UTC dates, absent optional
  fields omitted, never ``null``). Values are opaque JSON: the Workflow SDK's bytes arrive as the tagged object
  ``{"__type": "Uint8Array", "data": "<base64>"}`` and go back byte for byte.
- An error is a non-2xx answer with ``{"error": {...}}``: ``name`` is the Workflow SDK's error class (what its
  runtime tests), ``status`` the HTTP status, ``code`` awsworld's stable code, ``type`` awsworld's own class (what
  the Python client raises again), ``message``, the fields the SDK reads (``runId``, ``token``, ``retryAfter``
  in seconds) and ``details`` (the awsworld error's own fields, for the Python client).
"""

from __future__ import annotations

from typing import Any

from ..world.errors import (
    EntityConflictError,
    HookAlreadyReceivedError,
    HookNotFoundError,
    RunGoneError,
    RunNotFoundError,
    RunNotSupportedError,
    ThrottledError,
    TooEarlyError,
    WorldError,
)
from ..world.events import Event

JSON = dict[str, Any]

SDK_RUN_NOT_FOUND = "WorkflowRunNotFoundError"
SDK_HOOK_NOT_FOUND = "HookNotFoundError"
SDK_CONFLICT = "EntityConflictError"
SDK_RUN_EXPIRED = "RunExpiredError"
SDK_TOO_EARLY = "TooEarlyError"
SDK_THROTTLE = "ThrottleError"
SDK_RUN_NOT_SUPPORTED = "RunNotSupportedError"
SDK_WORLD_ERROR = "WorkflowWorldError"


def sdk_name(error: WorldError) -> str:
    """The Workflow SDK's class for an awsworld error (its runtime reacts by name: a conflict or an expired run
    is "already done", a throttle or a 5xx is retried)."""
    if isinstance(error, HookNotFoundError):  # (a HookClosedError too: no live hook owns the token)
        return SDK_HOOK_NOT_FOUND
    if isinstance(error, RunNotSupportedError):
        return SDK_RUN_NOT_SUPPORTED
    for cls, name in ((RunNotFoundError, SDK_RUN_NOT_FOUND), (EntityConflictError, SDK_CONFLICT),
                      (RunGoneError, SDK_RUN_EXPIRED), (TooEarlyError, SDK_TOO_EARLY), (ThrottledError, SDK_THROTTLE)):
        if isinstance(error, cls):
            return name
    return SDK_WORLD_ERROR


def error_body(error: WorldError) -> JSON:
    """The ``{"error": ...}`` body of an awsworld error (its status is ``error.status``)."""
    details = {k: v for k, v in error.details.items() if v is not None}
    if isinstance(error, HookNotFoundError) and error.disposed_hook is not None:
        details["disposed_hook"] = list(error.disposed_hook)
    if isinstance(error, HookAlreadyReceivedError) and error.event is not None:
        details["event"] = error.event.to_wire()
    body: JSON = {"name": sdk_name(error), "message": error.message, "status": error.status, "code": error.code,
                  "type": type(error).__name__, "details": details}
    for key, wire in (("run_id", "runId"), ("retry_after", "retryAfter"), ("token", "token"),
                      ("run_spec_version", "runSpecVersion"), ("world_spec_version", "worldSpecVersion")):
        if details.get(key) is not None:
            body[wire] = details[key]
    return {"error": body}


def refusal_body(status: int, code: str, message: str) -> JSON:
    """The body of a refusal that is no World error (a bad route, a missing token): a ``WorkflowWorldError``."""
    return {"error": {"name": SDK_WORLD_ERROR, "message": message, "status": status, "code": code,
                      "type": WorldError.__name__, "details": {}}}


def _error_classes() -> dict[str, type[WorldError]]:
    found: dict[str, type[WorldError]] = {}
    pending: list[type[WorldError]] = [WorldError]
    while pending:
        cls = pending.pop()
        found[cls.__name__] = cls
        pending.extend(cls.__subclasses__())
    return found


def error_from_body(status: int, body: Any) -> WorldError:
    """The awsworld error an ``{"error": ...}`` body describes (its own class when this process knows it, else a
    ``WorldError`` with the status): what the Python client raises."""
    info = body.get("error") if isinstance(body, dict) else None
    if not isinstance(info, dict):
        error = WorldError(f"HTTP {status}: {str(body)[:200]}")
        error.status = status
        return error
    message = str(info.get("message") or f"HTTP {status}")
    details: JSON = dict(info.get("details") or {})
    cls = _error_classes().get(str(info.get("type")))
    if cls is not None:
        if isinstance(details.get("disposed_hook"), list):
            details["disposed_hook"] = tuple(details["disposed_hook"])
        if isinstance(details.get("event"), dict):
            details["event"] = Event.model_validate(details["event"])
        for attempt in (details, {}):  # (a class whose fields are fixed takes the message alone)
            try:
                rebuilt = cls(message, **attempt)
            except TypeError:
                continue
            rebuilt.details = {**rebuilt.details, **details}
            return rebuilt
    error = WorldError(message, **details)
    error.status = int(info.get("status") or status)
    error.code = str(info.get("code") or WorldError.code)
    return error


__all__ = ["error_body", "error_from_body", "refusal_body", "sdk_name"]
