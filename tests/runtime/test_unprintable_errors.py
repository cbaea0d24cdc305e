"""An exception whose ``__str__`` raises is recorded with its type and traceback (``_worker/error_shapes.py``,
``error_message``), from a step and from a workflow body: ``str(error)`` raising out of the recording lost the
delivery, and the step then failed as ``StepInterruptedError`` ("its delivery was cut off"), its own type gone."""

from __future__ import annotations

import pytest

from awsworld import RetryPolicy, WorkflowRunFailedError, step, workflow
from awsworld.testing import WorkflowTestEnv

pytestmark = pytest.mark.asyncio


class Unprintable(Exception):  # importable: Run.result() rebuilds it
    order_id: str  # declared, never set
    def __str__(self) -> str:
        return f"order {self.order_id} refused"  # an attribute its __init__ never set: AttributeError


@step(retry=RetryPolicy(max_attempts=2, initial_delay="1s"))
async def refuse() -> None:
    raise Unprintable()


@workflow
async def refused_in_a_step() -> None:
    await refuse()


@workflow
async def refused_in_the_body() -> None:
    raise Unprintable()


@pytest.mark.parametrize("flow", [refused_in_a_step, refused_in_the_body])
async def test_an_unprintable_error_keeps_its_type_and_traceback(awsworld_env: WorkflowTestEnv, flow: object) -> None:
    run = await awsworld_env.client.start(flow)  # type: ignore[call-overload]
    with pytest.raises(Unprintable) as failed:
        await run.result(timeout=20)
    assert isinstance(failed.value, WorkflowRunFailedError)
    details = failed.value.details
    original = details.get("cause", details)
    assert original["type"] == f"{__name__}.Unprintable"
    assert original["message"] == "<exception str() failed: AttributeError>"
    assert "raise Unprintable()" in original["stack"]
    if flow is refused_in_a_step:  # its retries ran (the policy's 2 attempts), none was "cut off"
        assert (details["stepName"], details["attempt"]) == (f"{__name__}.refuse", 2)
