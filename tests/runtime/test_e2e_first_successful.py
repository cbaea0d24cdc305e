"""``awsworld.first_successful`` end to end: the first success wins and the rest are cancelled without keeping the
run waiting (a cancelled sleep never wakes it, a cancelled hook is left unread), every failure is carried when all
fail, the choice replays identically across deliveries, and the same on ``LocalAWS``."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from awsworld import BatchError, FatalError, create_hook, first_successful, sleep, step, workflow
from awsworld.local import LocalAWS
from awsworld.testing import WorkflowTestEnv


@step
async def quick(label: str) -> str:
    return label


@step(max_retries=0)
async def broken(label: str) -> str:
    raise FatalError(f"{label} is down")


async def after(duration: timedelta, label: str) -> str:
    await sleep(duration)
    return label


async def failing_after(duration: timedelta, label: str) -> str:
    await sleep(duration)
    raise RuntimeError(f"{label} gave up")


# ----------------------------------------------------------------------------------------- a hook against a sleep


@workflow
async def approve_or_expire(token: str, then: str) -> dict[str, Any]:
    hook = create_hook(token=token)
    decision = await first_successful(hook, after(timedelta(hours=1), "expired"))
    # The run goes on (waits on a second hook) long after the losing sleep's time: it must not wake for it.
    second = await create_hook(token=then)
    return {"decision": decision, "then": second}


async def test_a_hook_beats_a_sleep_and_the_cancelled_sleep_never_wakes_the_run(
        awsworld_env: WorkflowTestEnv) -> None:
    env, token, then = awsworld_env, f"t-{uuid.uuid4().hex}", f"t-{uuid.uuid4().hex}"
    run = await env.client.start(approve_or_expire, token, then)
    await env.idle()  # not run.wait_for_hook: it lets time skip, and the hour-long sleep would win the race
    await env.client.resume_hook(token, "approved")
    await run.wait_for_hook(then)
    deliveries = env.deliveries
    await env.sleep(timedelta(hours=3))  # past the losing sleep's time
    # The wake-up queued for the sleep before it lost (a delayed message cannot be taken back) arrives once and
    # writes nothing: no wait_completed, no further wake-up.
    assert env.deliveries - deliveries <= 1
    await env.client.resume_hook(then, "done")
    assert await run.result() == {"decision": "approved", "then": "done"}
    assert "wait_completed" not in [e.event_type for e in await run.events()]


async def test_a_sleep_beats_a_hook_nobody_resumes(awsworld_env: WorkflowTestEnv) -> None:
    token, then = f"t-{uuid.uuid4().hex}", f"t-{uuid.uuid4().hex}"
    run = await awsworld_env.client.start(approve_or_expire, token, then)
    await run.wait_for_hook(then)  # the hour is skipped: the sleep won
    await awsworld_env.client.resume_hook(token, "too late")  # the loser's hook is unread, not an error
    await awsworld_env.client.resume_hook(then, "done")
    assert await run.result() == {"decision": "expired", "then": "done"}
    events = await run.events()
    waited = next(e.created_at for e in events if e.event_type == "wait_completed") - events[0].created_at
    assert timedelta(hours=1) <= waited < timedelta(hours=1, minutes=1)


# ----------------------------------------------------------------------------------------- steps


@workflow
async def fastest(labels: list[str]) -> str:
    return await first_successful(broken(labels[0]), quick(labels[1]), after(timedelta(days=1), labels[2]))


async def test_the_first_success_wins_over_failures_and_slower_ones(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(fastest, ["a", "b", "c"])
    assert await run.result() == "b"
    events = await run.events()
    assert "wait_completed" not in [e.event_type for e in events]  # the day-long sleep was dropped
    assert events[-1].created_at - events[0].created_at < timedelta(hours=1)


@workflow
async def all_fail() -> dict[str, Any]:
    try:
        await first_successful(broken("x"), failing_after(timedelta(minutes=5), "y"), broken("z"))
    except BatchError as error:
        return {"message": str(error), "errors": [str(e) for e in error.errors]}
    return {}


async def test_when_all_fail_the_error_carries_every_failure_in_argument_order(
        awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(all_fail)
    out = await run.result()
    assert len(out["errors"]) == 3
    assert "x is down" in out["errors"][0] and "y gave up" in out["errors"][1] and "z is down" in out["errors"][2]
    assert out["message"].startswith("all 3 awaitables failed")


@workflow
async def rounds(n: int) -> list[str]:
    winners = []
    for i in range(n):  # each round sleeps: one delivery per round at least, each replaying the earlier choices
        winners.append(await first_successful(after(timedelta(minutes=10 + (i % 2) * 20), f"slow{i}"),
                                              after(timedelta(minutes=20), f"mid{i}")))
    return winners


async def test_the_winner_replays_identically_across_deliveries(awsworld_env: WorkflowTestEnv,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_FLOW_BUDGET_MS", "1")
    run = await awsworld_env.client.start(rounds, 4)
    assert await run.result() == ["slow0", "mid1", "slow2", "mid3"]
    events = await run.events()
    assert [e.event_type for e in events].count("wait_completed") == 4  # the losers never completed


async def test_first_successful_needs_an_awaitable() -> None:
    with pytest.raises(ValueError, match="at least one"):
        await first_successful()


# ----------------------------------------------------------------------------------------- LocalAWS


@workflow
async def local_race(token: str) -> dict[str, Any]:
    hook = create_hook(token=token)
    first = await first_successful(hook, after(timedelta(seconds=30), "expired"))
    second = await first_successful(broken("p"), after(timedelta(seconds=1), "slept"))
    return {"first": first, "second": second}


async def test_on_local_aws_a_hook_beats_a_sleep_and_a_sleep_beats_a_failure(local: LocalAWS) -> None:
    assert local.client is not None
    token = f"t-{uuid.uuid4().hex}"
    run = await local.client.start(local_race, token)
    await run.wait_for_hook(token)
    await local.client.resume_hook(token, "approved")
    assert await run.result(timeout=30) == {"first": "approved", "second": "slept"}
