"""What a step costs in CloudWatch: ``python bench/cloudwatch_bytes.py`` (about half a minute).

The flow function writes JSON log lines and CloudWatch Embedded Metric Format (EMF) blobs to stdout, which Lambda
ships to CloudWatch Logs (``awsworld/lambda_host/observability.py``); CloudWatch bills their ingestion by the byte,
and the metrics EMF defines by the metric and month, whatever the number of data points. This bench runs
workloads through the real, instrumented flow handler (``observability.instrument`` around ``flow.handle``, as
``handlers/flow.py`` wires it) on the embedded emulator (moto), SQS batches received as the event source mapping
receives them, and counts every byte the handler writes, per step:

- **serial**: one run of 100 steps in sequence, tiny values: the inline loop runs them in one delivery;
- **fan-out**: 20 runs of 10 steps started at once (``asyncio.gather``): each step comes as a queued step message;
- **retried**: 20 runs of one step that fails once and succeeds on its retry (a step message after a back-off);
- **failed**: 20 runs of one step that fails twice (``max_retries=1``): the run fails.

Each invocation gets what Lambda gives a deployed one: a context whose request id is a UUID (the one Lambda's own
lines name) and the X-Ray trace header in the environment, which Lambda sets on every invocation, traced or not
(``Sampled=0`` when the function's tracing is off). Lambda's own lines (``START``, ``END``, ``REPORT``: about
``LAMBDA_LINE_BYTES`` an invocation, in the formats Lambda writes them) are added per invocation. Prices: us-east-1
list, CloudWatch Logs Standard ingestion $0.50 per GB, plus ``PutLogEvents``' 26 bytes per event (how it sizes a
batch; an upper bound of what is billed); storage ($0.03 per GB-month, compressed) and Logs Insights scans are not
per step. The custom metrics are a fixed monthly cost per stack, printed after the table: every (name, dimensions)
pair the handler emitted.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import sys
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from aws_lambda_powertools.shared.constants import XRAY_TRACE_ID_ENV

from awsworld import step, workflow
from awsworld.aws import AWSWorld
from awsworld.client.client import Client
from awsworld.lambda_host import flow
from awsworld.lambda_host.container import Container
from awsworld.lambda_host.observability import METRIC_NAMES, instrument
from awsworld.local import LocalAWS
from awsworld.local.lambda_versions import InvocationContext
from awsworld.world.entities import TERMINAL_RUN_STATUSES

INGESTION_PRICE = 0.50 / 1024 ** 3  # $ per byte, CloudWatch Logs Standard, us-east-1
EVENT_OVERHEAD_BYTES = 26  # PutLogEvents counts each event's message plus 26 bytes
METRIC_PRICE = 0.30  # $ per custom metric a month (the first 10,000)
REQUEST_ID = "8c866323-1660-45f8-88ed-c25913ce954a"
TRACE_HEADER = "Root=1-6755a1b2-3f1c2d4e5a6b7c8d9e0f1a2b;Parent=53995c3f42cd8ad8;Sampled=0"  # tracing off
LAMBDA_LINES = (
    f"START RequestId: {REQUEST_ID} Version: $LATEST\n",
    f"END RequestId: {REQUEST_ID}\n",
    f"REPORT RequestId: {REQUEST_ID}\tDuration: 61.23 ms\tBilled Duration: 62 ms\tMemory Size: 1024 MB\t"
    "Max Memory Used: 131 MB\t\n",
)
LAMBDA_LINE_BYTES = sum(len(line.encode()) for line in LAMBDA_LINES)
RUNS = 20

FAILURES: dict[str, int] = {}


@step(name="bench.cw.add")
async def add(x: int) -> int:
    return x + 1


@step(name="bench.cw.flaky", max_retries=1, retry_delay=1.0)
async def flaky(key: str, fails: int) -> int:
    FAILURES[key] = FAILURES.get(key, 0) + 1
    if FAILURES[key] <= fails:
        raise ConnectionError(f"attempt {FAILURES[key]} of {key} fails")
    return FAILURES[key]


@workflow(name="bench.cw.serial")
async def serial(n: int) -> int:
    x = 0
    for _ in range(n):
        x = await add(x)
    return x


@workflow(name="bench.cw.fan_out")
async def fan_out(n: int) -> int:
    return sum(await asyncio.gather(*(add(i) for i in range(n))))


@workflow(name="bench.cw.flaky")
async def flaky_run(key: str, fails: int) -> int:
    return await flaky(key, fails)


@dataclass
class Meter:
    """What the handler wrote to stdout: bytes and events (lines) of log lines and of EMF blobs, invocations."""

    log_bytes: int = 0
    log_events: int = 0
    emf_bytes: int = 0
    emf_events: int = 0
    invocations: int = 0
    metrics: set[tuple[str, str]] = field(default_factory=set)

    def add(self, out: str) -> None:
        self.invocations += 1
        for line in out.splitlines():
            size = len(line.encode()) + 1
            blob = json.loads(line)
            if "_aws" in blob:
                self.emf_bytes, self.emf_events = self.emf_bytes + size, self.emf_events + 1
                for directive in blob["_aws"]["CloudWatchMetrics"]:
                    dimensions = ",".join(sorted(d for group in directive["Dimensions"] for d in group))
                    self.metrics.update((m["Name"], dimensions) for m in directive["Metrics"])
            else:
                self.log_bytes, self.log_events = self.log_bytes + size, self.log_events + 1

    def billed_bytes(self) -> int:
        events = self.log_events + self.emf_events + len(LAMBDA_LINES) * self.invocations
        return (self.log_bytes + self.emf_bytes + LAMBDA_LINE_BYTES * self.invocations
                + EVENT_OVERHEAD_BYTES * events)


async def _batch(world: AWSWorld, handler: Callable[[dict[str, Any], Any], Any], meter: Meter) -> None:
    """One batch of the queue through the instrumented handler, as the event source mapping sends it."""
    sqs = await world.clients.sqs()
    found = await sqs.receive_message(QueueUrl=world.config.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                      VisibilityTimeout=30, MessageSystemAttributeNames=["All"])
    messages = found.get("Messages", [])
    if not messages:
        return
    records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                "attributes": m["Attributes"], "messageAttributes": {}, "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
                "awsRegion": "us-east-1"} for m in messages]
    captured = io.StringIO()
    context = InvocationContext()
    context.aws_request_id = REQUEST_ID
    with contextlib.redirect_stdout(captured), _trace_header():
        answer = await asyncio.to_thread(handler, {"Records": records}, context)
    meter.add(captured.getvalue())
    failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
    for message in messages:
        if message["MessageId"] not in failed:
            await sqs.delete_message(QueueUrl=world.config.queue_url, ReceiptHandle=message["ReceiptHandle"])


@contextlib.contextmanager
def _trace_header() -> Iterator[None]:
    """The trace header in the environment for one invocation, as Lambda's runtime sets it; then as it was."""
    before = os.environ.get(XRAY_TRACE_ID_ENV)
    os.environ[XRAY_TRACE_ID_ENV] = TRACE_HEADER
    try:
        yield
    finally:
        if before is None:
            del os.environ[XRAY_TRACE_ID_ENV]
        else:
            os.environ[XRAY_TRACE_ID_ENV] = before


async def _measure(world: AWSWorld, handler: Callable[[dict[str, Any], Any], Any],
                   start: Callable[[], Awaitable[list[Any]]]) -> Meter:
    meter = Meter()
    runs = await start()

    async def done() -> bool:
        return all([await run.status() in TERMINAL_RUN_STATUSES for run in runs])

    for _ in range(600):
        if await done():
            return meter
        await _batch(world, handler, meter)
    raise TimeoutError("the bench's runs did not end")


def _row(name: str, meter: Meter, steps: int) -> str:
    per_step = meter.billed_bytes() / steps
    return (f"| {name} | {meter.invocations / steps:.2f} | {meter.log_events / steps:.2f} | "
            f"{meter.log_bytes / steps:,.0f} | {meter.emf_bytes / steps:,.0f} | {per_step:,.0f} | "
            f"${per_step * INGESTION_PRICE * 1e6:.2f} |")


async def main() -> None:
    async with LocalAWS("moto", run_workflows=False) as local:
        world = local.world
        container = Container(world_factory=lambda: AWSWorld(world.config))
        handler = instrument(lambda event, context: flow.handle(event, context, container))
        client = Client(world, check_published=False)
        await _measure(world, handler, lambda: _start(client, serial, [(1,)]))  # the cold start, not counted

        rows: list[tuple[str, Meter, int]] = []
        every = Meter()
        workloads: list[tuple[str, Any, list[tuple[Any, ...]], int]] = [
            ("serial (100 steps inline, one run)", serial, [(100,)], 100),
            (f"fan-out ({RUNS} runs of 10 queued steps)", fan_out, [(10,)] * RUNS, 10 * RUNS),
            (f"retried ({RUNS} one-step runs, one retry each)", flaky_run,
             [(f"retried-{i}", 1) for i in range(RUNS)], RUNS),
            (f"failed ({RUNS} one-step runs, failing both attempts)", flaky_run,
             [(f"failed-{i}", 2) for i in range(RUNS)], RUNS),
        ]
        for name, workflow_function, arguments, steps in workloads:
            meter = await _measure(world, handler, lambda w=workflow_function, a=arguments: _start(client, w, a))
            rows.append((name, meter, steps))
            every.metrics |= meter.metrics
        await asyncio.to_thread(container.reset)
        container.loop.close()
    print("awsworld bench/cloudwatch_bytes: what the flow function writes to CloudWatch Logs per step (log lines and "
          "EMF metric blobs), priced at CloudWatch Logs Standard ingestion, us-east-1 ($0.50/GB, 26 B per event "
          f"added; Lambda's START/END/REPORT lines, {LAMBDA_LINE_BYTES} B an invocation, included)")
    print("| workload | invocations per step | log lines per step | log B per step | EMF B per step "
          "| billed B per step | $ per million steps |")
    print("|---|---|---|---|---|---|---|")
    for name, meter, steps in rows:
        print(_row(name, meter, steps))
    names = sorted(every.metrics)
    most = len(METRIC_NAMES) + 1  # and ColdStart, under the function_name and service dimensions
    print(f"custom metrics: {len(names)} (name, dimensions) pairs emitted here "
          + ", ".join(f"{name} [{dims}]" for name, dims in names)
          + f"; at most {most} a stack (observability.METRIC_NAMES and ColdStart): ${len(names) * METRIC_PRICE:.2f} "
          f"to ${most * METRIC_PRICE:.2f} a month at ${METRIC_PRICE:.2f} each, however many steps")


async def _start(client: Client, workflow_function: Any, arguments: list[tuple[Any, ...]]) -> list[Any]:
    return [await client.start(workflow_function, *args) for args in arguments]


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
