"""Listing runs with ``Client.list_runs`` (docs: How-to / Find runs)."""

import asyncio

from awsworld import Client, step, workflow


@step(name="listing.work")
async def work(n: int) -> int:
    return n


@workflow(name="listing.job")
async def job(n: int) -> int:
    return await work(n)


# --8<-- [start:list]
async def failed_jobs(client: Client) -> list[str]:
    """Every failed run of ``job``, newest first, a page of 50 at a time."""
    run_ids: list[str] = []
    cursor: str | None = None
    while True:
        page = await client.list_runs(workflow=job, status="failed", limit=50, cursor=cursor)
        run_ids += [run.run_id for run in page.data]  # each a run record: status, times, error, ...
        if not page.has_more:
            return run_ids
        cursor = page.cursor
# --8<-- [end:list]


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        runs = [await env.client.start(job, n) for n in range(3)]
        for run in runs:
            await run.result()
        # --8<-- [start:recent]
        page = await env.client.list_runs(status=["running", "completed"], limit=2)  # any workflow, newest first
        for record in page.data:
            print(record.run_id, record.workflow_name, record.status, record.created_at)
        # --8<-- [end:recent]
        assert [r.run_id for r in page.data] == [runs[2].run_id, runs[1].run_id] and page.has_more
        rest = await env.client.list_runs(status=["running", "completed"], limit=2, cursor=page.cursor)
        assert [r.run_id for r in rest.data] == [runs[0].run_id] and not rest.has_more
        assert await failed_jobs(env.client) == []


if __name__ == "__main__":
    asyncio.run(main())
