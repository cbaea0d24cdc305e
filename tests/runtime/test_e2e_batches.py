"""Batches (issue 26 item 6): ``parallel(*branches)`` with results in argument order and ``map``'s options,
``map(with_index=True)``, failure tolerance as a count or a fraction, and ``min_successful`` as Lambda durable
functions states it (complete as soon as enough succeeded; never stop early only because a minimum was asked),
with the completion reason each rule gives, on the in-memory World and the emulator (moto's server). Bad options
are a typed ``BatchOptionError`` before any item starts (nothing written)."""

from __future__ import annotations

import inspect
from datetime import timedelta
from typing import Any

import pytest

from awsworld import (
    BatchError,
    BatchOptionError,
    FatalError,
    StepError,
    first_successful,
    parallel,
    sleep,
    step,
    workflow,
)
from awsworld import map as durable_map
from awsworld.authoring.batch import BatchResult
from awsworld.authoring.errors import STEP_CANCELLED
from awsworld.client.replay import ReplayResult, replay_run
from awsworld.durable import serde

from .conftest import BOTH, E2E, on_backends

e2e_backend = on_backends(BOTH)


@step(name="batches.work", max_retries=0)
async def work(i: int, bad: list[int]) -> int:
    if i in bad:
        raise FatalError(f"item {i} is bad")
    return i * 10


def summary(result: BatchResult[Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"statuses": [item.status for item in result], "reason": result.completion_reason,
                           "ok": result.ok}
    try:
        out["values"] = result.values()
    except BatchError as error:
        out["raised"] = str(error)
    return out


# ----------------------------------------------------------------------------------------- parallel


async def slept_then_worked(i: int) -> int:
    await sleep(0.3)
    return await work(i, [])


@workflow(name="batches.branches")
async def branches(limit: int | None) -> dict[str, Any]:
    result = await parallel(
        work(1, []),                       # a step call
        lambda: work(2, []),               # a function returning one, called when the branch starts
        slept_then_worked(3),              # workflow code: a sleep, then a step
        max_concurrency=limit)
    return summary(result)


async def test_parallel_returns_every_branch_in_argument_order(e2e: E2E) -> None:
    run = await e2e.start(branches, None)
    assert await run.result(timeout=60) == {"statuses": ["succeeded"] * 3, "reason": "all_completed", "ok": True,
                                            "values": [10, 20, 30]}


async def test_parallel_max_concurrency_starts_branches_in_order_one_at_a_time(e2e: E2E) -> None:
    run = await e2e.start(branches, 1)
    assert (await run.result(timeout=60))["values"] == [10, 20, 30]
    kinds = [e.event_type for e in await run.events() if e.event_type in ("step_created", "step_completed",
                                                                          "wait_created")]
    # One branch in flight at a time: each one's call ends before the next one's first call is declared.
    assert kinds == ["step_created", "step_completed", "step_created", "step_completed", "wait_created",
                     "step_created", "step_completed"]


@workflow(name="batches.tolerant_parallel")
async def tolerant_parallel(bad: list[int], tolerated: int) -> dict[str, Any]:
    result = await parallel(*(work(i, bad) for i in range(5)), max_concurrency=1, tolerated_failures=tolerated)
    out = summary(result)
    out["errors"] = [type(e).__name__ for e in result.errors()]
    return out


async def test_parallel_failures_within_the_tolerance_complete_all(e2e: E2E) -> None:
    run = await e2e.start(tolerant_parallel, [1, 3], 2)
    out = await run.result(timeout=60)
    assert out["reason"] == "all_completed" and out["ok"] is True and out["values"] == [0, 20, 40]
    assert out["statuses"] == ["succeeded", "failed", "succeeded", "failed", "succeeded"]
    assert out["errors"] == [StepError.__name__, StepError.__name__]


async def test_parallel_failures_over_the_tolerance_stop_new_branches(e2e: E2E) -> None:
    run = await e2e.start(tolerant_parallel, [0, 1, 2], 1)
    out = await run.result(timeout=60)
    assert out["reason"] == "failure_tolerance_exceeded" and out["ok"] is False
    assert out["statuses"] == ["failed", "failed", "not_started", "not_started", "not_started"]
    assert "2 of 5 items failed (1 tolerated" in out["raised"]
    assert len([e for e in await run.events() if e.event_type == "step_created"]) == 2  # 2-4 never declared


async def test_a_parallel_branch_that_never_starts_is_closed_not_left_unawaited() -> None:
    async def fail() -> int:
        raise RuntimeError("no")

    async def never() -> int:  # pragma: no cover - must not run
        raise AssertionError("a branch after the decision ran")

    left = never()
    result = await parallel(fail(), left, max_concurrency=1)
    assert result.completion_reason == "failure_tolerance_exceeded"
    assert [item.status for item in result] == ["failed", "not_started"]
    assert inspect.getcoroutinestate(left) == inspect.CORO_CLOSED


# ----------------------------------------------------------------------------------------- map: index, fraction


async def indexed(item: str, index: int) -> str:
    return f"{index}:{item}:{await work(index, [])}"


@workflow(name="batches.indexed")
async def with_index(items: list[str]) -> list[str]:
    return (await durable_map(indexed, items, with_index=True, max_concurrency=2)).values()


async def test_the_mapped_function_may_take_the_index(e2e: E2E) -> None:
    run = await e2e.start(with_index, ["a", "b", "c"])
    assert await run.result(timeout=60) == ["0:a:0", "1:b:10", "2:c:20"]


async def one(item: tuple[int, list[int]]) -> int:
    return await work(*item)


@workflow(name="batches.fraction")
async def with_fraction(n: int, bad: list[int], fraction: float) -> dict[str, Any]:
    result = await durable_map(one, [(i, bad) for i in range(n)], max_concurrency=1,
                               tolerated_failure_fraction=fraction)
    return summary(result)


async def test_a_tolerated_fraction_of_failures_completes_all(e2e: E2E) -> None:
    run = await e2e.start(with_fraction, 5, [1, 3], 0.4)  # 2 of 5 is not more than 40%
    out = await run.result(timeout=60)
    assert out["reason"] == "all_completed" and out["ok"] is True and out["values"] == [0, 20, 40]


async def test_failures_over_the_fraction_stop_new_items(e2e: E2E) -> None:
    run = await e2e.start(with_fraction, 5, [1, 3], 0.2)  # one failure is 20%: tolerated; the second is not
    out = await run.result(timeout=60)
    assert out["reason"] == "failure_tolerance_exceeded" and out["ok"] is False
    assert out["statuses"] == ["succeeded", "failed", "succeeded", "failed", "not_started"]
    assert "a fraction of 0.2 tolerated" in out["raised"]


# ----------------------------------------------------------------------------------------- map: min_successful


@workflow(name="batches.minimum")
async def with_minimum(n: int, bad: list[int], minimum: int, limit: int) -> dict[str, Any]:
    result = await durable_map(one, [(i, bad) for i in range(n)], max_concurrency=limit, min_successful=minimum)
    return summary(result)


async def test_a_minimum_alone_never_stops_the_batch_on_failures(e2e: E2E) -> None:
    # Items 0 and 1 fail first; a minimum of 3 is still reachable, and then reached by the last item: every item
    # ran, so the batch completed all, and ok.
    run = await e2e.start(with_minimum, 5, [0, 1], 3, 1)
    out = await run.result(timeout=60)
    assert out == {"statuses": ["failed", "failed", "succeeded", "succeeded", "succeeded"],
                   "reason": "all_completed", "ok": True, "values": [20, 30, 40]}


async def test_an_unreachable_minimum_still_runs_every_item_and_is_not_ok(e2e: E2E) -> None:
    run = await e2e.start(with_minimum, 4, [0, 1, 2], 2, 1)  # after item 1 fails 2 of 2 are out of reach
    out = await run.result(timeout=60)
    assert out["statuses"] == ["failed", "failed", "failed", "succeeded"]
    assert out["reason"] == "all_completed" and out["ok"] is False
    assert "3 of 4 items failed (2 successes required, 1 succeeded" in out["raised"]


async def test_reaching_the_minimum_stops_starting_items(e2e: E2E) -> None:
    run = await e2e.start(with_minimum, 6, [0, 1], 2, 1)
    out = await run.result(timeout=60)
    assert out["statuses"] == ["failed", "failed", "succeeded", "succeeded", "not_started", "not_started"]
    assert out["reason"] == "min_successful_reached" and out["ok"] is True and out["values"] == [20, 30]


# ----------------------------------------------------------------------------------------- returning at once


@step(name="batches.doubled")  # the default retry policy: 6 attempts over up to 135 s
async def doubled(i: int, bad: list[int]) -> int:
    if i in bad:
        raise RuntimeError(f"item {i} always fails")
    return i * 2


async def double_one(item: tuple[int, list[int]]) -> int:
    return await doubled(*item)


@workflow(name="batches.six_of_ten")
async def six_of_ten(bad: list[int]) -> dict[str, Any]:
    result = await durable_map(double_one, [(i, bad) for i in range(10)], max_concurrency=5, min_successful=6)
    return summary(result)


def replayed_ok(result: ReplayResult) -> bool:
    assert result.ok, result.describe()
    return True


async def test_a_reached_minimum_returns_at_once_without_the_retrying_items(e2e: E2E) -> None:
    # The example: 10 items, 5 at a time, 6 successes required, items 0-2 always fail. The others succeed
    # while 0-2 wait on their retries (the default policy: 6 attempts over up to 135 s), each success freeing
    # its slot at once; the 6th decides. The batch returns then: 0-2 are still running (the run's end cancels
    # them), and of the last two items one may still be running, or never started.
    run = await e2e.start(six_of_ten, [0, 1, 2])
    out = await run.result(timeout=60)
    assert out["reason"] == "min_successful_reached" and out["ok"] is True
    assert out["statuses"][:3] == ["started"] * 3 and out["statuses"].count("succeeded") == 6
    assert set(out["statuses"][8:]) <= {"succeeded", "started", "not_started"} and len(out["values"]) == 6
    events = await run.events()
    created = [e for e in events if e.event_type == "step_created"]
    bad_ids = {str(e.correlation_id) for e in created if serde.loads((e.event_data or {})["input"])["args"][0] < 3}
    for step_id in bad_ids:  # never failed for good (that takes 6 attempts): cancelled by the run's end
        mine = [e for e in events if e.correlation_id == step_id]
        assert [e.event_type for e in mine].count("step_started") < 6
        assert mine[-1].event_type == "step_failed" and (mine[-1].event_data or {})["error"]["code"] == STEP_CANCELLED
    sixth = [i for i, e in enumerate(events) if e.event_type == "step_completed"][5]
    # After the 6th success (the decision's position): no item starts (a step_created there is an item started
    # before, whose declaration landed after a queued step's end: the result says it was running), and no step
    # fails but by the run's end cancelling it; then the run's end.
    after_sixth = events[sixth + 1:]
    for event in after_sixth:
        if event.event_type == "step_created":
            assert out["statuses"][serde.loads((event.event_data or {})["input"])["args"][0]] == "started"
        elif event.event_type == "step_failed":
            assert (event.event_data or {})["error"]["code"] == STEP_CANCELLED
    assert events[-1].event_type == "run_completed"
    assert replayed_ok(await replay_run(e2e.world, run.run_id))


async def slow_unless_bad(item: tuple[int, list[int]]) -> int:
    i, bad = item
    if i not in bad:
        await sleep(timedelta(hours=1))  # still running when the failures decide
    return await work(i, bad)


@workflow(name="batches.too_many_failures")
async def too_many_failures(bad: list[int]) -> dict[str, Any]:
    result = await durable_map(slow_unless_bad, [(i, bad) for i in range(10)], max_concurrency=5,
                               tolerated_failures=1)
    return summary(result)


async def test_exceeding_the_tolerance_returns_at_once_without_the_sleeping_items(e2e: E2E) -> None:
    # Items 0-4 start; 3 fails (tolerated: item 5 takes its slot), 4 fails: over the tolerance. 0-2 and 5 sleep
    # an hour: the batch does not wait for them (on the emulator an hour would time the test out).
    run = await e2e.start(too_many_failures, [3, 4])
    out = await run.result(timeout=60)
    assert out["statuses"] == ["started"] * 3 + ["failed"] * 2 + ["started"] + ["not_started"] * 4
    assert out["reason"] == "failure_tolerance_exceeded" and out["ok"] is False
    assert "2 of 10 items failed (1 tolerated, 0 succeeded" in out["raised"]
    events = await run.events()
    # Items 0-2 declared their sleep before any failure. Item 5 starts on item 3's failure; its sleep is written
    # only if the run did not end in the same replay, i.e. if item 4's failure came in a later delivery (on the
    # emulator both failures can land before the flow replays: then the run ends with item 5's sleep unwritten).
    waits = [e for e in events if e.event_type == "wait_created"]
    failures = [i for i, e in enumerate(events) if e.event_type == "step_failed"]
    assert len(waits) in (3, 4) and all(events.index(w) < failures[0] for w in waits[:3])
    assert not [e for e in events if e.event_type == "wait_completed"]  # nobody waited the hour
    assert replayed_ok(await replay_run(e2e.world, run.run_id))


@step(name="batches.after")
async def after(values: list[int]) -> int:
    return sum(values)


async def later_unless_first(item: tuple[int, list[int]]) -> int:
    i, bad = item
    if i > 0:
        await sleep(i)
    return await work(i, bad)


@workflow(name="batches.goes_on")
async def goes_on() -> dict[str, Any]:
    result = await durable_map(later_unless_first, [(i, []) for i in range(3)], min_successful=1)
    first = summary(result)
    await sleep(6)  # meanwhile items 1 and 2 (1 and 2 s of sleep, then a step) finish in the background
    return {"batch": first, "after": await after(first["values"])}


async def test_items_still_running_finish_in_the_background_while_the_workflow_goes_on(e2e: E2E) -> None:
    run = await e2e.start(goes_on)
    out = await run.result(timeout=60)
    assert out == {"batch": {"statuses": ["succeeded", "started", "started"], "reason": "min_successful_reached",
                             "ok": True, "values": [0]}, "after": 0}
    steps = await run.steps()
    assert [s.status for s in steps] == ["completed"] * 4  # items 0-2, then the step after: their ends are kept
    assert steps[-1].step_name == "batches.after"
    assert replayed_ok(await replay_run(e2e.world, run.run_id))


@workflow(name="batches.first_of_two")
async def first_of_two() -> int:
    return await first_successful(doubled(0, [0]), doubled(1, [0]))


async def test_first_successful_returns_at_once_without_the_retrying_one(e2e: E2E) -> None:
    # Item 0 always fails and retries (6 attempts by default); item 1 succeeds: its end wakes the workflow though
    # item 0 is still open, and the run ends with item 0 cancelled, not failed after all its attempts.
    run = await e2e.start(first_of_two)
    assert await run.result(timeout=60) == 2
    steps = await run.steps()
    assert [s.status for s in steps] == ["failed", "completed"]
    assert steps[0].error is not None and getattr(steps[0].error, "code", None) == STEP_CANCELLED
    assert steps[0].attempt < 6
    assert replayed_ok(await replay_run(e2e.world, run.run_id))


# ----------------------------------------------------------------------------------------- bad options


@workflow(name="batches.bad_options")
async def bad_options() -> str:
    try:
        await durable_map(one, [(0, []), (1, [])], tolerated_failures=0.5)  # type: ignore[arg-type]
    except BatchOptionError as error:
        return str(error)
    return "accepted"


async def test_a_bad_option_in_a_workflow_writes_nothing(e2e: E2E) -> None:
    run = await e2e.start(bad_options)
    assert await run.result(timeout=60) == ("tolerated_failures is a count; for a share of the items pass "
                                            "tolerated_failure_fraction=0.5")
    assert not [e for e in await run.events() if e.event_type == "step_created"]


def plain_double(x: int) -> int:  # not a step, not async: what map() cannot await
    return 2 * x


@workflow(name="batches.plain_function")
async def plain_function() -> list[str]:
    result = await durable_map(plain_double, [1, 2], tolerated_failures=2)  # type: ignore[arg-type]
    return [str(item.error) for item in result.failed]


async def test_map_over_a_plain_function_fails_each_item_saying_what_to_write(e2e: E2E) -> None:
    run = await e2e.start(plain_function)
    assert await run.result(timeout=60) == ["map() awaits what fn returns for each item, but 'plain_double' returned "
                                            "int: make it a @step or an async def"] * 2


@pytest.mark.parametrize(("options", "message"), [
    ({"tolerated_failures": -1}, "tolerated_failures must be >= 0"),
    ({"tolerated_failures": True}, "tolerated_failures must be an int"),
    ({"tolerated_failure_fraction": 1.5}, "tolerated_failure_fraction must be from 0 to 1"),
    ({"tolerated_failure_fraction": float("nan")}, "tolerated_failure_fraction must be from 0 to 1"),
    ({"tolerated_failure_fraction": "20%"}, "tolerated_failure_fraction must be a number"),
    ({"min_successful": 3}, "min_successful must be between 0 and the number of items (2)"),
    ({"max_concurrency": 0}, "max_concurrency must be an int of at least 1"),
    ({"with_index": "yes"}, "with_index must be True or False"),
    ({"fn": "double"}, "map() calls fn on every item: pass a step or an async function, got 'double'"),
])
async def test_bad_options_are_typed_errors(options: dict[str, Any], message: str) -> None:
    async def double(x: int) -> int:
        return 2 * x

    fn = options.pop("fn", double)
    with pytest.raises(BatchOptionError, match=message.replace("(", r"\(").replace(")", r"\)")):
        await durable_map(fn, [1, 2], **options)
    assert issubclass(BatchOptionError, ValueError)


async def test_parallel_checks_its_names_and_branches() -> None:
    async def value() -> int:
        return 1

    with pytest.raises(BatchOptionError, match="2 branches but 1 names"):
        await parallel(value, value, names=["one"])
    with pytest.raises(BatchOptionError, match="must be an awaitable or a function"):
        await parallel(3)  # type: ignore[arg-type]
    assert (await parallel(value, value, tolerated_failure_fraction=0.5)).values() == [1, 1]
