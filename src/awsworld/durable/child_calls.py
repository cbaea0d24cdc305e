"""How a child call is recorded: part of the durable format (every replay, retry and reader derives the same ids
and tokens), kept apart so the client, the viewer and the worker can find a run's children without importing
the machinery that starts them.

A child call is a built-in step (``START_CHILD``) and a hook (``child_token``). The engine declares the step by
name only (``START_CHILD_CALL``); its body does I/O (it creates the child run and wakes it), so the worker
implements it (``_worker/child_runs.py``), as it runs every other step's body."""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

START_CHILD = "awsworld.start_child"
"""The built-in step that starts a child run; its step id is the call's id."""
TOKEN_PREFIX = "awsworld.child:"
"""The token of the parent's hook that takes a child's outcome is this and the child's run id."""
LINK_KEY = "awsworld.child"
"""The key of a call's hook metadata: ``{"runId", "workflowName", "detached"}``."""
DEPTH_KEY = "depth"
"""The key of a child run's ``run_created`` executionContext that says how deeply it is nested: its parent's
depth plus one (``run_depth``), written by the start step (``_worker/child_runs.py``)."""
MAX_READABLE_ID = 120  # longer derived ids are hashed, so nested children stay within the 200-character id limit


def child_run_id(parent_run_id: str, call_id: str) -> str:
    """The child run of ``parent_run_id``'s call ``call_id``: readable (``<parent>.<call>``) while short, else
    ``wrun_`` and a digest of that. Part of the durable format: every replay and retry must derive the same."""
    readable = f"{parent_run_id}.{call_id}"
    if len(readable) <= MAX_READABLE_ID:
        return readable
    digest = base64.b32encode(hashlib.sha256(readable.encode()).digest()).decode().rstrip("=")
    return f"wrun_{digest[:26]}"


def run_depth(context: Mapping[str, Any] | None) -> int:
    """How deeply the run whose ``run_created`` executionContext is ``context`` is nested: its ``depth``; 0 for a
    run a client started (no ``parentRunId``); 1 for a child recorded before depths were (its chain counts from
    there). Read by the start step's check (``_worker/child_runs.py``), from the parent's record, beside the key
    it writes into the child's (``DEPTH_KEY``), so the format's reading and writing sit together."""
    if not context:
        return 0
    depth = context.get(DEPTH_KEY)
    if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 0:
        return depth
    return 1 if isinstance(context.get("parentRunId"), str) else 0


def child_token(run_id: str) -> str:
    """The token of the parent's hook that takes child ``run_id``'s outcome: the child derives it from its own id.
    (Guessable, unlike ``create_hook()``'s: it is never reachable over HTTP, only webhooks are, and anyone who
    can resume a hook through the World can read its token there anyway.)"""
    return f"{TOKEN_PREFIX}{run_id}"


@dataclass(frozen=True)
class BuiltinStep:
    """A step the runtime itself declares, by name: the engine records and replays it like any step, and the
    worker resolves its body (``_worker.child_runs.resolve_step``). Its result is awsworld's own JSON: no codec."""

    name: str
    codec: None = None
    args_codec: None = None

    @staticmethod
    def fn(*args: Any) -> Any:
        """Never called: the worker runs the built-in step's body (``_worker.child_runs``)."""
        raise NotImplementedError(args)


START_CHILD_CALL = BuiltinStep(START_CHILD)
