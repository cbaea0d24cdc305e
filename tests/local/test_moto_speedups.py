"""moto's server answers as before with ``moto_speedups`` installed: the work done once gives moto's answers.

The tests talk to the session's embedded moto server over HTTP (the path awsworld uses; the server installs the
speedups when it starts) and compare with moto's own functions where the API cannot show a difference.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError

from awsworld.local import DUMMY_CREDENTIALS, moto_speedups
from awsworld.local.moto_server import MotoServer

KEY_SCHEMA = [{"AttributeName": "pk", "KeyType": "HASH"}]
ATTRIBUTES = [{"AttributeName": "pk", "AttributeType": "S"}]


def aws(server: MotoServer, service: str) -> Any:
    return boto3.client(service, endpoint_url=server.endpoint_url, region_name="us-east-1",  # type: ignore[call-overload]
                        **DUMMY_CREDENTIALS)


@pytest.fixture
def table(moto_server: MotoServer) -> Iterator[tuple[Any, str]]:
    ddb = aws(moto_server, "dynamodb")
    name = f"speedups-{uuid.uuid4().hex[:10]}"
    ddb.create_table(TableName=name, KeySchema=KEY_SCHEMA, AttributeDefinitions=ATTRIBUTES,
                     BillingMode="PAY_PER_REQUEST")
    yield ddb, name
    ddb.delete_table(TableName=name)


def test_installed_on_the_pinned_moto(moto_server: MotoServer) -> None:
    from moto import backends
    from moto.core import responses
    from moto.dynamodb.parsing.expressions import UpdateExpressionParser
    from moto.sqs.models import SQSBackend

    assert moto_speedups.install() == []  # already installed by the server: nothing left as moto has it
    originals = moto_speedups.originals()
    assert backends.list_of_moto_modules is not originals["list_of_moto_modules"]
    assert responses.__dict__["method_names_from_class"] is not originals["method_names_from_class"]
    assert UpdateExpressionParser.make.__func__ is not originals["UpdateExpressionParser.make"]  # type: ignore[attr-defined]
    assert (SQSBackend.is_message_valid_based_on_retention_period
            is moto_speedups.is_message_valid_based_on_retention_period)
    from moto.sqs.models import Queue
    assert Queue.wait_for_messages is moto_speedups.wait_for_messages  # type: ignore[comparison-overlap]
    # Same answers as moto's own functions.
    assert list(backends.list_of_moto_modules()) == list(originals["list_of_moto_modules"]())
    from moto.dynamodb.responses import DynamoHandler
    names = responses.__dict__["method_names_from_class"]
    assert names(DynamoHandler) == originals["method_names_from_class"](DynamoHandler)


def test_a_changed_moto_function_is_left_alone() -> None:
    def list_of_moto_modules() -> list[str]:
        return []

    assert moto_speedups._check({"list_of_moto_modules": list_of_moto_modules}) == ["list_of_moto_modules"]
    assert moto_speedups._check(moto_speedups.originals()) == []
    # No source to read (moto installed as bytecode only) counts as changed, rather than failing the server's start.
    compiled = eval("lambda: []")  # a function whose source inspect cannot find
    assert moto_speedups.source_digest(compiled) == ""
    assert moto_speedups._check({"list_of_moto_modules": compiled}) == ["list_of_moto_modules"]


def test_a_kept_update_expression_is_evaluated_afresh_each_time(table: tuple[Any, str]) -> None:
    ddb, name = table
    expression = "SET n = if_not_exists(n, :zero) + :step, tags = list_append(if_not_exists(tags, :empty), :tag)"
    for pk in ("a", "b"):
        for step in (1, 2, 3):
            ddb.update_item(TableName=name, Key={"pk": {"S": pk}}, UpdateExpression=expression,
                            ExpressionAttributeValues={":zero": {"N": "0"}, ":step": {"N": str(step)},
                                                       ":empty": {"L": []}, ":tag": {"L": [{"S": f"{pk}{step}"}]}})
    for pk in ("a", "b"):
        item = ddb.get_item(TableName=name, Key={"pk": {"S": pk}}, ConsistentRead=True)["Item"]
        assert item["n"] == {"N": "6"}
        assert item["tags"] == {"L": [{"S": f"{pk}1"}, {"S": f"{pk}2"}, {"S": f"{pk}3"}]}
    # In a transaction too (moto parses it in the response and again in the backend).
    ddb.transact_write_items(TransactItems=[{"Update": {
        "TableName": name, "Key": {"pk": {"S": "a"}}, "UpdateExpression": expression,
        "ExpressionAttributeValues": {":zero": {"N": "0"}, ":step": {"N": "10"}, ":empty": {"L": []},
                                      ":tag": {"L": [{"S": "t"}]}}}}])
    assert ddb.get_item(TableName=name, Key={"pk": {"S": "a"}}, ConsistentRead=True)["Item"]["n"] == {"N": "16"}


def test_a_malformed_update_expression_fails_every_time(table: tuple[Any, str]) -> None:
    ddb, name = table
    for _ in range(2):
        with pytest.raises(ClientError) as failed:
            ddb.update_item(TableName=name, Key={"pk": {"S": "a"}}, UpdateExpression="SET n = = :v",
                            ExpressionAttributeValues={":v": {"N": "1"}})
        assert failed.value.response["Error"]["Code"] == "ValidationException"
        assert "Invalid UpdateExpression" in failed.value.response["Error"]["Message"]
    # A value the expression does not define is found when the kept tree is resolved against this request.
    ddb.update_item(TableName=name, Key={"pk": {"S": "a"}}, UpdateExpression="SET n = :v",
                    ExpressionAttributeValues={":v": {"N": "1"}})
    with pytest.raises(ClientError) as failed:
        ddb.update_item(TableName=name, Key={"pk": {"S": "a"}}, UpdateExpression="SET n = :v",
                        ExpressionAttributeValues={":w": {"N": "1"}})
    assert failed.value.response["Error"]["Code"] == "ValidationException"


def sent_ago(message: Any, seconds: int) -> None:
    assert message.sent_timestamp is not None
    message.sent_timestamp -= seconds * 1000


def test_receive_drops_messages_past_the_retention_period(moto_server: MotoServer) -> None:
    from moto.sqs.models import sqs_backends

    sqs = aws(moto_server, "sqs")
    name = f"speedups-{uuid.uuid4().hex[:10]}"
    url = sqs.create_queue(QueueName=name, Attributes={"MessageRetentionPeriod": "60"})["QueueUrl"]
    try:
        queue = next(backend.queues[name] for account in sqs_backends.values() for backend in account.values()
                     if name in backend.queues)
        sqs.send_message(QueueUrl=url, MessageBody="kept")
        sent_ago(queue._messages[-1], 59)  # within the queue's 60 s
        received = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", [])
        assert [message["Body"] for message in received] == ["kept"]  # in flight now, so not received again
        sqs.send_message(QueueUrl=url, MessageBody="old")
        sent_ago(queue._messages[-1], 61)  # past the queue's 60 s
        assert sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0).get("Messages", []) == []
    finally:
        sqs.delete_queue(QueueUrl=url)


def test_attribute_values_come_back_as_stored_without_a_walk_of_their_members(
        table: tuple[Any, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """A string, number, boolean or null attribute value is written as it is (``attribute_value_fast``): moto
    walked each as a structure of ten members (``_serialize_structure_member``), about 0.1 ms a value, so a
    500-step run's steps page (8,000 values) took a second to answer. Every kind reads back as it was put, the
    nested ones (moto's walk, their members written here) too."""
    from moto.core.serialize import ResponseSerializer

    ddb, name = table
    item = {"pk": {"S": "all"}, "s": {"S": ""}, "n": {"N": "-1.5e3"}, "b": {"B": b"\x00\xff"},
            "t": {"BOOL": False}, "z": {"NULL": True}, "ss": {"SS": ["a", "b"]}, "ns": {"NS": ["1", "2"]},
            "bs": {"BS": [b"x"]}, "l": {"L": [{"S": "x"}, {"N": "1"}, {"M": {"k": {"BOOL": True}}}, {"B": b"y"}]},
            "m": {"M": {"a": {"S": "b"}, "c": {"L": []}, "d": {"NULL": True}}}}
    ddb.put_item(TableName=name, Item=item)
    got = ddb.get_item(TableName=name, Key={"pk": {"S": "all"}}, ConsistentRead=True)["Item"]
    assert got == item

    walked = []
    member = ResponseSerializer._serialize_structure_member

    def counted(self: Any, serialized: Any, value: Any, shape: Any, key: str) -> None:
        if getattr(getattr(shape, "parent", None), "name", None) == "AttributeValue":  # a member of a value
            walked.append(key)
        member(self, serialized, value, shape, key)

    monkeypatch.setattr(ResponseSerializer, "_serialize_structure_member", counted)
    plain = {f"a{i}": {"S": f"value {i}"} for i in range(50)} | {"n": {"N": "7"}, "f": {"BOOL": True}}
    ddb.put_item(TableName=name, Item={"pk": {"S": "plain"}, **plain})
    walked.clear()
    assert ddb.get_item(TableName=name, Key={"pk": {"S": "plain"}}, ConsistentRead=True)["Item"] == {
        "pk": {"S": "plain"}, **plain}
    assert walked == [], "written as they are"


def test_a_long_poll_waits_until_a_kept_back_message_falls_due_not_its_next_second(moto_server: MotoServer) -> None:
    """moto's long poll wakes on sends only, a second at a time: a delayed message (every ``sleep`` under ``dev``)
    reached a waiting ``ReceiveMessage`` up to a second late (0.12 to 0.92 s for a 1 s delay). The wait now ends
    when the first message kept back (by its delay, or a receive's visibility timeout) falls due: here, what that
    wait is, read from the queue's messages as the server holds them."""
    from moto.sqs.models import sqs_backends

    sqs = aws(moto_server, "sqs")
    name = f"speedups-{uuid.uuid4().hex[:10]}"
    url = sqs.create_queue(QueueName=name)["QueueUrl"]
    try:
        queue = next(backend.queues[name] for account in sqs_backends.values() for backend in account.values()
                     if name in backend.queues)
        assert moto_speedups.until_due(queue._messages, 20) == 20  # nothing kept back: the poll's own second
        sqs.send_message(QueueUrl=url, MessageBody="later", DelaySeconds=30)
        assert moto_speedups.until_due(queue._messages, 20) == 20  # due after the wait's end
        sqs.send_message(QueueUrl=url, MessageBody="soon", DelaySeconds=2)
        assert 1.5 < moto_speedups.until_due(queue._messages, 20) <= 2.001  # (the old wait: 20, woken each second)
        sqs.send_message(QueueUrl=url, MessageBody="now")
        [received] = sqs.receive_message(QueueUrl=url, WaitTimeSeconds=0, VisibilityTimeout=1)["Messages"]
        assert received["Body"] == "now"
        assert 0.5 < moto_speedups.until_due(queue._messages, 20) <= 1.001  # in flight: back when its timeout ends
    finally:
        sqs.delete_queue(QueueUrl=url)
