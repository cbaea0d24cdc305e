"""Errors a workflow author raises or sees. Their names and codes are part of the public API."""

from __future__ import annotations

import asyncio
import re
import shlex
from collections.abc import Awaitable, Mapping
from datetime import datetime
from typing import Any, TypeVar, cast

from .durations import When, seconds

MAX_ERROR_MESSAGE = 32 * 1024
"""The most characters of an error message the log keeps (a step's, a workflow's): past it, the head and a
notice of how many characters were cut (``cap_message``)."""
_CUT = re.compile(r"… \((\d+) more characters cut\)$")
_NOTICE_ROOM = 40  # "… (<up to 20 digits> more characters cut)"
T = TypeVar("T")
E = TypeVar("E", bound=BaseException)


def cap_message(message: str) -> str:
    """``message`` if it is at most ``MAX_ERROR_MESSAGE`` characters, else its head and ``… (N more characters
    cut)``, at most ``MAX_ERROR_MESSAGE`` in all. Capping again (a step's capped message raised on as the run's
    error, perhaps with a prefix) keeps counting from the original: N is every character cut so far."""
    if len(message) <= MAX_ERROR_MESSAGE:
        return message
    found = _CUT.search(message)
    head, cut = (message[:found.start()], int(found.group(1))) if found else (message, 0)
    keep = MAX_ERROR_MESSAGE - _NOTICE_ROOM
    return f"{head[:keep]}… ({cut + len(head) - keep} more characters cut)"


class FatalError(Exception):
    """Raise in a step to fail it at once, without retries. Also what an unserializable value becomes."""


class RetryableError(Exception):
    """Raise in a step to retry it (within its policy's ``max_attempts``, whatever its ``retry_on`` says).

    ``retry_after`` overrides the policy's delay: seconds, a ``timedelta``, a string (``"10s"``, ``"5m"``) or an
    aware ``datetime`` (retry no earlier than then, e.g. a rate limit's reset time). Kept as seconds (``float``)
    or as the ``datetime``; the step runner turns it into the time it records in ``retryAfter``."""

    def __init__(self, message: str = "", *, retry_after: When | None = None) -> None:
        super().__init__(message)
        if isinstance(retry_after, datetime):
            if retry_after.tzinfo is None or retry_after.tzinfo.utcoffset(retry_after) is None:
                raise ValueError("retry_after needs a timezone-aware datetime (add tzinfo=UTC)")
            self.retry_after: float | datetime | None = retry_after
        else:
            self.retry_after = None if retry_after is None else seconds(retry_after, what="retry_after")


class CodecError(FatalError):
    """A codec (``@step(codec=...)``, ``@workflow(codec=...)``, ``create_hook(codec=...)``) could not encode or
    decode a value. Never retried (the same value fails the same way); the message and ``place`` name the value
    (``the result of step 'shop.quote' (step_2)``). A step's result that fails to encode fails the step (the
    workflow sees ``StepError`` whose ``error_type`` is ``"CodecError"``, also a ``CodecError``); one that fails
    to decode raises ``CodecError`` where the workflow awaits it, on every replay."""

    def __init__(self, message: str, *, place: str = "") -> None:
        super().__init__(message)
        self.place = place


class StepTimeoutError(RetryableError):
    """A step attempt ran longer than its ``@step(timeout=...)``: the body was cancelled and the attempt counts
    as failed and retryable (a ``RetryableError``, so ``retry_on`` need not list it; ``no_retry_on`` may). The
    workflow sees ``StepError(error_type="StepTimeoutError")`` once the retries are spent."""


class StepInterruptedError(RetryableError):
    """An attempt of an at-most-once step (``@step(semantics="at_most_once")``) was started durably and then cut
    off before its outcome was recorded (its process died, its delivery came back, its lease passed): the body
    may have run, so it is not run again in that attempt. The attempt is recorded as failed with this error and
    retried as any ``RetryableError`` is, within the policy's ``max_attempts`` (``no_retry_on`` may exclude it,
    ``max_attempts=1`` never retries): a retry is a new attempt with a durable start of its own. The workflow
    sees ``StepError(error_type="StepInterruptedError")`` once the retries are spent.

    Any step's last attempt cut off so ends too: an at-least-once step's cut-off attempt is run again as the
    next attempt, which ``max_attempts`` counts, and when it was the last one the step fails with this error
    instead of starting one more."""


class BodyExitError(Exception):
    """``SystemExit`` raised by a workflow or step body (``sys.exit()``, the user's or a library's), carried as an
    ordinary exception out of the body's asyncio task (``exit_contained``). asyncio re-raises a task's
    ``SystemExit`` out of the event loop, which stopped the process running deliveries: ``awsworld dev`` died
    with every run it had not saved, a Lambda container mid-delivery. Carried so, it fails the attempt or the run
    like any error, and the log stores the ``SystemExit`` itself, its type, message and traceback
    (``_worker/error_shapes.structured_error``); a step's retry policy sees it too (``retry_on``'s default,
    ``Exception``, does not hold a ``SystemExit``: the step fails at once). Never seen by workflow code."""

    def __init__(self, exit: SystemExit) -> None:
        super().__init__(*exit.args)
        self.exit = exit


class BodyCancelledError(Exception):
    """``asyncio.CancelledError`` raised by a step body while nothing cancelled its task (a library that raises it
    for its own timeout, or ``raise asyncio.CancelledError()`` in the body), carried as an ordinary exception out of
    the body (``cancel_contained``). Uncarried, it read as the delivery being cut off: the attempt was run again and
    finally failed with ``StepInterruptedError`` (``its delivery was cut off``), its traceback lost. Carried, the
    attempt fails with the ``CancelledError`` itself, its traceback naming the body's line; ``retry_on``'s default,
    ``Exception``, does not hold it (a ``BaseException``): the step fails at once, as after a ``SystemExit``."""

    def __init__(self, cancelled: BaseException) -> None:
        super().__init__(*cancelled.args)
        self.cancelled = cancelled


async def cancel_contained(body: Awaitable[T]) -> T:
    """Await a step's ``body``, turning a ``CancelledError`` it raised while its task was not being cancelled
    (``Task.cancelling()`` is 0: no ``cancel()`` reached it, from a timeout, the workflow or the delivery's end)
    into ``BodyCancelledError``. A real cancellation goes on as itself."""
    try:
        return await body
    except asyncio.CancelledError as cancelled:
        task = asyncio.current_task()
        if task is None or task.cancelling():
            raise
        raise BodyCancelledError(cancelled) from cancelled


async def exit_contained(body: Awaitable[T]) -> T:
    """Await ``body``, a workflow's or a step's, turning the ``SystemExit`` it raises into ``BodyExitError``
    (``KeyboardInterrupt`` is left alone: it is the operator's Ctrl-C)."""
    try:
        return await body
    except SystemExit as exit:
        raise BodyExitError(exit) from exit


class ValueTooLargeError(FatalError):
    """A value (a step's result, a step's or the workflow's input or output) is over the World's size limit
    (``AWSWORLD_MAX_VALUE_BYTES``). Not retried: the same code would produce the same value. A workflow sees
    it as a ``StepError`` whose ``error_type`` is ``"ValueTooLargeError"`` (a step's result), or raised
    directly where it called the step (a step's input)."""


class ChildDepthError(RecursionError):
    """A child run refused because it would be nested deeper than ``AWSWORLD_MAX_CHILD_DEPTH`` allows (default
    100; a run a client started is at depth 0, its children at 1): most often a workflow that calls itself as a
    child with no base case, which would otherwise start runs, each billed, until someone noticed. Nothing is
    started. The workflow whose call was refused raises a ``ChildWorkflowError`` (status ``not-started``) that is
    also a ``ChildDepthError``, where it awaits the call; a parent that lets it through fails with it, and so
    does every run above that lets its child's failure through, so ``except ChildDepthError`` and a client's
    ``Run.result()`` see this type at every level (``authoring/rebuilt_errors.py``). A ``RecursionError``, as
    Python's own recursion limit raises. Raised by the start step (``_worker/child_runs.py``), never retried, and
    recorded as that step's failure: every replay raises it at the same call, whatever the limit is by then."""


class RunLifetimeError(ValueError):
    """A wait that would end after the longest a run may stay running (``MaxRunDays``, ``AWSWORLD_MAX_RUN_DAYS``,
    365 days by default, counted from the run's creation): ``sleep()`` past it, or ``create_hook`` with a
    ``timeout`` or ``heartbeat_timeout`` past it. On AWS every record of a run expires ``retention + MaxRunDays``
    after it was written (``aws/retention.py``), so such a run would lose its oldest records while it waits and fail
    when it wakes, a year on, with nothing left to tell why. Raised where the workflow makes the call, which writes
    nothing, and caught like any exception; let through, it fails the run at once (under ``awsworld dev`` and in
    tests too, though nothing expires there: the same code would break once deployed). A wait the log records
    already (written under a larger limit) replays as it was."""


class StepError(Exception):
    """A step failed for good (after its retries, or fatally); raised where the workflow awaited it.

    It carries the step's own error as the log recorded it: ``error_type`` (the exception's class name,
    ``"KeyError"``), ``qualified_type`` (``"myapp.errors.Declined"``; a builtin's is its name), ``message`` (its
    message), ``stack`` (its traceback, bounded), and which step: ``step_name``, ``step_id``, ``attempt`` (the
    attempt that failed last). ``str()`` says all but the traceback: ``step 'fetch' failed after 3 attempts:
    KeyError: 'missing'``. A run the workflow lets it fail keeps the same in its error (see ``error_shapes``).

    Raised in a workflow, it is also an instance of the step's exception type where that type can be rebuilt (a
    builtin, or a class importable by its qualified name: see ``rebuilt_errors``), so ``except KeyError:``
    around the step's call catches it; ``except StepError:`` still catches every failed step."""

    def __init__(self, message: str, *, step_name: str, error_type: str | None = None, step_id: str | None = None,
                 attempt: int | None = None, stack: str | None = None, qualified_type: str | None = None) -> None:
        self.message = message
        self.step_name = step_name
        self.error_type = error_type
        self.qualified_type = qualified_type or error_type
        self.step_id = step_id
        self.attempt = attempt
        self.stack = stack
        after = f" after {attempt} attempts" if attempt is not None and attempt > 1 else ""
        # Exception's own __init__, not super()'s: a StepError rebuilt as the step's type too (``rebuilt_errors``)
        # must not run that type's __init__.
        Exception.__init__(self, f"step {step_name!r} failed{after}: " + (f"{error_type}: " if error_type else "")
                           + message)

    def __str__(self) -> str:
        return BaseException.__str__(self)  # not the rebuilt type's (KeyError's would quote the text)


class PollTimeoutError(StepError):
    """``poll_until``'s ``timeout`` passed before a poll's result satisfied its predicate (a ``StepError``
    whose ``error_type`` is ``"PollTimeoutError"``, so ``except StepError`` catches it too)."""

    def __init__(self, message: str, *, step_name: str, step_id: str | None = None, attempt: int | None = None,
                 stack: str | None = None) -> None:
        super().__init__(message, step_name=step_name, error_type=type(self).__name__, step_id=step_id,
                         attempt=attempt, stack=stack)


class PollAttemptsExhaustedError(PollTimeoutError):
    """``poll_until``'s ``max_attempts`` polls ran and none satisfied its predicate. A ``PollTimeoutError`` (so one
    ``except PollTimeoutError`` ends a poll on either limit) whose ``error_type`` is
    ``"PollAttemptsExhaustedError"``."""


class HookConflictError(Exception):
    """Another run holds the hook's token."""

    def __init__(self, token: str, conflicting_run_id: str) -> None:
        super().__init__(f"hook token {token!r} is held by run {conflicting_run_id}")
        self.token = token
        self.conflicting_run_id = conflicting_run_id


class HookTimeoutError(TimeoutError):
    """``create_hook(..., timeout=...)``: the hook's time passed (durably: its timeout wait completed in the log
    before the payload awaited). Payloads received before the time passed are still returned first; the hook is
    disposed, so later ``resume_hook`` calls for its token find no hook."""

    def __init__(self, token: str, deadline: str) -> None:
        super().__init__(f"hook {token!r} timed out at {deadline}")
        self.token = token
        self.deadline = deadline


class HookHeartbeatTimeoutError(HookTimeoutError):
    """``create_hook(..., heartbeat_timeout=...)``: the external system went quiet. No heartbeat
    (``Client.heartbeat_hook``) or payload reached the hook within ``heartbeat_timeout`` seconds of the last one
    (or of the hook's creation), durably: the heartbeat wait completed in the log first. A ``HookTimeoutError``, so
    ``except HookTimeoutError`` catches both kinds of timeout."""

    def __init__(self, token: str, deadline: str, heartbeat_timeout: float) -> None:
        super().__init__(token, deadline)
        self.args = (f"hook {token!r} heard no heartbeat for {heartbeat_timeout:g} s (due by {deadline})",)
        self.heartbeat_timeout = heartbeat_timeout


class HookFailedError(Exception):
    """``Client.fail_hook(token, error)``: an outside party failed the hook; raised where the workflow awaits it
    (after any payloads received before the failure). ``code`` is the caller's, when given."""

    def __init__(self, token: str, message: str, code: str | None = None) -> None:
        super().__init__(message)
        self.token = token
        self.message = message
        self.code = code


def original_error(stored: Mapping[str, Any]) -> Mapping[str, Any]:
    """The error a stored one stands for, whose ``type`` and ``name`` a rebuild uses: a step's failure the run let
    through is stored as a ``StepError`` whose ``cause`` is the step's own error (``KeyError``, ``Declined``), a
    child run's as a ``ChildWorkflowError`` whose ``cause`` is the child's original error (the innermost: a cause
    is never nested, ``_worker/error_shapes.py``); any other (or one stored before causes were) is itself."""
    cause = stored.get("cause")
    return cast("Mapping[str, Any]", cause) if isinstance(cause, Mapping) else stored


class WorkflowRunFailedError(Exception):
    """``Run.result()`` of a failed run: carries the stored error, and is also an instance of the type the run failed
    with where that type can be rebuilt (``rebuilt_errors``). ``error_type`` is the name of what the
    workflow raised (``"StepError"`` when a failed step's error went uncaught, ``"ChildWorkflowError"`` for a
    child run's); ``details`` is the whole stored error (``type``, ``stack``, and for a step's failure
    ``stepName``, ``stepId``, ``attempt`` and ``cause``, the step's own error with its traceback; for a child
    run's, ``childRunId``, ``childWorkflowName`` and ``cause``, the child's original error); ``step_name`` names
    the failed step, ``child_run_id`` the failed child run, if one was the cause. ``message`` is the original
    error's bare message (the step's, the innermost child's, the body's), as ``StepError.message`` is in a
    workflow, so ``except Declined as error: error.message`` reads the same in a test as in workflow code.
    ``code`` is the run's error code (``USER_ERROR``), except on a rebuilt ``HookFailedError``, where it is the
    code its sender gave ``fail_hook`` (``client/client.py``, ``failed_run_error``), as that class documents.
    ``workflow_name`` names the run's workflow, in the message too (``run wrun_… (orders.process) failed: …``): a
    refusal's or a divergence's message says what and where in the body, not which workflow."""

    def __init__(self, run_id: str, message: str, code: str | None = None, error_type: str | None = None, *,
                 details: dict[str, Any] | None = None, workflow_name: str | None = None) -> None:
        named = f" ({workflow_name})" if workflow_name else ""  # as the failure's log line and ChildWorkflowError say
        # (not super()'s: a rebuilt type's must not run)
        Exception.__init__(self, f"run {run_id}{named} failed: {message}")
        self.run_id = run_id
        self.workflow_name = workflow_name
        self.code = code
        self.error_type = error_type
        self.details: dict[str, Any] = details or {}
        bare: Any = original_error(self.details).get("message")  # a step's or a child's the run let through: theirs
        self.message: str = bare if isinstance(bare, str) else message
        step, child = self.details.get("stepName"), self.details.get("childRunId")
        self.step_name: str | None = step if isinstance(step, str) else None
        self.child_run_id: str | None = child if isinstance(child, str) else None

    def __str__(self) -> str:
        return BaseException.__str__(self)  # not the rebuilt type's (client/client.py, failed_run_error)


class StoredTraceback(Exception):
    """A traceback a run stored with its error (where a step, a workflow body or a child run raised, in a worker
    that may be another process or a Lambda), raised nowhere: ``Run.result()`` chains it as its
    ``WorkflowRunFailedError``'s ``__cause__`` (``stored_tracebacks``), so pytest's report and any printed traceback
    show the line of the run's code that raised, not only the client's frames, as ``concurrent.futures`` does for a
    process pool's errors."""

    def __init__(self, where: str, stack: str) -> None:
        super().__init__(f"{where}, as the run stored it:\n{stack.rstrip()}")
        self.where = where
        self.stack = stack


def stored_tracebacks(stored: Mapping[str, Any], workflow_name: str) -> StoredTraceback | None:
    """The stored error's tracebacks as a chain, the innermost first: the step's (or the child run's) own
    traceback is the cause of the workflow body's, where it awaited it. None when nothing stored a traceback (a run
    failed before its body ran, or stored before tracebacks were)."""
    outer = _stored_traceback(stored, f"the traceback of workflow {workflow_name}")
    cause = stored.get("cause")
    if not isinstance(cause, Mapping):
        return outer
    typed = cast("Mapping[str, Any]", cause)
    step, child = stored.get("stepName"), stored.get("childRunId")
    where = (f"the traceback of step {step} (attempt {stored.get('attempt', '?')})" if isinstance(step, str) else
             f"the traceback of child run {child} ({stored.get('childWorkflowName', '?')})" if isinstance(child, str)
             else "the traceback of its cause")
    inner = _stored_traceback(typed, where)
    if outer is None:
        return inner
    outer.__cause__ = inner
    return outer


def chain_stored_traceback(error: E, stack: object, where: str) -> E:
    """``error`` (a ``StepError`` or ``ChildWorkflowError`` raised in a workflow) with the traceback its step or
    child run stored as its ``__cause__`` (a ``StoredTraceback``), as ``Run.result()`` chains a run's: that
    exception was raised in another attempt or run, maybe another process, so no exception object of it exists
    here, but a traceback printed or logged in the workflow (``logging.exception``, pytest's report) shows the
    line that raised. What the run stores of it is unchanged (``_worker/error_shapes.py`` leaves such a cause out:
    it stores that traceback as the error's ``cause`` already)."""
    if isinstance(stack, str) and stack.strip():
        error.__cause__ = StoredTraceback(where, stack)
    return error


def _stored_traceback(stored: Mapping[str, Any], where: str) -> StoredTraceback | None:
    stack = stored.get("stack")
    return StoredTraceback(where, stack) if isinstance(stack, str) and stack.strip() else None


class RunStartError(Exception):
    """The run was recorded but the message that starts it could not be queued. Finishing the start queues that
    message: ``awsworld start WORKFLOW --run-id RUN`` (the command the message gives), or
    ``client.options(run_id=error.run_id).start(...)``; the run keeps the arguments it was recorded with, is
    created once and runs once."""

    def __init__(self, run_id: str, cause: BaseException, *, workflow: str | None = None) -> None:
        command = f"awsworld start {shlex.quote(workflow or 'WORKFLOW')} --run-id {shlex.quote(run_id)}"
        # An error with a ``message`` apart from its hint (``WorldSetupError``: a queue that is not there) gives
        # that: its whole sentence fits where ``str`` (message and hint) was cut mid-word at 200 characters.
        said = getattr(cause, "message", None)
        said = said if isinstance(said, str) and said else str(cause)
        # A cause with a ``hint`` (``WorldSetupError``, ``WorldUnreachableError``: a queue that is not there, dev
        # stopped) fails every retry until it is mended: its hint comes first, then the finishing start.
        hint = getattr(cause, "hint", None)
        first = f"mend that first ({hint[:300]}), then " if isinstance(hint, str) and hint else ""
        super().__init__(f"run {run_id} was recorded but could not be started ({type(cause).__name__}: "
                         f"{said[:300]}); {first}finish the start with `{command}` (or "
                         f"client.options(run_id={run_id!r}).start(...)): it queues the run's start message, "
                         "and the run keeps its recorded arguments and runs once")
        self.run_id = run_id
        self.workflow = workflow
        self.command = command


class RunEndedError(RuntimeError):
    """The run reached a terminal status (``status``) before what the caller waited for (``Run.wait_for_hook``)."""

    def __init__(self, run_id: str, status: str, waiting_for: str) -> None:
        super().__init__(f"run {run_id} ended ({status}) {waiting_for}")
        self.run_id = run_id
        self.status = status


class RunNotEndedError(RuntimeError):
    """``Client.rerun`` (``awsworld rerun``) of a run that has not ended: a second run beside it would do its work
    twice. Cancel it (``awsworld cancel RUN``) or fail it (``awsworld fail RUN``) first, or wait for its end."""

    def __init__(self, run_id: str, status: str) -> None:
        super().__init__(f"run {run_id} is {status}: only a run that ended (failed, cancelled, completed) is run "
                         f"again; cancel it first (`awsworld cancel {run_id}`), or wait for its end")
        self.run_id = run_id
        self.status = status


class WorkflowRunCancelledError(Exception):
    """``Run.result()`` of a cancelled run; ``reason`` is what ``Client.cancel(reason=...)`` recorded."""

    def __init__(self, run_id: str, reason: str | None = None) -> None:
        super().__init__(f"run {run_id} was cancelled" + (f": {reason}" if reason else ""))
        self.run_id = run_id
        self.reason = reason


class DeterminismError(RuntimeError):
    """Workflow code did something that cannot replay identically: read the clock or the OS's entropy, started a
    timer, a thread or asyncio I/O (the message names the call and the fix; docs/concepts/determinism.md lists
    them)."""


class CallNotAwaitedError(RuntimeError):
    """The workflow body returned while a step or child workflow it called was never awaited: the call made a
    coroutine that nothing ran, so the step never ran (``charge(order)`` on a line of its own, without ``await``).
    The run fails with it, naming each such call and where it was made, instead of completing as if the step had
    run; Python itself only warns (``coroutine ... was never awaited``) when the coroutine is collected."""


class ReplayDivergenceError(RuntimeError):
    """A replay of the workflow did not make the calls its event log records (new code, or a workflow that read
    something that changes between replays).

    ``position`` names where (``step 3``, ``hook 2``, ``the end of the log``), ``slot`` the log event, ``log`` what
    the log holds there and ``code`` what the code did instead (calls with their arguments, truncated), ``change``
    the kind of difference (``arguments``, ``name``, ``kind``, ``token``, ``duration``, ``extra-event``, ``end``);
    ``step_id`` the step the log has there, whose logged input a failed run's message quotes (its arguments or
    its name changed, or the code made another call or none there); ``outline`` the message with every
    argument list written ``(…)`` (what may be stored in plain text: ``_engine.divergence``).
    """

    def __init__(self, message: str, *, position: str | None = None, slot: int | None = None,
                 log: str | None = None, code: str | None = None, change: str | None = None,
                 step_id: str | None = None, outline: str | None = None) -> None:
        super().__init__(message)
        self.outline = outline if outline is not None else message
        self.position = position
        self.slot = slot
        self.log = log
        self.code = code
        self.change = change
        self.step_id = step_id


# Codes stored on failed runs (run_failed.errorCode).
USER_ERROR = "USER_ERROR"
RUNTIME_ERROR = "RUNTIME_ERROR"
CORRUPTED_EVENT_LOG = "CORRUPTED_EVENT_LOG"
"""The run's replay kept diverging from its log (the spec's ErrCorruptedEventLog; the log itself is intact), or an
operator failed a parked run (``awsworld fail``). The code is the spec's; the stored message names the divergence."""
FAILED_ON_REQUEST = "FAILED_ON_REQUEST"
"""An operator failed the run (``awsworld fail``, ``Client.fail``) while it was not parked."""
EVENT_LIMIT_EXCEEDED = "EVENT_LIMIT_EXCEEDED"
RUN_LIFETIME_EXCEEDED = "RUN_LIFETIME_EXCEEDED"
"""The run was still running at the end of its lifetime (``MaxRunDays``): awsworld failed it with ``RunLifetimeError``
before its items could expire (``world/rules/lifetime.py``)."""
SERIALIZATION_ERROR = "SERIALIZATION_ERROR"
UNKNOWN_WORKFLOW = "UNKNOWN_WORKFLOW"
"""The deployment never had the workflow or step a run needs (retried for a window first: see ``delivery``)."""
VALUE_TOO_LARGE = "VALUE_TOO_LARGE"
"""A value the run produced is over the World's size limit."""
STEP_CANCELLED = "STEP_CANCELLED"
"""The code of the ``step_failed`` error a flow records when the workflow cancelled its await of a step (its task,
or a ``first_successful``/``map`` it ran in): the contract has no event that sets a step "cancelled", so the end is
a ``step_failed`` whose error is named ``CancelledError`` with this code, and replay turns it back into
``asyncio.CancelledError`` (never a ``StepError``)."""


def step_cancelled_error(step_name: str) -> dict[str, str]:
    """The structured error of a step the workflow cancelled (see ``STEP_CANCELLED``)."""
    return {"message": f"step {step_name} was cancelled by its workflow", "name": "CancelledError",
            "code": STEP_CANCELLED}
