"""How a hook's non-payloads are stored: a failure sent by an outside party (``Client.fail_hook``) and a heartbeat
(``Client.heartbeat_hook``), each a ``hook_received`` whose payload is an envelope.

A failure is a ``hook_received`` whose payload is an envelope that ``serde`` never produces for a user value: its
tag is not one of serde's, and a user dict with a ``"$t"`` key is escaped (``{"$t": "dict", ...}``). So no
payload a client sends through ``resume_hook`` (or the webhook route) can be taken for a failure, and a failure
travels the same path as a payload: the same event, the same idempotency keys, the same wake-up.

A heartbeat is a ``hook_received`` with another such envelope, marked ``heartbeat`` beside it so readers that
leave payloads out tell it from a payload. What the replay does with them is ``_engine/hook_timeouts.py``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..authoring.errors import HookFailedError
from .json_data import is_dict

FAILURE_TAG = "awsworld.hook_failure"
HEARTBEAT_TAG = "awsworld.hook_heartbeat"
MAX_FAILURE_MESSAGE = 4096
MAX_FAILURE_CODE = 256


def failure_payload(message: str, code: str | None = None) -> dict[str, Any]:
    """The stored payload of ``Client.fail_hook``: an envelope no user value serializes to."""
    value: dict[str, Any] = {"message": str(message)[:MAX_FAILURE_MESSAGE]}
    if code is not None:
        value["code"] = str(code)[:MAX_FAILURE_CODE]
    return {"$t": FAILURE_TAG, "v": value}


def heartbeat_payload() -> dict[str, Any]:
    """The stored payload of ``Client.heartbeat_hook``: an envelope no user value serializes to."""
    return {"$t": HEARTBEAT_TAG, "v": {}}


def is_heartbeat(raw: object) -> bool:
    return is_dict(raw) and raw.get("$t") == HEARTBEAT_TAG


def is_envelope(raw: object) -> bool:
    """Whether a stored payload is a failure's or a heartbeat's envelope, not a payload the workflow takes: a
    codec hook takes these as any hook does (``_worker/run_control.py``'s ``resume_hook`` checks only payloads)."""
    return is_dict(raw) and raw.get("$t") in (FAILURE_TAG, HEARTBEAT_TAG)


HEARTBEAT_FIELD = "heartbeat"
"""``hook_received``'s mark of a heartbeat (``True``), beside its envelope: readers of the log that leave payloads
out (``awsworld hooks``, ``resolve_data="none"``) tell heartbeats from payloads by it."""


def is_heartbeat_event(data: dict[str, Any] | None) -> bool:
    """Whether a ``hook_received``'s data is a heartbeat: marked so, or (a log from before the mark, read with its
    values) holding the heartbeat envelope. The CLI and the UI count it as a heartbeat, never as a payload."""
    if not data:
        return False
    return data.get(HEARTBEAT_FIELD) is True or is_heartbeat(data.get("payload"))


def hook_failure(token: str, raw: object) -> Callable[[], HookFailedError] | None:
    """The error a stored payload stands for, when it is a failure envelope (else None: an ordinary payload)."""
    if not is_dict(raw) or raw.get("$t") != FAILURE_TAG:
        return None
    value = raw.get("v")
    if not is_dict(value):
        return None
    message = str(value.get("message") or "the hook was failed")
    code = value.get("code")
    return lambda: HookFailedError(token, message, None if code is None else str(code))
