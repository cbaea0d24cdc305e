"""A run pinned to its deployment that parks on that deployment's own code (a workflow that reads something that
changes between replays) stays there when a fix is deployed: its deliveries keep going to the code it is pinned to,
which keeps diverging. What it says about itself must be the way out that works, ``awsworld upgrade RUN`` to the
fix (``Upgrade``, after a replay there), not "deploy a fix and the run resumes", which it said: the flow's log line
and ``awsworld describe`` both. Then the upgrade moves it and it finishes on the fix. In memory, on a virtual clock
(its hourly redeliveries take no time)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import pytest

from awsworld import create_hook, step, workflow
from awsworld._engine.parking import PARKED_ATTRIBUTE, parked_run
from awsworld.authoring.definitions import Registry, WorkflowDef
from awsworld.cli.describe import _print_description, describe_document
from awsworld.client.client import Run
from awsworld.testing import WorkflowTestEnv
from awsworld.world.messages import OPERATOR_WAKE

STATE = {"mode": "one"}
V1 = Registry()
V2 = Registry()

with V1.capture():
    @step(name="pinpark.tag")
    async def tag_v1(x: str) -> str:
        return x

    @workflow(name="pinpark.order")
    async def order_v1(x: str) -> str:
        await tag_v1(f"{x}-one")
        await create_hook(token=f"pinpark:{x}")
        return await tag_v1(x)


async def reads_process_state(x: str) -> str:
    """v1's code as a replay on a fresh container meets it: its first call's argument read from process state."""
    await tag_v1(f"{x}-{STATE['mode']}")
    await create_hook(token=f"pinpark:{x}")
    return await tag_v1(x)


with V2.capture():
    @step(name="pinpark.tag")
    async def tag_v2(x: str) -> str:
        return f"v2 {x}"

    @workflow(name="pinpark.order")
    async def order_v2(x: str) -> str:  # the fix: what the run recorded, whatever the process holds
        await tag_v2(f"{x}-one")
        await create_hook(token=f"pinpark:{x}")
        return await tag_v2(x)


async def parked_on_v1(env: WorkflowTestEnv, monkeypatch: pytest.MonkeyPatch, x: str) -> Run[str]:
    """A run of v1's ``pinpark.order`` parked on v1's own code: it reached its hook, then v1's code read process
    state that changed (``reads_process_state``) when the hook's resume replayed it."""
    run = await env.client.start(order_v1, x)
    await run.wait_for_hook(f"pinpark:{x}")
    monkeypatch.setitem(V1.workflows, "pinpark.order", WorkflowDef("pinpark.order", reads_process_state))
    monkeypatch.setitem(STATE, "mode", "two")
    await env.client.resume_hook(f"pinpark:{x}", "ok")
    await env.idle()
    view = await env.world.runs.get(run.run_id, resolve_data="none")
    assert parked_run(view.status, view.attributes) is not None, view.attributes
    return run


async def test_a_pinned_run_parked_on_its_own_code_says_to_upgrade_it_and_an_upgrade_resumes_it(
        monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("AWSWORLD_ON_DIVERGENCE", "park")
    caplog.set_level(logging.WARNING, logger="awsworld.flow")
    async with WorkflowTestEnv(registry=V1, deployment="v1") as env:
        run = await parked_on_v1(env, monkeypatch, "a")

        upgrade = (f"it is pinned to deployment v1, whose own code it diverges on, and stays there: deploy code "
                   f"that replays it (a patched() branch around what differs, docs/how-to/changing-code.md) and "
                   f"move it to that code with `awsworld upgrade {run.run_id}` (`awsworld dev` moves it by itself "
                   f"at the reload that brings it); `awsworld fail {run.run_id}` ends it instead")
        [said] = [r.getMessage() for r in caplog.records if r.getMessage().startswith(f"run {run.run_id} is parked")]
        assert upgrade in said and "and the run resumes" not in said, said
        _print_description(await describe_document(env.client, run.run_id))
        described = capsys.readouterr().out
        assert f"          {upgrade}; `awsworld replay {run.run_id} -m MODULE` shows the arguments\n" in described, \
            described

        await env.deploy("v2", V2)  # the fix: it does not reach the run, whose redeliveries go to v1
        await env.sleep(timedelta(hours=3))
        view = await env.world.runs.get(run.run_id, resolve_data="none")
        assert view.status == "running" and PARKED_ATTRIBUTE in view.attributes, view.attributes

        moved = await env.upgrade(run.run_id, to="v2")
        assert (moved.outcome, moved.source, moved.target) == ("moved", "v1", "v2"), moved
        assert await run.result(timeout=30) == "v2 a", "the rest of the run on the fix"
        view = await env.world.runs.get(run.run_id, resolve_data="none")
        assert PARKED_ATTRIBUTE not in view.attributes


async def test_an_upgrade_cut_off_before_its_wake_is_finished_by_running_it_again(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The upgrade pins the parked run to the fix, then its wake is lost (the operator's process dies before the
    send). Run again, it finds the run on the fix already (``current``) and wakes it there: it said so and did
    nothing, and the run waited for its hourly redelivery, told it was on the fix."""
    monkeypatch.setenv("AWSWORLD_ON_DIVERGENCE", "park")
    async with WorkflowTestEnv(registry=V1, deployment="v1") as env:
        run = await parked_on_v1(env, monkeypatch, "b")
        await env.deploy("v2", V2)

        sends = env.world.queue

        async def dies_at_the_wake(queue: str, payload: dict[str, Any], **options: Any) -> Any:
            if payload.get("wake") == OPERATOR_WAKE:
                raise ConnectionError("the operator's process died before the wake was sent")
            return await sends(queue, payload, **options)

        monkeypatch.setattr(env.world, "queue", dies_at_the_wake)
        with pytest.raises(ConnectionError):
            await env.upgrade(run.run_id, to="v2")
        monkeypatch.setattr(env.world, "queue", sends)

        again = await env.upgrade(run.run_id, to="v2")
        assert (again.outcome, again.source, again.target) == ("current", "v2", "v2"), again
        before = env.clock.now()
        await env.idle()
        view = await env.world.runs.get(run.run_id, resolve_data="none")
        assert view.status == "completed" and env.clock.now() - before < timedelta(minutes=1), \
            "woken now, not at its hourly redelivery"
        assert await run.result() == "v2 b"
