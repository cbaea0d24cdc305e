"""``RetryPolicy``: how many attempts a step gets, how long it waits between them, and which errors retry.

The decision is made where the attempt failed (the step runner), and the chosen time, jitter included, is
recorded in the log (``step_retrying``'s ``retryAfter``): the World refuses an earlier start, and a replay
reads the time instead of computing it again, so randomness in the schedule never makes a run diverge.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from .durations import Duration, seconds
from .errors import FatalError, RetryableError

ExceptionTypes = type[BaseException] | tuple[type[BaseException], ...]

DEFAULT_MAX_ATTEMPTS = 4  # the first attempt and three retries, as ``@step`` has always had


@dataclass(frozen=True)
class RetryPolicy:
    """A step's retries: ``@step(retry=RetryPolicy(max_attempts=5, initial_delay="1s", backoff=2,
    max_delay="1m", jitter=0.2, retry_on=(TimeoutError, ConnectionError)))``.

    - ``max_attempts``: attempts in all, the first included (1: never retried).
    - the delay after attempt *n* is ``initial_delay * backoff ** (n - 1)``, at most ``max_delay``; with ``jitter``
      (a fraction in [0, 1]) it is then shortened by a random part of up to that fraction (1: anywhere between
      0 and the delay, AWS's "full jitter"; 0.5: between half and all of it), spreading retries of many runs.
    - which errors retry: ``FatalError`` never; then anything matching ``no_retry_on`` does not; then a
      ``RetryableError`` does (its ``retry_after`` replaces the computed delay); then whatever matches
      ``retry_on`` (default: every ``Exception``). An error that does not retry fails the step at once, its type
      recorded (the workflow sees ``StepError(error_type=...)``).
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    initial_delay: Duration = 1.0
    backoff: float = 2.0
    max_delay: Duration | None = None
    jitter: float = 0.0
    retry_on: ExceptionTypes = Exception
    no_retry_on: ExceptionTypes = ()

    def __post_init__(self) -> None:
        attempts = _unchecked(self.max_attempts)  # the caller may be untyped: check what it really passed
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise ValueError(f"max_attempts must be an int >= 1, got {self.max_attempts!r}")
        seconds(self.initial_delay, what="initial_delay")
        if self.max_delay is not None:
            seconds(self.max_delay, what="max_delay")
        if not self.backoff >= 1.0:
            raise ValueError(f"backoff must be >= 1 (a multiplier of the delay per attempt), got {self.backoff!r}")
        if not 0.0 <= self.jitter <= 1.0:
            raise ValueError(f"jitter must be a fraction in [0, 1], got {self.jitter!r}")
        for name in ("retry_on", "no_retry_on"):
            value = _unchecked(getattr(self, name))
            types: tuple[object, ...] = tuple(cast("tuple[object, ...]", value)) if isinstance(value, tuple) \
                else (value,)
            if not all(isinstance(t, type) and issubclass(t, BaseException) for t in types):
                raise TypeError(f"{name} must be an exception type or a tuple of them, got {getattr(self, name)!r}")

    @property
    def max_retries(self) -> int:
        return self.max_attempts - 1

    def base_delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based), before jitter."""
        delay = seconds(self.initial_delay) * self.backoff ** max(0, attempt - 1)
        if self.max_delay is not None:
            delay = min(delay, seconds(self.max_delay))
        return delay

    def delay(self, attempt: int, *, rand: Callable[[], float] = _random.random) -> float:
        """Seconds to wait after failed attempt ``attempt``, jitter applied (``rand`` in [0, 1))."""
        base = self.base_delay(attempt)
        return base * (1.0 - self.jitter * rand()) if self.jitter else base

    def retries(self, error: BaseException) -> bool:
        """Whether ``error`` may be retried at all (the attempt count aside)."""
        if isinstance(error, (FatalError, *_types(self.no_retry_on))):
            return False
        return isinstance(error, (RetryableError, *_types(self.retry_on)))

    def retry_at(self, error: BaseException, attempt: int, now: datetime, *,
                 rand: Callable[[], float] = _random.random) -> datetime:
        """When the next attempt may start: a ``RetryableError``'s ``retry_after`` if it has one, else the
        schedule's delay from ``now``."""
        after = error.retry_after if isinstance(error, RetryableError) else None
        if isinstance(after, datetime):
            return max(after, now)
        if after is not None:
            return now + timedelta(seconds=after)
        return now + timedelta(seconds=self.delay(attempt, rand=rand))


def shorthand(max_retries: int | None, retry_delay: Duration | None) -> RetryPolicy:
    """``@step(max_retries=3, retry_delay=1)``, as it always meant: that many retries, a fixed delay."""
    retries = _unchecked(3 if max_retries is None else max_retries)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError("max_retries must be an int >= 0")
    return RetryPolicy(max_attempts=retries + 1, initial_delay=1.0 if retry_delay is None else retry_delay,
                       backoff=1.0)


def _unchecked(value: object) -> object:
    return value


def _types(value: ExceptionTypes) -> tuple[type[BaseException], ...]:
    return value if isinstance(value, tuple) else (value,)
