"""Client helpers end to end, on both backends (WorkflowTestEnv in memory, and LocalAWS on moto), and over HTTP
(``HttpClient`` on ``awsworld serve --world memory`` and ``--world emulator`` as processes, which run this module's
workflows):
``Run.wait_for_hook``, ``resume_hook(wait=...)`` and ``client.options(run_id=...).start(...)``. Their timeouts are
real seconds on both (time skips in memory only to the next due wait or retry, and these runs have none)."""

from __future__ import annotations

import time
import uuid

import pytest

from awsworld import RunEndedError, create_hook, step, workflow
from awsworld.world.entities import HookRecord
from awsworld.world.errors import HookNotFoundError

pytestmark = pytest.mark.parametrize("e2e_backend", ["memory", "aws", "http-memory", "http-emulator"],
                                     scope="module")


@step
async def warm_up(label: str) -> str:
    return label


@workflow
async def hook_after_a_step(token: str) -> object:
    await warm_up(token)  # the hook exists only after a step and a replay
    async with create_hook(token=token) as hook:
        return await hook


@workflow
async def no_hook(label: str) -> str:
    return label


@workflow
async def echo_run_id(run_id: str, *, suffix: str = "") -> str:
    return run_id + suffix


def new_token() -> str:
    return f"tok-{uuid.uuid4().hex}"


async def test_wait_for_hook_returns_the_hook_once_the_run_holds_it(e2e) -> None:
    token = new_token()
    run = await e2e.client.start(hook_after_a_step, token)
    hook = await run.wait_for_hook(token, timeout=20)
    assert isinstance(hook, HookRecord)
    assert (hook.run_id, hook.token) == (run.run_id, token)
    await e2e.client.resume_hook(token, {"ok": 1})
    assert await run.result(timeout=30) == {"ok": 1}


async def test_wait_for_hook_fails_early_when_the_run_ends_without_it(e2e) -> None:
    run = await e2e.client.start(no_hook, "done")
    assert await run.result(timeout=30) == "done"
    token = new_token()
    began = time.monotonic()
    with pytest.raises(RunEndedError) as ended:
        await run.wait_for_hook(token, timeout=20)
    assert time.monotonic() - began < 5, "a run that ended is reported at once, not after the timeout"
    assert isinstance(ended.value, RuntimeError)
    assert ended.value.run_id == run.run_id and ended.value.status == "completed"
    assert run.run_id in str(ended.value) and token in str(ended.value)


async def test_wait_for_hook_times_out_naming_the_run_and_the_token(e2e) -> None:
    held = new_token()
    run = await e2e.client.start(hook_after_a_step, held)
    await run.wait_for_hook(held, timeout=20)
    missing = new_token()
    began = time.monotonic()
    with pytest.raises(TimeoutError) as timed_out:
        await run.wait_for_hook(missing, timeout=0.3)
    assert 0.3 <= time.monotonic() - began < 5
    assert run.run_id in str(timed_out.value) and missing in str(timed_out.value)
    assert str(timed_out.value).endswith(f"; it waits on: hook {held} (no payload yet)"), "and what it waits on"
    await e2e.client.resume_hook(held, "bye")
    assert await run.result(timeout=30) == "bye"


async def test_a_result_that_times_out_says_what_the_run_waits_on(e2e) -> None:
    token = new_token()
    run = await e2e.client.start(hook_after_a_step, token)
    await run.wait_for_hook(token, timeout=20)
    with pytest.raises(TimeoutError) as timed_out:
        await run.result(timeout=0.3)
    assert str(timed_out.value) == (f"run {run.run_id} is still running after 0.3 s; it waits on: hook {token} "
                                    "(no payload yet)")
    await e2e.client.resume_hook(token, "bye")
    assert await run.result(timeout=30) == "bye"


async def test_resume_hook_with_wait_resumes_a_hook_its_run_has_not_created_yet(e2e) -> None:
    token = new_token()
    run = await e2e.client.start(hook_after_a_step, token)
    event = await e2e.client.resume_hook(token, "on time", wait=20)
    assert event.run_id == run.run_id and event.event_type == "hook_received"
    assert await run.result(timeout=30) == "on time"


async def test_resume_hook_outcome_with_wait_reports_the_recording(e2e) -> None:
    token = new_token()
    run = await e2e.client.start(hook_after_a_step, token)
    outcome = await e2e.client.resume_hook_outcome(token, 7, idempotency_key="k1", wait=20)
    assert outcome.recorded and outcome.event.run_id == run.run_id
    assert await run.result(timeout=30) == 7


async def test_resume_hook_with_wait_raises_not_found_after_the_wait(e2e) -> None:
    began = time.monotonic()
    with pytest.raises(HookNotFoundError):
        await e2e.client.resume_hook(new_token(), "nobody", wait=0.3)
    assert 0.3 <= time.monotonic() - began < 5
    with pytest.raises(HookNotFoundError):  # without wait: after one read
        await e2e.client.resume_hook(new_token(), "nobody")


async def test_options_run_id_is_idempotent_and_leaves_the_workflows_own_run_id_parameter_alone(e2e) -> None:
    run_id = f"wrun_opts_{uuid.uuid4().hex}"
    first = await e2e.client.options(run_id=run_id).start(echo_run_id, "argument", suffix="!")
    second = await e2e.client.options(run_id=run_id).start(echo_run_id, "argument", suffix="!")
    assert first.run_id == second.run_id == run_id
    assert await first.result(timeout=30) == "argument!"

    plain = await e2e.client.start(echo_run_id, run_id="a keyword of the workflow")  # not the run's id
    assert plain.run_id != "a keyword of the workflow"
    assert await plain.result(timeout=30) == "a keyword of the workflow"

    by_name = await e2e.client.options().start(f"{__name__}.echo_run_id", "named")
    assert await by_name.result(timeout=30) == "named"
    assert repr(e2e.client.options(run_id="x")) == "StartOptions(run_id='x')"
