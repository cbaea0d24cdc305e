"""Branching on a code change with ``patched()`` (docs: How-to / Changing code safely).

Runs recorded before the change take the old branch on replay; ``tests/runtime/test_patched.py`` deploys this
change under a run in flight, in memory and on the emulator."""

import asyncio

from awsworld import create_hook, patched, step, workflow


@step(name="patched.reserve")
async def reserve(order: str) -> str:
    return f"reserved {order}"


@step(name="patched.charge_old")
async def charge_old(order: str) -> str:
    return f"charged {order}"


@step(name="patched.charge_with_tax")
async def charge_with_tax(order: str, rate: float) -> str:
    return f"charged {order} with tax {rate}"


# --8<-- [start:patched]
@workflow(name="patched.checkout")
async def checkout(order: str) -> dict[str, str]:
    reservation = await reserve(order)
    async with create_hook(token=f"pay:{order}") as paid:
        await paid
    if patched("charge-with-tax"):
        receipt = await charge_with_tax(order, 0.2)  # runs that reach this point on the new code
    else:
        receipt = await charge_old(order)  # runs that had already charged on the old code
    async with create_hook(token=f"ship:{order}") as shipped:
        await shipped
    return {"reservation": reservation, "receipt": receipt}
# --8<-- [end:patched]


async def main() -> list[str]:
    """A new run takes the new branch; returns its log as ``awsworld export`` writes it."""
    from awsworld.client.replay import export_lines
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        run = await env.client.start(checkout, "A-17")
        for token in ("pay:A-17", "ship:A-17"):
            await run.wait_for_hook(token)
            await env.client.resume_hook(token, "ok")
        assert await run.result() == {"reservation": "reserved A-17", "receipt": "charged A-17 with tax 0.2"}
        return export_lines(await run.events())


if __name__ == "__main__":
    asyncio.run(main())
