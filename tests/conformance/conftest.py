"""Fixtures for the conformance tests beyond the session ones in ``tests/conftest.py``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from awsworld.aws import AWSWorld
from awsworld.local import LocalAWS


@pytest.fixture
async def moto_world(local_moto: LocalAWS) -> AsyncIterator[AWSWorld]:
    """A fresh AWSWorld on moto only (table, bucket, queue, DLQ): for the queue and stream tests whose rules do
    not depend on which DynamoDB answers, so they run once, without starting DynamoDB Local."""
    world = AWSWorld(await local_moto.new_config())
    yield world
    await world.close()
    await local_moto.drop(world.config)


@pytest.fixture(scope="module")
async def moto_world_per_module(local_moto: LocalAWS) -> AsyncIterator[AWSWorld]:
    """One moto AWSWorld for a whole module, for tests isolated by their own run ids (streams), so each test
    does not pay for provisioning a table, bucket and queues."""
    world = AWSWorld(await local_moto.new_config())
    yield world
    await world.close()
    await local_moto.drop(world.config)
