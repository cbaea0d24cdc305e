"""What a webhook answers its sender (Vercel's ``createWebhook({respondWith})``): ``create_webhook(respond_with=...)``
and ``respond()``.

``respond_with=None`` (the default): the route answers ``202`` with a JSON status body, as it always did.
``respond_with=WebhookResponse(...)``: that response, sent as soon as the request is recorded (and again to a
repeat of it). ``respond_with="manual"``: the workflow answers, from a step, with ``await respond(request, ...)``;
the route waits for that answer (``AWSWORLD_WEBHOOK_RESPONSE_SECONDS``) and sends it.

Where it is kept: the webhook's ``hook_created`` event records the choice under ``respondWith``
(``RESPOND_WITH_FIELD``: ``"manual"`` or a static response's stored form), an event field beside the display name
that replay never compares, so no World stores anything new and user metadata stays the user's. The route reads
it from that event (``lambda_host/webhook.py``). A manual webhook's request carries ``respondTo``: the run and
the stream (one per request: ``response_stream``) ``respond()`` writes its answer to, once; the route reads the
stream's first chunk live, so a repeat of the request (its answer lost) gets the same answer from the stream.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from typing import Literal, TypeAlias, cast

from ..durable.json_data import JSONValue
from ..world.errors import StreamClosedError
from .runtime import outside_any_run
from .step_context import current_step

MANUAL: Literal["manual"] = "manual"
RESPOND_WITH_FIELD = "respondWith"
"""Where a webhook's ``hook_created`` records ``respond_with`` (absent for the default 202). Display-like: replay
never compares it, so a deployed change of ``respond_with`` does not diverge a run; the recorded one answers."""
RESPOND_TO_FIELD = "respondTo"
"""Where a manual webhook's request (the hook payload) names what answers it: ``WebhookRequest``'s optional key, a
``RespondTo`` (``authoring/webhook_requests.py``)."""
MAX_RESPONSE_BODY_BYTES = 64 * 1024
"""The largest body a webhook answers with: an acknowledgment or a validation result, not a download. A static
one is kept in the webhook's ``hook_created`` event (a DynamoDB item holds 400 KB), a manual one in one chunk."""
MAX_RESPONSE_HEADER_BYTES = 8 * 1024
"""The most bytes of header names and values an answer sets (HTTP servers and proxies refuse far larger heads)."""
ROUTE_HEADERS = frozenset({"content-length", "transfer-encoding", "connection"})
"""Headers the HTTP server in front of the route sets from the body it sends: an answer cannot set them."""
BODYLESS_STATUSES = frozenset({204, 205, 304})
"""Statuses whose response HTTP sends without a body (a body given with one is refused, as the Fetch API does)."""
ResponseBody: TypeAlias = str | bytes | bytearray | int | float | bool | Sequence[object] | Mapping[str, object] | None
"""A response's body: text, bytes, or a value ``json.dumps`` takes (checked when the response is made)."""
_TOKEN = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")  # an HTTP header name (RFC 9110's token)
_FORBIDDEN_IN_VALUE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")  # control characters (tab is allowed)


class InvalidWebhookResponseError(ValueError):
    """A webhook response that cannot be sent (a status outside 200-599, a body with 204, 205 or 304, a header that
    is not a name and a one-line value, a body over ``MAX_RESPONSE_BODY_BYTES`` or not JSON-able), a
    ``respond_with`` that is none of ``None``, a ``WebhookResponse`` and ``"manual"`` (raised at
    ``create_webhook``, in the workflow, the same on every replay), or a ``respond()`` to a request whose webhook
    is not manual. Nothing is recorded."""


class WebhookResponse:
    """The HTTP answer a webhook's sender gets: ``status`` (200-599; 204, 205 and 304 without a body), ``body`` (text,
    bytes, or a JSON-able value, at most 64 KiB once encoded) and ``headers``. ``content-type`` defaults by the
    body: ``text/plain; charset=utf-8`` for text, ``application/octet-stream`` for bytes, ``application/json`` for
    anything else; no body, none. Checked where it is made (``InvalidWebhookResponseError``). Its ``repr`` shows the
    body's size, not the body: a response is the user's data, and the route never logs it."""

    __slots__ = ("_body", "_headers", "_status")

    def __init__(self, status: int = 200, body: ResponseBody = None,
                 headers: Mapping[str, str] | None = None) -> None:
        if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
            # (1xx is an interim answer: a client that gets one as the answer waits on for another, till it times
            # out; the Fetch API's Response refuses it too)
            raise InvalidWebhookResponseError(f"a webhook response's status is a whole number from 200 to 599, "
                                              f"not {status!r:.40}")
        content, content_type = _encoded_body(body)
        if content and status in BODYLESS_STATUSES:
            raise InvalidWebhookResponseError(f"a webhook response of status {status} has no body (HTTP sends none)")
        named = _checked_headers(headers)
        if content_type is not None and "content-type" not in named:
            named["content-type"] = content_type
        self._status, self._body, self._headers = status, content, named

    @property
    def status(self) -> int:
        return self._status

    @property
    def body(self) -> bytes:
        """The body as sent."""
        return self._body

    @property
    def headers(self) -> dict[str, str]:
        """Its headers, names in lower case (a copy)."""
        return dict(self._headers)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WebhookResponse) and (self._status, self._body, self._headers) == \
            (other._status, other._body, other._headers)

    def __hash__(self) -> int:
        return hash((self._status, self._body, tuple(sorted(self._headers.items()))))

    def __repr__(self) -> str:
        size = len(self._body)
        return f"WebhookResponse(status={self._status}, body=<{size} bytes>, headers={sorted(self._headers)})"

    def stored(self) -> dict[str, JSONValue]:
        """The JSON form kept in the log and on the response stream: the body as text when it is UTF-8, else
        base64 under ``bodyBase64``."""
        try:
            body: dict[str, JSONValue] = {"body": self._body.decode("utf-8")}
        except UnicodeDecodeError:
            body = {"bodyBase64": base64.b64encode(self._body).decode("ascii")}
        return {"status": self._status, "headers": cast("dict[str, JSONValue]", dict(self._headers)), **body}

    @classmethod
    def from_stored(cls, stored: object) -> WebhookResponse:
        """The response ``stored()`` gave, checked again (it came from storage); ``InvalidWebhookResponseError``
        for anything else."""
        if not isinstance(stored, Mapping):
            raise InvalidWebhookResponseError("a stored webhook response is an object")
        fields = cast("Mapping[str, object]", stored)
        status, headers, text, encoded = (fields.get("status"), fields.get("headers"), fields.get("body"),
                                          fields.get("bodyBase64"))
        if isinstance(encoded, str):
            try:
                body: bytes = base64.b64decode(encoded, validate=True)
            except (binascii.Error, ValueError):
                raise InvalidWebhookResponseError("a stored webhook response's bodyBase64 is not base64") from None
        elif isinstance(text, str):
            body = text.encode("utf-8")
        else:
            raise InvalidWebhookResponseError("a stored webhook response has no body")
        if not isinstance(status, int) or not isinstance(headers, Mapping):
            raise InvalidWebhookResponseError("a stored webhook response has a status and headers")
        return cls(status, body, cast("Mapping[str, str]", headers))


RespondWith: TypeAlias = WebhookResponse | Literal["manual"] | None
"""What ``create_webhook(respond_with=...)`` takes."""


def _encoded_body(body: ResponseBody) -> tuple[bytes, str | None]:
    """The body's bytes and the content type they default to."""
    if body is None:
        content, content_type = b"", None
    elif isinstance(body, bytes | bytearray | memoryview):
        content, content_type = bytes(body), "application/octet-stream"
    elif isinstance(body, str):
        content, content_type = _utf8(body), "text/plain; charset=utf-8"
    else:
        try:
            text = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        except (TypeError, ValueError) as error:
            raise InvalidWebhookResponseError(f"a webhook response's body is text, bytes or a JSON-able value: "
                                              f"{error}") from None
        content, content_type = _utf8(text), "application/json"
    if len(content) > MAX_RESPONSE_BODY_BYTES:
        raise InvalidWebhookResponseError(f"a webhook response's body is {len(content)} bytes; the largest is "
                                          f"{MAX_RESPONSE_BODY_BYTES}")
    return content, content_type


def _utf8(text: str) -> bytes:
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidWebhookResponseError("a webhook response's body is not valid UTF-8 text (a lone surrogate)") \
            from None


def _checked_headers(headers: Mapping[str, str] | None) -> dict[str, str]:
    if headers is None:
        return {}
    if not isinstance(headers, Mapping):
        raise InvalidWebhookResponseError("a webhook response's headers are a mapping of names to values")
    named: dict[str, str] = {}
    size = 0
    for name, value in cast("Mapping[object, object]", headers).items():
        if not isinstance(name, str) or not _TOKEN.match(name):
            raise InvalidWebhookResponseError(f"{name!r:.60} is not an HTTP header name")
        if not isinstance(value, str) or _FORBIDDEN_IN_VALUE.search(value) or not value.isascii():
            raise InvalidWebhookResponseError(f"header {name}: its value must be one line of ASCII text")
        lower = name.lower()
        if lower in ROUTE_HEADERS:
            raise InvalidWebhookResponseError(f"header {name} is set by the server from the body sent; leave it out")
        if lower in named:
            raise InvalidWebhookResponseError(f"header {name} is given twice (names are case-insensitive)")
        named[lower] = value
        size += len(name) + len(value)
    if size > MAX_RESPONSE_HEADER_BYTES:
        raise InvalidWebhookResponseError(f"a webhook response's headers are {size} bytes; the most is "
                                          f"{MAX_RESPONSE_HEADER_BYTES}")
    return named


def stored_respond_with(respond_with: object) -> JSONValue:
    """``create_webhook(respond_with=...)`` as its ``hook_created`` records it (None: nothing recorded), or
    ``InvalidWebhookResponseError`` naming what it takes."""
    if respond_with is None:
        return None
    if respond_with == MANUAL:
        return MANUAL
    if isinstance(respond_with, WebhookResponse):
        return respond_with.stored()
    raise InvalidWebhookResponseError(f"create_webhook(respond_with=...) takes None (answer 202), a WebhookResponse "
                                      f"(sent once the request is recorded) or \"manual\" (a step answers with "
                                      f"respond()), not {respond_with!r:.60}")


def recorded_respond_with(created: Mapping[str, object] | None) -> RespondWith:
    """What a webhook answers, from its ``hook_created`` event data (None: 202, as before the field existed)."""
    value = (created or {}).get(RESPOND_WITH_FIELD)
    if value is None:
        return None
    if value == MANUAL:
        return MANUAL
    return WebhookResponse.from_stored(value)


def response_stream(hook_id: str, resume_id: str) -> str:
    """The run's stream a manual webhook's answer to one request goes to: one per request (its resume id), so a
    repeat of the request reads the answer the first got. A digest: a resume id is a sender's header value, and
    stream names take fewer characters (``world/streams.py``)."""
    digest = hashlib.sha256(f"{hook_id}\n{resume_id}".encode("utf-8", "surrogatepass")).hexdigest()[:40]
    return f"webhook-response.{digest}"


async def respond(request: Mapping[str, object], *, status: int = 200, body: ResponseBody = None,
                  headers: Mapping[str, str] | None = None) -> bool:
    """Answer the sender of ``request`` (a ``WebhookRequest``, the payload of a ``create_webhook(respond_with=
    "manual")`` hook; any mapping is taken, as a step's argument annotated ``dict[str, object]`` is), in a step:
    Vercel's ``request.respondWith(new Response(...))``. The route, waiting since it recorded the request, sends
    this response (``WebhookResponse``'s ``status``, ``body`` and ``headers``, checked here).

    One answer per request: True when this call's is the one sent; False, writing nothing, when the request was
    answered already (a retried step that answered in an attempt before, or a second ``respond``), so a step that
    answers and is retried stays safe. The answer is the run's stream ``response_stream(...)``'s first chunk: two
    calls at once may both write one (the World has no write-if-empty), and only the one whose chunk is first, the
    answer sent, returns True."""
    context = current_step.get()
    if context is None:
        raise RuntimeError(f"respond() can only be used inside a @step running in a workflow{outside_any_run()}: "
                           "it writes the answer, a side effect the workflow body cannot replay")
    response = WebhookResponse(status, body, headers)
    target = request.get(RESPOND_TO_FIELD) if isinstance(request, Mapping) else None
    if not isinstance(target, Mapping):
        raise InvalidWebhookResponseError("respond() answers a request of a webhook created with "
                                          "respond_with=\"manual\"; this request's webhook answers by itself")
    names = cast("Mapping[str, object]", target)
    run_id, stream = names.get("runId"), names.get("stream")
    if not isinstance(run_id, str) or not isinstance(stream, str):
        raise InvalidWebhookResponseError(f"the request's {RESPOND_TO_FIELD} names no run and stream")
    streams = context.world.streams
    if (await streams.get_info(run_id, stream)).tail_index >= 0:
        return False
    answer = json.dumps(response.stored(), separators=(",", ":")).encode()
    try:
        await streams.write(run_id, stream, answer)
    except StreamClosedError:
        return False
    with contextlib.suppress(StreamClosedError):  # (closed by an answer written beside this one)
        await streams.close(run_id, stream)
    # Two answers at once (respond() calls gathered, or an attempt that outlived its lease beside the next) may both
    # have found the stream empty and written: the route sends the first chunk, so only its writer says True.
    first = (await streams.get_chunks(run_id, stream, limit=1)).data
    return bool(first) and first[0].data == answer
