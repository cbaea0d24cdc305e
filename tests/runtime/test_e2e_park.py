"""``AWSWORLD_ON_DIVERGENCE=park``: a run whose code diverged stays ``running`` and is redelivered with a long
back-off (here 1 s) instead of failing, so rolling the code back recovers it. In memory: the back-offs pass in
virtual time (``e2e.sleep``), and their length is checked on the log's timestamps."""

from __future__ import annotations

import asyncio
import uuid
from datetime import timedelta

import pytest

from awsworld import create_hook, step, workflow

from .conftest import deployed, with_env

local_env = with_env({"AWSWORLD_ON_DIVERGENCE": "park", "AWSWORLD_PARK_SECONDS": "1"})


@step
async def confirm(payload: str) -> str:
    return f"confirmed {payload}"


@step
async def new_first_step() -> str:
    return "new"


@workflow
async def waits_for_approval(token: str) -> str:
    payload = await create_hook(token=token)
    return await confirm(payload)


async def broken_deploy(token: str) -> str:
    await new_first_step()
    payload = await create_hook(token=token)
    return await confirm(payload)


async def test_a_parked_run_keeps_running_and_a_rollback_recovers_it(e2e) -> None:
    token = f"approve-{uuid.uuid4().hex}"
    run = await e2e.start(waits_for_approval, token)
    await e2e.hook_ready(token, run)
    await e2e.idle()
    seen = len(e2e.poller.results)
    with deployed(waits_for_approval, broken_deploy):  # rolled back when the block ends
        await e2e.client.resume_hook(token, "yes")
        await e2e.idle()
        first_park = e2e.env.now()
        assert [r.status for r in e2e.poller.results[seen:]] == ["diverged"] * 3 + ["parked"]
        while sum(r.status == "parked" for r in e2e.poller.results[seen:]) < 2:
            assert e2e.env.now() - first_park < timedelta(seconds=5), [r.status for r in e2e.poller.results[seen:]]
            e2e.env.advance(0.1)
            await e2e.idle()
        backoff = e2e.env.now() - first_park
        assert timedelta(seconds=1) <= backoff < timedelta(seconds=1.5), f"parked for {backoff}, not 1 s"
        assert await run.status() == "running"
        types = [e.event_type for e in await run.events()]
        assert "run_failed" not in types and "step_created" not in types
    assert await run.result(timeout=20) == "confirmed yes"
    statuses = [r.status for r in e2e.poller.results[seen:]]
    assert statuses[:3] == ["diverged"] * 3, statuses
    assert "failed" not in statuses


async def test_env_sleep_returns_after_its_duration_while_a_parked_run_keeps_coming_back(e2e) -> None:
    token = f"approve-{uuid.uuid4().hex}"
    run = await e2e.start(waits_for_approval, token)
    await e2e.hook_ready(token, run)
    await e2e.idle()
    with deployed(waits_for_approval, broken_deploy):
        await e2e.client.resume_hook(token, "yes")  # diverges, parks, comes back every second
        began = e2e.env.now()
        for _ in range(5):
            await asyncio.wait_for(e2e.sleep(0.1), timeout=1)
        moved = e2e.env.now() - began
        assert moved < timedelta(seconds=1.5), f"5 x env.sleep(0.1) moved the clock {moved}"
    assert await run.result(timeout=20) == "confirmed yes"


def test_parked_deliveries_are_counted_for_the_alarm(monkeypatch: pytest.MonkeyPatch) -> None:
    from awsworld._worker.dispatch import Outcome
    from awsworld.lambda_host import observability

    counted: list[tuple[str, float]] = []
    monkeypatch.setattr(observability, "count", lambda name, value=1: counted.append((name, value)))
    observability.record_outcome(Outcome("parked"))
    observability.record_outcome(Outcome("step-then-parked"))
    observability.record_outcome(Outcome("diverged"))
    assert counted.count((observability.RUNS_PARKED, 1)) == 2
    assert observability.RUNS_PARKED in observability.METRIC_NAMES
