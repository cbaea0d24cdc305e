"""The shape an error takes in the log, and back: what a user needs to fix a failure, bounded so it always fits.

A stored error (``StructuredError``: a step's ``step_failed``/``step_retrying``, a run's ``run_failed``) holds
``name`` (the exception's class name, what ``StepError.error_type`` and the docs compare against), ``type`` (its
qualified name, ``myapp.errors.Declined``; just ``KeyError`` for a builtin), ``message`` and ``stack`` (the
traceback). A run that failed because a step failed and the workflow did not catch the ``StepError`` also holds
``stepName``, ``stepId``, ``attempt`` and ``cause``: the step's own error (its type, message and traceback), so
the run's error names the step and the original exception without reading the step.

Tracebacks are code, not user data, and are kept; but bounded: awsworld's own frames that run a body (the step
runner, the replay loop, asyncio) are dropped from the front, awsworld frames after the last user frame are
collapsed to the one that raised, and what is left keeps its last ``MAX_STACK_BYTES`` (the innermost frames,
where the user's code raised) behind a line that says how much was cut. A message is capped at
``MAX_ERROR_MESSAGE`` characters the same way.
"""

from __future__ import annotations

import asyncio
import os
import traceback
from typing import Any

from .errors import StepError

MAX_ERROR_MESSAGE = 32 * 1024
MAX_STACK_BYTES = 8 * 1024
"""A stored traceback keeps its last 8 KB (about 40 frames): enough for the user's frames of any real failure."""

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # awsworld/
_EXAMPLES = _PACKAGE + "examples" + os.sep
_ASYNCIO = os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep


def qualified_type(error: BaseException) -> str:
    """``module.QualName`` of the error's class, as Python's own traceback prints it (builtins unqualified)."""
    kind = type(error)
    module = kind.__module__
    return kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"


def structured_error(error: BaseException) -> dict[str, Any]:
    """``error`` as the log stores it (see the module's docstring). A ``StepError`` the workflow let through
    carries its step and the step's original error (``cause``)."""
    stored: dict[str, Any] = {"message": bounded_message(str(error) or type(error).__name__),
                              "name": type(error).__name__, "type": qualified_type(error),
                              "stack": format_stack(error)}
    if isinstance(error, StepError):
        stored.update({"stepName": error.step_name, "stepId": error.step_id, "attempt": error.attempt})
        stored["cause"] = {k: v for k, v in {"name": error.error_type, "type": error.qualified_type,
                                             "message": error.message, "stack": error.stack}.items()
                           if v is not None}
    return {k: v for k, v in stored.items() if v is not None}


def bounded_message(message: str) -> str:
    if len(message) <= MAX_ERROR_MESSAGE:
        return message
    # A message of megabytes would not fit the log: keep its head, say so.
    return f"{message[:MAX_ERROR_MESSAGE]}… ({len(message) - MAX_ERROR_MESSAGE} more characters cut)"


def format_stack(error: BaseException) -> str:
    """The traceback of ``error`` (and of its causes) with awsworld's runner frames left out, bounded."""
    report = traceback.TracebackException.from_exception(error)
    seen: set[int] = set()
    pending = [report]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        current.stack = traceback.StackSummary.from_list(user_frames(list(current.stack)))
        pending.extend(t for t in (current.__cause__, current.__context__) if t is not None)
        pending.extend(getattr(current, "exceptions", None) or [])
    return bounded_stack("".join(report.format()))


def user_frames(frames: list[traceback.FrameSummary]) -> list[traceback.FrameSummary]:
    """The frames from the first one outside awsworld and asyncio on, with awsworld's frames after the last
    user frame collapsed to the last of them (where the error was raised). All of them when none is the user's."""
    users = [i for i, frame in enumerate(frames) if not _internal(frame.filename)]
    if not users:
        return frames
    first, last = users[0], users[-1]
    return frames[first:last + 1] + frames[last + 1:][-1:]


def _internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    return (path.startswith(_PACKAGE) and not path.startswith(_EXAMPLES)) or path.startswith(_ASYNCIO)


def bounded_stack(text: str) -> str:
    """``text``'s last ``MAX_STACK_BYTES`` (UTF-8), after a line saying how much of its start was cut."""
    data = text.encode("utf-8")
    if len(data) <= MAX_STACK_BYTES:
        return text
    kept = data[-MAX_STACK_BYTES:].decode("utf-8", errors="ignore")
    kept = kept[kept.find("\n") + 1:] if "\n" in kept else kept  # start at a whole line
    return f"[traceback cut: its first {len(data) - len(kept.encode('utf-8'))} bytes are not kept]\n{kept}"


def error_summary(error: Any) -> str | None:
    """A stored error (a ``StructuredError`` or its dict) as one line, ``Name: message [code]``: for a step the
    workflow let through, ``StepError: step 'fetch' failed after 3 attempts: KeyError: 'missing'``. The one
    rendering the CLI, the UI and the logs share."""
    if error is None:
        return None
    if not isinstance(error, dict) and not hasattr(error, "model_dump"):
        return str(error)
    data: dict[str, Any] = error if isinstance(error, dict) else error.model_dump()
    name, message, code = data.get("name"), str(data.get("message", "")), data.get("code")
    text = f"{name}: {message}" if name else message
    return f"{text} [{code}]" if code else text


def failure_report(run_id: str, workflow_name: str, error: dict[str, Any], code: str | None) -> str:
    """The log line of a failed run: which run, how it failed (for a step's failure: which step, the original
    type and message), then the tracebacks, the step's first (where the user's code raised)."""
    lines = [f"run {run_id} ({workflow_name}) failed" + (f" [{code}]" if code else "") + f": {error_summary(error)}"]
    cause = error.get("cause")
    if isinstance(cause, dict):
        attempt = f", attempt {error['attempt']}" if error.get("attempt") else ""
        lines.append(f"  step {error.get('stepName')} ({error.get('stepId')}{attempt}) raised "
                     f"{cause.get('type') or cause.get('name')}: {cause.get('message', '')}")
        if cause.get("stack"):
            lines.append(_indented(str(cause["stack"])))
        if error.get("stack"):
            lines.append("  and the workflow did not catch it:")
    if error.get("stack"):
        lines.append(_indented(str(error["stack"])))
    return "\n".join(lines)


def _indented(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.rstrip("\n").splitlines())
