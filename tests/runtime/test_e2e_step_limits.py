"""Step concurrency and rate limits across runs (``@step(concurrency=, rate=)``, ``_worker/step_limits.py``), end to
end on the in-memory World, moto and DynamoDB Local: bodies beyond the limit wait (holding no delivery) and none
is lost; the peak of bodies running at once is counted by the bodies themselves; start times of a rate-limited
step conform to its bucket."""

from __future__ import annotations

import asyncio
import math
import re
from collections import defaultdict
from datetime import datetime
from typing import Any

import pytest

from awsworld import Concurrency, RateLimit, RetryPolicy, Run, create_hook, step, workflow
from awsworld._worker import step_limits
from awsworld._worker.delivery import BACKOFF_ENV
from awsworld._worker.limiter import Limiter
from awsworld.testing import WorkflowTestEnv
from awsworld.world.messages import FlowMessage, queue_name_for
from awsworld.world.rules.limiters import step_holder

from .conftest import ALL_BACKENDS, AWS, DYNAMODB_LOCAL, E2E, on_backends

pytestmark = pytest.mark.asyncio
e2e_backend = on_backends(ALL_BACKENDS)

INSIDE: dict[str, int] = defaultdict(int)
PEAK: dict[str, int] = defaultdict(int)
CALLS: dict[str, int] = defaultdict(int)


async def body(name: str, pause: float = 0.02) -> None:
    INSIDE[name] += 1
    CALLS[name] += 1
    PEAK[name] = max(PEAK[name], INSIDE[name])
    try:
        await asyncio.sleep(pause)  # real time: bodies of other deliveries run meanwhile
    finally:
        INSIDE[name] -= 1


@step(name="steplimits.export", concurrency=3)
async def export(n: int) -> int:
    await body("export")
    return n


@workflow(name="steplimits.exports")
async def exports(first: int, count: int) -> list[int]:
    return list(await asyncio.gather(*(export(first + i) for i in range(count))))


def reset() -> None:
    INSIDE.clear()
    PEAK.clear()
    CALLS.clear()


@pytest.mark.sweep_on(AWS, DYNAMODB_LOCAL)  # .ci/run: memory (40 s on moto, 22 s on DynamoDB Local)
async def test_a_step_limit_of_three_across_twenty_runs(e2e: E2E) -> None:
    reset()
    async with e2e.counting() as deliveries:
        runs = [await e2e.start(exports, 10 * r, 5) for r in range(20)]
        results = [await run.result(timeout=180) for run in runs]
    assert results == [list(range(10 * r, 10 * r + 5)) for r in range(20)]
    assert 1 <= PEAK["export"] <= 3  # never exceeded
    assert "limit-wait" in deliveries.statuses  # bodies did wait for a slot (100 calls, 3 slots)
    assert CALLS["export"] == 100  # every call ran once: nothing lost, nothing doubled
    pools = await Limiter(e2e.world).pools("step:steplimits.export")
    assert all(not p.holders and p.waiting == 0 for p in pools)


@step(name="steplimits.charge", rate=RateLimit("10/s", burst=10))
async def charge(n: int) -> int:
    CALLS["charge"] += 1
    return n


@workflow(name="steplimits.charges")
async def charges(first: int, count: int) -> int:
    return sum(await asyncio.gather(*(charge(first + i) for i in range(count))))


@step(name="steplimits.slow_charge", rate=RateLimit("2/s", burst=2))
async def slow_charge(n: int) -> int:
    CALLS["slow_charge"] += 1
    return n


@workflow(name="steplimits.slow_charges")
async def slow_charges(first: int, count: int) -> int:
    return sum(await asyncio.gather(*(slow_charge(first + i) for i in range(count))))


def worst_window(starts: list[datetime], per_second: float, burst: int) -> float:
    """The most any window of the starts holds beyond ``burst + rate x its length`` (0 or less: they conform)."""
    origin = min(starts)
    times = sorted((s - origin).total_seconds() for s in starts)  # (small numbers: exact to the microsecond)
    worst = float("-inf")
    for i, first in enumerate(times):
        for j in range(i, len(times)):
            worst = max(worst, (j - i + 1) - (burst + per_second * (times[j] - first)))
    return worst


@pytest.mark.sweep_on(AWS, DYNAMODB_LOCAL)  # binds in memory only: the emulators' case is the next test
async def test_a_rate_of_ten_a_second_over_two_hundred_calls_from_twenty_runs(e2e: E2E) -> None:
    """200 calls asked at once (in memory): the bucket admits 10, then one each 0.1 s."""
    await rate_held(e2e, charges, "charge", per_second=10, burst=10, runs=20, calls=10, binding=e2e.memory)


@pytest.mark.sweep_on(AWS, DYNAMODB_LOCAL)  # .ci/run: memory (20 s on either emulator)
async def test_a_rate_the_emulators_outpace(e2e: E2E) -> None:
    """The emulators ask slower than 10 a second (their requests are serialized): 2 a second binds there too, over
    10 runs of 2 calls asked at once (the burst, then one each 0.5 s: 9 s at the rate)."""
    await rate_held(e2e, slow_charges, "slow_charge", per_second=2, burst=2, runs=10, calls=2, binding=True)


async def rate_held(e2e: E2E, workflow_fn: Any, name: str, *, per_second: int, burst: int, runs: int, calls: int,
                    binding: bool) -> None:
    reset()
    async with e2e.counting() as deliveries:
        started_runs = [await e2e.start(workflow_fn, calls * r, calls) for r in range(runs)]
        assert [await run.result(timeout=240) for run in started_runs] == [
            sum(range(calls * r, calls * r + calls)) for r in range(runs)]
    assert CALLS[name] == runs * calls  # nothing dropped, nothing doubled
    started = [e for run in started_runs for e in await run.events() if e.event_type == "step_started"]
    assert len(started) == runs * calls
    admitted = [datetime.fromisoformat((e.event_data or {})["limit"]["admittedAt"]) for e in started]
    starts = [e.created_at for e in started]
    # The bucket's promise, at the moments it admitted the starts: never beyond the burst at once, nor the rate.
    assert worst_window(admitted, per_second, burst) <= 1e-6
    if binding:
        assert "limit-wait" in deliveries.statuses  # some waited for their token (sent again at its time)
        assert worst_window(admitted, per_second, burst - 1) > 0.5  # the burst was used: one less would not hold
    # The starts follow their admissions by a delivery's latency (measured here, not assumed): the same bucket,
    # its burst widened by what that latency lets bunch.
    lags = [(s - a).total_seconds() for s, a in zip(starts, admitted, strict=True)]
    assert min(lags) >= 0
    assert worst_window(starts, per_second, burst + math.ceil(per_second * max(lags))) <= 1e-6


@step(name="steplimits.trickled", rate=RateLimit("1/m"))
async def trickled(n: int) -> int:
    return n


@workflow(name="steplimits.trickle")
async def trickle(n: int) -> int:
    return await trickled(n)


@workflow(name="steplimits.trickle_in_a_row")
async def trickle_in_a_row(count: int) -> int:
    for n in range(count):
        await trickled(n)
    return count


async def test_a_waiting_step_reserves_one_start_so_the_rate_is_used_whole() -> None:
    """6 runs whose first step is limited to 1 a minute: one start a minute, done in 5 minutes. A first step its
    limit made wait was asked again by the same delivery (declared, then tried inline), and each ask of a rate
    reserves a start: two tokens a step, the starts at 0, 1, 3, 5, 7 and 9 minutes, and the bucket 13 minutes
    ahead. (The virtual clock skips the waits; a reservation is exact to the delivery's own time.)"""
    async with WorkflowTestEnv() as env:
        began = env.now()
        runs = [await env.client.start(trickle, n) for n in range(6)]
        assert [await run.result(timeout=60) for run in runs] == list(range(6))
        started = [e for run in runs for e in await run.events() if e.event_type == "step_started"]
        admitted = [datetime.fromisoformat((e.event_data or {})["limit"]["admittedAt"]) for e in started]
        assert sorted(round((at - began).total_seconds() / 60) for at in admitted) == [0, 1, 2, 3, 4, 5]
        bucket = (await env.client.limits.describe("step:steplimits.trickled")).keys[0]
        assert bucket.next_start is not None and round((bucket.next_start - began).total_seconds() / 60) == 6
    async with WorkflowTestEnv() as env:  # each step after the first waits too: 3 minutes for 4 (it took 6)
        began = env.now()
        assert await (await env.client.start(trickle_in_a_row, 4)).result(timeout=60) == 4
        assert round((env.now() - began).total_seconds() / 60) == 3


FLAKY_CALLS: dict[int, int] = defaultdict(int)


@step(name="steplimits.flaky", rate=RateLimit("1/m"), retry=RetryPolicy(max_attempts=3, initial_delay="1s", jitter=0))
async def flaky(n: int) -> int:
    FLAKY_CALLS[n] += 1
    if FLAKY_CALLS[n] == 1:
        raise RuntimeError("the first attempt fails")
    return n


@workflow(name="steplimits.flaky_run")
async def flaky_run(n: int) -> int:
    return await flaky(n)


async def test_a_retry_takes_a_token_of_its_own() -> None:
    """3 runs of a step at 1 a minute whose first attempt fails: 6 starts, a minute apart. A retry was sent as its
    first attempt's message, start reserved and all, so a step that had waited for its token retried 1 s after its
    first attempt on the same token (starts at 0, 1, 1, 2, 2 and 3 minutes: two within a second)."""
    FLAKY_CALLS.clear()
    async with WorkflowTestEnv() as env:
        began = env.now()
        runs = [await env.client.start(flaky_run, n) for n in range(3)]
        assert [await run.result(timeout=60) for run in runs] == list(range(3))
        started = [e for run in runs for e in await run.events() if e.event_type == "step_started"]
        assert sorted(round((e.created_at - began).total_seconds() / 60) for e in started) == [0, 1, 2, 3, 4, 5]


@step(name="steplimits.paired", concurrency=2, rate=RateLimit("1/m"))
async def paired(n: int) -> int:
    return n


@workflow(name="steplimits.pair")
async def pair(n: int) -> int:
    return await paired(n)


async def test_a_backlog_longer_than_the_watch_horizon_reserves_one_start_a_step() -> None:
    """12 runs of one step at 1 a minute: the last waits 11 minutes, more than the watch horizon (5). Each wake of a
    waiting run took its step's message for lost and sent it again, and the new message reserved another start,
    further back: 12 runs reserved 19 starts (40 runs, 122), and a run started after them would have waited for
    those too. The new message now finds the start its step holds (``step_limits.DUE_FIELD``). So does a
    step that waited that long for a slot before it asked for a token."""
    async with WorkflowTestEnv() as env:
        began = env.now()
        runs = [await env.client.start(trickle, n) for n in range(12)]
        assert [await run.result(timeout=60) for run in runs] == list(range(12))
        started = [e for run in runs for e in await run.events() if e.event_type == "step_started"]
        admitted = [datetime.fromisoformat((e.event_data or {})["limit"]["admittedAt"]) for e in started]
        assert sorted(round((at - began).total_seconds() / 60) for at in admitted) == list(range(12))
        bucket = (await env.client.limits.describe("step:steplimits.trickled")).keys[0]
        assert bucket.next_start is not None and round((bucket.next_start - began).total_seconds() / 60) == 12
    async with WorkflowTestEnv() as env:  # a slot first (2 at once), then a token: 11 minutes (it took 16)
        began = env.now()
        runs = [await env.client.start(pair, n) for n in range(12)]
        assert [await run.result(timeout=60) for run in runs] == list(range(12))
        assert round((env.now() - began).total_seconds() / 60) == 11
        bucket = (await env.client.limits.describe("step:steplimits.paired")).keys[0]
        assert bucket.next_start is not None and round((bucket.next_start - began).total_seconds() / 60) == 12


@step(name="steplimits.held_back", rate=RateLimit("1/m"))
async def held_back(n: int) -> int:
    return n


@workflow(name="steplimits.held_back_run")
async def held_back_run(n: int) -> int:
    return await held_back(n)


@pytest.mark.sweep_on(DYNAMODB_LOCAL)  # .ci/run: memory and moto (3 s each)
async def test_a_step_sent_again_after_the_horizon_finds_the_start_it_holds(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two runs of a step at 1 a minute: one starts at once, the other's start is a minute away, past the watch
    horizon (2 s here), so it is kept in the World's limiter store. A wake after the horizon (``awsworld wake``, or
    the watchdog's) finds that step declared and not started and sends its message again; that message used to
    reserve another start (the pool written a third time, the bucket a minute further back), and now finds the
    one its step holds."""
    monkeypatch.setenv("AWSWORLD_WATCH_HORIZON_SECONDS", "2")
    monkeypatch.setenv("AWSWORLD_WATCH_BUCKET_SECONDS", "0.5")
    limiter = Limiter(e2e.world)
    clock = asyncio.get_running_loop().time
    deadline = clock() + 60

    async def version() -> int:
        pools = await limiter.pools("step:steplimits.held_back")
        return pools[0].version if pools else 0

    runs = [await e2e.start(held_back_run, n) for n in range(2)]
    while await version() < 2:  # both reserved: one start now, one a minute on
        assert clock() < deadline, "the two steps reserved their starts"
        await asyncio.sleep(0.05)
    await asyncio.sleep(2.5)  # the waiting step was declared longer ago than the horizon
    started = [any(e.event_type == "step_started" for e in await run.events()) for run in runs]
    assert sorted(started) == [False, True], "whichever asked first started at once"
    waiting, ran = runs[started.index(False)], started.index(True)
    seen = len(e2e.poller.results)
    await e2e.client.wake(waiting.run_id)
    while "limit-wait" not in [r.status for r in e2e.poller.results[seen:]]:  # the step's message, sent again
        assert clock() < deadline, "the wake sent the step's message again"
        await asyncio.sleep(0.05)
    assert await version() == 2, "the step sent again reserved no second start"
    assert await runs[ran].result(timeout=30) == ran
    await e2e.client.cancel(waiting.run_id)


PAYMENTS = Concurrency(1, key=lambda customer, n: customer, name="e2e-payments-api")


@step(name="steplimits.pay", concurrency=PAYMENTS)
async def pay(customer: str, n: int) -> int:
    await body(f"payments:{customer}")
    return n


@step(name="steplimits.refund", concurrency=PAYMENTS)
async def refund(customer: str, n: int) -> int:
    await body(f"payments:{customer}")
    return -n


@workflow(name="steplimits.settle")
async def settle_accounts(customers: list[str], n: int) -> int:
    paid = await asyncio.gather(*(pay(c, n) for c in customers), *(refund(c, n) for c in customers))
    return sum(paid)


async def test_a_named_keyed_limit_is_shared_by_two_steps(e2e: E2E) -> None:
    """One provider, two steps: at most one call per customer across both, from six runs at once."""
    reset()
    runs = [await e2e.start(settle_accounts, ["ann", "bob", "cy"], n) for n in range(6)]
    assert [await run.result(timeout=180) for run in runs] == [0] * 6
    assert {k: v for k, v in PEAK.items()} == {f"payments:{c}": 1 for c in ("ann", "bob", "cy")}
    assert sum(CALLS.values()) == 36
    pools = await Limiter(e2e.world).pools("e2e-payments-api")
    assert sorted(p.pool for p in pools) == ["ann", "bob", "cy"]
    assert all(not p.holders and p.waiting == 0 for p in pools)


HELD_OPEN: dict[str, asyncio.Event] = {}


@step(name="steplimits.held", concurrency=1)
async def held(n: int) -> int:
    INSIDE["held"] += 1
    CALLS["held"] += 1
    PEAK["held"] = max(PEAK["held"], INSIDE["held"])
    try:
        await HELD_OPEN["gate"].wait()  # the test holds the body running while it sends a duplicate
    finally:
        INSIDE["held"] -= 1
    return n


@workflow(name="steplimits.holding")
async def holding(n: int) -> int:
    return await held(n)


@workflow(name="steplimits.holding_two")
async def holding_two(n: int) -> int:
    return sum(await asyncio.gather(held(n), held(n + 1)))  # one runs in the flow, one from its own message


async def until(predicate: Any, what: str, timeout: float = 30.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not await predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise TimeoutError(what)
        await asyncio.sleep(0.01)


async def test_a_second_message_for_a_running_step_leaves_its_slot_held(e2e: E2E) -> None:
    """A step's slot is held by the step (``step_holder``), whichever delivery runs it. A second message for the
    step while its body runs elsewhere (a flow's re-sent step message, a slot's wake: the limits crash sweep's
    k=150 strand) is refused its start (``running-elsewhere``) and must leave the slot to the attempt that runs:
    giving it back let another run's body in beside it (a limit of 1 exceeded) and, after a crash, made the
    running attempt's own redelivery wait for a slot while no delivery could run its step (the run stranded)."""
    reset()
    HELD_OPEN["gate"] = asyncio.Event()
    limiter = Limiter(e2e.world)
    first = await e2e.start(holding, 1)
    step_id = "step_1"

    async def running() -> bool:
        return INSIDE["held"] == 1

    await until(running, "the first run's step never ran")
    results_before = len(e2e.poller.results)
    duplicate = FlowMessage(first.run_id, "steplimits.holding", step_id=step_id, step_name="steplimits.held")
    await e2e.world.queue(queue_name_for("steplimits.holding"), duplicate.to_payload())

    async def refused() -> bool:
        return "duplicate" in [r.status for r in e2e.poller.results[results_before:]]

    await until(refused, "the duplicate step message was never delivered")
    [pool] = await limiter.pools("step:steplimits.held")
    assert list(pool.holders) == [step_holder(first.run_id, step_id)]  # still the running attempt's
    second = await e2e.start(holding, 2)

    async def second_waits() -> bool:
        return any(p.waiting for p in await limiter.pools("step:steplimits.held"))

    await until(second_waits, "the second run's step never asked for the slot")
    assert CALLS["held"] == 1  # the second body did not start beside the first
    HELD_OPEN["gate"].set()
    assert [await first.result(timeout=60), await second.result(timeout=60)] == [1, 2]
    assert PEAK["held"] == 1 and CALLS["held"] == 2
    assert all(not p.holders and p.waiting == 0 for p in await limiter.pools("step:steplimits.held"))


async def _second_waits_behind_first(e2e: E2E) -> tuple[Run, Run, Limiter]:
    """Two runs of ``holding``: the first's step holds the limit's one slot (its body held open until
    ``HELD_OPEN["gate"]``), the second's waits for it. The runs and a limiter to read the pool with."""
    reset()
    HELD_OPEN["gate"] = asyncio.Event()
    limiter = Limiter(e2e.world)
    first = await e2e.start(holding, 1)

    async def running() -> bool:
        return INSIDE["held"] == 1

    await until(running, "the first run's step never ran")
    second = await e2e.start(holding, 2)

    async def waiting() -> bool:
        return any(p.waiting for p in await limiter.pools("step:steplimits.held"))

    await until(waiting, "the second run's step never waited for the slot")
    return first, second, limiter


async def test_a_run_cancelled_while_its_step_waits_for_a_slot_leaves_no_waiter(e2e: E2E) -> None:
    """A run that ends (here cancelled) while its limited step waits for a slot takes that waiter out in its
    end's tidy (``step_limits.free_run_steps``): ``client.limits`` shows no waiter, and the slot the running
    step gives back is granted to nobody (the cancelled run's body never runs)."""
    first, second, limiter = await _second_waits_behind_first(e2e)
    await e2e.client.cancel(second.run_id)

    async def withdrawn() -> bool:
        [pool] = await limiter.pools("step:steplimits.held")
        return pool.waiting == 0

    # (the end's tidy is the cancel's flow delivery: on a machine under CI's load it came after 30 s on DynamoDB
    # Local, in runs where the test passes alone in seconds)
    await until(withdrawn, "the cancelled run's step still waits for a slot", timeout=90)
    [view] = (await e2e.client.limits.describe("step:steplimits.held")).keys
    assert view.waiters == [] and [h for h, _ in view.holders] == [step_holder(first.run_id, "step_1")]
    assert await limiter.waiters("step:steplimits.held", "") == []  # the record is gone, not only its count
    HELD_OPEN["gate"].set()
    assert await first.result(timeout=60) == 1
    assert await second.status() == "cancelled"
    assert CALLS["held"] == 1  # the slot went to nobody: the cancelled run's body never ran
    assert all(not p.holders and p.waiting == 0 for p in await limiter.pools("step:steplimits.held"))


async def test_an_attempt_that_fails_after_its_start_keeps_its_slot_for_its_redelivery(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    """A queued step's delivery whose attempt raised after its ``step_started`` landed (here the write's answer
    is lost; the limits crash sweep's k=97: a transient error after the start) keeps the step's slot: its step
    is started under its message id, which only its redelivery may run while the lease runs, and that
    redelivery finds the slot its own and runs the step, even while the limit is paused. Giving the slot back
    made the redelivery wait for one; the wake came under a new id, was refused the step (``running-elsewhere``)
    and the run stranded. The failed record comes back after a 1 s back-off, not the default 10 s: well within the
    step's lease all the same."""
    monkeypatch.setenv(BACKOFF_ENV, "1")
    reset()
    HELD_OPEN["gate"] = asyncio.Event()
    HELD_OPEN["gate"].set()
    events = e2e.world.events
    original = events.create
    lost: list[str] = []

    async def create(run_id: str, request: dict[str, Any], **kwargs: Any) -> Any:
        result = await original(run_id, request, **kwargs)
        if request.get("eventType") == "step_started" and not lost:  # (a queued step's start: the flow's are
            lost.append(run_id)                                        # in its batch writes)
            await e2e.client.limits.pause("step:steplimits.held")  # no slot is free for anyone from here
            raise ConnectionError("injected: the answer to a write that landed was lost")
        return result

    monkeypatch.setattr(events, "create", create)
    run = await e2e.start(holding_two, 7)
    try:
        assert await run.result(timeout=60) == 15  # while the limit is paused: its slot was still its own
    finally:
        monkeypatch.undo()
        await e2e.client.limits.resume("step:steplimits.held")
    assert lost == [run.run_id] and CALLS["held"] == 2 and PEAK["held"] == 1
    assert not [e for e in await run.events() if e.event_type in ("step_retrying", "step_failed")]
    assert all(not p.holders and p.waiting == 0 for p in await Limiter(e2e.world).pools("step:steplimits.held"))


async def test_the_deliveries_of_one_process_take_turns_at_a_pool() -> None:
    """A fan-out of 40 under ``concurrency=3`` in one process, its limit store answering after a pause (as
    DynamoDB, or ``awsworld dev``'s emulator, does): no commit loses a race, each take, wait and give-back is one
    read and one write. The deliveries of one process once raced each other for the pool's version: on the
    emulator a 200-step fan-out lost 82% of its commits, every loss three more requests for a store that serves
    one at a time, and took 11 minutes (27 s for 100 steps now, 9 s without the limit)."""
    reset()
    async with WorkflowTestEnv() as env:
        store = env.world.limiters
        assert store is not None
        commits: list[bool] = []
        read, commit = store.read, store.commit

        async def slow_read(*args: Any, **kwargs: Any) -> Any:
            await asyncio.sleep(0.001)  # real time: the other deliveries run meanwhile
            return await read(*args, **kwargs)

        async def counted_commit(*args: Any, **kwargs: Any) -> bool:
            await asyncio.sleep(0.001)
            commits.append(await commit(*args, **kwargs))
            return commits[-1]

        store.read, store.commit = slow_read, counted_commit  # type: ignore[method-assign]
        assert await (await env.client.start(exports, 0, 40)).result(timeout=60) == list(range(40))
    assert 1 <= PEAK["export"] <= 3 and CALLS["export"] == 40
    assert commits.count(False) == 0 and len(commits) >= 80, (commits.count(False), len(commits))


GATE: dict[str, asyncio.Event] = {}


@step(name="steplimits.gated", concurrency=2)
async def gated(n: int) -> int:
    await GATE["open"].wait()  # real time: the test reads what the others wait for meanwhile
    return n


@workflow(name="steplimits.gated_fanout")
async def gated_fanout(count: int) -> int:
    return sum(await asyncio.gather(*(gated(i) for i in range(count))))


async def test_the_steps_of_a_fan_out_waiting_for_a_slot_are_said_once_naming_who_holds_it() -> None:
    """12 steps under ``concurrency=2``, the first two held in their bodies: what the run waits on says the ten
    others once, their places read from one read of the pool, and the holders as ids ``describe`` takes. (It once
    said each step apart, 190 lines for a 200-step fan-out, each naming every holder as ``s:wrun_…:step_1``, a
    stored id no command takes.)"""
    GATE["open"] = asyncio.Event()
    async with WorkflowTestEnv() as env:
        run = await env.client.start(gated_fanout, 12)
        with pytest.raises(TimeoutError) as info:
            await run.result(timeout=0.3)
        held, said = rf"step step_\d+ of run {run.run_id}", str(info.value)
        assert re.search(r"; it waits on: .*10 steps steplimits\.gated, not started: they wait for a slot of "
                         rf"step:steplimits\.gated \(places 1 to 10 of 10; held by {held}, {held}\)", said), said
        assert "s:wrun" not in said
        GATE["open"].set()
        assert await run.result(timeout=30) == sum(range(12))


@step(name="steplimits.paced", rate=RateLimit("60/m"))
async def paced(n: int) -> int:
    await body("paced")
    return n


@workflow(name="steplimits.pacing")
async def pacing(n: int) -> int:
    return await paced(n)


async def test_a_run_that_ends_while_its_step_waits_for_a_paused_rate_leaves_no_waiter(e2e: E2E) -> None:
    """A step of a paused limit with a rate alone waits for the resume as a slot's waiter
    (``step_limits._wait_for_resume``). A run that ends while one waits (here cancelled) takes it out in its end's
    tidy (``step_limits.free_run_steps``), as it does a slot's waiter: that tidy passed over a limit without slots,
    so the waiter stayed listed until the resume, whose grant went to a step nobody would run. After the resume,
    the cancelled run's body never runs and the limit holds nothing."""
    reset()
    limiter = Limiter(e2e.world)
    name = "step:steplimits.paced"
    await e2e.client.limits.pause(paced)  # (no pool yet: the step's numbers create it)
    try:
        run = await e2e.start(pacing, 1)

        async def waiting() -> bool:
            return any(p.waiting for p in await limiter.pools(name))

        await until(waiting, "the step never waited for the resume")
        await e2e.client.cancel(run.run_id)

        async def withdrawn() -> bool:
            return all(p.waiting == 0 for p in await limiter.pools(name))

        await until(withdrawn, "the cancelled run's step still waits for the resume", timeout=90)
        assert await limiter.waiters(name, "") == []  # the record is gone, not only its count
    finally:
        await e2e.client.limits.resume(paced)
    assert await run.status() == "cancelled"
    await asyncio.sleep(0.5)  # (a wake the resume sent would have brought the step by now)
    assert CALLS["paced"] == 0
    assert all(not p.holders and p.waiting == 0 for p in await limiter.pools(name))


async def test_a_step_message_that_comes_after_its_run_ended_leaves_no_waiter(e2e: E2E) -> None:
    """A step's message that comes after its run's end (here sent again once the run was cancelled and its end's
    tidy had looked) found its paused limit and waited: a waiter written after the tidy, that nobody took out,
    listed until the resume. A step with a rate looks at its run before it asks for a token, so it ends ``gone``
    without waiting (a slot's waiter looks once it has waited, and takes itself out: ``_withdraw_if_ended``)."""
    reset()
    limiter = Limiter(e2e.world)
    name = "step:steplimits.paced"
    await e2e.client.limits.pause(paced)
    try:
        run = await e2e.start(pacing, 2)

        async def waiting() -> bool:
            return any(p.waiting for p in await limiter.pools(name))

        await until(waiting, "the step never waited for the resume")
        [waiter] = await limiter.waiters(name, "")
        assert waiter.wake is not None
        await e2e.client.cancel(run.run_id)

        async def withdrawn() -> bool:
            return all(p.waiting == 0 for p in await limiter.pools(name))

        await until(withdrawn, "the cancelled run's step still waits for the resume", timeout=90)
        payload = dict(waiter.wake["payload"])
        before = len(e2e.poller.results)
        await e2e.world.queue(str(waiter.wake["queue"]), payload)  # the step's message, late

        async def delivered() -> bool:
            return any(r.status == "gone" for r in e2e.poller.results[before:])

        await until(delivered, "the late step message's delivery did not end gone")
        assert await limiter.waiters(name, "") == []
        assert all(p.waiting == 0 and not p.holders for p in await limiter.pools(name))
    finally:
        await e2e.client.limits.resume(paced)
    await asyncio.sleep(0.5)
    assert CALLS["paced"] == 0


async def _cancelled_in_the_gap_left_no_waiter(e2e: E2E, limiter: Limiter, name: str, run: Any, hit: list[str], *,
                                              timeout: float) -> None:
    """The run, cancelled once its step's waiter was written (``hit`` names it), ends cancelled, the paused limit
    lists no waiter of it within ``timeout`` seconds, and its log holds no ``step_created``: the gap was hit."""

    async def ended() -> bool:
        return bool(hit) and await run.status() == "cancelled"

    await until(ended, "the run was not cancelled in the gap")

    async def withdrawn() -> bool:
        return await limiter.waiters(name, "") == [] and all(p.waiting == 0 for p in await limiter.pools(name))

    await until(withdrawn, "the cancelled run's step still waits for the resume", timeout=timeout)
    kinds = [e.event_type for e in (await e2e.world.events.list(run.run_id)).data]
    assert "step_created" not in kinds, kinds


async def test_a_run_cancelled_between_its_steps_wait_and_its_declaration_leaves_no_waiter(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flow asks a limited step's limit before it declares the step (so a step born running costs one write):
    made to wait, the step is written as its limit's waiter first and its ``step_created`` after. A cancel that
    lands in between refuses the declaration, and the end's tidy, which finds a run's waiters by its log's
    ``step_created`` (``step_limits.free_run_steps``), never saw the waiter: it stayed listed until the resume (the
    paused-rate test above failed so on DynamoDB Local under load). The cancel is put in that gap here: the
    declarer, refused, takes its waiter out (``step_limits.withdraw_waiter``)."""
    reset()
    limiter = Limiter(e2e.world)
    name = "step:steplimits.paced"
    take = step_limits.take
    cancelled: list[str] = []

    async def take_then_cancel(*args: Any, **kwargs: Any) -> Any:
        verdict = await take(*args, **kwargs)
        if verdict == step_limits.WAITING and not cancelled:  # the waiter is written; its step_created is not
            cancelled.append(args[2])
            await e2e.client.cancel(args[2])
        return verdict

    monkeypatch.setattr(step_limits, "take", take_then_cancel)
    await e2e.client.limits.pause(paced)
    try:
        run = await e2e.start(pacing, 3)
        await _cancelled_in_the_gap_left_no_waiter(e2e, limiter, name, run, cancelled, timeout=20)
        assert cancelled == [run.run_id]
    finally:
        await e2e.client.limits.resume(paced)
    await asyncio.sleep(0.5)  # (a grant the resume made would have brought the step by now)
    assert CALLS["paced"] == 0


async def test_a_flow_that_dies_between_its_steps_wait_and_its_declaration_leaves_no_waiter_once_cancelled(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    """As above, but the flow dies in the gap (its declaration's write fails: the process is gone), so no
    refusal makes it take its waiter out, and the run is cancelled before the redelivery that would declare the
    step again. The end's tidy found a run's waiters by its log's ``step_created`` only: the waiter of the paused
    limit stayed listed until the resume (perhaps never). The waiter is noted under its run in the same write
    (``LimiterStore.unlogged_waiters``), and the end's tidy finds it there."""
    reset()
    limiter = Limiter(e2e.world)
    name = "step:steplimits.paced"
    events = e2e.world.events
    original = events.create_batch
    died: list[str] = []

    async def create_batch(run_id: str, requests: list[dict[str, Any]], **kwargs: Any) -> Any:
        if not died and any(r.get("eventType") == "step_created" for r in requests):
            died.append(run_id)  # the waiter is written; the step's declaration never lands
            await e2e.client.cancel(run_id)  # cancelled before the flow's redelivery
            raise ConnectionError("injected: the flow died before its declaration was written")
        return await original(run_id, requests, **kwargs)

    monkeypatch.setattr(events, "create_batch", create_batch)
    await e2e.client.limits.pause(paced)
    try:
        run = await e2e.start(pacing, 4)
        await _cancelled_in_the_gap_left_no_waiter(e2e, limiter, name, run, died, timeout=30)
    finally:
        await e2e.client.limits.resume(paced)
    await asyncio.sleep(0.5)  # (a grant the resume made would have brought the step by now)
    assert CALLS["paced"] == 0


@workflow(name="steplimits.racing")
async def racing(n: int) -> int:
    task = asyncio.ensure_future(held(n))  # (waits for the slot: the hook below wins the race)
    await create_hook(token=f"racing-{n}")
    task.cancel()
    return n


async def test_a_step_the_workflow_cancelled_while_it_waited_leaves_the_waiters_at_once(e2e: E2E) -> None:
    """A step whose await the workflow cancelled while it waited for a slot (a race its hook won) is recorded
    ended (``step_failed``, cancelled), and leaves the waiters then (``step_limits.free_cancelled_steps``). Its
    waiter stayed: the end's tidy passed over a step that ended, so it was listed after its run completed, and the
    slot the holder freed went first to it, a step that never runs, ahead of the live run behind it."""
    reset()
    HELD_OPEN["gate"] = asyncio.Event()
    limiter = Limiter(e2e.world)
    name = "step:steplimits.held"
    first = await e2e.start(holding, 1)

    async def running() -> bool:
        return INSIDE["held"] == 1

    await until(running, "the first run's step never ran")

    def waiting(count: int) -> Any:
        async def check() -> bool:
            return sum(p.waiting for p in await limiter.pools(name)) == count
        return check

    racer = await e2e.start(racing, 2)
    await until(waiting(1), "the racing run's step never waited for the slot")
    third = await e2e.start(holding, 3)
    await until(waiting(2), "the third run's step never waited for the slot")
    await e2e.hook_ready("racing-2", racer)
    await e2e.client.resume_hook("racing-2", None)
    assert await racer.result(timeout=60) == 2
    kinds = [kind for kind, _ in await e2e.event_types(racer)]
    assert "step_failed" in kinds and "step_started" not in kinds  # (cancelled before it ever started)
    await until(waiting(1), "the cancelled step still waits for the slot", timeout=90)
    assert [w.holder for w in await limiter.waiters(name, "")] == [step_holder(third.run_id, "step_1")]
    HELD_OPEN["gate"].set()
    assert [await first.result(timeout=60), await third.result(timeout=60)] == [1, 3]
    assert CALLS["held"] == 2 and PEAK["held"] == 1  # the cancelled step's body never ran
    assert all(not p.holders and p.waiting == 0 for p in await limiter.pools(name))


GATES: dict[int, asyncio.Event] = {}


@step(name="steplimits.turn", concurrency=1)
async def turn(n: int) -> int:
    CALLS["turn"] += 1
    await GATES[n].wait()  # each call's body runs until the test opens its own gate
    return n


@workflow(name="steplimits.turning")
async def turning(n: int) -> int:
    return await turn(n)


@workflow(name="steplimits.turn_racing")
async def turn_racing(n: int) -> int:
    task = asyncio.ensure_future(turn(n))  # (waits for the slot; cancelled once the hook is resumed)
    await create_hook(token=f"turn-racing-{n}")
    task.cancel()
    await create_hook(token=f"turn-goes-on-{n}")  # the run goes on after the cancel
    return n


async def test_the_wake_of_a_step_cancelled_after_its_grant_does_not_wait_again(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    """A waiting step is granted the slot, and its workflow cancels it before the grant's wake comes: the cancel
    gives the granted slot back (``free_cancelled_steps``), and a third run's step takes it. Then the wake comes
    (a fresh message, which asks its limit before looking at its step's end). It found the limit full and waited
    a second time, for a step that never runs, while its run went on: listed, and granted the slot the third run
    frees, ahead of the live waiter behind it. The wake now sees its step ended and leaves the waiters."""
    reset()
    GATES.clear()
    GATES.update({1: asyncio.Event(), 2: asyncio.Event(), 3: asyncio.Event()})
    limiter = Limiter(e2e.world)
    name = "step:steplimits.turn"
    first = await e2e.start(turning, 1)

    async def running(count: int) -> Any:
        async def check() -> bool:
            return CALLS["turn"] == count
        return check

    await until(await running(1), "the first run's step never ran")
    racer = await e2e.start(turn_racing, 2)

    async def waiting() -> bool:
        return sum(p.waiting for p in await limiter.pools(name)) == 1

    await until(waiting, "the racing run's step never waited for the slot")
    queue = e2e.world.queue
    held: list[tuple[str, Any]] = []

    async def queued(queue_name: str, payload: Any, **kwargs: Any) -> Any:
        key = str(kwargs.get("idempotency_key", ""))
        if key.startswith(f"{racer.run_id}:") and ":slot:" in key and not held:
            held.append((queue_name, payload))  # the grant's wake: kept back until the step is cancelled
            return None
        return await queue(queue_name, payload, **kwargs)

    monkeypatch.setattr(e2e.world, "queue", queued)
    GATES[1].set()  # the first run's step ends: its slot is granted to the racing run's step
    assert await first.result(timeout=60) == 1
    await until(lambda: _true(bool(held)), "the grant's wake was never sent")
    third = await e2e.start(turning, 3)
    await until(waiting, "the third run's step never waited for the slot")
    await e2e.hook_ready("turn-racing-2", racer)
    await e2e.client.resume_hook("turn-racing-2", None)  # the racing run cancels its step: the slot goes on
    await e2e.hook_ready("turn-goes-on-2", racer)
    await until(await running(2), "the third run's step never got the slot the cancel gave back")
    before = len(e2e.poller.results)
    monkeypatch.undo()
    await e2e.world.queue(*held[0])  # the wake comes, late

    async def delivered() -> bool:
        return len(e2e.poller.results) > before

    await until(delivered, "the late wake was never delivered")
    await asyncio.sleep(0.2)  # (its waiter, if it wrote one, is taken out in the same delivery)
    assert await limiter.waiters(name, "") == [], "the cancelled step's wake waits a second time"
    assert all(p.waiting == 0 for p in await limiter.pools(name))
    GATES[3].set()
    assert await third.result(timeout=60) == 3
    await e2e.client.resume_hook("turn-goes-on-2", None)
    assert await racer.result(timeout=60) == 2
    assert CALLS["turn"] == 2  # the cancelled step's body never ran
    assert all(not p.holders and p.waiting == 0 for p in await limiter.pools(name))


async def _true(value: bool) -> bool:
    return value


async def test_a_run_cancelled_between_its_inline_steps_take_and_its_declaration_frees_the_slot(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    """A flow takes the slot of a step it will run inline before it declares the step (born running: one write).
    A cancel that lands in between has that write refused: the step is in no log, so neither the end's tidy nor
    a message would give its slot back, and it was held until its lease passed (about two minutes) while the next
    run's step waited for it. The flow that finds its run gone gives it back, and the next run starts at once."""
    reset()
    HELD_OPEN["gate"] = asyncio.Event()
    HELD_OPEN["gate"].set()
    limiter = Limiter(e2e.world)
    events = e2e.world.events
    original = events.create_batch
    cancelled: list[str] = []

    async def create_batch(run_id: str, requests: list[dict[str, Any]], **kwargs: Any) -> Any:
        if not cancelled and any(r.get("eventType") == "step_started" for r in requests):
            cancelled.append(run_id)  # the step's slot is taken; its declaration is about to be written
            await e2e.client.cancel(run_id)
        return await original(run_id, requests, **kwargs)

    monkeypatch.setattr(events, "create_batch", create_batch)
    run = await e2e.start(holding, 1)

    async def ended() -> bool:
        return await run.status() == "cancelled"

    await until(ended, "the run was never cancelled")
    monkeypatch.undo()

    async def freed() -> bool:
        return all(not p.holders for p in await limiter.pools("step:steplimits.held"))

    await until(freed, "the cancelled run's taken slot is still held", timeout=20)
    assert cancelled == [run.run_id] and CALLS["held"] == 0
    assert await (await e2e.start(holding, 2)).result(timeout=30) == 2  # at once: no lease to wait out
    assert all(not p.holders and p.waiting == 0 for p in await limiter.pools("step:steplimits.held"))


@step(name="steplimits.metered", rate=RateLimit("6/h"))
async def metered(n: int) -> int:
    await body("metered")
    return n


@workflow(name="steplimits.metering")
async def metering(n: int) -> int:
    return await metered(n)


@step(name="steplimits.metered_slot", concurrency=1, rate=RateLimit("1/h"))
async def metered_slot(n: int) -> int:
    await body("metered_slot")
    return n


@workflow(name="steplimits.metering_slot")
async def metering_slot(n: int) -> int:
    return await metered_slot(n)


async def late_messages(e2e: E2E, step_fn: Any, workflow_fn: Any, name: str, copies: int, *,
                        while_paused: bool = False) -> FlowMessage:
    """A run of ``workflow_fn`` whose step waited for the resume of its paused limit, cancelled, its waiter taken
    out, the limit resumed; then its step's message sent ``copies`` times, as late messages come: a wake of the
    waiter (marked as a paused wait's for a rate alone) and the plain step message. Each delivery ends ``gone``.
    ``while_paused``: first the wake once more before the resume, whose delivery waits for a slot of the paused
    key and, its run ended, takes its waiter out again (``step_limits._withdraw_if_ended``)."""
    limiter = Limiter(e2e.world)
    await e2e.client.limits.pause(step_fn)
    try:
        run = await e2e.start(workflow_fn, 1)

        async def waiting() -> bool:
            return any(p.waiting for p in await limiter.pools(name))

        await until(waiting, "the step never waited for the resume")
        [waiter] = await limiter.waiters(name, "")
        await e2e.client.cancel(run.run_id)

        async def withdrawn() -> bool:
            return all(p.waiting == 0 and not p.holders for p in await limiter.pools(name))

        await until(withdrawn, "the cancelled run's step still waits", timeout=90)
        if while_paused:
            before = len(e2e.poller.results)
            await e2e.world.queue(str(waiter.wake["queue"]), dict(waiter.wake["payload"]))

            async def waited() -> bool:
                return any(r.status == "limit-wait" for r in e2e.poller.results[before:])

            await until(waited, "the late wake's delivery did not end waiting")
            assert await limiter.waiters(name, "") == [] and await withdrawn()
    finally:
        await e2e.client.limits.resume(step_fn)
    plain = FlowMessage(run.run_id, workflow_name_of(workflow_fn), step_id="step_1", step_name=name[len("step:"):])
    payloads = [dict(waiter.wake["payload"]), plain.to_payload()]
    before = len(e2e.poller.results)
    for i in range(copies):
        await e2e.world.queue(str(waiter.wake["queue"]), payloads[i % 2])

    async def delivered() -> bool:
        return [r.status for r in e2e.poller.results[before:]].count("gone") >= copies

    await until(delivered, "the late step messages' deliveries did not end gone")
    return plain


def workflow_name_of(workflow_fn: Any) -> str:
    from awsworld.authoring.definitions import workflow_name
    return workflow_name(workflow_fn)


async def test_a_late_step_message_for_an_ended_run_takes_no_token(e2e: E2E) -> None:
    """Step messages that come after their run's end (the wake of a paused rate's waiter, the step's own
    message) look at the run before they reserve: the bucket keeps every token (``6/h``: each one ten minutes).
    Each reserved a start before its ``step_started`` was refused: tokens spent on steps that never run."""
    reset()
    await late_messages(e2e, metered, metering, "step:steplimits.metered", copies=2)
    [key] = (await e2e.client.limits.describe(metered)).keys
    assert key.tokens == 6 and not key.holders and not key.waiters
    assert CALLS["metered"] == 0


async def test_a_late_step_message_for_an_ended_run_keeps_no_slot_and_the_next_run_starts(e2e: E2E) -> None:
    """A step with a slot and a rate (``concurrency=1``, ``1/h``): late messages of a cancelled run took the
    bucket's one token, and the next went back for a token an hour away holding the slot, so a live run's step
    waited an hour behind a step that never runs. Now they take neither, and the next run starts at once."""
    reset()
    name = "step:steplimits.metered_slot"
    await late_messages(e2e, metered_slot, metering_slot, name, copies=2, while_paused=True)
    [key] = (await e2e.client.limits.describe(metered_slot)).keys
    assert key.tokens == 1 and not key.holders and not key.waiters
    assert await (await e2e.start(metering_slot, 2)).result(timeout=30) == 2
    assert CALLS["metered_slot"] == 1


async def test_a_cancelled_runs_running_step_keeps_its_slot_until_its_body_has_stopped(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run cancelled while its limited step's body runs ends at once, but the body runs on until its next check
    of its run (``AWSWORLD_STEP_CHECK_SECONDS``) and gets ``CancelledError`` there. The end's tidy
    (``step_limits.free_run_steps``) gave that body's slot to the next waiter at once: a limit of 1 had two bodies
    running (one run's ``concurrency=1`` export beside the cancelled one's, for up to the check's interval, and
    for as long as a body that never awaits runs). The slot goes when the body has stopped (its delivery gives it
    back), or when its lease passes if its container died."""
    monkeypatch.setenv("AWSWORLD_STEP_CHECK_SECONDS", "0.5")
    first, second, limiter = await _second_waits_behind_first(e2e)
    await e2e.client.cancel(first.run_id)
    assert await first.status() == "cancelled"

    async def second_ran() -> bool:
        return CALLS["held"] == 2

    await until(second_ran, "the second run's step never ran", timeout=60)
    assert PEAK["held"] == 1  # the second body started once the first had stopped, not beside it
    HELD_OPEN["gate"].set()
    assert await second.result(timeout=60) == 2
    assert all(not p.holders and p.waiting == 0 for p in await limiter.pools("step:steplimits.held"))
