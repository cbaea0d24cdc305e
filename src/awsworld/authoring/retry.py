"""``RetryPolicy``: how many attempts a step gets, how long it waits between them, and which errors retry.

The decision is made where the attempt failed (the step runner), and the chosen time, jitter included, is
recorded in the log (``step_retrying``'s ``retryAfter``): the World refuses an earlier start, and a replay
reads the time instead of computing it again, so randomness in the schedule never makes a run diverge. The
jitter itself is drawn from the attempt's identity (``seeded``: run, step, attempt), not from the process's
random state, so the same failure schedules the same retry wherever it is judged, and a test sees the same
delays on every run; different runs and steps still spread, which is what jitter is for.

The default is the Lambda durable functions SDK's: 6 attempts, 5 s doubling to at most 60 s, full jitter (each
delay anywhere between 0 and its base). Spread and capped, it is the kinder default towards the systems steps
call: a failing dependency sees retries of many runs arrive scattered over a minute rather than all together,
one second apart (awsworld's default before: 4 attempts, 1 s apart, no jitter).
"""

from __future__ import annotations

import hashlib
import random as _random
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import cast

from ..world.errors import StreamClosedError
from .durations import Duration, seconds
from .errors import FatalError, RetryableError

ExceptionTypes = type[BaseException] | tuple[type[BaseException], ...]

DEFAULT_MAX_ATTEMPTS = 6  # the first attempt and five retries (the Lambda durable SDK's default)
DEFAULT_INITIAL_DELAY = 5.0  # seconds before the first retry (its base: full jitter draws below it)
DEFAULT_BACKOFF = 2.0
DEFAULT_MAX_DELAY = 60.0
DEFAULT_JITTER = 1.0  # full jitter


@dataclass(frozen=True)
class RetryPolicy:
    """A step's retries: ``@step(retry=RetryPolicy(max_attempts=5, initial_delay="1s", backoff=2,
    max_delay="1m", jitter=0.2, retry_on=(TimeoutError, ConnectionError)))``. Every field defaults to the
    default schedule (6 attempts, 5 s doubling to 60 s, full jitter); ``RetryPolicy.fixed("2s", max_attempts=3)``
    is a fixed delay (no back-off, no jitter), and so is ``jitter=0, backoff=1``.

    - ``max_attempts``: attempts in all, the first included (1: never retried).
    - the delay after attempt *n* is ``initial_delay * backoff ** (n - 1)``, at most ``max_delay`` (or
      ``initial_delay``, if that is longer: the cap bounds the growth, never the first delay); with ``jitter``
      (a fraction in [0, 1]) it is then shortened by a random part of up to that fraction (1: anywhere between
      0 and the delay, AWS's "full jitter"; 0.5: between half and all of it), spreading retries of many runs.
    - which errors retry: ``FatalError`` never, nor a write to a closed stream (``awsworld.world.errors.
      StreamClosedError``: it never reopens); then anything matching ``no_retry_on`` does not; then a
      ``RetryableError`` does (its ``retry_after`` replaces the computed delay); then whatever matches
      ``retry_on`` (default: every ``Exception``). An error that does not retry fails the step at once, its type
      recorded (the workflow sees ``StepError(error_type=...)``).
    """

    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    initial_delay: Duration = DEFAULT_INITIAL_DELAY
    backoff: float = DEFAULT_BACKOFF
    max_delay: Duration | None = DEFAULT_MAX_DELAY
    jitter: float = DEFAULT_JITTER
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

    @classmethod
    def fixed(cls, delay: Duration, *, max_attempts: int = DEFAULT_MAX_ATTEMPTS, retry_on: ExceptionTypes = Exception,
              no_retry_on: ExceptionTypes = ()) -> RetryPolicy:
        """Retries ``delay`` apart, exactly: no back-off, no jitter."""
        return cls(max_attempts=max_attempts, initial_delay=delay, backoff=1.0, max_delay=None, jitter=0.0,
                   retry_on=retry_on, no_retry_on=no_retry_on)

    @property
    def max_retries(self) -> int:
        return self.max_attempts - 1

    def base_delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt ``attempt`` (1-based), before jitter."""
        first = seconds(self.initial_delay)
        delay = first * self.backoff ** max(0, attempt - 1)
        if self.max_delay is not None:  # a cap on the growth: never below the first delay (``initial_delay="10m"``
            delay = min(delay, max(first, seconds(self.max_delay))) # keeps its 10 minutes under the default cap)
        return delay

    def delay(self, attempt: int, *, rand: Callable[[], float] = _random.random) -> float:
        """Seconds to wait after failed attempt ``attempt``, jitter applied (``rand`` in [0, 1))."""
        base = self.base_delay(attempt)
        return base * (1.0 - self.jitter * rand()) if self.jitter else base

    def retries(self, error: BaseException) -> bool:
        """Whether ``error`` may be retried at all (the attempt count aside)."""
        if isinstance(error, (FatalError, StreamClosedError, *_types(self.no_retry_on))):
            return False  # (a closed stream never reopens: every attempt would meet it again)
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
    """``@step(max_retries=3, retry_delay=1)``: that many retries (default: the default policy's), and with
    ``retry_delay`` a fixed delay, as it always meant; without it the default schedule (back-off, full jitter).
    Neither: the default policy."""
    retries = _unchecked(DEFAULT_MAX_ATTEMPTS - 1 if max_retries is None else max_retries)
    if isinstance(retries, bool) or not isinstance(retries, int) or retries < 0:
        raise ValueError("max_retries must be an int >= 0")
    if retry_delay is None:
        return RetryPolicy(max_attempts=retries + 1)
    try:
        return RetryPolicy.fixed(retry_delay, max_attempts=retries + 1)
    except (TypeError, ValueError) as error:  # the policy's own words named initial_delay, which the user never wrote
        raise type(error)(str(error).replace("initial_delay", "retry_delay")) from None


def seeded(*identity: str) -> Callable[[], float]:
    """A draw in [0, 1) fixed by ``identity`` (run id, step id, attempt): the jitter of one retry, the same
    wherever and however often that attempt's failure is judged."""
    digest = hashlib.sha256("\x1f".join(identity).encode()).digest()
    value = int.from_bytes(digest[:8], "big") / 2.0 ** 64
    return lambda: value


def _unchecked(value: object) -> object:
    return value


def _types(value: ExceptionTypes) -> tuple[type[BaseException], ...]:
    return value if isinstance(value, tuple) else (value,)
