"""What a re-routed delivery costs: ``python bench/reroute.py`` (about forty seconds).

A delivery of a run pinned to an older version of the flow function reaches the ``live`` version first (the SQS
event source mapping invokes the alias), which hands the SQS record to the run's version with an asynchronous
``Invoke`` (``awsworld/lambda_host/versions.py``). This bench measures what that costs the live version, per re-routed
delivery, on the embedded emulator (moto), with two versions modelled as two ``Container`` objects running the real
flow handler (``flow.handle`` for the mapping's batches, ``flow.handle_hand_over`` for the invoke, the event passed
through JSON), as ``tests/deploy/test_pinned_versions.py`` does:

- **addressed** deliveries (a pinned run's own messages: its continuations, queued steps, retries, carry its
  deployment): the live version hands them over unread;
- **unaddressed** deliveries (sent from outside the run: a hook's resume, a wake, the watchdog's): the live version's
  flow reads the run's log to find its pin, then hands it over.

Requests are counted on the live container's clients (``world.stats``), so the counts are deterministic; the
handler's wall time per record is this machine's (shared, loaded: an indication, not a Lambda figure). Prices:
us-east-1 list, as ``bench/bill.py`` (DynamoDB $0.125 per million RRU, Lambda $0.20 per million requests and
$0.0000166667 per GB-second, the flow function's default 1024 MB).
"""

from __future__ import annotations

import asyncio
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from awsworld import create_hook, sleep, step, workflow
from awsworld.authoring.definitions import Registry
from awsworld.aws import AWSWorld, RequestStats
from awsworld.client.client import Client
from awsworld.lambda_host import flow
from awsworld.lambda_host.container import Container
from awsworld.local import LocalAWS
from awsworld.local.lambda_versions import FunctionVersions, InvocationContext
from awsworld.world.errors import HookNotFoundError

RUNS = 20
SLEEP_SECONDS = 15
RRU_PRICE = 0.125 / 1e6
INVOKE_PRICE = 0.20 / 1e6
GB_SECOND_PRICE = 0.0000166667
MEMORY_GB = 1.0

V1 = Registry()
V2 = Registry()
with V1.capture():
    @step(name="bench.reroute.tag")
    async def tag_v1(x: str) -> str:
        return f"v1:{x}"

    @workflow(name="bench.reroute.order")
    async def order_v1(x: str) -> list[str]:
        first = await tag_v1(x)
        await create_hook(token=f"bench-reroute:{x}")
        await sleep(SLEEP_SECONDS)  # its continuation (addressed to v1) comes due after the resumes are handed over
        return [first, await tag_v1(x)]

with V2.capture():
    @step(name="bench.reroute.tag")
    async def tag_v2(x: str) -> str:
        return f"v2:{x}"

    @workflow(name="bench.reroute.order")
    async def order_v2(x: str) -> list[str]:
        return [await tag_v2(x)]


async def _batch(world: AWSWorld, versions: FunctionVersions, live: Container, seconds: list[float]) -> int:
    """One batch of the queue through ``live``'s flow handler, as the event source mapping sends it."""
    sqs = await world.clients.sqs()
    found = await sqs.receive_message(QueueUrl=world.config.queue_url, MaxNumberOfMessages=10, WaitTimeSeconds=1,
                                      VisibilityTimeout=30, MessageSystemAttributeNames=["All"])
    messages = found.get("Messages", [])
    if not messages:
        return 0
    records = [{"messageId": m["MessageId"], "receiptHandle": m["ReceiptHandle"], "body": m["Body"],
                "attributes": m["Attributes"], "messageAttributes": {}, "md5OfBody": m["MD5OfBody"],
                "eventSource": "aws:sqs", "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q",
                "awsRegion": "us-east-1"} for m in messages]
    started = time.monotonic()
    answer = await asyncio.to_thread(flow.handle, {"Records": records}, InvocationContext(version="2"), live)
    seconds.append(time.monotonic() - started)
    failed = {f["itemIdentifier"] for f in answer["batchItemFailures"]}
    for message in messages:
        if message["MessageId"] not in failed:
            await sqs.delete_message(QueueUrl=world.config.queue_url, ReceiptHandle=message["ReceiptHandle"])
    await asyncio.to_thread(versions.settle)
    return len(messages)


async def _until(world: AWSWorld, versions: FunctionVersions, live: Container, done: Any,
                 seconds: list[float]) -> None:
    deadline = time.monotonic() + 120
    while not await done():
        if time.monotonic() > deadline:
            raise TimeoutError("the bench's runs did not move on")
        await _batch(world, versions, live, seconds)


def _row(kind: str, delta: RequestStats, invokes: int, seconds: float) -> str:
    per = {op: n / invokes for op, n in sorted(delta.requests.items())}
    rru = delta.read_units / invokes
    ms = seconds / invokes * 1000
    dollars = (rru * RRU_PRICE + INVOKE_PRICE + ms / 1000 * MEMORY_GB * GB_SECOND_PRICE) * 1e6
    shown = ", ".join(f"{op} {n:g}" for op, n in per.items()) or "none"
    return (f"| {kind} | {shown}; Lambda Invoke 1 | {rru:.2f} | {ms:.1f} ms | ${dollars:.2f} "
            f"(reads ${rru * RRU_PRICE * 1e6:.2f}, invoke $0.20, duration ${ms / 1000 * GB_SECOND_PRICE * 1e6:.2f}) |")


async def main() -> None:
    async with LocalAWS("moto", run_workflows=False) as local:
        world = local.world
        with ThreadPoolExecutor(8) as pool:
            versions = FunctionVersions(lambda: AWSWorld(world.config), pool)
            v1 = versions.publish("1", V1)
            client = Client(world, check_published=False)
            runs = [await client.start("bench.reroute.order", f"r{i}") for i in range(RUNS)]

            async def hooks_ready() -> bool:
                for i in range(RUNS):
                    try:
                        await world.hooks.get_by_token(f"bench-reroute:r{i}", resolve_data="none")
                    except HookNotFoundError:
                        return False
                return True

            await _until(world, versions, v1, hooks_ready, [])
            v2 = versions.publish("2", V2)  # the deploy: version 2 takes the alias
            await asyncio.to_thread(v2.run, v2.publish_names(ahead=True))  # its SnapStart initialisation
            before, invokes, seconds = v2.world.stats.snapshot(), len(versions.invokes), []
            for i in range(RUNS):
                await client.resume_hook(f"bench-reroute:r{i}", {})
            while len(versions.invokes) - invokes < RUNS:
                await _batch(world, versions, v2, seconds)
            unaddressed = (v2.world.stats.snapshot() - before, len(versions.invokes) - invokes, sum(seconds))

            before, invokes, seconds = v2.world.stats.snapshot(), len(versions.invokes), []

            async def all_done() -> bool:
                return all([await run.status() == "completed" for run in runs])

            await _until(world, versions, v2, all_done, seconds)
            addressed = (v2.world.stats.snapshot() - before, len(versions.invokes) - invokes, sum(seconds))
            outputs = [await run.result(timeout=5) for run in runs]
            assert all(out == [f"v1:r{i}", f"v1:r{i}"] for i, out in enumerate(outputs)), outputs
            await asyncio.to_thread(versions.close)
    print(f"awsworld bench/reroute: {RUNS} runs started on version 1 and finished on it after version 2 took the "
          "alias; the live version's cost per re-routed delivery")
    print("| delivery | live version's requests per delivery | RRU | handler time per delivery | per million |")
    print("|---|---|---|---|---|")
    print(_row("unaddressed (a hook's resume, a wake)", *unaddressed))
    print(_row("addressed (the run's own: a continuation, a step)", *addressed))


if __name__ == "__main__":
    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        sys.exit(130)
