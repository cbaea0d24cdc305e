"""A user's test file (run by tests/testing/test_user_suites.py with pytest in a fresh process, pytest-asyncio in its
default strict mode): an async test without ``@pytest.mark.asyncio`` that asks for ``awsworld_env`` errors at setup
saying to mark it, where pytest alone said to install an async plugin the project has; a marked one runs."""

import pytest

from awsworld import workflow
from awsworld.testing import WorkflowTestEnv


@workflow(name="user.hello")
async def hello(name: str) -> str:
    return f"hello {name}"


async def test_an_unmarked_async_test(awsworld_env: WorkflowTestEnv) -> None:
    assert await (await awsworld_env.client.start(hello, "x")).result() == "hello x"


@pytest.mark.asyncio
async def test_a_marked_async_test(awsworld_env: WorkflowTestEnv) -> None:
    assert await (await awsworld_env.client.start(hello, "y")).result() == "hello y"
