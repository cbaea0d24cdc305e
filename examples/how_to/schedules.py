"""Schedules: declared in code, and made at run time (docs: How-to / Schedules)."""

import asyncio
from datetime import UTC, date, datetime, timedelta

from awsworld import Client, Schedule, schedule_info, step, workflow


@step(name="schedules.build_report")
async def build_report(region: str, day: date) -> str:
    return f"report-{region}-{day.isoformat()}"


# --8<-- [start:declared]
@workflow(name="reports.nightly", schedule=Schedule(cron="0 2 * * *", timezone="Europe/Berlin", args=("eu",)))
async def nightly_report(region: str) -> str:
    info = schedule_info()  # which schedule and which nominal tick started this run (None otherwise)
    assert info is not None
    return await build_report(region, day=info.tick.date())
# --8<-- [end:declared]


@workflow(name="shop.sync")
async def sync_shop(region: str) -> None: ...


async def manage(client: Client, start: datetime, end: datetime) -> list[datetime]:
    # --8<-- [start:runtime]
    await client.schedules.create("eu-sync", sync_shop, Schedule(every="15m", offset="5m", args=("eu",)))
    upcoming = (await client.schedules.describe("eu-sync")).upcoming  # the next fire times
    await client.schedules.pause("eu-sync", note="supplier outage")
    await client.schedules.resume("eu-sync")
    await client.schedules.trigger("eu-sync")  # a run now, under the overlap policy
    await client.schedules.backfill("eu-sync", start, end)  # a run for every tick in [start, end)
    await client.schedules.delete("eu-sync")
    # --8<-- [end:runtime]
    return upcoming


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    start = datetime(2026, 3, 1, tzinfo=UTC)
    async with WorkflowTestEnv(start_time=start, schedules=[nightly_report]) as env:
        await env.sleep(timedelta(days=3))  # three nights at 02:00 Berlin, on the virtual clock
        runs = (await env.client.list_runs(workflow=nightly_report)).data
        assert len(runs) == 3, runs
        assert sorted([await env.client.get_run(r.run_id).result() for r in runs]) == [
            "report-eu-2026-03-01", "report-eu-2026-03-02", "report-eu-2026-03-03"]
        upcoming = await manage(env.client, start, start + timedelta(hours=1))
        assert upcoming[0] == datetime(2026, 3, 4, 0, 5, tzinfo=UTC), upcoming
        synced = (await env.client.list_runs(workflow="shop.sync")).data
        assert len(synced) == 1 + 4, synced  # the trigger, and the backfill's 4 ticks (:05, :20, :35, :50)


if __name__ == "__main__":
    asyncio.run(main())
