"""``poll_until``: wait for a condition by re-running a step, at the fewest log entries that keep it durable.

A poll is ONE step whose attempts are the polls. A poll whose result fails the predicate is recorded as
``step_retrying`` carrying the time of the next poll (``retryAfter``), exactly as a retry is; the accepted result
ends the step with ``step_completed``; when the timeout passes it fails with ``PollTimeoutError``. So N polls
cost 2N + 1 events (``step_created``, then ``step_started`` per poll, ``step_retrying`` per rejected poll, and
one ``step_completed``), where a loop of a step and a ``sleep`` costs 5N - 2 (three per step, two per sleep).

The predicate is workflow code, not data: it cannot travel in a queue message. So a poll always runs inside
a flow delivery (which has the workflow replayed, with the predicate it passed), never as a queued step
message: between polls the flow queues a delayed continuation of itself, as it does for a ``sleep``.
The deadline is fixed from the workflow's ``now()`` at the call, so every replay computes the same one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, TypeVar

from .durations import Duration, When, resolve, seconds
from .errors import PollTimeoutError, StepError
from .scope import current_execution

R = TypeVar("R")

POLL_NOT_READY = "PollNotReady"
"""The error name a rejected poll's ``step_retrying`` records (it is not an error: the log's schema wants one)."""


@dataclass(frozen=True)
class PollSpec:
    """What the step runner needs to judge a poll: the predicate and the schedule."""

    predicate: Callable[[Any], bool]
    interval: float
    backoff: float
    max_interval: float | None
    deadline: datetime | None

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


async def poll_until(check: Callable[..., Coroutine[Any, Any, R]], *args: Any,
                     predicate: Callable[[R], bool] = bool, interval: Duration = 1.0, backoff: float = 2.0,
                     max_interval: Duration | None = 60.0, timeout: When | None = None, **kwargs: Any) -> R:
    """Run the step ``check(*args, **kwargs)`` until ``predicate(result)`` is true (default: the result is
    truthy) and return that result.

    Polls are ``interval`` apart, multiplied by ``backoff`` after each one, at most ``max_interval``; after
    ``timeout`` (a duration from the workflow's ``now()``, or an aware datetime) the last poll runs at the
    deadline and if it is rejected too ``PollTimeoutError`` is raised; without a ``timeout`` the polls go on until
    the predicate holds (a check that keeps raising a retryable error included). An exception from ``check`` counts as a
    rejected poll if ``check``'s retry policy would retry it (its ``max_attempts`` does not apply: the timeout
    bounds the polls) and fails the poll at once otherwise (``StepError``), as does an exception from the
    predicate (it is a bug, not a condition). ``check``'s own ``timeout`` bounds each poll.

    Cost: one step for the whole poll, 2N + 1 log events for N polls (a ``step_started`` per poll, a
    ``step_retrying`` per rejected one, ``step_created`` and ``step_completed`` once), and one delivery per
    poll; a step-and-``sleep`` loop would write 5N - 2. Outside a workflow it is a plain loop (real sleeps)."""
    definition = getattr(check, "__awsworld_step__", None)
    if definition is None:
        raise TypeError(f"poll_until needs a @step to run, got {check!r}")
    if not callable(predicate):
        raise TypeError("predicate must be callable")
    if not backoff >= 1.0:
        raise ValueError(f"backoff must be >= 1, got {backoff!r}")
    every = seconds(interval, what="interval")
    if every <= 0:
        raise ValueError("interval must be positive")
    cap = None if max_interval is None else seconds(max_interval, what="max_interval")
    execution = current_execution.get()
    if execution is None:
        return await _plain_loop(check, args, kwargs, predicate, every, backoff, cap, timeout)
    deadline = None if timeout is None else resolve(timeout, execution.current_time(), what="timeout")
    spec = PollSpec(predicate, every, backoff, cap, deadline)
    try:
        return await execution.call_step(definition, args, kwargs, poll=spec)
    except StepError as error:
        if error.error_type == "PollTimeoutError":
            raise PollTimeoutError(error.message, step_name=error.step_name, step_id=error.step_id,
                                   attempt=error.attempt, stack=error.stack) from None
        raise


async def _plain_loop(check: Callable[..., Coroutine[Any, Any, R]], args: tuple[Any, ...], kwargs: dict[str, Any],
                      predicate: Callable[[R], bool], every: float, backoff: float, cap: float | None,
                      timeout: When | None) -> R:
    """``poll_until`` outside a workflow (a step called as a plain function): the same schedule, real time."""
    started = datetime.now().astimezone()
    deadline = None if timeout is None else resolve(timeout, started, what="timeout")
    spec = PollSpec(predicate, every, backoff, cap, deadline)
    poll = 0
    while True:
        poll += 1
        result = await check(*args, **kwargs)
        if predicate(result):
            return result
        now = datetime.now().astimezone()
        nxt = spec.next_poll(poll, now)
        if nxt is None:
            raise PollTimeoutError(f"the condition was not met after {poll} polls", step_name=check.__name__)
        await asyncio.sleep(max(0.0, (nxt - now).total_seconds()))
