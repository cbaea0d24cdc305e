"""Two versions of one workflow for the pinned-versions tests, each in a registry of its own
(``Registry().capture()``), as two published versions of the flow function hold them."""

from __future__ import annotations

from awsworld import create_hook, sleep, step, workflow
from awsworld.authoring.definitions import Registry

V1 = Registry()
V2 = Registry()

with V1.capture():
    @step(name="versions.tag")
    async def tag_v1(x: str) -> str:
        return f"v1:{x}"

    @workflow(name="versions.order")
    async def order_v1(x: str) -> list[str]:
        first = await tag_v1(x)
        await create_hook(token=f"versions-go:{x}")  # woken from outside: the flow reads the pin in the log
        await sleep(1)  # its continuation is queued by v1's flow, addressed to v1: handed over unread
        return [first, await tag_v1(x)]

with V2.capture():
    @step(name="versions.tag")
    async def tag_v2(x: str) -> str:
        return f"v2:{x}"

    @step(name="versions.audit")
    async def audit_v2(x: str) -> None:
        return None

    @workflow(name="versions.order")
    async def order_v2(x: str) -> list[str]:
        await audit_v2(x)  # a call v1's runs never made: v2 replaying one of them would diverge here
        first = await tag_v2(x)
        await create_hook(token=f"versions-go:{x}")
        await sleep(1)
        return [first, await tag_v2(x)]
