"""How a child run is named: part of the durable format (every replay, retry and reader derives the same id),
kept apart so the client can find a run's children without importing the machinery that starts them."""

from __future__ import annotations

import base64
import hashlib

START_CHILD = "awsworld.start_child"
"""The built-in step that starts a child run; its step id is the call's id."""
MAX_READABLE_ID = 120  # longer derived ids are hashed, so nested children stay within the 200-character id limit


def child_run_id(parent_run_id: str, call_id: str) -> str:
    """The child run of ``parent_run_id``'s call ``call_id``: readable (``<parent>.<call>``) while short, else
    ``wrun_`` and a digest of that. Part of the durable format: every replay and retry must derive the same."""
    readable = f"{parent_run_id}.{call_id}"
    if len(readable) <= MAX_READABLE_ID:
        return readable
    digest = base64.b32encode(hashlib.sha256(readable.encode()).digest()).decode().rstrip("=")
    return f"wrun_{digest[:26]}"
