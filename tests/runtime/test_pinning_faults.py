"""Runs pinned to their deployment under deploys, upgrades and rollbacks that land while a message of the run is
queued: which code runs each message (``docs/how-to/changing-code.md``). On the in-memory World and on the emulator
(moto) behind the same ``Stack`` as ``tests/runtime/test_pinning.py``."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

import pytest

from awsworld import Workflow, create_hook, step, workflow
from awsworld._deployments import upgrade as upgrade_module
from awsworld._deployments.pins import PIN_ATTRIBUTE
from awsworld._deployments.upgrade import UpgradeError, retire
from awsworld.authoring.definitions import Registry
from awsworld.client.client import Run
from awsworld.world.deployments import DeploymentStore
from awsworld.world.protocol import World
from deploy.versions_app import BROKEN_CHARGING, CHARGING, checkout, checkout_broken

from .test_pinning import Stack, stack

__all__ = ["stack"]  # (the fixture, shared with test_pinning)

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
    await stack.deploy("v2", CHARGING)
    await stack.deploy("v3", BROKEN_CHARGING)
    run = await stack.client.start(checkout_broken, "r")
    await first_attempt_failed(stack, run.run_id)
    assert await stack.pin(run) == "v3"
    back = await stack.upgrade(run, "v2", CHARGING)
    assert (back.outcome, back.source, back.target) == ("moved", "v3", "v2"), back
    assert await run.result(timeout=30) == "charged r at attempt 2"
    assert await stack.pin(run) == "v2"


HELD = asyncio.Event()
"""Set by the test to let the first version's first step finish: the run is upgraded while that body runs."""
ENTERED = asyncio.Event()


def two_steps(version: str, *, held: bool) -> tuple[Registry, Workflow[[str], list[str]]]:
    """A deployment of ``fault.two`` (two steps, each saying ``version``), and its workflow; ``held``: its first
    step waits for ``HELD`` (having set ``ENTERED``)."""
    registry = Registry()
    with registry.capture():
        @step(name="fault.first")
        async def first(x: str) -> str:
            if held:
                ENTERED.set()
                await HELD.wait()
            return f"{version}:{x}"

        @step(name="fault.second")
        async def second(x: str) -> str:
            return f"{version}:{x}"

        @workflow(name="fault.two")
        async def two(x: str) -> list[str]:
            return [await first(x), await second(x)]
    return registry, two


SLOW_V1, two_v1 = two_steps("v1", held=True)
V2_CODE, _ = two_steps("v2", held=False)
V3_CODE, _ = two_steps("v3", held=False)


async def test_an_upgrade_while_a_step_runs_lets_that_body_end_on_the_old_code_and_the_next_step_run_on_the_new(
        stack: Stack) -> None:
    HELD.clear()
    ENTERED.clear()
    await stack.deploy("v2", SLOW_V1)
    await stack.deploy("v3", V2_CODE)
    run = await stack.client.options(deployment="v2").start(two_v1, "m")
    waiter = asyncio.ensure_future(run.result(timeout=30))
    await asyncio.wait_for(ENTERED.wait(), 30)
    moved = await stack.upgrade(run, "v3", V2_CODE)
    assert moved.outcome == "moved", moved
    HELD.set()
    assert await waiter == ["v1:m", "v2:m"]
    assert await stack.pin(run) == "v3"


LACKING = Registry()
with LACKING.capture():
    @workflow(name="fault.other")
    async def other(x: str) -> str:
        return x


async def test_two_upgrades_racing_leave_the_run_on_one_target_and_running_its_code(stack: Stack) -> None:
    HELD.clear()
    ENTERED.clear()
    await stack.deploy("v2", SLOW_V1)
    await stack.deploy("v3", V2_CODE)
    await stack.deploy("v4", V3_CODE)
    run = await stack.client.options(deployment="v2").start(two_v1, "race")
    waiter = asyncio.ensure_future(run.result(timeout=30))
    await asyncio.wait_for(ENTERED.wait(), 30)
    both = await asyncio.gather(stack.upgrade(run, "v3", V2_CODE), stack.upgrade(run, "v4", V3_CODE))
    assert all(u.ok for u in both), both
    HELD.set()
    said = {"v3": "v2", "v4": "v3"}[str(await stack.pin(run))]
    assert await waiter == ["v1:race", f"{said}:race"], "the second step ran the code of the deployment it is on"
    assert not [r for r in stack.results if r.status in ("error", "deployment-mismatch")]


async def test_an_upgrade_to_code_that_lacks_the_workflow_writes_nothing_and_the_run_goes_on(stack: Stack) -> None:
    HELD.set()
    await stack.deploy("v2", CHARGING)
    await stack.deploy("v3", LACKING)
    run = await stack.client.options(deployment="v2").start(checkout, "l")
    refused = await stack.upgrade(run, "v3", LACKING)
    assert (refused.outcome, refused.source) == ("error", "v2"), refused
    assert await stack.pin(run) == "v2"
    assert await run.result(timeout=30) == "charged l at attempt 1"


def family(version: str) -> tuple[Registry, Workflow[[str], list[str]]]:
    """A deployment of ``fault.parent``: a child run that waits on a hook, then a second child; each says
    ``version``."""
    registry = Registry()
    with registry.capture():
        @step(name="fault.say")
        async def say(x: str) -> str:
            return f"{version}:{x}"

        @workflow(name="fault.child")
        async def child(x: str) -> str:
            await create_hook(token=f"fault-child:{x}")
            return await say(x)

        @workflow(name="fault.parent")
        async def parent(x: str) -> list[str]:
            return [await child(f"{x}1"), await child(f"{x}2")]
    return registry, parent


@dataclass
class Family:
    """``fault.parent`` deployed as v2 and v3, and a run of it waiting on its first child's hook."""

    stack: Stack
    old: Registry
    new: Registry
    run: Run[list[str]]
    x: str

    @classmethod
    async def started(cls, stack: Stack, x: str, *, on: str) -> Family:
        (old, parent_v2), (new, parent_v3) = family("v2"), family("v3")
        await stack.deploy("v2", old)
        await stack.deploy("v3", new)
        run = await stack.client.options(deployment=on).start(parent_v2 if on == "v2" else parent_v3, x)
        await stack.hook_ready(f"fault-child:{x}1")
        return cls(stack, old, new, run, x)

    @property
    def store(self) -> DeploymentStore:
        assert self.stack.world.deployments is not None
        return self.stack.world.deployments

    async def finish(self) -> list[str]:
        """Both children's hooks resumed: the parent's result."""
        await self.stack.client.resume_hook(f"fault-child:{self.x}1", {})
        await self.stack.hook_ready(f"fault-child:{self.x}2")
        await self.stack.client.resume_hook(f"fault-child:{self.x}2", {})
        return await self.run.result(timeout=30)


async def test_a_parent_moved_while_its_child_waits_hears_the_childs_end_and_starts_its_next_child_on_the_target(
        stack: Stack) -> None:
    """The child stays on the code it started on (an upgrade moves the runs it names); its end wakes the parent on
    the target, and the parent's next child is pinned to the target (a child takes its parent's deployment)."""
    family_run = await Family.started(stack, "p", on="v2")
    moved = await stack.upgrade(family_run.run, "v3", family_run.new)
    assert (moved.outcome, moved.source, moved.target) == ("moved", "v2", "v3"), moved
    assert await family_run.finish() == ["v2:p1", "v3:p2"]
    children = (await stack.world.runs.list(workflow_name="fault.child", resolve_data="none", limit=100)).data
    assert sorted(str(c.attributes.get(PIN_ATTRIBUTE)) for c in children) == ["v2", "v3"], children
    assert not [r for r in stack.results if r.status in ("error", "deployment-mismatch")]


async def test_a_deployment_retired_while_a_run_is_moved_to_it_keeps_the_run_where_it_was(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two operators: one moves a run back to v2 (``awsworld upgrade RUN --to v2``), the other retires v2
    (``awsworld deployments retire v2``, or ``prune``) while the first replays the run: v2 held no run when the
    retirement looked, and the move wrote its pin after. The run was pinned to a retired deployment (on Lambda, a
    deleted version: it fails with ``DEPLOYMENT_MISMATCH`` at its next delivery). The move reads the deployment's
    record after its write and puts the run back; its answer says why."""
    family_run = await Family.started(stack, "q", on="v3")
    run, store = family_run.run, family_run.store
    reading = upgrade_module.read_log

    async def retired_meanwhile(world: World, run_id: str) -> Any:
        await retire(store, stack.world, "v2")  # the other operator, while this one reads and replays the run
        return await reading(world, run_id)

    monkeypatch.setattr(upgrade_module, "read_log", retired_meanwhile)
    refused = await upgrade_module.upgrade_run(stack.world, run.run_id, "v2", family_run.old)
    monkeypatch.setattr(upgrade_module, "read_log", reading)
    assert (refused.outcome, refused.source, refused.target) == ("error", "v3", "v2"), refused
    assert refused.detail == "deployment 'v2' was retired while the run was moved to it: it stays on v3", refused
    assert await stack.pin(run) == "v3"
    assert await family_run.finish() == ["v3:q1", "v3:q2"]


async def test_a_retirement_that_looked_before_a_run_was_moved_to_its_deployment_is_refused(
        stack: Stack, monkeypatch: pytest.MonkeyPatch) -> None:
    """The other order: the retirement lists v2's runs (none), the upgrade moves a run to v2 and finds v2 not
    retired yet, then the retirement marks v2. It lists v2's runs again after its write, finds the run, and puts
    the record back: ``UpgradeError``, v2 not retired, and the run finishes there."""
    family_run = await Family.started(stack, "w", on="v3")
    run, store = family_run.run, family_run.store
    listing = upgrade_module.runs_on
    moves: list[Any] = []

    async def moved_meanwhile(world: World, deployment: str) -> list[str]:
        found = await listing(world, deployment)
        if not moves:  # the other operator's upgrade, between this look and the write
            moves.append(await upgrade_module.upgrade_run(stack.world, run.run_id, "v2", family_run.old))
        return found

    monkeypatch.setattr(upgrade_module, "runs_on", moved_meanwhile)
    with pytest.raises(UpgradeError) as refused:
        await retire(store, stack.world, "v2")
    monkeypatch.setattr(upgrade_module, "runs_on", listing)
    assert str(refused.value) == (f"deployment 'v2' was given 1 run(s) while it was retired ({run.run_id}, by "
                                  f"`awsworld upgrade`): it was not retired")
    assert [m.outcome for m in moves] == ["moved"], moves
    assert {d.deployment_id: d.retired for d in await store.read()}["v2"] is False
    assert await family_run.finish() == ["v3:w1", "v2:w2"]
