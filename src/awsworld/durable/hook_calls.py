"""How a workflow's resume of another run's hook is recorded: part of the durable format (every replay and retry
derives the same step name and the same idempotency key), kept apart so the engine, the worker and readers of a
log agree without importing the machinery that sends it.

A workflow's ``resume_hook`` (``authoring/resume.py``) is the built-in step ``RESUME_HOOK``: the engine records
and replays it like any step (by name only, ``RESUME_HOOK_CALL``), and the worker runs its body
(``_worker/resume_calls.py``), which resumes the hook under ``resume_key``: one key per call, the same on every
attempt, so a retry after a crash between the target's ``hook_received`` and this step's end records nothing new.
"""

from __future__ import annotations

from .child_calls import BuiltinStep

RESUME_HOOK = "awsworld.resume_hook"
"""The built-in step that resumes a hook from a workflow; its arguments are ``(token, payload, waits)``."""
KEY_PREFIX = "awsworld.resume_hook:"
"""The idempotency key of a workflow's resume is this, the sending run's id, ``:`` and the step's id."""

RESUME_HOOK_CALL = BuiltinStep(RESUME_HOOK)

REFUSED = "refused"
"""The step's result when the World refused the resume for good, as ``{"refused": <kind>, "message": ...}`` and the
refusal's details: kind ``"closed"`` (the run that held the hook ended: ``runId``, ``runStatus``) or ``"not-found"``
(no hook holds the token: ``disposedHook``, the ``[run id, hook id]`` of the hook that held it, or None). A recorded
answer rather than a failed step, so the workflow raises the World's own error with its attributes on every replay
(``authoring/resume.py``). The result of a resume that was recorded is ``True``; of a look that found no hook yet
(a call with ``wait=``), ``False``."""


def resume_key(run_id: str, step_id: str) -> str:
    """The idempotency key (the target's ``resumeId``) of the resume made by step ``step_id`` of run ``run_id``:
    the same for every attempt of that call, different for every other call and run."""
    return f"{KEY_PREFIX}{run_id}:{step_id}"


__all__ = ["KEY_PREFIX", "REFUSED", "RESUME_HOOK", "RESUME_HOOK_CALL", "resume_key"]
