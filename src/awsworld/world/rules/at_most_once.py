"""At-most-once steps, and every step's last attempt, for every World: an attempt found started but unfinished is
never started again where it must not be.

A step is at-least-once by default: a redelivery of the message that started an attempt (after a crash), or a
take-over once the attempt's lease has passed, starts the step again and runs its body again. A step declared
``@step(semantics="at_most_once")`` asks for its starts with ``atMostOnce: true`` on ``step_started``; the
World then refuses to start such a step while its current attempt is still ``running`` (that attempt was cut
off: its body may have run, in part or whole) with ``StepAttemptInterruptedError``, which names the attempt.
The runtime records that attempt's end, a ``step_retrying`` or ``step_failed`` with ``StepInterruptedError``
as its retry policy says, carrying ``interruptedAttempt``: such an end lands only while that very attempt is
the step's running one (``check_interrupted_end``), so two deliveries that both found it cut off record one
end between them. A retry is a new attempt with a durable start of its own; no attempt ever runs its body
twice. Such an end is refused as ``RunGoneError`` once the run has ended (``interrupted_end_of``): it is the
runtime's bookkeeping, and the run's end stays the last event of its log.

The start of an attempt is durable before its body runs on every path (a queued step's ``step_started``, an
inline step's claim, or the flow's born-running batch), so the rule needs nothing else.

The same refusal bounds every step's attempts. A cut-off attempt is an attempt: it was started, its body may
have run, and the retry policy counts it (as Temporal counts an attempt lost to a worker's death). A start
names the policy's ``maxAttempts``; when the step's unfinished attempt is already the last one it allows, the
World refuses to start another with the same ``StepAttemptInterruptedError``, and the runtime records that
last attempt failed (``StepInterruptedError``, "failed after N attempts") instead of starting attempt N + 1.
An at-least-once step below its last attempt is started again as before (its body runs again, as the next
attempt). ``maxAttempts`` is a request field only: the log keeps the attempt, not the policy.
"""

from __future__ import annotations

from typing import Any

from ..errors import EntityConflictError, InvalidInputError, RunGoneError, StepAttemptInterruptedError

AT_MOST_ONCE_FIELD = "atMostOnce"
"""step_started's request field: the step is at-most-once (refuse to start it over an unfinished attempt)."""
INTERRUPTED_FIELD = "interruptedAttempt"
"""An outcome's field: the attempt it records as interrupted (accepted only while that attempt runs)."""


MAX_ATTEMPTS_FIELD = "maxAttempts"
"""step_started's request field: the attempts the step's retry policy allows, the first included."""


def requested_max_attempts(data: dict[str, Any] | None) -> int | None:
    """A step_started's ``maxAttempts`` (None when it names none: an older runtime, or a poll, whose attempts are
    its polls), or a 400 for one that is not an int >= 1."""
    value = (data or {}).get(MAX_ATTEMPTS_FIELD)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInputError(f"{MAX_ATTEMPTS_FIELD} must be an int >= 1", field=f"eventData.{MAX_ATTEMPTS_FIELD}")
    return value


def check_start(data: dict[str, Any] | None, *, status: str, attempt: int, step_id: str | None) -> None:
    """Refuse to start a step over its unfinished current attempt when that attempt was cut off for good: the
    step is at-most-once, or that attempt was the last its policy allows (``maxAttempts``). Checked after
    ``start_verdict`` let this delivery start it: a live attempt of another delivery is refused as running
    elsewhere first, so an unfinished attempt here is one whose delivery is gone."""
    limit = requested_max_attempts(data)
    if status != "running":
        return
    if (data or {}).get(AT_MOST_ONCE_FIELD) is True:
        raise StepAttemptInterruptedError(
            f"step {step_id} is at-most-once and its attempt {attempt} was started but never finished: "
            f"record that attempt's end before starting another", attempt=attempt)
    if limit is not None and attempt >= limit:
        raise StepAttemptInterruptedError(
            f"step {step_id}'s attempt {attempt} was started but never finished, and its policy allows "
            f"{limit} attempt(s): record that attempt's end rather than starting attempt {attempt + 1}",
            attempt=attempt)


def interrupted_end_of(data: dict[str, Any] | None, *, run_status: str | None, terminal: bool,
                       run_id: str) -> bool:
    """Whether an outcome records an interrupted attempt (it carries ``interruptedAttempt``); on a run that has
    ended, ``RunGoneError``, judged before the step is (as the terminal-run start fence is). Such an end is the
    runtime's bookkeeping of an attempt it found cut off, not a body's outcome: nothing reads it after the run's
    end, and written then it would follow ``run_cancelled`` in the log. (A real outcome of a body that ran still
    lands after the end: the fence is on starting, not on finishing.) The decision carries ``RUN_ALIVE`` too, so
    an end that lands between the view and the commit refuses it the same way."""
    if (data or {}).get(INTERRUPTED_FIELD) is None:
        return False
    if terminal:
        raise RunGoneError(f"run {run_id} is {run_status}: the end of an interrupted attempt is not recorded")
    return True


def check_interrupted_end(data: dict[str, Any] | None, *, status: str, attempt: int, step_id: str | None) -> None:
    """An outcome that records an interrupted attempt lands only while that attempt is the running one."""
    interrupted = (data or {}).get(INTERRUPTED_FIELD)
    if interrupted is None:
        return
    if status != "running" or interrupted != attempt:
        raise EntityConflictError(f"step {step_id}: attempt {interrupted} is not the running one any more "
                                  f"(the step is {status} at attempt {attempt})")
