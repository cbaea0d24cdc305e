"""Lambda as the handlers see it, built from real queue messages: SQS events in the exact shape the event
source mapping delivers, a context whose remaining time runs down, the X-Ray trace header Lambda puts in the
environment of every invocation (traced or not), and an event source mapping stand-in that receives from the
emulator's queue, invokes a handler, and deletes what the handler did not report as failed.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import logging
import os
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.shared.constants import XRAY_TRACE_ID_ENV

from awsworld.aws import AWSWorld

REGION = "us-east-1"
ACCOUNT = "123456789012"
#: What Powertools' ``inject_lambda_context`` puts on every line and an untraced function's lines leave out
#: (awsworld/lambda_host/observability.py): the log group and Lambda's REPORT line say them.
LEFT_OUT_KEYS = frozenset({"function_name", "function_memory_size", "function_arn", "xray_trace_id"})


class LambdaContext:
    """The attributes of Lambda's context object that Powertools and the handlers read, with a real deadline."""

    def __init__(self, timeout_ms: int = 120_000, function_name: str = "awsworld-test-flow") -> None:
        self._deadline = time.monotonic() + timeout_ms / 1000
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.invoked_function_arn = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{function_name}"
        self.memory_limit_in_mb = 1024
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "2026/01/01/[$LATEST]0123456789abcdef"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self._deadline - time.monotonic()) * 1000))


class LambdaLoggerHandler(logging.Handler):
    """What Lambda's Python runtime puts on the root logger before it imports the handler module, for a function
    whose ``LoggingConfig`` is ``LogFormat: Text`` (awslambdaric's ``bootstrap._setup_logging``): its class name,
    its line (``[LEVEL]<tab>time<tab>request id<tab>message``) written to stdout, and the root left at WARNING."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("[%(levelname)s]\t%(asctime)s.%(msecs)03dZ\t-\t%(message)s\n",
                                            "%Y-%m-%dT%H:%M:%S"))

    def emit(self, record: logging.LogRecord) -> None:
        sys.stdout.write(self.format(record))


@contextlib.contextmanager
def lambda_root_logger() -> Iterator[None]:
    """The root logger as Lambda's runtime sets it up, for the life of the block; then as it was."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    root.addHandler(LambdaLoggerHandler())
    root.setLevel(logging.WARNING)
    try:
        yield
    finally:  # (what the function added: its own, and the runtime's if still there; pytest's come and go)
        for handler in list(root.handlers):
            if handler not in handlers and not type(handler).__module__.startswith("_pytest"):
                root.removeHandler(handler)
        root.setLevel(level)


@contextlib.contextmanager
def trace_header() -> Iterator[str]:
    """The trace header in the environment for one invocation, as Lambda's runtime sets it (``Sampled=0``: the
    function's tracing is off, the header is there all the same); yields its trace id, then restores the variable."""
    trace_id = f"1-{int(time.time()):08x}-{uuid.uuid4().hex[:24]}"
    before = os.environ.get(XRAY_TRACE_ID_ENV)
    os.environ[XRAY_TRACE_ID_ENV] = f"Root={trace_id};Parent={uuid.uuid4().hex[:16]};Sampled=0"
    try:
        yield trace_id
    finally:
        if before is None:
            os.environ.pop(XRAY_TRACE_ID_ENV, None)
        else:
            os.environ[XRAY_TRACE_ID_ENV] = before


async def invoke_as_lambda(handler: Callable[[dict[str, Any], Any], Any], event: dict[str, Any],
                           context: LambdaContext) -> Any:
    """One invocation as Lambda runs it: in a thread (the handler is synchronous and runs its own event loop),
    with the trace header in the environment."""
    with trace_header():
        return await asyncio.to_thread(handler, event, context)


def _message_attributes(attributes: dict[str, Any]) -> dict[str, Any]:
    """ReceiveMessage's ``MessageAttributes`` in the Lambda record's spelling."""
    converted = {}
    for name, value in attributes.items():
        binary = value.get("BinaryValue")
        converted[name] = {
            "stringValue": value.get("StringValue"),
            "binaryValue": base64.b64encode(binary).decode() if isinstance(binary, bytes) else binary,
            "stringListValues": [],
            "binaryListValues": [],
            "dataType": value["DataType"],
        }
    return converted


def lambda_record(message: dict[str, Any], queue_arn: str) -> dict[str, Any]:
    """One ReceiveMessage message as the SQS event source mapping hands it to Lambda."""
    attributes = message.get("Attributes", {})
    return {
        "messageId": message["MessageId"],
        "receiptHandle": message["ReceiptHandle"],
        "body": message["Body"],
        "attributes": {
            "ApproximateReceiveCount": attributes["ApproximateReceiveCount"],
            "SentTimestamp": attributes["SentTimestamp"],
            "SenderId": attributes.get("SenderId", "AIDAIENQZJOLO23YVJ4VO"),
            "ApproximateFirstReceiveTimestamp": attributes.get("ApproximateFirstReceiveTimestamp",
                                                               attributes["SentTimestamp"]),
        },
        "messageAttributes": _message_attributes(message.get("MessageAttributes", {})),
        "md5OfBody": message["MD5OfBody"],
        "eventSource": "aws:sqs",
        "eventSourceARN": queue_arn,
        "awsRegion": REGION,
    }


@dataclass
class Invocation:
    event: dict[str, Any]
    response: dict[str, Any]
    request_id: str  # the context's aws_request_id, which the invocation's log lines carry
    trace_id: str  # the Root of the trace header Lambda set for it

    @property
    def message_ids(self) -> list[str]:
        return [r["messageId"] for r in self.event["Records"]]

    @property
    def failed(self) -> set[str]:
        return {f["itemIdentifier"] for f in self.response.get("batchItemFailures", [])}


@dataclass
class EventSourceMapping:
    """Receive a batch, invoke the handler as ``invoke_as_lambda`` does, delete the records not reported as
    failed."""

    world: AWSWorld
    handler: Callable[[dict[str, Any], Any], dict[str, Any]]
    batch_size: int = 10
    timeout_ms: int = 120_000
    visibility_timeout: int = 60
    invocations: list[Invocation] = field(default_factory=list)

    async def queue_arn(self) -> str:
        sqs = await self.world.clients.sqs()
        attributes = await sqs.get_queue_attributes(QueueUrl=self.world.config.queue_url, AttributeNames=["QueueArn"])
        return str(attributes["Attributes"]["QueueArn"])

    async def receive(self, wait_seconds: int = 1, max_messages: int | None = None) -> list[dict[str, Any]]:
        sqs = await self.world.clients.sqs()
        response = await sqs.receive_message(
            QueueUrl=self.world.config.queue_url, MaxNumberOfMessages=max_messages or self.batch_size,
            WaitTimeSeconds=wait_seconds, VisibilityTimeout=self.visibility_timeout,
            MessageSystemAttributeNames=["All"], MessageAttributeNames=["All"],
        )
        return list(response.get("Messages", []))

    async def lose(self) -> int:
        """Delete every message in the queue, received and never delivered: they are lost (the watchdog's to
        find). How many there were."""
        sqs = await self.world.clients.sqs()
        lost = 0
        while messages := await self.receive(wait_seconds=1):
            for message in messages:
                await sqs.delete_message(QueueUrl=self.world.config.queue_url, ReceiptHandle=message["ReceiptHandle"])
                lost += 1
        return lost

    async def invoke(self, messages: list[dict[str, Any]], timeout_ms: int | None = None) -> Invocation:
        arn = await self.queue_arn()
        event = {"Records": [lambda_record(m, arn) for m in messages]}
        json.dumps(event)  # exactly what Lambda would hand over: plain JSON
        context = LambdaContext(timeout_ms or self.timeout_ms)
        with trace_header() as trace_id:
            response = await asyncio.to_thread(self.handler, event, context)
        invocation = Invocation(event, response, context.aws_request_id, trace_id)
        self.invocations.append(invocation)
        sqs = await self.world.clients.sqs()
        for message in messages:
            if message["MessageId"] not in invocation.failed:
                # Already deleted by the handler (a redelivery or a hop)? As on SQS, harmless.
                with contextlib.suppress(Exception):
                    await sqs.delete_message(QueueUrl=self.world.config.queue_url,
                                             ReceiptHandle=message["ReceiptHandle"])
        return invocation

    async def poll(self, timeout_ms: int | None = None) -> Invocation | None:
        messages = await self.receive()
        return await self.invoke(messages, timeout_ms) if messages else None

    async def run_until(self, done: Callable[[], Awaitable[bool]], *, timeout: float = 60.0,
                        timeout_ms: int | None = None) -> None:
        deadline = time.monotonic() + timeout
        while not await done():
            if time.monotonic() > deadline:
                raise TimeoutError(f"not done after {timeout} s and {len(self.invocations)} invocations")
            await self.poll(timeout_ms)
