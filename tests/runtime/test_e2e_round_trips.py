"""One round trip per serial inline step (issue 10 item 3), end to end through the local poller.

A serial inline step's outcome rides in the flow's next write, with the declarations the workflow made after
seeing it: one TransactWriteItems per step instead of two. The workflow sees the outcome (and ``now()``)
before it is written, so the write is stamped with that time and must land right after the events the workflow
was shown; when anything else lands first, or the write fails in any way, the flow records the outcome the old
way and replays from the log. Also here: step retry messages go out without a dedup key, and a duplicate step
message is harmless.

The request counts and the values store's limit are AWS behaviour (moto: ``world.stats``, ``world.values``);
the fallbacks from a write that really lost its race run on both backends (DynamoDB's conditions on AWS); the
runtime's handling of injected write failures and of a retried inline step runs in memory (the injected
write that landed without an answer on AWS too).
"""

from __future__ import annotations

import asyncio
import dataclasses
import uuid
from collections import Counter
from datetime import datetime
from typing import Any

import pytest

from awsworld import create_hook, now, step, step_metadata, workflow
from awsworld.authoring.errors import StepError
from awsworld.client.replay import replay_run
from awsworld.world.errors import EntityConflictError, InBandSupersededError, LogMovedError
from awsworld.world.messages import FlowMessage, queue_name_for

CALLS: Counter[str] = Counter()
CONTEXT: dict[str, Any] = {}  # the module's World and Client, for step bodies that write to their own run
READS = ("dynamodb.GetItem", "dynamodb.BatchGetItem")


@pytest.fixture(scope="module")
def e2e_backend() -> str:
    """By default on LocalAWS (moto): AWS request counts (``world.stats``) and the values store's limit
    (``world.values``); tests that do not assert AWS behaviour choose their backends below."""
    return "aws"


@pytest.fixture(autouse=True)
def _context(e2e) -> None:
    CONTEXT["world"] = e2e.world
    CONTEXT["client"] = e2e.client


class BatchSpy:
    """Wraps ``world.events.create_batch``: records the atomic (outcome-carrying) calls and what they raised,
    and can make the first one fail (``fail_first``: before writing, or after writing with no answer)."""

    def __init__(self, world: Any, fail_first: BaseException | None = None, after_write: bool = False) -> None:
        self.world = world
        self.original = world.events.create_batch
        self.fail_first = fail_first
        self.after_write = after_write
        self.atomic: list[str] = []  # "ok" or the error's type name, per atomic call

    async def __call__(self, run_id: str, events: Any, **kwargs: Any) -> Any:
        if not kwargs.get("atomic"):
            return await self.original(run_id, events, **kwargs)
        failure, self.fail_first = self.fail_first, None
        if failure is not None and not self.after_write:
            self.atomic.append(type(failure).__name__)
            raise failure
        try:
            result = await self.original(run_id, events, **kwargs)
        except Exception as error:
            self.atomic.append(type(error).__name__)
            raise
        if failure is not None:
            self.atomic.append(type(failure).__name__)
            raise failure  # it landed, but the writer never heard
        self.atomic.append("ok")
        return result


@pytest.fixture
def spy(e2e, monkeypatch: pytest.MonkeyPatch) -> BatchSpy:
    spy = BatchSpy(e2e.world)
    monkeypatch.setattr(e2e.world.events, "create_batch", spy)
    return spy


def _per_entity(events: list[Any], event_type: str) -> Counter[str]:
    return Counter(e.correlation_id for e in events if e.event_type == event_type)


# ----------------------------------------------------------------------------------------- requests per step


@step
async def rt_inc(tag: str, x: int) -> int:
    CALLS[tag] += 1
    return x + 1


@workflow
async def rt_serial(tag: str, n: int) -> int:
    x = 0
    for _ in range(n):
        x = await rt_inc(tag, x)
    return x


async def _serial_costs(e2e, n: int) -> tuple[Counter[str], Any]:
    """The requests one serial run of n steps makes, from its start until the poller is idle again (nothing
    polls the run meanwhile: its result is read afterwards)."""
    await e2e.idle()
    world = e2e.world
    before = world.stats.snapshot()
    tag = uuid.uuid4().hex
    run = await e2e.start(rt_serial, tag, n)
    await e2e.idle()
    used = (world.stats.snapshot() - before).requests
    assert await run.result(timeout=5) == n
    assert CALLS[tag] == n
    return used, run


async def test_a_serial_step_costs_one_transaction(e2e, spy: BatchSpy) -> None:
    small, _ = await _serial_costs(e2e, 5)
    large, run = await _serial_costs(e2e, 15)
    # Each step's outcome rode in the write declaring the next step (the last one's was written alone): one
    # TransactWriteItems per step where the outcome and the next declaration used to take one each.
    assert spy.atomic == ["ok"] * 20
    per_ten = large["dynamodb.TransactWriteItems"] - small["dynamodb.TransactWriteItems"]
    assert per_ten == 10, (small, large)
    assert large["dynamodb.TransactWriteItems"] <= 15 + 6, large  # N + c (it was 2N + c)
    # No read before a step's end, nor anywhere else per step: the reads are the delivery's (a constant).
    assert sum(large[r] for r in READS) == sum(small[r] for r in READS) <= 6, (small, large)
    events = await run.events()
    assert all(n == 1 for n in _per_entity(events, "step_completed").values())
    assert len(_per_entity(events, "step_completed")) == 15
    # The outcome shares its write (and so its time) with the next step's declaration.
    for i, event in enumerate(events):
        if event.event_type == "step_completed" and events[i + 1].event_type == "step_created":
            assert events[i + 1].created_at == event.created_at


# ----------------------------------------------------------------------------------------- now() in the next call


@step
async def rt_echo(value: str) -> str:
    return value


@workflow
async def rt_clock(n: int) -> list[str]:
    seen = []
    for _ in range(n):
        seen.append(await rt_echo(now().isoformat()))  # the input depends on when the last result came
    seen.append(now().isoformat())
    return seen


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_now_after_a_step_is_the_time_its_outcome_is_recorded_and_replays(e2e, spy: BatchSpy) -> None:
    run = await e2e.start(rt_clock, 4)
    seen = await run.result(timeout=30)
    assert spy.atomic == ["ok"] * 4
    events = await run.events()
    completed = [e.created_at for e in events if e.event_type == "step_completed"]
    assert [datetime.fromisoformat(s) for s in seen[1:]] == completed
    replayed = await replay_run(e2e.world, run.run_id)  # inputs, digests and the output all match
    assert replayed.ok, replayed.describe()


# ----------------------------------------------------------------------------------------- the fallback


@step
async def rt_touch(tag: str, x: int) -> int:
    """Writes to its own run before returning: the log moves past what the workflow will be shown."""
    CALLS[tag] += 1
    meta = step_metadata()
    await CONTEXT["world"].runs.set_attributes(meta.run_id, [{"key": f"touched.{meta.step_id}", "value": str(x)}])
    return x + 1


@workflow
async def rt_touching(tag: str, n: int) -> int:
    x = 0
    for _ in range(n):
        x = await rt_touch(tag, x)
    return x


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_an_event_landing_while_the_step_runs_falls_back_and_loses_nothing(e2e, spy: BatchSpy) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(rt_touching, tag, 3)
    assert await run.result(timeout=30) == 3
    assert spy.atomic == ["LogMovedError"] * 3  # every combined write found the step's attr_set first
    assert CALLS[tag] == 3  # the fallback never runs a body again
    events = await run.events()
    assert sorted(_per_entity(events, "step_completed").values()) == [1, 1, 1]
    assert [e.event_type for e in events].count("attr_set") == 3


@step
async def rt_resume(token: str) -> str:
    """Resumes the run's own hook while it runs (a hook_received lands before the step's end)."""
    await CONTEXT["client"].resume_hook(token, {"from": "step"})
    return "resumed"


@workflow
async def rt_hooked(tag: str) -> list[Any]:
    async with create_hook(token=f"rt-hook:{tag}") as hook:
        resumed = await rt_resume(f"rt-hook:{tag}")
        payload = await hook
    after = await rt_inc(tag, 1)
    return [resumed, payload, after]


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_a_hook_received_while_the_step_runs_is_taken_in_order(e2e, spy: BatchSpy) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(rt_hooked, tag)
    assert await run.result(timeout=30) == ["resumed", {"from": "step"}, 2]
    events = await run.events()
    assert sorted(_per_entity(events, "step_completed").values()) == [1, 1]
    types = [e.event_type for e in events]
    assert types.index("hook_received") < types.index("step_completed")  # it landed while the step ran
    # While the hook was live (a hook_received may land at any time) its step's end was written on its own, the
    # old way; the step after the hook was disposed rode with the next write as usual.
    assert spy.atomic == ["ok"]


def _fallback_cases() -> list[Any]:
    """The runtime's answer to each failure (in memory), and the write that landed in DynamoDB without an
    answer, read back from its layout, on AWS too."""
    return [
        pytest.param(lambda: LogMovedError("injected", seq=0), False, "memory", id="log-moved"),
        pytest.param(lambda: InBandSupersededError("injected", seq=0, seq_in_band=0), False, "memory",
                     id="superseded"),
        pytest.param(lambda: EntityConflictError("injected"), False, "memory", id="conflict"),
        pytest.param(lambda: ConnectionError("injected: no answer"), False, "memory", id="no-answer-not-landed"),
        pytest.param(lambda: ConnectionError("injected: no answer"), True, "memory", id="no-answer-landed-memory"),
        pytest.param(lambda: ConnectionError("injected: no answer"), True, "aws", id="no-answer-landed-aws"),
    ]


@pytest.mark.parametrize(("failure", "after_write", "e2e_backend"), _fallback_cases())
async def test_any_failure_of_the_combined_write_keeps_the_run_correct(e2e, spy: BatchSpy, failure: Any,
                                                                      after_write: bool) -> None:
    spy.fail_first, spy.after_write = failure(), after_write
    tag = uuid.uuid4().hex
    run = await e2e.start(rt_serial, tag, 4)
    assert await run.result(timeout=30) == 4
    await e2e.idle()
    assert spy.atomic[0] == type(failure()).__name__
    assert CALLS[tag] == 4, "no step body ran twice"
    events = await run.events()
    assert sorted(_per_entity(events, "step_completed").values()) == [1, 1, 1, 1]
    assert sorted(_per_entity(events, "step_created").values()) == [1, 1, 1, 1]
    assert [e.event_type for e in events].count("run_completed") == 1


# ----------------------------------------------------------------------------------------- too large


@step
async def rt_big(tag: str, size: int) -> str:
    CALLS[tag] += 1
    return "x" * size


@workflow
async def rt_catches_big(tag: str, size: int) -> dict[str, Any]:
    try:
        await rt_big(tag, size)
        caught = None
    except StepError as error:
        caught = error.error_type
    return {"caught": caught, "after": await rt_inc(tag, 1)}


SMALL_LIMIT = 64 * 1024


async def test_a_result_too_large_for_the_log_still_fails_the_step(e2e, spy: BatchSpy,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    values = e2e.world.values
    monkeypatch.setattr(values, "config", dataclasses.replace(values.config, max_value_bytes=SMALL_LIMIT))
    tag = uuid.uuid4().hex
    run = await e2e.start(rt_catches_big, tag, SMALL_LIMIT + 1)
    assert await run.result(timeout=30) == {"caught": "ValueTooLargeError", "after": 2}
    assert spy.atomic[0] == "PayloadTooLargeError"
    assert CALLS[tag] == 2, "the big step ran once (a value too large is not retried)"
    types = [e.event_type for e in await run.events()]
    assert types.count("step_failed") == 1 and "step_retrying" not in types


# ----------------------------------------------------------------------------------------- step messages


@step(max_retries=2, retry_delay=0.5)
async def rt_flaky(tag: str) -> str:
    CALLS[tag] += 1
    if step_metadata().attempt == 1:
        raise ConnectionError("the first attempt fails on purpose")
    return "ok"


@workflow
async def rt_retries(tag: str) -> list[str]:
    return [await rt_flaky(tag), await rt_echo("after")]


@pytest.mark.parametrize("e2e_backend", ["memory"])
async def test_a_retried_inline_step_is_queued_and_finishes(e2e, spy: BatchSpy) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(rt_retries, tag)
    assert await run.result(timeout=30) == ["ok", "after"]
    assert CALLS[tag] == 2
    assert spy.atomic[0] == "ok"  # the step_retrying was written alone, at its position
    types = [e.event_type for e in await run.events()]
    assert types.count("step_retrying") == 1 and types.count("step_completed") == 2


@step
async def rt_duplicated(tag: str) -> str:
    """Sends two copies of its own step message, without a key: one arrives while it runs, one after."""
    CALLS[tag] += 1
    meta = step_metadata()
    world = CONTEXT["world"]
    if CALLS[tag] == 1:
        name = (await world.runs.get(meta.run_id, resolve_data="none")).workflow_name
        copy = FlowMessage(meta.run_id, name, meta.step_id, meta.step_name).to_payload()
        await world.queue(queue_name_for(name), copy)
        await world.queue(queue_name_for(name), copy, delay_seconds=2)
        await asyncio.sleep(1.0)  # the first copy is delivered while this attempt runs
    return "once"


@workflow
async def rt_fan(tag: str) -> list[str]:
    return list(await asyncio.gather(rt_echo("inline"), rt_duplicated(tag)))


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_duplicate_step_messages_without_a_key_are_harmless(e2e) -> None:
    tag = uuid.uuid4().hex
    async with e2e.counting() as deliveries:
        run = await e2e.start(rt_fan, tag)
        assert await run.result(timeout=30) == ["inline", "once"]
        await e2e.sleep(2.5)  # the late copy comes in after the step ended
    assert CALLS[tag] == 1, "the step body ran once"
    assert "duplicate" in deliveries.statuses, deliveries.statuses
    assert deliveries.errors == []
    events = await run.events()
    assert sorted(_per_entity(events, "step_completed").values()) == [1, 1]
    assert [e.event_type for e in events].count("run_completed") == 1
