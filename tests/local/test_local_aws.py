"""Provisioning matches awsworld.aws.resources on both backends; LocalAWS starts, isolates and stops."""

from __future__ import annotations

import asyncio
import json
import os
import socket
from typing import Any

import pytest
from botocore.exceptions import ClientError

from awsworld.aws import AWSWorld, resources
from awsworld.local import LocalAWS, MotoServer
from awsworld.world.errors import WorldSetupError


async def test_table_is_provisioned_as_defined(world: AWSWorld, backend: str) -> None:
    ddb = await world.clients.dynamodb()
    table = (await ddb.describe_table(TableName=world.config.table_name))["Table"]
    expected = resources.table_properties()
    assert table["TableStatus"] == "ACTIVE"
    assert table["KeySchema"] == expected["KeySchema"]
    assert table["BillingModeSummary"]["BillingMode"] == "PAY_PER_REQUEST"
    assert {d["AttributeName"]: d["AttributeType"] for d in table["AttributeDefinitions"]} == {
        d["AttributeName"]: d["AttributeType"] for d in expected["AttributeDefinitions"]
    }
    indexes = {i["IndexName"]: i for i in table["GlobalSecondaryIndexes"]}
    for wanted in expected["GlobalSecondaryIndexes"]:
        index = indexes[wanted["IndexName"]]
        assert index["KeySchema"] == wanted["KeySchema"]
        assert index["Projection"]["ProjectionType"] == wanted["Projection"]["ProjectionType"]
        assert sorted(index["Projection"]["NonKeyAttributes"]) == sorted(wanted["Projection"]["NonKeyAttributes"])
    ttl = (await ddb.describe_time_to_live(TableName=world.config.table_name))["TimeToLiveDescription"]
    assert ttl == {"TimeToLiveStatus": "ENABLED", "AttributeName": resources.TTL_ATTRIBUTE}
    if backend == "moto":  # DynamoDB Local ignores SSE and has no continuous backups API
        assert table["SSEDescription"]["Status"] == "ENABLED"
        backups = (await ddb.describe_continuous_backups(TableName=world.config.table_name))
        pitr = backups["ContinuousBackupsDescription"]["PointInTimeRecoveryDescription"]
        assert pitr["PointInTimeRecoveryStatus"] == "ENABLED"


async def test_a_protected_table_refuses_deletion_until_dropped_on_purpose(
        local_aws: LocalAWS, backend: str) -> None:
    """As the deployed table (``TableDeletionProtection``, off by default, on for a stack that exists): once on, a
    DeleteTable is refused and leaves the table and its items; ``drop`` (``provision.delete_table``) turns the
    protection off first, then deletes it. Both emulators keep and enforce the flag."""
    config = await local_aws.new_config()
    world = AWSWorld(config)
    try:
        ddb = await world.clients.dynamodb()
        item = {"pk": {"S": "RUN#kept"}, "sk": {"S": "RUN"}}
        await ddb.put_item(TableName=config.table_name, Item=item)
        described = await ddb.describe_table(TableName=config.table_name)
        assert described["Table"].get("DeletionProtectionEnabled", False) is False, "off by default"
        await ddb.update_table(TableName=config.table_name, DeletionProtectionEnabled=True)
        assert (await ddb.describe_table(TableName=config.table_name))["Table"]["DeletionProtectionEnabled"] is True
        with pytest.raises(ClientError) as refused:
            await ddb.delete_table(TableName=config.table_name)
        assert refused.value.response["Error"]["Code"] == "ValidationException", (backend, refused.value)
        kept = await ddb.get_item(TableName=config.table_name, Key=item, ConsistentRead=True)
        assert kept["Item"] == item, "the refused delete left the table and its items"
        await local_aws.drop(config)
        with pytest.raises(WorldSetupError, match="does not exist"):
            await ddb.describe_table(TableName=config.table_name)
    finally:
        await world.close()


async def test_bucket_and_queues_are_provisioned_as_defined(world: AWSWorld) -> None:
    config = world.config
    s3 = await world.clients.s3()
    encryption = await s3.get_bucket_encryption(Bucket=config.bucket_name)
    rule = encryption["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"] == {"SSEAlgorithm": "AES256"}
    block = await s3.get_public_access_block(Bucket=config.bucket_name)
    assert block["PublicAccessBlockConfiguration"] == resources.bucket_public_access_block()

    sqs = await world.clients.sqs()
    assert config.queue_url and config.dlq_url
    dlq = (await sqs.get_queue_attributes(QueueUrl=config.dlq_url, AttributeNames=["All"]))["Attributes"]
    queue = (await sqs.get_queue_attributes(QueueUrl=config.queue_url, AttributeNames=["All"]))["Attributes"]
    expected = resources.queue_attributes(dlq["QueueArn"])
    for name in ("VisibilityTimeout", "MessageRetentionPeriod", "SqsManagedSseEnabled"):
        assert queue[name] == expected[name]
    assert json.loads(queue["RedrivePolicy"]) == json.loads(expected["RedrivePolicy"])
    assert dlq["MessageRetentionPeriod"] == resources.dlq_attributes()["MessageRetentionPeriod"]


async def test_world_factory_gives_isolated_worlds(world_factory, backend: str) -> None:  # type: ignore[no-untyped-def]
    first, second = await world_factory(), await world_factory()
    assert first.config.table_name != second.config.table_name
    assert first.config.bucket_name != second.config.bucket_name
    assert first.config.queue_url != second.config.queue_url
    ddb = await first.clients.dynamodb()
    await ddb.put_item(TableName=first.config.table_name, Item={"pk": {"S": "x"}, "sk": {"S": "y"}})
    other = await second.clients.dynamodb()
    got = await other.get_item(TableName=second.config.table_name, Key={"pk": {"S": "x"}, "sk": {"S": "y"}})
    assert "Item" not in got
    expected_endpoint = first.config.endpoint_url if backend == "moto" else first.config.dynamodb_endpoint_url
    assert first.config.dynamodb_endpoint_url == expected_endpoint
    if backend == "dynamodb-local":
        assert first.config.dynamodb_endpoint_url != first.config.endpoint_url


async def test_local_aws_owns_and_stops_its_server() -> None:
    environ = dict(os.environ)
    async with LocalAWS() as local:
        endpoint, world = local.endpoint_url, local.world
        assert local.config is world.config
        assert world.config.endpoint_url == endpoint
        port = int(endpoint.rsplit(":", 1)[1])
        extra = await local.new_world()
        assert extra.config.table_name != world.config.table_name
        ddb = await world.clients.dynamodb()
        assert world.config.table_name in (await ddb.list_tables())["TableNames"]
    assert dict(os.environ) == environ  # credentials went through client options, not the environment
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


async def test_local_aws_leaves_shared_servers_running(moto_server: MotoServer) -> None:
    async with LocalAWS(moto=moto_server) as local:
        assert local.endpoint_url == moto_server.endpoint_url
    assert moto_server.running


async def test_exit_cancels_the_pollers_long_poll_instead_of_waiting_it_out(moto_server: MotoServer) -> None:
    """``LocalAWS``'s exit (every ``awsworld_local`` test's teardown, and ``awsworld dev``'s Ctrl-C through
    ``LocalPoller.stop``) used to wait for the receive in progress to end: up to a second of each test, for nothing.
    The receive here long-polls for 20 s (so it is surely in flight at the exit): it is cancelled, not waited for."""
    ended: list[int] = []
    cancelled: list[int] = []
    async with LocalAWS(moto=moto_server) as local:
        assert local.poller is not None
        consumer = local.poller.consumer
        receive = consumer.receive
        in_flight = asyncio.Event()

        async def long_receive(max_messages: int = 10, wait_seconds: float = 0) -> list[dict[str, Any]]:
            in_flight.set()
            try:
                records = await receive(max_messages, wait_seconds=20)
            except asyncio.CancelledError:
                cancelled.append(1)
                raise
            ended.append(len(records))
            return records

        consumer.receive = long_receive  # type: ignore[method-assign]
        await in_flight.wait()
    assert (ended, cancelled) == ([], [1])


async def test_local_aws_with_its_own_dynamodb_local() -> None:
    async with LocalAWS(dynamodb="dynamodb-local") as local:
        assert local.dynamodb_endpoint_url != local.endpoint_url
        ddb = await local.world.clients.dynamodb()
        assert local.config.table_name in (await ddb.list_tables())["TableNames"]
        port = int(local.dynamodb_endpoint_url.rsplit(":", 1)[1])
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=2).close()


def test_unknown_backend_is_rejected() -> None:
    with pytest.raises(ValueError, match="dynamodb must be one of"):
        LocalAWS("localstack")  # type: ignore[arg-type]
