"""The World's clients on an emulator (a loopback endpoint) send a fixed User-Agent, and work as before; on AWS,
botocore's own (``awsworld.aws.sdk.client_config``)."""

from __future__ import annotations

from typing import Any

import pytest

from awsworld.aws import AWSWorld, sdk


@pytest.mark.parametrize(("endpoint_url", "loopback"), [
    ("http://127.0.0.1:4566", True), ("http://localhost:8000", True), ("http://[::1]:9000", True),
    ("https://dynamodb.us-east-1.amazonaws.com", False), ("http://10.0.0.5:8000", False),
    ("http://localhost.example.com", False), (None, False),
])
def test_is_loopback(endpoint_url: str | None, loopback: bool) -> None:
    assert sdk.is_loopback(endpoint_url) is loopback


def test_aws_keeps_botocore_user_agent() -> None:
    assert sdk.client_config(4).user_agent is None
    assert sdk.client_config(4, loopback=True).user_agent == sdk.LOOPBACK_USER_AGENT


async def test_emulator_requests_carry_the_fixed_user_agent(world: AWSWorld) -> None:
    sent: list[str] = []

    def record(request: Any, **_: Any) -> None:
        sent.append(request.headers["User-Agent"].decode() if isinstance(request.headers["User-Agent"], bytes)
                    else request.headers["User-Agent"])

    world.clients.register_handler("before-send.dynamodb", record)
    ddb = await world.clients.dynamodb()
    key = {"pk": {"S": "RUN#ua"}, "sk": {"S": "ua"}}
    await ddb.put_item(TableName=world.config.table_name, Item={**key, "v": {"S": "x"}})
    item = (await ddb.get_item(TableName=world.config.table_name, Key=key, ConsistentRead=True))["Item"]
    assert item["v"] == {"S": "x"}  # the emulator (moto, DynamoDB Local) answers as before
    # botocore's own some twenty parts are not built; what a library registers for itself may follow (Powertools,
    # once imported in the process, appends its `PT/...` to every client's header)
    assert len(sent) == 2 and all(ua.split()[0] == sdk.LOOPBACK_USER_AGENT for ua in sent), sent
    assert not any("Botocore/" in ua or "md/" in ua for ua in sent), sent
