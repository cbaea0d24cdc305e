"""A user's test file (run by tests/testing/test_user_suites.py with pytest in a fresh process): one emulator
(``LocalAWS``) shared by several tests, as a suite shares what is slow to start. On one event loop it works; a
session fixture on its own loop with tests on theirs (pytest-asyncio's defaults) starts runs but fails at the first
wait saying how to give them one loop: the first start used to wait for ever (pytest never ended), on a lock the
fixture's idle loop held."""

import pytest
import pytest_asyncio

from awsworld import step, workflow
from awsworld.local import LocalAWS


@step(name="user.shared_local.double")
async def double(x: int) -> int:
    return 2 * x


@workflow(name="user.shared_local.twice")
async def twice(x: int) -> int:
    return await double(x)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def shared_local():
    async with LocalAWS() as local:
        yield local


@pytest_asyncio.fixture(scope="session")
async def local_on_its_own_loop():
    async with LocalAWS() as local:
        yield local


@pytest.mark.asyncio(loop_scope="session")
async def test_one_on_the_shared_emulator(shared_local: LocalAWS) -> None:
    assert shared_local.client is not None
    assert await (await shared_local.client.start(twice, 2)).result(timeout=60) == 4


@pytest.mark.asyncio(loop_scope="session")
async def test_another_on_the_shared_emulator(shared_local: LocalAWS) -> None:
    assert shared_local.client is not None
    assert await (await shared_local.client.start(twice, 3)).result(timeout=60) == 6


@pytest.mark.asyncio
@pytest.mark.timeout(120)
async def test_an_emulator_started_on_another_loop_says_so(local_on_its_own_loop: LocalAWS) -> None:
    client = local_on_its_own_loop.client
    assert client is not None
    run = await client.start(twice, 4)  # recorded and queued from this loop
    with pytest.raises(RuntimeError, match=r"this LocalAWS was started on another event loop: .* "
                                           r"@pytest_asyncio.fixture\(scope=\"session\", loop_scope=\"session\"\)"):
        await run.result(timeout=10)
