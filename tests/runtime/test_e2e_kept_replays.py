"""A run's deliveries in one worker go on from the replay the last one kept (``_worker/flow_state.py``,
``KeptReplays``) and settle the wakes of step ends together (``HandedWakes``), rather than each replaying the whole
log: counted as the events the deliveries read from the World (``events.list``), in the test environment, whose
deliveries interleave the same way on every run. On the code before them, a bounded ``map`` of 24 items at 4 read
631 events (its log holds 75) and ten sleeps in a row 256; then 379 and 1; with a batch's items queued rather than
run inline while other items are open (``StepClaims.beside_wakes``), the map reads 47.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from typing import Any

import pytest

from awsworld import batch_map, create_hook, sleep, step, workflow
from awsworld._engine.parking import parked_in_log
from awsworld._worker import inline_loop
from awsworld._worker.flow_state import HandedWakes, KeptReplays, lambda_memory_budget, resident_bytes
from awsworld._worker.recovery import last_commit_due
from awsworld.testing import WorkflowTestEnv
from awsworld.world.events import Event

from .conftest import deployed


@step
async def kept_add(i: int) -> int:
    return i + 1


@workflow(name="kept.bounded_map")
async def bounded_map(n: int, limit: int) -> int:
    return sum((await batch_map(kept_add, range(n), max_concurrency=limit)).values())


@workflow(name="kept.sleeps")
async def sleeps(n: int) -> int:
    total = 0
    for i in range(n):
        await sleep(timedelta(seconds=1))
        total += await kept_add(i)
    return total


@contextmanager
def events_read(env: WorkflowTestEnv) -> Iterator[list[int]]:
    """``[events]``: how many events ``events.list`` returned while the block ran (the World's own listing,
    counted as it answers)."""
    read = [0]
    original = env.world.events.list

    async def counted(*args: Any, **kwargs: Any) -> Any:
        page = await original(*args, **kwargs)
        read[0] += len(page.data)
        return page

    env.world.events.list = counted
    try:
        yield read
    finally:
        env.world.events.list = original


async def test_a_bounded_map_reads_the_log_less_than_once_per_item() -> None:
    async with WorkflowTestEnv() as env:
        with events_read(env) as read:
            run = await env.client.start(bounded_map, 24, 4)
            assert await run.result(timeout=30) == sum(range(1, 25))
            await env.idle()
        log = await run.events()
    assert len(log) == 75
    # 631 before: every item's end replayed the run from its first event, in a delivery of its own; 379 while a
    # flow that ran an item inline took no wake meanwhile.
    assert read[0] < len(log), read[0]


async def test_a_bounded_maps_items_are_queued_so_its_flow_takes_every_wake() -> None:
    """A bounded map's item whose end wakes the workflow is queued, not run inline, while other items are open
    (``StepClaims.beside_wakes``): a flow running a step inline takes no wake, so every item's end meanwhile started a
    delivery that replayed the run from its first event. 200 items at 20 read 31,040 events (the log holds 603) in
    100 flows, 76 superseded by another's write; now each end goes on from the replay the last one kept."""
    async with WorkflowTestEnv() as env:
        with events_read(env) as read:
            run = await env.client.start(bounded_map, 200, 20)
            assert await run.result(timeout=60) == sum(range(1, 201))
            await env.idle()
        log = await run.events()
        statuses = Counter(result.status for result in env.driver.results)
    assert len(log) == 603
    assert read[0] < len(log), read[0]  # 399: each event read about once
    assert not [status for status in statuses if "superseded" in status], statuses  # 76 flows before
    assert env.deliveries == 200, statuses  # a delivery per item, each going on with the workflow after its end
    assert env.worker.settings.kept.resumed == 199  # all but the first, which started the run, from a kept replay


async def test_a_wake_goes_on_from_the_replay_its_worker_kept() -> None:
    async with WorkflowTestEnv() as env:
        with events_read(env) as read:
            run = await env.client.start(sleeps, 10)
            assert await run.result(timeout=30) == sum(range(1, 11))
        assert env.deliveries >= 10  # (a delivery per wake-up: each read only what it had not seen)
    assert read[0] <= 10, read[0]  # 256 before: each wake-up read the whole log again


class Looked(list[Event]):
    """A log that counts the events read from its end (``reversed``), as ``last_commit_due`` reads it."""

    looked = 0

    def __reversed__(self) -> Iterator[Event]:
        for event in super().__reversed__():
            self.looked += 1
            yield event


async def test_a_long_runs_deliveries_look_only_at_what_is_new(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each delivery of a run that wakes up again and again looks at the events past its kept replay only: the
    parked mark was read from every event of the log (``parked_in_log``), as were the run's end and the last
    commit's due, at every delivery, so a run of a few thousand events cost each wake-up its whole log (365 daily
    reminders: 0.64 s of CPU, 1,460: 6.2 s; now 0.61 and 2.0)."""
    looked = [0]

    def counted(events: list[Event]) -> Any:
        looked[0] += len(events)
        return parked_in_log(events)

    monkeypatch.setattr(inline_loop, "parked_in_log", counted)
    async with WorkflowTestEnv() as env:
        run = await env.client.start(sleeps, 40)
        assert await run.result(timeout=30) == sum(range(1, 41))
        log = await run.events()
    tail = Looked(log)
    last_commit_due(tail)
    assert tail.looked <= 4, tail.looked  # the last commit's events and the one before them, not the whole log
    assert looked[0] == 0, looked[0]  # (the log holds no attr_set; before: every delivery's whole log, 4,021)


async def _sleeps_then_doubles(n: int) -> int:
    """``sleeps``' code changed after its first sleep: the calls it made so far are the same."""
    total = 0
    for i in range(n):
        await sleep(timedelta(seconds=1))
        total += 2 * await kept_add(i)
    return total


async def test_a_kept_replay_of_code_since_replaced_is_not_used() -> None:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(sleeps, 2)
        await env.idle()  # asleep: its replay kept
        with deployed(sleeps, _sleeps_then_doubles), events_read(env) as read:
            assert await run.result(timeout=30) == 2 * 1 + 2 * 2  # the new code's, from its first step on
    assert read[0] >= 3, read[0]  # the wake replayed the log afresh (run_created, run_started, wait_created)


def test_a_wake_is_handed_only_to_a_flow_that_will_read_it() -> None:
    """``HandedWakes``' protocol, which the loop relies on: a wake is accepted only while a flow is open, and the
    flow's look either takes the wake (staying open) or closes it in the same call."""
    wakes = HandedWakes()
    assert not wakes.hand("r")  # no flow of the run here: the step delivery continues the run itself
    assert wakes.open("r") and not wakes.open("r")  # one flow per run
    assert wakes.hand("r") and wakes.hand("r")  # two ends, one look settles both
    assert wakes.handed("r")
    assert not wakes.handed("r")  # nothing since: closed
    assert not wakes.hand("r")
    assert wakes.open("r")
    wakes.close("r")
    assert not wakes.hand("r")


@workflow(name="kept.waits_for_hook")
async def waits_for_hook(token: str) -> int:
    total = await kept_add(0)
    async with create_hook(token) as hook:
        await hook
    return total


async def test_a_worker_over_its_memory_budget_drops_its_kept_replays_and_keeps_none() -> None:
    """A kept replay holds its log with every value in it: past ``memory_budget`` resident bytes the worker drops
    what it kept and keeps nothing, and its runs go on by replaying their logs (``KEPT_MEMORY_SHARE``)."""
    async with WorkflowTestEnv() as env:
        kept = env.worker.settings.kept
        kept.memory_budget = 1 << 50  # room for all: the suspended run is kept
        parked = await env.client.start(waits_for_hook, "kept-memory")
        await env.idle()
        assert len(kept) == 1 and kept.refused_for_memory == 0

        kept.memory_budget = 1  # any process is over: the next keep drops the parked run's replay, keeps nothing
        with events_read(env) as read:
            run = await env.client.start(sleeps, 10)
            assert await run.result(timeout=30) == sum(range(1, 11))
        assert len(kept) == 0 and kept.resumed == 0 and kept.refused_for_memory >= 10
        assert read[0] > 100, read[0]  # each wake-up read the whole log again (at most 10 kept)

        await env.client.resume_hook("kept-memory", "go")  # the dropped run goes on from its log
        assert await parked.result(timeout=30) == 1


def test_resident_bytes_follow_what_the_process_holds() -> None:
    before = resident_bytes()
    if before is None:
        pytest.skip("no /proc/self/statm here (the budget is not applied where it cannot be read)")
    held = b"x" * (256 << 20)  # written, so every page is resident
    during = resident_bytes()
    assert during is not None and during - before >= 200 << 20, (before, during)
    del held
    after = resident_bytes()
    assert after is not None and after < during - (200 << 20), (during, after)


def test_the_budget_is_a_share_of_the_lambda_functions_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE", "1024")
    assert lambda_memory_budget() == 512 << 20 and KeptReplays().memory_budget == 512 << 20
    monkeypatch.delenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE")
    assert lambda_memory_budget() is None and KeptReplays().memory_budget is None  # off Lambda: events bound it
