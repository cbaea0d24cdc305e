import pytest

from awsworld import FatalError, WorkflowRunFailedError, map, step, workflow
from awsworld.testing import WorkflowTestEnv
from awsworld.world import Event

pytestmark = pytest.mark.asyncio

EMAILS: dict[str, str] = {}  # stands in for your customer database


@step(name="patterns.send_invoice")
async def send_invoice(customer: str) -> str:
    if customer not in EMAILS:
        raise FatalError(f"no email on file for {customer}")  # retrying would not help
    return f"invoice sent to {EMAILS[customer]}"


@workflow(name="patterns.send_invoices")
async def send_invoices(customers: list[str]) -> dict[str, object]:
    batch = await map(send_invoice, customers, max_concurrency=5, tolerated_failures=3)
    sent = batch.values()  # raises BatchError (failing the run) once more than 3 have failed
    return {"sent": len(sent), "no_email": [customers[item.index] for item in batch.failed]}


def most_in_flight(events: list[Event]) -> int:
    """The most steps declared and not yet ended at any point of the log."""
    in_flight = peak = 0
    for event in events:
        if event.event_type == "step_created":
            in_flight += 1
            peak = max(peak, in_flight)
        elif event.event_type in ("step_completed", "step_failed"):
            in_flight -= 1
    return peak


async def test_a_few_failures_are_tolerated(awsworld_env: WorkflowTestEnv) -> None:
    customers = [f"c{n:02}" for n in range(50)]
    EMAILS.update({c: f"{c}@example.com" for c in customers if c not in ("c07", "c31")})
    run = await awsworld_env.client.start(send_invoices, customers)

    assert await run.result() == {"sent": 48, "no_email": ["c07", "c31"]}
    assert most_in_flight(await run.events()) == 5


async def test_too_many_failures_fail_the_run_and_stop_the_batch(awsworld_env: WorkflowTestEnv) -> None:
    customers = [f"new{n:02}" for n in range(50)]  # nobody has an email yet
    run = await awsworld_env.client.start(send_invoices, customers)

    with pytest.raises(WorkflowRunFailedError) as failed:
        await run.result()
    assert failed.value.error_type == "BatchError"
    # 5 started at once, one more after each of the first 3 failures; the 4th decided it: 42 never started
    assert len(await run.steps()) == 8
