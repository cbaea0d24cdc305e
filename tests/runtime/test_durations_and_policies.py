"""Unit tests: the one duration parser, ``RetryPolicy``'s delay schedule and error choice, the poll schedule,
and the ``@step`` arguments that build a policy."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta, timezone

import pytest

from awsworld import FatalError, PollTimeoutError, RetryableError, RetryPolicy, StepTimeoutError, poll_until, step
from awsworld.authoring.durations import duration_text, parse_duration, resolve, seconds
from awsworld.authoring.poll_spec import PollSpec
from awsworld.authoring.retry import seeded, shorthand

NOW = datetime(2030, 1, 1, tzinfo=UTC)


# ----------------------------------------------------------------------------------------- durations


@pytest.mark.parametrize(("value", "expected"), [
    (0, 0.0), (10, 10.0), (2.5, 2.5), (timedelta(minutes=2), 120.0),
    ("500ms", 0.5), ("10s", 10.0), ("5m", 300.0), ("2h", 7200.0), ("1d", 86400.0),
    ("1h30m", 5400.0), ("1h 30m 15s", 5415.0), ("1.5s", 1.5), ("2H", 7200.0), (" 3s ", 3.0), ("1m500ms", 60.5),
])
def test_durations_parse_to_seconds(value: object, expected: float) -> None:
    assert seconds(value) == pytest.approx(expected)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", ["", "10", "10x", "-5s", "1h-30m", "s", "ten seconds", "10 s s", -1, -0.5,
                                   timedelta(seconds=-1), float("nan"), float("inf")])
def test_bad_durations_are_value_errors(value: object) -> None:
    with pytest.raises(ValueError):
        parse_duration(value)  # type: ignore[arg-type]


@pytest.mark.parametrize("value", [True, None, [1], b"10s", NOW])
def test_values_of_other_types_are_type_errors(value: object) -> None:
    with pytest.raises(TypeError):
        parse_duration(value)  # type: ignore[arg-type]


def test_resolve_measures_relative_durations_from_now_and_keeps_aware_datetimes() -> None:
    assert resolve("1h30m", NOW) == NOW + timedelta(minutes=90)
    assert resolve(5, NOW) == NOW + timedelta(seconds=5)
    later = datetime(2030, 6, 1, 12, tzinfo=timezone(timedelta(hours=2)))
    assert resolve(later, NOW) == later
    with pytest.raises(ValueError, match="timezone-aware"):
        resolve(datetime(2030, 6, 1), NOW)


def test_the_error_names_the_argument() -> None:
    with pytest.raises(ValueError, match="retry_after"):
        RetryableError("x", retry_after="soon")
    with pytest.raises(ValueError, match="initial_delay"):
        RetryPolicy(initial_delay="-1s")


def test_retry_after_takes_every_form() -> None:
    assert RetryableError(retry_after="10s").retry_after == 10.0
    assert RetryableError(retry_after=timedelta(minutes=1)).retry_after == 60.0
    assert RetryableError(retry_after=3).retry_after == 3.0
    assert RetryableError(retry_after=NOW).retry_after == NOW
    assert RetryableError().retry_after is None
    with pytest.raises(ValueError):
        RetryableError(retry_after=datetime(2030, 1, 1))
    with pytest.raises(ValueError):
        RetryableError(retry_after=-1)


# ----------------------------------------------------------------------------------------- RetryPolicy


def test_exponential_back_off_is_capped_by_max_delay() -> None:
    policy = RetryPolicy(max_attempts=6, initial_delay="1s", backoff=3, max_delay="20s", jitter=0)
    assert [policy.delay(n) for n in range(1, 6)] == [1.0, 3.0, 9.0, 20.0, 20.0]
    assert [policy.base_delay(n) for n in range(1, 6)] == [1.0, 3.0, 9.0, 20.0, 20.0]


def test_the_default_is_the_sdks_six_attempts_5s_doubling_to_60s_with_full_jitter() -> None:
    policy = RetryPolicy()
    assert policy.max_attempts == 6 and policy.max_retries == 5
    assert [policy.base_delay(n) for n in range(1, 6)] == [5.0, 10.0, 20.0, 40.0, 60.0]
    assert policy.jitter == 1.0, "full jitter: each delay anywhere between 0 and its base"
    assert policy.delay(3, rand=lambda: 0.0) == 20.0
    assert policy.delay(3, rand=lambda: 0.75) == 5.0
    assert shorthand(None, None) == policy, "a bare @step gets the default policy"


def test_the_cap_never_shortens_the_first_delay() -> None:
    slow = RetryPolicy(initial_delay="10m", jitter=0)  # the default max_delay is 60 s
    assert [slow.base_delay(n) for n in (1, 2, 3)] == [600.0, 600.0, 600.0]


def test_the_jitter_is_fixed_by_the_attempt_and_differs_between_attempts() -> None:
    """``seeded``: the same identity draws the same value (a replay, another process), another one another."""
    draws = {seeded("run", "step_1", str(attempt))() for attempt in range(1, 6)}
    assert len(draws) == 5 and all(0.0 <= d < 1.0 for d in draws)
    assert seeded("run", "step_1", "1")() == seeded("run", "step_1", "1")()
    assert seeded("run-a", "step_1", "1")() != seeded("run-b", "step_1", "1")(), "runs spread"
    spread = [RetryPolicy().delay(1, rand=seeded(f"run-{i}", "step_1", "1")) for i in range(200)]
    assert min(spread) < 1.0 and max(spread) > 4.0, "full jitter spreads 200 runs over (0, 5] s"


def test_fixed_is_exact() -> None:
    policy = RetryPolicy.fixed("2s", max_attempts=3)
    assert policy.max_attempts == 3 and policy.jitter == 0 and policy.backoff == 1
    assert [policy.delay(n) for n in (1, 2, 3)] == [2.0, 2.0, 2.0]


def test_jitter_shortens_the_delay_by_up_to_its_fraction() -> None:
    policy = RetryPolicy(initial_delay=10, backoff=1, jitter=0.5)
    assert policy.delay(1, rand=lambda: 0.0) == 10.0
    assert policy.delay(1, rand=lambda: 0.999999) == pytest.approx(5.0, abs=1e-4)
    assert policy.delay(1, rand=lambda: 0.5) == 7.5
    full = RetryPolicy(initial_delay=10, backoff=1, jitter=1.0)
    assert 0.0 <= full.delay(1) <= 10.0


def test_the_shorthand_is_a_fixed_delay() -> None:
    policy = shorthand(2, "500ms")
    assert policy.max_attempts == 3 and policy.max_retries == 2
    assert [policy.delay(n) for n in (1, 2, 3)] == [0.5, 0.5, 0.5]
    assert shorthand(None, "1s").max_attempts == 6, "retry_delay alone: the default count, fixed delay"


def test_max_retries_alone_keeps_the_default_schedule() -> None:
    """``@step(max_retries=2)`` says how many retries, not how far apart: back-off and full jitter as default."""
    policy = shorthand(2, None)
    assert policy.max_attempts == 3
    assert (policy.initial_delay, policy.backoff, policy.max_delay, policy.jitter) == (5.0, 2.0, 60.0, 1.0)


def test_which_errors_retry() -> None:
    policy = RetryPolicy(retry_on=(TimeoutError, ConnectionError), no_retry_on=ConnectionRefusedError)
    assert policy.retries(TimeoutError())
    assert policy.retries(ConnectionResetError())
    assert not policy.retries(ConnectionRefusedError()), "no_retry_on wins over retry_on"
    assert not policy.retries(ValueError())
    assert policy.retries(RetryableError()), "a RetryableError asks for a retry whatever retry_on says"
    assert policy.retries(StepTimeoutError()), "a timeout is a RetryableError"
    assert not policy.retries(FatalError())
    assert not RetryPolicy(no_retry_on=StepTimeoutError).retries(StepTimeoutError())
    assert not RetryPolicy(retry_on=FatalError).retries(FatalError()), "FatalError never retries"


def test_retry_after_overrides_the_schedule() -> None:
    policy = RetryPolicy(initial_delay="1h", max_delay=None, jitter=0)
    assert policy.retry_at(RetryableError(retry_after="5s"), 1, NOW) == NOW + timedelta(seconds=5)
    assert policy.retry_at(RetryableError(retry_after=NOW + timedelta(days=1)), 1, NOW) == NOW + timedelta(days=1)
    assert policy.retry_at(RetryableError(retry_after=NOW - timedelta(days=1)), 1, NOW) == NOW, "never in the past"
    assert policy.retry_at(ValueError(), 2, NOW) == NOW + timedelta(hours=2)


@pytest.mark.parametrize("kwargs", [{"max_attempts": 0}, {"backoff": 0.5}, {"jitter": 1.5}, {"jitter": -0.1},
                                    {"max_delay": "x"}, {"retry_on": int}, {"no_retry_on": (ValueError, "x")}])
def test_bad_policies_are_refused(kwargs: dict[str, object]) -> None:
    with pytest.raises((ValueError, TypeError)):
        RetryPolicy(**kwargs)  # type: ignore[arg-type]


def test_step_refuses_a_policy_mixed_with_its_shorthand() -> None:
    with pytest.raises(TypeError, match="not both"):
        @step(retry=RetryPolicy(), max_retries=2, name="tests.units.mixed")
        async def mixed() -> None: ...
    with pytest.raises(ValueError):
        @step(timeout="0s", name="tests.units.zero_timeout")
        async def zero() -> None: ...
    with pytest.raises(ValueError):
        @step(max_retries=-1, name="tests.units.negative")
        async def negative() -> None: ...


def test_step_keeps_the_policy_and_the_timeout() -> None:
    policy = RetryPolicy(max_attempts=2)

    @step(retry=policy, timeout="1m", name="tests.units.kept")
    async def kept() -> None: ...

    definition = kept.__awsworld_step__  # type: ignore[attr-defined]
    assert definition.retry is policy and definition.timeout == 60.0 and definition.max_retries == 1


# ----------------------------------------------------------------------------------------- polls


def test_the_poll_schedule_backs_off_and_stops_at_the_deadline() -> None:
    spec = PollSpec(bool, 10.0, 2.0, 30.0, NOW + timedelta(seconds=100))
    assert [spec.delay(n) for n in range(1, 5)] == [10.0, 20.0, 30.0, 30.0]
    assert spec.next_poll(1, NOW) == NOW + timedelta(seconds=10)
    assert spec.next_poll(4, NOW + timedelta(seconds=90)) == NOW + timedelta(seconds=100), "the last poll: at it"
    assert spec.next_poll(5, NOW + timedelta(seconds=100)) is None


CALLS: list[int] = []


@step(name="tests.units.counter")
async def counter() -> int:
    CALLS.append(1)
    return len(CALLS)


async def test_poll_until_outside_a_workflow_is_a_plain_loop() -> None:
    CALLS.clear()
    assert await poll_until(counter, predicate=lambda n: n >= 3, interval=0.01) == 3
    CALLS.clear()
    with pytest.raises(PollTimeoutError):
        await poll_until(counter, predicate=lambda n: n > 100, interval=0.01, timeout=0.05)
    with pytest.raises(TypeError):
        await poll_until(asyncio.sleep, 0)  # not a step


@pytest.mark.parametrize(("seconds", "text"), [
    (0, "0 s"), (0.0004, "0.4 ms"), (0.35, "350 ms"), (-0.2, "200 ms"), (4, "4 s"), (62, "1 min 2 s"),
    (3700, "1 h 1 min"), (86400 * 365, "365 d"), (86400 * 1.5, "1 d 12 h"),
])
def test_a_duration_reads_for_people_at_every_scale_and_never_with_an_exponent(seconds: float, text: str) -> None:
    """``duration_text``: the one formatter of how long (lifetime messages, the timeline's ``in``/``ago``); a tiny
    test limit read ``5e-05 s`` in a message before it said milliseconds."""
    assert duration_text(seconds) == text
