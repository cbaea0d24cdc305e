"""Deliveries pushed by HTTP to an app of another runtime (``awsworld/_http/push.py``), through the public path: a
message queued at ``awsworld serve``'s ``POST /v1/queue`` with ``deliverTo`` travels on the World's own queue (the
in-memory one, or SQS on moto) and the delivery path POSTs it to a real app listening on 127.0.0.1, as the
Workflow SDK's queue contract says (the ``x-vqs-*`` headers, one message id, attempts counted, ``timeoutSeconds``
and ``delaySeconds`` honoured, nothing delivered again once acknowledged, a gone app's message dead-lettered
without holding others up)."""

from __future__ import annotations

import asyncio
import json
import logging
import socket
from collections import Counter
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from awsworld._http.app import create_app
from awsworld._http.auth import Auth
from awsworld._http.listen import listening

from .conftest import BOTH, E2E, with_env

pytestmark = pytest.mark.parametrize("e2e_backend", BOTH, scope="module")
local_env = with_env({"AWSWORLD_FAILURE_BACKOFF_SECONDS": "1"})
"""A refused push comes back after the delivery path's back-off (``_worker/delivery.py``: 10 s, doubling): at 1 s
the refusal test waits 1 s for its second refusal and 2 s more for the delivery that acknowledges it, so it leaves
no message behind for the next test's ``idle`` to wait out."""

QUEUE = "__wkf_workflow_workflow//./workflows/addition//addition"
MESSAGE = {"runId": "wrun_01K0000000000000000000000A", "traceCarrier": {},
           "runInput": {"input": {"__type": "Uint8Array", "data": "ZGV2bFsxLDJd"}, "specVersion": 5}}


@dataclass
class App:
    """A stand-in for the suite's app: records each POST to its flow route and answers from ``answers`` (then
    ``{"ok": true}``)."""

    url: str = ""
    received: list[dict[str, Any]] = field(default_factory=list[dict[str, Any]])
    answers: list[dict[str, Any] | Response] = field(default_factory=list[dict[str, Any] | Response])
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    gate: asyncio.Event | None = None
    """When set, each answer waits for it (the message stays in flight meanwhile)."""

    async def flow(self, request: Request) -> Response:
        self.received.append({"headers": dict(request.headers), "body": json.loads(await request.body())})
        self.arrived.set()
        if self.gate is not None:
            await self.gate.wait()
        answer = self.answers.pop(0) if self.answers else {"ok": True}
        return answer if isinstance(answer, Response) else JSONResponse(answer)

    async def wait_for(self, count: int, timeout: float = 30.0) -> None:
        async with asyncio.timeout(timeout):
            while len(self.received) < count:
                self.arrived.clear()
                await self.arrived.wait()


@pytest.fixture
async def app() -> AsyncIterator[App]:
    recorder = App()
    starlette = Starlette(routes=[Route("/.well-known/workflow/v1/flow", recorder.flow, methods=["POST"])])
    async with listening(starlette) as server:
        recorder.url = server.url.replace("127.0.0.1", "localhost")
        yield recorder


@pytest.fixture
async def served(e2e: E2E) -> AsyncIterator[httpx.AsyncClient]:
    """The server's app on the test's World, called in-process (the endpoints and the World's queue are real)."""
    asgi = create_app(e2e.world, auth=Auth("loopback"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=asgi), base_url="http://127.0.0.1") as client:
        yield client


async def queue(served: httpx.AsyncClient, deliver_to: str, **opts: Any) -> str:
    response = await served.post("/v1/queue", json={"queueName": QUEUE, "message": MESSAGE, "opts": opts,
                                                    "deliverTo": deliver_to})
    assert response.status_code == 200, response.text
    return str(response.json()["messageId"])


async def test_a_push_carries_the_queue_contract_and_timeout_seconds_delivers_it_again(
        e2e: E2E, served: httpx.AsyncClient, app: App) -> None:
    app.answers = [{"timeoutSeconds": 0}]
    async with e2e.counting():
        message_id = await queue(served, app.url, headers={"x-trace": "t1"}, idempotencyKey="k-1")
        await app.wait_for(2)
    first, second = app.received
    for delivery, attempt in ((first, "1"), (second, "2")):
        assert delivery["body"] == MESSAGE
        headers = delivery["headers"]
        assert headers["x-vqs-queue-name"] == QUEUE and headers["x-vqs-message-id"] == message_id
        assert headers["x-vqs-message-attempt"] == attempt
        assert headers["content-type"] == "application/json" and headers["x-trace"] == "t1"
    await e2e.idle()
    assert len(app.received) == 2, "an acknowledged message is never delivered again"


async def test_a_push_the_app_refuses_is_logged_with_what_the_app_said(
        e2e: E2E, served: httpx.AsyncClient, app: App, caplog: pytest.LogCaptureFixture) -> None:
    """The Workflow SDK's queue handler answers a handler that threw with a 500 whose body is the error as a JSON
    string, and logs nothing: the failed delivery's line is where its developer reads what went wrong (it said
    only ``the app answered 500``). Then the message is delivered again, as before."""
    app.answers = [JSONResponse("Error: no such order 'A-17'", status_code=500),
                   JSONResponse({"error": "Unhandled queue"}, status_code=400)]
    def failed_lines() -> list[str]:
        return [record.getMessage() for record in caplog.records if "push failed" in record.getMessage()]

    with caplog.at_level(logging.WARNING, logger="awsworld.delivery"):
        await queue(served, app.url)
        for _ in range(600):  # refused twice, then acknowledged: nothing of this test's is left on the queue
            if len(app.received) >= 3:
                break
            await e2e.sleep(0.2)
        await e2e.idle()
    failed = failed_lines()
    assert len(failed) == 2, failed
    assert failed[0].endswith("push failed: the app answered 500: Error: no such order 'A-17'"), failed
    assert failed[1].endswith("push failed: the app answered 400: Unhandled queue"), failed
    assert len(app.received) == 3


async def test_a_duplicate_key_in_flight_is_one_message(e2e: E2E, served: httpx.AsyncClient, app: App) -> None:
    app.gate = asyncio.Event()
    first = await queue(served, app.url, idempotencyKey="step_dup")
    await app.wait_for(1)  # delivered, and held in flight by the app
    again = {await queue(served, app.url, idempotencyKey="step_dup") for _ in range(2)}
    app.gate.set()
    await e2e.idle()
    assert again == {first} and len(app.received) == 1


async def test_a_push_waits_its_delay(e2e: E2E, served: httpx.AsyncClient, app: App) -> None:
    delay = 30 if e2e.memory else 6  # (memory: virtual seconds; time moves only when the test sleeps)
    await queue(served, app.url, delaySeconds=delay)
    if e2e.memory:
        await e2e.idle()
    else:
        await asyncio.sleep(1)  # (the poller's idle would wait for the delayed message itself)
    assert app.received == []
    await e2e.sleep(delay + 1)
    await app.wait_for(1)
    assert len(app.received) == 1


async def test_a_gone_app_is_dead_lettered_and_holds_no_other_message_up(
        e2e: E2E, served: httpx.AsyncClient, app: App) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        gone = f"http://127.0.0.1:{probe.getsockname()[1]}"
    dead_before = await dead_letters(e2e)
    await queue(served, gone)
    await queue(served, app.url)
    await app.wait_for(1)  # while the gone app's message is still being tried
    assert len(app.received) == 1
    await e2e.idle(timeout=60)
    assert await dead_letters(e2e) == dead_before + 1


async def test_a_host_not_listed_is_refused_and_nothing_is_queued(e2e: E2E, served: httpx.AsyncClient) -> None:
    before = await e2e.queue_depth()
    response = await served.post("/v1/queue", json={"queueName": QUEUE, "message": MESSAGE,
                                                    "deliverTo": "http://169.254.169.254"})
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["name"] == "WorkflowWorldError" and error["details"]["field"] == "deliverTo"
    assert await e2e.queue_depth() == before


async def test_what_a_pushed_delivery_costs_in_sqs_and_dynamodb_requests(
        e2e: E2E, served: httpx.AsyncClient, app: App) -> None:
    """The README's figures (``bench/push.py`` prints more cases), counted on the World's clients: a message
    without a key is one SendMessage to queue and one DeleteMessage once acknowledged; a key adds its DynamoDB item
    (PutItem and UpdateItem to hold it, DeleteItem to let it go). The poller's receives (up to ten messages each,
    made by AWS on Lambda) and this test's own queue-depth reads are left out."""
    if e2e.memory:
        pytest.skip("request counts are the emulator's: the in-memory World makes no requests")
    await e2e.idle()
    before = e2e.world.stats.snapshot()
    await queue(served, app.url)
    await queue(served, app.url, idempotencyKey="step_cost")
    await app.wait_for(2)
    await e2e.idle()
    made = (e2e.world.stats.snapshot() - before).requests
    polled = ("sqs.ReceiveMessage", "sqs.GetQueueAttributes")
    assert Counter({op: n for op, n in made.items() if op not in polled}) == Counter({
        "sqs.SendMessage": 2, "sqs.DeleteMessage": 2, "dynamodb.PutItem": 1, "dynamodb.UpdateItem": 1,
        "dynamodb.DeleteItem": 1})
    assert len(app.received) == 2


async def dead_letters(e2e: E2E) -> int:
    if e2e.env is not None:
        return len(e2e.env.world.memory_queue.dead_letters)
    sqs = await e2e.world.clients.sqs()
    attributes = (await sqs.get_queue_attributes(QueueUrl=e2e.world.config.dlq_url,
                                                 AttributeNames=["ApproximateNumberOfMessages"]))["Attributes"]
    return int(attributes["ApproximateNumberOfMessages"])
