"""Your first workflow (docs: Get started / Your first workflow)."""

# --8<-- [start:workflow]
import asyncio
from datetime import timedelta

from awsworld import create_hook, get_writable, sleep, step, workflow


@step(name="shop.charge", max_retries=3)  # retried on any exception; FatalError fails at once
async def charge(order_id: str, amount: float) -> str:
    # I/O belongs in steps: each runs once per successful attempt
    return f"receipt-{order_id}"


@step(name="shop.pack")
async def pack(order_id: str, item: str) -> str:
    await get_writable("progress").write(f"packed {item}\n")  # a stream clients read live
    return item


@workflow(name="shop.checkout")
async def checkout(order_id: str, items: list[str]) -> dict[str, object]:
    receipt = await charge(order_id, 42.5)  # runs inline when it can
    boxes = await asyncio.gather(*(pack(order_id, i) for i in items))  # N-1 queued, 1 inline
    await sleep(timedelta(hours=1))  # durable: no compute while waiting
    async with create_hook(token=f"approve:{order_id}") as hook:
        decision = await hook  # or: async for payload in hook
    return {"receipt": receipt, "boxes": boxes, "decision": decision}
# --8<-- [end:workflow]
