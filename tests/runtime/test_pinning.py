"""Runs pinned to the deployment that started them, on the in-memory World and on the emulator (moto), through the
one delivery path: two versions of a workflow deployed side by side (``Registry().capture()``), the second taking
new runs while runs started on the first keep running the first's code; a retired deployment's run failing with
``DeploymentMismatchError`` after exactly three re-routes; ``pinned=False`` runs and child runs.

On the emulator the versions are loaded in one process behind ``LocalPoller``'s host (``_deployments.local_host``),
the stand-in for published Lambda versions: the live one receives every record, and a record of a run pinned to
the other is handed to it as an asynchronous invocation of that version would be."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from awsworld import (
    DeploymentUnavailableError,
    RateLimit,
    RetryPolicy,
    WorkflowRunFailedError,
    create_hook,
    step,
    step_metadata,
    workflow,
)
from awsworld._deployments.identity import register
from awsworld._deployments.pins import DEPLOYMENT_MISMATCH, MAX_REROUTES, PIN_ATTRIBUTE
from awsworld._deployments.upgrade import Upgrade, runs_on, upgrade_run
from awsworld._worker.delivery import RecordResult
from awsworld._worker.dispatch import Worker
from awsworld._worker.limiter import Limiter
from awsworld.authoring.definitions import Registry
from awsworld.client.client import Client, Run
from awsworld.local import LocalAWS, MotoServer
from awsworld.local.poller import LocalPoller
from awsworld.testing import WorkflowTestEnv
from awsworld.world.clock import clock_of
from awsworld.world.entities import TERMINAL_RUN_STATUSES
from awsworld.world.errors import HookNotFoundError
from awsworld.world.protocol import World
from awsworld.world.rules.limiters import run_holder

V1 = Registry()
V2 = Registry()
V3 = Registry()

with V1.capture():
    @step(name="pin.tag")
    async def tag_v1(x: str) -> str:
        return f"v1:{x}"

    @workflow(name="pin.order")
    async def order_v1(x: str) -> list[str]:
        first = await tag_v1(x)
        await create_hook(token=f"pin-go:{x}")
        return [first, await tag_v1(x)]

    @workflow(name="pin.short", pinned=False)
    async def short_v1(x: str) -> str:
        await create_hook(token=f"pin-short:{x}")
        return await tag_v1(x)

    @workflow(name="pin.child")
    async def child_v1(x: str) -> str:
        await create_hook(token=f"pin-child:{x}")
        return await tag_v1(x)

    @workflow(name="pin.parent")
    async def parent_v1(x: str) -> str:
        return "parent-v1 " + await child_v1(x)

    @workflow(name="pin.solo", concurrency=1)
    async def solo_v1(x: str) -> str:
        await create_hook(token=f"pin-solo:{x}")
        return await tag_v1(x)

    @workflow(name="pin.duo", concurrency=1)
    async def duo_v1(x: str) -> str:
        await create_hook(token=f"pin-duo:{x}")
        return f"v1:{x}"

    @step(name="pin.rated", rate=RateLimit("1/m"))
    async def rated_v1(x: str) -> str:
        return f"v1:{x}"

    @workflow(name="pin.rate")
    async def rate_v1(x: str) -> str:
        return await rated_v1(x)

with V2.capture():
    @step(name="pin.tag")
    async def tag_v2(x: str) -> str:
        return f"v2:{x}"

    @step(name="pin.note")
    async def note_v2(x: str) -> str:
        return f"noted {x}"

    @workflow(name="pin.order")
    async def order_v2(x: str) -> list[str]:
        # A call inserted before the hook: a run recorded by v1 diverges here if v2 replays it.
        first = await note_v2(x) + " " + await tag_v2(x)
        await create_hook(token=f"pin-go:{x}")
        return [first, await tag_v2(x)]

    @workflow(name="pin.short", pinned=False)
    async def short_v2(x: str) -> str:
        await create_hook(token=f"pin-short:{x}")
        return await tag_v2(x)

    @workflow(name="pin.child")
    async def child_v2(x: str) -> str:
        await note_v2(x)
        await create_hook(token=f"pin-child:{x}")
        return await tag_v2(x)

    @workflow(name="pin.parent")
    async def parent_v2(x: str) -> str:
        return "parent-v2 " + await child_v2(x)

    @workflow(name="pin.solo", concurrency=1)
    async def solo_v2(x: str) -> str:
        await create_hook(token=f"pin-solo:{x}")
        return await tag_v2(x)

    @workflow(name="pin.duo", concurrency=2)  # the limit raised in code
    async def duo_v2(x: str) -> str:
        await create_hook(token=f"pin-duo:{x}")
        return f"v2:{x}"

    @step(name="pin.rated", rate=RateLimit("100/s"))  # the rate raised in code
    async def rated_v2(x: str) -> str:
        return f"v2:{x}"

    @workflow(name="pin.rate")
    async def rate_v2(x: str) -> str:
        return await rated_v2(x)


RETRY_LATER = RetryPolicy(max_attempts=5, initial_delay="4s", backoff=1, jitter=0)
"""A compensation's patient policy: its next attempt is queued 4 s out, time for an upgrade on the emulator."""

with V1.capture():
    @step(name="pin.unbook", retry=RETRY_LATER)
    async def unbook_v1(x: str) -> str:
        raise RuntimeError(f"v1 cannot undo {x}")  # the bug the next deployment fixes

    @workflow(name="pin.undo")
    async def undo_v1(x: str) -> str:
        return await unbook_v1(x)

FIXED = Registry()
with FIXED.capture():
    @step(name="pin.unbook", retry=RETRY_LATER)
    async def unbook_fixed(x: str) -> str:
        if step_metadata().attempt == 2:
            raise RuntimeError(f"{x}'s partner did not answer")  # once: the next retry is the fixed code's own
        return f"fixed:{x} at attempt {step_metadata().attempt}"

    @workflow(name="pin.undo")
    async def undo_fixed(x: str) -> str:
        return await unbook_fixed(x)

with V3.capture():
    @step(name="pin.tag")
    async def tag_v3(x: str) -> str:
        return f"v3:{x}"

    @workflow(name="pin.order")
    async def order_v3(x: str) -> list[str]:
        # v1's calls up to the hook (a v1 run replays), another step after it.
        first = await tag_v3(x)
        await create_hook(token=f"pin-go:{x}")
        return [first.replace("v3", "v1"), await tag_v3(x)]

def later_code(version: str) -> Registry:
    """A deployment after v1 whose code replays v1's runs of ``pin.order`` (as v3's) and of ``pin.short``; its step
    says ``version``."""
    registry = Registry()
    with registry.capture():
        @step(name="pin.tag")
        async def tag(x: str) -> str:
            return f"{version}:{x}"

        @workflow(name="pin.order")
        async def order(x: str) -> list[str]:
            first = await tag(x)
            await create_hook(token=f"pin-go:{x}")
            return [first.replace(version, "v1"), await tag(x)]

        @workflow(name="pin.short", pinned=False)
        async def short(x: str) -> str:
            await create_hook(token=f"pin-short:{x}")
            return await tag(x)
    return registry


@dataclass
class Stack:
    """Two deployments of one World's code, on either backend: ``deploy`` makes the second live."""

    client: Client
    world: World
    env: WorkflowTestEnv | None = None
    poller: LocalPoller | None = None

    async def deploy(self, deployment: str, registry: Registry) -> None:
        if self.env is not None:
            await self.env.deploy(deployment, registry)
            return
        assert self.poller is not None
        self.poller.host.deploy(Worker(self.world, registry, deployment=deployment))
        await register(self.world, deployment, registry, host="test")  # (as every host registers its versions)
        self.client.registry = registry

    async def retire(self, deployment: str) -> None:
        if self.env is not None:
            await self.env.retire(deployment)
        else:  # as `awsworld deployments retire` (or the test environment's) does: its record marked
            assert self.poller is not None and self.poller.host.retire(deployment)
            store = self.world.deployments
            assert store is not None
            for found in await store.read():
                if found.deployment_id == deployment:
                    await store.put(found.retire(clock_of(self.world).now()))

    async def upgrade(self, run: Run[Any], to: str, registry: Registry) -> Upgrade:
        if self.env is not None:
            return await self.env.upgrade(run.run_id, to)
        return await upgrade_run(self.world, run.run_id, to, registry)

    @property
    def results(self) -> list[RecordResult]:
        return self.env.driver.results if self.env is not None else self._poller().results

    @property
    def handed_over(self) -> int:
        return (self.env.driver.host if self.env is not None else self._poller().host).handed_over

    def _poller(self) -> LocalPoller:
        assert self.poller is not None
        return self.poller

    async def hook_ready(self, token: str) -> None:
        for _ in range(600):
            try:
                await self.world.hooks.get_by_token(token, resolve_data="none")
                return
            except HookNotFoundError:
                if self.env is not None:
                    await self.env.idle()
                else:
                    import asyncio
                    await asyncio.sleep(0.05)
        raise AssertionError(f"no hook {token} appeared")

    async def delivery_recorded(self, status: str) -> None:
        """Until a delivery ending with ``status`` is recorded: a run's end is written during its delivery, and
        ``run.result()`` can return before that delivery's own result is appended."""
        for _ in range(600):
            if any(r.status == status for r in self.results):
                return
            if self.env is not None:
                await self.env.idle()
            else:
                import asyncio
                await asyncio.sleep(0.05)
        raise AssertionError(f"no delivery ended {status!r}: {[r.status for r in self.results]}")

    async def pin(self, run: Run[Any]) -> str | None:
        view = await self.world.runs.get(run.run_id, resolve_data="none")
        return view.attributes.get(PIN_ATTRIBUTE)


@pytest.fixture(params=["memory", "aws"])
async def stack(request: pytest.FixtureRequest) -> AsyncIterator[Stack]:
    if request.param == "memory":
        async with WorkflowTestEnv(registry=V1, deployment="v1") as env:
            yield Stack(env.client, env.world, env=env)
        return
    moto: MotoServer = request.getfixturevalue("moto_server")
    async with LocalAWS("moto", moto=moto, run_workflows=False) as local:
        poller = LocalPoller(local.world, Worker(local.world, V1, deployment="v1"))
        await register(local.world, "v1", V1, host="test")
        poller.start()
        try:
            yield Stack(Client(local.world, registry=V1), local.world, poller=poller)
        finally:
            await poller.stop()


async def test_a_run_keeps_the_code_it_started_on_while_new_runs_take_the_new_deployment(stack: Stack) -> None:
    old = await stack.client.start(order_v1, "a")
    await stack.hook_ready("pin-go:a")
    await stack.deploy("v2", V2)
    new = await stack.client.start(order_v2, "b")
    await stack.hook_ready("pin-go:b")

    await stack.client.resume_hook("pin-go:a", {})  # the wake reaches v2, whose flow hands it to v1
    await stack.client.resume_hook("pin-go:b", {})
    assert await old.result(timeout=30) == ["v1:a", "v1:a"], "v1's code all the way (v2 would have diverged)"
    assert await new.result(timeout=30) == ["noted b v2:b", "v2:b"]
    assert (await stack.pin(old), await stack.pin(new)) == ("v1", "v2")
    assert stack.handed_over >= 1
    assert not [r for r in stack.results if r.status in ("error", "deployment-mismatch")]


async def test_a_retired_deployments_run_fails_with_the_typed_error_after_three_reroutes(
        stack: Stack, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    """Its copies are sent after ``AWSWORLD_REROUTE_DELAY_SECONDS`` doubled per re-route: 0 here, so the emulator's
    run spends no time on them (1 + 2 + 4 s with the default, which the test once waited out)."""
    monkeypatch.setenv("AWSWORLD_REROUTE_DELAY_SECONDS", "0")
    caplog.set_level(logging.WARNING, logger="awsworld.delivery")
    run = await stack.client.start(order_v1, "c")
    await stack.hook_ready("pin-go:c")
    await stack.deploy("v2", V2)
    await stack.retire("v1")
    await stack.client.resume_hook("pin-go:c", {})

    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result(timeout=60)
    assert failed.value.code == DEPLOYMENT_MISMATCH and failed.value.error_type == "DeploymentMismatchError"
    assert "deployment 'v1'" in str(failed.value) and "after 3 re-routes" in str(failed.value)
    await stack.delivery_recorded("deployment-mismatch")
    statuses = [r.status for r in stack.results]
    assert statuses.count("reroute-sent") == MAX_REROUTES and statuses.count("deployment-mismatch") == 1
    view = await stack.world.runs.get(run.run_id, resolve_data="none")
    assert view.status in TERMINAL_RUN_STATUSES
    sent = [r.getMessage().split("; ", 1)[1].split(" (")[0] for r in caplog.records
            if "sent again in" in r.getMessage()]
    assert sent == ["sent again in 0 s"] * MAX_REROUTES, sent


async def test_a_run_admitted_by_its_first_delivery_is_woken_on_its_pinned_deployment(stack: Stack) -> None:
    """A limited run started without its workflow's code (by name, from a bare client) takes its place among the
    waiters at its first delivery (``run_limits.admit_in_flow``), which pins it there: the wake that the grant of
    its slot sends carries that pin (``deploymentId``), as every other message of a pinned run does, so the live
    deployment hands it to the run's own unread, rather than reading the run's log to find it belongs elsewhere
    (and v2's code never replays a v1 run)."""
    first = await stack.client.start(solo_v1, "g")  # admitted at its start: holds the slot
    await stack.hook_ready("pin-solo:g")
    second = await Client(stack.world).start("pin.solo", "h")  # no code here: its first delivery admits it
    limiter = Limiter(stack.world)
    for _ in range(600):
        if await limiter.waiters("workflow:pin.solo", ""):
            break
        if stack.env is not None:
            await stack.env.idle()
        else:
            await asyncio.sleep(0.05)
    [waiter] = await limiter.waiters("workflow:pin.solo", "")
    assert waiter.holder == run_holder(second.run_id)
    assert waiter.wake["payload"].get("deploymentId") == "v1" == await stack.pin(second)
    await stack.deploy("v2", V2)
    handed = stack.handed_over
    await stack.client.resume_hook("pin-solo:g", {})  # its end grants the slot: the wake goes to v2, handed to v1
    assert await first.result(timeout=30) == "v1:g"
    await stack.hook_ready("pin-solo:h")
    assert stack.handed_over > handed
    assert not [r for r in stack.results if r.status in ("reroute-sent", "error", "deployment-mismatch")]
    await stack.client.resume_hook("pin-solo:h", {})
    assert await second.result(timeout=30) == "v1:h"


async def test_a_run_waiting_for_its_slot_starts_on_the_code_it_was_started_on_not_the_code_live_then(
        stack: Stack) -> None:
    """A limited run its start made wait (admitted by the ``Client``, which queues nothing for it) has no delivery
    until its slot is granted: it is pinned at its creation to the newest deployment, so a deploy while it waits
    (which could rename its workflow or change its parameters, and fail it at its grant) leaves it on the code it
    was started on, as a sleeping run of that code is. It once took whatever code was live at its grant."""
    holder = await stack.client.start(solo_v1, "i")
    await stack.hook_ready("pin-solo:i")
    waiting = await stack.client.start(solo_v1, "j")  # the key is busy: pending, no message queued
    [waiter] = await Limiter(stack.world).waiters("workflow:pin.solo", "")
    assert waiter.holder == run_holder(waiting.run_id)
    assert waiter.wake["payload"].get("deploymentId") == "v1" == await stack.pin(waiting)
    assert await stack.pin(holder) == "v1"
    await stack.deploy("v2", V2)
    after = await stack.client.start(solo_v2, "k")  # a start after the deploy: the new code's
    assert await stack.pin(after) == "v2"

    await stack.client.resume_hook("pin-solo:i", {})  # its end grants j's slot: the wake reaches v2, handed to v1
    assert await holder.result(timeout=30) == "v1:i"
    await stack.hook_ready("pin-solo:j")
    await stack.client.resume_hook("pin-solo:j", {})
    assert await waiting.result(timeout=30) == "v1:j", "started on v1: v1's code, not the code live at its grant"
    await stack.hook_ready("pin-solo:k")
    await stack.client.resume_hook("pin-solo:k", {})
    assert await after.result(timeout=30) == "v2:k"
    assert not [r for r in stack.results if r.status in ("reroute-sent", "error", "deployment-mismatch")]


async def test_a_rate_raised_in_code_lets_the_new_codes_starts_in_at_once(stack: Stack) -> None:
    """A step's rate set too low (``1/m``) and raised by a deploy (``100/s``) while starts wait for its tokens: the
    first use of the new code counts the starts reserved at the old rate again at the new one
    (``rules.limiters.with_spec``), so a run of the new code is admitted at once. The reserved starts kept as a
    time held it two minutes behind them."""
    started = [await stack.client.start(rate_v1, x) for x in ("r1", "r2", "r3")]
    assert await started[0].result(timeout=30) == "v1:r1"
    for _ in range(600):  # until the other two reserved their starts (a minute and two ahead)
        logs = [await run.events() for run in started[1:]]
        if all(any(e.event_type == "step_created" for e in log) for log in logs):
            view = (await stack.client.limits.describe("step:pin.rated")).key("")
            if view is not None and view.tokens is not None and view.tokens < 1:
                break
        if stack.env is not None:
            await stack.env.idle()
        else:
            await asyncio.sleep(0.05)
    await stack.deploy("v2", V2)
    deployed_at = clock_of(stack.world).now()
    new = await stack.client.start(rate_v2, "r4")
    assert await new.result(timeout=45) == "v2:r4"
    [step_started] = [e for e in await new.events() if e.event_type == "step_started"]
    admitted = datetime.fromisoformat((step_started.event_data or {})["limit"]["admittedAt"])
    assert (admitted - deployed_at).total_seconds() < 60, "at 100/s, not behind the starts reserved at 1/m"


async def test_a_limit_raised_by_a_deploy_is_not_put_back_by_the_runs_still_on_the_old_code(stack: Stack) -> None:
    """``concurrency=1`` raised to 2 by a deploy while runs started on the old code wait for the slot: the new
    code's first start records 2 and grants a waiter the second slot, and that waiter's first delivery, handed to
    the old deployment, asks for its slot with the old code's numbers. They are not recorded over the newest
    code's: the limit stays 2, so a third run starts when the first ends while the second still runs. The old
    code's runs once wrote 1 back at every use, and the raise held only until the next of them came (the walk of
    docs/how-to/flow-control.md: a backlog pinned to the old code kept it at the old numbers until it drained)."""
    first = await stack.client.start(duo_v1, "a")
    await stack.hook_ready("pin-duo:a")
    second = await stack.client.start(duo_v1, "b")
    third = await stack.client.start(duo_v1, "c")
    await stack.deploy("v2", V2)
    fourth = await stack.client.start(duo_v2, "d")  # the new code's numbers: b gets the second slot, d waits
    await stack.hook_ready("pin-duo:b")  # b's first delivery ran on v1 (handed over), asking with v1's numbers
    assert await stack.pin(second) == "v1"
    view = (await stack.client.limits.describe("workflow:pin.duo")).key("")
    assert view is not None and view.concurrency == 2, "the newest code's limit, not the old runs'"
    await stack.client.resume_hook("pin-duo:a", {})
    assert await first.result(timeout=30) == "v1:a"
    await stack.hook_ready("pin-duo:c")  # b still holds its slot: c takes the second one
    held = {h for h, _ in (await stack.client.limits.describe("workflow:pin.duo")).key("").holders}
    assert held == {run_holder(second.run_id), run_holder(third.run_id)}
    for x, run in (("b", second), ("c", third), ("d", fourth)):
        if x == "d":
            await stack.hook_ready("pin-duo:d")
        await stack.client.resume_hook(f"pin-duo:{x}", {})
        assert await run.result(timeout=30) == ("v2:d" if x == "d" else f"v1:{x}")


async def test_an_unpinned_workflow_and_a_child_run(stack: Stack) -> None:
    short = await stack.client.start(short_v1, "d")
    parent = await stack.client.start(parent_v1, "e")
    await stack.hook_ready("pin-short:d")
    await stack.hook_ready("pin-child:e")
    await stack.deploy("v2", V2)

    await stack.client.resume_hook("pin-short:d", {})
    await stack.client.resume_hook("pin-child:e", {})
    assert await short.result(timeout=30) == "v2:d", "pinned=False: the newest code"
    assert await stack.pin(short) is None
    assert await parent.result(timeout=30) == "parent-v1 v1:e", "the child stays on its parent's deployment"


async def test_an_upgrade_moves_a_run_on_purpose_only_after_its_replay_matches(stack: Stack) -> None:
    run = await stack.client.start(order_v1, "f")
    await stack.hook_ready("pin-go:f")
    await stack.deploy("v2", V2)
    refused = await stack.upgrade(run, "v2", V2)
    assert refused.outcome == "diverged" and refused.detail and "note(" in refused.detail, refused
    assert await stack.pin(run) == "v1", "a replay that differs moves nothing"

    await stack.deploy("v3", V3)
    moved = await stack.upgrade(run, "v3", V3)
    assert (moved.outcome, moved.source, moved.target) == ("moved", "v1", "v3")
    assert await stack.pin(run) == "v3"
    await stack.client.resume_hook("pin-go:f", {})
    assert await run.result(timeout=30) == ["v1:f", "v3:f"], "the rest of the run on v3's code"
    again = await stack.upgrade(run, "v3", V3)
    assert again.outcome == "ended"


async def test_an_upgrade_moves_a_failing_steps_next_attempts_to_the_fixed_code(stack: Stack) -> None:
    """The fix ``awsworld dev`` and ``awsworld upgrade`` offer for a step that keeps failing (a saga's compensation,
    say): once the run is moved, the step's next attempt runs the target's code. The retry message was queued by
    the old deployment, addressed to it; its delivery there reads the run's pin and hands it to the run's
    deployment, and the retry that deployment queues is addressed to itself. It ran every attempt on the old code,
    pinned to the new deployment all the while, until the retries ran out."""
    run = await stack.client.start(undo_v1, "i")
    for _ in range(600):  # until the first attempt has failed and the second waits its 4 s
        steps = await run.steps()
        if steps and steps[0].error is not None:
            break
        if stack.env is not None:
            await stack.env.idle()
        else:
            await asyncio.sleep(0.05)
    [failing] = await run.steps()
    assert (failing.status, failing.attempt) == ("pending", 1), failing
    await stack.deploy("v2", FIXED)
    moved = await stack.upgrade(run, "v2", FIXED)
    assert (moved.outcome, moved.source, moved.target) == ("moved", "v1", "v2")
    handed = stack.handed_over
    assert await run.result(timeout=30) == "fixed:i at attempt 3"
    assert await stack.pin(run) == "v2"
    assert stack.handed_over - handed == 2, "attempt 2's message: v2 to v1, back to v2; attempt 3's is v2's own"
    assert not [r for r in stack.results if r.status in ("error", "deployment-mismatch")]


async def test_an_upgrade_replays_an_unpinned_run_and_leaves_it_unpinned_for_the_next_deployment(
        stack: Stack) -> None:
    """A ``pinned=False`` run and one started on ``latest``, upgraded to v3: each is replayed against v3's code and
    woken, and stays unpinned, so v4, deployed after, runs the rest of it. The upgrade once pinned them to v3, where
    they stayed when v4 came (``awsworld deployments`` showed v3 draining), against what their user declared."""
    short = await stack.client.start(short_v1, "u")
    latest = await stack.client.options(deployment="latest").start(order_v1, "u")
    await stack.hook_ready("pin-short:u")
    await stack.hook_ready("pin-go:u")
    v3 = later_code("v3")
    await stack.deploy("v3", v3)
    for run in (short, latest):
        checked = await stack.upgrade(run, "v3", v3)
        assert (checked.outcome, checked.source, checked.target, checked.ok) == ("unpinned", None, "v3", True)
        assert checked.detail and "stays unpinned" in checked.detail, checked
    assert (await stack.pin(short), await stack.pin(latest)) == (None, "latest")
    assert await runs_on(stack.world, "v3") == []
    await stack.deploy("v4", later_code("v4"))
    await stack.client.resume_hook("pin-short:u", {})
    await stack.client.resume_hook("pin-go:u", {})
    assert await short.result(timeout=30) == "v4:u", "unpinned: the newest code, not the code it was upgraded to"
    assert await latest.result(timeout=30) == ["v1:u", "v4:u"]
    assert not [r for r in stack.results if r.status in ("error", "deployment-mismatch")]


async def test_a_start_can_name_its_deployment_or_take_the_latest(stack: Stack) -> None:
    latest = await stack.client.options(deployment="latest").start(order_v1, "g")
    await stack.hook_ready("pin-go:g")
    await stack.deploy("v3", V3)
    named = await stack.client.options(deployment="v1").start(order_v1, "h")  # v3 is live: pinned to v1 anyway
    await stack.hook_ready("pin-go:h")
    await stack.client.resume_hook("pin-go:g", {})
    await stack.client.resume_hook("pin-go:h", {})
    assert await latest.result(timeout=30) == ["v1:g", "v3:g"], "unpinned: the rest on the newest code"
    assert await named.result(timeout=30) == ["v1:h", "v1:h"]
    assert (await stack.pin(latest), await stack.pin(named)) == ("latest", "v1")


async def test_a_start_naming_a_deployment_its_run_cannot_be_pinned_to_is_refused_and_writes_nothing(
        stack: Stack) -> None:
    """A mistyped deployment, a retired one, one whose code lacks the workflow: each started a run that was
    re-routed until it failed ("could not be reached after 3 re-routes ... (retired, or its Lambda version
    deleted)", for a name that was only mistyped), or waited out the unknown-workflow window. Now the start raises
    ``DeploymentUnavailableError`` and records nothing: ``from awsworld import DeploymentUnavailableError`` (the
    error was in a private module only)."""
    with pytest.raises(DeploymentUnavailableError) as unknown:
        await stack.client.options(deployment="v9").start(order_v1, "i")
    assert isinstance(unknown.value, LookupError) and unknown.value.deployment == "v9"
    assert str(unknown.value) == ("deployment 'v9' cannot be reached: no deployment 'v9' is registered (registered: "
                                  "v1); `awsworld deployments` lists them, and nothing was started")
    await stack.deploy("v3", V3)  # v3's code has pin.order only
    with pytest.raises(DeploymentUnavailableError, match=r"deployment 'v3' does not register workflow 'pin\.short' "
                                                         r"\(its workflows: pin\.order\)"):
        await stack.client.options(deployment="v3").start(short_v1, "i")
    await stack.retire("v1")
    with pytest.raises(DeploymentUnavailableError, match="deployment 'v1' was retired: it runs nothing"):
        await stack.client.options(deployment="v1").start(order_v1, "i")
    page = await stack.world.runs.list(limit=10, resolve_data="none")
    assert page.data == [], "nothing recorded"
    run = await stack.client.options(deployment="v3").start(order_v3, "j")  # one it can be pinned to
    await stack.hook_ready("pin-go:j")
    assert await stack.pin(run) == "v3"
