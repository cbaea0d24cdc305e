"""``AWSWORLD_MAX_VALUE_BYTES`` below 256 KiB is refused where it is read, naming the variable and why.

A user testing "a value over the limit" (docs/how-to/values.md: the test environment reads the variable as the
deployed functions do) lowered it to 1000 bytes: the step's result was refused, as asked, but the step's error
record (its message and traceback, about 1.2 KB) did not fit either, so the failure could never be recorded and
every delivery failed: the run hung, ``result()`` saying it waited on "nothing it has recorded"."""

from __future__ import annotations

import pytest

from awsworld import step, workflow
from awsworld.testing import WorkflowTestEnv


@step(name="limit_setting.big")
async def big(n: int) -> str:
    return "x" * n


@workflow(name="limit_setting.sized")
async def sized(n: int) -> int:
    return len(await big(n))


async def test_a_value_limit_too_small_to_hold_an_error_is_refused_naming_the_variable(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_MAX_VALUE_BYTES", "1000")
    with pytest.raises(ValueError) as refused:  # by the environment, as it starts
        async with WorkflowTestEnv() as env:
            run = await env.client.start(sized, 2000)
            await run.result(timeout=5)  # before: TimeoutError, the step's failure never recorded
    assert str(refused.value).startswith("AWSWORLD_MAX_VALUE_BYTES must be at least 262144 (256 KiB), not '1000': "
                                         "a failed step's error"), refused.value


async def test_the_smallest_limit_taken_records_a_too_large_result_as_the_steps_failure(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWSWORLD_MAX_VALUE_BYTES", str(256 * 1024))
    async with WorkflowTestEnv() as env:
        run = await env.client.start(sized, 256 * 1024 + 1)
        with pytest.raises(Exception, match="ValueTooLargeError"):
            await run.result(timeout=30)
