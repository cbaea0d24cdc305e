from datetime import timedelta

import pytest

from awsworld import RetryableError, create_hook, sleep, step, step_metadata, workflow
from awsworld.testing import WorkflowTestEnv

pytestmark = pytest.mark.asyncio  # or asyncio_mode = "auto" in your pytest configuration


@step(max_retries=3, retry_delay=60)
async def reserve(order_id: str) -> str:
    if step_metadata().attempt < 3:                  # the warehouse is busy twice
        raise RetryableError("warehouse busy")
    return f"reservation-{order_id}"


@workflow
async def order(order_id: str) -> dict[str, str]:
    reservation = await reserve(order_id)           # retried 60 s apart: skipped in the test
    await sleep(timedelta(days=30))                  # skipped too
    async with create_hook(token=f"ship:{order_id}") as hook:
        carrier = await hook
    return {"reservation": reservation, "carrier": carrier}


async def test_an_order_ships_after_a_month(awsworld_env: WorkflowTestEnv) -> None:
    start = awsworld_env.now()
    run = await awsworld_env.client.start(order, "A-17")
    await run.wait_for_hook("ship:A-17")             # runs (and skips time) until the hook exists
    await awsworld_env.client.resume_hook("ship:A-17", "parcel-post")

    assert await run.result() == {"reservation": "reservation-A-17", "carrier": "parcel-post"}
    [step] = await run.steps()
    assert (step.status, step.attempt) == ("completed", 3)
    assert awsworld_env.now() - start >= timedelta(days=30)
