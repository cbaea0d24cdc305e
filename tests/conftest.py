"""Shared fixtures: one moto server and one DynamoDB Local for the whole session, fresh resources per test.

``world`` runs a test twice, on moto (``[moto]``) and on DynamoDB Local (``[dynamodb-local]``), each time
on a freshly provisioned table, bucket, queue and DLQ. ``world_factory`` makes more Worlds on the same
backend for tests that need several. DynamoDB Local starts on first use (a ``-k moto`` run never starts
Java); when it is not installed the test fails with the command that installs it, never skips.

``storage_world`` / ``storage_world_factory`` run a contract test on every backend of the ``World`` protocol:
the two above and the in-memory World (``[memory]``, ``awsworld.testing.memory.MemoryWorld``), which needs no
emulator at all (a ``-k memory`` run starts neither).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

import pytest

from awsworld.aws import AWSWorld
from awsworld.local import DynamoDBLocal, DynamoDBLocalError, LocalAWS, MotoServer
from awsworld.testing.memory import MemoryWorld

AWS_BACKENDS = ["moto", "dynamodb-local"]
BACKENDS = AWS_BACKENDS  # the AWS World's emulators: ``backend``, ``world``, ``world_factory``
MEMORY = "memory"
STORAGE_BACKENDS = [*AWS_BACKENDS, MEMORY]  # every World backend: ``storage_backend``, ``storage_world``

WorldFactory = Callable[[], Awaitable[AWSWorld]]
AnyWorld = AWSWorld | MemoryWorld
AnyWorldFactory = Callable[[], Awaitable[AnyWorld]]


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    server = MotoServer().start()
    yield server
    server.stop()


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    server = DynamoDBLocal()
    try:
        server.start()
    except DynamoDBLocalError as error:
        pytest.fail(f"DynamoDB Local is required for the [dynamodb-local] tests: {error}", pytrace=False)
    yield server
    server.stop()


@pytest.fixture(scope="session")
async def local_moto(moto_server: MotoServer) -> AsyncIterator[LocalAWS]:
    local = LocalAWS("moto", moto=moto_server, initial_world=False)
    await local.start()
    yield local
    await local.stop()


@pytest.fixture(scope="session")
async def local_dynamodb_local(moto_server: MotoServer, dynamodb_local: DynamoDBLocal) -> AsyncIterator[LocalAWS]:
    local = LocalAWS("dynamodb-local", moto=moto_server, dynamodb_local=dynamodb_local, initial_world=False)
    await local.start()
    yield local
    await local.stop()


@pytest.fixture(params=BACKENDS, ids=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """Which DynamoDB the test runs on: ``moto`` or ``dynamodb-local``."""
    return str(request.param)


@pytest.fixture
def local_aws(request: pytest.FixtureRequest, backend: str) -> LocalAWS:
    """The session's ``LocalAWS`` for this test's backend (started lazily)."""
    name = "local_moto" if backend == "moto" else "local_dynamodb_local"
    return request.getfixturevalue(name)


@pytest.fixture
async def world_factory(local_aws: LocalAWS) -> AsyncIterator[WorldFactory]:
    """``await world_factory()``: another AWSWorld on fresh resources; all are closed and dropped after."""
    made: list[AWSWorld] = []

    async def make() -> AWSWorld:
        world = AWSWorld(await local_aws.new_config())
        made.append(world)
        return world

    yield make
    for world in made:
        await world.close()
        await local_aws.drop(world.config)


@pytest.fixture
async def world(world_factory: WorldFactory) -> AWSWorld:
    """A fresh AWSWorld on its own table, bucket and queue; runs once per backend."""
    return await world_factory()


def local_aws_of(request: pytest.FixtureRequest, backend: str) -> LocalAWS:
    """The session's ``LocalAWS`` for an AWS backend (started on first use)."""
    return request.getfixturevalue("local_moto" if backend == "moto" else "local_dynamodb_local")


@pytest.fixture(params=STORAGE_BACKENDS, ids=STORAGE_BACKENDS)
def storage_backend(request: pytest.FixtureRequest) -> str:
    """Which World the test runs on: ``moto``, ``dynamodb-local`` (the AWS World) or ``memory``."""
    return str(request.param)


@pytest.fixture
def storage_local(request: pytest.FixtureRequest, storage_backend: str) -> LocalAWS | None:
    """The session's ``LocalAWS`` for an AWS backend, None for memory. A sync fixture: the session's LocalAWS
    fixtures are async, and requesting one from inside an async fixture (a running loop) cannot set it up."""
    return None if storage_backend == MEMORY else local_aws_of(request, storage_backend)


@pytest.fixture
async def storage_world_factory(storage_local: LocalAWS | None) -> AsyncIterator[AnyWorldFactory]:
    """``await storage_world_factory()``: another World on this test's backend, on fresh (empty) storage."""
    made: list[AnyWorld] = []
    local = storage_local

    async def make() -> AnyWorld:
        world: AnyWorld = MemoryWorld() if local is None else AWSWorld(await local.new_config())
        made.append(world)
        return world

    yield make
    for world in made:
        await world.close()
        if local is not None and isinstance(world, AWSWorld):
            await local.drop(world.config)


@pytest.fixture
async def storage_world(storage_world_factory: AnyWorldFactory) -> AnyWorld:
    """A fresh World on empty storage; runs once per backend of ``STORAGE_BACKENDS``."""
    return await storage_world_factory()
