"""What an attempt is, end to end through the delivery path, on the in-memory World and the emulator (moto).

- **A claimed step runs in the attempt that claimed it** (issue 31 item 8). A flow that declared a step born
  running (its ``step_started`` written under the flow's message id) and was then superseded by another flow's
  write before running the body used to hand the step to its own message's redelivery, which started it again:
  "attempt 1, inline", then "attempt 2" a second later with no failure recorded and attempt 1's body never run
  (4 of 5 dev runs of a 20-item ``map`` limited to 5). The interleaving is injected: right after the flow's
  declaration lands, a second flow delivery of the run (sent through the queue) writes first.
- **A cut-off attempt is an attempt** (issue 31 item 9). The delivery running attempt 1 is killed at its
  invocation's time, as Lambda kills one (the driver's or the local poller's timeout); its message comes back
  and the step runs as attempt 2, which the 2-attempt policy counts: a failure there fails the step "after 2
  attempts", never 3; a second cut-off ends it with ``StepInterruptedError``, and no attempt 3 is started. The
  step's ``idempotency_key`` is the same in both attempts.

The counts are of step bodies run, by attempt: what a payment provider would see.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from awsworld import RetryPolicy, StepError, sleep, step, step_metadata, workflow
from awsworld.settings import Settings
from awsworld.testing import WorkflowTestEnv
from awsworld.world.messages import FlowMessage, queue_name_for

from .conftest import BOTH, E2E, on_backends

e2e_backend = on_backends(BOTH)

BODIES: Counter[tuple[str, str, int]] = Counter()
"""Step bodies run, by (run id, step name, attempt)."""
KEYS: dict[tuple[str, int], str] = {}
"""The idempotency key each attempt saw, by (run id, attempt)."""
STALL_SECONDS = 60.0  # longer than any invocation here: the body is always cut off mid-way
CUT_OFF_SECONDS = {"memory": 0.3, "aws": 2.5}
"""The invocation's time: a delivery still running then is killed. On moto it leaves room for a loaded machine's
ordinary deliveries (a few requests each), which must not be cut off."""
VISIBILITY_SECONDS = 4
"""The emulator's queue visibility timeout in the cut-off tests: how soon a killed delivery's message comes back
(on Lambda, six times the function's timeout; the test queue's default is 12 minutes)."""


def _ran() -> int:
    meta = step_metadata()
    BODIES[(meta.run_id, meta.step_name, meta.attempt)] += 1
    KEYS[(meta.run_id, meta.attempt)] = meta.idempotency_key
    return meta.attempt


def bodies(run_id: str, name: str) -> dict[int, int]:
    return {attempt: n for (run, step_name, attempt), n in sorted(BODIES.items()) if (run, step_name) ==
            (run_id, name)}


async def starts(run: Any, step_name_part: str) -> list[int]:
    """The attempts the log's ``step_started`` events record for the run's one step of that name."""
    steps = {e.correlation_id for e in await run.events() if e.event_type == "step_created"
             and step_name_part in str((e.event_data or {}).get("stepName"))}
    return [e.event_data["attempt"] for e in await run.events()
            if e.event_type == "step_started" and e.correlation_id in steps]


# ------------------------------------------------------------------------- a claim superseded before its body


@step(name="attempts.work")
async def work(x: int) -> int:
    _ran()
    return x * 2


@workflow(name="attempts.step_and_due_wait")
async def step_and_due_wait(x: int) -> int:
    """A step and a wait due at once: the flow declares both (the step born running: claimed), then writes the
    wait's completion before it runs the step; that write is the one another flow supersedes."""
    value, _ = await asyncio.gather(work(x), sleep(0))
    return value


@workflow(name="attempts.one_step")
async def one_step(x: int) -> int:
    return await work(x)


class AfterTheClaim:
    """Wraps ``world.events.create_batch``: once the declaration that claims ``run_id``'s step (its born-running
    ``step_started``, marked inline) has landed, ``then`` runs before the flow that wrote it goes on."""

    def __init__(self, world: Any, run_id: str, then: Callable[[], Awaitable[None]]) -> None:
        self.world = world
        self.run_id = run_id
        self.then = then
        self.original = world.events.create_batch
        self.injected = False

    async def __call__(self, run_id: str, events: Any, **kwargs: Any) -> Any:
        result = await self.original(run_id, events, **kwargs)
        claims = [e for e in events if e.get("eventType") == "step_started" and (e.get("eventData") or {}).get(
            "inline")]
        if run_id == self.run_id and claims and not self.injected:
            self.injected = True
            await self.then()
        return result


def a_second_flow_writes_first(world: Any, run_id: str) -> Callable[[], Awaitable[None]]:
    """A second flow delivery of the run (a queue message, as a step's end or a wake sends one) runs and writes
    (the due wait's completion) before the claiming flow's own next write."""

    async def second_flow() -> None:
        name = "attempts.step_and_due_wait"
        await world.queue(queue_name_for(name), FlowMessage(run_id, name).to_payload(),
                          idempotency_key=f"{run_id}:second-flow")
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            page = await world.events.list(run_id, resolve_data="none")
            if any(e.event_type == "wait_completed" for e in page.data):
                return
            await asyncio.sleep(0.02)
        raise AssertionError("the second flow never wrote the wait's completion")

    return second_flow


async def test_a_step_claimed_by_a_superseded_flow_runs_once_in_the_attempt_that_claimed_it(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    run_id = f"claim-{uuid.uuid4().hex[:12]}"
    injection = AfterTheClaim(e2e.world, run_id, a_second_flow_writes_first(e2e.world, run_id))
    monkeypatch.setattr(e2e.world.events, "create_batch", injection)
    run = await e2e.start(step_and_due_wait, 21, run_id=run_id)
    assert await run.result(timeout=30) == 42
    assert injection.injected, "the second flow wrote between the claim and the body"
    events = await run.events()
    completions = [e for e in events if e.event_type == "wait_completed"]
    assert len(completions) == 1, "the claiming flow's own completion of the wait was superseded"
    assert await starts(run, "attempts.work") == [1], "one start: no phantom attempt 2"
    assert bodies(run_id, "attempts.work") == {1: 1}, "the claimed attempt's body ran, once"
    [claim] = [e for e in events if e.event_type == "step_started"]
    assert claim.event_data.get("inline") is True
    assert not [e for e in events if e.event_type in ("step_retrying", "step_failed")]


async def test_a_step_claimed_as_the_budget_runs_out_runs_in_the_attempt_that_claimed_it(
        e2e: E2E, monkeypatch: pytest.MonkeyPatch) -> None:
    """The delivery's budget passes while its claiming write is on its way (a slow write): the flow still runs
    the step it claimed, as it runs an inline step started just before its deadline, and hands over after."""
    budget_ms = 300
    monkeypatch.setenv("AWSWORLD_FLOW_BUDGET_MS", str(budget_ms))
    run_id = f"budget-{uuid.uuid4().hex[:12]}"

    async def slow_write() -> None:
        await asyncio.sleep(2 * budget_ms / 1000)

    injection = AfterTheClaim(e2e.world, run_id, slow_write)
    monkeypatch.setattr(e2e.world.events, "create_batch", injection)
    run = await e2e.start(one_step, 5, run_id=run_id)
    assert await run.result(timeout=30) == 10
    assert injection.injected
    assert await starts(run, "attempts.work") == [1], "one start: no phantom attempt 2"
    assert bodies(run_id, "attempts.work") == {1: 1}


# ------------------------------------------------------------------------------------ a cut-off attempt counts


@step(name="attempts.flaky", retry=RetryPolicy(max_attempts=2, initial_delay="1s", jitter=0))
async def flaky(x: int) -> int:
    """Attempt 1 is cut off mid-body (its delivery killed); attempt 2 raises."""
    if _ran() == 1:
        await asyncio.sleep(STALL_SECONDS)
    raise ValueError(f"no stock for item {x}")


@step(name="attempts.stalls", retry=RetryPolicy(max_attempts=2, initial_delay="1s", jitter=0))
async def stalls(x: int) -> int:
    """Every attempt is cut off mid-body."""
    _ran()
    await asyncio.sleep(STALL_SECONDS)
    return x


@workflow(name="attempts.reserve")
async def reserve(x: int, cut_off_every_attempt: bool) -> str:
    try:
        return str(await (stalls(x) if cut_off_every_attempt else flaky(x)))
    except StepError as error:
        return f"{error.error_type} after {error.attempt}: {error}"


@pytest.fixture
async def cut_off(e2e_backend: str, request: pytest.FixtureRequest,
                  monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[E2E]:
    """An environment whose invocations are killed after ``CUT_OFF_SECONDS`` (their messages come back): a
    WorkflowTestEnv with that timeout (virtual time: the message's visibility passes at once), or the module's
    emulator with its poller's timeout shortened and its queue's visibility timeout set to ``VISIBILITY_SECONDS``
    (restored after the test)."""
    seconds = CUT_OFF_SECONDS[e2e_backend]
    if e2e_backend == "memory":
        async with WorkflowTestEnv(timeout=seconds) as env:
            yield E2E(env=env)
        return
    local = request.getfixturevalue("local")
    monkeypatch.setattr(local.poller.invoker, "timeout", seconds)
    sqs = await local.world.clients.sqs()
    url = local.world.config.queue_url
    before = (await sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"]))["Attributes"]
    await _set_visibility(local, monkeypatch, {"VisibilityTimeout": str(VISIBILITY_SECONDS)})
    try:
        yield E2E(local=local)
    finally:
        await _set_visibility(local, monkeypatch, before)


async def _set_visibility(local: Any, monkeypatch: pytest.MonkeyPatch, attributes: dict[str, str]) -> None:
    """Set the queue's visibility timeout and return once the poller has begun a receive after it: a receive
    takes the timeout in force when it began (SQS's and moto's long poll alike), so the one in flight now could
    still hand the next message the old one."""
    sqs = await local.world.clients.sqs()
    await sqs.set_queue_attributes(QueueUrl=local.world.config.queue_url, Attributes=attributes)
    consumer = local.poller.consumer
    original = consumer.receive
    began = asyncio.Event()

    async def receive(*args: Any, **kwargs: Any) -> Any:
        began.set()
        return await original(*args, **kwargs)

    monkeypatch.setattr(consumer, "receive", receive)
    await asyncio.wait_for(began.wait(), timeout=30)
    monkeypatch.setattr(consumer, "receive", original)


async def test_a_cut_off_attempt_counts_against_max_attempts(cut_off: E2E) -> None:
    run = await cut_off.start(reserve, 7, False)
    outcome = await run.result(timeout=60)
    assert outcome == ("ValueError after 2: step 'attempts.flaky' failed after 2 attempts: ValueError: no stock "
                       "for item 7")
    assert cut_off.poller.invoker.timed_out >= 1, "attempt 1's delivery was killed mid-body"
    assert await starts(run, "attempts.flaky") == [1, 2]
    assert bodies(run.run_id, "attempts.flaky") == {1: 1, 2: 1}, "two attempts, each body once"
    [record] = [s for s in await run.steps() if s.step_name == "attempts.flaky"]
    assert (record.status, record.attempt) == ("failed", 2)
    assert KEYS[(run.run_id, 1)] == KEYS[(run.run_id, 2)] == f"{run.run_id}:{record.step_id}", \
        "the idempotency key is the step's, the same in the cut-off attempt and the next"


async def test_a_cut_off_last_attempt_fails_the_step_without_another_start(cut_off: E2E) -> None:
    run = await cut_off.start(reserve, 8, True)
    outcome = await run.result(timeout=60)
    assert outcome.startswith("StepInterruptedError after 2: step 'attempts.stalls' failed after 2 attempts: "
                              "StepInterruptedError: attempt 2 of step attempts.stalls was started but never "
                              "finished"), outcome
    assert await starts(run, "attempts.stalls") == [1, 2], "no attempt 3 was started"
    assert bodies(run.run_id, "attempts.stalls") == {1: 1, 2: 1}
    [record] = [s for s in await run.steps() if s.step_name == "attempts.stalls"]
    assert (record.status, record.attempt) == ("failed", 2)


# ------------------------------------------------------------------- cut off by the flow function's timeout

FLOW_TIMEOUT_SECONDS = 11
"""The flow function's timeout in the next test: the shortest whose budget (it less the delivery's 10 s margin) is
the invocation's own, so the recorded error's figure is the function's timeout, as on Lambda."""


@step(name="attempts.transcode", retry=RetryPolicy(max_attempts=1))
async def transcode(x: int) -> int:
    """A body that needs longer than one invocation (a transcode, a long LLM call)."""
    _ran()
    await asyncio.sleep(STALL_SECONDS)
    return x


@workflow(name="attempts.transcode_two")
async def transcode_two(x: int) -> list[str]:
    """Two calls: the flow runs one inline and queues the other to a message of its own."""
    results = await asyncio.gather(transcode(x), transcode(x + 1), return_exceptions=True)
    return [str(result) for result in results]


async def test_an_attempt_the_flow_functions_timeout_cuts_off_says_so_and_what_raises_it(
        local: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """A step body longer than the flow function's timeout, inline and queued, on the AWS World (moto): each
    attempt's delivery is killed at the timeout (the poller's invoker, as Lambda), its message comes back, and its
    last attempt is recorded failed with an error that says the delivery was cut off about the timeout after the
    attempt began, by the function's timeout, and which parameter raises it. The log says it too."""
    monkeypatch.setenv(Settings.flow_timeout_seconds.env, str(FLOW_TIMEOUT_SECONDS))
    monkeypatch.setattr(local.poller.invoker, "timeout", float(FLOW_TIMEOUT_SECONDS))
    sqs = await local.world.clients.sqs()
    url = local.world.config.queue_url
    before = (await sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"]))["Attributes"]
    # Longer than the timeout (on Lambda six times it), so a message comes back only once its delivery was killed.
    await _set_visibility(local, monkeypatch, {"VisibilityTimeout": str(FLOW_TIMEOUT_SECONDS + 1)})
    try:
        e2e = E2E(local=local)
        with caplog.at_level(logging.WARNING, logger="awsworld.steps"):
            run = await e2e.start(transcode_two, 1)
            outcome = await run.result(timeout=90)
    finally:
        await _set_visibility(local, monkeypatch, before)
    said = re.compile(
        r"^step 'attempts\.transcode' failed: StepInterruptedError: attempt 1 of step attempts\.transcode was started "
        r"but never finished \(its delivery was cut off at most (\d+) s after the attempt began, when the flow "
        rf"function's timeout \({FLOW_TIMEOUT_SECONDS} s\) stopped it: a step attempt runs within one invocation; "
        r"for a step that needs longer, raise the stack's FlowTimeoutSeconds parameter \(up to 900 s, "
        r"AWSWORLD_FLOW_TIMEOUT_SECONDS\) or split the work\), and its retry policy allows 1 attempt\(s\)$")
    assert len(outcome) == 2
    for error in outcome:
        match = said.match(error)
        assert match, error

        assert FLOW_TIMEOUT_SECONDS - 2 <= int(match.group(1)) <= FLOW_TIMEOUT_SECONDS, error
    inline = [(e.event_data or {}).get("inline") is True for e in await run.events() if e.event_type == "step_started"]
    assert sorted(inline) == [False, True], "one attempt ran inline in the flow, the other from its own message"
    assert local.poller.invoker.timed_out >= 2
    logged = [r.getMessage() for r in caplog.records if "attempts.transcode was started but never finished" in
              r.getMessage()]
    assert len(logged) >= 2 and all("FlowTimeoutSeconds" in line for line in logged), logged
