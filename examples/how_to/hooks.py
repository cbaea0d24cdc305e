"""Hooks: a timeout, heartbeats, a failed hook and a webhook (docs: How-to / Hooks and approvals)."""

import asyncio
from datetime import timedelta

from awsworld import (
    HookFailedError,
    HookHeartbeatTimeoutError,
    HookTimeoutError,
    WebhookRequest,
    create_hook,
    create_webhook,
    resume_hook,
    step,
    workflow,
)
from awsworld.world import HookNotFoundError


@step(name="hooks.notify")
async def notify(to: str, text: str) -> None: ...


@step(name="hooks.start_export")
async def start_export(job: str, token: str) -> None: ...  # hands the token to the exporter


@workflow(name="hooks.approve")
async def approve(order_id: str) -> object:
    # --8<-- [start:timeout]
    async with create_hook(token=f"approve:{order_id}", timeout=timedelta(days=2)) as hook:
        await notify("manager@example.com", f"approve {order_id}? answer to {hook.token}")
        try:
            decision = await hook
        except HookTimeoutError:
            decision = "auto-rejected"
    # --8<-- [end:timeout]
    return decision


@workflow(name="hooks.export")
async def export(job: str) -> str | None:
    # --8<-- [start:heartbeat]
    async with create_hook(token=f"export:{job}", heartbeat_timeout="5m", timeout="1d") as hook:
        await start_export(job, hook.token)  # a step: the exporter heartbeats while it works, then resumes
        try:
            location = await hook
        except HookHeartbeatTimeoutError:
            location = None  # the exporter died: no word for 5 minutes
    # --8<-- [end:heartbeat]
    return location


@workflow(name="hooks.reserve_stock")
async def reserve_stock(sku: str) -> str:
    # --8<-- [start:failed]
    async with create_hook(token=f"stock:{sku}") as hook:
        try:
            return await hook  # the warehouse answers resume_hook(token, "reserved") ...
        except HookFailedError as failed:  # ... or fail_hook(token, "out of stock", code="NO_STOCK")
            return f"not reserved: {failed.message} ({failed.code})"
    # --8<-- [end:failed]


# --8<-- [start:webhook]
@workflow(name="hooks.payment")
async def payment(order_id: str) -> dict[str, object]:
    async with create_webhook() as hook:  # resumable over HTTP: POST <webhook URL><hook.token>
        await notify("psp@example.com", f"pay {order_id}, then call back {hook.token}")
        request = await hook  # a WebhookRequest: {"method", "headers", "body", "query"}
    return {"order": order_id, "paid": request["body"]}
# --8<-- [end:webhook]


@step(name="hooks.pack_and_ship")
async def pack_and_ship(order_id: str) -> str:
    return f"TRACK-{order_id}"


@workflow(name="hooks.deliver")
async def deliver(order_id: str) -> str:
    async with create_hook(token=f"shipped:{order_id}", timeout="7d") as hook:
        tracking: str = await hook  # resumed by the warehouse run below
    return f"{order_id} shipped as {tracking}"


# --8<-- [start:signal]
@workflow(name="hooks.warehouse")
async def warehouse(order_id: str) -> str:
    tracking = await pack_and_ship(order_id)
    try:  # tell the run that waits on this order; once, however often this run is replayed or retried
        await resume_hook(f"shipped:{order_id}", tracking, wait="10m")
    except HookNotFoundError:  # no run held the hook within 10 minutes, or its run has ended
        return "nobody was waiting"
    return tracking
# --8<-- [end:signal]


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        client = env.client
        approved = await client.start(approve, "A-1")
        await approved.wait_for_hook("approve:A-1")
        await client.resume_hook("approve:A-1", {"approved": True})
        assert await approved.result() == {"approved": True}
        assert await (await client.start(approve, "A-2")).result() == "auto-rejected"  # 2 days, skipped

        exported = await client.start(export, "j-1")
        await exported.wait_for_hook("export:j-1")
        for _ in range(3):
            await env.sleep("4m")  # the exporter is alive: heartbeats every 4 minutes
            await client.heartbeat_hook("export:j-1")
        await client.resume_hook("export:j-1", "s3://exports/j-1.csv")
        assert await exported.result() == "s3://exports/j-1.csv"
        assert await (await client.start(export, "j-2")).result() is None  # silent for 5 minutes

        reserved = await client.start(reserve_stock, "kettle")
        await reserved.wait_for_hook("stock:kettle")
        await client.fail_hook("stock:kettle", "out of stock", code="NO_STOCK")
        assert await reserved.result() == "not reserved: out of stock (NO_STOCK)"

        waiting = await client.start(deliver, "A-4")
        shipped = await client.start(warehouse, "A-4")
        assert await shipped.result() == "TRACK-A-4"
        assert await waiting.result() == "A-4 shipped as TRACK-A-4"
        assert await (await client.start(warehouse, "A-5")).result() == "nobody was waiting"  # 10 min, skipped

        paid = await client.start(payment, "A-3")
        await env.idle()
        [hook] = (await env.world.hooks.list(paid.run_id)).data
        await client.resume_hook(hook.token, WebhookRequest(method="POST", headers={}, body="ok", query={}))
        assert await paid.result() == {"order": "A-3", "paid": "ok"}


if __name__ == "__main__":
    asyncio.run(main())
