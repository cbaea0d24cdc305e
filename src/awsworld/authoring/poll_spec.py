"""What a poll is to the engine and the step runner: its schedule and limits (``PollSpec``, made by ``poll_until``
at the call), what its log says so far (``PollProgress``), and the names its ``step_retrying`` events record.

Apart from ``poll`` (the call) because the seam to the engine (``runtime``) carries it and the engine and the
worker read it, while ``poll_until`` itself reaches the engine only through that seam.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, cast

from ..durable import codecs
from ..durable.codecs import Codec, Place
from .errors import PollAttemptsExhaustedError, PollTimeoutError

POLL_NOT_READY = "PollNotReady"
"""The error name a rejected poll's ``step_retrying`` records (it is not an error: the log's schema wants one)."""
STATE_FIELD = "state"
"""Where a rejected poll's ``step_retrying`` error records its result, the next poll's state (a poll with state)."""
TIMED_OUT = PollTimeoutError.__name__
ATTEMPTS_EXHAUSTED = PollAttemptsExhaustedError.__name__



@dataclass
class PollProgress:
    """What the log says about a poll so far, kept by the execution as it replays the poll's ``step_retrying``
    events: the last rejected result (serialized: the next poll's state) and how many polls in a row raised."""

    state: Any = None
    has_state: bool = False
    errors_in_a_row: int = 0

    def observe(self, error: Any) -> None:
        """One ``step_retrying`` of the poll, in log order."""
        recorded = cast(dict[str, Any], error) if isinstance(error, dict) else None
        if recorded is not None and recorded.get("name") == POLL_NOT_READY:
            self.errors_in_a_row = 0
            if STATE_FIELD in recorded:
                self.state, self.has_state = recorded[STATE_FIELD], True
        else:
            self.errors_in_a_row += 1


@dataclass(frozen=True)
class PollSpec:
    """What the step runner needs to judge a poll: the predicate, the schedule and the limits, and (a poll with
    state) where the next poll's state comes from."""

    predicate: Callable[[Any], bool]
    interval: float
    backoff: float
    max_interval: float | None
    deadline: datetime | None
    max_attempts: int | None = None
    stateful: bool = False
    progress: PollProgress = field(default_factory=PollProgress)
    codec: Codec[Any] | None = None  # each poll's result (its state, and the accepted one): ``poll_until(codec=)``
    step_name: str = ""
    not_ready: str = "the condition is not met yet"  # what a rejected poll's ``step_retrying`` says (the log's reader)

    def place(self, run_id: str | None, step_id: str | None) -> Place:
        """Where a poll's result sits, for its codec and the error that names it."""
        return Place("state", f"poll_until(step {self.step_name!r})", run_id, step_id)

    def arguments(self, args: list[object], run_id: str | None = None, step_id: str | None = None) -> list[Any]:
        """The check's arguments for the next poll: for a poll with state, the last rejected result in place of
        the recorded ``initial_state`` (the first argument) once there is one, read back through the poll's
        codec (``CodecError`` naming the place when it cannot be)."""
        if not self.stateful or not self.progress.has_state:
            return args
        return [codecs.load(self.progress.state, self.codec, self.place(run_id, step_id)), *args[1:]]

    def exhausted(self, poll: int) -> bool:
        """Whether poll number ``poll`` (1-based) was the last ``max_attempts`` allows."""
        return self.max_attempts is not None and poll >= self.max_attempts

    def delay(self, poll: int) -> float:
        """Seconds after poll number ``poll`` (1-based) before the next one."""
        delay = self.interval * self.backoff ** max(0, poll - 1)
        return delay if self.max_interval is None else min(delay, self.max_interval)

    def next_poll(self, poll: int, now: datetime, at: datetime | None = None) -> datetime | None:
        """When to poll next (``at`` if given, else the schedule's), never past the deadline; None once the
        deadline has passed (the poll that just ran, at or after it, was the last)."""
        if self.deadline is not None and now >= self.deadline:
            return None
        when = at if at is not None else now + timedelta(seconds=self.delay(poll))
        return when if self.deadline is None else min(when, self.deadline)
