"""Reading the log: slot-numbered ids, pagination with a cursor on every page, the counters snapshot,
listing by correlation id, resolve_data, and the skipped-events report of a write with a stale event_count."""

from __future__ import annotations

import re
from typing import Any

import pytest

from awsworld.aws.log.blocks import BLOCK_SPAN
from awsworld.world import RunNotFoundError, event_id_to_slot, new_run_id, slot_to_event_id

from .helpers import (
    AnyWorld,
    all_events,
    assert_dense,
    aws_world,
    hook_created,
    hook_received,
    module_world,
    new_run,
    run_failed,
    step_completed,
    step_created,
    step_failed,
    step_started,
    types,
    unique,
    wait_created,
)

module_local_aws, world = module_world()


async def _run_with_steps(world: AnyWorld, count: int) -> str:
    run_id = await new_run(world, start=True)
    for i in range(count):
        await world.events.create(run_id, step_created(f"s{i}"))
    return run_id


def test_event_ids_are_evnt_and_the_slot_padded_to_26_digits() -> None:
    assert slot_to_event_id(1) == "evnt_00000000000000000000000001"
    assert slot_to_event_id(1234) == "evnt_" + "1234".rjust(26, "0")
    assert event_id_to_slot("evnt_00000000000000000000000042") == 42


async def test_list_returns_the_log_in_slot_order_with_dense_ids(world: AnyWorld) -> None:
    run_id = await _run_with_steps(world, 3)
    page = await world.events.list(run_id)
    assert not page.has_more
    assert_dense(page.data)
    assert all(re.fullmatch(r"evnt_\d{26}", e.event_id) for e in page.data)
    assert all(e.run_id == run_id for e in page.data)
    assert types(page.data) == ["run_created", "run_started", "step_created", "step_created", "step_created"]
    assert [e.correlation_id for e in page.data[2:]] == ["s0", "s1", "s2"]


async def test_list_pages_with_a_cursor_on_every_page_including_the_last(world: AnyWorld) -> None:
    run_id = await _run_with_steps(world, 5)  # 7 events
    pages = []
    cursor = None
    while True:
        page = await world.events.list(run_id, limit=3, cursor=cursor)
        pages.append(page)
        assert page.cursor is not None
        cursor = page.cursor
        if not page.has_more:
            break
    assert [len(p.data) for p in pages] == [3, 3, 1]
    assert [p.has_more for p in pages] == [True, True, False]
    assert_dense([e for p in pages for e in p.data])


async def test_the_last_pages_cursor_resumes_after_new_events(world: AnyWorld) -> None:
    run_id = await _run_with_steps(world, 1)
    last = await world.events.list(run_id)
    assert last.cursor is not None and not last.has_more
    empty = await world.events.list(run_id, cursor=last.cursor)
    assert empty.data == [] and not empty.has_more and empty.cursor is not None
    await world.events.create(run_id, step_created("later1"))
    await world.events.create(run_id, step_created("later2"))
    more = await world.events.list(run_id, cursor=last.cursor)
    assert [e.slot for e in more.data] == [4, 5]
    assert [e.correlation_id for e in more.data] == ["later1", "later2"]


async def test_every_page_carries_the_runs_counters_as_a_snapshot(world: AnyWorld) -> None:
    run_id = await _run_with_steps(world, 3)
    first = await world.events.list(run_id, limit=2)
    second = await world.events.list(run_id, limit=2, cursor=first.cursor)
    run = await world.runs.get(run_id)
    assert first.snapshot is not None and second.snapshot is not None
    assert (first.snapshot.seq, first.snapshot.seq_in_band) == (5, 1)
    assert second.snapshot == first.snapshot
    assert (run.seq, run.seq_in_band) == (5, 1)


async def test_list_of_a_missing_run_is_not_found(world: AnyWorld) -> None:
    with pytest.raises(RunNotFoundError):
        await world.events.list(new_run_id())


async def test_list_by_correlation_id_returns_one_entitys_events_in_order(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    for event in (step_created("a"), step_created("b"), step_started("a"), step_started("b"),
                  step_completed("b"), step_completed("a")):
        await world.events.create(run_id, event)
    page = await world.events.list_by_correlation_id(run_id, "a")
    assert types(page.data) == ["step_created", "step_started", "step_completed"]
    assert [e.slot for e in page.data] == [3, 5, 8]
    assert not page.has_more
    assert (await world.events.list_by_correlation_id(run_id, "zzz")).data == []


async def test_list_by_correlation_id_pages(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    for event in (step_created("a"), step_created("b"), step_started("a"), step_completed("a")):
        await world.events.create(run_id, event)
    slots = []
    cursor = None
    while True:
        page = await world.events.list_by_correlation_id(run_id, "a", limit=1, cursor=cursor)
        assert len(page.data) <= 1
        slots.extend(e.slot for e in page.data)
        cursor = page.cursor
        if not page.has_more:
            break
    assert slots == [3, 5, 6]


# ---------------------------------------------------------------- resolve_data


async def _run_with_every_payload(world: AnyWorld) -> str:
    run_id = await new_run(world, start=True, input={"run": "input"})
    hook_id = unique("h")
    for event in (step_created("s1", input={"step": "input"}), step_started("s1"),
                  step_completed("s1", {"step": "result"}), step_created("s2"), step_started("s2"),
                  step_failed("s2", "step error"), hook_created(hook_id, unique("tok"), metadata={"hook": "meta"}),
                  hook_received(hook_id, {"hook": "payload"}), run_failed("run error")):
        await world.events.create(run_id, event)
    return run_id


PAYLOAD = {"run_created": "input", "step_created": "input", "step_completed": "result", "step_failed": "error",
           "hook_created": "metadata", "hook_received": "payload", "run_failed": "error"}


async def test_list_resolve_none_strips_every_payload_field(world: AnyWorld) -> None:
    run_id = await _run_with_every_payload(world)
    full = await all_events(world, run_id)
    bare = await all_events(world, run_id, resolve_data="none")
    assert [e.event_id for e in bare] == [e.event_id for e in full]
    for f, b in zip(full, bare, strict=True):
        field = PAYLOAD.get(f.event_type)
        if field is None:
            assert b.event_data == f.event_data
            continue
        assert f.event_data is not None and field in f.event_data, f.event_type
        assert b.event_data is not None and field not in b.event_data, f.event_type
        assert {k: v for k, v in f.event_data.items() if k != field} == b.event_data
    by_corr = await world.events.list_by_correlation_id(run_id, "s1", resolve_data="none")
    assert all("input" not in (e.event_data or {}) and "result" not in (e.event_data or {}) for e in by_corr.data)


async def test_list_resolve_all_returns_every_payload(world: AnyWorld) -> None:
    run_id = await _run_with_every_payload(world)
    data = {(e.event_type, e.correlation_id if e.event_type.startswith("step") else None): e.event_data
            for e in await all_events(world, run_id)}
    assert data[("run_created", None)]["input"] == {"run": "input"}  # type: ignore[index]
    assert data[("step_created", "s1")]["input"] == {"step": "input"}  # type: ignore[index]
    assert data[("step_completed", "s1")]["result"] == {"step": "result"}  # type: ignore[index]
    assert data[("step_failed", "s2")]["error"]["message"] == "step error"  # type: ignore[index]
    assert data[("hook_created", None)]["metadata"] == {"hook": "meta"}  # type: ignore[index]
    assert data[("hook_received", None)]["payload"] == {"hook": "payload"}  # type: ignore[index]
    assert data[("run_failed", None)]["error"]["message"] == "run error"  # type: ignore[index]


async def test_list_skip_step_inputs_keeps_every_result(world: AnyWorld) -> None:
    run_id = await _run_with_every_payload(world)
    full = await all_events(world, run_id)
    skipped = await all_events(world, run_id, resolve_data="skip-step-inputs")
    for f, s in zip(full, skipped, strict=True):
        if f.event_type in ("step_created", "step_started"):
            assert {k: v for k, v in (f.event_data or {}).items() if k != "input"} == \
                {k: v for k, v in (s.event_data or {}).items() if k != "input"}
        else:
            assert s.event_data == f.event_data, f.event_type


async def test_create_resolve_none_answers_without_payloads(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    result = await world.events.create(run_id, step_created("s1", input={"secret": 1}), resolve_data="none")
    assert result.event is not None and result.event.event_data == {"stepName": "add"}
    assert result.step is not None and result.step.input is None
    assert (await world.steps.get(run_id, "s1")).input == {"secret": 1}


# ---------------------------------------------------------------- event_count report


async def test_a_write_with_a_stale_event_count_lands_next_and_reports_the_skipped_events(world: AnyWorld) -> None:
    run_id = await _run_with_steps(world, 2)  # slots 1..4
    result = await world.events.create(run_id, step_created("mine"), event_count=2)
    assert result.event is not None and result.event.slot == 5
    assert [e.slot for e in result.events] == [3, 4]
    assert [e.correlation_id for e in result.events] == ["s0", "s1"]
    assert result.events[0].event_data == {"stepName": "add", "input": [1, 2]}
    assert not result.has_more
    assert result.cursor is not None
    after = await world.events.list(run_id, cursor=result.cursor)
    assert [e.slot for e in after.data] == [5]


async def test_a_write_with_a_current_event_count_reports_nothing(world: AnyWorld) -> None:
    run_id = await _run_with_steps(world, 1)  # slots 1..3
    result = await world.events.create(run_id, step_created("mine"), event_count=3)
    assert result.event is not None and result.event.slot == 4
    assert result.events == [] and not result.has_more


async def test_a_write_with_event_count_zero_reports_the_whole_log(world: AnyWorld) -> None:
    run_id = await _run_with_steps(world, 1)
    result = await world.events.create(run_id, step_created("mine"), event_count=0)
    assert result.event is not None and result.event.slot == 4
    assert types(result.events) == ["run_created", "run_started", "step_created"]


async def test_a_write_with_an_event_count_ahead_of_the_log_still_lands_densely(world: AnyWorld) -> None:
    run_id = await _run_with_steps(world, 1)
    result = await world.events.create(run_id, wait_created("w1"), event_count=50)
    assert result.event is not None and result.event.slot == 4
    assert result.events == []
    assert_dense(await all_events(world, run_id))


async def test_a_page_reads_only_the_blocks_that_hold_it(world: AnyWorld) -> None:
    """A Query's ``Limit`` counts items and a block holds many events: a page of ``limit`` events must not read
    ``limit`` blocks (the rest of the log, read again by every later page), only those holding its slots."""
    aws = aws_world(world)
    run_id = await new_run(world, start=True)  # 2 events
    for batch in range(30):  # 30 blocks of 10 events: 302 events
        await world.events.create_batch(run_id, [step_created(f"b{batch}-{i}") for i in range(10)])
    returned: list[int] = []

    def count(parsed: Any = None, **_: Any) -> None:
        if isinstance(parsed, dict) and "Items" in parsed:
            returned.append(len(parsed["Items"]))

    aws.clients.register_handler("after-call.dynamodb.Query", count)
    pages = 0
    cursor = None
    while True:
        page = await world.events.list(run_id, limit=50, cursor=cursor)
        pages += 1
        cursor = page.cursor
        if not page.has_more:
            break
    assert pages == 7
    # Each page: the 6 or 7 blocks holding its 51 slots (50 and the one telling whether more exist), and the
    # blocks starting up to BLOCK_SPAN - 1 slots before it (the block holding its first slot may start there).
    span_before = -(-(BLOCK_SPAN - 1) // 10)
    assert all(n <= 7 + span_before for n in returned), returned
    assert sum(returned) <= 32 + pages * span_before, returned  # the whole log about once; it was 3 times
