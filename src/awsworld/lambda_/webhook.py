"""The webhook route: a Lambda Function URL (payload format 2.0) that resumes a webhook's run.

``POST /webhooks/<token>`` (or PUT, PATCH, GET, DELETE: whatever a sender uses) delivers the request to the
hook holding ``<token>`` as ``{"method", "headers", "body", "query"}`` and wakes the run:

====== ===========================================================================================
202    delivered; the body says so
400    a body marked base64 that is not
404    any other path, or no webhook holds the token (a token of a plain ``create_hook`` is not
       resumable over HTTP: such tokens may be chosen by the workflow and guessable)
405    another method
410    the webhook's run has finished
413    a body over 128 KiB (checked before anything is read from storage)
503    DynamoDB throttled us past the World's retries (``Retry-After`` set)
500    anything else (logged with its type only)
====== ===========================================================================================

The URL uses ``AuthType: NONE``: the token, 64 hex digits derived with the run's secret seed, is the
credential, like a capability URL. Logs therefore never show a token (only the first 12 hex digits of its
SHA-256), nor headers or bodies.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

from ..world.errors import HookNotFoundError, InvalidInputError, RunGoneError, ThrottledError
from . import observability as obs
from .container import Container, default_container

logger = obs.logger

MAX_BODY_BYTES = 128 * 1024
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
PATH = re.compile(r"^/webhooks/([^/]+)/?$")
_TEXT_TYPES = re.compile(r"^(text/|application/(json|xml|x-www-form-urlencoded|[\w.+-]*\+(json|xml))\b)", re.I)


@dataclass(frozen=True)
class Response:
    status: int
    body: dict[str, Any]
    headers: dict[str, str] | None = None

    def to_lambda(self) -> dict[str, Any]:
        headers = {"content-type": "application/json", "cache-control": "no-store", **(self.headers or {})}
        return {"statusCode": self.status, "headers": headers, "body": json.dumps(self.body)}


def _reply(status: int, kind: str, detail: str, headers: dict[str, str] | None = None) -> Response:
    return Response(status, {"status": kind, "detail": detail}, headers)


@dataclass(frozen=True)
class WebhookRequest:
    token: str
    method: str
    headers: dict[str, str]
    body: str | bytes | None
    query: dict[str, str]

    def payload(self) -> dict[str, Any]:
        return {"method": self.method, "headers": self.headers, "body": self.body, "query": self.query}


def token_fingerprint(token: str) -> str:
    """What the logs show instead of a token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _decode_body(event: dict[str, Any], headers: dict[str, str]) -> str | bytes | Response | None:
    raw = event.get("body")
    if raw is None:
        return None
    if not event.get("isBase64Encoded"):
        text = str(raw)
        if len(text.encode("utf-8", "surrogatepass")) > MAX_BODY_BYTES:
            return _reply(413, "too-large", f"the body is larger than {MAX_BODY_BYTES} bytes")
        return text
    if len(raw) > (MAX_BODY_BYTES + 2) // 3 * 4 + 4:  # too long to decode to <= the limit: skip decoding it
        return _reply(413, "too-large", f"the body is larger than {MAX_BODY_BYTES} bytes")
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return _reply(400, "bad-request", "the body is marked base64 but is not")
    if len(data) > MAX_BODY_BYTES:
        return _reply(413, "too-large", f"the body is larger than {MAX_BODY_BYTES} bytes")
    # Function URLs base64-encode bodies they do not consider text. Give text back as text when the sender
    # said it is text; anything else stays bytes (the run receives exactly what was sent).
    if _TEXT_TYPES.match(headers.get("content-type", "")):
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            return data
    return data


def parse(event: dict[str, Any]) -> WebhookRequest | Response:
    """The request a Function URL event describes, or the response that refuses it."""
    http = (event.get("requestContext") or {}).get("http") or {}
    method = str(http.get("method") or "").upper()
    match = PATH.match(str(event.get("rawPath") or http.get("path") or ""))
    if match is None:
        return _reply(404, "not-found", "webhooks are at /webhooks/<token>")
    if method not in METHODS:
        return _reply(405, "method-not-allowed", f"use one of {', '.join(METHODS)}", {"allow": ", ".join(METHODS)})
    token = unquote(match.group(1))
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    body = _decode_body(event, headers)
    if isinstance(body, Response):
        return body
    query = {str(k): str(v) for k, v in (event.get("queryStringParameters") or {}).items()}
    return WebhookRequest(token, method, headers, body, query)


async def resume(container: Container, request: WebhookRequest) -> Response:
    world = container.world
    try:
        hook = await world.hooks.get_by_token(request.token, resolve_data="none")
        if not hook.is_webhook:
            raise HookNotFoundError("the token belongs to a hook that is not a webhook")
        logger.thread_safe_append_keys(runId=hook.run_id, hookId=hook.hook_id)
        event = await container.client.resume_hook(request.token, request.payload())
    except HookNotFoundError:
        return _reply(404, "not-found", "no webhook has this token")
    except RunGoneError:
        return _reply(410, "gone", "the webhook's run has finished")
    except InvalidInputError as error:  # PayloadTooLargeError (413) included
        return _reply(error.status, error.code, error.message)
    except ThrottledError as error:
        retry = str(max(1, round(error.retry_after or 1)))
        return _reply(503, "throttled", "try again shortly", {"retry-after": retry})
    logger.thread_safe_append_keys(eventId=event.event_id)
    return _reply(202, "accepted", "the request was delivered to the webhook's run")


async def _respond(container: Container, event: dict[str, Any]) -> Response:
    """Parse, resume, count and log one request. Runs as its own task, so the log keys it appends (run id,
    token fingerprint) end with it."""
    request = parse(event)
    if isinstance(request, WebhookRequest):
        logger.thread_safe_append_keys(token=token_fingerprint(request.token), method=request.method)
        try:
            response = await resume(container, request)
        except Exception as error:
            logger.exception("webhook failed: %s", type(error).__name__)
            response = _reply(500, "error", "the request could not be delivered; try again")
        body = request.body
        size = len(body.encode("utf-8", "surrogatepass") if isinstance(body, str) else body or b"")
    else:
        response, size = request, 0
    obs.count(obs.WEBHOOKS_RESUMED if response.status == 202 else obs.WEBHOOKS_REJECTED)
    logger.info("webhook request", extra={"status": response.status, "bodyBytes": size})
    return response


def handle(event: dict[str, Any], context: Any, container: Container | None = None) -> dict[str, Any]:
    """The webhook route's logic, for a given container (the Lambda entry point passes the default one)."""
    container = container or default_container()
    return container.run(_respond(container, event)).to_lambda()


@obs.instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``handlers/webhook.handler``)."""
    return handle(event, context)
