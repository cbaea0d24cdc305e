"""A step's error reaches the workflow with its type (docs: How-to / Errors)."""

import asyncio

from awsworld import FatalError, RetryPolicy, StepError, WorkflowRunFailedError, step, workflow

PRICES = {"kettle": 30}


class Declined(FatalError):  # your own class, importable under its module's name
    pass


@step(name="errors.lookup", retry=RetryPolicy.fixed("1s", max_attempts=2))
async def lookup(sku: str) -> int:
    return PRICES[sku]  # KeyError for an unknown sku


@step(name="errors.default_price")
async def default_price(sku: str) -> int:
    return 10


@step(name="errors.authorize")
async def authorize(card: str) -> str:
    if card.startswith("0000"):
        raise Declined(f"card {card[-4:]} declined")
    return "auth-1"


CARRIER_DOWN = {"A-17"}  # a partner that is down for now


@step(name="errors.ship", retry=RetryPolicy.fixed("1s", max_attempts=2))
async def ship(order: str) -> str:
    if order in CARRIER_DOWN:
        raise ConnectionError("carrier API unreachable")
    return f"tracking-{order}"


@workflow(name="errors.fulfil")
async def fulfil(order: str) -> str:
    return await ship(order)


@workflow(name="errors.price")
async def price(sku: str, card: str) -> int:
    # --8<-- [start:catch]
    try:
        price = await lookup(sku)  # the step raised KeyError, in another delivery perhaps
    except KeyError as error:  # caught: a StepError and a KeyError
        assert isinstance(error, StepError) and error.error_type == "KeyError"  # error.message, error.stack too
        price = await default_price(sku)
    # --8<-- [end:catch]
    await authorize(card)  # Declined is not caught here: the run fails with it
    return price


@workflow(name="errors.checkout")
async def checkout(sku: str, card: str) -> int:
    return await price(sku, card)  # a child run: its failure, not caught here, fails this run too


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        assert await (await env.client.start(price, "kettle", "4242")).result() == 30
        assert await (await env.client.start(price, "teapot", "4242")).result() == 10
        run = await env.client.start(price, "kettle", "0000-1111")
        try:
            await run.result()
            raise AssertionError("the run should have failed")
        except WorkflowRunFailedError as failed:
            assert failed.error_type == "StepError" and failed.step_name == "errors.authorize"
            assert "Declined: card 1111 declined" in str(failed)

        # --8<-- [start:rerun]
        failed_run = await env.client.start(fulfil, "A-17")  # the carrier is down: its retries run out
        try:
            await failed_run.result()
        except WorkflowRunFailedError as failed:
            assert "ConnectionError: carrier API unreachable" in str(failed)
        CARRIER_DOWN.clear()  # the cause is fixed: the partner is back (or the bug's fix is deployed)
        again = await env.client.rerun(failed_run.run_id)  # a new run, with the failed run's recorded input
        assert await again.result() == "tracking-A-17"
        assert ((await again.get()).execution_context or {}).get("rerunOf") == failed_run.run_id
        # --8<-- [end:rerun]


if __name__ == "__main__":
    asyncio.run(main())
