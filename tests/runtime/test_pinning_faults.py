"""Runs pinned to their deployment under deploys, upgrades and rollbacks that land while a message of the run is
queued: which code runs each message (``docs/how-to/changing-code.md``). On the in-memory World and on the emulator
(moto) behind the same ``Stack`` as ``tests/runtime/test_pinning.py``."""

from __future__ import annotations

import asyncio

from awsworld import RetryPolicy, step, step_metadata, workflow
from awsworld.authoring.definitions import Registry

from .test_pinning import Stack, stack

__all__ = ["stack"]  # (the fixture, shared with test_pinning)

LATER = RetryPolicy(max_attempts=5, initial_delay="4s", backoff=1, jitter=0)
"""A step's patient policy: its next attempt is queued 4 s out, time for an upgrade on the emulator."""

WORKS = Registry()
BROKEN = Registry()

with WORKS.capture():
    @step(name="fault.charge", retry=LATER)
    async def charge_works(x: str) -> str:
        return f"works:{x} at attempt {step_metadata().attempt}"

    @workflow(name="fault.order")
    async def order_works(x: str) -> str:
        return await charge_works(x)

with BROKEN.capture():
    @step(name="fault.charge", retry=LATER)
    async def charge_broken(x: str) -> str:
        raise RuntimeError(f"the new code cannot charge {x}")

    @workflow(name="fault.order")
    async def order_broken(x: str) -> str:
        return await charge_broken(x)


async def first_attempt_failed(stack: Stack, run_id: str) -> None:
    for _ in range(600):
        steps = await stack.world.steps.list(run_id, resolve_data="none")
        if steps.data and steps.data[0].error is not None:
            return
        if stack.env is not None:
            await stack.env.idle()
        else:
            await asyncio.sleep(0.05)
    raise AssertionError("the step's first attempt did not fail")


async def test_a_rollback_runs_a_failing_steps_next_attempts_on_the_deployment_rolled_back_to(stack: Stack) -> None:
    """v3 is live and breaks a step; the run started on v3 is moved back to v2 (``awsworld upgrade --to v2``).
    The step's next attempt was queued by v3, the live deployment, addressed to itself: it must run v2's code."""
    await stack.deploy("v2", WORKS)
    await stack.deploy("v3", BROKEN)
    run = await stack.client.start(order_broken, "r")
    await first_attempt_failed(stack, run.run_id)
    assert await stack.pin(run) == "v3"
    back = await stack.upgrade(run, "v2", WORKS)
    assert (back.outcome, back.source, back.target) == ("moved", "v3", "v2"), back
    assert await run.result(timeout=30) == "works:r at attempt 2"
    assert await stack.pin(run) == "v2"
