"""At-most-once steps, for every World: an attempt found started but unfinished is never started again.

A step is at-least-once by default: a redelivery of the message that started an attempt (after a crash), or a
take-over once the attempt's lease has passed, starts the step again and runs its body again. A step declared
``@step(semantics="at_most_once")`` asks for its starts with ``atMostOnce: true`` on ``step_started``; the
World then refuses to start such a step while its current attempt is still ``running`` (that attempt was cut
off: its body may have run, in part or whole) with ``StepAttemptInterruptedError``, which names the attempt.
The runtime records that attempt's end, a ``step_retrying`` or ``step_failed`` with ``StepInterruptedError``
as its retry policy says, carrying ``interruptedAttempt``: such an end lands only while that very attempt is
the step's running one (``check_interrupted_end``), so two deliveries that both found it cut off record one
end between them. A retry is a new attempt with a durable start of its own; no attempt ever runs its body
twice.

The start of an attempt is durable before its body runs on every path (a queued step's ``step_started``, an
inline step's claim, or the flow's born-running batch), so the rule needs nothing else.
"""

from __future__ import annotations

from typing import Any

from ..errors import EntityConflictError, StepAttemptInterruptedError

AT_MOST_ONCE_FIELD = "atMostOnce"
"""step_started's request field: the step is at-most-once (refuse to start it over an unfinished attempt)."""
INTERRUPTED_FIELD = "interruptedAttempt"
"""An outcome's field: the attempt it records as interrupted (accepted only while that attempt runs)."""


def check_start(data: dict[str, Any] | None, *, status: str, attempt: int, step_id: str | None) -> None:
    """Refuse an at-most-once start while the step's current attempt is unfinished (after ``start_verdict``
    let this delivery start it: a live attempt of another delivery is refused as running elsewhere first)."""
    if status == "running" and (data or {}).get(AT_MOST_ONCE_FIELD) is True:
        raise StepAttemptInterruptedError(
            f"step {step_id} is at-most-once and its attempt {attempt} was started but never finished: "
            f"record that attempt's end before starting another", attempt=attempt)


def check_interrupted_end(data: dict[str, Any] | None, *, status: str, attempt: int, step_id: str | None) -> None:
    """An outcome that records an interrupted attempt lands only while that attempt is the running one."""
    interrupted = (data or {}).get(INTERRUPTED_FIELD)
    if interrupted is None:
        return
    if status != "running" or interrupted != attempt:
        raise EntityConflictError(f"step {step_id}: attempt {interrupted} is not the running one any more "
                                  f"(the step is {status} at attempt {attempt})")
