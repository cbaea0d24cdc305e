"""``sys.exit()`` in a step or workflow body (the user's own, or a library's) fails that step or run like an
exception, recorded as ``SystemExit`` with its traceback (not retried: ``retry_on`` holds ``Exception``), and
leaves the process that runs deliveries serving. Left alone it would leave the body's asyncio task and stop the
event loop: ``awsworld dev`` died with every run it had not saved, and a Lambda container would die
mid-delivery. In memory and on the emulator (moto)."""

from __future__ import annotations

import sys
import uuid
from collections import Counter

import pytest

from awsworld import RetryPolicy, StepError, WorkflowRunFailedError, step, workflow
from awsworld.world import StructuredError

from .conftest import BOTH, on_backends

e2e_backend = on_backends(BOTH)

CALLS: Counter[str] = Counter()


@step(name="exit_test.leaves", retry=RetryPolicy.fixed("1s", max_attempts=2))
async def leaves(tag: str) -> str:
    CALLS[tag] += 1
    sys.exit(3)


@step(name="exit_test.leaves_in_time", timeout="30s", retry=RetryPolicy.fixed("1s", max_attempts=1))
async def leaves_in_time(tag: str) -> str:  # a timeout runs the body in a task of its own
    CALLS[tag] += 1
    sys.exit("bye")


@step(name="exit_test.fine")
async def fine(tag: str) -> str:
    return f"fine {tag}"


@workflow(name="exit_test.catches")
async def catches(tag: str) -> dict[str, object]:
    caught: dict[str, object] = {}
    for name, call in (("plain", leaves), ("timed", leaves_in_time)):
        try:
            await call(f"{tag}:{name}")
        except StepError as error:
            caught[name] = [error.error_type, error.message, str(error), "sys.exit(" in (error.stack or "")]
    caught["after"] = await fine(tag)
    return caught


@workflow(name="exit_test.exits")
async def exits(tag: str) -> str:
    await fine(tag)
    sys.exit(4)


async def test_a_step_that_calls_sys_exit_fails_its_attempts_and_the_workflow_goes_on(e2e) -> None:
    tag = uuid.uuid4().hex
    result = await e2e.run(catches, tag)
    assert result == {
        "plain": ["SystemExit", "3", "step 'exit_test.leaves' failed: SystemExit: 3", True],
        "timed": ["SystemExit", "bye", "step 'exit_test.leaves_in_time' failed: SystemExit: bye", True],
        "after": f"fine {tag}",
    }
    # SystemExit is no Exception, which is what retry_on holds by default: the step fails at once
    assert CALLS[f"{tag}:plain"] == 1 and CALLS[f"{tag}:timed"] == 1


async def test_a_workflow_that_calls_sys_exit_fails_its_run_with_the_traceback(e2e) -> None:
    run = await e2e.start(exits, uuid.uuid4().hex)
    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=30)
    assert failed.value.error_type == "SystemExit" and str(failed.value).endswith(" failed: 4")
    stored = (await run.get()).error
    assert isinstance(stored, StructuredError) and stored.stack is not None
    assert (stored.name, stored.type, stored.message) == ("SystemExit", "SystemExit", "4")
    assert "sys.exit(4)" in stored.stack and stored.stack.rstrip().endswith("SystemExit: 4")
    assert [s.status for s in await run.steps()] == ["completed"]
    assert await e2e.run(catches, "afterwards") is not None  # the process still serves
