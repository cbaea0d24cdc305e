"""A step body run inline runs as its own task (``_worker/step_runner.py``, ``_supervised``), and the delivery waits
for a quick one with a single turn of the loop: what each promise below depends on, which a body run in the
delivery's own task (or started eagerly, with no turn) would break.

* Context variables a body sets stay in its task: the next step, run by the same delivery, does not see them.
* ``asyncio.current_task()`` in a body is the body's, one per body: an ``asyncio.timeout`` inside a body cancels
  the body alone, which catches it, and the delivery goes on.
* A delivery running quick steps inline gives the loop a turn per step, so a test's other tasks run between two
  steps of a run (a cancel sent meanwhile lands mid-run), not only once the delivery's budget ends.
"""

from __future__ import annotations

import asyncio
import contextvars

from awsworld import step, workflow
from awsworld.testing import WorkflowTestEnv

SEEN: contextvars.ContextVar[str | None] = contextvars.ContextVar("awsworld_test_seen", default=None)
STEPS = 40


@step
async def step_body_task_mark(mark: str) -> str | None:
    """Returns what the variable held when the body began, then sets it."""
    before = SEEN.get()
    SEEN.set(mark)
    return before


@workflow(name="tests.step_body_task.marks")
async def marks(count: int) -> list[str | None]:
    return [await step_body_task_mark(f"m{i}") for i in range(count)]


async def test_a_context_variable_set_in_a_step_body_stays_in_that_body(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(marks, 3)
    assert await run.result() == [None, None, None]


@step
async def step_body_task_own_timeout() -> str:
    """Times itself out, catches it, and names the task it ran in."""
    task = asyncio.current_task()
    assert task is not None
    try:
        async with asyncio.timeout(0.01):
            await asyncio.sleep(30)
    except TimeoutError:
        return task.get_name()
    return "not timed out"


@workflow(name="tests.step_body_task.own_timeout")
async def own_timeout() -> list[str]:
    return [await step_body_task_own_timeout(), await step_body_task_own_timeout()]


async def test_a_timeout_inside_a_step_body_cancels_that_body_alone(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(own_timeout)
    first, second = await run.result()
    assert "not timed out" not in (first, second)
    assert first != second, "each body ran in a task of its own, not in the delivery's (which ran both)"


@step
async def step_body_task_quick(value: int) -> int:
    return value + 1


@workflow(name="tests.step_body_task.serial")
async def serial(count: int) -> int:
    value = 0
    for _ in range(count):
        value = await step_body_task_quick(value)
    return value


async def test_a_delivery_running_quick_steps_inline_gives_the_loop_a_turn_per_step(
        awsworld_env: WorkflowTestEnv) -> None:
    turns = 0
    done = False

    async def count_turns() -> None:
        nonlocal turns
        while not done:
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count_turns())
    try:
        run = await awsworld_env.client.start(serial, STEPS)
        assert await run.result() == STEPS
    finally:
        done = True
        await counter
    stats = awsworld_env.deliveries
    assert stats <= 3, f"the run's steps ran inline in few deliveries ({stats}), so the turns were theirs"
    assert turns >= STEPS, f"{turns} turns of the loop for a run of {STEPS} inline steps"
