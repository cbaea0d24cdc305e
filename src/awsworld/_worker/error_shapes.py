"""The shape an error takes in the log, and back: what a user needs to fix a failure, bounded so it always fits.

A stored error (``StructuredError``: a step's ``step_failed``/``step_retrying``, a run's ``run_failed``) holds
``name`` (the exception's class name, what ``StepError.error_type`` and the docs compare against), ``type`` (its
qualified name, ``myapp.errors.Declined``; just ``KeyError`` for a builtin), ``message`` and ``stack`` (the
traceback). A run that failed because a step failed and the workflow did not catch the ``StepError`` also holds
``stepName``, ``stepId``, ``attempt`` and ``cause``: the step's own error (its type, message and traceback), so
the run's error names the step and the original exception without reading the step. One that failed because a
child run failed and the workflow did not catch the ``ChildWorkflowError`` holds ``childRunId``,
``childWorkflowName`` and, in the same ``cause``, the child's original error: its own exception, or the step's
or grandchild's it let through (the innermost, never a chain: ``authoring.errors.original_error``).

Tracebacks are kept, and bounded so they always fit: awsworld's own frames that run a body (the step runner, the
replay loop, asyncio) are dropped from the front; awsworld frames after the last user frame are collapsed to the
one that raised (dropped for awsworld's own errors, a ``StepError`` say: the user's line that awaited matters); a
line over ``MAX_STACK_LINE`` (a long message, which ``message`` keeps) keeps its head; and what is left keeps its
last ``MAX_STACK_BYTES`` (the innermost frames, where the user's code raised) behind a line that says how much
was cut. A message is capped at ``MAX_ERROR_MESSAGE`` characters the same way. Like the message, a traceback's
last line may quote user data: it is stored as the event's payload (encrypted when payloads are), and logged only
on request (``LOG_ERRORS_ENV``).
"""

from __future__ import annotations

import asyncio
import logging
import os
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

from ..authoring.children import ChildWorkflowError
from ..authoring.durations import duration_text
from ..authoring.errors import BodyExitError, HookFailedError, StepError, StoredTraceback, cap_message
from ..durable.child_calls import START_CHILD, TOKEN_PREFIX, child_token
from ..settings import SETTINGS, Settings
from ..world.entities import ErrorBytes, error_name_and_message, stored_error
from ..world.events import Event

LOG_ERRORS_ENV = Settings.log_errors.env
"""``full``: a failed run's log line carries its error messages and tracebacks (``awsworld dev`` sets it); else
only what names the failure (run, step, types), since a message may quote user data."""
MAX_STACK_BYTES = 8 * 1024
"""A stored traceback keeps its last 8 KB (about 40 frames): enough for the user's frames of any real failure."""
MAX_STACK_LINE = 1024
CAUSE_FIELDS = ("name", "type", "message", "stack", "code")
"""What a run's error keeps of the error it stands for (``cause``), a step's or a child run's alike (``code``: a
child's ``HookFailedError``'s sender code, which its parent's ``Run.result()`` raises with)."""

CALLS_AFTER = "callsAfter"
"""On a run's error that stands for a step's or a child run's failure: how many calls the workflow made after
that failure reached it (``calls_after``). More than none means the workflow caught it and went on (a saga's
compensations) before raising it again, which ``describe`` says instead of "did not catch it"."""
CALLS_AFTER_NAMES = "callsAfterNames"
"""Those calls' names, each once, in call order, at most ``MAX_CALLS_NAMED`` (then ``...`` for the others)."""
MAX_CALLS_NAMED = 5

failures = logging.getLogger("awsworld.failures")

_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # awsworld/
_EXAMPLES = _PACKAGE + "examples" + os.sep
_ASYNCIO = os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep


def qualified_type(error: BaseException) -> str:
    """``module.QualName`` of the error's class, as Python's own traceback prints it (builtins unqualified)."""
    kind = type(error)
    module = kind.__module__
    return kind.__qualname__ if module in ("builtins", "__main__") else f"{module}.{kind.__qualname__}"


def error_message(error: BaseException) -> str:
    """``str(error)``, or what Python's own traceback says when the class's ``__str__`` raises (``<exception
    str() failed>``, here with what it raised): the error is still recorded with its type and traceback, where
    an ``__str__`` that raised out of here lost the delivery and the step then read as cut off."""
    try:
        return str(error)
    except Exception as broken:  # a user's __str__ (an f-string over an attribute its __init__ never set, say)
        return f"<exception str() failed: {type(broken).__name__}>"


def structured_error(error: BaseException) -> dict[str, Any]:
    """``error`` as the log stores it (see the module's docstring). A ``StepError`` the workflow let through
    carries its step, a ``ChildWorkflowError`` its child run, and either the original error (``cause``); a
    ``HookFailedError`` its sender's ``code`` (``fail_hook(..., code=...)``), so the run's error says it where
    ``describe`` and ``result`` show it. A body's ``sys.exit()`` is stored as the ``SystemExit`` it raised
    (``BodyExitError`` only carried it out of its task)."""
    if isinstance(error, BodyExitError):
        error = error.exit
    stored: dict[str, Any] = {"message": cap_message(error_message(error) or type(error).__name__),
                              "name": type(error).__name__, "type": qualified_type(error),
                              "stack": format_stack(error)}
    if isinstance(error, HookFailedError):
        stored["code"] = error.code
    cause: dict[str, Any] | None = None
    if isinstance(error, StepError):
        stored.update({"stepName": error.step_name, "stepId": error.step_id, "attempt": error.attempt})
        cause = {"name": error.error_type, "type": error.qualified_type, "message": error.message,
                 "stack": error.stack}
    elif isinstance(error, ChildWorkflowError):
        stored.update({"childRunId": error.run_id, "childWorkflowName": error.workflow_name})
        cause = error.original
    if cause is not None:
        stored["cause"] = stored_cause(cause) or None  # (another runtime's bytes: nothing to keep)
    return {k: v for k, v in stored.items() if v is not None}


def calls_after(events: Sequence[Event], error: Mapping[str, Any]) -> list[str]:
    """The calls the workflow made after the failure ``error`` stands for was recorded in its log (the step's
    last ``step_failed``; a child run's outcome, the ``hook_received`` on the child's hook), in log order: a step
    by its name, a child run as ``child <workflow>``, a sleep as ``sleep``, a hook as ``hook``. The log is in the
    order things happened, so a call after the failure is one the workflow made once the failure reached it (the
    other calls of a fan-out it failed in were recorded before). Empty for the run's own exception."""
    step_id, child = error.get("stepId"), error.get("childRunId")
    if not step_id and not child:
        return []
    hook_id = None
    if child:
        token = child_token(str(child))
        hook_id = next((e.correlation_id for e in events if e.event_type == "hook_created"
                        and (e.event_data or {}).get("token") == token), None)
    if step_id:
        ends = [i for i, e in enumerate(events) if e.event_type == "step_failed" and e.correlation_id == step_id]
    else:
        ends = [i for i, e in enumerate(events) if e.event_type == "hook_received" and e.correlation_id == hook_id
                and hook_id is not None]
    if not ends:
        return []
    names: list[str] = []
    for event in events[ends[-1] + 1:]:
        data = event.event_data or {}
        if event.event_type == "step_created":
            name = str(data.get("stepName") or "step")
            if name == START_CHILD:
                args = (data.get("input") or {}).get("args") if isinstance(data.get("input"), dict) else None
                name = f"child {args[0]}" if isinstance(args, list) and args and isinstance(args[0], str) else \
                    "child run"
            names.append(name)
        elif event.event_type == "wait_created" and not data.get("hookId"):  # (a hook's own timeout: the hook's)
            names.append("sleep")
        elif event.event_type in ("hook_created", "hook_conflict") and \
                not str(data.get("token") or "").startswith(TOKEN_PREFIX):  # (a child call's: its start step's)
            names.append("hook")
    return names


def note_calls_after(stored: dict[str, Any], events: Sequence[Event]) -> dict[str, Any]:
    """``stored`` (a run's error) with ``CALLS_AFTER`` and ``CALLS_AFTER_NAMES`` when the workflow made calls after
    the failure it stands for (``calls_after``), so what shows it can say the workflow caught it and went on."""
    names = calls_after(events, stored)
    if names:
        stored[CALLS_AFTER] = len(names)
        distinct = list(dict.fromkeys(names))
        stored[CALLS_AFTER_NAMES] = distinct[:MAX_CALLS_NAMED] + (["..."] if len(distinct) > MAX_CALLS_NAMED else [])
    return stored


def let_through(error: Mapping[str, Any]) -> str:
    """The line between a failed step's (child's) traceback and the workflow's: whether the workflow caught it
    and made calls before raising it again (``CALLS_AFTER``: a saga's compensations), or did not catch it."""
    count = error.get(CALLS_AFTER)
    if not isinstance(count, int) or count <= 0:
        return "the workflow did not catch it:"
    names = [str(name) for name in error.get(CALLS_AFTER_NAMES) or ()]
    what = f" ({', '.join(names)})" if names else ""
    return f"the workflow caught it, made {count} more call{'s' if count != 1 else ''}{what}, then raised it again:"


def caught_without_cause(error: Mapping[str, Any]) -> str | None:
    """``let_through``'s line for a run's error with no ``cause`` to show before the workflow's traceback (a
    cancelled child run has no error of its own) when the workflow made calls after it (compensations); else
    None: "did not catch it" says nothing there that the traceback does not."""
    if isinstance(error.get("cause"), dict) or not error.get(CALLS_AFTER) or not error.get("stack"):
        return None
    return let_through(error)


def stored_cause(original: Mapping[str, Any]) -> dict[str, Any]:
    """The error a run's error stands for, as its ``cause`` holds it: ``CAUSE_FIELDS`` only (a child's own
    ``cause`` is not nested: ``original`` is the innermost already), the message capped as every stored one is.
    Its traceback is the one the step's or the child's log stored, bounded there (``format_stack``)."""
    cause = {field: original.get(field) for field in CAUSE_FIELDS if original.get(field) is not None}
    if "message" in cause:
        cause["message"] = cap_message(str(cause["message"]))
    return cause


def format_stack(error: BaseException) -> str:
    """The traceback of ``error`` (and of its causes and the errors it was raised while handling) with awsworld's
    runner frames left out, bounded. The step's or child's traceback a ``StepError`` or ``ChildWorkflowError``
    carries (a ``StoredTraceback`` cause, ``authoring.errors.chain_stored_traceback``) is left out of the error
    itself, whose stored ``cause`` holds it already, and kept for one further down the chain (the booking's
    ``StepError`` a workflow raised its own error from, after compensating): nothing else stores that one."""
    report = traceback.TracebackException.from_exception(error)
    stores_cause = isinstance(error, StepError | ChildWorkflowError)
    seen: set[int] = set()
    pending = [report]
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        ours = _module_of(current).startswith("awsworld.")
        current.stack = traceback.StackSummary.from_list(user_frames(list(current.stack), raised_by_us=ours))
        if current is report and stores_cause and current.__cause__ is not None \
                and _is_stored_traceback(current.__cause__):
            current.__cause__ = None  # stored as the error's cause already
            # That cause was chained by the engine, not by a ``raise ... from``, so the error the workflow was
            # handling when it awaited (a saga's failed booking, when its compensation fails) is shown as Python
            # shows it: "During handling of the above exception, another exception occurred".
            current.__suppress_context__ = False
        pending.extend(t for t in (current.__cause__, current.__context__) if t is not None)
        pending.extend(getattr(current, "exceptions", None) or [])
    return bounded_stack("".join(report.format()))


def _is_stored_traceback(report: traceback.TracebackException) -> bool:
    """Whether ``report`` is of a ``StoredTraceback`` (``authoring.errors.chain_stored_traceback``)."""
    name = getattr(report, "exc_type_qualname", None)  # (Python 3.13 on; exc_type before)
    if not isinstance(name, str):
        kind: Any = getattr(report, "exc_type", None)
        name = getattr(kind, "__qualname__", "")
    return _module_of(report) == StoredTraceback.__module__ and name == StoredTraceback.__qualname__


def _module_of(report: traceback.TracebackException) -> str:
    """The module of the exception's class (``exc_type_module`` from Python 3.13, ``exc_type`` before)."""
    module = getattr(report, "exc_type_module", None)
    if isinstance(module, str):
        return module
    kind: Any = getattr(report, "exc_type", None)
    return str(getattr(kind, "__module__", "") or "")


def user_frames(frames: list[traceback.FrameSummary], *, raised_by_us: bool = False) -> list[traceback.FrameSummary]:
    """The frames from the first one outside awsworld and asyncio on, with awsworld's frames after the last
    user frame collapsed to the last of them (where the error was raised), or dropped for an error of awsworld's
    own (a ``StepError``: the user's line that awaited the step is what matters). When none is the user's: all of
    them for an error awsworld did not raise (a bug of its own shows where), none for one it raised about the
    user's code (the ``FatalError`` that a poll's predicate raised, ``step_runner._accepts``: its cause, chained
    before it, holds the user's line; the runner's frames that ran the body are noise there)."""
    users = [i for i, frame in enumerate(frames) if not _internal(frame.filename)]
    if not users:
        return [] if raised_by_us else frames
    first, last = users[0], users[-1]
    return frames[first:last + 1] + ([] if raised_by_us else frames[last + 1:][-1:])


def _internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    return (path.startswith(_PACKAGE) and not path.startswith(_EXAMPLES)) or path.startswith(_ASYNCIO)


def bounded_stack(text: str) -> str:
    """``text``'s last ``MAX_STACK_BYTES`` (UTF-8), after a line saying how much of its start was cut. A line
    longer than ``MAX_STACK_LINE`` (an exception's long message: the error's ``message`` keeps it) keeps its head,
    so the frames above it still fit."""
    text = "".join(_short_line(line) for line in text.splitlines(keepends=True))
    data = text.encode("utf-8")
    if len(data) <= MAX_STACK_BYTES:
        return text
    kept = data[-MAX_STACK_BYTES:].decode("utf-8", errors="ignore")
    kept = kept[kept.find("\n") + 1:] if "\n" in kept else kept  # start at a whole line
    return f"[traceback cut: its first {len(data) - len(kept.encode('utf-8'))} bytes are not kept]\n{kept}"


def _short_line(line: str) -> str:
    if len(line) <= MAX_STACK_LINE:
        return line
    end = "\n" if line.endswith("\n") else ""
    return f"{line[:MAX_STACK_LINE]}… ({len(line.rstrip()) - MAX_STACK_LINE} more characters cut){end}"


def error_summary(error: Any) -> str | None:
    """A stored error (a ``StructuredError`` or its dict) as one line, ``Name: message [code]``: for a step the
    workflow let through, ``StepError: step 'fetch' failed after 3 attempts: KeyError: 'missing'``; for a child
    run, ``ChildWorkflowError: child run … (orders.charge) failed: card declined (raised Declined)`` (the child's
    message does not name its type, a step's does). The one rendering the CLI, the UI and the logs share."""
    if error is None:
        return None
    if isinstance(error, ErrorBytes) or (isinstance(error, dict) and "__type" in error):
        name, message = error_name_and_message(error if isinstance(error, ErrorBytes) else stored_error(error))
        return f"{name}: {message}" if name else message
    if not isinstance(error, dict) and not hasattr(error, "model_dump"):
        return str(error)
    data: dict[str, Any] = error if isinstance(error, dict) else error.model_dump()
    name, message, code = data.get("name"), str(data.get("message", "")), data.get("code")
    text = f"{name}: {message}" if name else message
    cause = data.get("cause")
    if data.get("childRunId") and isinstance(cause, dict) and cause.get("name"):
        text += f" (raised {cause['name']})"
    return f"{text} [{code}]" if code else text


def error_details(error: Any) -> dict[str, Any] | None:
    """A stored error whole, as a document shows it (``describe``'s ``errorDetails``, ``events --json``, the UI):
    awsworld's structured error as stored; another runtime's bytes (the Workflow SDK's TypeScript runtime) read as
    ``name``, ``message`` and ``stack`` when ``ErrorBytes.read_fields`` reads them, so ``describe`` prints the
    app's message and traceback (it printed ``error None:``), else the bytes as stored."""
    if error is None:
        return None
    if isinstance(error, dict) and "__type" in error:
        error = stored_error(error)
    if isinstance(error, ErrorBytes):
        return error.read_fields() or error.model_dump(by_alias=True)
    if isinstance(error, dict):
        return error
    return error.model_dump(by_alias=True, exclude_none=True) if hasattr(error, "model_dump") else None


def error_brief(error: Any) -> str | None:
    """A stored error as one short line for a list of runs (``awsworld runs``, the UI's runs table): where and
    what, the original error's type and message first (``step orders.fetch: KeyError: 'missing'``, ``child
    orders.charge: Declined: card declined``), the run's own error as ``error_summary`` has it; line breaks read as
    spaces. Shorter than ``error_summary``, whose ``StepError: step 'fetch' failed after 3 attempts:`` would take a
    narrow column's room."""
    data: Any = error.model_dump(by_alias=True, exclude_none=True) if hasattr(error, "model_dump") else error
    cause = data.get("cause") if isinstance(data, dict) else None
    if isinstance(cause, dict) and (data.get("stepName") or data.get("childRunId")):
        where = f"step {data['stepName']}" if data.get("stepName") else f"child {data.get('childWorkflowName')}"
        text = f"{where}: {cause.get('name') or cause.get('type')}: {cause.get('message', '')}"
    else:
        text = error_summary(error) or ""
    return " ".join(text.splitlines()) or None


def failed_in(error: Mapping[str, Any]) -> str | None:
    """Where a run's error came from when it stands for another's (``cause``): ``step fetch (step_3, attempt 2)``
    or ``child run wrun_….step_1 (orders.charge)``; None for the run's own exception. The one wording
    ``describe``, ``events --full``, the UI and the failure log share."""
    if not isinstance(error.get("cause"), dict):
        return None
    if error.get("childRunId"):
        return f"child run {error['childRunId']} ({error.get('childWorkflowName')})"
    attempt = f", attempt {error['attempt']}" if error.get("attempt") else ""
    return f"step {error.get('stepName')} ({error.get('stepId')}{attempt})"


def failure_report(run_id: str, workflow_name: str, error: dict[str, Any], code: str | None, *,
                   full: bool | None = None) -> str:
    """The log line of a failed run: which run, and what failed: the step (id, attempt) or the child run and the
    original type for a step's or a child's failure the workflow let through, else the type. ``full`` (default:
    ``AWSWORLD_LOG_ERRORS=full``, which ``awsworld dev`` sets) adds the messages and the tracebacks, the step's
    (the child's) first (where the user's code raised). Off by default because a message may quote user data,
    which deployed logs never hold."""
    if full is None:
        full = SETTINGS.log_errors == "full"
    cause = error.get("cause")
    where = failed_in(error)
    cause_type = str(cause.get("type") or cause.get("name")) if isinstance(cause, dict) else ""
    head = f"run {run_id} ({workflow_name}) failed" + (f" [{code}]" if code else "") + ": "
    if not full:
        kind = str(error.get("type") or error.get("name") or "error")
        kind = str(error.get("name") or kind) if kind.startswith("awsworld.") else kind
        return head + kind + (f" in {where}: {cause_type}" if where else "")
    lines = [head + (error_summary(error) or "")]
    if isinstance(cause, dict):
        lines.append(f"  {where} raised {cause_type}: {cause.get('message', '')}")
        if cause.get("stack"):
            lines.append(_indented(str(cause["stack"])))
        if error.get("stack"):
            lines.append(f"  and {let_through(error)}")
    if (caught := caught_without_cause(error)) is not None:
        lines.append(f"  {caught}")
    if error.get("stack"):
        lines.append(_indented(str(error["stack"])))
    return "\n".join(lines)


def log_failure(run_id: str, workflow_name: str, error: dict[str, Any], code: str | None) -> None:
    """Log a failed run (``failure_report``) on ``awsworld.failures``, at WARNING: a run failing is the user's
    news, not awsworld's error. ``awsworld dev`` prints this logger's lines as they are; a deployed function's
    JSON line also carries ``failure_keys``, so Logs Insights can filter on the error type or the failed step."""
    failures.warning("%s", failure_report(run_id, workflow_name, error, code), extra=failure_keys(error, code))


def failure_keys(error: Mapping[str, Any], code: str | None) -> dict[str, Any]:
    """The structured keys of a failed run's log line: ``errorType``, ``errorCode``, and for a step's (a child's)
    failure the workflow let through the original's type (``causeType``) and where it came from (``stepId`` and
    ``stepAttempt``, or ``childRunId``). Types and ids only: a message may quote user data (``failure_report``)."""
    keys: dict[str, Any] = {"errorType": str(error.get("name") or error.get("type") or "error"), "errorCode": code}
    cause = error.get("cause")
    if isinstance(cause, dict):
        keys["causeType"] = str(cause.get("type") or cause.get("name") or "error")
        if error.get("childRunId"):
            keys["childRunId"] = error["childRunId"]
        else:
            keys.update(stepId=error.get("stepId"), stepName=error.get("stepName"), stepAttempt=error.get("attempt"))
    return {key: value for key, value in keys.items() if value is not None}


def retry_report(run_id: str, step_name: str, step_id: str, attempt: int, max_attempts: int,
                 error: Mapping[str, Any], retry_after: str, in_seconds: float, *, full: bool | None = None) -> str:
    """The log line of a step attempt that failed and will be retried: the run, the step, the attempt, when the
    next one starts, and how to start it now (``awsworld skip``, on dev and on a stack alike). ``full`` (see
    ``failure_report``) adds the message and the line of the user's code that raised, the last frame of the
    stored traceback: a ``NameError`` from a typo in a step is there at its first attempt, not after the last."""
    if full is None:
        full = SETTINGS.log_errors == "full"
    kind = str(error.get("name") or error.get("type") or "error")
    what = f"{kind}: {error.get('message', '')}" if full else kind
    where = _last_frame(str(error.get("stack") or "")) if full else None
    at = retry_after[11:19] if len(retry_after) >= 19 else retry_after
    head = (f"run {run_id}: step {step_name} ({step_id}) attempt {attempt} of {max_attempts} failed: {what}"
            + (f" ({where})" if where else ""))
    if in_seconds < 1:
        return f"{head}; attempt {attempt + 1} starts now"
    return f"{head}; attempt {attempt + 1} at {at} UTC, in {duration_text(in_seconds)} (`awsworld skip {run_id}` " \
           f"starts it now)"


def log_retry(run_id: str, step_name: str, step_id: str, attempt: int, max_attempts: int,
              error: Mapping[str, Any], retry_after: str, in_seconds: float) -> None:
    """Log a retried step attempt (``retry_report``) on ``awsworld.failures``, at INFO: under ``awsworld dev``
    (which prints this logger's INFO lines) a failing step shows in its console at its first failed attempt, where
    before nothing showed until the run failed after the last one, minutes of back-off later."""
    if failures.isEnabledFor(logging.INFO):
        failures.info("%s", retry_report(run_id, step_name, step_id, attempt, max_attempts, error, retry_after,
                                         in_seconds),
                      extra={"stepId": step_id, "stepName": step_name, "stepAttempt": attempt,
                             "maxAttempts": max_attempts, "errorType": str(error.get("name") or error.get("type")
                                                                           or "error"), "retryAt": retry_after})


def _last_frame(stack: str) -> str | None:
    """``/…/shop.py, line 7, in lookup`` of a traceback's innermost frame (where the user's code raised)."""
    frames = [line.strip() for line in stack.splitlines() if line.strip().startswith("File ")]
    return frames[-1].removeprefix("File ").replace('"', "") if frames else None


def _indented(text: str) -> str:
    return "\n".join(f"    {line}" for line in text.rstrip("\n").splitlines())
