"""The workflows the World-over-HTTP examples start (docs: How-to / The World over HTTP): ``awsworld serve`` imports
this module, so their runs run in the server's process. ``http.checkout`` writes a stream and returns a value;
``http.approve`` waits for its hook (``approve:<order>``), which a caller resumes over HTTP."""

from awsworld import create_hook, get_writable, step, workflow


@step(name="http.pack")
async def pack(order_id: str) -> str:
    progress = get_writable("progress")
    await progress.write(f"packing {order_id}\n")
    await progress.close()
    return f"parcel-{order_id}"


@workflow(name="http.checkout")
async def checkout(order_id: str) -> dict[str, str]:
    return {"order": order_id, "parcel": await pack(order_id)}


@workflow(name="http.approve")
async def approve(order_id: str) -> dict[str, object]:
    async with create_hook(token=f"approve:{order_id}") as hook:
        decision = await hook
    return {"order": order_id, "decision": decision}
