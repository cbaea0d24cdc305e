"""The demo's order workflow: a gather of steps, a step that fails once and is retried, a short durable
sleep, a hook the customer resumes, and a stream of progress a client reads while the run goes on."""

from __future__ import annotations

import asyncio

from awsworld import create_hook, get_writable, sleep, step, step_metadata, workflow

_attempts: dict[str, int] = {}


@step(name="order.reserve")
async def reserve(item: str) -> dict:
    return {"item": item, "reserved": True}


@step(name="order.charge", max_retries=3, retry_delay=1.0)
async def charge(order_id: str, amount: float) -> str:
    """Fails on its first attempt (a flaky payment API), succeeds on the next."""
    _attempts[order_id] = _attempts.get(order_id, 0) + 1
    if step_metadata().attempt == 1:
        raise ConnectionError("payment API timed out")
    return f"receipt-{order_id}"


@step(name="order.pack")
async def pack(order_id: str, items: list[str]) -> int:
    progress = get_writable("progress")
    for item in items:
        await progress.write(f"packed {item}\n")
    await progress.close()
    return len(items)


@step(name="order.ship")
async def ship(order_id: str, address: str) -> str:
    return f"tracking-{order_id}"


@workflow(name="order.process")
async def process_order(order_id: str, items: list[str], amount: float) -> dict:
    reservations = await asyncio.gather(*(reserve(item) for item in items))
    receipt = await charge(order_id, amount)
    boxes = await pack(order_id, items)
    await sleep(2)  # durable: no compute runs while it waits
    async with create_hook(token=f"address:{order_id}") as hook:
        address = await hook
    tracking = await ship(order_id, address["address"])
    return {"order": order_id, "reserved": len(reservations), "receipt": receipt, "boxes": boxes,
            "tracking": tracking}
