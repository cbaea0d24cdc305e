from datetime import timedelta

import pytest

from awsworld import HookTimeoutError, create_hook, step, workflow
from awsworld.testing import WorkflowTestEnv

pytestmark = pytest.mark.asyncio

SENT: list[str] = []  # stands in for your mail service


@step(name="patterns.email")
async def email(to: str, text: str) -> None:
    SENT.append(f"{to}: {text}")


@workflow(name="patterns.approve_expense")
async def approve_expense(expense_id: str, amount: float) -> dict[str, object]:
    async with create_hook(token=f"expense:{expense_id}", timeout="2d") as hook:
        await email("manager@example.com", f"approve expense {expense_id} ({amount:.2f})?")
        try:
            decision = await hook  # {"approved": bool, "by": str}, sent by your approval page
        except HookTimeoutError:
            await email("finance@example.com", f"expense {expense_id} auto-rejected: no answer in 2 days")
            decision = {"approved": False, "by": "timeout"}
    return {"expense": expense_id, **decision}


async def test_approved_in_time(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(approve_expense, "E-1", 120.0)
    await run.wait_for_hook("expense:E-1")  # the run now waits for the manager
    await awsworld_env.client.resume_hook("expense:E-1", {"approved": True, "by": "dana"})

    assert await run.result() == {"expense": "E-1", "approved": True, "by": "dana"}


async def test_no_answer_in_two_days_rejects(awsworld_env: WorkflowTestEnv) -> None:
    run = await awsworld_env.client.start(approve_expense, "E-2", 980.0)

    assert await run.result() == {"expense": "E-2", "approved": False, "by": "timeout"}
    events = {e.event_type: e.created_at for e in await run.events()}  # the last of each kind
    waited = events["wait_completed"] - events["hook_created"]
    assert timedelta(days=2) <= waited < timedelta(days=2, minutes=1)  # skipped: the test took milliseconds
    assert SENT[-1] == "finance@example.com: expense E-2 auto-rejected: no answer in 2 days"
