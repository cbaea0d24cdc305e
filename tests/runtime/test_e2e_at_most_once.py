"""``@step(semantics="at_most_once")`` end to end: an attempt cut off after its durable start is recorded failed
with ``StepInterruptedError`` and retried as its policy says, never run again as the same attempt.

On the in-memory World a delivery is killed mid-body by its Lambda-like timeout (the body counted its run
first) and its message comes back; the redelivery finds the attempt started and unfinished. On the emulator
(moto) and memory the step runner meets the same situation head on: an attempt whose start is in the log under
a delivery that never reported (as the crash suite's process deaths leave it, ``tests/chaos``), redelivered.
The counts are of bodies run, per attempt: what a payment provider would see.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest

from awsworld import RetryPolicy, StepError, StepInterruptedError, step, step_metadata, workflow
from awsworld._worker import step_limits
from awsworld._worker.dispatch import Worker
from awsworld._worker.limiter import Limiter
from awsworld._worker.step_runner import run_step, start_event
from awsworld.authoring.definitions import REGISTRY, StepDef
from awsworld.durable import serde
from awsworld.testing import WorkflowTestEnv
from awsworld.world.messages import FlowMessage
from awsworld.world.protocol import World
from awsworld.world.rules.limiters import step_holder

from .conftest import BOTH, E2E

CHARGES: Counter[tuple[str, int]] = Counter()
"""Bodies run, by (run id, attempt)."""
STALL_SECONDS = 1.0
POLLING = ("sqs.ReceiveMessage", "sqs.GetQueueAttributes")
TIMEOUT_SECONDS = 0.3


def _charged() -> int:
    meta = step_metadata()
    CHARGES[(meta.run_id, meta.attempt)] += 1
    return meta.attempt


def charges(run_id: str) -> dict[int, int]:
    return {attempt: n for (run, attempt), n in sorted(CHARGES.items()) if run == run_id}


@step(name="amo.charge", semantics="at_most_once", retry=RetryPolicy(max_attempts=3, initial_delay="2s", jitter=0))
async def charge(cents: int) -> str:
    if _charged() == 1:
        await asyncio.sleep(STALL_SECONDS)  # the delivery is killed here, after the charge went out
    return f"charged {cents}"


@step(name="amo.charge_once", semantics="at_most_once", retry=RetryPolicy(max_attempts=1))
async def charge_once(cents: int) -> str:
    _charged()
    await asyncio.sleep(STALL_SECONDS)
    return f"charged {cents}"


@step(name="amo.plain", retry=RetryPolicy(max_attempts=3, initial_delay="2s"))
async def plain_charge(cents: int) -> str:
    if _charged() == 1:
        await asyncio.sleep(STALL_SECONDS)
    return f"charged {cents}"


@workflow(name="amo.pay")
async def pay(cents: int) -> str:
    return await charge(cents)


@workflow(name="amo.pay_once")
async def pay_once(cents: int) -> str:
    try:
        return await charge_once(cents)
    except StepError as error:
        return f"not charged again: {error.error_type} after {error.attempt} attempt(s)"


@workflow(name="amo.pay_plain")
async def pay_plain(cents: int) -> str:
    return await plain_charge(cents)


@pytest.fixture
async def env() -> Any:
    async with WorkflowTestEnv(timeout=TIMEOUT_SECONDS) as made:
        yield made


def test_the_semantics_are_checked_where_the_step_is_declared() -> None:
    with pytest.raises(ValueError, match="at_most_once"):
        step(semantics="at-most-once")  # type: ignore[arg-type]
    assert REGISTRY.step("amo.charge").at_most_once and not REGISTRY.step("amo.plain").at_most_once


async def test_an_attempt_cut_off_mid_body_is_recorded_interrupted_and_retried_as_a_new_attempt(
        env: WorkflowTestEnv) -> None:
    run = await env.client.start(pay, 250)
    assert await run.result() == "charged 250"
    assert env.driver.invoker.timed_out >= 1, "the first attempt's delivery was killed mid-body"
    assert charges(run.run_id) == {1: 1, 2: 1}, "each attempt's body ran once: attempt 1 was not run again"
    steps = [e for e in await run.events() if e.correlation_id == "amo.charge:0" or e.event_type.startswith("step")]
    kinds = [(e.event_type, (e.event_data or {}).get("attempt")) for e in steps]
    assert kinds == [("step_created", None), ("step_started", 1), ("step_retrying", None), ("step_started", 2),
                     ("step_completed", None)]
    retrying = steps[2].event_data or {}
    assert retrying["error"]["name"] == "StepInterruptedError" and retrying["interruptedAttempt"] == 1


async def test_an_interrupted_attempt_without_retries_left_fails_the_step_with_a_catchable_error(
        env: WorkflowTestEnv) -> None:
    run = await env.client.start(pay_once, 99)
    assert await run.result() == "not charged again: StepInterruptedError after 1 attempt(s)"
    assert charges(run.run_id) == {1: 1}
    [record] = await run.steps()
    assert (record.status, record.attempt) == ("failed", 1)


async def test_an_at_least_once_step_runs_the_cut_off_attempt_again(env: WorkflowTestEnv) -> None:
    """The default, for contrast: the redelivery starts a new attempt and runs the body again."""
    run = await env.client.start(pay_plain, 5)
    assert await run.result() == "charged 5"
    kinds = [e.event_type for e in await run.events() if e.event_type.startswith("step")]
    assert "step_retrying" not in kinds and kinds.count("step_started") == 2
    assert sum(charges(run.run_id).values()) == 2


async def _a_step_declared(world: World, workflow_name: str, definition: StepDef, step_id: str) -> str:
    """A started run of ``workflow_name`` (input 7) whose step ``step_id`` (``definition``, input 7) is declared.
    Its run's id."""
    args = serde.dumps({"args": [7], "kwargs": {}})
    created = await world.events.create(None, {"eventType": "run_created", "eventData": {
        "workflowName": workflow_name, "input": args}})
    assert created.run is not None
    run_id = created.run.run_id
    await world.events.create(run_id, {"eventType": "run_started"})
    await world.events.create(run_id, {"eventType": "step_created", "correlationId": step_id, "eventData": {
        "stepName": definition.name, "input": args}})
    return run_id


async def _an_attempt_cut_off(world: World, definition: StepDef) -> str:
    """A run of ``amo.pay`` whose step ``c`` (``definition``) is started under message m-1 with ``atMostOnce`` and
    never finished: the log a delivery that died right after the start leaves. Its run's id."""
    run_id = await _a_step_declared(world, "amo.pay", definition, "c")
    await world.events.create(run_id, {"eventType": "step_started", "correlationId": "c",
                                       "eventData": {"ownerMessageId": "m-1", "atMostOnce": True}})
    return run_id


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_a_redelivery_of_a_started_attempt_records_it_interrupted_on_every_world(e2e: E2E) -> None:
    """The log as a delivery that died right after its start leaves it (step_started under message m-1, with
    ``atMostOnce``); the same message comes back to the step runner: nothing runs, the attempt is recorded
    interrupted; the retry is a new attempt whose body runs once. A second stale redelivery changes nothing."""
    world = e2e.world
    definition: StepDef = REGISTRY.step("amo.charge")
    run_id = await _an_attempt_cut_off(world, definition)

    again = await run_step(world, REGISTRY, run_id, "c", definition.name, owner="m-1")
    assert (again.status, again.attempt) == ("retry", 1) and charges(run_id) == {}
    [*_, interrupted] = (await world.events.list(run_id)).data
    assert interrupted.event_type == "step_retrying"
    assert interrupted.event_data["error"]["name"] == StepInterruptedError.__name__

    early = await run_step(world, REGISTRY, run_id, "c", definition.name, owner="m-1")
    assert early.status == "too-early", "the retry waits for its back-off"
    await e2e.sleep(again.retry_after + 0.2)
    done = await run_step(world, REGISTRY, run_id, "c", definition.name, owner="m-2")
    assert (done.status, done.attempt) == ("completed", 2) and charges(run_id) == {2: 1}
    stale = await run_step(world, REGISTRY, run_id, "c", definition.name, owner="m-1")
    assert stale.status == "finished-already" and charges(run_id) == {2: 1}


@step(name="amo.serial_once", semantics="at_most_once")
async def serial_once(x: int) -> int:
    return x + 1


@step(name="amo.serial_plain")
async def serial_plain(x: int) -> int:
    return x + 1


@workflow(name="amo.serial")
async def serial(n: int, at_most_once: bool) -> int:
    x = 0
    for _ in range(n):
        x = await (serial_once(x) if at_most_once else serial_plain(x))
    return x


@pytest.mark.parametrize("e2e_backend", ["aws"])
async def test_an_at_most_once_step_costs_no_request_more_than_an_at_least_once_one(e2e: E2E) -> None:
    """On the path that does not crash the mark rides in the step_started written anyway: the same requests,
    request by request, for ten serial steps of either kind (the write units differ by the mark's bytes only)."""
    used: dict[bool, Counter[str]] = {}
    for at_most_once in (False, True):
        await e2e.idle()
        before = e2e.world.stats.snapshot()
        run = await e2e.start(serial, 10, at_most_once)
        await e2e.idle()
        used[at_most_once] = (e2e.world.stats.snapshot() - before).requests
        assert await run.result(timeout=5) == 10
        starts = [e for e in await run.events() if e.event_type == "step_started"]
        assert len(starts) == 10 and all(bool(s.event_data.get("atMostOnce")) == at_most_once for s in starts)
    # The poller's receives and the idle checks' queue reads vary with timing: the runs' own requests do not.
    def own(counts: Counter[str]) -> Counter[str]:
        return Counter({k: n for k, n in counts.items() if k not in POLLING})

    assert own(used[True]) == own(used[False]), used


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_a_cancel_between_finding_an_attempt_cut_off_and_recording_its_end_records_nothing_more(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    """The race, injected: the step message's redelivery finds its at-most-once attempt cut off (the World
    refused its start), and the run is cancelled right before the runtime writes that attempt's end. The end is
    refused as gone: the log ends with ``run_cancelled``, and the delivery ends as gone, acknowledged (not
    retried), its body never run."""
    world = e2e.world
    definition: StepDef = REGISTRY.step("amo.charge")
    run_id = await _an_attempt_cut_off(world, definition)
    create = world.events.create
    cancels: list[str] = []

    async def cancel_first(run: str | None, request: Any, **kwargs: Any) -> Any:
        if (request.get("eventData") or {}).get("interruptedAttempt") is not None and not cancels:
            cancels.append(request["eventType"])
            await create(run, {"eventType": "run_cancelled"})  # lands between the decision and its write
        return await create(run, request, **kwargs)

    monkeypatch.setattr(world.events, "create", cancel_first)
    message = FlowMessage(run_id, "amo.pay", "c", definition.name)
    outcome = await Worker(world).execute(message, deadline=time.monotonic() + 60, message_id="m-1", attempt=2)
    assert cancels == ["step_retrying"], "the runtime did write an interrupted end"
    assert (outcome.status, outcome.ack) == ("gone", True)
    events = (await world.events.list(run_id)).data
    assert events[-1].event_type == "run_cancelled", [e.event_type for e in events]
    assert charges(run_id) == {}


@step(name="amo.charge_limited", semantics="at_most_once", concurrency=1,
      retry=RetryPolicy(max_attempts=3, initial_delay="2s", jitter=0))
async def charge_limited(cents: int) -> str:
    _charged()
    return f"charged {cents}"


@workflow(name="amo.pay_limited")
async def pay_limited(cents: int) -> str:
    return await charge_limited(cents)


@pytest.mark.parametrize("e2e_backend", BOTH)
async def test_a_cancel_before_the_inline_flows_write_of_a_cut_off_attempts_end_records_nothing_more(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    """The same race on the inline flow's path: the flow's redelivery runs its limited at-most-once step inline,
    finds the attempt its first delivery started cut off, holds that end provisionally (it is the run's only open
    operation: ``_worker/provisional.py``) and writes it in its stamped batch; the run is cancelled right before
    that batch. The batch is refused, the flow falls back (``fall_back``) to ``record_end``, whose write of the
    end is refused as gone too. Nothing lands after ``run_cancelled``, no retry is queued, the delivery is
    acknowledged, the slot the step held is given back, and the body never runs."""
    world = e2e.world
    definition: StepDef = REGISTRY.step("amo.charge_limited")
    # What the flow's first delivery (message m-1) left when it died in the body: the step declared, its slot
    # taken, its attempt started inline under m-1 (as ``_run_inline`` writes it).
    run_id = await _a_step_declared(world, "amo.pay_limited", definition, "step_1")
    wake = FlowMessage(run_id, "amo.pay_limited", "step_1", definition.name)
    key = await step_limits.step_key(world, definition, run_id, "step_1", None)
    taken = await step_limits.take(world, definition, run_id, "step_1", key, wake=wake, lease_seconds=60)
    assert isinstance(taken, step_limits.Taken)
    await world.events.create(run_id, start_event("step_1", definition, None, "m-1", inline=True, deadline=None,
                                                  taken=taken))
    limiter = Limiter(world)
    assert [list(p.holders) for p in await limiter.pools(f"step:{definition.name}")] == [
        [step_holder(run_id, "step_1")]]

    create, create_batch, queue, queue_batch = (world.events.create, world.events.create_batch, world.queue,
                                                 world.queue_batch)
    cancels: list[str] = []
    refused_ends: list[str] = []
    queued: list[Any] = []

    def interrupted(request: Any) -> bool:
        return (request.get("eventData") or {}).get("interruptedAttempt") is not None

    async def cancel_first(run: str, requests: Any, **kwargs: Any) -> Any:
        if any(interrupted(r) for r in requests) and not cancels:
            cancels.append(",".join(r["eventType"] for r in requests))
            await create(run, {"eventType": "run_cancelled"})  # lands between the decision and the batch
        return await create_batch(run, requests, **kwargs)

    async def end_on_its_own(run: str | None, request: Any, **kwargs: Any) -> Any:
        try:
            return await create(run, request, **kwargs)
        except Exception as error:
            if interrupted(request):
                refused_ends.append(type(error).__name__)
            raise

    async def queued_one(name: str, payload: Any, **kwargs: Any) -> Any:
        queued.append(payload)
        return await queue(name, payload, **kwargs)

    async def queued_many(name: str, messages: Any, **kwargs: Any) -> Any:
        queued.extend(messages)
        return await queue_batch(name, messages, **kwargs)

    monkeypatch.setattr(world.events, "create_batch", cancel_first)
    monkeypatch.setattr(world.events, "create", end_on_its_own)
    monkeypatch.setattr(world, "queue", queued_one)
    monkeypatch.setattr(world, "queue_batch", queued_many)
    outcome = await Worker(world).execute(FlowMessage(run_id, "amo.pay_limited"),
                                          deadline=time.monotonic() + 60, message_id="m-1", attempt=2)
    assert cancels == ["step_retrying"], "the flow did not write the interrupted end in its batch"
    assert refused_ends == ["RunGoneError"], "the fallback did not write it on its own, or it was not refused"
    assert (outcome.status, outcome.ack) == ("gone", True)
    assert queued == [], "a retry (or anything else) was queued for a cancelled run"
    kinds = [e.event_type for e in (await world.events.list(run_id)).data]
    assert kinds[-1] == "run_cancelled" and kinds.count("step_retrying") == 0, kinds
    assert all(not p.holders and p.waiting == 0 for p in await limiter.pools(f"step:{definition.name}"))
    assert charges(run_id) == {}
