"""Fixtures for the conformance tests beyond the session ones in ``tests/conftest.py``.

The queue and stream rules are the contract's, so their tests also run on the in-memory World
(``awsworld._memory``): ``queue_world`` and ``stream_world`` run a test on moto (``[moto]``), on
LocalStack's SQS and S3 (``[localstack]``, with DynamoDB Local) and on memory (``[memory]``); ``any_world``
adds DynamoDB Local beside moto's SQS for the tests whose conditions must hold under real contention.
Assertions about what AWS is asked (request counts, S3 objects, SQS attributes, markers in the table) run on the
AWS World only (``is_memory``); tests that are about SQS or S3 alone take ``sqs_s3_world`` (both SQS/S3
engines), and those about moto itself ``moto_world`` (``tests/conftest.py``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest

from awsworld.aws import AWSWorld
from awsworld.local import LocalAWS
from conftest import LOCAL_FIXTURES, LOCALSTACK, SQS_S3_BACKENDS  # tests/conftest.py (tests/ is on sys.path)

QUEUE_KINDS = ["moto", LOCALSTACK, "memory"]
ALL_KINDS = ["moto", "dynamodb-local", LOCALSTACK, "memory"]
# Streams also run on moto with per-run payload encryption on (sealed chunks: the same contract).
STREAM_KINDS = ["moto", "moto-encrypted", LOCALSTACK, "memory"]


def is_memory(world: Any) -> bool:
    return hasattr(world, "memory_queue")


def consumer_for(world: Any, prefix: str) -> Any:
    """The consuming side for ``prefix``: the SQS consumer, or the in-memory queue's."""
    return world.memory_queue.consumer(prefix) if is_memory(world) else world.sqs_queue.consumer(prefix)


def activity(world: Any) -> int:
    """A number that grows with every request to AWS (the AWS World) or every message sent (memory): equal
    before and after a call means the call sent nothing."""
    return int(world.memory_queue.sends) if is_memory(world) else int(world.stats.total())


@asynccontextmanager
async def processes(world: Any, count: int) -> AsyncIterator[list[Any]]:
    """``count`` more Worlds on ``world``'s table, bucket and queue, each with its own clients and caches (what
    other processes look like to the store). The in-memory World lives in one process: its peers are itself."""
    if is_memory(world):
        yield [world] * count
        return
    worlds = [AWSWorld(world.config) for _ in range(count)]
    try:
        yield worlds
    finally:
        for other in worlds:
            await other.close()


def new_memory_world() -> Any:
    from awsworld._memory import MemoryWorld

    return MemoryWorld()


def _backend(request: pytest.FixtureRequest) -> LocalAWS | None:
    """The session's LocalAWS for the param (started on first use), None for memory. Requested from a sync
    fixture: the session's LocalAWS fixtures are async and can only be requested from one."""
    kind = request.param
    if kind == "memory":
        return None
    return request.getfixturevalue(LOCAL_FIXTURES[kind.removesuffix("-encrypted")])


async def _world(local: LocalAWS | None, *, encrypted: bool = False) -> AsyncIterator[Any]:
    if local is None:
        memory = new_memory_world()
        yield memory
        await memory.close()
        return
    world = AWSWorld(await local.new_config(encrypt_payloads=encrypted))
    yield world
    await world.close()
    await local.drop(world.config)


@pytest.fixture(params=QUEUE_KINDS, ids=QUEUE_KINDS)
def queue_backend(request: pytest.FixtureRequest) -> LocalAWS | None:
    return _backend(request)


@pytest.fixture(params=ALL_KINDS, ids=ALL_KINDS)
def any_backend(request: pytest.FixtureRequest) -> LocalAWS | None:
    return _backend(request)


@pytest.fixture(scope="module", params=STREAM_KINDS, ids=STREAM_KINDS)
def stream_backend(request: pytest.FixtureRequest) -> tuple[LocalAWS | None, bool]:
    return _backend(request), request.param == "moto-encrypted"


@pytest.fixture(scope="module", params=ALL_KINDS, ids=ALL_KINDS)
def any_backend_per_module(request: pytest.FixtureRequest) -> LocalAWS | None:
    return _backend(request)


@pytest.fixture
async def queue_world(queue_backend: LocalAWS | None) -> AsyncIterator[Any]:
    """A fresh World per test, on moto, LocalStack or in memory: for the queue's contract rules."""
    async for world in _world(queue_backend):
        yield world


@pytest.fixture(params=SQS_S3_BACKENDS, ids=SQS_S3_BACKENDS)
def sqs_s3_backend(request: pytest.FixtureRequest) -> LocalAWS | None:
    return _backend(request)


@pytest.fixture(scope="module", params=SQS_S3_BACKENDS, ids=SQS_S3_BACKENDS)
def sqs_s3_backend_per_module(request: pytest.FixtureRequest) -> LocalAWS | None:
    return _backend(request)


@pytest.fixture
async def any_world(any_backend: LocalAWS | None) -> AsyncIterator[Any]:
    """A fresh World per test on moto, DynamoDB Local, LocalStack or in memory."""
    async for world in _world(any_backend):
        yield world


@pytest.fixture(scope="module")
async def stream_world(stream_backend: tuple[LocalAWS | None, bool]) -> AsyncIterator[Any]:
    """One World per module on moto (with and without payload encryption), LocalStack or in memory, for tests
    isolated by their own run ids (streams)."""
    local, encrypted = stream_backend
    async for world in _world(local, encrypted=encrypted):
        yield world


@pytest.fixture(scope="module")
async def any_world_per_module(any_backend_per_module: LocalAWS | None) -> AsyncIterator[Any]:
    """One World per module on moto, DynamoDB Local, LocalStack or in memory."""
    async for world in _world(any_backend_per_module):
        yield world


@pytest.fixture
async def sqs_s3_world(sqs_s3_backend: LocalAWS | None) -> AsyncIterator[AWSWorld]:
    """A fresh AWSWorld per test on each SQS/S3 engine (moto, and LocalStack beside DynamoDB Local): for the
    tests about SQS and S3 themselves (hops, markers, request counts, record shapes), which have no in-memory
    counterpart."""
    async for world in _world(sqs_s3_backend):
        yield world


@pytest.fixture(scope="module")
async def sqs_s3_world_per_module(sqs_s3_backend_per_module: LocalAWS | None) -> AsyncIterator[AWSWorld]:
    """One AWSWorld per module on each SQS/S3 engine, for AWS-only tests isolated by their own run ids."""
    async for world in _world(sqs_s3_backend_per_module):
        yield world


@pytest.fixture(scope="module")
async def moto_world_per_module(local_moto: LocalAWS) -> AsyncIterator[AWSWorld]:
    """One moto AWSWorld for a whole module, for AWS-only tests isolated by their own run ids (streams)."""
    world = AWSWorld(await local_moto.new_config())
    yield world
    await world.close()
    await local_moto.drop(world.config)
