"""Child workflows: awaited, started and left running, detached (docs: How-to / Child workflows)."""

import asyncio

from awsworld import child_options, map, start_child, step, workflow


@step(name="children.ship")
async def ship(order_id: str) -> str:
    return f"tracking-{order_id}"


@step(name="children.log")
async def log(line: str) -> None: ...


@workflow(name="children.ship_order")
async def ship_order(order_id: str) -> dict[str, str]:
    return {"order": order_id, "tracking": await ship(order_id)}


@workflow(name="children.audit_orders")
async def audit_orders(orders: list[str]) -> int:
    for order in orders:
        await log(f"audited {order}")
    return len(orders)


@workflow(name="children.send_survey")
async def send_survey(order_id: str) -> None: ...


# --8<-- [start:children]
@workflow(name="children.ship_all")
async def ship_all(orders: list[str]) -> list[dict[str, str]]:
    audit = await start_child(audit_orders, orders)  # another @workflow: runs on while we ship
    shipped = await asyncio.gather(*(ship_order(o) for o in orders))  # one child run per order, awaited
    await child_options(detached=True).start(send_survey, orders[0])  # outlives our cancellation
    await audit
    return list(shipped)
# --8<-- [end:children]


@step(name="children.bill")
async def bill(account: str) -> int:
    return 100


# --8<-- [start:map-children]
@workflow(name="children.bill_chunk")
async def bill_chunk(accounts: list[str]) -> int:  # a run of its own: its own head, log and partition
    return sum(await asyncio.gather(*(bill(a) for a in accounts)))


@workflow(name="children.bill_everyone")
async def bill_everyone(accounts: list[str]) -> int:
    chunks = [accounts[i:i + 100] for i in range(0, len(accounts), 100)]
    return sum((await map(bill_chunk, chunks, max_concurrency=10)).values())  # a child run per chunk
# --8<-- [end:map-children]


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        run = await env.client.start(ship_all, ["A-1", "A-2"])
        assert await run.result() == [{"order": "A-1", "tracking": "tracking-A-1"},
                                      {"order": "A-2", "tracking": "tracking-A-2"}]
        children = await run.children()
        assert len(children) == 4  # the audit, two shipments, the survey
        assert {((await child.get()).execution_context or {}).get("parentRunId") for child in children} == {run.run_id}
        everyone = await env.client.start(bill_everyone, [f"acct-{n}" for n in range(250)])
        assert await everyone.result() == 250 * 100
        assert len(await everyone.children()) == 3


if __name__ == "__main__":
    asyncio.run(main())
