"""Temporal's money-transfer template (withdraw, deposit, refund when the deposit fails), ported (docs: Coming from
Temporal). The activities become steps, the shared RetryPolicy a RetryPolicy with every field named, and
``except ActivityError`` an ``except StepError``."""

import asyncio
from dataclasses import dataclass

from awsworld import RetryPolicy, StepError, WorkflowRunFailedError, step, workflow


class InvalidAccountError(Exception):
    pass


class InsufficientFundsError(Exception):
    pass


@dataclass
class PaymentDetails:
    source_account: str
    target_account: str
    amount: int
    reference_id: str


BALANCES = {"85-150": 2000, "43-812": 0}  # the bank's side, for the example


# --8<-- [start:transfer]
# Temporal: RetryPolicy(maximum_attempts=3, maximum_interval=timedelta(seconds=2),
#                       non_retryable_error_types=["InvalidAccountError", "InsufficientFundsError"])
# Every field named: Temporal's defaults are 1 s doubling, without jitter.
retry = RetryPolicy(max_attempts=3, initial_delay=1, backoff=2.0, max_delay=2, jitter=0,
                    no_retry_on=(InvalidAccountError, InsufficientFundsError))


@step(name="bank.withdraw", timeout=5, retry=retry)  # start_to_close_timeout=timedelta(seconds=5)
async def withdraw(data: PaymentDetails) -> str:
    if data.source_account not in BALANCES:
        raise InvalidAccountError(data.source_account)
    if BALANCES[data.source_account] < data.amount:
        raise InsufficientFundsError(data.source_account)
    BALANCES[data.source_account] -= data.amount
    return f"{data.reference_id}-withdrawal"


@step(name="bank.deposit", timeout=5, retry=retry)
async def deposit(data: PaymentDetails) -> str:
    if data.target_account not in BALANCES:
        raise InvalidAccountError(data.target_account)
    BALANCES[data.target_account] += data.amount
    return f"{data.reference_id}-deposit"


@step(name="bank.refund", timeout=5, retry=retry)
async def refund(data: PaymentDetails) -> str:
    BALANCES[data.source_account] += data.amount
    return f"{data.reference_id}-refund"


@workflow(name="bank.money_transfer")
async def money_transfer(details: PaymentDetails) -> str:
    withdrawn = await withdraw(details)
    try:
        deposited = await deposit(details)
    except StepError:  # Temporal: except ActivityError (the deposit failed for good)
        await refund(details)  # recorded like any step: a replay does not refund twice
        raise  # the run fails with the deposit's error, as the template re-raises it
    return f"Transfer complete (transaction IDs: {withdrawn}, {deposited})"
# --8<-- [end:transfer]


async def main() -> None:
    from awsworld.testing import WorkflowTestEnv

    async with WorkflowTestEnv() as env:
        run = await env.client.start(money_transfer, PaymentDetails("85-150", "43-812", 250, "t-1"))
        assert await run.result() == "Transfer complete (transaction IDs: t-1-withdrawal, t-1-deposit)"

        failed = await env.client.start(money_transfer, PaymentDetails("85-150", "00-000", 250, "t-2"))
        try:
            await failed.result()
            raise AssertionError("the transfer to an unknown account failed")
        except WorkflowRunFailedError as error:
            assert "InvalidAccountError: 00-000" in str(error), error
        assert BALANCES == {"85-150": 1750, "43-812": 250}  # the second withdrawal was refunded
        steps = {step.step_name: step.attempt for step in await failed.steps()}
        assert steps == {"bank.withdraw": 1, "bank.deposit": 1, "bank.refund": 1}  # no retry of a non-retryable


if __name__ == "__main__":
    asyncio.run(main())
