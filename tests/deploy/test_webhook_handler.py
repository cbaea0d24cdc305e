"""``handlers/webhook.py`` invoked with Lambda Function URL events (payload format 2.0), one per status: 202
(the run receives the request), 404, 405, 400, 413 and 410."""

from __future__ import annotations

import asyncio
import base64
import json
import secrets
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import urlencode

from awsworld.local import LocalAWS
from awsworld.world.entities import TERMINAL_RUN_STATUSES

from . import app
from .conftest import Handlers, json_lines, metric_values
from .lambda_env import LambdaContext
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
    response = await asyncio.to_thread(handlers.webhook, event, LambdaContext(30_000, "awsworld-test-webhook"))
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
