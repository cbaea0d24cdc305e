"""``awsworld dev``'s tick (``LocalPoller`` with ``tick_seconds``): the first runs as the poller starts, the next ones
on the wall clock's multiples of ``tick_seconds``, so a declared schedule is stored at once and one due on the
minute fires within a moment of it (``src/awsworld/local/poller.py``)."""

from __future__ import annotations

import asyncio

import pytest

from awsworld import Schedule, workflow
from awsworld._worker.dispatch import Worker
from awsworld.authoring.definitions import Registry
from awsworld.local import LocalAWS, MotoServer
from awsworld.local.poller import TICK_LAG, LocalPoller, _until_next_multiple  # pyright: ignore[reportPrivateUsage]
from awsworld.schedules.declared import declared_for

REGISTRY = Registry()


with REGISTRY.capture():
    @workflow(name="tick.hourly", schedule=Schedule(id="tick-hourly", every="1h"))
    async def hourly() -> str:
        return "ran"


@pytest.mark.parametrize(("now", "wait"), [(120.0, 10.0), (125.5, 4.5), (129.99, 0.01)])
def test_the_next_tick_is_just_after_the_next_multiple(now: float, wait: float) -> None:
    assert _until_next_multiple(now, 10.0) == pytest.approx(wait + TICK_LAG)


async def test_the_first_tick_runs_as_the_poller_starts_and_stores_the_declared_schedules(
        moto_server: MotoServer) -> None:
    async with LocalAWS("moto", moto=moto_server, run_workflows=False) as local:
        world = local.world
        world.schedules.declared = declared_for([hourly])
        assert [s.schedule_id for s in await world.schedules.list()] == []
        poller = LocalPoller(world, Worker(world, REGISTRY), tick_seconds=3600)  # no second tick in this test
        poller.start()
        try:
            for _ in range(200):  # the first tick's requests to the emulator: well under 10 s
                if await world.schedules.list():
                    break
                await asyncio.sleep(0.05)
            stored = await world.schedules.list()
        finally:
            await poller.stop()
        assert poller.ticks == 1
        assert [(s.schedule_id, s.source) for s in stored] == [("tick-hourly", "code")]
