"""What a pushed delivery costs in AWS requests: ``python bench/push.py`` (about ten seconds).

A pushed delivery is a message the TypeScript Workflow SDK's runtime queues through ``awsworld serve`` (``POST
/v1/queue`` with ``deliverTo``: ``_http/push.py``) and the flow function POSTs to the app. Each scenario queues
``SAMPLE`` messages through the server's app (in-process, over httpx's ASGI transport), then hands them to the
delivery path as the SQS event source mapping would (``Invoker``: the Lambda flow handler's and the local poller's
one copy), receiving ten at a time, and POSTs them to a real app on 127.0.0.1. Requests are counted on the World's
clients (``world.stats``), so the figures are deterministic: what the queue call costs, what one delivery costs
(the event source mapping's ``ReceiveMessage`` is shown apart: it carries up to ten messages and, on Lambda, is
made by AWS), and the total. Runs on the embedded emulator (moto); no account, no network.
"""

from __future__ import annotations

import asyncio
import sys
from collections import Counter
from collections.abc import Awaitable, Callable
from typing import Any

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from awsworld._http.app import create_app
from awsworld._http.auth import Auth
from awsworld._http.listen import listening
from awsworld._worker.dispatch import Worker
from awsworld._worker.invoker import Invoker
from awsworld.aws import AWSWorld, RequestStats
from awsworld.local import LocalAWS
from awsworld.world.queue import DEFAULT_QUEUE_PREFIX

SAMPLE = 50
QUEUE = "__wkf_workflow_workflow//./workflows/addition//addition"
STEP_QUEUE = "__wkf_step_add"
MESSAGE = {"runId": "wrun_01K0000000000000000000000A", "runInput": {"input": {"__type": "Uint8Array",
                                                                              "data": "ZGV2bFsxLDJd"}}}


class App:
    """The app the deliveries are POSTed to: answers ``{"timeoutSeconds": 0}`` to the first delivery of each
    message while ``redeliver_once`` is set, else ``{"ok": true}``."""

    def __init__(self) -> None:
        self.redeliver_once = False
        self.seen: Counter[str] = Counter()
        self.url = ""

    async def flow(self, request: Request) -> JSONResponse:
        message_id = request.headers["x-vqs-message-id"]
        self.seen[message_id] += 1
        if self.redeliver_once and self.seen[message_id] == 1:
            return JSONResponse({"timeoutSeconds": 0})
        return JSONResponse({"ok": True})


def by_service(stats: RequestStats, per: int) -> str:
    if not stats.requests:
        return "none"
    return ", ".join(f"{op} {n / per:g}" for op, n in sorted(stats.requests.items()))


async def measure(world: AWSWorld, label: str, queue: Callable[[], Awaitable[Any]],
                  deliver: Callable[[], Awaitable[int]]) -> None:
    start = world.stats.snapshot()
    await queue()
    queued = world.stats.snapshot()
    deliveries = await deliver()
    delivered = world.stats.snapshot() - queued
    receives = RequestStats(Counter({k: v for k, v in delivered.requests.items() if k == "sqs.ReceiveMessage"}))
    per_delivery = RequestStats(Counter({k: v for k, v in delivered.requests.items() if k != "sqs.ReceiveMessage"}))
    total = world.stats.snapshot() - start
    print(f"\n{label} ({SAMPLE} messages, {deliveries} deliveries)")
    print(f"  queue call, per message:   {by_service(queued - start, SAMPLE)}")
    print(f"  per message delivered:     {by_service(per_delivery, SAMPLE)}")
    print(f"  receives (10 a batch):     {by_service(receives, SAMPLE)} per message")
    print(f"  all requests per message:  SQS {total.total('sqs') / SAMPLE:g}, DynamoDB "
          f"{total.total('dynamodb') / SAMPLE:g}, S3 {total.total('s3') / SAMPLE:g}")


async def main() -> None:
    app = App()
    starlette = Starlette(routes=[Route("/.well-known/workflow/v1/flow", app.flow, methods=["POST"]),
                                  Route("/.well-known/workflow/v1/step", app.flow, methods=["POST"])])
    async with listening(starlette) as server:
        app.url = server.url
        async with LocalAWS(run_workflows=False) as local:
            world = local.world
            consumer = world.sqs_queue.consumer(DEFAULT_QUEUE_PREFIX)
            invoker = Invoker(Worker(world), consumer)
            asgi = httpx.ASGITransport(app=create_app(world, auth=Auth("loopback")))
            async with httpx.AsyncClient(transport=asgi, base_url="http://127.0.0.1") as served:

                async def queue(name: str, **opts: Any) -> None:
                    for i in range(SAMPLE):
                        options = {k: v.format(i=i) if isinstance(v, str) else v for k, v in opts.items()}
                        response = await served.post("/v1/queue", json={
                            "queueName": name, "message": MESSAGE, "opts": options, "deliverTo": app.url})
                        response.raise_for_status()

                async def deliver() -> int:
                    """Receive and invoke until every message was acknowledged (the queue is empty)."""
                    before = invoker.deliveries
                    while True:
                        records = await consumer.receive(max_messages=10, wait_seconds=0)
                        if not records:
                            if sum(app.seen.values()) >= expected[0]:
                                return invoker.deliveries - before
                            await asyncio.sleep(0.05)
                            continue
                        for record in records:
                            result = await invoker.invoke(record)
                            assert result is not None and not result.failed, result

                expected = [0]

                async def run(label: str, name: str, *, redeliver: bool = False, **opts: Any) -> None:
                    app.redeliver_once = redeliver
                    app.seen.clear()
                    expected[0] = SAMPLE * (2 if redeliver else 1)
                    await measure(world, label, lambda: queue(name, **opts), deliver)

                await run("a workflow message, acknowledged", QUEUE)
                await run("a step message with an idempotency key, acknowledged", STEP_QUEUE, idempotencyKey="step_{i}")
                await run("a workflow message answered {timeoutSeconds: 0} once, then acknowledged", QUEUE,
                          redeliver=True)
                await run("a workflow message with delaySeconds 1, acknowledged", QUEUE, delaySeconds=1)


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
