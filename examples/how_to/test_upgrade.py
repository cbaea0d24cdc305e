"""A test that a change cannot move a run in flight: two versions side by side in ``WorkflowTestEnv`` (docs: How-to /
Changing code safely, "In tests"). The run stays on the code it started on and finishes there."""

# --8<-- [start:test]
import patched_checkout  # the code deployed now: runs in flight started on it
import pytest

from awsworld import create_hook, step, workflow
from awsworld.testing import Registry, WorkflowTestEnv

NEXT = Registry()  # the change, a second definition of the same workflow: registered here only
with NEXT.capture():
    @step(name="patched.audit")
    async def audit(order: str) -> str:
        return f"audited {order}"

    @workflow(name="patched.checkout")
    async def checkout(order: str) -> dict[str, str]:
        await audit(order)  # a call inserted first: a run that reserved on the old code cannot replay this
        reservation = await patched_checkout.reserve(order)
        async with create_hook(token=f"pay:{order}") as paid:
            await paid
        receipt = await patched_checkout.charge_with_tax(order, 0.2)
        async with create_hook(token=f"ship:{order}") as shipped:
            await shipped
        return {"reservation": reservation, "receipt": receipt}


@pytest.mark.asyncio
async def test_a_run_in_flight_stays_on_its_code_when_the_change_does_not_replay_it() -> None:
    async with WorkflowTestEnv(deployment="v1") as env:
        run = await env.client.start(patched_checkout.checkout, "A-17")
        await run.wait_for_hook("pay:A-17")
        await env.deploy("v2", NEXT)  # new runs start on v2; A-17 stays pinned to v1
        moved = await env.upgrade(run.run_id, to="v2")  # what `awsworld upgrade` would do with it
        assert moved.outcome == "diverged", moved
        assert moved.detail is not None and "audit('A-17')" in moved.detail
        for token in ("pay:A-17", "ship:A-17"):
            await run.wait_for_hook(token)
            await env.client.resume_hook(token, "ok")
        assert (await run.result())["receipt"] == "charged A-17 with tax 0.2"  # v1's patched() branch
# --8<-- [end:test]
