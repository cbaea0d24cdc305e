"""``handlers/webhook.py`` invoked with Lambda Function URL events (payload format 2.0), one per status: 202
(the run receives the request), 404, 405, 400, 413, 410 and 503; a retry after any failure is recorded once
(idempotency headers, or a digest of the request); malformed events and impossible tokens."""

from __future__ import annotations

import asyncio
import base64
import functools
import json
import secrets
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any, cast
from urllib.parse import urlencode

import pytest
from botocore.exceptions import ClientError

from awsworld.aws import AWSWorld
from awsworld.durable import serde
from awsworld.lambda_host import webhook
from awsworld.lambda_host.container import Container, default_container
from awsworld.lambda_host.webhook import RouteRequest, parse
from awsworld.local import LocalAWS
from awsworld.world.entities import TERMINAL_RUN_STATUSES

from . import app
from .conftest import Handlers, json_lines, metric_values
from .lambda_env import LEFT_OUT_KEYS, LambdaContext, invoke_as_lambda
from .test_flow_handler import terminal

KIB = 1024


def url_event(method: str, path: str, body: str | bytes | None = None, *, content_type: str = "application/json",
              query: dict[str, str] | None = None, headers: dict[str, str] | None = None) -> dict[str, Any]:
    """A Function URL request as Lambda delivers it: binary bodies arrive base64-encoded."""
    now = datetime.now(UTC)
    event: dict[str, Any] = {
        "version": "2.0",
        "routeKey": "$default",
        "rawPath": path,
        "rawQueryString": urlencode(query or {}),
        "headers": {"content-type": content_type, "host": "abcdefghij.lambda-url.us-east-1.on.aws",
                    "user-agent": "webhook-sender/1.0", "x-forwarded-proto": "https", **(headers or {})},
        "requestContext": {
            "accountId": "anonymous", "apiId": "abcdefghij", "domainName": "abcdefghij.lambda-url.us-east-1.on.aws",
            "domainPrefix": "abcdefghij",
            "http": {"method": method, "path": path, "protocol": "HTTP/1.1", "sourceIp": "203.0.113.7",
                     "userAgent": "webhook-sender/1.0"},
            "requestId": str(uuid.uuid4()), "routeKey": "$default", "stage": "$default",
            "time": now.strftime("%d/%b/%Y:%H:%M:%S +0000"), "timeEpoch": int(now.timestamp() * 1000),
        },
        "isBase64Encoded": isinstance(body, bytes),
    }
    if query:
        event["queryStringParameters"] = dict(query)
    if body is not None:
        event["body"] = base64.b64encode(body).decode() if isinstance(body, bytes) else body
    return event


async def call(handlers: Handlers, event: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    """Invoke the synchronous handler off the test's loop, as Lambda would (it runs its own loop)."""
    response = await invoke_as_lambda(handlers.webhook, event, LambdaContext(30_000, "awsworld-test-webhook"))
    assert response["headers"]["content-type"] == "application/json"
    return response["statusCode"], json.loads(response["body"])


async def wait_for_hook(local: LocalAWS, esm: Any, run: Any, timeout: float = 30.0) -> Any:
    """Drive the flow handler until ``run`` holds a hook; return it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        hooks = (await local.world.hooks.list(run.run_id)).data
        if hooks:
            return hooks[0]
        assert await run.status() not in TERMINAL_RUN_STATUSES
        await esm.poll()
    raise TimeoutError("the run created no hook")


async def test_requests_to_a_webhook_reach_its_run(local: LocalAWS, esm: Any, handlers: Handlers, capsys) -> None:
    assert local.client is not None
    run = await local.client.start(app.webhook_twice)
    hook = await wait_for_hook(local, esm, run)
    assert hook.is_webhook and len(hook.token) >= 64

    marker = f"body-secret-{uuid.uuid4().hex}"
    text = json.dumps({"order": 17, "note": marker})
    status, body = await call(handlers, url_event("POST", f"/webhooks/{hook.token}", text, query={"x": "1"},
                                            headers={"x-signature": "sig-123"}))
    assert (status, body["status"]) == (202, "accepted")
    binary = secrets.token_bytes(128 * KIB)  # exactly the limit: accepted (and stored in S3, not in the item)
    status, _ = await call(handlers, url_event("PUT", f"/webhooks/{hook.token}/", binary,
                                         content_type="application/octet-stream"))
    assert status == 202

    await esm.run_until(terminal(run))
    first, second = await run.result(timeout=1)
    assert first["method"] == "POST" and first["body"] == text and first["query"] == {"x": "1"}
    assert first["headers"]["x-signature"] == "sig-123" and first["headers"]["content-type"] == "application/json"
    assert second["method"] == "PUT" and second["body"] == binary and second["query"] == {}

    out = capsys.readouterr().out
    assert hook.token not in out and marker not in out and "sig-123" not in out, "no token, body or header logged"
    lines = json_lines(out)
    logged = [line for line in lines if line.get("message") == "webhook request"]
    assert [line["status"] for line in logged] == [202, 202]
    assert all(line["runId"] == run.run_id and len(line["token"]) == 12 for line in logged)
    assert all(line["function_request_id"] and not LEFT_OUT_KEYS & set(line) for line in logged), \
        "the flow function's shape: the request id, not the function's name, ARN or memory, nor an untraced trace id"
    assert sum(metric_values(lines, "WebhooksResumed")) == 2


async def test_a_base64_text_body_arrives_as_text(local: LocalAWS, esm: Any, handlers: Handlers) -> None:
    assert local.client is not None
    run = await local.client.start(app.webhook_twice)
    hook = await wait_for_hook(local, esm, run)
    event = url_event("POST", f"/webhooks/{hook.token}", "é=1".encode(),
                      content_type="application/x-www-form-urlencoded")
    assert (await call(handlers, event))[0] == 202
    assert (await call(handlers, url_event("DELETE", f"/webhooks/{hook.token}")))[0] == 202
    await esm.run_until(terminal(run))
    first, second = await run.result(timeout=1)
    assert first["body"] == "é=1"
    assert second["method"] == "DELETE" and second["body"] is None


async def test_unknown_tokens_other_paths_and_methods(handlers: Handlers, capsys) -> None:
    assert (await call(handlers, url_event("POST", f"/webhooks/{secrets.token_hex(32)}", "{}")))[0] == 404
    assert (await call(handlers, url_event("POST", "/webhooks/", "{}")))[0] == 404
    assert (await call(handlers, url_event("POST", "/hooks/abc", "{}")))[0] == 404
    assert (await call(handlers, url_event("POST", "/webhooks/a/b", "{}")))[0] == 404
    status, body = await call(handlers, url_event("HEAD", "/webhooks/abc"))
    assert (status, body["status"]) == (405, "method-not-allowed")
    event = url_event("POST", "/webhooks/abc", "{}")
    event["body"], event["isBase64Encoded"] = "not base64!", True
    assert (await call(handlers, event))[0] == 400
    lines = json_lines(capsys.readouterr().out)
    assert sum(metric_values(lines, "WebhooksRejected")) == 6


async def test_the_route_run_uninstrumented_leaves_no_metric_for_a_later_invocation(handlers: Handlers, capsys) -> None:
    """``awsworld dev`` and tests call ``webhook.handle`` without the Lambda wrapper, which alone flushes metrics: a
    count made there must not wait in Powertools' process-wide metric set and come out under the next invocation."""
    from awsworld.lambda_host import observability

    for _ in range(3):
        response = await asyncio.to_thread(webhook.handle, url_event("POST", "/hooks/abc", "{}"), None)
        assert response["statusCode"] == 404
    assert observability.metrics.metric_set == {}
    capsys.readouterr()
    assert (await call(handlers, url_event("POST", "/hooks/abc", "{}")))[0] == 404
    assert sum(metric_values(json_lines(capsys.readouterr().out), "WebhooksRejected")) == 1


async def test_a_plain_hook_token_is_not_resumable_over_http(local: LocalAWS, esm: Any, handlers: Handlers) -> None:
    assert local.client is not None
    token = f"approve:{uuid.uuid4().hex[:8]}"
    run = await local.client.start(app.plain_hook, token)
    await wait_for_hook(local, esm, run)
    status, body = await call(handlers, url_event("POST", f"/webhooks/{token}", "{}"))
    assert (status, body["status"]) == (404, "not-found"), "a guessable token never opens a run to the internet"
    await local.client.resume_hook(token, {"from": "code"})
    await esm.run_until(terminal(run))
    assert await run.result(timeout=1) == {"from": "code"}


async def test_heartbeats_reach_a_webhook_and_are_refused_as_requests_are(
        local: LocalAWS, esm: Any, handlers: Handlers) -> None:
    """``POST /webhooks/<token>/heartbeat``: 202 ``heartbeat`` for a live webhook (never a payload); 405 for another
    method, 404 for an unknown or plain-hook token, 410 once the run ended."""
    assert local.client is not None
    run = await local.client.start(app.webhook_twice)
    hook = await wait_for_hook(local, esm, run)
    for _ in range(2):
        status, body = await call(handlers, url_event("POST", f"/webhooks/{hook.token}/heartbeat", "ignored"))
        assert (status, body["status"]) == (202, "heartbeat")
    status, body = await call(handlers, url_event("GET", f"/webhooks/{hook.token}/heartbeat"))
    assert (status, body["status"]) == (405, "method-not-allowed")
    assert (await call(handlers, url_event("POST", f"/webhooks/{secrets.token_hex(32)}/heartbeat")))[0] == 404
    plain_token = f"approve:{uuid.uuid4().hex[:8]}"
    plain = await local.client.start(app.plain_hook, plain_token)
    await wait_for_hook(local, esm, plain)
    assert (await call(handlers, url_event("POST", f"/webhooks/{plain_token}/heartbeat")))[0] == 404
    for n in (1, 2):
        assert (await call(handlers, url_event("POST", f"/webhooks/{hook.token}", f"{{\"n\": {n}}}")))[0] == 202
    await esm.run_until(terminal(run))
    assert [r["body"] for r in await run.result(timeout=1)] == ['{"n": 1}', '{"n": 2}']  # heartbeats: no payloads
    status, body = await call(handlers, url_event("POST", f"/webhooks/{hook.token}/heartbeat"))
    assert (status, body["status"]) == (410, "gone")


async def test_a_body_over_128_kib_is_refused_before_any_lookup(handlers: Handlers) -> None:
    too_big = "x" * (128 * KIB + 1)
    status, body = await call(handlers, url_event("POST", f"/webhooks/{secrets.token_hex(32)}", too_big))
    assert (status, body["status"]) == (413, "too-large")
    status, _ = await call(handlers, url_event("POST", f"/webhooks/{secrets.token_hex(32)}", b"\0" * (128 * KIB + 1),
                                         content_type="application/octet-stream"))
    assert status == 413


async def test_a_webhook_of_a_finished_run_is_gone(local: LocalAWS, handlers: Handlers) -> None:
    """A run's end frees its tokens unless they are retained; a retained webhook token answers 410."""
    events = local.world.events
    created = await events.create(None, {"eventType": "run_created",
                                         "eventData": {"workflowName": "deploy.webhook_twice", "input": None}})
    assert created.run is not None
    run_id = created.run.run_id
    token = secrets.token_hex(32)
    await events.create(run_id, {"eventType": "run_started"})
    await events.create(run_id, {"eventType": "hook_created", "correlationId": "hook_1",
                                 "eventData": {"token": token, "isWebhook": True,
                                               "tokenRetentionUntil": datetime.now(UTC) + timedelta(hours=1)}})
    await events.create(run_id, {"eventType": "run_completed", "eventData": {"output": None}})
    status, body = await call(handlers, url_event("POST", f"/webhooks/{token}", "{}"))
    assert (status, body["status"]) == (410, "gone")


async def test_a_released_webhook_token_of_a_finished_run_is_gone_too(local: LocalAWS, handlers: Handlers) -> None:
    """Without retention the run's end frees the token, and still remembers its run ended
    (``world/rules/hooks.py``): the sender learns the run is over (410), not that the URL never existed (404)."""
    events = local.world.events
    created = await events.create(None, {"eventType": "run_created",
                                         "eventData": {"workflowName": "deploy.webhook_twice", "input": None}})
    assert created.run is not None
    run_id = created.run.run_id
    token = secrets.token_hex(32)
    await events.create(run_id, {"eventType": "run_started"})
    await events.create(run_id, {"eventType": "hook_created", "correlationId": f"hook_{token[:8]}",
                                 "eventData": {"token": token, "isWebhook": True}})
    await events.create(run_id, {"eventType": "run_cancelled"})
    status, body = await call(handlers, url_event("POST", f"/webhooks/{token}", "{}"))
    assert (status, body["status"]) == (410, "gone")


# ------------------------------------------------------------------------------------------ exactly once


def container_world() -> AWSWorld:
    """The World the webhook handler's container uses (the handlers' default container, a cold start per
    module): failures are injected into its clients, and its request counts are what the function did."""
    return default_container().world


async def container_client(container: Container, service: str) -> Any:
    """The container's client for ``service``, opened on the container's loop (its clients live there)."""
    return await asyncio.to_thread(container.run, container.world.clients.get(service))


@contextmanager
def failing_once(client: Any, operation: str, code: str = "ServiceUnavailable") -> Iterator[list[str]]:
    """The next ``operation`` call of ``client`` fails with ``code`` as AWS would answer it; later calls pass.
    Yields the list of operations failed (empty if the call never came)."""
    failed: list[str] = []

    def fail(**_: Any) -> None:
        if not failed:
            failed.append(operation)
            raise ClientError({"Error": {"Code": code, "Message": "injected by the test"}}, operation)

    event = f"before-call.{client.meta.service_model.service_id.hyphenize()}.{operation}"
    client.meta.events.register(event, fail)
    try:
        yield failed
    finally:
        client.meta.events.unregister(event, fail)


async def received(local: LocalAWS, run_id: str) -> list[Any]:
    return [e for e in (await local.world.events.list(run_id)).data if e.event_type == "hook_received"]


async def test_a_failed_wake_answers_503_and_the_retry_is_recorded_once(
        local: LocalAWS, esm: Any, handlers: Handlers) -> None:
    assert local.client is not None
    run = await local.client.start(app.webhook_twice)
    hook = await wait_for_hook(local, esm, run)
    first = url_event("POST", f"/webhooks/{hook.token}", '{"n": 1}', headers={"Idempotency-Key": "order-17-paid"})

    sqs = await container_client(default_container(), "sqs")
    with failing_once(sqs, "SendMessage") as failed:
        status, body = await call(handlers, first)
    assert failed == ["SendMessage"], "the wake was the call that failed"
    assert (status, body["status"]) == (503, "throttled")
    (recorded,) = await received(local, run.run_id)  # recorded before the wake failed
    assert recorded.event_data["resumeId"] == "order-17-paid"
    assert await esm.receive(wait_seconds=0) == [], "no wake reached the queue"

    status, body = await call(handlers, first)  # the sender retries the same request
    assert (status, body["status"]) == (202, "already-received")
    assert [e.event_id for e in await received(local, run.run_id)] == [recorded.event_id], "recorded once"
    status, body = await call(handlers, first)  # and again, while the retry's wake is still queued
    assert (status, body["status"]) == (202, "already-received")
    wakes = await esm.receive(wait_seconds=1, max_messages=10)
    assert [run.run_id in m["Body"] for m in wakes] == [True], "the repeats' wakes are one message"
    await esm.invoke(wakes)  # the flow handler takes the payload in
    assert await run.status() == "running"

    second = url_event("POST", f"/webhooks/{hook.token}", '{"n": 2}', headers={"webhook-id": "msg_2"})
    assert (await call(handlers, second))[0] == 202
    await esm.run_until(terminal(run))
    first_payload, second_payload = await run.result(timeout=1)
    assert (first_payload["body"], second_payload["body"]) == ('{"n": 1}', '{"n": 2}')
    assert len(await received(local, run.run_id)) == 2


async def test_a_retry_after_the_answer_was_lost_wakes_the_run_without_recording_again(
        local: LocalAWS, esm: Any, handlers: Handlers) -> None:
    """The function recorded the payload and died before waking the run (a timeout): the retry finds the
    record, answers 202 and wakes the run, which completes through the flow handler."""
    assert local.client is not None
    run = await local.client.start(app.webhook_twice)
    hook = await wait_for_hook(local, esm, run)
    request = url_event("POST", f"/webhooks/{hook.token}", "a", headers={"x-github-delivery": "gh-1"})
    payload = {"method": "POST", "headers": {k.lower(): v for k, v in request["headers"].items()}, "body": "a",
               "query": {}}
    await local.world.events.create(run.run_id, {"eventType": "hook_received", "correlationId": hook.hook_id,
                                                 "eventData": {"payload": serde.dumps(payload), "resumeId": "gh-1"}})
    assert await esm.receive(wait_seconds=0) == []
    status, body = await call(handlers, request)
    assert (status, body["status"]) == (202, "already-received")
    assert (await call(handlers, url_event("POST", f"/webhooks/{hook.token}", "b")))[0] == 202
    await esm.run_until(terminal(run))
    assert [p["body"] for p in await run.result(timeout=1)] == ["a", "b"]
    assert len(await received(local, run.run_id)) == 2


async def test_a_retry_after_the_workflow_disposed_the_webhook_is_answered_as_delivered(
        local: LocalAWS, esm: Any, handlers: Handlers) -> None:
    """The sender's answer was lost and it retries once the workflow has read the payload and left the webhook's
    `async with` (the run goes on): the payload was recorded, so the retry is answered 202 `already-received`
    (it was 404, which a sender takes for a failed delivery); a new request is still refused 404."""
    assert local.client is not None
    token = f"then:{uuid.uuid4().hex[:8]}"
    run = await local.client.start(app.webhook_then_hook, token)
    hook = await wait_for_hook(local, esm, run)
    request = url_event("POST", f"/webhooks/{hook.token}", '{"paid": 1}', headers={"webhook-id": "msg_1"})
    assert (await call(handlers, request))[1]["status"] == "accepted"
    deadline = time.monotonic() + 30
    while not any(h.token == token for h in (await local.world.hooks.list(run.run_id)).data):
        assert time.monotonic() < deadline, "the run never reached its second hook"
        await esm.poll()
    status, body = await call(handlers, request)  # the sender retries: the webhook is disposed now
    assert (status, body["status"]) == (202, "already-received"), body
    other = url_event("POST", f"/webhooks/{hook.token}", '{"paid": 2}', headers={"webhook-id": "msg_2"})
    assert (await call(handlers, other))[0] == 404
    assert len(await received(local, run.run_id)) == 1, "recorded once"
    await local.client.resume_hook(token, "shipped")
    await esm.run_until(terminal(run))
    paid, shipped = cast(list[Any], await run.result(timeout=1))
    assert (paid["body"], shipped) == ('{"paid": 1}', "shipped")
    assert (await call(handlers, request))[1]["status"] == "already-received", "and after the run's end"


async def test_without_a_key_identical_requests_count_once_and_different_keys_count_twice(
        local: LocalAWS, esm: Any, handlers: Handlers) -> None:
    assert local.client is not None
    run = await local.client.start(app.webhook_twice)
    hook = await wait_for_hook(local, esm, run)
    bare = url_event("POST", f"/webhooks/{hook.token}", "same", query={"a": "1"})
    assert (await call(handlers, bare))[1]["status"] == "accepted"
    again = url_event("POST", f"/webhooks/{hook.token}", "same", query={"a": "1"})  # byte-identical, new request id
    assert (await call(handlers, again))[1]["status"] == "already-received", "the digest of the request repeats"
    (digest,) = await received(local, run.run_id)
    assert digest.event_data["resumeId"].startswith("sha256:") and len(digest.event_data["resumeId"]) == 71
    variants = [url_event("POST", f"/webhooks/{hook.token}", "same", query={"a": "2"}),
                url_event("PUT", f"/webhooks/{hook.token}", "same", query={"a": "1"}),
                url_event("POST", f"/webhooks/{hook.token}", "same", query={"a": "1"}, content_type="text/plain"),
                url_event("POST", f"/webhooks/{hook.token}", b"same", query={"a": "1"},
                          content_type="application/octet-stream")]
    digests = {resume_id(e) for e in [bare, again, *variants]}
    assert len(digests) == 1 + len(variants), "only a byte-identical request repeats the digest"
    assert (await call(handlers, variants[0]))[1]["status"] == "accepted"
    await esm.run_until(terminal(run))
    assert [(p["body"], p["query"]) for p in await run.result(timeout=1)] == [("same", {"a": "1"}),
                                                                              ("same", {"a": "2"})]

    keyed = await local.client.start(app.webhook_twice)
    keyed_hook = await wait_for_hook(local, esm, keyed)
    for key in ("key-1", "key-2"):
        event = url_event("POST", f"/webhooks/{keyed_hook.token}", "same", headers={"Idempotency-Key": key})
        assert (await call(handlers, event))[1]["status"] == "accepted"
    await esm.run_until(terminal(keyed))
    assert [p["body"] for p in await keyed.result(timeout=1)] == ["same", "same"]
    assert [e.event_data["resumeId"] for e in await received(local, keyed.run_id)] == ["key-1", "key-2"]


def resume_id(event: dict[str, Any]) -> str:
    request = parse(event)
    assert isinstance(request, RouteRequest)
    return request.resume_id()[1]


# ------------------------------------------------------------------------------------------ hardening


def dynamodb_requests() -> int:
    return container_world().clients.stats.total("dynamodb")


@pytest.mark.parametrize("token", ["a" * 1025, "f" * 2043, "€" * 700, "%E2%82%AC" * 700],
                         ids=["over-creation-limit", "over-key-limit", "multibyte-over-key-bytes",
                              "percent-encoded-multibyte"])
async def test_a_token_no_hook_can_hold_is_404_without_a_dynamodb_request(handlers: Handlers, token: str) -> None:
    await call(handlers, url_event("POST", f"/webhooks/{secrets.token_hex(32)}", "{}"))  # the container is warm
    before = dynamodb_requests()
    status, body = await call(handlers, url_event("POST", f"/webhooks/{token}", "{}"))
    assert (status, body["status"]) == (404, "not-found")
    assert dynamodb_requests() == before


def _malformed(change: Any) -> dict[str, Any]:
    event = url_event("POST", f"/webhooks/{secrets.token_hex(32)}", "{}")
    change(event)
    return event


MALFORMED = {
    "headers-a-list": lambda e: e.update(headers=[["content-type", "text/plain"]]),
    "headers-a-string": lambda e: e.update(headers="content-type: text/plain"),
    "header-value-a-number": lambda e: e["headers"].update({"x-n": 1}),
    "query-a-list": lambda e: e.update(queryStringParameters=["a=1"]),
    "query-value-an-object": lambda e: e.update(queryStringParameters={"a": {"b": 1}}),
    "body-an-object": lambda e: e.update(body={"a": 1}),
    "body-a-number": lambda e: e.update(body=17),
    "base64-body-not-a-string": lambda e: e.update(body=["aGk="], isBase64Encoded=True),
    "base64-body-not-base64": lambda e: e.update(body="not base64!", isBase64Encoded=True),
    "base64-flag-not-a-boolean": lambda e: e.update(isBase64Encoded="yes"),
    "body-not-utf8": lambda e: e.update(body="x\udc80y"),
    "request-context-a-list": lambda e: e.update(requestContext=["http"]),
    "http-a-string": lambda e: e["requestContext"].update(http="POST"),
    "method-a-number": lambda e: e["requestContext"]["http"].update(method=1),
    "raw-path-a-number": lambda e: e.update(rawPath=17),
    "raw-path-not-utf8": lambda e: e.update(rawPath="/webhooks/x\ud800y"),
}


@pytest.mark.parametrize("change", MALFORMED.values(), ids=MALFORMED.keys())
async def test_a_malformed_function_url_event_is_400(handlers: Handlers, change: Any) -> None:
    status, body = await call(handlers, _malformed(change))
    assert (status, body["status"]) == (400, "bad-request")


@pytest.mark.parametrize("event", [None, [], "GET /webhooks/x", 17], ids=["none", "list", "string", "number"])
async def test_an_event_that_is_not_an_object_is_refused_without_raising(handlers: Handlers, event: Any) -> None:
    status, _ = await call(handlers, event)
    assert status in (400, 404)


async def answered(handler: Callable[[dict[str, Any], Any], dict[str, Any]], event: dict[str, Any]
                   ) -> tuple[int, dict[str, str], bytes]:
    """The handler's answer as the sender gets it: a webhook's own answer comes base64-encoded (its exact bytes)."""
    response = await invoke_as_lambda(handler, event, LambdaContext(30_000, "awsworld-test-webhook"))
    body = response["body"]
    data = base64.b64decode(body) if response.get("isBase64Encoded") else body.encode()
    return response["statusCode"], response["headers"], data


async def test_a_static_response_answers_each_request_and_its_repeat(
        local: LocalAWS, esm: Any, handlers: Handlers) -> None:
    assert local.client is not None
    run = await local.client.start(app.webhook_static)
    hook = await wait_for_hook(local, esm, run)
    event = url_event("POST", f"/webhooks/{hook.token}", '{"n": 1}', headers={"idempotency-key": "static-1"})
    status, headers, body = await answered(handlers.webhook, event)
    assert (status, headers["x-receipt"], headers["content-type"]) == (200, "static", "application/octet-stream")
    assert body == app.RECEIPT.body, "64 KiB of bytes, exactly"
    assert await answered(handlers.webhook, event) == (status, headers, body)  # a repeat: the same answer
    await esm.run_until(terminal(run))
    assert (await run.result(timeout=1))["body"] == '{"n": 1}'


async def test_a_manual_webhook_answers_with_the_steps_response(
        local: LocalAWS, esm: Any, handlers: Handlers, capsys) -> None:
    """The route waits on the run's response stream while the flow runs the step that answers (here: driven by
    the test, as SQS would), sends that answer, and a repeat of the request reads it from the stream at once. The
    webhook function has its own container (its own process on Lambda): the flow's runs beside its wait."""
    assert local.client is not None
    run = await local.client.start(app.webhook_manual)
    hook = await wait_for_hook(local, esm, run)
    marker = f"answer-secret-{uuid.uuid4().hex}"
    event = url_event("POST", f"/webhooks/{hook.token}", marker, content_type="text/plain")
    route = Container()
    try:
        sender = asyncio.create_task(answered(functools.partial(webhook.handle, container=route), event))
        await esm.run_until(terminal(run))
        status, headers, body = await asyncio.wait_for(sender, timeout=30)
        assert (status, headers["x-answered"], headers["content-type"]) == (200, "step", "application/json")
        assert json.loads(body) == {"echo": marker}
        assert await run.result(timeout=1) is True
        started = time.monotonic()
        assert await answered(handlers.webhook, event) == (status, headers, body), "a repeat gets the answer sent"
        assert time.monotonic() - started < 10
    finally:
        await asyncio.to_thread(route.reset)
        route.loop.close()
    assert marker not in capsys.readouterr().out, "neither the request's body nor the answer is logged"
