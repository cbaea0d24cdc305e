"""End to end through the delivery path: results, delivery counts of the inline loop, fan-out, idempotent starts,
exact values, replay-stable now()/random(), asyncio combinators, streams. In memory (WorkflowTestEnv, time
skipping: delays are checked on the log's timestamps); a basic run and the sleep's two deliveries also on AWS
(moto, the local poller)."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter, defaultdict
from datetime import datetime, timedelta

import pytest

from awsworld import RunIdTakenError, get_writable, now, random, sleep, step, step_metadata, workflow, workflow_metadata
from awsworld.authoring.definitions import workflow_name

CALLS: Counter[str] = Counter()
SEEN: dict[str, list[object]] = {}
GATES: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)  # steps wait on these until the test sets them


def _at(events: list, event_type: str) -> datetime:
    return next(e.created_at for e in events if e.event_type == event_type)


# ----------------------------------------------------------------------------------------- addition


@step
async def add(a: int, b: int) -> int:
    CALLS["add"] += 1
    return a + b


@workflow
async def add_two(a: int, b: int) -> int:
    return await add(a, b)


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_addition_of_two_numbers(e2e) -> None:
    assert await e2e.run(add_two, 2, 40) == 42


# ----------------------------------------------------------------------------------------- serial: one delivery


@step
async def serial_inc(x: int) -> int:
    CALLS["serial_inc"] += 1
    return x + 1


@workflow
async def serial_ten() -> int:
    x = 0
    for _ in range(10):
        x = await serial_inc(x)
    return x


async def test_ten_serial_steps_complete_in_one_flow_delivery(e2e) -> None:
    CALLS["serial_inc"] = 0
    async with e2e.counting() as deliveries:
        run = await e2e.start(serial_ten)
        assert await run.result(timeout=30) == 10
    assert deliveries.errors == []
    assert deliveries.count == 1, deliveries.statuses
    assert deliveries.statuses == ["completed"]
    assert CALLS["serial_inc"] == 10
    types = [t for t, _ in await e2e.event_types(run)]
    assert types.count("step_started") == 10 and types.count("step_completed") == 10


# ----------------------------------------------------------------------------------------- sleep then step: two


@step
async def after_sleep() -> str:
    CALLS["after_sleep"] += 1
    return "woke"


@workflow
async def sleep_then_step() -> str:
    await sleep(1)
    return await after_sleep()


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_sleep_then_step_takes_exactly_two_flow_deliveries(e2e) -> None:
    CALLS["after_sleep"] = 0
    async with e2e.counting() as deliveries:
        run = await e2e.start(sleep_then_step)
        assert await run.result(timeout=30) == "woke"
    assert deliveries.errors == []
    assert deliveries.count == 2, deliveries.statuses
    assert deliveries.statuses == ["suspended", "completed"]
    events = await run.events()
    slept = _at(events, "wait_completed") - _at(events, "wait_created")
    assert slept >= timedelta(seconds=1), f"sleep(1) woke after {slept}"
    assert _at(events, "step_started") - _at(events, "wait_created") >= timedelta(seconds=1)
    assert CALLS["after_sleep"] == 1


# ----------------------------------------------------------------------------------------- fan-out 10 then 100


@step
async def square(i: int) -> int:
    CALLS[f"square:{i}"] += 1
    return i * i


@workflow
async def gather_ten_then_hundred() -> list[int]:
    first = await asyncio.gather(*(square(i) for i in range(10)))
    second = await asyncio.gather(*(square(i) for i in range(10, 110)))
    return [*first, *second]


async def test_gather_of_10_then_100_steps(e2e) -> None:
    for i in range(110):
        CALLS[f"square:{i}"] = 0
    run = await e2e.start(gather_ten_then_hundred)
    assert await run.result(timeout=60) == [i * i for i in range(110)]
    await e2e.idle()
    ran = {i: CALLS[f"square:{i}"] for i in range(110)}
    assert ran == dict.fromkeys(range(110), 1), "each step body ran exactly once"
    events = await e2e.event_types(run)
    created = Counter(c for t, c in events if t == "step_created")
    started = Counter(c for t, c in events if t == "step_started")
    assert len(created) == 110 and set(created.values()) == {1}
    assert len(started) == 110 and set(started.values()) == {1}


# ----------------------------------------------------------------------------------------- idempotent start


@step
async def count_start(tag: str) -> str:
    CALLS[f"start:{tag}"] += 1
    return tag


@workflow
async def start_once(tag: str) -> str:
    return await count_start(tag)


async def test_second_start_with_the_same_run_id_returns_the_same_run(e2e) -> None:
    tag = uuid.uuid4().hex
    run_id = f"wrun_e2e_{tag}"
    first = await e2e.client.options(run_id=run_id).start(start_once, tag)
    second = await e2e.client.options(run_id=run_id).start(start_once, tag)
    assert first.run_id == second.run_id == run_id
    assert await first.result(timeout=30) == tag
    third = await e2e.client.options(run_id=run_id).start(start_once, tag)  # after the run ended
    assert third.run_id == run_id
    assert await third.result(timeout=5) == tag
    await e2e.idle()
    assert CALLS[f"start:{tag}"] == 1, "the workflow ran once"
    types = [t for t, _ in await e2e.event_types(first)]
    assert types.count("run_created") == 1
    assert types.count("run_started") == 1
    assert types.count("run_completed") == 1
    assert types.count("step_created") == 1


@step
async def count_other(tag: str) -> int:
    CALLS[f"other:{tag}"] += 1
    return 17


@workflow
async def other_workflow(tag: str) -> int:
    return await count_other(tag)


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_a_run_id_held_by_another_workflows_run_is_refused(e2e) -> None:
    """A start with an id another workflow's run holds used to return that run: its handle said the start had
    happened (the workflow never ran) and its ``result()`` was the other workflow's value."""
    tag = uuid.uuid4().hex
    run_id = f"order-{tag}"
    first = await e2e.client.options(run_id=run_id).start(start_once, tag)
    with pytest.raises(RunIdTakenError) as taken:
        await e2e.client.options(run_id=run_id).start(other_workflow, tag)
    assert (taken.value.run_id, taken.value.workflow_name) == (run_id, workflow_name(start_once))
    assert taken.value.requested == workflow_name(other_workflow)
    assert str(taken.value).startswith(f"run id {run_id!r} is taken by a run of {workflow_name(start_once)}")
    assert await first.result(timeout=30) == tag
    with pytest.raises(RunIdTakenError):  # once it has ended too
        await e2e.client.options(run_id=run_id).start(other_workflow, tag)
    await e2e.idle()
    assert CALLS[f"other:{tag}"] == 0
    assert [t for t, _ in await e2e.event_types(first)].count("run_created") == 1


# ----------------------------------------------------------------------------------------- NUL bytes


@step
async def nul_echo(text: str) -> str:
    return text + "\x00end"


@workflow
async def nul_roundtrip(text: str) -> dict[str, str]:
    echoed = await nul_echo(text)
    return {"in": text, "echoed": echoed, "\x00key": "v\x00"}


async def test_strings_with_nul_bytes_round_trip(e2e) -> None:
    text = "a\x00b\x00\x00c"
    result = await e2e.run(nul_roundtrip, text)
    assert result == {"in": text, "echoed": text + "\x00end", "\x00key": "v\x00"}


# ----------------------------------------------------------------------------------------- now() and random()


@step
async def record_before(tag: str, at: str, values: list[float]) -> None:
    SEEN[tag] = [at, values]


@workflow
async def clock_and_dice(tag: str) -> dict[str, object]:
    before_at = now()
    before = [random() for _ in range(3)]
    await record_before(tag, before_at.isoformat(), before)
    await sleep(1)
    after_at = now()
    after = random()
    return {"before_at": before_at.isoformat(), "before": before, "after_at": after_at.isoformat(),
            "after": after}


async def test_now_and_random_are_replay_stable(e2e) -> None:
    tag = uuid.uuid4().hex
    wall = datetime.now().astimezone()
    run = await e2e.start(clock_and_dice, tag)
    result = await run.result(timeout=30)
    # The values returned were computed on the replay after the sleep (a new delivery): they equal what the
    # first delivery computed and handed to the step before the sleep.
    assert SEEN[tag] == [result["before_at"], result["before"]]
    before_at = datetime.fromisoformat(result["before_at"])
    after_at = datetime.fromisoformat(result["after_at"])
    assert abs(before_at - wall) < timedelta(seconds=10)
    assert after_at - before_at >= timedelta(seconds=1), "now() after sleep(1) moved on by at least 1 s"
    values = [*result["before"], result["after"]]
    assert all(0.0 <= v < 1.0 for v in values)
    assert len(set(values)) == 4


# ----------------------------------------------------------------------------------------- asyncio combinators


@step
async def quick(label: str) -> str:
    return label


@step
async def gated(tag: str) -> str:
    """Runs until the test releases it: slower than anything the workflow races it against."""
    CALLS[f"gated-start:{tag}"] += 1
    await GATES[tag].wait()
    CALLS[f"gated-end:{tag}"] += 1
    return tag


async def _release_after_the_quick_step(e2e, run, tag: str) -> None:
    """Let the gated step finish once the quick one's outcome is in the log: the quick one finished first."""
    try:
        await e2e.wait_for_event(run, "step_completed")
        assert CALLS[f"gated-end:{tag}"] == 0
    finally:
        GATES[tag].set()


@workflow
async def wait_first_completed(tag: str) -> dict[str, object]:
    slow_task = asyncio.ensure_future(gated(tag))
    quick_task = asyncio.ensure_future(quick("quick"))
    done, pending = await asyncio.wait([slow_task, quick_task], return_when=asyncio.FIRST_COMPLETED)
    winner = next(iter(done)).result()
    rest = await asyncio.gather(*pending)
    return {"winner": winner, "done": len(done), "rest": rest}


async def test_asyncio_wait_first_completed_gives_the_first_finisher(e2e) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(wait_first_completed, tag)
    await _release_after_the_quick_step(e2e, run, tag)
    assert await run.result(timeout=30) == {"winner": "quick", "done": 1, "rest": [tag]}


@workflow
async def as_completed_order(tag: str) -> list[str]:
    order = []
    for next_done in asyncio.as_completed([gated(tag), quick("early")]):
        order.append(await next_done)
    return order


async def test_asyncio_as_completed_yields_in_completion_order(e2e) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(as_completed_order, tag)
    await _release_after_the_quick_step(e2e, run, tag)
    assert await run.result(timeout=30) == ["early", tag]


@workflow
async def race_slow_step_against_sleep(tag: str) -> str:
    step_task = asyncio.ensure_future(gated(tag))
    sleep_task = asyncio.ensure_future(sleep(1))
    done, _ = await asyncio.wait([step_task, sleep_task], return_when=asyncio.FIRST_COMPLETED)
    return "step" if step_task in done else "sleep"


async def test_sleep_wins_a_race_against_a_slower_step(e2e) -> None:
    tag = uuid.uuid4().hex
    run = await e2e.start(race_slow_step_against_sleep, tag)
    try:
        assert await run.result(timeout=15) == "sleep"
        # The run ended while the losing step was still running (it cannot end until the test lets it).
        assert CALLS[f"gated-start:{tag}"] == 1 and CALLS[f"gated-end:{tag}"] == 0
        events = await run.events()
        assert _at(events, "wait_completed") - _at(events, "wait_created") >= timedelta(seconds=1)
    finally:
        GATES[tag].set()
    await e2e.idle()
    assert CALLS[f"gated-end:{tag}"] == 1
    assert await run.status() == "completed"


@workflow
async def race_quick_step_against_sleep() -> str:
    step_task = asyncio.ensure_future(quick("step"))
    sleep_task = asyncio.ensure_future(sleep(2))
    done, _ = await asyncio.wait([step_task, sleep_task], return_when=asyncio.FIRST_COMPLETED)
    return step_task.result() if step_task in done else "sleep"


async def test_a_quick_step_wins_a_race_against_sleep(e2e) -> None:
    run = await e2e.start(race_quick_step_against_sleep)
    assert await run.result(timeout=30) == "step"
    events = await run.events()
    took = _at(events, "run_completed") - _at(events, "run_created")
    assert took < timedelta(seconds=2), f"the run waited for the losing sleep(2) ({took}, in the log's time)"
    assert "wait_completed" not in [e.event_type for e in events]


# ----------------------------------------------------------------------------------------- steps outside workflows


@step
async def plain_multiply(a: int, b: int) -> int:
    CALLS["plain_multiply"] += 1
    return a * b


async def test_steps_called_outside_a_workflow_just_run(e2e) -> None:
    CALLS["plain_multiply"] = 0
    before = e2e.poller.deliveries
    assert await plain_multiply(6, 7) == 42
    assert await plain_multiply(b=2, a=3) == 6
    assert CALLS["plain_multiply"] == 2
    assert e2e.poller.deliveries == before


# ----------------------------------------------------------------------------------------- streams


@step
async def write_stream(name: str) -> dict[str, object]:
    writer = get_writable(name)
    await writer.write("hello ")
    await writer.write(b"world")
    await writer.write_many(["\x00", "!"])
    await writer.close()
    meta = step_metadata()
    return {"step_id": meta.step_id, "attempt": meta.attempt}


@workflow
async def streaming() -> dict[str, object]:
    return await write_stream("out")


async def test_get_writable_in_a_step_writes_a_stream_the_run_reads(e2e) -> None:
    run = await e2e.start(streaming)
    meta = await run.result(timeout=30)
    assert meta["attempt"] == 1 and meta["step_id"]

    async def read() -> list[bytes]:
        return [chunk async for chunk in run.stream("out")]

    chunks = await asyncio.wait_for(read(), timeout=15)
    assert b"".join(chunks) == b"hello world\x00!"
    assert chunks == [b"hello ", b"world", b"\x00", b"!"]


# ----------------------------------------------------------------------------------------- the run's own identity


@workflow(name="basics.meta_child")
async def meta_child() -> dict[str, object]:
    meta = workflow_metadata()
    return {"run": meta.run_id, "name": meta.workflow_name, "parent": meta.parent_run_id}


@workflow(name="basics.meta_parent")
async def meta_parent() -> dict[str, object]:
    first = workflow_metadata()
    await sleep(1)  # a later delivery replays the body: the same answer there
    return {"same": workflow_metadata() == first, "run": first.run_id, "name": first.workflow_name,
            "created": first.created_at.isoformat(), "parent": first.parent_run_id, "child": await meta_child()}


@pytest.mark.parametrize("e2e_backend", ["memory", "aws"])
async def test_workflow_metadata_names_the_run_its_workflow_its_creation_and_a_childs_parent(e2e) -> None:
    run = await e2e.start(meta_parent)
    meta = await run.result(timeout=30)
    recorded = await e2e.world.runs.get(run.run_id)
    assert meta["same"] and meta["run"] == run.run_id and meta["name"] == "basics.meta_parent"
    assert meta["created"] == recorded.created_at.isoformat() and meta["parent"] is None
    child = meta["child"]
    assert child["parent"] == run.run_id and child["name"] == "basics.meta_child" and child["run"] != run.run_id
    with pytest.raises(RuntimeError, match=r"workflow_metadata\(\) can only be used inside a @workflow"):
        workflow_metadata()
