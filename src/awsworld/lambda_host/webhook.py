"""The webhook route: a Lambda Function URL (payload format 2.0) that resumes a webhook's run.

``POST /webhooks/<token>`` (or PUT, PATCH, GET, DELETE: whatever a sender uses) delivers the request to the
hook holding ``<token>`` as a ``WebhookRequest``, ``{"method", "headers", "body", "query"}``
(``authoring/webhook_requests.py``), and wakes the run. ``POST /webhooks/<token>/heartbeat`` is a heartbeat
instead (``create_webhook(heartbeat_timeout=...)``): the body is ignored, nothing is woken, and it is answered
202 ``heartbeat`` or refused as a request would be (404, 410); another method is answered 405. A resume counts
as a heartbeat too.

====== ===========================================================================================
202    recorded, and the run will wake: ``accepted``, or ``already-received`` for a repeat of a request
       recorded before (nothing is recorded again; the run is woken again in case the first wake was lost)
any    recorded, and the webhook answers itself (``create_webhook(respond_with=...)``,
       ``authoring/webhook_responses.py``): its ``WebhookResponse``, or, ``"manual"``, the answer a step
       wrote with ``respond()``, awaited on the run's stream (a repeat reads the same answer)
502    ``no-response``: a manual webhook's run ended without answering the request (it was recorded)
504    ``no-response``: no manual answer within ``AWSWORLD_WEBHOOK_RESPONSE_SECONDS`` (it was recorded)
400    a malformed event: a body marked base64 that is not, fields of the wrong type, text that is not
       UTF-8
404    any other path, a token longer than a hook token can be (answered without reading storage), or no
       webhook holds the token (a token of a plain ``create_hook`` is not resumable over HTTP: such tokens
       may be chosen by the workflow and guessable)
405    another method
410    the webhook's run has finished
413    a body over 128 KiB (checked before anything is read from storage)
503    DynamoDB or SQS throttled or failed us past the World's retries (``Retry-After`` set): retry
500    anything else (logged with its type only): retry
====== ===========================================================================================

**Exactly once per request.** Every request carries a resume id, and the run records at most one payload per
resume id and webhook, so a sender may retry after any failure (a 5xx, a timeout after the payload was
recorded, a lost answer) without the run receiving it twice: the retry is answered 202 ``already-received``
and wakes the run. The resume id is the request's ``Idempotency-Key`` header, else a delivery id that senders
keep across their retries (``webhook-id`` of Standard Webhooks, ``X-GitHub-Delivery``, ``X-Idempotency-Key``),
else a SHA-256 digest of the method, token, body, query and content type. Without a key, two byte-identical
requests to one webhook therefore count as one: a sender that means to deliver the same payload twice gives
each request its own ``Idempotency-Key`` (or varies its query string).

The URL uses ``AuthType: NONE``: the token, 64 hex digits derived with the run's secret seed, is the
credential, like a capability URL. Logs therefore never show a token (only the first 12 hex digits of its
SHA-256), nor headers, bodies or idempotency keys.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import json
import re
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, cast
from urllib.parse import unquote

from ..authoring.webhook_requests import RespondTo, WebhookRequest
from ..authoring.webhook_responses import (
    MANUAL,
    InvalidWebhookResponseError,
    WebhookResponse,
    recorded_respond_with,
    response_stream,
)
from ..client.client import Client
from ..settings import SETTINGS
from ..world.errors import (
    HookClosedError,
    HookNotFoundError,
    InvalidInputError,
    NotFoundError,
    RunGoneError,
    ThrottledError,
)
from ..world.events import MAX_HOOK_TOKEN_LENGTH
from ..world.protocol import EventsAPI, World
from ..world.rules.requests import token_fits
from ..world.streams import StreamsAPI
from . import observability as obs
from . import snapstart
from .container import Container, default_container

logger = obs.logger

MAX_BODY_BYTES = 128 * 1024
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE")
PATH = re.compile(r"^/webhooks/([^/]+?)(/heartbeat)?/?$")
_TEXT_TYPES = re.compile(r"^(text/|application/(json|xml|x-www-form-urlencoded|[\w.+-]*\+(json|xml))\b)", re.I)
# Where a request's resume id comes from, first match wins: headers whose value a sender keeps across its
# retries of one delivery (Standard Webhooks, GitHub, and the common spellings of an idempotency key).
IDEMPOTENCY_HEADERS = ("idempotency-key", "webhook-id", "x-github-delivery", "x-idempotency-key")


@dataclass(frozen=True)
class Response:
    """The route's answer: its own JSON status body (``body`` a dict), or the webhook's (``body`` bytes, with the
    headers the workflow chose: ``create_webhook(respond_with=...)``). ``delivered``: the request reached the run
    (what the route counts as resumed, whatever the status)."""

    status: int
    body: dict[str, Any] | bytes
    headers: dict[str, str] | None = None
    delivered: bool = False

    def http(self) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body bytes, as any HTTP server sends them (the Lambda answer and ``dev``'s)."""
        if isinstance(self.body, bytes):
            return self.status, dict(self.headers or {}), self.body
        headers = {"content-type": "application/json", "cache-control": "no-store", **(self.headers or {})}
        return self.status, headers, json.dumps(self.body).encode()

    def to_lambda(self) -> dict[str, Any]:
        status, headers, body = self.http()
        if isinstance(self.body, bytes):  # the workflow's bytes, exactly: base64, which the Function URL decodes
            return {"statusCode": status, "headers": headers, "body": base64.b64encode(body).decode(),
                    "isBase64Encoded": True}
        return {"statusCode": status, "headers": headers, "body": body.decode()}


def _reply(status: int, kind: str, detail: str, headers: dict[str, str] | None = None, *,
           delivered: bool = False) -> Response:
    return Response(status, {"status": kind, "detail": detail}, headers, delivered)


def _sent(response: WebhookResponse) -> Response:
    return Response(response.status, response.body, response.headers, delivered=True)


@dataclass(frozen=True)
class RouteRequest:
    """A request to the route, parsed: the webhook's ``token``, whether it is a heartbeat, and the request the run
    receives (``payload()``)."""

    token: str
    method: str
    headers: dict[str, str]
    body: str | bytes | None
    query: dict[str, str]
    heartbeat: bool = False  # ``POST /webhooks/<token>/heartbeat``

    def payload(self) -> WebhookRequest:
        """What the webhook's run receives (``create_webhook()``'s payload): its one shape, which the workflow's
        type checker sees too."""
        return WebhookRequest(method=self.method, headers=self.headers, body=self.body, query=self.query)

    def resume_id(self) -> tuple[str, str]:
        """(source, resume id): the sender's idempotency header, else a digest of the request itself, so a
        retry of the same bytes is recognised even from a sender that names no key."""
        for name in IDEMPOTENCY_HEADERS:
            value = self.headers.get(name, "").strip()
            if value:
                return name, value
        body = self.body
        kind, text = ("bytes", base64.b64encode(body).decode()) if isinstance(body, bytes) else ("text", body)
        request = [self.method, self.token, kind, text, sorted(self.query.items()), self.headers.get("content-type")]
        canonical = json.dumps(request, ensure_ascii=False, separators=(",", ":"))
        return "digest", "sha256:" + hashlib.sha256(canonical.encode("utf-8")).hexdigest()


class MalformedEvent(ValueError):
    """The Function URL event is not one Lambda sends: answered 400, never raised out of the parser."""


def token_fingerprint(token: str) -> str:
    """What the logs show instead of a token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _text(value: Any, what: str) -> str:
    """A string field of the event; it must be encodable (DynamoDB and JSON take UTF-8 only)."""
    if not isinstance(value, str):
        raise MalformedEvent(f"{what} must be a string")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise MalformedEvent(f"{what} is not valid UTF-8") from None
    return value


def _strings(value: Any, what: str) -> dict[str, str]:
    """``headers`` or ``queryStringParameters``: absent, or a mapping of strings to strings."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MalformedEvent(f"{what} must be an object")
    return {_text(k, f"a name in {what}"): _text(v, f"{what} values") for k, v in value.items()}


def _object(value: Any, what: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise MalformedEvent(f"{what} must be an object")
    return value


def _decode_body(event: Mapping[str, Any], headers: dict[str, str]) -> str | bytes | Response | None:
    raw = event.get("body")
    if raw is None:
        return None
    encoded = event.get("isBase64Encoded")
    if encoded is not None and not isinstance(encoded, bool):
        raise MalformedEvent("isBase64Encoded must be a boolean")
    text = _text(raw, "body")
    if not encoded:
        if len(text.encode("utf-8")) > MAX_BODY_BYTES:
            return _reply(413, "too-large", f"the body is larger than {MAX_BODY_BYTES} bytes")
        return text
    if len(text) > (MAX_BODY_BYTES + 2) // 3 * 4 + 4:  # too long to decode to <= the limit: skip decoding it
        return _reply(413, "too-large", f"the body is larger than {MAX_BODY_BYTES} bytes")
    try:
        data = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise MalformedEvent("the body is marked base64 but is not") from None
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


def parse(event: Any) -> RouteRequest | Response:
    """The request a Function URL event describes, or the response that refuses it. Never raises: whatever
    the event holds, the answer is a status (400 for a shape Lambda does not send)."""
    try:
        return _parse(event)
    except MalformedEvent as error:
        return _reply(400, "bad-request", str(error))
    except Exception as error:  # a shape no check above foresaw: still the sender's event, not our fault
        logger.warning("malformed webhook event: %s", type(error).__name__)
        return _reply(400, "bad-request", "the request is malformed")


def _parse(event: Any) -> RouteRequest | Response:
    event = _object(event, "the event")
    http = _object(_object(event.get("requestContext"), "requestContext").get("http"), "requestContext.http")
    method = _text(http.get("method") or "", "requestContext.http.method").upper()
    match = PATH.match(_text(event.get("rawPath") or http.get("path") or "", "rawPath"))
    if match is None:
        return _reply(404, "not-found", "webhooks are at /webhooks/<token>")
    heartbeat = match.group(2) is not None
    methods = ("POST",) if heartbeat else METHODS
    if method not in methods:
        return _reply(405, "method-not-allowed", f"use one of {', '.join(methods)}", {"allow": ", ".join(methods)})
    token = unquote(match.group(1))
    if len(token) > MAX_HOOK_TOKEN_LENGTH or not token_fits(token):
        # No hook can hold it: answered without a storage request (DynamoDB would refuse the key, not miss it).
        return _reply(404, "not-found", "no webhook has this token")
    headers = {k.lower(): v for k, v in _strings(event.get("headers"), "headers").items()}
    body = _decode_body(event, headers)
    if isinstance(body, Response):
        return body
    query = _strings(event.get("queryStringParameters"), "queryStringParameters")
    return RouteRequest(token, method, headers, body, query, heartbeat)


class RouteHost(Protocol):
    """What the route reads of where it runs: a World and a Client on it. The Lambda ``Container``, ``awsworld
    dev``'s (``cli/dev.py``), and a ``WorkflowTestEnv`` (a test drives the route in memory) all have them."""

    @property
    def world(self) -> World: ...

    @property
    def client(self) -> Client: ...


async def resume(container: RouteHost, request: RouteRequest, answer_within: float | None = None) -> Response:
    """Deliver ``request`` to its webhook's run and answer as the webhook says (``respond_with``). A manual
    webhook's answer is awaited for ``answer_within`` seconds (default ``AWSWORLD_WEBHOOK_RESPONSE_SECONDS``)."""
    world = container.world
    source, resume_id = request.resume_id()
    logger.thread_safe_append_keys(resumeIdSource=source)
    try:
        try:
            hook = await world.hooks.get_by_token(request.token, resolve_data="none")
        except HookNotFoundError as missing:
            # The webhook is gone: its workflow disposed it (left `async with`, or a plain `await` of it) or its
            # run ended. A sender's retry of a request it took (its answer lost, a timeout) must still be
            # answered as the first was (202 `already-received`, the static or the workflow's answer), as the
            # module's docstring promises, not 404/410: a sender told "gone" after its payload was recorded
            # counts a delivery as failed, or switches the endpoint off. The resume below answers such a repeat
            # and raises `missing` again for anything else.
            gone = None if request.heartbeat else await _disposed_webhook(world.events, missing)
            if gone is None:
                raise
            (run_id, hook_id), created = gone
        else:
            if not hook.is_webhook:
                raise HookNotFoundError("the token belongs to a hook that is not a webhook")
            run_id, hook_id, created = hook.run_id, hook.hook_id, None
        logger.thread_safe_append_keys(runId=run_id, hookId=hook_id)
        if request.heartbeat:
            event = await container.client.heartbeat_hook(request.token)
            logger.thread_safe_append_keys(eventId=event.event_id, heartbeat=True)
            return _reply(202, "heartbeat", "the webhook's run heard the heartbeat")
        if created is None:
            created = await _hook_created(world.events, run_id, hook_id)
        answer = recorded_respond_with(created)
        payload = request.payload()
        stream = response_stream(hook_id, resume_id)
        if answer == MANUAL:
            payload["respondTo"] = RespondTo(runId=run_id, stream=stream)
        outcome = await container.client.resume_hook_outcome(request.token, payload, idempotency_key=resume_id)
    except HookClosedError:  # the token's run ended and closed its hooks (before HookNotFoundError: it is one)
        return _reply(410, "gone", "the webhook's run has finished")
    except HookNotFoundError:
        return _reply(404, "not-found", "no webhook has this token")
    except RunGoneError:
        return _reply(410, "gone", "the webhook's run has finished")
    except InvalidInputError as error:  # PayloadTooLargeError (413) included
        return _reply(error.status, error.code, error.message)
    except ThrottledError as error:
        # The payload may be recorded already; the sender's retry (same resume id) will not record it again.
        retry = str(max(1, round(error.retry_after or 1)))
        return _reply(503, "throttled", "try again shortly", {"retry-after": retry})
    logger.thread_safe_append_keys(eventId=outcome.event.event_id, repeat=not outcome.recorded)
    if isinstance(answer, WebhookResponse):
        return _sent(answer)
    if answer == MANUAL:
        within = SETTINGS.webhook_response_seconds if answer_within is None else answer_within
        return await _workflow_answer(world.streams, run_id, stream, within)
    if not outcome.recorded:
        return _reply(202, "already-received", "this request was delivered before; the webhook's run is woken",
                      delivered=True)
    return _reply(202, "accepted", "the request was delivered to the webhook's run", delivered=True)


async def _workflow_answer(streams: StreamsAPI, run_id: str, stream: str, within: float) -> Response:
    """A manual webhook's answer to one request: the first chunk of its response stream, read live (``respond()``
    writes it), for at most ``within`` seconds. A repeat of the request reads the same chunk at once. Else 504
    when the time runs out, 502 when the run ended (a live read ends with its run) without answering: the
    sender's request was recorded all the same (a retry is recognised, and gets the answer if one comes)."""
    chunks = streams.get(run_id, stream)
    try:
        first = await asyncio.wait_for(anext(chunks, None), timeout=within)
    except TimeoutError:
        return _reply(504, "no-response", f"the workflow did not answer within {within:g} s; the request was "
                      "delivered (a retry with the same idempotency key gets its answer)", delivered=True)
    finally:
        await _closed(chunks)
    if first is None:
        return _reply(502, "no-response", "the webhook's run ended without answering this request (respond() in "
                      "a step)", delivered=True)
    try:
        return _sent(WebhookResponse.from_stored(json.loads(first)))
    except (ValueError, InvalidWebhookResponseError):  # not respond()'s: someone else wrote to the stream
        return _reply(502, "bad-response", "the workflow's answer is not a response", delivered=True)


async def _closed(chunks: AsyncIterator[bytes]) -> None:
    """End a live read (its poll, on the AWS World) that its reader left."""
    close = getattr(chunks, "aclose", None)
    if close is not None:
        await close()


async def _hook_created(events: EventsAPI, run_id: str, hook_id: str) -> Mapping[str, Any] | None:
    """The data of the hook's ``hook_created`` (its first event, kept while its run's data is: a closed hook's
    entity is gone with its run's end), None when its run's data expired: one query of one item. What the
    webhook answers is there (``authoring/webhook_responses.py``)."""
    try:
        page = await events.list_by_correlation_id(run_id, hook_id, limit=1, resolve_data="none")
    except (NotFoundError, RunGoneError):
        return None
    created = next((e for e in page.data if e.event_type == "hook_created"), None)
    return None if created is None else (created.event_data or {})


async def _disposed_webhook(events: EventsAPI, missing: HookNotFoundError
                            ) -> tuple[tuple[str, str], Mapping[str, Any]] | None:
    """The (run id, hook id) of the gone hook that last held the token (``missing.disposed_hook``), and its
    ``hook_created`` data, if it was a webhook, else None: only a webhook's repeats are answered over the URL (a
    plain hook's token may be guessable, so it is never resumable here)."""
    if missing.disposed_hook is None:
        return None
    created = await _hook_created(events, *missing.disposed_hook)
    webhook = created is not None and bool(created.get("isWebhook"))
    return (missing.disposed_hook, created) if webhook and created is not None else None


async def _respond(container: Container, event: Any, answer_within: float | None = None) -> Response:
    """Parse, resume, count and log one request. Runs as its own task, so the log keys it appends (run id,
    token fingerprint) end with it."""
    request = parse(event)
    if isinstance(request, RouteRequest):
        logger.thread_safe_append_keys(token=token_fingerprint(request.token), method=request.method)
        try:
            response = await resume(container, request, answer_within)
        except Exception as error:
            logger.exception("webhook failed: %s", type(error).__name__)
            response = _reply(500, "error", "the request could not be delivered; try again")
        body = request.body
        size = len(body.encode("utf-8") if isinstance(body, str) else body or b"")
    else:
        response, size = request, 0
    obs.count(obs.WEBHOOKS_RESUMED if response.delivered or response.status == 202 else obs.WEBHOOKS_REJECTED)
    logger.info("webhook request", extra={"status": response.status, "bodyBytes": size})
    return response


def handle(event: dict[str, Any], context: Any, container: Container | None = None) -> dict[str, Any]:
    """The webhook route's logic, for a given container (the Lambda entry point passes the default one)."""
    container = container or default_container()
    return container.run(_respond(container, event, answer_budget(context))).to_lambda()


ANSWER_MARGIN_SECONDS = 3.0
"""What a manual webhook's wait leaves of the invocation: time to send the 504 before Lambda's own timeout."""


def answer_budget(context: Any) -> float:
    """How long a manual webhook's answer is awaited: ``AWSWORLD_WEBHOOK_RESPONSE_SECONDS``, and never past the
    invocation's end (the function's ``Timeout``, less ``ANSWER_MARGIN_SECONDS``): the sender is answered 504
    by the route, not cut off by Lambda."""
    within = SETTINGS.webhook_response_seconds
    remaining = getattr(context, "get_remaining_time_in_millis", None)
    if callable(remaining):
        within = min(within, max(0.0, cast(int, remaining()) / 1000 - ANSWER_MARGIN_SECONDS))
    return within


@obs.instrument
def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    """Lambda entry point (``handlers/webhook.handler``)."""
    return handle(event, context)


# Under SnapStart: prime the default container before the snapshot, renew it after each restore.
snapstart.install(default_container)
