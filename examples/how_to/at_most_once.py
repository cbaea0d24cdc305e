"""An at-most-once step: a payment that must never repeat unasked (docs: Concepts / Delivery guarantees)."""

import asyncio

from awsworld import RetryPolicy, step, step_metadata, workflow

CHARGES: dict[str, int] = {}  # stands in for your payment provider, which dedups on the idempotency key


class Payments:
    async def charge(self, order_id: str, cents: int, *, idempotency_key: str) -> str:
        CHARGES.setdefault(idempotency_key, cents)
        return f"ch_{len(CHARGES)}"


payments = Payments()


# --8<-- [start:step]
@step(name="payments.charge", semantics="at_most_once", retry=RetryPolicy(max_attempts=3))
async def charge(order_id: str, cents: int) -> str:
    return await payments.charge(order_id, cents, idempotency_key=step_metadata().idempotency_key)
# --8<-- [end:step]


@workflow(name="payments.checkout")
async def checkout(order_id: str, cents: int) -> str:
    return await charge(order_id, cents)


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        run = await env.client.start(checkout, "A-17", 4250)
        assert await run.result() == "ch_1"
        [charged] = await run.steps()
        assert (charged.status, charged.attempt) == ("completed", 1)


if __name__ == "__main__":
    asyncio.run(main())
