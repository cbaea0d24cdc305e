import asyncio
from dataclasses import dataclass

import pytest

from awsworld import step, workflow
from awsworld.testing import WorkflowTestEnv

pytestmark = pytest.mark.asyncio

USAGE = {"acme": [120, 80], "globex": [15], "initech": [300, 20, 5]}  # stands in for your metering service


@step(name="patterns.usage")
async def usage(account: str, month: str) -> list[int]:
    return USAGE[account]


@step(name="patterns.charge")
async def charge(account: str, cents: int) -> str:
    return f"charge:{account}:{cents}"


@dataclass
class Bill:
    account: str
    cents: int
    receipt: str


@workflow(name="patterns.bill_account")
async def bill_account(account: str, month: str) -> Bill:
    cents = sum(await usage(account, month)) * 10
    return Bill(account, cents, await charge(account, cents))


@workflow(name="patterns.monthly_billing")
async def monthly_billing(accounts: list[str], month: str) -> dict[str, object]:
    bills = await asyncio.gather(*(bill_account(a, month) for a in accounts))  # one child run per account
    return {"month": month, "total_cents": sum(b.cents for b in bills), "bills": len(bills)}


async def test_each_account_is_billed_by_its_own_run(awsworld_env: WorkflowTestEnv) -> None:
    client = awsworld_env.client
    run = await client.start(monthly_billing, ["acme", "globex", "initech"], "2025-06")

    assert await run.result() == {"month": "2025-06", "total_cents": 5400, "bills": 3}
    children = await run.children()                   # read from the parent's own log
    records = [await child.get() for child in children]
    assert [r.status for r in records] == ["completed"] * 3
    assert {(r.execution_context or {}).get("parentRunId") for r in records} == {run.run_id}
    assert [s.step_name for s in await run.steps()] == ["awsworld.start_child"] * 3  # the parent's own log
    for child in children:  # and each child's steps in its own
        assert [s.step_name for s in await child.steps()] == ["patterns.usage", "patterns.charge"]
