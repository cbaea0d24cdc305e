"""A user's test file (run by tests/testing/test_user_suites.py with pytest in a fresh process): a plain ``def``
test that asks for ``awsworld_env`` or ``awsworld_local`` errors at setup saying what to do, instead of passing
with runs that were never delivered; a sync test driving its own ``WorkflowTestEnv`` works, and so does a sync
fixture that hands an async test either fixture."""

import asyncio

import pytest

from awsworld import step, workflow
from awsworld.testing import WorkflowTestEnv


@step(name="user.double")
async def double(n: int) -> int:
    return 2 * n


@workflow(name="user.doubled")
async def doubled(n: int) -> int:
    return await double(n)


def test_a_sync_test_asking_for_awsworld_env(awsworld_env: WorkflowTestEnv) -> None:
    run = asyncio.run(awsworld_env.client.start(doubled, 21))  # recorded, never delivered: must not pass silently
    assert run is not None


def test_a_sync_test_asking_for_awsworld_local(awsworld_local) -> None:
    assert awsworld_local is not None


def test_a_sync_test_with_its_own_env() -> None:
    async def main() -> int:
        async with WorkflowTestEnv() as env:
            return await (await env.client.start(doubled, 4)).result()

    assert asyncio.run(main()) == 8


@pytest.fixture(params=["memory", "moto"])
def client(request):
    fixture = "awsworld_env" if request.param == "memory" else "awsworld_local"
    return request.getfixturevalue(fixture).client


@pytest.mark.asyncio
async def test_an_async_test_through_a_sync_fixture(client) -> None:
    assert await (await client.start(doubled, 5)).result(timeout=60) == 10
