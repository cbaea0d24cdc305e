"""The workflow the World-over-HTTP example starts (docs: How-to / The World over HTTP): ``awsworld serve`` imports
this module, so its runs run in the server's process."""

from awsworld import get_writable, step, workflow


@step(name="http.pack")
async def pack(order_id: str) -> str:
    progress = get_writable("progress")
    await progress.write(f"packing {order_id}\n")
    await progress.close()
    return f"parcel-{order_id}"


@workflow(name="http.checkout")
async def checkout(order_id: str) -> dict[str, str]:
    return {"order": order_id, "parcel": await pack(order_id)}
