"""Deterministic workflow bodies: time, random and uuid4 are replay-stable inside a workflow body, datetime.now and
the other sources that cannot be made stable are refused with a clear error, and steps (and every other task or
thread of the process) still get the real functions. Importing awsworld, or running a workflow, leaves ``time``,
``uuid``, ``random`` and ``asyncio`` as they were: the replacements are in place only while workflow code runs."""

from __future__ import annotations

import asyncio
import email.utils
import importlib
import logging
import os
import random
import secrets
import subprocess
import sys
import threading
import time
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

import awsworld
from awsworld import DeterminismError, WorkflowRunFailedError, step, workflow
from awsworld._engine import determinism
from awsworld._engine.replay_loop import ReplayLoop
from awsworld.client.replay import read_run, replay_events

from .conftest import BOTH, on_backends

e2e_backend = on_backends(BOTH)


def _start_a_thread() -> str:
    thread = threading.Thread(target=lambda: None)
    thread.start()
    thread.join()
    return "ran"


@step
async def real_values() -> dict[str, Any]:
    # Every call a workflow body is refused works in a step, whose body runs once per attempt and is recorded.
    return {"time": time.time(), "uuid": str(uuid.uuid4()), "random": random.random(),
            "datetime.now": datetime.now(UTC).timestamp(), "localtime": time.mktime(time.localtime()),
            "unseeded": random.Random().random(), "urandom": os.urandom(2).hex(), "thread": _start_a_thread()}


BOUND_RANDINT = random.randint  # module functions bound by name: Python code over the generator's primitives
CHOICE = random.choice


def _body_values() -> dict[str, Any]:
    return {
        "bound_randint": BOUND_RANDINT(1, 10**9), "bound_choice": CHOICE("abcdefgh"),
        "time": time.time(), "time_ns": time.time_ns(), "now": awsworld.now().timestamp(),
        "awsworld_time_ns": awsworld.time_ns(), "random": random.random(), "randint": random.randint(1, 10**9),
        "choice": random.choice("abcdefgh"), "shuffled": random.sample(range(10), 10),
        "uuid4": str(uuid.uuid4()), "awsworld_uuid4": str(awsworld.uuid4()), "awsworld_random": awsworld.random(),
    }


@workflow
async def stable_body() -> dict[str, Any]:
    before = _body_values()
    in_step = await real_values()
    return {"before": before, "step": in_step, "after": _body_values()}


async def test_time_random_and_uuid4_are_replay_stable_in_a_body_and_real_in_steps(e2e) -> None:
    started = time.time()
    run = await e2e.start(stable_body)
    result = await run.result(timeout=30)
    before, after, in_step = result["before"], result["after"], result["step"]
    assert before["time"] == before["now"] and before["time_ns"] == before["awsworld_time_ns"]
    assert abs(before["time_ns"] / 1e9 - before["time"]) < 1e-6
    assert after["time"] > before["time"], "time moves with the log (the step's events)"
    assert before["uuid4"] != after["uuid4"] and uuid.UUID(before["uuid4"]).version == 4
    assert abs(in_step["time"] - time.time()) < 30 and in_step["time"] >= started - 1
    assert abs(in_step["datetime.now"] - in_step["time"]) < 30 and abs(in_step["localtime"] - in_step["time"]) < 30
    assert in_step["thread"] == "ran" and len(in_step["urandom"]) == 4
    events = await read_run(e2e.world, run.run_id)
    for _ in range(3):  # every replay computes the same values (the replayer compares the result)
        replayed = replay_events(events)
        assert replayed.ok, replayed.describe()


REFUSED: dict[str, Any] = {
    "datetime.now": lambda: datetime.now(UTC),
    "datetime.utcnow": datetime.utcnow,
    "datetime.today": datetime.today,
    "date.today": date.today,
    "uuid.uuid1": uuid.uuid1,
    "os.urandom": lambda: os.urandom(4),
    "secrets": lambda: secrets.token_hex(4),
    "SystemRandom": lambda: random.SystemRandom().random(),
    "random.seed()": random.seed,
    "time.time bound early": determinism._ORIGINAL_TIME,
    "uuid4 bound early": determinism._ORIGINAL_UUID4,
    "random bound early": determinism._GLOBAL_RANDOM.random,
    "gauss bound by name": determinism._GLOBAL_RANDOM.gauss,  # its cache would be the process's, not the run's
    "getstate bound by name": determinism._GLOBAL_RANDOM.getstate,
    "seed(1) bound by name": lambda: determinism._GLOBAL_RANDOM.seed(1),
    "random.Random()": lambda: random.Random().random(),
    "time.sleep": lambda: time.sleep(0.001),
    "time.localtime()": time.localtime,
    "time.gmtime()": lambda: time.gmtime(),
    "time.ctime()": lambda: time.ctime(),
    "time.asctime()": lambda: time.asctime(),
    "time.strftime(format)": lambda: time.strftime("%H:%M"),
    "threading.Thread": _start_a_thread,
}
CLOCK_GIVEN = {  # the same functions given a time (the run's, time.time() being replay-stable), or a seed: allowed
    "time.localtime(t)": lambda: time.mktime(time.localtime(time.time())),
    "time.gmtime(t)": lambda: time.gmtime(time.time()).tm_year,
    "time.ctime(t)": lambda: time.ctime(time.time()),
    "time.strftime(format, t)": lambda: time.strftime("%Y", time.gmtime(time.time())),
    "random.Random(seed)": lambda: random.Random(7).random(),
}


@workflow
async def gives_the_clock_a_time() -> dict[str, Any]:
    return {name: call() for name, call in CLOCK_GIVEN.items()} | {"time": time.time()}


@workflow
async def tries_refused_calls() -> dict[str, str]:
    outcomes = {}
    for name, call in REFUSED.items():
        try:
            call()
            outcomes[name] = "allowed"
        except DeterminismError as refused:  # (no await between them: a caught refusal leaves the guard on)
            outcomes[name] = str(refused)
    coroutines = [real_values() for _ in range(3)]
    try:
        for done in determinism._ORIGINAL_AS_COMPLETED(coroutines):  # as_completed bound before awsworld
            await done
        outcomes["as_completed bound early"] = "allowed"
    except DeterminismError as refused:
        outcomes["as_completed bound early"] = str(refused)
    for coroutine in coroutines:
        coroutine.close()
    return outcomes


async def test_calls_that_cannot_be_replay_stable_are_refused_in_a_body(e2e) -> None:
    outcomes = await e2e.run(tries_refused_calls)
    assert set(outcomes) == {*REFUSED, "as_completed bound early"}
    for name, outcome in outcomes.items():
        assert outcome != "allowed", f"{name} was allowed in a workflow body"
    assert all(o.startswith("not allowed in a workflow body") for n, o in outcomes.items()
               if n != "as_completed bound early"), outcomes
    assert "use awsworld.now()" in outcomes["datetime.now"]
    assert "time.localtime() without a time reads the process's clock" in outcomes["time.localtime()"]
    assert "time.localtime(time.time())" in outcomes["time.localtime()"]
    assert "time.strftime(format) without a time" in outcomes["time.strftime(format)"]
    assert "use await awsworld.sleep(...)" in outcomes["time.sleep"]
    assert "random.Random() without a seed" in outcomes["random.Random()"]
    assert "cannot run threads (threading.Thread.start)" in outcomes["threading.Thread"]
    assert "as_completed([asyncio.create_task(c) for c in coroutines])" in outcomes["as_completed bound early"]
    assert datetime.now(UTC).year >= 2024 and len(os.urandom(4)) == 4, "outside a workflow the originals answer"


async def test_the_clock_functions_given_a_time_and_a_seeded_generator_are_allowed_and_replay_stable(e2e) -> None:
    run = await e2e.start(gives_the_clock_a_time)
    values = await run.result(timeout=30)
    assert values["time.localtime(t)"] == int(values["time"]), "the time the body passed, not the process's clock"
    assert values["random.Random(seed)"] == random.Random(7).random()
    events = await read_run(e2e.world, run.run_id)
    replayed = replay_events(events)
    assert replayed.ok, replayed.describe()


async def _get_with_httpx(timeout: float) -> int:
    async with httpx.AsyncClient(timeout=timeout) as client:
        return (await client.get("http://127.0.0.1:9/")).status_code


@workflow
async def does_io() -> dict[str, str]:
    outcomes = {}
    for name, io in {
        "asyncio.open_connection": lambda: asyncio.open_connection("127.0.0.1", 9),
        "asyncio.create_subprocess_exec": lambda: asyncio.create_subprocess_exec("true"),
        "loop.getaddrinfo": lambda: asyncio.get_running_loop().getaddrinfo("localhost", 80),
        "httpx": lambda: _get_with_httpx(timeout=5),  # (its default timeout)
    }.items():
        try:
            await io()
            outcomes[name] = "allowed"
        except DeterminismError as refused:
            outcomes[name] = str(refused)
    return outcomes


async def test_asyncio_io_in_a_body_is_refused_with_the_call_and_the_fix(e2e) -> None:
    # (the abstract event loop's bare NotImplementedError, without a message, was what httpx or aiohttp raised)
    outcomes = await e2e.run(does_io)
    assert "the event loop's create_connection()" in outcomes["asyncio.open_connection"], outcomes
    assert "the event loop's subprocess_exec()" in outcomes["asyncio.create_subprocess_exec"], outcomes
    assert "the event loop's getaddrinfo()" in outcomes["loop.getaddrinfo"], outcomes
    assert "an async client's own timeouts" in outcomes["httpx"], "its connect timeout is a timer, set first"
    assert all("put I/O in a @step" in outcome or "put the I/O in a @step" in outcome
               for outcome in outcomes.values()), outcomes


class StampsLikeLoguru(logging.Handler):
    """A handler that reads the clock itself, as loguru's and structlog's do (``datetime.now()``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, float, str]] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append((record.created, datetime.now(UTC).timestamp(), record.getMessage()))


LOG = logging.getLogger("tests.determinism.body")


@workflow
async def logs_from_the_body() -> float:
    LOG.warning("in the body")
    return time.time()


async def test_a_log_line_from_a_body_is_stamped_with_the_real_time_and_its_handler_may_read_the_clock() -> None:
    from awsworld.testing import WorkflowTestEnv

    handler = StampsLikeLoguru()
    LOG.addHandler(handler)
    try:
        async with WorkflowTestEnv(start_time=datetime(2001, 1, 1, tzinfo=UTC)) as env:
            in_body = await (await env.client.start(logs_from_the_body)).result()
    finally:
        LOG.removeHandler(handler)
    assert datetime.fromtimestamp(in_body, UTC).year == 2001, "the body's own time.time() is still the run's"
    [(created, stamped, message)] = handler.lines
    assert message == "in the body"
    assert abs(created - time.time()) < 60, "the record says when it was written, not the run's time"
    assert abs(stamped - time.time()) < 60


IMPORTED_BY_A_BODY = """
import os, random, time
from datetime import UTC, datetime

STAMP = time.localtime()  # as botocore's import does
NONCE = os.urandom(4)  # as boto3's
RNG = random.Random()  # as aiohttp's
STARTED = datetime.now(UTC)


def reads_the_clock() -> datetime:
    return datetime.now(UTC)
"""


@workflow
async def imports_a_module_then_calls_it(module: str) -> str:
    imported = importlib.import_module(module)  # (``import boto3`` in a body, or in a function the body calls)
    try:
        imported.reads_the_clock()
    except DeterminismError:
        return "refused"
    return "allowed"


async def test_a_module_a_body_imports_runs_its_code_unrefused_and_its_functions_are_guarded(
        tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # boto3's import (os.urandom, time.localtime) and aiohttp's (random.Random()) in a body failed the run with a
    # refusal of a call its author never wrote; a module's code runs once per process, not at each replay.
    from awsworld.testing import WorkflowTestEnv

    (tmp_path / "imported_by_a_body.py").write_text(IMPORTED_BY_A_BODY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "imported_by_a_body", raising=False)
    async with WorkflowTestEnv() as env:
        run = await env.client.start(imports_a_module_then_calls_it, "imported_by_a_body")
        assert await run.result(timeout=10) == "refused", "the module's functions, called by the body, are guarded"
    monkeypatch.delitem(sys.modules, "imported_by_a_body")


@workflow
async def catches_refusals_broadly() -> list[str]:
    outcomes = []
    for call in (lambda: datetime.now(UTC), lambda: datetime.now(UTC), uuid.uuid1, _start_a_thread, time.localtime):
        try:
            call()
            outcomes.append("allowed")
        except Exception as refused:  # (what user code around a block does)
            outcomes.append(type(refused).__name__)
    return outcomes


async def test_a_caught_refusal_leaves_the_guard_on_until_the_next_await(e2e) -> None:
    # The interpreter removes a profile hook that raised: the second datetime.now() was allowed.
    assert await e2e.run(catches_refusals_broadly) == ["DeterminismError"] * 5


async def test_a_caught_refusal_leaves_a_tracer_of_your_own_in_place() -> None:
    # Re-arming sets a trace function for a moment; under a debugger's or coverage's it is not done, and theirs stays.
    from awsworld.testing import WorkflowTestEnv

    traced: list[str] = []

    def tracer(frame: Any, event: str, arg: object) -> None:
        traced.append(frame.f_code.co_name)

    async with WorkflowTestEnv() as env:
        run = await env.client.start(catches_refusals_broadly)
        sys.settrace(tracer)
        try:
            outcomes = await run.result()
            kept = sys.gettrace()
        finally:
            sys.settrace(None)
    assert kept is tracer
    assert outcomes[0] == "DeterminismError" and "catches_refusals_broadly" in traced


@step
async def quick() -> int:
    return 1


@workflow
async def catches_a_refused_wait_for() -> str:
    try:
        return str(await asyncio.wait_for(quick(), 5))
    except DeterminismError:
        return "caught"


async def test_a_caught_refused_wait_for_fails_the_run_with_the_refusal_not_a_missing_await(e2e) -> None:
    run = await e2e.start(catches_a_refused_wait_for)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert failed.value.error_type == "DeterminismError", str(failed.value)  # was CallNotAwaitedError, "write await"
    assert "bound a step's time with @step(timeout=...)" in str(failed.value)
    assert "caught by the workflow" in str(failed.value) and "never ran" in str(failed.value)


@workflow
async def gets_with_httpx_without_a_timeout() -> int:
    async with httpx.AsyncClient(timeout=None) as client:
        return (await client.get("http://127.0.0.1:9/")).status_code


@workflow
async def reads_the_clock_in_a_task_group() -> None:
    async with asyncio.TaskGroup() as group:
        group.create_task(reads_the_clock_in_a_task())


async def reads_the_clock_in_a_task() -> str:
    return datetime.now(UTC).isoformat()


@pytest.mark.parametrize("body", [gets_with_httpx_without_a_timeout, reads_the_clock_in_a_task_group])
async def test_a_refusal_under_anyio_or_in_a_task_group_fails_the_run_with_what_to_do(e2e, body) -> None:
    # httpx to an IP address without a timeout ended in anyio's "Attempted to exit a cancel scope that isn't the
    # current tasks's current cancel scope"; a refusal in a task group's task, in "unhandled errors in a TaskGroup"
    run = await e2e.start(body)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert failed.value.error_type == "DeterminismError", str(failed.value)
    assert ("anyio.connect_tcp(), as httpx connects" if body is gets_with_httpx_without_a_timeout
            else "datetime.now()") in str(failed.value)


@workflow
async def reads_the_clock() -> str:
    return datetime.now(UTC).isoformat()


async def test_an_uncaught_refusal_fails_the_run_with_the_reason(e2e) -> None:
    run = await e2e.start(reads_the_clock)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert failed.value.error_type == "DeterminismError"
    # which workflow (its message said only the run id) and where: the body's line, in the stored traceback chained
    assert str(failed.value) == (f"run {run.run_id} (runtime.test_determinism.reads_the_clock) failed: not allowed in "
                                 "a workflow body: datetime.now() differs on every replay: use awsworld.now()")
    assert failed.value.workflow_name == "runtime.test_determinism.reads_the_clock"
    assert "in reads_the_clock\n    return datetime.now(UTC).isoformat()" in str(failed.value.__cause__)


@workflow
async def stamps_a_mail() -> str:
    return email.utils.localtime().isoformat()  # (the standard library reads datetime.now() for it)


STAMPS_LINE = Path(__file__).read_text().splitlines().index(
    "    return email.utils.localtime().isoformat()  # (the standard library reads datetime.now() for it)") + 1


async def test_a_librarys_refused_call_names_the_library_and_your_line(e2e) -> None:
    # boto3 in a body (its request signing reads datetime.now()) failed the run with "use awsworld.now()" alone,
    # to an author who had written s3.list_buckets(); the docs said boto3 was not intercepted at all
    run = await e2e.start(stamps_a_mail)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    said = str(failed.value)
    assert said.startswith(f"run {run.run_id} (runtime.test_determinism.stamps_a_mail) failed: not allowed in a "
                           "workflow body: datetime.now() differs on every replay: use awsworld.now(); the call is "
                           "email's (email.utils, line "), said
    assert said.endswith(f", in localtime), made for your code at {__file__}, line {STAMPS_LINE}, in "
                         "stamps_a_mail: call the library from a @step, whose result the log records"), said


@step
async def double(i: int) -> int:
    return 2 * i


@workflow
async def fans_out_from_a_set(items: list[int]) -> list[int]:
    tasks = {asyncio.create_task(double(i)) for i in items}  # a set of tasks: iterated in creation order
    done, _ = await asyncio.wait(tasks)
    return [t.result() for t in done]


async def test_sets_of_tasks_iterate_in_a_replay_stable_order(e2e) -> None:
    run = await e2e.start(fans_out_from_a_set, list(range(12)))
    assert sorted(await run.result(timeout=30)) == [2 * i for i in range(12)]
    events = await read_run(e2e.world, run.run_id)
    for _ in range(3):
        replayed = replay_events(events)
        assert replayed.ok, replayed.describe()


def test_replay_loop_tasks_hash_by_creation_number() -> None:
    loop = ReplayLoop()

    async def noop() -> None:
        return None

    tasks = [loop.create_task(noop()) for _ in range(5)]
    assert [hash(t) for t in tasks] == [1, 2, 3, 4, 5]
    assert list(set(tasks)) == tasks
    loop.run_until_idle()
    loop.close()


def test_outside_a_workflow_the_patched_functions_are_the_real_ones() -> None:
    random.seed(7)
    first = [random.random() for _ in range(3)]
    random.seed(7)
    assert [random.random() for _ in range(3)] == first
    assert abs(time.time() - datetime.now(UTC).timestamp()) < 5
    assert uuid.uuid4() != uuid.uuid4()
    assert abs(awsworld.time_ns() / 1e9 - time.time()) < 5


def test_a_c_profiler_keeps_running_through_the_guard() -> None:
    """cProfile's hook is not a Python callable: the guard must leave it in place rather than fail to put it
    back (which raised TypeError inside every replay under the profiler)."""
    import cProfile
    import sys

    from awsworld._engine.determinism import ensure_guard, enter, leave

    profiler = cProfile.Profile()
    profiler.enable()
    try:
        hook = sys.getprofile()
        previous = enter()
        ensure_guard()
        leave(previous)
        assert sys.getprofile() is hook
    finally:
        profiler.disable()


SEEN_FROM_A_THREAD: list[tuple[bool, float, str]] = []
BODY_RUNS = threading.Event()
THREAD_LOOKED = threading.Event()


def _clock_from_another_thread() -> None:
    """A thread of the process (a step's worker thread, say) that calls the replaced functions while a body runs,
    and one of the refused ones: it gets the real answers."""
    BODY_RUNS.wait(30)
    try:
        SEEN_FROM_A_THREAD.append((time.time is not determinism._ORIGINAL_TIME, time.time(),
                                   datetime.now(UTC).isoformat()))
    finally:
        THREAD_LOOKED.set()


@workflow
async def a_thread_reads_the_clock_while_the_body_runs() -> float:
    # The body is running (the replacements are in place) and waits for the thread, which calls time.time()
    # meanwhile: it gets the replacement, which answers it with the real clock, not the run's.
    BODY_RUNS.set()
    THREAD_LOOKED.wait(30)
    return time.time()


async def test_another_thread_gets_the_real_clock_while_a_body_runs() -> None:
    from awsworld.testing import WorkflowTestEnv

    SEEN_FROM_A_THREAD.clear()
    BODY_RUNS.clear()
    THREAD_LOOKED.clear()
    thread = threading.Thread(target=_clock_from_another_thread)
    thread.start()
    try:
        async with WorkflowTestEnv(start_time=datetime(2001, 1, 1, tzinfo=UTC)) as env:
            run = await env.client.start(a_thread_reads_the_clock_while_the_body_runs)
            in_body = await run.result()
    finally:
        BODY_RUNS.set()
        thread.join(30)
    assert datetime.fromtimestamp(in_body, UTC).year == 2001, "the body's time is the run's (virtual) clock"
    replaced, seen, now = SEEN_FROM_A_THREAD[0]
    assert replaced, "the thread ran while the replacements were in place"
    assert abs(seen - datetime.now(UTC).timestamp()) < 60, "and got the real time"
    assert datetime.fromisoformat(now).year > 2001, "and datetime.now() is not refused there"
    assert time.time is determinism._ORIGINAL_TIME, "put back once the body stopped running"


STANDARD_LIBRARY_UNTOUCHED = """
import asyncio, asyncio.tasks, datetime, logging, random, sys, time, uuid

MODULES = (time, uuid, random, asyncio, asyncio.tasks, logging)


def snapshot():
    # (logging: its switches such as logAsyncioTasks, and the root logger's level and handlers, which a Lambda
    # host sets up for its own process only: lambda_host/observability.py)
    return {**{(module.__name__, name): value for module in MODULES for name, value in vars(module).items()},
            ("logging.root", "level"): logging.root.level,
            **{("logging.root", f"handler {i}"): handler for i, handler in enumerate(logging.root.handlers)}}


def changed(before):
    after = snapshot()
    return sorted(f"{module}.{name}" for (module, name), value in before.items()
                  if after.get((module, name)) is not value)


random.Random(b"seed")  # (3.13 imports random._sha512 at the first seed from bytes, as each run's generator is)
before = snapshot()
import awsworld
import awsworld.testing
from awsworld import step, workflow

assert not changed(before), changed(before)


@step
async def add(x: int) -> int:
    return x + 1


@workflow(name="untouched.flow")
async def flow() -> list:
    return [await add(1), time.time(), random.random(), str(uuid.uuid4())]


@workflow(name="untouched.refused")
async def refused() -> str:
    await add(1)
    return datetime.datetime.now().isoformat()


@workflow(name="untouched.cancelled")
async def cancelled() -> None:
    time.time()
    await awsworld.sleep("1d")


async def main():
    async with awsworld.testing.WorkflowTestEnv() as env:
        run = await env.client.start(flow)
        result = await run.result()
        try:
            await (await env.client.start(refused)).result()
            raise AssertionError("datetime.now() was allowed")
        except awsworld.WorkflowRunFailedError as failed:
            assert "DeterminismError" in repr(failed) or "datetime.now()" in str(failed), failed
        assert not changed(before) and sys.getprofile() is None, (changed(before), sys.getprofile())
        sleeping = await env.client.start(cancelled)
        await env.sleep("1h")
        await sleeping.cancel()
        assert (await sleeping.get()).status == "cancelled"
        return result


result = asyncio.run(main())
assert result[0] == 2, result
assert not changed(before), changed(before)
assert sys.getprofile() is None, sys.getprofile()
print("untouched")
"""


def test_importing_awsworld_and_running_a_workflow_leave_the_standard_library_as_it_is() -> None:
    # In a fresh process: every attribute of time, uuid, random, asyncio, asyncio.tasks and logging (and the root
    # logger's level and handlers) is the very object it was before ``import awsworld``, and still after a
    # workflow (whose body called time, random and uuid4) ran, after one failed on a refusal and after one was
    # cancelled; no profile hook is left either.
    done = subprocess.run([sys.executable, "-c", STANDARD_LIBRARY_UNTOUCHED], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "untouched", done.stdout + done.stderr
