"""``poll_until``: wait for a condition by re-running a step, at the fewest log entries that keep it durable.

A poll is ONE step whose attempts are the polls. A poll whose result fails the predicate is recorded as
``step_retrying`` carrying the time of the next poll (``retryAfter``), exactly as a retry is; the accepted result
ends the step with ``step_completed``; when the timeout passes it fails with ``PollTimeoutError``. So N polls
cost 2N + 1 events (``step_created``, then ``step_started`` per poll, ``step_retrying`` per rejected poll, and
one ``step_completed``), where a loop of a step and a ``sleep`` costs 5N - 2 (three per step, two per sleep).

A poll with state (``initial_state`` given) calls its check with the previous poll's result: the first poll gets
``initial_state`` (recorded as the step's first argument, so it is part of the call's digest), and each rejected
poll's result is recorded with it, in its ``step_retrying`` (``error.state``, beside ``PollNotReady``: the log's
payload field, so a large state goes to S3 like any value), through the poll's codec (``codec=``, else the
check's own: ``durable.codecs``). The next poll reads it back from the log
(``PollProgress``, kept by the replayed execution), so every replay and every delivery calls the check with the
same state. A poll whose check raised keeps the state it had.

Limits: ``timeout`` (``PollTimeoutError``), ``max_attempts`` polls (``PollAttemptsExhaustedError``, a
``PollTimeoutError``), and for a check that raises, its own retry policy: an error the policy does not retry fails
the wait at once, and one it retries fails it once it has raised ``max_attempts`` (the policy's) polls in a row.

The predicate is workflow code, not data: it cannot travel in a queue message. So a poll always runs inside
a flow delivery (which has the workflow replayed, with the predicate it passed), never as a queued step
message: between polls the flow queues a delayed continuation of itself, as it does for a ``sleep``.
The deadline is fixed from the workflow's ``now()`` at the call, so every replay computes the same one.
"""

from __future__ import annotations

import asyncio
import enum
from collections.abc import Callable, Coroutine
from datetime import datetime
from typing import Any, TypeVar, cast

from ..durable.codecs import Codec
from .durations import Duration, When, resolve, seconds
from .errors import PollAttemptsExhaustedError, PollTimeoutError, StepError
from .poll_spec import ATTEMPTS_EXHAUSTED, TIMED_OUT, PollSpec
from .runtime import current_runtime, noted

R = TypeVar("R")

class _NoState(enum.Enum):
    """The type of ``NO_STATE``. ``poll_until`` annotates ``initial_state: R | _NoState``, not ``R |
    Literal[_NoState.NO_STATE]``: with the ``Literal``, mypy solved ``R`` from ``initial_state=1`` as ``Literal[1]``
    and rejected the check returning ``int`` (tests/typing/sample_usage.py, checked by mypy too)."""

    NO_STATE = "no state"


NO_STATE = _NoState.NO_STATE
"""``poll_until``'s default ``initial_state``: a poll without state (the check gets the same arguments each time)."""


@noted("awsworld.poll_until()")
async def poll_until(check: Callable[..., Coroutine[Any, Any, R]], *args: Any,
                     predicate: Callable[[R], bool] = bool, interval: Duration = 1.0, backoff: float = 2.0,
                     max_interval: Duration | None = 60.0, timeout: When | None = None,
                     max_attempts: int | None = None, initial_state: R | _NoState = NO_STATE,
                     codec: Codec[R] | None = None, **kwargs: Any) -> R:
    """Run the step ``check(*args, **kwargs)`` until ``predicate(result)`` is true (default: the result is
    truthy) and return that result.

    With ``initial_state``, the check is ``check(state, *args, **kwargs)``: ``initial_state`` for the first poll,
    the previous poll's result after (a poll whose check raised keeps the state it had); each rejected poll's
    result is recorded in the log (its ``step_retrying``'s ``error.state``), so replays agree on it.

    Polls are ``interval`` apart, multiplied by ``backoff`` after each one, at most ``max_interval``. Limits:
    after ``timeout`` (a duration from the workflow's ``now()``, or an aware datetime) the last poll runs at the
    deadline and if it is rejected too ``PollTimeoutError`` is raised; after ``max_attempts`` rejected polls,
    ``PollAttemptsExhaustedError`` (a ``PollTimeoutError``). Without either the polls go on until the predicate
    holds. An exception from ``check`` fails the wait (``StepError``) unless ``check``'s retry policy retries it,
    and then once its policy's ``max_attempts`` polls in a row have raised; a retried one counts as a poll. An
    exception from the predicate fails the poll at once (it is a bug, not a condition). ``check``'s own
    ``timeout`` bounds each poll.

    ``codec``: how each poll's result is stored, the state a rejected one leaves for the next and the accepted
    one (default: the check's own ``@step(codec=...)``, else awsworld's JSON); one that fails is a
    ``CodecError`` naming the poll (``the state of poll_until(step 'x') (step_3)``), never retried.

    Cost: one step for the whole poll, 2N + 1 log events for N polls (a ``step_started`` per poll, a
    ``step_retrying`` per rejected one, ``step_created`` and ``step_completed`` once), and one delivery per
    poll; a step-and-``sleep`` loop would write 5N - 2. A poll with state adds each rejected result's bytes to
    its ``step_retrying``. Outside a workflow it is a plain loop (real sleeps)."""
    definition = getattr(check, "__awsworld_step__", None)
    if definition is None:
        raise TypeError(f"poll_until needs a @step to run, got {check!r}")
    if not callable(predicate):
        raise TypeError("predicate must be callable")
    if not backoff >= 1.0:
        raise ValueError(f"backoff must be >= 1, got {backoff!r}")
    given = cast(object, max_attempts)  # a user's value: checked, whatever its annotation says
    if given is not None and (isinstance(given, bool) or not isinstance(given, int) or given < 1):
        raise ValueError(f"max_attempts must be an int of at least 1, got {max_attempts!r}")
    every = seconds(interval, what="interval")
    if every <= 0:
        raise ValueError("interval must be positive")
    cap = None if max_interval is None else seconds(max_interval, what="max_interval")
    stateful = initial_state is not NO_STATE
    call_args = (initial_state, *args) if stateful else args
    runtime = current_runtime.get()
    if runtime is None:
        spec = PollSpec(predicate, every, backoff, cap, None, max_attempts, stateful)
        return await _plain_loop(check, call_args, kwargs, spec, timeout)
    deadline = None if timeout is None else resolve(timeout, runtime.current_time(), what="timeout")
    spec = PollSpec(predicate, every, backoff, cap, deadline, max_attempts, stateful,
                    codec=codec if codec is not None else definition.codec, step_name=definition.name)
    try:
        return await runtime.call_step(definition, call_args, kwargs, poll=spec)
    except StepError as error:
        limit = {TIMED_OUT: PollTimeoutError, ATTEMPTS_EXHAUSTED: PollAttemptsExhaustedError}.get(
            error.error_type or "")
        if limit is not None:
            raise limit(error.message, step_name=error.step_name, step_id=error.step_id, attempt=error.attempt,
                        stack=error.stack) from None
        raise


async def _plain_loop(check: Callable[..., Coroutine[Any, Any, R]], args: tuple[Any, ...], kwargs: dict[str, Any],
                      spec: PollSpec, timeout: When | None) -> R:
    """``poll_until`` outside a workflow (a step called as a plain function): the same schedule, state and limits
    in real time. (The check's retry policy does not apply: a plain call of a step raises, so the poll does.)"""
    started = datetime.now().astimezone()
    deadline = None if timeout is None else resolve(timeout, started, what="timeout")
    schedule = PollSpec(spec.predicate, spec.interval, spec.backoff, spec.max_interval, deadline)
    current = list(args)
    poll = 0
    while True:
        poll += 1
        result = await check(*current, **kwargs)
        if spec.predicate(result):
            return result
        if spec.exhausted(poll):
            raise PollAttemptsExhaustedError(f"the condition was not met after {poll} polls (max_attempts)",
                                             step_name=check.__name__)
        if spec.stateful:
            current[0] = result
        now = datetime.now().astimezone()
        nxt = schedule.next_poll(poll, now)
        if nxt is None:
            raise PollTimeoutError(f"the condition was not met after {poll} polls", step_name=check.__name__)
        await asyncio.sleep(max(0.0, (nxt - now).total_seconds()))
