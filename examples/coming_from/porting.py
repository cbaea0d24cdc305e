"""What another engine has and awsworld spells differently, as the porting pages show it (docs: Coming from
Temporal, DBOS): cleanup on cancel, continue-as-new, a message sent before the workflow waits for it, an event a
client reads."""

import asyncio
import json

from awsworld import Client, child_options, create_hook, get_writable, sleep, step, workflow


@step(name="porting.refund")
async def refund(order_id: str) -> str:
    return f"refunded {order_id}"


@step(name="porting.ship")
async def ship(order_id: str) -> str:
    return f"shipped {order_id}"


# --8<-- [start:cancel]
@workflow(name="porting.fulfil")
async def fulfil(order_id: str) -> str:
    # Temporal's `except asyncio.CancelledError:` cleanup: ask for the cancel through a hook, which the body
    # sees and answers with steps (client.cancel ends a run at once, with no code of it running after).
    async with create_hook(token=f"cancel:{order_id}") as cancel_request:
        work = asyncio.ensure_future(sleep("7d"))  # the long part: a sleep, a child run, a hook
        cancelled = asyncio.ensure_future(cancel_request)
        done, _ = await asyncio.wait({work, cancelled}, return_when=asyncio.FIRST_COMPLETED)
        if cancelled in done:
            work.cancel()
            return await refund(order_id)  # compensate, recorded like any step
        cancelled.cancel()
    return await ship(order_id)
# --8<-- [end:cancel]


# --8<-- [start:continue]
@workflow(name="porting.meter")
async def meter(account: str, total: int, rounds: int) -> int | str:
    for _ in range(10):  # one batch of work per run: its log stays small
        total += 1
        await sleep("1h")
    if rounds > 1:  # continue-as-new: a successor run with the state, then end this one
        successor = await child_options(successor=True).start(meter, account, total, rounds - 1)
        return successor.run_id  # the caller follows the chain to the last run's result
    return total
# --8<-- [end:continue]


# --8<-- [start:events]
@step(name="porting.set_event")
async def set_event(key: str, value: object) -> None:  # DBOS.set_event: a stream of the run, written by a step
    await get_writable(key).write(json.dumps(value))


@workflow(name="porting.checkout")
async def checkout(order_id: str) -> str:
    await set_event("status", {"stage": "paid"})
    await sleep("1h")
    await set_event("status", {"stage": "shipped"})
    return order_id


async def get_events(client: Client, run_id: str, key: str) -> list[object]:  # DBOS.get_event, every value
    return [json.loads(chunk) async for chunk in client.get_run(run_id).stream(key)]
# --8<-- [end:events]


@workflow(name="porting.payment")
async def payment(order_id: str) -> object:
    async with create_hook(token=f"payment:{order_id}", timeout="1d") as hook:
        return await hook


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        client = env.client
        run = await client.start(fulfil, "A-1")
        await run.wait_for_hook("cancel:A-1")
        await client.resume_hook("cancel:A-1", {"by": "customer"})
        assert await run.result() == "refunded A-1"
        assert await (await client.start(fulfil, "A-2")).result() == "shipped A-2"

        result = await (await client.start(meter, "acct-1", 0, 3)).result()
        while isinstance(result, str):  # a run id: the run continued as that one
            result = await client.get_run(result).result()
        assert result == 30

        started = await client.start(checkout, "A-3")
        assert await get_events(client, started.run_id, "status") == [{"stage": "paid"}, {"stage": "shipped"}]

        # --8<-- [start:send]
        run = await client.start(payment, "A-4")
        # DBOS.send / a Temporal signal right after the start: the hook may not exist yet, so wait for it
        await client.resume_hook("payment:A-4", {"paid": 40}, wait=30)
        # --8<-- [end:send]
        assert await run.result() == {"paid": 40}


if __name__ == "__main__":
    asyncio.run(main())
