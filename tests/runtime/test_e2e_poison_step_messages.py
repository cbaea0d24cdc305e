"""A step message for a step its run does not have (forged, corrupted, another stack's), naming a step this
deployment lacks, is a poison record: dead-lettered on its first receive with its reason, and the run goes on.
It used to be taken for code a deploy was still rolling out: retried for the unknown-code window, then the healthy
run failed with ``UNKNOWN_WORKFLOW`` (parked, under ``awsworld dev``). In memory and on the emulator (moto)."""

from __future__ import annotations

import uuid

import pytest

from awsworld import create_hook, step, workflow
from awsworld.world.messages import FlowMessage, queue_name_for

from .conftest import BOTH, E2E, on_backends, with_env

e2e_backend = on_backends(BOTH)
local_env = with_env({"AWSWORLD_UNKNOWN_WORKFLOW_WINDOW_SECONDS": "2", "AWSWORLD_FAILURE_BACKOFF_SECONDS": "1"})


@step(name="poison_test.hold")
async def hold(key: str) -> str:
    return key


@workflow(name="poison_test.waits")
async def waits(key: str) -> object:
    await hold(key)  # step_1
    async with create_hook(token=f"poison-test:{key}") as hook:
        return await hook


@pytest.mark.parametrize("step_id", ["step_99", "step_1"])  # no such step; a step of another name
async def test_a_step_message_for_a_step_the_run_lacks_is_dead_lettered_and_the_run_goes_on(
        e2e: E2E, step_id: str) -> None:
    key = uuid.uuid4().hex
    run = await e2e.start(waits, key)
    await e2e.hook_ready(f"poison-test:{key}", run)
    await e2e.idle()
    before = len(e2e.poller.results)
    bogus = FlowMessage(run.run_id, "poison_test.waits", step_id, "poison_test.nowhere")
    await e2e.world.queue(queue_name_for("poison_test.waits"), bogus.to_payload())
    await e2e.idle()
    assert [r.status for r in e2e.poller.results[before:]] == ["dead-lettered"]
    await e2e.sleep(3)  # past the unknown-code window (2 s here) a retried record would have reached
    assert await run.status() == "running" and (await run.get()).attributes.get("awsworld.delivery") is None
    await e2e.client.resume_hook(f"poison-test:{key}", "approved")
    assert await run.result(timeout=30) == "approved"
