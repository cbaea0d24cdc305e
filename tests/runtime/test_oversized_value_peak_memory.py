"""A value over ``AWSWORLD_MAX_VALUE_BYTES`` is refused before it costs many times its size in memory.

The walk report: a 500 MB step result peaked at 2.4-5.1 GB before its ``PayloadTooLargeError``; on Lambda (a few
GB) that is an out-of-memory kill, the step's message redelivered and its body run again and again, where the
user should see the typed error. A value was encoded to JSON text, then to UTF-8 bytes, and only then measured;
and a step's refused result was encoded again (to record the step's failure) while the first copies were still
held by the error's traceback: five times the value's size at the peak. Now a text that may be over the bound
is sized before its bytes are made, and let go before the raise (``world/limits.py``: ``encode_value``).

Each path a user value takes, on the in-memory World and on the AWS World (moto), with a bound of 1 MiB and a
text value of 64 MiB: the typed error (with its message), nothing stored, and the peak traced memory
(``tracemalloc``) from before the value is built until the refusal, as a multiple of the value's JSON size. A
value over the bound is sized a part at a time before it is copied (``limits.oversized``, ``json_size_over``),
so it costs itself and no copy; each assertion's comment says what it cost before (``bench/oversized_values.py``
measures the other kinds of value too).
"""

from __future__ import annotations

import asyncio
import gc
import os
import shutil
import subprocess
import sys
import tracemalloc
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import pytest

from awsworld import ChildWorkflowError, StepError, create_hook, get_writable, step, workflow
from awsworld.authoring.errors import ValueTooLargeError, WorkflowRunFailedError
from awsworld.aws import AWSWorld
from awsworld.cli.dev import environment
from awsworld.settings import Settings
from awsworld.world.errors import PayloadTooLargeError

from .conftest import BOTH, E2E, on_backends, with_env

BOUND = 1024 * 1024
SIZE = 64 * BOUND
"""Characters of the text each value is made of: its JSON is 2 bytes more (its quotes)."""
LIMIT = 1.5
"""The peak a text value over the bound may cost, as a multiple of its size: the value itself (1.0) and no copy.
Measured after the change: 1.00-1.01 on the in-memory World, 1.00-1.18 on moto (its server runs in the test's
process, and a request it answers meanwhile adds some 10 MB); before it, 2.0-5.0."""
PIECE = "y" * 1023
"""A list of these is a value with many nodes: sized a part at a time (``serde.json_parts``)."""
SENT: dict[str, int] = {}
"""step name -> how many times its body ran."""

e2e_backend = on_backends(BOTH)
local_env = with_env({Settings.max_value_bytes.env: str(BOUND)})


@step(name="oversized.result", max_retries=3)
async def oversized_result() -> str:
    SENT["result"] = SENT.get("result", 0) + 1
    return "x" * SIZE


@workflow(name="oversized.catches-result")
async def catches_result() -> str:
    try:
        await oversized_result()
    except StepError as error:
        return f"{error.error_type}: {error}"
    return "accepted"


@step(name="oversized.pieces", max_retries=3)
async def oversized_pieces() -> list[str]:
    SENT["pieces"] = SENT.get("pieces", 0) + 1
    return [PIECE] * (SIZE // len(PIECE))


@workflow(name="oversized.catches-pieces")
async def catches_pieces() -> str:
    try:
        await oversized_pieces()
    except StepError as error:
        return error.error_type
    return "accepted"


@workflow(name="oversized.catches-two-results")
async def catches_two_results() -> list[str]:
    """Two steps at once: one runs in the flow's delivery, the other is queued and runs in a step delivery."""
    outcomes = await asyncio.gather(oversized_result(), oversized_result(), return_exceptions=True)
    return [o.error_type if isinstance(o, StepError) else repr(o) for o in outcomes]


@workflow(name="oversized.fails-on-result")
async def fails_on_result() -> str:
    return await oversized_result()


@workflow(name="oversized.returns")
async def returns() -> str:
    return "x" * SIZE


@workflow(name="oversized.takes")
async def takes(value: str) -> int:
    return len(value)


@step(name="oversized.measure")
async def measure(value: str) -> int:
    SENT["measure"] = SENT.get("measure", 0) + 1
    return len(value)


@workflow(name="oversized.passes-to-a-step")
async def passes_to_a_step() -> str:
    try:
        await measure("x" * SIZE)
    except ValueTooLargeError as error:
        return str(error)
    return "accepted"


@workflow(name="oversized.passes-to-a-child")
async def passes_to_a_child() -> str:
    try:
        await takes("x" * SIZE)
    except ChildWorkflowError as error:
        return str(error)
    return "accepted"


@workflow(name="oversized.hooked")
async def hooked(token: str) -> Any:
    async with create_hook(token=token) as hook:
        return await hook


@step(name="oversized.chunk")
async def write_chunk() -> str:
    try:
        await get_writable("big").write("x" * SIZE)
    except PayloadTooLargeError as refused:
        return refused.message
    return "accepted"


@workflow(name="oversized.streams")
async def streams() -> str:
    return await write_chunk()


@pytest.fixture
def traced() -> Iterator[None]:
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start()
    try:
        yield
    finally:
        if started:
            tracemalloc.stop()


async def peak_multiple(e2e: E2E, send: Callable[[], Awaitable[Any]]) -> tuple[float, Any]:
    """The peak traced memory while ``send`` builds its value and sends it, over the value's JSON size, and
    what ``send`` returned. Measured from a World with no delivery in flight: an earlier test's run still
    replaying would be counted too."""
    await e2e.idle()
    gc.collect()
    base = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    answer = await send()
    return (tracemalloc.get_traced_memory()[1] - base) / (SIZE + 2), answer


def too_large_text(size: int) -> str:
    return f"{size} bytes of JSON; the largest value awsworld stores is {BOUND} bytes (AWSWORLD_MAX_VALUE_BYTES)"


async def value_objects(e2e: E2E) -> list[str]:
    """The S3 objects of values (none on the in-memory World)."""
    if not isinstance(e2e.world, AWSWorld):
        return []
    s3 = await e2e.world.clients.s3()
    listed = await s3.list_objects_v2(Bucket=e2e.world.config.bucket_name)
    return [o["Key"] for o in listed.get("Contents", []) if "/values/" in o["Key"]]


async def test_a_step_result_over_the_bound_fails_the_step_once_at_twice_its_size(e2e: E2E, traced: None) -> None:
    objects = await value_objects(e2e)
    SENT.pop("result", None)
    multiple, answer = await peak_multiple(e2e, lambda: e2e.run(catches_result))
    assert answer == ("ValueTooLargeError: step 'oversized.result' failed: ValueTooLargeError: the result of step "
                      "'oversized.result' (step_1) is "
                      f"too large to record: {too_large_text(SIZE + 2)}"), answer
    assert SENT["result"] == 1  # failed for good (retries allowed, none taken), never redelivered to run again
    assert await value_objects(e2e) == objects
    assert multiple < LIMIT, multiple  # 5.0 before: its text and bytes held while the failure was recorded


async def test_a_queued_step_with_a_result_over_the_bound_fails_once_too(e2e: E2E) -> None:
    SENT.pop("result", None)
    async with e2e.counting() as deliveries:
        assert await e2e.run(catches_two_results) == ["ValueTooLargeError", "ValueTooLargeError"]
    assert SENT["result"] == 2, SENT  # each body once: no delivery failed and came back to run it again
    assert deliveries.errors == [], deliveries.errors
    assert any(status.startswith("step") for status in deliveries.statuses), deliveries.statuses  # one queued


async def test_a_step_result_of_many_values_over_the_bound_is_refused_before_its_json_is_made(
        e2e: E2E, traced: None) -> None:
    """Too many nodes to size in one look: it is sized a part at a time before it is dumped
    (``limits.oversized``), so neither its copy nor its JSON text is made; the list holds one text many times,
    so it costs a small part of its JSON's size."""
    SENT.pop("pieces", None)
    multiple, answer = await peak_multiple(e2e, lambda: e2e.run(catches_pieces))
    assert answer == "ValueTooLargeError" and SENT["pieces"] == 1
    assert multiple < LIMIT, multiple  # 0.03 now (0.18 on moto); 2.0 from its text, 4.0-4.2 before that


async def test_a_run_failed_by_a_step_result_over_the_bound_says_why_in_describe(e2e: E2E) -> None:
    run = await e2e.start(fails_on_result)
    with pytest.raises(Exception, match="too large to record"):
        await run.result(timeout=60)
    if e2e.memory:
        return  # ``awsworld describe`` reads a deployed World: the emulator's
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS", "AWSWORLD"))}
    env.update(environment(e2e.world.config, "http://127.0.0.1:9"))
    command = shutil.which("awsworld", path=os.path.dirname(sys.executable))
    argv = [command] if command else [sys.executable, "-m", "awsworld.cli"]
    done = await asyncio.to_thread(subprocess.run, [*argv, "describe", run.run_id], env=env, capture_output=True,
                                   timeout=120)
    out = done.stdout.decode("utf-8", errors="replace")
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    assert "failed" in out and "the result of step 'oversized.result' (step_1) is too large to record" in out, out


async def test_a_workflow_input_over_the_bound_is_refused_by_start(e2e: E2E, traced: None) -> None:
    runs = len((await e2e.client.list_runs(limit=100)).data)

    async def send() -> PayloadTooLargeError:
        with pytest.raises(PayloadTooLargeError) as refused:
            await e2e.start(takes, "x" * SIZE)
        return refused.value

    multiple, refused = await peak_multiple(e2e, send)
    size = SIZE + 2 + len('{"args":[],"kwargs":{}}')
    assert str(refused) == ("the arguments of workflow 'oversized.takes' are too large to record: "
                            f"{too_large_text(size)}")
    assert len((await e2e.client.list_runs(limit=100)).data) == runs
    assert multiple < LIMIT, multiple  # 3.0 before: JSON's encoder joined the text's escaped copy into another


async def test_a_return_value_over_the_bound_fails_the_run(e2e: E2E, traced: None) -> None:
    async def send() -> WorkflowRunFailedError:
        run = await e2e.start(returns)
        with pytest.raises(WorkflowRunFailedError) as failed:
            await run.result(timeout=60)
        return failed.value

    multiple, failed = await peak_multiple(e2e, send)
    assert failed.code == "VALUE_TOO_LARGE", failed
    assert f"the workflow's return value is too large to record: {too_large_text(SIZE + 2)}" in str(failed), failed
    assert multiple < LIMIT, multiple  # 3.0 before: its text and bytes made before it was measured


async def test_a_hook_payload_over_the_bound_is_refused_and_the_run_waits_on(e2e: E2E, traced: None) -> None:
    token = f"oversized-{os.getpid()}-{e2e.backend}"
    run = await e2e.start(hooked, token)
    await e2e.hook_ready(token, run)

    async def send() -> PayloadTooLargeError:
        with pytest.raises(PayloadTooLargeError) as refused:
            await e2e.client.resume_hook(token, "x" * SIZE)
        return refused.value

    multiple, refused = await peak_multiple(e2e, send)
    assert str(refused) == f"the payload for hook {token!r} is too large to record: {too_large_text(SIZE + 2)}"
    assert await run.status() == "running"
    await e2e.client.resume_hook(token, "small")
    assert await run.result(timeout=60) == "small"
    assert multiple < LIMIT, multiple  # 3.0 before


async def test_a_stream_chunk_over_the_bound_is_refused_by_write(e2e: E2E, traced: None) -> None:
    multiple, answer = await peak_multiple(e2e, lambda: e2e.run(streams))
    assert answer == (f"a stream chunk is {SIZE} bytes; the largest is {BOUND - 4} (AWSWORLD_MAX_VALUE_BYTES less "
                      "its 4-byte frame)"), answer
    assert multiple < LIMIT, multiple  # 2.0 before: the text and its bytes


async def test_a_queue_payload_over_the_bound_is_refused_by_queue(e2e: E2E, traced: None) -> None:
    async def send() -> PayloadTooLargeError:
        with pytest.raises(PayloadTooLargeError) as refused:
            await e2e.world.queue("__wkf_workflow_oversized", "x" * SIZE)
        return refused.value

    multiple, refused = await peak_multiple(e2e, send)
    assert str(refused) == f"queue payload is {SIZE + 2} bytes; the largest is {BOUND}"
    assert multiple < LIMIT, multiple  # 3.0 in memory before, 5.0 on AWS (the message's body made twice)


async def test_a_step_input_over_the_bound_is_refused_at_the_call(e2e: E2E, traced: None) -> None:
    SENT.pop("measure", None)
    multiple, answer = await peak_multiple(e2e, lambda: e2e.run(passes_to_a_step))
    size = SIZE + 2 + len('{"args":[],"kwargs":{}}')
    assert answer == ("the input of step 'oversized.measure' (step_1) is too large to record: "
                      f"{too_large_text(size)}"), answer
    assert "measure" not in SENT
    assert multiple < LIMIT, multiple  # 1.00 now (1.17 on moto); 3.0-3.2 before: its JSON text and bytes


async def test_a_child_input_over_the_bound_is_refused_at_the_call(e2e: E2E, traced: None) -> None:
    multiple, answer = await peak_multiple(e2e, lambda: e2e.run(passes_to_a_child))
    size = SIZE + len('{"args":["oversized.takes",{"args":[""],"kwargs":{}},false],"kwargs":{}}')
    assert answer.endswith("(oversized.takes) could not be started: the input of step 'awsworld.start_child' "
                           f"(step_1) is too large to record: {too_large_text(size)}"), answer
    assert multiple < LIMIT, multiple  # 1.00 now (1.17 on moto); 3.0-3.2 before: its JSON text and bytes
