"""``awsworld serve``'s ASGI app (Starlette): any awsworld World over HTTP/JSON.

Three groups of endpoints, all under ``/v1`` (docs/how-to/world-over-http.md, "Endpoints", lists each with its
request and answer):

- the World itself, one endpoint per call of the contract (``world.runs``, ``steps``, ``events``, ``hooks``,
  ``streams``, ``queue``): what the TypeScript World (``packages/world-awsworld``) and the Python ``HttpClient``
  forward to. A queued message with ``deliverTo`` is pushed by HTTP to that app (``_http/push.py``).
- ``/v1/client/...``: the ``Client``'s own calls for any service that speaks plain HTTP: start a run of a
  workflow by name with JSON arguments, resume a hook, cancel a run (reads and waits are the World's).
- ``/v1/info``: the World's spec version and deployment, and how many live stream reads this process is serving
  (each ends when its stream does, or when its reader disconnects); ``/v1/published``: the workflow names the
  consumers of the World's queue published (``_published.model``), which a remote ``Client`` reads to refuse an
  unknown name.

Bodies and errors follow ``_http/wire.py``. Every request passes ``_http/auth.py``'s check first; a bad request
(malformed JSON, a body that is not ``application/json``, a field of the wrong type) is a 4xx with nothing
written, because every write goes through the World's own checks (the rulebook's) before anything is stored.
"""

from __future__ import annotations

import asyncio
import json
import math
import struct
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from typing import Any, cast
from urllib.parse import unquote

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..authoring.errors import CodecError
from ..client.client import Client
from ..world.entities import HookRecord, ResolveData
from ..world.errors import InvalidInputError, WorldError
from ..world.ids import SPEC_VERSION_CURRENT
from ..world.limits import MAX_VALUE_BYTES_ENV, max_value_bytes
from ..world.protocol import World
from ..world.rules.hooks import hook_owner
from ..world.streams import check_stream
from ..world.wire_model import WireModel
from .auth import Auth, Guard
from .push import push_envelope, transport_queue_name
from .wire import JSON, error_body, refusal_body

RESOLVE_DATA: tuple[ResolveData, ...] = ("all", "none", "skip-step-inputs")
FRAME = struct.Struct(">I")
MAX_WAIT_SECONDS = 60.0
"""The longest a ``/wait`` request holds before answering with the run as it is (the client asks again)."""
MAX_BODY_BYTES = 80 * 1024 * 1024
"""A request body larger than this is refused (413) before it is read whole: above the largest value a World
takes (64 MiB, ``AWSWORLD_MAX_VALUE_BYTES``) plus its JSON and base64 overhead."""

class Served:
    """What the app serves: the World, a ``Client`` on it, and the names it gives hooks (``hook_owner``);
    ``live_reads``: the live stream reads in progress (``GET /v1/info`` shows it)."""

    def __init__(self, world: World, client: Client | None, project: str, deployment_id: str) -> None:
        self.world = world
        self.client = client or Client(world)
        self.owner = hook_owner(project, deployment_id)
        self.live_reads = 0


def create_app(world: World, *, auth: Auth, client: Client | None = None, project: str = "awsworld",
               deployment_id: str = "local") -> Starlette:
    """The app serving ``world`` to the callers ``auth`` admits. ``client``: the ``Client`` the ``/v1/client``
    endpoints use (one with the served workflows' registry checks names at start); ``project`` and
    ``deployment_id``: what hooks say they belong to."""
    served = Served(world, client, project, deployment_id)

    def route(path: str, handler: Callable[[Served, Request], Awaitable[Response]], method: str) -> Route:
        async def endpoint(request: Request) -> Response:
            try:
                return await handler(served, request)
            except WorldError as error:
                return JSONResponse(error_body(error), status_code=error.status)

        return Route(path, endpoint, methods=[method])

    routes = [
        route("/v1/info", _info, "GET"),
        route("/v1/deployment-id", _deployment_id, "GET"),
        route("/v1/published", _published, "GET"),
        route("/v1/queue", _queue, "POST"),
        route("/v1/runs", _list_runs, "GET"),
        route("/v1/runs/{run_id}", _get_run, "GET"),
        route("/v1/runs/{run_id}", _delete_run, "DELETE"),
        route("/v1/runs/{run_id}/wait", _wait_run, "GET"),
        route("/v1/runs/{run_id}/attributes", _set_attributes, "POST"),
        route("/v1/runs/{run_id}/steps", _list_steps, "GET"),
        route("/v1/runs/{run_id}/steps/{step_id}", _get_step, "GET"),
        route("/v1/events", _create_event, "POST"),
        route("/v1/runs/{run_id}/events", _list_events, "GET"),
        route("/v1/runs/{run_id}/events/batch", _create_batch, "POST"),
        route("/v1/runs/{run_id}/events/by-correlation-id/{correlation_id}", _list_correlated, "GET"),
        route("/v1/hooks", _list_hooks, "GET"),
        route("/v1/hooks/by-token", _hook_by_token, "GET"),  # (?token=: a token "." or "..", which a path drops)
        route("/v1/hooks/by-token/{token:path}", _hook_by_token, "GET"),
        route("/v1/hooks/by-resume-id", _hook_by_resume_id, "GET"),
        route("/v1/hooks/{hook_id}", _get_hook, "GET"),
        route("/v1/runs/{run_id}/streams", _list_streams, "GET"),
        route("/v1/runs/{run_id}/streams/{name}", _read_stream, "GET"),
        route("/v1/runs/{run_id}/streams/{name}/chunks", _write_chunks, "POST"),
        route("/v1/runs/{run_id}/streams/{name}/chunks", _get_chunks, "GET"),
        route("/v1/runs/{run_id}/streams/{name}/info", _stream_info, "GET"),
        route("/v1/runs/{run_id}/streams/{name}/close", _close_stream, "POST"),
        route("/v1/client/start", _client_start, "POST"),
        route("/v1/client/hooks/resume", _client_resume, "POST"),
        route("/v1/client/runs/{run_id}/cancel", _client_cancel, "POST"),
    ]
    return Starlette(routes=routes, middleware=[Middleware(CutOffAnswer), Middleware(Guard, auth=auth)],
                     exception_handlers={404: _not_found, 405: _not_allowed})


SERVER_STOPPING = "server-stopping"
"""The ``code`` of the 503 a request cut off by the server's stop is answered with (``CutOffAnswer``)."""


class CutOffAnswer:
    """The ASGI middleware that answers a request the server's stop cut off (its grace ran out,
    ``_http/listen.GRACEFUL_SECONDS``: uvicorn cancels its task) with the World API's error shape: a 503, code
    ``server-stopping``, which a client retries as any 5xx. The client got uvicorn's plain-text 500 ``Internal
    Server Error`` before, no World error at all. A request whose answer had begun (a live stream read) ends with
    its connection, as before: nothing more can be said on it."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        answered = False

        async def sending(message: Message) -> None:
            nonlocal answered
            answered = answered or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except asyncio.CancelledError:
            if answered:
                raise
            await _refusal(503, SERVER_STOPPING, "the server is stopping, and this request was still under way "
                           "when its grace ran out: send it again once the server is back (a write it made may "
                           "have been recorded: a retry with the same run id or idempotency key is safe)")(
                scope, receive, send)


# -- request and answer helpers ---------------------------------------------------------------------------------


async def _not_found(request: Request, exc: Exception) -> Response:
    bad = _bad_stream_path(request)
    if bad is not None:
        return JSONResponse(error_body(bad), status_code=bad.status)
    return _refusal(404, "not-found", f"no endpoint {request.method} {request.url.path} "
                    "(see the endpoints in *How-to: The World over HTTP*)")


def _bad_stream_path(request: Request) -> InvalidInputError | None:
    """The World's 400 for a run id or stream name no route could take: one holding a ``/`` arrives encoded
    (``%2F``), and decoded it splits the path, which then matched no endpoint (a 404 "no endpoint" where the
    World refuses the name, naming the field). Read from the raw path, so its segments are the client's."""
    raw = request.scope.get("raw_path")
    if not isinstance(raw, bytes):
        return None
    segments = raw.split(b"/")
    if segments[1:3] != [b"v1", b"runs"] or len(segments) < 6 or segments[4] != b"streams":
        return None
    try:
        check_stream(unquote(segments[3].decode("latin-1")), unquote(segments[5].decode("latin-1")))
    except InvalidInputError as error:
        return error
    return None


async def _not_allowed(request: Request, exc: Exception) -> Response:
    return _refusal(405, "method-not-allowed", f"{request.method} is not allowed on {request.url.path}")


def _refusal(status: int, code: str, message: str) -> JSONResponse:
    return JSONResponse(refusal_body(status, code, message), status_code=status)


async def _body(request: Request) -> JSON:
    """The request's JSON object: ``application/json`` only (a browser's cross-site form cannot send it), at most
    ``MAX_BODY_BYTES``, an object; anything else is a 400 (415 for another content type, 413 for too large)."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/json":
        error = InvalidInputError(f"the body must be application/json, not {kind or 'absent'!r}",
                                  field="content-type")
        error.status = 415
        raise error
    declared = request.headers.get("content-length")
    refused = declared is not None and declared.isdigit() and int(declared) > MAX_BODY_BYTES
    raw = bytearray()
    size = 0
    async for piece in request.stream():
        # (a refused body is still read to its end, keeping none of it: a server that answers before the body
        # is in, then closes, resets the client's upload, and the client reports a broken pipe (undici's
        # "write EPIPE", which world-awsworld could only call the server unreachable) instead of this 413)
        size += len(piece)
        refused = refused or size > MAX_BODY_BYTES
        if refused:
            raw.clear()
        else:
            raw += piece
    if refused:
        raise _too_large(size)
    try:
        body = json.loads(raw, parse_constant=_no_constant)
    except ValueError as error:
        raise InvalidInputError(f"the body is not JSON: {str(error)[:200]}", field="body") from None
    if not isinstance(body, dict):
        raise InvalidInputError("the body must be a JSON object", field="body")
    return cast(JSON, body)


def _too_large(size: int) -> InvalidInputError:
    error = InvalidInputError(
        f"the body is {size} bytes, more than the {MAX_BODY_BYTES} this server reads: a value the World stores is "
        f"at most {max_value_bytes()} bytes of JSON ({MAX_VALUE_BYTES_ENV}; bytes take 4/3 of their size there, "
        "as base64), and values that fit it go in requests of their own", field="body")
    error.status = 413
    return error


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _only(body: Mapping[str, Any], *fields: str) -> None:
    """Refuse a field the call does not take (a misspelt ``kwarg`` would otherwise be dropped unread): the Client's
    own calls only, whose bodies are awsworld's; the World's calls take what the Workflow SDK's shapes allow."""
    unknown = sorted(set(body) - set(fields))
    if unknown:
        raise InvalidInputError(f"unknown field {unknown[0]!r}: the body takes {', '.join(fields)}", field=unknown[0])


def _object(body: Mapping[str, Any], key: str) -> JSON:
    value = body.get(key)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InvalidInputError(f"{key} must be an object", field=key)
    return cast(JSON, value)


def _string(value: Any, field: str, *, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{field} must be a string", field=field)
    return value


def _number(value: Any, field: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise InvalidInputError(f"{field} must be a number", field=field)
    return float(value)


def _integer(value: Any, field: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidInputError(f"{field} must be an integer", field=field)
    return value


def _flag(value: Any, field: str) -> bool:
    if value is None:
        return False
    if not isinstance(value, bool):
        raise InvalidInputError(f"{field} must be true or false", field=field)
    return value


def _resolve(request: Request, default: ResolveData = "all") -> ResolveData:
    value = request.query_params.get("resolveData", default)
    if value not in RESOLVE_DATA:
        raise InvalidInputError(f"resolveData must be one of {', '.join(RESOLVE_DATA)}", field="resolveData")
    return cast(ResolveData, value)


def _resolve_param(params: JSON) -> ResolveData:
    value = params.get("resolveData", "all")
    if value not in RESOLVE_DATA:
        raise InvalidInputError(f"params.resolveData must be one of {', '.join(RESOLVE_DATA)}",
                                field="params.resolveData")
    return cast(ResolveData, value)


def _query_int(request: Request, name: str, default: int) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise InvalidInputError(f"{name} must be an integer", field=name) from None


def _ascending_only(request: Request) -> None:
    """awsworld lists a run's events, steps and hooks oldest first; a caller asking otherwise is told so."""
    order = request.query_params.get("sortOrder")
    if order not in (None, "", "asc"):
        raise InvalidInputError("this World lists a run's events, steps and hooks in ascending order only",
                                field="sortOrder")


def _json(value: WireModel | JSON, status: int = 200) -> JSONResponse:
    return JSONResponse(value.to_wire() if isinstance(value, WireModel) else value, status_code=status)


def _hook(served: Served, hook: HookRecord) -> JSON:
    return {**served.owner, **hook.to_wire()}


# -- the World ---------------------------------------------------------------------------------------------------


async def _info(served: Served, request: Request) -> Response:
    return JSONResponse({"specVersion": SPEC_VERSION_CURRENT, "deploymentId": await served.world.get_deployment_id(),
                         "capabilities": served.world.capabilities.to_wire(), "liveStreamReads": served.live_reads})


async def _deployment_id(served: Served, request: Request) -> Response:
    return JSONResponse({"deploymentId": await served.world.get_deployment_id()})


async def _published(served: Served, request: Request) -> Response:
    """``world.published.read()``: every publication of the World's queue consumers (none for a World that keeps
    none). ``HttpWorld.published`` reads it, so ``HttpClient.start`` refuses a name no consumer registers as a
    ``Client`` on the World itself does (``Client.refuse_unpublished``)."""
    store = served.world.published
    publications = await store.read() if store is not None else []
    # (each in the shape the World stores it: Publication.to_json)
    return JSONResponse({"publications": [json.loads(p.to_json()) for p in publications]})


async def _queue(served: Served, request: Request) -> Response:
    """``queue(queueName, message, opts)``; with ``deliverTo``, a push to that app (``_http/push.py``)."""
    body = await _body(request)
    queue_name = _string(body.get("queueName"), "queueName")
    assert queue_name is not None
    opts = _object(body, "opts")
    payload: Any = body.get("message")
    deliver_to = body.get("deliverTo")
    if deliver_to is not None:
        payload = push_envelope(queue_name, payload, deliver_to, opts.get("headers"))
        queue_name = transport_queue_name(queue_name)
    message_id = await served.world.queue(
        queue_name, payload, idempotency_key=_string(opts.get("idempotencyKey"), "opts.idempotencyKey", optional=True),
        delay_seconds=_number(opts.get("delaySeconds"), "opts.delaySeconds"),
        deployment_id=_string(opts.get("deploymentId"), "opts.deploymentId", optional=True))
    return JSONResponse({"messageId": message_id})


async def _get_run(served: Served, request: Request) -> Response:
    return _json(await served.world.runs.get(request.path_params["run_id"], resolve_data=_resolve(request)))


async def _delete_run(served: Served, request: Request) -> Response:
    """``World.delete_run``: ``{"deleted": true}``, or false when there was no such run (``world/rules/erasure.py``);
    an unfinished run is refused (409)."""
    return _json({"deleted": await served.world.delete_run(request.path_params["run_id"])})


async def _wait_run(served: Served, request: Request) -> Response:
    """``runs.wait_for_terminal_status``: the run once it has ended, or as it is after ``timeout`` seconds (at most
    ``MAX_WAIT_SECONDS``): a long poll the caller repeats."""
    try:
        timeout = float(request.query_params.get("timeout", "30"))
    except ValueError:
        raise InvalidInputError("timeout must be a number of seconds", field="timeout") from None
    if not math.isfinite(timeout) or timeout < 0:
        raise InvalidInputError("timeout must be a number of seconds >= 0", field="timeout")
    return _json(await served.world.runs.wait_for_terminal_status(
        request.path_params["run_id"], timeout=min(timeout, MAX_WAIT_SECONDS), resolve_data=_resolve(request)))


async def _list_runs(served: Served, request: Request) -> Response:
    order = request.query_params.get("sortOrder")
    if order not in (None, "", "desc"):
        raise InvalidInputError("this World lists runs newest first (sortOrder desc) only", field="sortOrder")
    statuses = request.query_params.getlist("status")
    page = await served.world.runs.list(
        workflow_name=request.query_params.get("workflowName") or None,
        status=None if not statuses else statuses[0] if len(statuses) == 1 else statuses,
        cursor=request.query_params.get("cursor") or None, limit=_query_int(request, "limit", 50),
        resolve_data=_resolve(request, "none"))
    return _json(page)


async def _set_attributes(served: Served, request: Request) -> Response:
    body = await _body(request)
    changes = body.get("changes")
    if not isinstance(changes, list):
        raise InvalidInputError("changes must be a list of {key, value}", field="changes")
    allow = _flag(_object(body, "options").get("allowReservedAttributes"), "options.allowReservedAttributes")
    run_id = request.path_params["run_id"]
    if allow:  # (reserved keys: the World's own attr_set event, which the rulebook checks like any other)
        event = {"eventType": "attr_set", "eventData": {"changes": changes, "allowReservedAttributes": True}}
        return _json(await served.world.events.create(run_id, event))
    return _json(await served.world.runs.set_attributes(run_id, cast(list[Any], changes)))


async def _list_steps(served: Served, request: Request) -> Response:
    _ascending_only(request)
    return _json(await served.world.steps.list(
        request.path_params["run_id"], cursor=request.query_params.get("cursor") or None,
        limit=_query_int(request, "limit", 100), resolve_data=_resolve(request)))


async def _get_step(served: Served, request: Request) -> Response:
    return _json(await served.world.steps.get(request.path_params["run_id"], request.path_params["step_id"],
                                              resolve_data=_resolve(request)))


async def _create_event(served: Served, request: Request) -> Response:
    """``events.create(runId, event, params)``: awsworld's params (``eventCount``, ``inBand``,
    ``expectedSeqInBand``, ``resolveData``, ``afterStepBody``); the Workflow SDK's others are ignored."""
    body = await _body(request)
    run_id = _string(body.get("runId"), "runId", optional=True)
    event = body.get("event")
    if not isinstance(event, dict):
        raise InvalidInputError("event must be an object with an eventType", field="event")
    params = _object(body, "params")
    resolve = _resolve_param(params)
    result = await served.world.events.create(
        run_id, cast(JSON, event), event_count=_integer(params.get("eventCount"), "params.eventCount"),
        in_band=_flag(params.get("inBand"), "params.inBand"),
        expected_seq_in_band=_integer(params.get("expectedSeqInBand"), "params.expectedSeqInBand"),
        resolve_data=resolve, after_step_body=_flag(params.get("afterStepBody"),
                                                                        "params.afterStepBody"))
    answer = result.to_wire()
    if result.hook is not None:
        answer["hook"] = _hook(served, result.hook)
    return JSONResponse(answer)


async def _create_batch(served: Served, request: Request) -> Response:
    """awsworld's ``events.create_batch`` (``atomic``, ``expectSeq``, ``stamp`` included)."""
    from datetime import datetime

    body = await _body(request)
    events = body.get("events")
    if not isinstance(events, list):
        raise InvalidInputError("events must be a list of events", field="events")
    params = _object(body, "params")
    stamp_text = _string(params.get("stamp"), "params.stamp", optional=True)
    try:
        stamp = datetime.fromisoformat(stamp_text) if stamp_text else None
    except ValueError:
        raise InvalidInputError("params.stamp must be an ISO-8601 time", field="params.stamp") from None
    resolve = _resolve_param(params)
    return _json(await served.world.events.create_batch(
        request.path_params["run_id"], cast(list[Any], events), in_band=_flag(params.get("inBand"), "params.inBand"),
        expected_seq_in_band=_integer(params.get("expectedSeqInBand"), "params.expectedSeqInBand"),
        resolve_data=resolve, atomic=_flag(params.get("atomic"), "params.atomic"), stamp=stamp,
        expect_seq=_integer(params.get("expectSeq"), "params.expectSeq")))


async def _list_events(served: Served, request: Request) -> Response:
    _ascending_only(request)
    return _json(await served.world.events.list(
        request.path_params["run_id"], cursor=request.query_params.get("cursor") or None,
        limit=_query_int(request, "limit", 1000), resolve_data=_resolve(request)))


async def _list_correlated(served: Served, request: Request) -> Response:
    _ascending_only(request)
    return _json(await served.world.events.list_by_correlation_id(
        request.path_params["run_id"], request.path_params["correlation_id"],
        cursor=request.query_params.get("cursor") or None, limit=_query_int(request, "limit", 1000),
        resolve_data=_resolve(request)))


async def _list_hooks(served: Served, request: Request) -> Response:
    _ascending_only(request)
    run_id = request.query_params.get("runId")
    if not run_id:
        raise InvalidInputError("this World lists the hooks of one run: give runId", field="runId")
    page = await served.world.hooks.list(run_id, cursor=request.query_params.get("cursor") or None,
                                         limit=_query_int(request, "limit", 100), resolve_data=_resolve(request))
    answer = page.to_wire()
    answer["data"] = [_hook(served, hook) for hook in page.data]
    return JSONResponse(answer)


async def _get_hook(served: Served, request: Request) -> Response:
    hook = await served.world.hooks.get(request.path_params["hook_id"], run_id=request.query_params.get("runId"),
                                        resolve_data=_resolve(request))
    return JSONResponse(_hook(served, hook))


async def _hook_by_token(served: Served, request: Request) -> Response:
    """``hooks.getByToken``: the token in the path, or in the query (``?token=``) for one a URL path cannot carry:
    ``.`` or ``..``, which a client's URL parser drops (``%2e`` too), so ``/v1/hooks/by-token/..`` reached
    ``/v1/hooks`` and its 400 about ``runId``."""
    token = request.path_params.get("token")
    if token is None:
        token = request.query_params.get("token")
        if token is None:
            raise InvalidInputError("give the hook's token: GET /v1/hooks/by-token/TOKEN, or ?token=TOKEN",
                                    field="token")
    hook = await served.world.hooks.get_by_token(token, resolve_data=_resolve(request))
    return JSONResponse(_hook(served, hook))


async def _hook_by_resume_id(served: Served, request: Request) -> Response:
    """``hooks.resumed_by`` (awsworld's): ``{"holder": {"runId", "hookId"}}`` of the hook that recorded the
    ``resumeOnce`` id ``?resumeId=``, or ``{}`` when no hook did."""
    holder = await served.world.hooks.resumed_by(request.query_params.get("resumeId", ""))
    return JSONResponse({} if holder is None else {"holder": {"runId": holder[0], "hookId": holder[1]}})


# -- streams -----------------------------------------------------------------------------------------------------


async def _list_streams(served: Served, request: Request) -> Response:
    return JSONResponse({"streams": await served.world.streams.list(request.path_params["run_id"])})


async def _write_chunks(served: Served, request: Request) -> Response:
    """``streams.write`` / ``write_multi``: ``{"chunks": [...]}``, each chunk bytes (the tagged object) or a
    string (stored as its UTF-8); each is one chunk of the stream, in order."""
    body = await _body(request)
    chunks = body.get("chunks")
    if not isinstance(chunks, list) or not chunks:
        raise InvalidInputError("chunks must be a non-empty list", field="chunks")
    await served.world.streams.write_multi(request.path_params["run_id"], request.path_params["name"],
                                           [_chunk(c, i) for i, c in enumerate(cast(list[Any], chunks))])
    return JSONResponse({})


def _chunk(chunk: Any, index: int) -> bytes:
    import base64
    import binascii

    if isinstance(chunk, str):
        return chunk.encode("utf-8")
    if isinstance(chunk, dict) and chunk.get("__type") == "Uint8Array" and isinstance(chunk.get("data"), str):
        try:
            return base64.b64decode(cast(str, chunk["data"]), validate=True)
        except binascii.Error:
            pass
    raise InvalidInputError(f"chunks[{index}] must be a string or bytes ({{\"__type\": \"Uint8Array\", \"data\": "
                            "base64}})", field=f"chunks[{index}]")


def _tagged(data: bytes) -> JSON:
    import base64

    return {"__type": "Uint8Array", "data": base64.b64encode(data).decode("ascii")}


async def _get_chunks(served: Served, request: Request) -> Response:
    page = await served.world.streams.get_chunks(request.path_params["run_id"], request.path_params["name"],
                                                 limit=_query_int(request, "limit", 100),
                                                 cursor=request.query_params.get("cursor") or None)
    return JSONResponse({"data": [{"index": c.index, "data": _tagged(c.data)} for c in page.data],
                         "cursor": page.cursor, "hasMore": page.has_more, "done": page.done})


async def _stream_info(served: Served, request: Request) -> Response:
    return _json(await served.world.streams.get_info(request.path_params["run_id"], request.path_params["name"]))


async def _close_stream(served: Served, request: Request) -> Response:
    await served.world.streams.close(request.path_params["run_id"], request.path_params["name"])
    return JSONResponse({})


async def _read_stream(served: Served, request: Request) -> Response:
    """``streams.get``, live: the raw bytes of every chunk from ``startIndex`` on (negative: from the tail; absent
    or ``null``: 0), existing ones first, then each as it lands; the answer ends when the stream is closed or its
    run has ended. Headers go out at once; a reader that disconnects stops the read: Starlette cancels the body
    on the ASGI server's ``http.disconnect`` (so the World's reader stops waiting), and ``Served.live_reads``
    counts it ended. ``framed=1``: each chunk behind its 4-byte big-endian length, so a reader gets the chunks as
    written."""
    run_id, name = request.path_params["run_id"], request.path_params["name"]
    raw = request.query_params.get("startIndex")
    try:
        start = 0 if raw in (None, "", "null", "undefined") else int(raw)
    except ValueError:
        raise InvalidInputError("startIndex must be an integer", field="startIndex") from None
    framed = request.query_params.get("framed") in ("1", "true")
    await served.world.runs.get(run_id, resolve_data="none")  # (a missing run is a 404 before any byte is sent)
    chunks = served.world.streams.get(run_id, name, start_index=start)

    async def body() -> AsyncIterator[bytes]:
        served.live_reads += 1
        try:
            async for chunk in chunks:
                yield FRAME.pack(len(chunk)) + chunk if framed else chunk
        finally:
            served.live_reads -= 1

    return StreamingResponse(body(), media_type="application/octet-stream",
                             headers={"cache-control": "no-store", "x-accel-buffering": "no"})


# -- the Client's own calls --------------------------------------------------------------------------------------


async def _client_start(served: Served, request: Request) -> Response:
    """``Client.start`` by name: ``{"workflow": name, "args": [...], "kwargs": {...}, "runId"?: id}`` (JSON
    arguments, as a Python caller's would be stored); answers ``{"runId"}`` (202: the run is queued)."""
    body = await _body(request)
    _only(body, "workflow", "args", "kwargs", "runId")
    name = _string(body.get("workflow"), "workflow")
    assert name is not None
    args = body.get("args", [])
    kwargs = _object(body, "kwargs")
    if not isinstance(args, list):
        raise InvalidInputError("args must be a list", field="args")
    run_id = _string(body.get("runId"), "runId", optional=True)
    try:
        run = await served.client.options(run_id=run_id).start(name, *cast(list[Any], args), **kwargs)
    except LookupError as error:  # a workflow name no consumer of the queue registers
        raise InvalidInputError(str(error).strip("'\""), field="workflow") from None
    except (TypeError, CodecError) as error:  # arguments that do not fit, or that its args_codec refuses
        raise InvalidInputError(" ".join(str(error).split()), field="args") from None
    return JSONResponse({"runId": run.run_id}, status_code=202)


async def _client_resume(served: Served, request: Request) -> Response:
    """``Client.resume_hook``: ``{"token", "payload", "idempotencyKey"?, "wait"?}``; answers the hook_received event.
    ``wait``: seconds to wait for a hook that does not exist yet (its run has not reached ``create_hook``), at most
    ``MAX_WAIT_SECONDS``, as ``Client.resume_hook(wait=...)`` waits; without it, no such hook is a 404 at once."""
    body = await _body(request)
    _only(body, "token", "payload", "idempotencyKey", "wait")
    token = _string(body.get("token"), "token")
    assert token is not None
    key = _string(body.get("idempotencyKey"), "idempotencyKey", optional=True)
    wait = _number(body.get("wait"), "wait")
    if wait is not None and not 0 <= wait <= MAX_WAIT_SECONDS:
        raise InvalidInputError(f"wait must be 0 to {MAX_WAIT_SECONDS:g} seconds", field="wait")
    try:
        outcome = await served.client.resume_hook_outcome(token, body.get("payload"), idempotency_key=key, wait=wait)
    except TypeError as error:
        raise InvalidInputError(str(error), field="payload") from None
    return JSONResponse({"event": outcome.event.to_wire(), "recorded": outcome.recorded})


async def _client_cancel(served: Served, request: Request) -> Response:
    """``Client.cancel``: ``{"reason"?}``; answers the run as it is afterwards."""
    body = await _body(request) if request.headers.get("content-length", "0") != "0" else {}
    _only(body, "reason")
    reason = _string(body.get("reason"), "reason", optional=True)
    run_id = request.path_params["run_id"]
    try:
        await served.client.cancel(run_id, reason=reason)
    except ValueError as error:
        raise InvalidInputError(str(error), field="reason") from None
    return _json(await served.world.runs.get(run_id, resolve_data="none"))
