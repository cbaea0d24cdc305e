"""A user's test file (run by tests/testing/test_user_suites.py with pytest in a fresh process): a failed run's
``await run.result()`` raises an error ``pytest.raises`` can name by the type the run failed with, the step's or the
body's, with its message, in memory and on the emulator alike."""

import pytest

from awsworld import WorkflowRunFailedError, step, workflow

pytestmark = pytest.mark.asyncio


class PaymentDeclined(Exception):
    pass


class OrderRejected(ValueError):
    def __init__(self, order_id: str, reason: str) -> None:  # an __init__ of its own, and a __str__
        super().__init__(order_id, reason)
        self.order_id = order_id

    def __str__(self) -> str:
        return f"order {self.args[0]} rejected: {self.args[1]}"


@step(name="user.charge", max_retries=0)
async def charge(order_id: str) -> str:
    raise PaymentDeclined(f"card declined for {order_id}")


@workflow(name="user.checkout")
async def checkout(order_id: str) -> str:
    return await charge(order_id)


@workflow(name="user.review")
async def review(order_id: str) -> str:
    raise OrderRejected(order_id, "out of stock")


@workflow(name="user.local_failure")
async def local_failure(order_id: str) -> str:
    class Unfindable(Exception):  # defined in a function: its type cannot be found again by name
        pass

    raise Unfindable(f"lost {order_id}")


@pytest.fixture(params=["memory", "moto"])
def client(request):
    if request.param == "memory":
        return request.getfixturevalue("awsworld_env").client
    return request.getfixturevalue("awsworld_local").client


async def test_a_steps_error_is_raised_as_its_type(client) -> None:
    run = await client.start(checkout, "A-1")
    with pytest.raises(PaymentDeclined, match="card declined for A-1") as info:
        await run.result(timeout=60)
    assert isinstance(info.value, WorkflowRunFailedError)  # still, with what the run stored
    assert (info.value.step_name, info.value.error_type) == ("user.charge", "StepError")
    assert info.value.details["cause"]["type"] == "test_typed_errors.PaymentDeclined"


async def test_a_bodys_error_is_raised_as_its_type(client) -> None:
    run = await client.start(review, "A-2")
    with pytest.raises(OrderRejected, match="order A-2 rejected: out of stock") as info:
        await run.result(timeout=60)
    assert isinstance(info.value, ValueError) and isinstance(info.value, WorkflowRunFailedError)
    assert info.value.run_id == run.run_id and info.value.error_type == "OrderRejected"
    # the run's, as stored, after its workflow's name
    assert str(info.value) == f"run {run.run_id} (user.review) failed: order A-2 rejected: out of stock"


async def test_a_type_that_cannot_be_found_again_is_a_plain_run_failure(client) -> None:
    run = await client.start(local_failure, "A-3")
    with pytest.raises(WorkflowRunFailedError, match="lost A-3") as info:
        await run.result(timeout=60)
    assert type(info.value) is WorkflowRunFailedError and info.value.error_type == "Unfindable"
