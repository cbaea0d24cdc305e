"""Flow control across runs: concurrency per key, totals, rate limits, priority (docs: How-to / Flow control)."""

import asyncio

from awsworld import Client, Concurrency, RateLimit, step, workflow


@step(name="flow.pack")
async def pack(order_id: str) -> str:
    return f"packed-{order_id}"


@step(name="flow.write_export")
async def write_export(tenant: str, job: str) -> str:
    return f"{tenant}/{job}.csv"


# --8<-- [start:runs]
@workflow(name="flow.process_order", concurrency=Concurrency(1, key=lambda customer, order_id: customer))
async def process_order(customer: str, order_id: str) -> str:  # one run per customer at a time
    return await pack(order_id)


@workflow(name="flow.sync_tenant", concurrency=Concurrency(1, key=lambda tenant: tenant, on_busy="skip"))
async def sync_tenant(tenant: str) -> None:  # a singleton per tenant: a start while one runs is skipped
    ...                                      # (on_busy="cancel": the new one replaces it)


@workflow(name="flow.export", concurrency=Concurrency(total=20, key=lambda tenant, job: tenant))
async def export(tenant: str, job: str) -> str:  # 20 in all; the tenants waiting take turns
    return await write_export(tenant, job)
# --8<-- [end:runs]


# --8<-- [start:steps]
@step(name="flow.render", concurrency=20)  # 20 attempts at once, across every run
async def render(page: int) -> bytes:
    return b"%d" % page


@step(name="flow.charge", rate=RateLimit("50/s", burst=10, name="payments-api"))  # shared by every step naming it
async def charge(customer: str, cents: int) -> str:
    return f"charge-{customer}-{cents}"


@workflow(name="flow.checkout")
async def checkout(customer: str, pages: int) -> str:
    await asyncio.gather(*(render(p) for p in range(pages)))
    return await charge(customer, 4200)
# --8<-- [end:steps]


async def start_with_options(client: Client) -> str:
    # --8<-- [start:options]
    run = await client.options(concurrency_key="vip-7", priority=5).start(process_order, "c7", "A-17")
    # --8<-- [end:options]
    return await run.result()


async def manage(client: Client) -> str:
    # --8<-- [start:runtime]
    await client.limits.list()                                       # every limit used so far, its keys
    view = await client.limits.describe(process_order, key="c7")     # holders, waiters in order, tokens
    await client.limits.set(process_order, key="c7", concurrency=3)  # waiting runs that now fit start at once
    await client.limits.set(export, total=40)                        # a limit's total
    await client.limits.set("payments-api", rate="20/s", burst=5)
    await client.limits.pause(render)   # no new slot or token for the key ("" for an unkeyed limit)
    await client.limits.resume(render)
    await client.limits.reset(process_order, key="c7")  # the code's numbers again
    await client.limits.reset(export, total=True)       # the code's total again
    # --8<-- [end:runtime]
    return view.name


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        runs = [await env.client.start(process_order, f"c{n % 3}", f"A-{n}") for n in range(9)]
        assert [await r.result() for r in runs] == [f"packed-A-{n}" for n in range(9)]
        exports = [await env.client.start(export, f"t{n % 2}", f"j{n}") for n in range(4)]
        assert [await r.result() for r in exports] == [f"t{n % 2}/j{n}.csv" for n in range(4)]
        assert await (await env.client.start(checkout, "c1", 3)).result() == "charge-c1-4200"
        assert await start_with_options(env.client) == "packed-A-17"
        assert await manage(env.client) == "workflow:flow.process_order"


if __name__ == "__main__":
    asyncio.run(main())
