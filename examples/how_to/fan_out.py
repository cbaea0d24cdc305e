"""Fan-out with limits, branches and races (docs: How-to / Fan-out)."""

import asyncio
from typing import Any

from awsworld import first_successful, map, parallel, step, with_name, workflow


@step(name="fanout.print_label")
async def print_label(order_id: str) -> str:
    return f"label-{order_id}"


@step(name="fanout.fetch_user")
async def fetch_user(uid: str) -> dict[str, str]:
    return {"id": uid, "name": "Dana"}


@step(name="fanout.fetch_orders")
async def fetch_orders(uid: str) -> list[str]:
    return ["A-17", "A-18"]


@step(name="fanout.load_prefs")
async def load_prefs(uid: str) -> dict[str, bool]:
    return {"newsletter": False}


@step(name="fanout.quote_from")
async def quote_from(carrier: str, parcel: str) -> float:
    if carrier == "slowpost":
        raise ConnectionError("slowpost is down")
    return {"parcelco": 7.5, "fastship": 9.0}[carrier]


@step(name="fanout.charge")
async def charge(order_id: str) -> str:
    return f"receipt-{order_id}"


@workflow(name="fanout.labels")
async def labels(order_ids: list[str]) -> list[str]:
    # --8<-- [start:map]
    labels = (await map(print_label, order_ids, max_concurrency=10, tolerated_failure_fraction=0.05)).values()
    # --8<-- [end:map]
    return labels


@workflow(name="fanout.profile")
async def profile(uid: str) -> dict[str, Any]:
    # --8<-- [start:parallel]
    user, orders, prefs = (await parallel(fetch_user(uid), fetch_orders(uid), lambda: load_prefs(uid),
                                          names=["user", "orders", "prefs"])).values()
    # --8<-- [end:parallel]
    return {"user": user, "orders": orders, "prefs": prefs}


@workflow(name="fanout.cheapest_quote")
async def first_quote(parcel: str) -> float:
    # --8<-- [start:race]
    quote = await first_successful(quote_from("slowpost", parcel), quote_from("parcelco", parcel))
    # --8<-- [end:race]
    return quote


@workflow(name="fanout.named_charge")
async def named_charge(order_id: str) -> str:
    # --8<-- [start:names]
    receipt = await with_name("charge card").call(charge, order_id)  # shown as: charge card (fanout.charge)
    # --8<-- [end:names]
    return receipt


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        assert await (await env.client.start(labels, [f"A-{n}" for n in range(25)])).result() == [
            f"label-A-{n}" for n in range(25)]
        assert await (await env.client.start(profile, "u-1")).result() == {
            "user": {"id": "u-1", "name": "Dana"}, "orders": ["A-17", "A-18"], "prefs": {"newsletter": False}}
        assert await (await env.client.start(first_quote, "p-1")).result() == 7.5
        run = await env.client.start(named_charge, "A-17")
        assert await run.result() == "receipt-A-17"
        names = [e.event_data.get("displayName") for e in await run.events() if e.event_type == "step_created"
                 and e.event_data]
        assert names == ["charge card"], names


if __name__ == "__main__":
    asyncio.run(main())
