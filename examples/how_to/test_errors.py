"""A failed run's error, asserted by its type in a test (docs: How-to / Errors)."""

import pytest
from errors import Declined, checkout, fulfil, price

from awsworld import DeploymentUnavailableError, RunIdTakenError, WorkflowNotRegisteredError, WorkflowRunFailedError
from awsworld.testing import WorkflowTestEnv

pytestmark = pytest.mark.asyncio


async def test_a_declined_card_fails_the_run_with_declined(awsworld_env: WorkflowTestEnv) -> None:
    # --8<-- [start:assert]
    run = await awsworld_env.client.start(price, "kettle", "0000-1111")
    with pytest.raises(Declined, match="card 1111 declined") as failed:  # the step's own type
        await run.result()
    assert isinstance(failed.value, WorkflowRunFailedError)  # too, with what the run stored
    assert failed.value.step_name == "errors.authorize"
    # --8<-- [end:assert]


async def test_a_child_runs_declined_card_fails_its_parent_with_declined(awsworld_env: WorkflowTestEnv) -> None:
    # --8<-- [start:child]
    run = await awsworld_env.client.start(checkout, "kettle", "0000-1111")  # price runs as its child
    with pytest.raises(Declined, match=r"child run \S+ \(errors\.price\) failed: .*card 1111 declined") as failed:
        await run.result()  # the child's type (its step's, here) through the parent that let it through
    [child] = await run.children()
    assert isinstance(failed.value, WorkflowRunFailedError)  # too: details["cause"] is the child's error
    assert failed.value.child_run_id == child.run_id
    # --8<-- [end:child]


async def test_a_start_naming_a_deployment_that_cannot_take_it_starts_nothing() -> None:
    async with WorkflowTestEnv(deployment="v1") as env:
        client = env.client
        # --8<-- [start:deployment]
        try:
            await client.options(deployment="v7").start(price, "kettle", "0000-1111")
        except DeploymentUnavailableError as refused:  # a LookupError too
            assert refused.deployment == "v7"
            assert "registered: v1" in str(refused)  # the ones it could have named
        # --8<-- [end:deployment]
        else:
            raise AssertionError("started on a deployment that is not registered")
        assert (await client.list_runs()).data == []  # nothing was started


async def test_a_start_by_a_name_no_one_registers_starts_nothing(awsworld_env: WorkflowTestEnv) -> None:
    client = awsworld_env.client
    # --8<-- [start:unknown]
    try:
        await client.start("errors.prise", "kettle", "0000-1111")  # a typo
    except WorkflowNotRegisteredError as unknown:  # a LookupError too
        assert unknown.name == "errors.prise"
        assert unknown.suggestions == ["errors.price"]  # the message says "did you mean 'errors.price'?"
    # --8<-- [end:unknown]
    else:
        raise AssertionError("started a workflow no one registers")
    assert (await client.list_runs()).data == []  # nothing was started


async def test_a_start_with_an_id_a_run_of_another_workflow_holds_starts_nothing(
        awsworld_env: WorkflowTestEnv) -> None:
    client = awsworld_env.client
    # --8<-- [start:taken]
    first = await client.options(run_id="order-17").start(fulfil, "A-1")
    try:
        await client.options(run_id="order-17").start(price, "kettle", "1234-5678")
    except RunIdTakenError as taken:  # the id names a run of another workflow
        assert taken.run_id == "order-17" and taken.workflow_name == "errors.fulfil"
        assert taken.requested == "errors.price"
    # --8<-- [end:taken]
    else:
        raise AssertionError("a run id named two runs")
    assert await first.result() == "tracking-A-1"  # the run that held it is untouched
    assert [run.run_id for run in (await client.list_runs()).data] == ["order-17"]
