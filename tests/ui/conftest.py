"""A demo-like run in the in-memory test environment, for the UI's tests: parallel steps, a step retried once,
a durable sleep, a hook resumed with a hostile-looking payload, a stream, a child workflow and a large value."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pytest
from pydantic import BaseModel

from awsworld import PydanticCodec, create_hook, get_writable, sleep, step, step_metadata, workflow
from awsworld.testing import WorkflowTestEnv

XSS = "<script>alert(1)</script>"
TOKEN = "address:o-1"


@step(name="ui.reserve")
async def reserve(item: str) -> dict[str, Any]:
    return {"item": item, "reserved": True}


@step(name="ui.charge", max_retries=2, retry_delay=1.0)
async def charge(order_id: str) -> str:
    if step_metadata().attempt == 1:
        raise ConnectionError("payment API timed out")
    return f"receipt-{order_id}"


@step(name="ui.pack")
async def pack(note: str) -> str:
    progress = get_writable("progress")
    await progress.write(f"packed {note}\n")
    await progress.close()
    return "x" * 2000  # a large value: cut on the page, whole through the API


@step(name="ui.double")
async def double(n: int) -> int:
    return 2 * n


@workflow(name="ui.child")
async def child(n: int) -> int:
    return await double(n)


@workflow(name="ui.order")
async def order(order_id: str, note: str) -> dict[str, Any]:
    await asyncio.gather(reserve("kettle"), reserve("mug"))
    receipt = await charge(order_id)
    await pack(note)
    await sleep(2)
    async with create_hook(token=f"address:{order_id}") as hook:
        address = await hook
    doubled = await child(21)
    return {"receipt": receipt, "address": address, "child": doubled}


@step(name="ui.tick")
async def tick(i: int) -> int:
    return i


@workflow(name="ui.many")
async def many(n: int) -> int:
    return sum(await asyncio.gather(*(tick(i) for i in range(n))))


@step(name="ui.live.prepare")
async def prepare() -> str:
    return "ready"


@step(name="ui.live.say")
async def say(text: str, close: bool = False) -> None:
    log = get_writable("log")
    await log.write(text)
    if close:
        await log.close()


@workflow(name="ui.live")  # a run that waits on a hook between two stream writes
async def live_flow() -> Any:
    await prepare()
    await say("before the hook\n")
    async with create_hook(token="live:go") as hook:
        payload = await hook
    await say("after the hook\n", close=True)
    return payload


class Order(BaseModel):
    sku: str
    quantity: int


@workflow(name="ui.ordered")  # a run that waits on a hook whose payloads a codec decodes
async def ordered() -> dict[str, object]:
    order = await create_hook("ui-order:1", codec=PydanticCodec(Order))
    return {"sku": order.sku, "quantity": order.quantity}


@dataclass
class Demo:
    env: WorkflowTestEnv
    run_id: str
    child_run_id: str


@pytest.fixture(scope="module")
async def demo() -> AsyncIterator[Demo]:
    async with WorkflowTestEnv() as env:
        run = await env.client.start(order, "o-1", XSS)
        await run.wait_for_hook(TOKEN)
        await env.world.runs.set_attributes(run.run_id, [{"key": "customer", "value": XSS}])
        await env.client.resume_hook(TOKEN, {"address": XSS})
        await run.result()
        children = await run.children()
        yield Demo(env, run.run_id, children[0].run_id)
