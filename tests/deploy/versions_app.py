"""Two versions of one workflow for the pinned-versions tests, each in a registry of its own
(``Registry().capture()``), as two published versions of the flow function hold them."""

from __future__ import annotations

from awsworld import RetryPolicy, create_hook, sleep, step, step_metadata, workflow
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


CHARGES = RetryPolicy(max_attempts=4, initial_delay="4s", backoff=1, jitter=0)
"""A step retried 4 s apart: time for an ``awsworld upgrade`` between its attempts, on a busy machine too
(``tests/runtime/test_pinning_faults.py`` runs these behind a poller that does not wait for the upgrade)."""
CHARGING = Registry()
BROKEN_CHARGING = Registry()

with CHARGING.capture():
    @step(name="versions.charge", retry=CHARGES)
    async def charge(x: str) -> str:
        return f"charged {x} at attempt {step_metadata().attempt}"

    @workflow(name="versions.checkout")
    async def checkout(x: str) -> str:
        return await charge(x)

with BROKEN_CHARGING.capture():
    @step(name="versions.charge", retry=CHARGES)
    async def charge_broken(x: str) -> str:
        raise RuntimeError(f"this version cannot charge {x}")  # the bad deploy a rollback undoes

    @workflow(name="versions.checkout")
    async def checkout_broken(x: str) -> str:
        return await charge_broken(x)
