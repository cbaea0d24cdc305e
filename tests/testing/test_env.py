"""``WorkflowTestEnv`` end to end: deliveries through the one delivery path, time that skips to the next due
wait or retry while a result is awaited (and only then), time moved by hand, and real time when asked."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
import traceback
from collections import Counter
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from awsworld import (
    HookTimeoutError,
    Place,
    RetryableError,
    RunEndedError,
    WorkflowNotRegisteredError,
    WorkflowRunFailedError,
    create_hook,
    get_writable,
    sleep,
    step,
    step_metadata,
    workflow,
)
from awsworld.testing import RunStalledError, WorkflowTestEnv

ATTEMPTS: Counter[str] = Counter()


@step
async def add_one(n: int) -> int:
    return n + 1


@workflow
async def count_to(n: int) -> int:
    total = 0
    for _ in range(n):
        total = await add_one(total)
    return total


@workflow
async def month_long(n: int) -> int:
    await sleep(timedelta(days=30))
    return await add_one(n)


@step(max_retries=3, retry_delay=60)
async def flaky(tag: str) -> int:
    ATTEMPTS[tag] += 1
    if step_metadata().attempt < 3:
        raise RuntimeError(f"attempt {step_metadata().attempt} fails")
    return step_metadata().attempt


@workflow
async def sleep_then_flaky(tag: str) -> int:
    await sleep(timedelta(days=30))
    return await flaky(tag)


@step(max_retries=1)
async def asks_for_later(tag: str) -> str:
    if step_metadata().attempt == 1:
        raise RetryableError("not yet", retry_after=3600)
    return "done"


@workflow
async def retry_after_an_hour(tag: str) -> str:
    return await asks_for_later(tag)


@workflow
async def fan_out(n: int) -> int:
    return sum(await asyncio.gather(*(add_one(i) for i in range(n))))


@workflow
async def approval(order: str) -> dict[str, object]:
    await sleep(timedelta(hours=1))
    async with create_hook(token=f"approve:{order}") as hook:
        decision = await hook
    return {"order": order, "decision": decision}


@workflow
async def hour_nap() -> str:
    await sleep(timedelta(hours=1))
    return "awake"


async def test_a_serial_run_completes_through_the_delivery_path(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(count_to, 20)
    assert await run.result() == 20
    assert awsworld_env.deliveries >= 1
    assert [s.status for s in await run.steps()] == ["completed"] * 20


async def test_a_thirty_day_sleep_costs_no_wall_time_and_the_log_follows_the_clock() -> None:
    began = time.monotonic()
    async with WorkflowTestEnv() as env:
        start = env.now()
        run = await env.client.start(month_long, 41)
        assert await run.result() == 42
        events = {e.event_type: e for e in await run.events()}
        waited = events["wait_completed"].created_at - events["wait_created"].created_at
        assert waited >= timedelta(days=30)
        assert env.now() - start >= timedelta(days=30)
    assert time.monotonic() - began < 2.0


async def test_retries_with_back_off_skip_their_delays(awsworld_env: WorkflowTestEnv) -> None:
    tag = f"flaky-{id(awsworld_env)}"
    began = time.monotonic()
    run = await awsworld_env.client.start(sleep_then_flaky, tag)
    assert await run.result() == 3
    assert time.monotonic() - began < 1.0, "30 days and two 1-minute back-offs must cost no wall time"
    assert ATTEMPTS[tag] == 3
    retrying = [e for e in await run.events() if e.event_type == "step_retrying"]
    assert len(retrying) == 2


async def test_retry_after_is_honoured_in_virtual_time(awsworld_env: WorkflowTestEnv) -> None:
    start = awsworld_env.now()
    run = await awsworld_env.client.start(retry_after_an_hour, "x")
    assert await run.result() == "done"
    events = [e for e in await run.events() if e.event_type in ("step_retrying", "step_completed")]
    assert [e.event_type for e in events] == ["step_retrying", "step_completed"]
    assert events[1].created_at - events[0].created_at >= timedelta(hours=1)
    assert awsworld_env.now() - start >= timedelta(hours=1)


async def test_a_fan_out_of_64_completes(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(fan_out, 64)
    assert await run.result() == sum(range(1, 65))


async def test_a_hook_after_a_sleep_is_waited_for_and_resumed(awsworld_env: WorkflowTestEnv) -> None:
    client = awsworld_env.client
    run = await client.start(approval, "A-17")
    hook = await run.wait_for_hook("approve:A-17")
    assert hook.run_id == run.run_id
    await client.resume_hook("approve:A-17", {"approved": True})
    assert await run.result() == {"order": "A-17", "decision": {"approved": True}}


async def test_time_does_not_skip_unless_a_result_is_awaited(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(hour_nap)
    await awsworld_env.idle()
    await asyncio.sleep(0.05)
    assert await run.status() == "running", "nobody waited for the run: its hour must not pass by itself"
    await awsworld_env.sleep(timedelta(minutes=59))
    assert await run.status() == "running"
    await awsworld_env.sleep(timedelta(minutes=2))
    assert await run.status() == "completed"
    assert await run.result(timeout=1) == "awake"


async def test_advance_moves_the_clock_and_what_falls_due_runs(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(hour_nap)
    await awsworld_env.idle()
    before = awsworld_env.now()
    after = awsworld_env.advance(timedelta(hours=2))
    assert after - before >= timedelta(hours=2)
    await awsworld_env.idle()
    for _ in range(100):
        if await run.status() == "completed":
            break
        await asyncio.sleep(0.01)
    assert await run.status() == "completed"
    with pytest.raises(ValueError):
        awsworld_env.advance(-1)


async def test_without_time_skipping_a_sleep_takes_real_time() -> None:
    @workflow(name="tests.testing.short_nap")
    async def short_nap() -> str:
        await sleep(0.3)
        return "ok"

    async with WorkflowTestEnv(time_skipping=False) as env:
        began = time.monotonic()
        run = await env.client.start(short_nap)
        assert await run.result(timeout=10) == "ok"
        assert time.monotonic() - began >= 0.3


@step(max_retries=0)
async def always_fails() -> None:
    raise RuntimeError("broken for good")


@workflow
async def doomed() -> None:
    await always_fails()


async def test_a_failed_run_raises_its_error(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(doomed)
    with pytest.raises(WorkflowRunFailedError, match="broken for good"):
        await run.result()


async def test_a_failed_runs_error_prints_where_the_runs_code_raised(awsworld_env: WorkflowTestEnv) -> None:
    """What pytest reports for an unexpected failure (and ``traceback`` prints) shows the lines of the step and of the
    workflow body that raised, from the tracebacks the run stored, and not only the client's frames."""
    run = await awsworld_env.client.start(doomed)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result()
    printed = "".join(traceback.format_exception(failed.value))
    step_line = 'raise RuntimeError("broken for good")'
    body_line = "await always_fails()"
    assert step_line in printed and body_line in printed, printed
    assert printed.index(step_line) < printed.index(body_line) < printed.index("WorkflowRunFailedError: run ")
    assert f"the traceback of step {always_fails.__module__}.always_fails (attempt 1)" in printed
    assert "The above exception was the direct cause of the following exception" in printed


@step
async def step_time() -> str:
    from awsworld import now

    return now().isoformat()


@workflow
async def later_in_a_step() -> str:
    await sleep(timedelta(days=2))
    return await step_time()


async def test_a_step_sees_the_environments_time(awsworld_env: WorkflowTestEnv) -> None:
    from datetime import datetime

    start = awsworld_env.now()
    run = await awsworld_env.client.start(later_in_a_step)
    seen = datetime.fromisoformat(await run.result())
    assert seen - start >= timedelta(days=2), "awsworld.now() in a step follows the World's clock"


async def test_env_durations_take_strings(awsworld_env: WorkflowTestEnv) -> None:
    start = awsworld_env.now()
    await awsworld_env.sleep("1h")
    awsworld_env.advance("1d")
    assert awsworld_env.now() - start >= timedelta(days=1, hours=1)
    with pytest.raises(ValueError):
        awsworld_env.advance("-1s")


@step
async def log_line(text: str, last: bool) -> None:

    out = get_writable("log")
    await out.write(text)
    if last:
        await out.close()


@workflow
async def log_across_a_day() -> None:
    await log_line("before", False)
    await sleep(timedelta(days=1))
    await log_line("after", True)


@workflow
async def log_around_a_hook() -> None:
    await log_line("before", False)
    async with create_hook(token="walk:go") as hook:
        await hook
    await log_line("after", True)


async def test_reading_a_stream_skips_time_as_awaiting_the_result_does() -> None:
    """A reader waiting for a chunk written after a sleep waits for the run: time skips (it used to wait for ever, the
    environment's clock at wall pace), and a run nothing can move raises RunStalledError instead of hanging."""
    async with WorkflowTestEnv(stall_timeout=0.2) as env, asyncio.timeout(10):
        start = env.now()
        run = await env.client.start(log_across_a_day)
        assert [chunk async for chunk in run.stream("log")] == [b"before", b"after"]
        assert env.now() - start >= timedelta(days=1)

        held = await env.client.start(log_around_a_hook)
        read: list[bytes] = []
        with pytest.raises(RunStalledError, match="It waits on: hook walk:go"):
            async for chunk in held.stream("log"):
                read.append(chunk)
        assert read == [b"before"]
        async for chunk in held.stream("log"):  # the test acts between two chunks: no skip, no stall meanwhile
            if chunk == b"before":
                await asyncio.sleep(0.4)  # longer than stall_timeout
                await env.client.resume_hook("walk:go", "go")
            read.append(chunk)
        assert read == [b"before", b"before", b"after"]


async def test_a_stream_name_no_step_writes_is_refused_when_the_run_ends_naming_the_runs_streams() -> None:
    """``run.stream("typo")`` waited until the run ended, then read as an empty stream: nothing said the name was
    wrong, and ``Run`` had no listing of the run's streams. It now raises ``StreamNotFoundError`` naming them once
    the run has ended (at once on an ended run), and ``run.streams()`` lists them; a stream that was written reads
    as before, to its end, with nothing raised, and one closed with no chunk reads empty."""
    from awsworld.world import StreamNotFoundError

    async with WorkflowTestEnv() as env, asyncio.timeout(10):
        run = await env.client.start(log_across_a_day)
        with pytest.raises(StreamNotFoundError) as refused:
            async for _ in run.stream("lgo"):
                pass
        assert str(refused.value) == f"run {run.run_id} ended with no stream 'lgo' (its streams: 'log')"
        assert (refused.value.run_id, refused.value.stream, refused.value.names) == (run.run_id, "lgo", ["log"])
        assert await run.streams() == ["log"]
        assert [chunk async for chunk in run.stream("log")] == [b"before", b"after"]
        assert [chunk async for chunk in run.stream("log", start_index=2)] == []  # past the tail: not a typo
        with pytest.raises(StreamNotFoundError, match="ended with no stream 'lgo'"):  # an ended run: at once
            async for _ in run.stream("lgo"):
                pass
        assert await (await env.client.start(count_to, 1)).streams() == []


async def test_a_timed_out_wait_says_how_far_the_runs_due_is_on_the_environments_clock() -> None:
    """The timeout's "it waits on: a sleep until ... (in 59 min ...)" counts from the environment's time, not the
    wall clock's: on a clock that started in 2020 (or skipped days ahead) it said "6 y ago" (or "in 12 d 20 h")."""
    from datetime import UTC, datetime

    async with WorkflowTestEnv(time_skipping=False, start_time=datetime(2020, 1, 1, tzinfo=UTC)) as env:
        run = await env.client.start(hour_nap)
        due = r"it waits on: a sleep until 01:00:00\.\d+ UTC \(in (1 h|59 min \d+ s)\)$"
        with pytest.raises(TimeoutError, match=due):
            await run.result(timeout=0.2)


@workflow
async def sign_within_an_hour(doc: str) -> str:
    await sleep(timedelta(days=1))
    async with create_hook(token=f"sign:{doc}", timeout="1h") as hook:
        try:
            return str(await hook)
        except HookTimeoutError:
            return "timed out"


async def test_a_result_left_pending_does_not_skip_past_the_hook_the_test_is_resuming(
        awsworld_env: WorkflowTestEnv) -> None:
    """A ``run.result()`` the test awaits later (a task) lets time skip, but not while another wait of the test has
    just ended (the run holds the hook it waited for) and the test is about to act on it: the hook's timeout used to
    fall due first in about 4 tries of 5, each way."""
    client = awsworld_env.client
    for n in range(10):
        run = await client.start(sign_within_an_hour, f"r{n}")
        result = asyncio.create_task(run.result())
        await client.resume_hook(f"sign:r{n}", "signed", wait=10)
        assert await result == "signed"

        run = await client.start(sign_within_an_hour, f"w{n}")
        result = asyncio.create_task(run.result())
        await run.wait_for_hook(f"sign:w{n}")
        await client.resume_hook(f"sign:w{n}", "signed")
        assert await result == "signed"


@workflow
async def hourly_for_ever() -> None:
    while True:
        await sleep(timedelta(hours=1))


async def test_a_wait_timing_out_on_a_run_that_never_ends_says_how_far_time_skipped(
        awsworld_env: WorkflowTestEnv) -> None:
    """A run that keeps sleeping never ends however far time skips: its wait's TimeoutError says so (a note), where
    it said only the real seconds waited and the next sleep."""
    run = await awsworld_env.client.start(hourly_for_ever)
    with pytest.raises(TimeoutError, match=r"is still running after 0\.3 s") as timed_out:
        await run.result(timeout=0.3)
    [note] = timed_out.value.__notes__
    assert "While the test waited, this environment's clock skipped " in note
    assert "the run keeps scheduling work (a loop of sleeps or retries?) and never ends" in note


HANGING: dict[str, asyncio.Event] = {}
HANG_ENDS: list[str] = []


@step
async def hangs(key: str) -> None:
    """A fake that never answers: its body awaits what never comes, in real time."""
    HANGING[key].set()
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        HANG_ENDS.append(key)
        raise


@workflow(name="env.hangs")
async def hanging(key: str) -> None:
    await hangs(key)


async def test_closing_cancels_a_hung_steps_delivery_at_once() -> None:
    """A test that ends (failed, say) while a step's body hangs: closing the environment cancels that delivery at
    once, where it waited 5 s (``SHUTDOWN_GRACE_SECONDS``) for it to end first, at every such test's teardown."""
    HANGING["close"] = asyncio.Event()
    async with WorkflowTestEnv() as env:
        await env.client.start(hanging, "close")
        await asyncio.wait_for(HANGING["close"].wait(), 10)
        closing = time.monotonic()
    assert HANG_ENDS == ["close"]  # the body was cancelled, not left pending on the loop
    assert time.monotonic() - closing < 2.5, time.monotonic() - closing


@workflow(name="testing.env.approve_later")
async def approve_later(order: str) -> str:
    async with create_hook(token=f"approve:{order}", timeout="1h") as hook:
        return str(await hook)


async def test_waiting_for_a_token_the_run_never_made_names_the_hooks_it_did_make() -> None:
    """A test waiting for a hook under a token the run never made (a typo, another key) learns, when the run ends
    first, which tokens it did make: it said only the token waited for."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(approve_later, "A-1")
        with pytest.raises(RunEndedError) as ended:
            await run.wait_for_hook("approval:A-1", timeout=5)  # the hook times out after an hour of skipped time
    assert str(ended.value).endswith("before it held hook 'approval:A-1' (the hooks it created: 'approve:A-1')")


@workflow(name="testing.env.approve_whenever")
async def approve_whenever(order: str) -> str:
    async with create_hook(token=f"approve:{order}") as hook:
        return str(await hook)


async def test_a_wait_for_a_token_the_run_never_made_that_times_out_names_the_hooks_it_did_make() -> None:
    """The same when the run goes on waiting and the wait times out: its message said only the token waited for
    and what the run waits on now (an open hook's token, not one it created and disposed)."""
    async with WorkflowTestEnv() as env:
        run = await env.client.start(approve_whenever, "A-1")
        with pytest.raises(TimeoutError) as timed_out:
            await run.wait_for_hook("approval:A-1", timeout=1)
    assert "did not hold hook 'approval:A-1' within 1 s (the hooks it created: 'approve:A-1'); it waits on: " \
        in str(timed_out.value), str(timed_out.value)


async def test_an_environment_used_without_async_with_says_so_instead_of_waiting_for_ever() -> None:
    """``env = WorkflowTestEnv()`` without ``async with`` (or used after its block): the start was recorded, no
    delivery ever ran it, and ``await run.result()`` hung the test (with a timeout, a bare ``TimeoutError``). The wait
    now says what is missing, at once."""
    env = WorkflowTestEnv()
    run = await env.client.start(count_to, 1)
    with pytest.raises(RuntimeError, match=r"^this WorkflowTestEnv is not started, .*`async with WorkflowTestEnv\(\) "
                       "as env:`"):
        await asyncio.wait_for(run.result(), 2)
    async with env:
        assert await run.result() == 1, "the run recorded before is run once the environment starts"
    again = await env.client.start(count_to, 2)
    with pytest.raises(RuntimeError, match=r"^this WorkflowTestEnv is closed \(its `async with` block has ended"):
        await asyncio.wait_for(again.result(), 2)


@dataclasses.dataclass
class Quote:
    sku: str
    price: Decimal
    at: datetime


class SkuCodec:
    """A result codec (its text is the sku alone) and an arguments codec: what ``decoded=True`` must go through."""

    def encode(self, value: Any, place: Place, /) -> str:
        return json.dumps(list(value)) if isinstance(value, tuple) else f"sku:{value}"

    def decode(self, data: str | bytes, place: Place, /) -> Any:
        text = data if isinstance(data, str) else data.decode()
        return tuple(json.loads(text)) if text.startswith("[") else text.removeprefix("sku:")


@step(name="env.quote")
async def quote(sku: str, at: datetime) -> Quote:
    return Quote(sku, Decimal("9.50"), at)


@step(name="env.pick", codec=SkuCodec(), args_codec=SkuCodec())
async def pick(sku: str) -> str:
    return sku.upper()


@workflow(name="env.quoting")
async def quoting(sku: str) -> Quote:
    return await quote(await pick(sku), datetime(2026, 3, 1, tzinfo=UTC))


async def test_steps_decoded_gives_the_values_a_step_was_called_with_and_returned() -> None:
    """A test asserting on a step's result got the log's JSON (``{"$t": "dataclass", ...}``) for any value but JSON's
    own types, with no way to read it back: ``steps(decoded=True)`` reads it as the workflow did, codecs included."""
    at = datetime(2026, 3, 1, tzinfo=UTC)
    async with WorkflowTestEnv() as env:
        run = await env.client.start(quoting, "ab-1")
        assert await run.result() == Quote("AB-1", Decimal("9.50"), at)
        picked, quoted = await run.steps(decoded=True)
        assert (picked.input, picked.output) == ({"args": ["ab-1"], "kwargs": {}}, "AB-1")
        assert quoted.input == {"args": ["AB-1", at], "kwargs": {}}
        assert quoted.output == Quote("AB-1", Decimal("9.50"), at)
        raw = await run.steps()  # as stored: what any process reads, without the classes
        assert raw[1].output["$t"] == "dataclass" and raw[0].output != "AB-1"


@step(name="env.attempted")
async def attempted() -> int:
    return step_metadata().attempt


@workflow(name="env.napping")
async def napping() -> str:
    await sleep(timedelta(days=1))
    return "rested"


async def test_a_step_or_workflow_called_directly_says_to_start_the_workflow_instead() -> None:
    """A unit test calling a step or workflow as a plain function (the docs say it is one) met a bare refusal of the
    step's ``step_metadata()`` or the workflow's ``sleep``; it now says what to do. Inside a run, a call out of place
    keeps the bare refusal (the hint would mislead there)."""
    hint = r"called outside any run .* awsworld_env\.client\.start\(workflow"
    with pytest.raises(RuntimeError, match=r"step_metadata\(\) can only be used inside a @step .*" + hint):
        await attempted()
    with pytest.raises(RuntimeError, match=r"awsworld\.sleep\(\) can only be used inside a @workflow.*" + hint):
        await napping()
    async with WorkflowTestEnv() as env:
        assert await (await env.client.start(napping)).result() == "rested"
        failed = await env.client.start(sleeps_in_a_step)
        with pytest.raises(WorkflowRunFailedError, match=r"awsworld\.sleep\(\) can only be used inside a @workflow$"):
            await failed.result()


@step(name="env.sleeper", max_retries=0)
async def sleeper() -> None:
    await sleep(1)


@workflow(name="env.sleeps_in_a_step")
async def sleeps_in_a_step() -> None:
    await sleeper()


async def test_a_workflow_name_no_module_registered_says_to_import_it_in_the_test() -> None:
    """A test starting a workflow by a name whose module it never imported was told to set ``AWSWORLD_MODULES`` or
    run ``awsworld dev``, neither of which a test does."""
    async with WorkflowTestEnv() as env:
        with pytest.raises(WorkflowNotRegisteredError, match=r"'env\.elsewhere' is registered in this process .*"
                                                             r"import the module that defines it \(a test: in the "
                                                             r"test module; a deployment or dev: AWSWORLD_MODULES"):
            await env.client.start("env.elsewhere")


_held = asyncio.Event()


@step(name="testenv.held")
async def held_step() -> None:
    await _held.wait()  # a step that does not return until the test lets it


@workflow(name="testenv.holds")
async def holds() -> None:
    await held_step()


async def test_idle_that_times_out_says_what_is_still_going(awsworld_env: WorkflowTestEnv) -> None:
    """It was a bare ``TimeoutError`` (a simulated day of a 1-minute schedule ran into it with nothing said)."""
    _held.clear()
    await awsworld_env.client.start(holds)
    try:
        with pytest.raises(TimeoutError) as timed_out:
            await awsworld_env.idle(timeout=0.3)
        assert str(timed_out.value).startswith(
            "the test environment was still busy after 0.3 s of real time (deliveries running: 1, messages "
            "waiting for one: 0, its clock at "), timed_out.value
    finally:
        _held.set()
