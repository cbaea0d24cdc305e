"""User values: any JSON value round-trips exactly, large ones go to S3 transparently, oversized ones are 413.

"Large" is the AWS World's inline limit (over it a value is an S3 object); the in-memory World keeps every value
the same way, and gets values of that size all the same (``inline_limit``), so what must read back equal is
checked on both.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest

from awsworld._memory import MemoryWorld
from awsworld._memory.storage import MemoryStorage
from awsworld.aws import AWSWorld
from awsworld.aws.config import DEFAULT_INLINE_VALUE_LIMIT
from awsworld.world import PayloadTooLargeError, new_run_id

from .helpers import (
    WITH_LOCALSTACK,
    AnyWorld,
    all_events,
    another_process,
    aws_world,
    bucket_keys,
    hook_created,
    hook_received,
    module_world,
    new_run,
    on_aws,
    run_completed,
    run_created,
    step_completed,
    step_created,
    step_started,
    stored,
    table_items,
    unique,
    written,
)

module_local_aws, world = module_world(WITH_LOCALSTACK)

ODD_VALUES: dict[str, Any] = {
    "null": None,
    "true": True,
    "zero": 0,
    "negative": -17,
    "big-int": 2**70,
    "float": 1.25,
    "empty-string": "",
    "nul-bytes": "a\x00b\x00\x00c",
    "only-nul": "\x00",
    "unicode": "héllo wörld — 日本語 — 🚀 — \u202eRTL\u202c",
    "control-chars": "\t\n\r\x01\x1f\x7f",
    "json-lookalike": '{"v": "not an object"}',
    "empty-list": [],
    "empty-object": {},
    "nested": {"a": [1, {"b": [None, True, "x\x00y"]}], "": "empty key", "k\x00": 1},
    "deep": json.loads("[" * 60 + "]" * 60),
}


def inline_limit(world: AnyWorld) -> int:
    """The size over which the AWS World stores a value in S3 (its default for a World without one)."""
    return world.config.inline_value_limit if isinstance(world, AWSWorld) else DEFAULT_INLINE_VALUE_LIMIT


def _size(value: Any) -> int:
    return len(json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode())


async def _round_trip_step(world: AnyWorld, run_id: str, step_id: str, value: Any) -> None:
    created = await world.events.create(run_id, step_created(step_id, input=value))
    await world.events.create(run_id, step_started(step_id))
    completed = await world.events.create(run_id, step_completed(step_id, value))
    assert created.step is not None and created.step.input == value
    assert created.event is not None and created.event.event_data is not None
    assert created.event.event_data["input"] == value
    assert completed.step is not None and completed.step.output == value
    step = await world.steps.get(run_id, step_id)
    assert step.input == value and step.output == value
    listed = await world.events.list_by_correlation_id(run_id, step_id)
    assert listed.data[0].event_data["input"] == value  # type: ignore[index]
    assert listed.data[-1].event_data["result"] == value  # type: ignore[index]


@pytest.mark.parametrize("case", ODD_VALUES)
async def test_json_values_round_trip_exactly(world: AnyWorld, case: str) -> None:
    value = ODD_VALUES[case]
    run_id = await new_run(world, start=True, input=value)
    assert (await world.runs.get(run_id)).input == value
    await _round_trip_step(world, run_id, "s1", value)
    assert (await all_events(world, run_id))[0].event_data["input"] == value  # type: ignore[index]


async def test_a_lone_surrogate_round_trips_or_is_refused_with_a_400(world: AnyWorld) -> None:
    run_id = await new_run(world, start=True)
    value = "x\ud800y"
    try:
        await world.events.create(run_id, step_created("s1", input=value))
    except Exception as error:
        assert getattr(error, "status", None) == 400, repr(error)
        return
    assert (await world.steps.get(run_id, "s1")).input == value


async def test_a_value_at_the_inline_limit_stays_in_the_table(world: AnyWorld) -> None:
    limit = aws_world(world).config.inline_value_limit
    value = "a" * (limit - 2)
    assert _size(value) == limit
    run_id = await new_run(world, start=True)
    keys = await bucket_keys(world)
    await world.events.create(run_id, step_created("s1", input=value))
    assert await bucket_keys(world) == keys
    assert (await world.steps.get(run_id, "s1")).input == value


async def test_a_value_over_the_inline_limit_goes_to_s3_and_reads_back_equal(world: AnyWorld) -> None:
    limit = inline_limit(world)
    value = {"blob": "\x00é🚀" * (limit // 6), "n": [1, 2, 3]}
    assert _size(value) > limit
    run_id = await new_run(world, start=True)
    keys = await bucket_keys(world)
    result = await world.events.create(run_id, step_created("s1", input=value))
    assert result.step is not None and result.step.input == value
    assert (await world.steps.get(run_id, "s1")).input == value
    assert (await all_events(world, run_id))[2].event_data["input"] == value  # type: ignore[index]
    if (aws := on_aws(world)) is not None:  # where the AWS World keeps it
        assert len(set(await bucket_keys(aws)) - set(keys)) == 1
        for item in await table_items(aws):
            if item["pk"]["S"] == f"RUN#{run_id}":
                assert len(json.dumps(item)) < limit, "the value is not also stored inline"


async def test_every_kind_of_large_value_reads_back_equal_from_another_world(world: AnyWorld) -> None:
    big = "\x00" + "x" * (inline_limit(world) + 10)
    run_id = await new_run(world, start=True, input={"run": big})
    hook_id = unique("h")
    for event in (step_created("s1", input={"step": big}), step_started("s1"), step_completed("s1", {"res": big}),
                  hook_created(hook_id, unique("tok"), metadata={"meta": big}), hook_received(hook_id, {"pay": big}),
                  run_completed({"out": big})):
        await world.events.create(run_id, event)
    other = another_process(world)  # nothing cached
    try:
        run = await other.runs.get(run_id)
        assert run.input == {"run": big} and run.output == {"out": big}
        step = await other.steps.get(run_id, "s1")
        assert step.input == {"step": big} and step.output == {"res": big}
        data = {e.event_type: e.event_data for e in await all_events(other, run_id)}
        assert data["run_created"]["input"] == {"run": big}  # type: ignore[index]
        assert data["step_created"]["input"] == {"step": big}  # type: ignore[index]
        assert data["step_completed"]["result"] == {"res": big}  # type: ignore[index]
        assert data["hook_created"]["metadata"] == {"meta": big}  # type: ignore[index]
        assert data["hook_received"]["payload"] == {"pay": big}  # type: ignore[index]
        assert data["run_completed"]["output"] == {"out": big}  # type: ignore[index]
    finally:
        await other.close()


async def test_a_write_answers_with_the_value_it_wrote_in_every_size_class(world: AnyWorld) -> None:
    """The event a write answers with carries its value, inline, sealed or in S3, alone, in a batch, or as the
    run's end. (Regression: a written event whose value went to S3 was answered with that value as None, so a
    flow that kept its own run_completed reported a child's large result to its parent as None.)"""
    limit = inline_limit(world)
    for value in ("é" * 10, {"big": "é🚀\x00" * (limit // 4)}):
        run_id = await new_run(world, start=True)
        hook_id, token = unique("h"), unique("tok")
        batch = await world.events.create_batch(run_id, [step_created("a", input=value),
                                                         step_created("b", input=[value])])
        assert [(o.result.event.event_data or {})["input"] for o in batch.results if o.result and o.result.event
                ] == [value, [value]]
        hooked = written(await world.events.create(run_id, hook_created(hook_id, token, metadata=value)))
        assert (hooked.event_data or {})["metadata"] == value
        for event, field in ((step_started("a"), None), (step_completed("a", value), "result"),
                             (hook_received(hook_id, value), "payload"), (run_completed(value), "output")):
            answered = written(await world.events.create(run_id, event))
            if field is not None:
                assert (answered.event_data or {})[field] == value, (answered.event_type, _size(value))
        for resolve, shown in (("none", False), ("skip-step-inputs", True)):
            again = written(await world.events.create(new_run_id(), run_created(input=value),
                                                      resolve_data=resolve))
            assert ("input" in (again.event_data or {})) is shown
            if shown:
                assert (again.event_data or {})["input"] == value


async def test_resolve_none_does_not_fetch_s3_values(world: AnyWorld) -> None:
    big = "y" * (inline_limit(world) + 10)
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1", input=big))
    other = another_process(world)
    aws = on_aws(other)
    try:
        events = await all_events(other, run_id, resolve_data="none")
        assert "input" not in (events[2].event_data or {})
        assert (await other.steps.get(run_id, "s1", resolve_data="none")).input is None
        if aws is not None:
            assert aws.stats.requests["s3.GetObject"] == 0
        assert (await all_events(other, run_id))[2].event_data["input"] == big  # type: ignore[index]
        if aws is not None:
            assert aws.stats.requests["s3.GetObject"] >= 1
    finally:
        await other.close()


async def test_a_large_value_in_a_batch_goes_to_s3(world: AnyWorld) -> None:
    big = ["z" * (inline_limit(world) + 10)]
    run_id = await new_run(world, start=True)
    keys = await bucket_keys(world)
    batch = await world.events.create_batch(run_id, [step_created("a", input=big), step_created("b", input=[1])])
    assert all(o.ok for o in batch.results)
    if on_aws(world) is not None:
        assert len(set(await bucket_keys(world)) - set(keys)) == 1
    assert (await world.steps.get(run_id, "a")).input == big


# ---------------------------------------------------------------- max_value_bytes


@pytest.fixture
async def small_world(world: AnyWorld) -> AsyncIterator[AnyWorld]:
    """A World on ``world``'s backend that refuses values over 1,000 bytes (and, on AWS, offloads over 100)."""
    small: AnyWorld
    if isinstance(world, AWSWorld):
        small = AWSWorld(dataclasses.replace(world.config, max_value_bytes=1000, inline_value_limit=100))
    else:
        small = MemoryWorld(storage=MemoryStorage(world.clock, max_value_bytes=1000))
    yield small
    await small.close()


async def test_a_value_at_max_value_bytes_is_accepted(small_world: AnyWorld) -> None:
    run_id = await new_run(small_world, start=True)
    value = "v" * 998
    assert _size(value) == 1000
    await small_world.events.create(run_id, step_created("s1", input=value))
    assert (await small_world.steps.get(run_id, "s1")).input == value


async def test_a_value_over_max_value_bytes_is_413_and_writes_nothing(small_world: AnyWorld) -> None:
    run_id = await new_run(small_world, start=True)
    await small_world.events.create(run_id, step_created("s1"))
    before, before_keys = await stored(small_world), await bucket_keys(small_world)
    too_big = "v" * 999
    for event in (step_created("s2", input=too_big), step_completed("s1", too_big), run_completed(too_big)):
        with pytest.raises(PayloadTooLargeError) as raised:
            await small_world.events.create(run_id, event)
        assert raised.value.status == 413
    with pytest.raises(PayloadTooLargeError):
        await small_world.events.create_batch(run_id, [step_created("s3"), step_created("s4", input=too_big)])
    assert await stored(small_world) == before
    assert await bucket_keys(small_world) == before_keys


async def test_run_created_with_an_oversized_input_is_413_and_creates_no_run(small_world: AnyWorld) -> None:
    before, before_keys = await stored(small_world), await bucket_keys(small_world)
    with pytest.raises(PayloadTooLargeError):
        await small_world.events.create(None, run_created(input="v" * 2000))
    assert await stored(small_world) == before
    assert await bucket_keys(small_world) == before_keys


async def test_a_listing_larger_than_one_dynamodb_response_returns_every_event(world: AnyWorld) -> None:
    """Inline values near the limit: 70 of them exceed DynamoDB's 1 MB Query response."""
    value = "q" * (inline_limit(world) - 100)
    run_id = await new_run(world, start=True)
    for start in (0, 35):
        batch = await world.events.create_batch(run_id, [step_created(f"s{i}", input=value)
                                                         for i in range(start, start + 35)])
        assert all(o.ok for o in batch.results)
    page = await world.events.list(run_id)
    assert len(page.data) == 72 and not page.has_more
    assert all(e.event_data["input"] == value for e in page.data[2:])  # type: ignore[index]
    paged = await all_events(world, run_id, limit=50)
    assert [e.event_id for e in paged] == [e.event_id for e in page.data]


async def test_run_created_for_an_existing_id_stores_no_value(world: AnyWorld) -> None:
    big = "r" * (inline_limit(world) + 10)
    run_id = new_run_id()
    await world.events.create(run_id, run_created(input=big))
    keys = await bucket_keys(world)
    again = await world.events.create(run_id, run_created(input=big + "!"))
    assert again.event is None
    assert await bucket_keys(world) == keys


class _Interrupt(Exception):
    """A write that got no answer: the request failed, or landed and its answer was lost."""


@pytest.mark.parametrize("where", ["read before the commit", "commit not sent", "commit landed, answer lost"])
async def test_a_value_stored_for_an_interrupted_write_is_deleted_only_if_no_event_took_it(
        world: AnyWorld, where: str) -> None:
    world = aws_world(world)  # an interrupted request and its S3 object: the AWS World's
    run_id = await new_run(world, start=True)
    await world.events.create(run_id, step_created("s1", input=1))
    await world.events.create(run_id, step_started("s1"))
    value = {"blob": "v" * (world.config.inline_value_limit + 10)}
    writer = AWSWorld(world.config)  # its own clients, so the fault touches nothing else
    event, operation = {"read before the commit": ("before-call", "BatchGetItem"),
                        "commit not sent": ("before-call", "TransactWriteItems"),
                        "commit landed, answer lost": ("after-call", "TransactWriteItems")}[where]

    def interrupt(**_: Any) -> None:
        raise _Interrupt(where)

    writer.clients.register_handler(f"{event}.dynamodb.{operation}", interrupt)
    keys = set(await bucket_keys(world))
    try:
        with pytest.raises(_Interrupt):
            await writer.events.create(run_id, step_completed("s1", value))
    finally:
        await writer.close()
    added = set(await bucket_keys(world)) - keys
    if where == "commit landed, answer lost":
        assert len(added) == 1, "the committed event references its value: it stays"
        assert (await world.steps.get(run_id, "s1")).output == value
    else:
        assert added == set(), "nothing references the value: it was deleted"
        assert (await world.steps.get(run_id, "s1")).status == "running"
