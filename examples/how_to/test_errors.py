"""A failed run's error, asserted by its type in a test (docs: How-to / Errors)."""

import pytest
from errors import Declined, price

from awsworld import WorkflowRunFailedError
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
