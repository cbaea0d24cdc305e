"""``poll_until`` with state and limits (issue 26 item 4), on the in-memory World and the emulator (moto's server):
the check receives the previous poll's result (``initial_state`` to start), each rejected poll's state is in the
log (its ``step_retrying``, shown by ``Run.events()`` and the timeline), a state over the inline limit included
(in S3 on AWS); ``max_attempts`` ends the wait with ``PollAttemptsExhaustedError`` (a ``PollTimeoutError``); a
check that raises fails the wait unless its retry policy retries the error, and then once the policy's attempts
have raised in a row (before, it was polled again for as long as the timeout allowed: without one, forever)."""

from __future__ import annotations

import uuid
from collections import defaultdict
from typing import Any

import pytest

from awsworld import (
    PollTimeoutError,
    RetryPolicy,
    StepError,
    poll_until,
    step,
    workflow,
)
from awsworld._timeline import timeline_rows
from awsworld.authoring.errors import PollAttemptsExhaustedError
from awsworld.aws.resources import run_prefix
from awsworld.durable import serde

from .conftest import BOTH, E2E, on_backends, with_env
from .values_support import LIMIT_ENV, MAX_VALUE_BYTES

SEEN: defaultdict[str, list[Any]] = defaultdict(list)
"""tag -> the state each poll of the check received (steps run in this process on both backends)."""
PAD = "p" * 20_000
"""Makes a state larger than the inline value limit (16 KB): stored out of line (S3) on AWS."""


e2e_backend = on_backends(BOTH)


local_env = with_env({**LIMIT_ENV, "AWSWORLD_TIME_SCALE": "20"})


@step(name="poll_state.count_up")
async def count_up(state: dict[str, Any], tag: str) -> dict[str, Any]:
    SEEN[tag].append(state["n"])
    return {"n": state["n"] + 1, "pad": state["pad"]}


@workflow(name="poll_state.counting")
async def counting(tag: str) -> dict[str, Any]:
    return await poll_until(count_up, tag, initial_state={"n": 0, "pad": PAD}, predicate=lambda s: s["n"] >= 3,
                            interval="1s", backoff=1)


async def test_each_poll_gets_the_previous_result_and_the_log_records_it(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(counting, tag)
    result = await run.result(timeout=60)
    assert result == {"n": 3, "pad": PAD}
    assert SEEN[tag] == [0, 1, 2]  # every poll ran once, in its own delivery, with the state the log holds
    events = await run.events()
    created = next(e for e in events if e.event_type == "step_created")
    assert serde.loads((created.event_data or {})["input"])["args"] == [{"n": 0, "pad": PAD}, tag]
    states = [serde.loads(e.event_data["error"]["state"]) for e in events
              if e.event_type == "step_retrying" and e.event_data]
    assert states == [{"n": 1, "pad": PAD}, {"n": 2, "pad": PAD}]
    shown = [row for row in timeline_rows(events) if row.event_type == "step_retrying"]
    assert [row.value_label for row in shown] == ["state", "state"] and all(row.error is None for row in shown)
    assert "the condition is not met yet" in shown[0].detail
    if not e2e.memory:  # over the inline limit: the states (and input, result) are S3 values on AWS
        s3 = await e2e.world.clients.s3()
        page = await s3.list_objects_v2(Bucket=e2e.world.config.bucket_name,
                                        Prefix=f"{run_prefix(run.run_id)}values/")
        assert int(page.get("KeyCount", 0)) >= 4, page


@step(name="poll_state.never")
async def never(state: int, tag: str) -> int:
    SEEN[tag].append(state)
    return state + 1


@workflow(name="poll_state.limited")
async def limited(tag: str, attempts: int) -> dict[str, Any]:
    try:
        await poll_until(never, tag, initial_state=10, predicate=lambda n: n > 100, interval="1s",
                         max_attempts=attempts)
    except PollTimeoutError as ended:  # the one except for both limits
        return {"type": type(ended).__name__, "error_type": ended.error_type, "message": str(ended)}
    return {}


async def test_max_attempts_ends_the_wait_with_a_typed_error(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(limited, tag, 3)
    out = await run.result(timeout=60)
    assert out["type"] == "PollAttemptsExhaustedError" == out["error_type"]
    assert "ran out of attempts after 3 polls" in out["message"]
    assert SEEN[tag] == [10, 11, 12]
    kinds = [e.event_type for e in await run.events() if e.correlation_id == "step_1"]
    assert kinds.count("step_started") == 3 and kinds[-1] == "step_failed"
    assert issubclass(PollAttemptsExhaustedError, PollTimeoutError)


FLAKY: defaultdict[str, int] = defaultdict(int)


@step(name="poll_state.flaky", max_retries=1)  # two attempts: a poll may raise once in a row, not twice
async def flaky(state: int, tag: str, fails: list[int]) -> int:
    FLAKY[tag] += 1
    SEEN[tag].append(state)
    if FLAKY[tag] in fails:
        raise ConnectionError(f"poll {FLAKY[tag]}: status service down")
    return state + 1


@workflow(name="poll_state.through_errors")
async def through_errors(tag: str, fails: list[int]) -> dict[str, Any]:
    try:
        value = await poll_until(flaky, tag, fails, initial_state=0, predicate=lambda n: n >= 3, interval="1s")
    except StepError as error:
        return {"error_type": error.error_type, "type": type(error).__name__}
    return {"value": value}


async def test_errors_the_policy_retries_are_polled_again_and_keep_the_state(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(through_errors, tag, [2, 4])  # one error at a time: within the policy
    assert await run.result(timeout=60) == {"value": 3}
    assert SEEN[tag] == [0, 1, 1, 2, 2]  # a poll that raised left the state as it was


async def test_a_check_raising_more_polls_in_a_row_than_its_policy_allows_fails_the_wait(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(through_errors, tag, [2, 3])  # two in a row: over max_retries=1, no timeout needed
    assert await run.result(timeout=60) == {"error_type": "ConnectionError", "type": "StepError"}
    assert FLAKY[tag] == 3


@step(name="poll_state.picky", retry=RetryPolicy(max_attempts=5, retry_on=ConnectionError))
async def picky(tag: str) -> bool:
    FLAKY[tag] += 1
    raise KeyError("no such job")


@workflow(name="poll_state.not_retried")
async def not_retried(tag: str) -> dict[str, Any]:
    try:
        await poll_until(picky, tag, interval="1s")
    except StepError as error:
        return {"error_type": error.error_type}
    return {}


async def test_an_error_the_policy_does_not_retry_fails_the_wait_at_once(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(not_retried, tag)
    assert await run.result(timeout=60) == {"error_type": "KeyError"}
    assert FLAKY[tag] == 1


@step(name="poll_state.grows")
async def grows(state: str, tag: str) -> str:
    SEEN[tag].append(len(state))
    return state + "g" * (MAX_VALUE_BYTES + 1)  # a result the log cannot hold


@workflow(name="poll_state.too_large")
async def too_large(tag: str) -> dict[str, Any]:
    try:
        await poll_until(grows, tag, initial_state="", predicate=lambda s: False, interval="1s")
    except StepError as error:
        return {"error_type": error.error_type}
    return {}


async def test_a_state_over_the_value_limit_fails_the_wait_and_is_not_polled_again(e2e: E2E) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(too_large, tag)
    assert await run.result(timeout=60) == {"error_type": "ValueTooLargeError"}
    assert SEEN[tag] == [0]


async def test_state_and_limits_outside_a_workflow() -> None:
    tag = uuid.uuid4().hex
    assert await poll_until(never, tag, initial_state=1, predicate=lambda n: n >= 3, interval=0.01) == 3
    assert SEEN[tag] == [1, 2]
    with pytest.raises(PollAttemptsExhaustedError):
        await poll_until(never, tag, initial_state=1, predicate=lambda n: n > 100, interval=0.01, max_attempts=2)
    with pytest.raises(ValueError, match="max_attempts"):
        await poll_until(never, tag, initial_state=1, max_attempts=0)
