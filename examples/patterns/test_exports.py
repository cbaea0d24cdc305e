from datetime import timedelta

import pytest

from awsworld import PollTimeoutError, WorkflowRunFailedError, poll_until, step, workflow
from awsworld.testing import WorkflowTestEnv

pytestmark = pytest.mark.asyncio

CHECKS = {"orders": 5, "events": 1000}  # stands in for an export service: checks until an export is done
JOBS: dict[str, int] = {}


@step(name="patterns.start_export")
async def start_export(table: str) -> str:
    job_id = f"export-{table}"
    JOBS[job_id] = CHECKS[table]
    return job_id


@step(name="patterns.export_status")
async def export_status(job_id: str) -> dict[str, str]:
    JOBS[job_id] -= 1
    return {"state": "SUCCEEDED" if JOBS[job_id] <= 0 else "RUNNING", "url": f"s3://exports/{job_id}.csv"}


@step(name="patterns.cancel_export")
async def cancel_export(job_id: str) -> None:
    JOBS.pop(job_id)


@workflow(name="patterns.export_table")
async def export_table(table: str) -> str:
    job_id = await start_export(table)
    try:
        status = await poll_until(export_status, job_id, predicate=lambda s: s["state"] != "RUNNING",
                                  interval="30s", backoff=2, max_interval="10m", timeout="2h")
    except PollTimeoutError:
        await cancel_export(job_id)
        raise
    return status["url"]


async def test_five_polls_cost_eleven_events(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(export_table, "orders")

    assert await run.result() == "s3://exports/export-orders.csv"
    events = await run.events()
    [poll] = [s for s in await run.steps() if s.step_name == "patterns.export_status"]
    assert len([e for e in events if e.correlation_id == poll.step_id]) == 2 * 5 + 1  # a loop would write 23
    assert len(events) == 2 + 3 + 11 + 1  # run created and started, the start step, the polls, run completed


async def test_a_job_still_running_after_two_hours_is_cancelled(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(export_table, "events")

    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result()
    assert failed.value.error_type == "PollTimeoutError"
    assert "export-events" not in JOBS
    [poll] = [s for s in await run.steps() if s.step_name == "patterns.export_status"]
    assert poll.attempt == 17  # 30 s, 1, 2, 4, 8 min apart, then every 10 min, and a last poll at 2 h
    times = [e.created_at for e in await run.events() if e.correlation_id == poll.step_id]
    assert timedelta(hours=2) <= times[-1] - times[0] < timedelta(hours=2, seconds=5)  # on the virtual clock
