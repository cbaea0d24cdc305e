"""A run whose message is lost still ends: the watchdog on the test env's clock, a hook resume, an operator's wake.

Each scenario loses what a real queue can lose (``MemoryQueue.purge``: every message, visible, delayed or in
flight; dedup markers stay, as on AWS), often right after a delivery died mid-step (the environment's Lambda-like
timeout cancels it, as Lambda kills an invocation). Nothing but the public paths moves the run on afterwards.
The counts are of step bodies: a lost attempt's body may have run (at least once), no other body runs twice.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from datetime import datetime, timedelta
from typing import Any

import pytest

from awsworld import create_hook, sleep, step, step_metadata, workflow
from awsworld.cli import dev_reload
from awsworld.testing import WorkflowTestEnv
from awsworld.world.queue import QueueBatchResult
from awsworld.world.rules.leases import lease_grace_seconds
from awsworld.world.watch import horizon

BODIES: Counter[tuple[str, str]] = Counter()
"""Step bodies run, by (run id, step name): what a user's side effects would count."""
STALL_SECONDS = 1.0
TIMEOUT_SECONDS = 0.3


def _ran() -> int:
    meta = step_metadata()
    BODIES[(meta.run_id, meta.step_name)] += 1
    return meta.attempt


@step(name="lost.stall_first")
async def stall_first(x: int) -> int:
    """Outlives its delivery's invocation on the first attempt (the delivery is killed mid-step)."""
    if _ran() == 1:
        await asyncio.sleep(STALL_SECONDS)
    return x * 10


@step(name="lost.plain")
async def plain(x: int) -> int:
    _ran()
    return x + 1


@step(name="lost.purging")
async def purging(x: int) -> int:
    """Loses every queued message while it runs (the queued branches of its fan-out among them)."""
    _ran()
    PURGE()
    return x


def _no_purge() -> None:
    raise AssertionError("PURGE is set by the test")


PURGE: Any = _no_purge


@workflow(name="lost.one_step")
async def one_step(x: int) -> int:
    return await stall_first(x) + 1


@workflow(name="lost.fan_out")
async def fan_out(x: int) -> list[int]:
    return list(await asyncio.gather(purging(x), plain(x), plain(x + 1)))


@workflow(name="lost.step_and_hook")
async def step_and_hook(x: int, token: str) -> list[Any]:
    async with create_hook(token=token) as hook:
        return list(await asyncio.gather(stall_first(x), hook))


@workflow(name="lost.sleeper")
async def sleeper(x: int) -> int:
    await sleep(timedelta(hours=1))
    return await plain(x)


@workflow(name="lost.waits_on_a_hook")
async def waits_on_a_hook(token: str) -> Any:
    async with create_hook(token=token) as hook:
        return await hook


def datetime_of(text: str) -> datetime:
    return datetime.fromisoformat(text)


async def _killed_mid_step(env: WorkflowTestEnv) -> None:
    """Wait until a delivery was killed by its invocation's timeout, then lose every message."""
    deadline = time.monotonic() + 10
    while env.driver.invoker.timed_out == 0:
        assert time.monotonic() < deadline, "no delivery timed out"
        await asyncio.sleep(0.02)
    assert env.world.memory_queue.purge() >= 1


@pytest.fixture
async def env() -> Any:
    async with WorkflowTestEnv(timeout=TIMEOUT_SECONDS) as made:
        yield made


async def test_a_step_whose_delivery_died_with_its_message_is_taken_over_when_the_watchdog_wakes_the_run(
        env: WorkflowTestEnv) -> None:
    started = env.now()
    run = await env.client.start(one_step, 4)
    await _killed_mid_step(env)
    assert await run.result() == 41
    assert env.driver.ticks >= 1, "the watchdog, on the virtual clock, woke it"
    assert env.now() - started >= horizon(), "not before the run's due"
    [step] = await run.steps()
    assert (step.status, step.attempt) == ("completed", 2), "the lost attempt counts"
    assert BODIES[(run.run_id, "lost.stall_first")] == 2, "the lost attempt's body ran; the take-over's once more"
    starts = [e for e in await run.events() if e.event_type == "step_started"]
    assert starts[1].created_at >= starts[0].created_at + timedelta(seconds=lease_grace_seconds())


async def test_queued_steps_whose_messages_were_lost_are_queued_again_under_fresh_keys(
        env: WorkflowTestEnv) -> None:
    """The fan-out's queued branches lose their messages the moment they are sent: the batch send lands, then
    every message is purged before the driver can receive one (nothing awaits between the two, so the loss
    does not depend on how the event loop orders the inline step and the driver, which differs between
    Python 3.11 and 3.13). The inline branch, ``purging``, purges again while it runs."""
    global PURGE
    send_batch = env.world.queue_batch
    lost: list[int] = []

    async def send_then_lose(*args: Any, **kwargs: Any) -> Any:
        sent = await send_batch(*args, **kwargs)
        if not lost:
            lost.append(env.world.memory_queue.purge())
        return sent

    env.world.queue_batch = send_then_lose  # type: ignore[method-assign]
    PURGE = env.world.memory_queue.purge
    try:
        run = await env.client.start(fan_out, 5)
        assert await run.result() == [5, 6, 7]
    finally:
        PURGE = _no_purge
        env.world.queue_batch = send_batch  # type: ignore[method-assign]
    assert lost and lost[0] >= 2, "the two queued branches' messages were lost (and the start message in flight)"
    assert env.driver.ticks >= 1
    assert BODIES[(run.run_id, "lost.purging")] == 1 and BODIES[(run.run_id, "lost.plain")] == 2
    assert all(s.attempt == 1 for s in await run.steps()), "nothing ran twice: the lost messages never started"


async def test_a_hook_resume_revives_a_stranded_run_without_the_watchdog(env: WorkflowTestEnv) -> None:
    token = f"lost-hook-{time.monotonic_ns()}"
    run = await env.client.start(step_and_hook, 3, token)
    await _killed_mid_step(env)
    env.advance(timedelta(seconds=lease_grace_seconds() + 5))  # the dead delivery's lease has passed
    await env.client.resume_hook(token, "approved")
    assert await run.result() == [30, "approved"]
    assert env.driver.ticks == 0, "the resume's own delivery took the step over"
    assert [s.attempt for s in await run.steps()] == [2]


async def test_an_operators_wake_before_the_lease_ends_comes_back_when_it_does(env: WorkflowTestEnv) -> None:
    run = await env.client.start(one_step, 2)
    await _killed_mid_step(env)
    woke = env.now()
    await env.client.wake(run.run_id)
    assert await run.result() == 21
    assert env.driver.ticks == 0, "one wake was enough: its flow queued itself for the lease's end"
    starts = [e for e in await run.events() if e.event_type == "step_started"]
    assert len(starts) == 2 and starts[1].created_at >= datetime_of(starts[0].event_data["leaseUntil"])
    assert env.now() - woke < horizon()


async def test_a_sleeps_lost_wake_up_is_delivered_by_the_watchdog_after_its_due(env: WorkflowTestEnv) -> None:
    run = await env.client.start(sleeper, 1)
    await env.idle()
    [wait] = [e for e in await run.events() if e.event_type == "wait_created"]
    resume_at = datetime_of(wait.event_data["resumeAt"])
    due = env.world.watch.next_due()
    assert due is not None and resume_at + horizon() <= due <= resume_at + horizon() + timedelta(minutes=1), \
        "at rest, the run's due is its wake-up plus the horizon, not five minutes after its last write"
    assert env.world.memory_queue.purge() == 1  # the delayed wake-up
    assert await run.result() == 2
    assert env.driver.ticks == 1 and env.now() >= due


async def test_a_run_at_rest_is_never_woken_by_the_watchdog(env: WorkflowTestEnv) -> None:
    run = await env.client.start(sleeper, 7)
    assert await run.result() == 8  # the hour passes, by its own message
    token = f"rest-{time.monotonic_ns()}"
    waiting = await env.client.start(waits_on_a_hook, token)
    await waiting.wait_for_hook(token)
    await env.idle()
    assert env.world.watch.next_due(lifetimes=False) is None, \
        "a run waiting on hooks alone is due only at its lifetime's end (world/rules/lifetime.py), a year on"
    await env.sleep(timedelta(days=2))
    await env.client.resume_hook(token, {"ok": True})
    assert await waiting.result() == {"ok": True}
    assert env.driver.ticks == 0


async def test_waking_a_run_whose_messages_are_fine_is_harmless(env: WorkflowTestEnv) -> None:
    run = await env.client.start(sleeper, 3)
    await env.idle()
    for _ in range(3):
        await env.client.wake(run.run_id)
    await env.idle()
    assert await run.result() == 4
    events = await run.events()
    kinds = Counter(e.event_type for e in events)
    assert kinds["wait_completed"] == 1 and kinds["step_completed"] == 1 and kinds["run_completed"] == 1
    assert BODIES[(run.run_id, "lost.plain")] == 1
    with pytest.raises(Exception, match="nothing to wake"):
        await env.client.wake(run.run_id)


@step(name="lost.fails_once", max_retries=2, retry_delay=600)
async def fails_once(x: int) -> int:
    if _ran() == 1:
        raise RuntimeError("supplier down")
    return x


@workflow(name="lost.retried")
async def retried(x: int) -> int:
    return await fails_once(x)


async def test_a_wake_during_a_retry_back_off_brings_the_retry_when_it_is_due_not_a_horizon_later(
        env: WorkflowTestEnv) -> None:
    """``awsworld dev`` restarted (its queue is not saved) while a step waits out its retry back-off: the restart's
    wake found nothing to run yet and queued nothing for the retry, so the attempt came when the watchdog woke the
    run, the watch horizon (5 minutes) after it was due. An operator's wake (as the restart's) now leaves a flow
    message for the retry's time."""
    run = await env.client.start(retried, 4)
    await env.idle()
    [retrying] = [e for e in await run.events() if e.event_type == "step_retrying"]
    due = datetime_of((retrying.event_data or {})["retryAfter"])
    assert env.world.memory_queue.purge() == 1  # the retry's message, lost
    await env.client.wake(run.run_id)
    assert await run.result() == 4
    starts = [e.created_at for e in await run.events() if e.event_type == "step_started"]
    assert len(starts) == 2 and due <= starts[1] < due + timedelta(minutes=1), (due, starts)
    assert env.driver.ticks == 0, "the wake was enough: the watchdog was not needed"


RESTARTED: dict[str, Any] = {}
"""The restart test's gates (``asyncio.Event``) and how many of its queued steps' bodies run under their messages."""


@step(name="lost.restarted")
async def restarted(i: int) -> int:
    """Step 0 is the one running when ``dev`` dies (attempt 1 outlives its delivery), then the one the restart's wake
    takes over and runs inline (attempt 2): that attempt ends once every other step runs under its own message.
    The others wait at the gate, so they are running, not ended, when the restart's flow looks at the run again."""
    if _ran() == 1 and i == 0:
        await asyncio.sleep(STALL_SECONDS)
    elif i == 0:
        await RESTARTED["all_running"].wait()
    else:
        RESTARTED["running"] += 1
        if RESTARTED["running"] == RESTARTED["others"]:
            RESTARTED["all_running"].set()
        await RESTARTED["gate"].wait()
    return i


@workflow(name="lost.restarted_fan_out")
async def restarted_fan_out(n: int) -> int:
    return sum(await asyncio.gather(*[restarted(i) for i in range(n)]))


async def test_a_restarts_wake_takes_over_only_the_steps_started_before_it_not_those_its_own_messages_started(
        ) -> None:
    """``awsworld dev`` killed (``kill -9``) during a fan-out and started again on its state: the restart's wake
    (``dev_reload.replay_unfinished``) tries every step started before it (their deliveries died with the old
    process, ``recovery.taken_over``), runs one inline and queues the steps never started. It took over the steps
    its own messages had started meanwhile as well, at every turn of its loop: the World refused each inline try
    (their leases are live), and each was queued again under a fresh key, so every such step got a second
    delivery; one that came after its step ended ran a flow that read the whole log (``bench/dev_crash.py``: 94
    such flows after a restart at 1,000 steps, each reading 2,987 events, and the step results behind them held
    for up to 98 s). Now the wake takes over only what started before it was sent: one delivery per step, and the
    flows of the run after the restart are the wake's and the last step's."""
    others = 5
    async with WorkflowTestEnv(timeout=TIMEOUT_SECONDS) as env:
        RESTARTED.update(gate=asyncio.Event(), all_running=asyncio.Event(), running=0, others=others)
        send_batch = env.world.queue_batch
        dropped: list[int] = []

        async def lost_with_the_process(queue_name: str, messages: list[Any]) -> Any:
            dropped.append(len(messages))  # never sent: dev's queue (and its dedup markers) die with it
            return [QueueBatchResult(message_id=f"lost-{n}") for n in range(len(messages))]

        env.world.queue_batch = lost_with_the_process  # type: ignore[method-assign]
        run = await env.client.start(restarted_fan_out, others + 1)
        await _killed_mid_step(env)  # step 0's delivery dies mid-body: the crash
        env.world.queue_batch = send_batch  # type: ignore[method-assign]
        assert dropped == [others]
        env.driver.invoker.timeout = 60.0  # the restarted process's deliveries live
        env.advance(timedelta(seconds=lease_grace_seconds() + 5))  # the dead attempt's lease has ended (dev's
        # restore ends it in storage: ``cli/dev_state.py``)
        before = len(env.driver.results)
        verdict = await dev_reload.replay_unfinished(env.world, env.worker.registry, wake="all", tag="restart")
        assert verdict.woken == [run.run_id]
        deadline = time.monotonic() + 10
        while not any(r.status == "suspended" for r in env.driver.results[before:]):
            assert time.monotonic() < deadline, env.driver.results[before:]
            await asyncio.sleep(0.01)
        RESTARTED["gate"].set()
        assert await run.result() == sum(range(others + 1))
        await env.idle()
        after = Counter(r.status for r in env.driver.results[before:])
    assert after == {"suspended": 1, "step-completed": others - 1, "step-then-completed": 1}, after
    assert BODIES[(run.run_id, "lost.restarted")] == others + 2, "step 0 twice (the crash's attempt), others once"
    assert sorted(s.attempt for s in await run.steps()) == [1] * others + [2]


@step(name="lost.retaken")
async def retaken(i: int) -> int:
    """Every step's first attempt outlives its delivery (all of them are running when ``dev`` dies)."""
    if _ran() == 1:
        await asyncio.sleep(STALL_SECONDS)
    return i


@workflow(name="lost.retaken_fan_out")
async def retaken_fan_out(n: int) -> int:
    return sum(await asyncio.gather(*[retaken(i) for i in range(n)]))


async def test_a_restarts_wake_never_runs_inline_a_take_over_it_queued_to_a_message_of_its_own() -> None:
    """Every step of a fan-out was running when ``dev`` died: the restart's wake takes each over, queues all but one
    to messages of their own (each under a fresh key) and runs one inline. At its next turn, a queued take-over whose
    message had not started it yet still looked like one (its attempt the dead one, started before the wake), and
    the wake ran it inline too: the World let one of the two start it, so the other was a refused write or, as here
    (the messages come later), a duplicate delivery that found its step ended; one turn after another, the wake ran
    every step and each queued message came for nothing. Now each queued take-over is its message's: the wake runs
    one step, the messages the others, one delivery per step."""
    steps = 4
    async with WorkflowTestEnv(timeout=TIMEOUT_SECONDS) as env:
        run = await env.client.start(retaken_fan_out, steps)
        deadline = time.monotonic() + 10
        while env.driver.invoker.timed_out < steps:  # each step's delivery dies mid-body: the crash
            assert time.monotonic() < deadline, env.driver.invoker.timed_out
            await asyncio.sleep(0.02)
        env.world.memory_queue.purge()  # dev's queue dies with it
        env.driver.invoker.timeout = 60.0  # the restarted process's deliveries live
        env.advance(timedelta(seconds=lease_grace_seconds() + 5))  # the dead attempts' leases have ended
        send_batch = env.world.queue_batch

        async def later(queue_name: str, messages: list[Any]) -> Any:  # the wake's messages come after its turn
            return await send_batch(queue_name, [{**m, "delay_seconds": 60} for m in messages])

        env.world.queue_batch = later  # type: ignore[method-assign]
        before = len(env.driver.results)
        verdict = await dev_reload.replay_unfinished(env.world, env.worker.registry, wake="all", tag="restart")
        assert verdict.woken == [run.run_id]
        assert await run.result() == sum(range(steps))
        await env.idle()
        after = Counter(r.status for r in env.driver.results[before:])
    assert after == {"suspended": 1, "step-completed": steps - 2, "step-then-completed": 1}, after
    assert BODIES[(run.run_id, "lost.retaken")] == 2 * steps, "each step: the dead attempt, and one more"
    assert sorted(s.attempt for s in await run.steps()) == [2] * steps
