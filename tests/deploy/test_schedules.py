"""Schedules on the deployed path: the tick message through the real Lambda flow handler syncs the schedules
the function's ``AWSWORLD_MODULES`` declare (no template edit), fires a due tick once however many tick
messages arrive, and the flow handler runs the scheduled run to its end."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from awsworld._worker.tick import TICK_BODY
from awsworld.local import LocalAWS
from awsworld.world import schedule_timing as timing
from awsworld.world.entities import TERMINAL_RUN_STATUSES
from awsworld.world.schedules import schedule_run_id
from schedules.helpers import scheduled_runs  # tests/schedules (tests/ is on sys.path)

from . import app, scheduled
from .conftest import json_lines
from .lambda_env import EventSourceMapping


@pytest.fixture(scope="module")
def lambda_environment(lambda_environment: dict[str, str]) -> Iterator[dict[str, str]]:
    """The deploy environment, with the module declaring a schedule beside the usual one."""
    modules = f"{app.__name__},{scheduled.__name__}"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("AWSWORLD_MODULES", modules)
        yield {**lambda_environment, "AWSWORLD_MODULES": modules}


async def _tick(local: LocalAWS, times: int = 1) -> None:
    sqs = await local.world.clients.sqs()
    for _ in range(times):
        await sqs.send_message(QueueUrl=local.world.config.queue_url, MessageBody=TICK_BODY)


def _jobs(captured: str) -> list[dict[str, Any]]:
    return [line["jobs"]["schedules"] for line in json_lines(captured) if line.get("message") == "tick handled"]


async def test_a_declared_schedule_reaches_the_stack_and_fires_once_per_tick(
        local: LocalAWS, esm: EventSourceMapping, capsys: Any) -> None:
    await _tick(local)
    invocation = await esm.poll()
    assert invocation is not None and not invocation.failed
    assert [job["synced"] for job in _jobs(capsys.readouterr().out)] == [1], "the first tick stored it"
    stored = await local.world.schedules.get(scheduled.SCHEDULE_ID)
    assert (stored.source, stored.module, stored.workflow_name) == ("code", scheduled.__name__,
                                                                    "deploy.scheduled_report")
    # Three minutes pass with the function idle (its ticks lost, say): the record as it would stand then.
    earlier = datetime.now(UTC) - timedelta(minutes=3)
    assert await local.world.schedules.write(
        replace(stored, cursor=earlier, next_at=timing.next_after(stored.spec, earlier), version=stored.version + 1),
        expected_version=stored.version)
    await _tick(local, times=3)  # a tick and two duplicates (redelivered, or a retried schedule invocation)
    ticks: list[dict[str, Any]] = []
    while len(ticks) < 3:
        ticks.extend(await esm.receive())
    assert all("awsworldTick" in m["Body"] for m in ticks)
    for batch in (ticks[:2], ticks[2:]):  # two in one invocation's batch, the third in an invocation of its own
        assert not (await esm.invoke(batch)).failed
    assert sorted(job["started"] for job in _jobs(capsys.readouterr().out)) == [0, 0, 1]
    runs = await scheduled_runs(local.world, scheduled.SCHEDULE_ID)
    assert len(runs) == 1, runs
    [run] = runs
    state = await local.world.schedules.get(scheduled.SCHEDULE_ID)
    assert run.tick == state.last_tick and run.run_id == schedule_run_id(scheduled.SCHEDULE_ID, run.tick)
    assert (state.fired, state.missed, state.pending) == (1, 2, ()), "catchup latest: the most recent tick"
    assert local.client is not None
    handle = local.client.get_run(run.run_id)

    async def ended() -> bool:
        return await handle.status() in TERMINAL_RUN_STATUSES

    await esm.run_until(ended, timeout=60)
    assert await handle.result(timeout=1) == {"length": len(scheduled.BLOB), "tick": run.tick.isoformat(),
                                              "schedule": scheduled.SCHEDULE_ID, "trigger": "tick"}
