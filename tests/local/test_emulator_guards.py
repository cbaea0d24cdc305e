"""Every emulator awsworld starts on loopback answers only this machine's programs: one table of ``Host`` and
``Origin`` headers, held against the rule (``from_this_machine``, ``src/awsworld/_http/loopback.py``) and against
each real server that applies it: moto's (``LoopbackOnly``, ``local/moto_server.py``), DynamoDB Local (its Java
launcher, ``local/java/LoopbackDynamoDBLocal.java``) and LocalStack (its launcher, ``local/localstack_launch.py``).

None of them checks credentials, and binding 127.0.0.1 keeps out other machines, not a web page open in this
machine's browser: a page whose name its DNS then points at 127.0.0.1 (DNS rebinding: ``Host: evil.example``)
reaches the port as its own origin and may send any method and headers, a made-up SigV4 ``Authorization`` too.
DynamoDB Local and LocalStack answered such a page (they read and wrote the table, the queue and the bucket)."""

from __future__ import annotations

import http.client
import json
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from awsworld._http.loopback import EMULATOR_REFUSAL, from_this_machine
from awsworld.local import DUMMY_CREDENTIALS, REGION, DynamoDBLocal, LocalStack, MotoServer
from awsworld.local.localstack_server import LAUNCHER

# (Host, Origin, answered): "{port}" is the server's port. The names of the table are the request's; a browser
# sends the page's own name as Host (rebinding) and its origin as Origin (every cross-origin request, every POST).
CASES: list[tuple[str, str | None, bool]] = [
    ("127.0.0.1:{port}", None, True),  # boto3, the AWS CLI
    ("localhost:{port}", None, True),
    ("LocalHost:{port}", None, True),
    ("bucket.localhost:{port}", None, True),  # a bucket's virtual host (RFC 6761 keeps *.localhost on loopback)
    ("[::1]:{port}", None, True),
    ("127.0.0.1:{port}", "http://127.0.0.1:8765", True),  # the run viewer's page
    ("127.0.0.1:{port}", "http://localhost:3000", True),
    ("127.0.0.1:{port}", "http://[::1]:3000", True),
    ("evil.example:{port}", None, False),  # DNS rebinding
    ("evil.example", None, False),
    ("127.0.0.1.evil.example:{port}", None, False),
    ("localhost.evil.example:{port}", None, False),
    ("evil.example:{port}", "http://evil.example:{port}", False),
    ("127.0.0.1:{port}", "http://evil.example", False),  # a page of another site, sent to 127.0.0.1
    ("127.0.0.1:{port}", "https://app.localstack.cloud", False),  # LocalStack's own CORS let this one read
    ("127.0.0.1:{port}", "null", False),  # a sandboxed frame, a file
]

SIGNED = "AWS4-HMAC-SHA256 Credential={key}/20260101/{region}/{service}/aws4_request, SignedHeaders=host, Signature=00"


def _fill(text: str | None, port: int) -> str | None:
    return None if text is None else text.replace("{port}", str(port))


def test_the_rule_answers_the_table() -> None:
    assert [from_this_machine(_fill(host, 8000) or "", _fill(origin, 8000)) for host, origin, _ in CASES] == [
        answered for _, _, answered in CASES]
    assert not from_this_machine("", None), "a request without Host is refused"


def send(port: int, method: str, path: str, host: str, origin: str | None, service: str,
         headers: dict[str, str] | None = None, data: bytes = b"") -> tuple[int, bytes]:
    """A request as a web page's script sends it (``fetch`` with a made-up SigV4 ``Authorization`` of the dummy
    credentials, so an answered one lands where boto3's do), with exactly these ``Host`` and ``Origin``."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        sent = {"Host": host, "Content-Length": str(len(data)), **(headers or {}),
                "Authorization": SIGNED.format(key=DUMMY_CREDENTIALS["aws_access_key_id"], region=REGION,
                                               service=service)}
        if origin is not None:
            sent["Origin"] = origin
        for name, value in sent.items():
            connection.putheader(name, value)
        connection.endheaders(data)
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


LOAD_THE_RULE = """
import runpy, sys
launcher = runpy.run_path(sys.argv[1], run_name="launcher")  # its definitions only: LocalStack is not started
rule = launcher["_load_loopback_rule"]()
print(rule.from_this_machine("localhost:4566", None), rule.from_this_machine("evil.example:4566", None))
"""


def test_the_localstack_launcher_loads_the_rule_with_the_standard_library_alone() -> None:
    """LocalStack's interpreter has no awsworld: the launcher loads ``loopback.py`` by its path, which works only
    while that module imports nothing but the standard library. Checked in an interpreter without site-packages
    (``-I -S``), in a second, rather than by a LocalStack start that fails."""
    done = subprocess.run([sys.executable, "-I", "-S", "-c", LOAD_THE_RULE, str(LAUNCHER)], capture_output=True,
                          text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "True False\n"), done.stderr


def raw_request(port: int, host: str, origin: str | None, service: str, target: str,
                body: dict[str, Any]) -> tuple[int, bytes]:
    """A JSON-protocol call (DynamoDB's, SQS's) through ``send``."""
    return send(port, "POST", "/", host, origin, service,
                {"X-Amz-Target": target, "Content-Type": "application/x-amz-json-1.0"}, json.dumps(body).encode())


def _client(service: str, endpoint_url: str) -> Any:
    return boto3.client(service, endpoint_url=endpoint_url, region_name=REGION,  # type: ignore[call-overload]
                        **DUMMY_CREDENTIALS)


@pytest.fixture(params=["moto", "dynamodb-local"])
def dynamodb_server(request: pytest.FixtureRequest) -> MotoServer | DynamoDBLocal:
    return request.getfixturevalue("moto_server" if request.param == "moto" else "dynamodb_local")


@pytest.fixture
def table(dynamodb_server: MotoServer | DynamoDBLocal) -> Iterator[str]:
    dynamodb = _client("dynamodb", dynamodb_server.endpoint_url)
    name = f"guard-{uuid.uuid4().hex[:12]}"
    dynamodb.create_table(TableName=name, BillingMode="PAY_PER_REQUEST",
                          AttributeDefinitions=[{"AttributeName": "pk", "AttributeType": "S"}],
                          KeySchema=[{"AttributeName": "pk", "KeyType": "HASH"}])
    yield name
    dynamodb.delete_table(TableName=name)


def test_dynamodb_emulators_answer_only_this_machine(dynamodb_server: MotoServer | DynamoDBLocal,
                                                     table: str) -> None:
    """Each case writes an item of its own and reads the table: the refused ones get the emulator's 403, write
    nothing and read nothing; the answered ones do both."""
    dynamodb, port = _client("dynamodb", dynamodb_server.endpoint_url), dynamodb_server.port
    secret = f"secret-{uuid.uuid4().hex}"
    dynamodb.put_item(TableName=table, Item={"pk": {"S": "kept"}, "v": {"S": secret}})
    for index, (host, origin, answered) in enumerate(CASES):
        host_, origin_ = _fill(host, port) or "", _fill(origin, port)
        put = raw_request(port, host_, origin_, "dynamodb", "DynamoDB_20120810.PutItem",
                          {"TableName": table, "Item": {"pk": {"S": f"case-{index}"}}})
        scan = raw_request(port, host_, origin_, "dynamodb", "DynamoDB_20120810.Scan", {"TableName": table})
        if answered:
            assert (put[0], scan[0], secret.encode() in scan[1]) == (200, 200, True), (host_, origin_, put, scan)
        else:
            assert put == scan == (403, EMULATOR_REFUSAL.encode()), (host_, origin_, put, scan)
    stored = {item["pk"]["S"] for item in dynamodb.scan(TableName=table)["Items"]}
    assert stored == {"kept"} | {f"case-{index}" for index, (_, _, answered) in enumerate(CASES) if answered}


def test_localstack_answers_only_this_machine(localstack: LocalStack) -> None:
    """A queue with a message of its own: each case sends a message and tries to read the queue, then to purge
    and delete it; the refused ones get the 403, send nothing, read nothing and leave the queue's messages in
    place. The answered ones without an ``Origin`` send their messages."""
    sqs, port = _client("sqs", localstack.endpoint_url), localstack.port
    url = sqs.create_queue(QueueName=f"guard-{uuid.uuid4().hex[:12]}")["QueueUrl"]
    try:
        secret = f"secret-{uuid.uuid4().hex}"
        sqs.send_message(QueueUrl=url, MessageBody=secret)
        for index, (host, origin, answered) in enumerate(CASES):
            if answered:
                continue
            host_, origin_ = _fill(host, port) or "", _fill(origin, port)
            calls = [("AmazonSQS.SendMessage", {"QueueUrl": url, "MessageBody": f"case-{index}"}),
                     ("AmazonSQS.ReceiveMessage", {"QueueUrl": url, "VisibilityTimeout": 0}),
                     ("AmazonSQS.PurgeQueue", {"QueueUrl": url}),
                     ("AmazonSQS.DeleteQueue", {"QueueUrl": url})]
            for target, body in calls:
                assert raw_request(port, host_, origin_, "sqs", target, body) == (
                    403, EMULATOR_REFUSAL.encode()), (host_, origin_, target)
        bodies = [message["Body"] for message in sqs.receive_message(
            QueueUrl=url, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])]
        assert bodies == [secret], "the refused requests changed the queue"

        sent = 0
        for index, (host, origin, answered) in enumerate(CASES):
            if not answered:
                continue
            host_, origin_ = _fill(host, port) or "", _fill(origin, port)
            status, body = raw_request(port, host_, origin_, "sqs", "AmazonSQS.SendMessage",
                                       {"QueueUrl": url, "MessageBody": f"case-{index}"})
            # LocalStack's own CORS check refuses the origins it does not know (a loopback page on another port
            # too): stricter than the rule, and left as it is.
            assert status == 200 if origin is None else body != EMULATOR_REFUSAL.encode(), (host_, origin_, body)
            sent += status == 200
        attributes = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages",
                                                                            "ApproximateNumberOfMessagesNotVisible"])
        counts = attributes["Attributes"]
        assert int(counts["ApproximateNumberOfMessages"]) + int(counts["ApproximateNumberOfMessagesNotVisible"]) \
            == 1 + sent
    finally:
        sqs.delete_queue(QueueUrl=url)


def test_localstack_keeps_the_bucket_from_other_sites(localstack: LocalStack) -> None:
    """A bucket's object (a run's payload under ``awsworld dev --sqs-s3 localstack``) is neither read, listed,
    overwritten nor deleted by a refused request, path-style or virtual-hosted; a program reads it either way."""
    s3, port = _client("s3", localstack.endpoint_url), localstack.port
    bucket, secret = f"guard-{uuid.uuid4().hex[:12]}", f"secret-{uuid.uuid4().hex}".encode()
    s3.create_bucket(Bucket=bucket)
    s3.put_object(Bucket=bucket, Key="payload", Body=secret)
    try:
        for host, origin, answered in CASES:
            if answered:
                continue
            host_, origin_ = _fill(host, port) or "", _fill(origin, port)
            for method, path, data in (("GET", f"/{bucket}/payload", b""), ("GET", f"/{bucket}", b""),
                                       ("PUT", f"/{bucket}/payload", b"overwritten"),
                                       ("DELETE", f"/{bucket}/payload", b"")):
                assert send(port, method, path, host_, origin_, "s3", data=data) == (
                    403, EMULATOR_REFUSAL.encode()), (host_, origin_, method, path)
        assert s3.get_object(Bucket=bucket, Key="payload")["Body"].read() == secret
        assert send(port, "GET", f"/{bucket}/payload", f"127.0.0.1:{port}", None, "s3") == (200, secret)
        assert send(port, "GET", "/payload", f"{bucket}.s3.localhost:{port}", None, "s3") == (200, secret)
    finally:
        s3.delete_object(Bucket=bucket, Key="payload")
        s3.delete_bucket(Bucket=bucket)
