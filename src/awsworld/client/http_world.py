"""``HttpWorld``: a World whose every call is one request to ``awsworld serve`` (``awsworld._http.app``'s endpoints),
so a process holding no AWS credentials for the stack (only the server's URL, and its token or an IAM identity
allowed to invoke its Function URL) can do what a ``Client`` does. ``HttpClient`` (``client/http_client.py``) is
a ``Client`` on one.

Errors come back as the server raised them (``_http/wire.py``: the same awsworld error class, its fields included);
a server that cannot be reached raises ``WorldUnreachableError`` (``awsworld.world``'s, a ``ConnectionError``, as the
AWS World's clients raise it: ``aws/request_errors.py``). Authentication is
an ``httpx.Auth``: ``BearerToken`` for a server started with a token, ``SigV4`` for one behind a Lambda Function
URL with ``AuthType: AWS_IAM`` (requests signed with botocore's ``SigV4Auth``, service ``lambda``).
"""

from __future__ import annotations

import json
import struct
from collections.abc import AsyncIterator, Generator, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel

from .._http.wire import error_from_body
from ..world.clock import SYSTEM_CLOCK, Clock
from ..world.deployments import DeploymentStore
from ..world.entities import Capabilities, HookRecord, ResolveData, Run, Step
from ..world.errors import InvalidInputError, WorldError, WorldUnreachableError
from ..world.events import AttributeChange, CreateEventRequest, EventBatchResult, EventResult
from ..world.ids import SPEC_VERSION_CURRENT
from ..world.limiters import LimiterStore
from ..world.pages import EventPage, HookPage, RunPage, StepPage
from ..world.published import Publication
from ..world.queue import QueueBatchResult, QueueMessage
from ..world.schedules import ScheduleStore
from ..world.streams import Chunk, StreamChunk, StreamChunkPage, StreamInfo, StreamWriteSession, chunk_bytes
from ..world.watch import WatchAPI

M = TypeVar("M", bound=BaseModel)
FRAME = struct.Struct(">I")
REQUEST_TIMEOUT = httpx.Timeout(90.0, connect=10.0)
"""Above the server's longest hold (a run's wait, 60 s), so a long poll answers before the client gives up."""


class BearerToken(httpx.Auth):
    """``Authorization: Bearer <token>`` on every request (``awsworld serve --token-file``)."""

    def __init__(self, token: str) -> None:
        self._header = f"Bearer {token}"

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["authorization"] = self._header
        yield request


class SigV4(httpx.Auth):
    """Each request signed with AWS Signature Version 4 for a Lambda Function URL (``AuthType: AWS_IAM``), with
    the credentials botocore finds (environment, profile, role) unless ``credentials`` are given."""

    requires_request_body = True

    def __init__(self, region: str, credentials: Any = None) -> None:
        import botocore.session

        self.region = region
        self.credentials = credentials or botocore.session.get_session().get_credentials()
        if self.credentials is None:
            raise ValueError("no AWS credentials found to sign requests with (environment, profile or role)")

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        signed = AWSRequest(method=request.method, url=str(request.url), data=request.content,
                            headers={k: v for k, v in request.headers.items() if k.lower() != "connection"})
        SigV4Auth(self.credentials.get_frozen_credentials(), "lambda", self.region).add_auth(signed)
        for name, value in signed.headers.items():
            request.headers[name] = value
        yield request


def _segment(value: str) -> str:
    """``value`` as one path segment: every reserved character escaped, and a ``.`` or ``..`` as ``%2E`` (httpx,
    as any URL parser, drops a dot segment: ``/v1/hooks/by-token/..`` reached ``/v1/hooks``; the server decodes
    ``%2E`` back, and httpx keeps it)."""
    return quote(value, safe="").replace(".", "%2E") if value in (".", "..") else quote(value, safe="")


class HttpWorld:
    """The World protocol over HTTP. ``url``: the server's base URL; ``auth``: ``BearerToken``, ``SigV4`` or
    None (a loopback server without a token)."""

    spec_version: int = SPEC_VERSION_CURRENT

    def __init__(self, url: str, *, auth: httpx.Auth | None = None, http: httpx.AsyncClient | None = None) -> None:
        self.url = url.rstrip("/")
        self.http = http or httpx.AsyncClient(base_url=self.url, auth=auth, timeout=REQUEST_TIMEOUT, trust_env=False)
        self.capabilities = Capabilities(hook_retention={"active": True}, in_band_fence=True)
        # awsworld's extensions (``world/protocol.py``): the server's World keeps time by the system clock; its
        # watch index, schedules and deployments are not served, so this World has none (its publications are:
        # ``_Published``).
        self.clock: Clock = SYSTEM_CLOCK
        self.watch: WatchAPI | None = None
        self.schedules: ScheduleStore | None = None
        self.deployments: DeploymentStore | None = None
        self.limiters: LimiterStore | None = None  # (a limited start is refused: worker.limiter)
        self.max_value_bytes: int | None = None  # the server's bound: it refuses a larger value
        self.runs = _Runs(self)
        self.steps = _Steps(self)
        self.events = _Events(self)
        self.hooks = _Hooks(self)
        self.streams = _Streams(self)
        self.published = _Published(self)
        self._deployment_id: str | None = None

    async def request(self, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                      body: Any = None) -> Any:
        """One call: the answer's JSON, or the server's error raised again."""
        query = {k: v for k, v in (params or {}).items() if v is not None}
        try:
            response = await self.http.request(method, path, params=query,
                                               json=body if body is not None or method == "POST" else None)
        except httpx.HTTPError as error:  # refused, reset, timed out: nothing can be said about a write it was sent
            raise WorldUnreachableError(
                f"the awsworld server at {self.url} did not answer ({method} {path}: {type(error).__name__}: {error})",
                hint="is `awsworld serve` running at this address? (the World is in doubt about a write it was sent: "
                     "retry a start with its run id)", endpoint=self.url, service="awsworld server",
                operation=f"{method} {path}") from error
        return _answer(response)

    async def model(self, cls: type[M], method: str, path: str, **kwargs: Any) -> M:
        return cls.model_validate(await self.request(method, path, **kwargs))

    # -- the queue -------------------------------------------------------------------------------------------

    async def get_deployment_id(self) -> str:
        if self._deployment_id is None:
            self._deployment_id = str((await self.request("GET", "/v1/deployment-id"))["deploymentId"])
        return self._deployment_id

    async def queue(self, queue_name: str, payload: Any, *, idempotency_key: str | None = None,
                    delay_seconds: float | None = None, deployment_id: str | None = None) -> str:
        opts = {k: v for k, v in (("idempotencyKey", idempotency_key), ("delaySeconds", delay_seconds),
                                  ("deploymentId", deployment_id)) if v is not None}
        answer = await self.request("POST", "/v1/queue", body={"queueName": queue_name, "message": payload,
                                                                "opts": opts})
        return str(answer["messageId"])

    async def queue_batch(self, queue_name: str,
                          messages: Sequence[QueueMessage | Mapping[str, Any]]) -> list[QueueBatchResult]:
        """One ``queue`` per message, in order; each one's refusal reported in its result (the contract's
        ``queue_batch``), not raised."""
        results: list[QueueBatchResult] = []
        for raw in messages:
            try:
                message = QueueMessage.parse(raw)
                message_id = await self.queue(queue_name, message.payload, idempotency_key=message.idempotency_key,
                                              delay_seconds=message.delay_seconds,
                                              deployment_id=message.deployment_id)
            except WorldError as error:
                results.append(QueueBatchResult(error=error.message, retryable=error.status >= 500))
                continue
            except WorldUnreachableError as error:  # no answer: as a 503, retryable
                results.append(QueueBatchResult(error=str(error), retryable=True))
                continue
            results.append(QueueBatchResult(message_id=message_id))
        return results

    async def delete_run(self, run_id: str) -> bool:
        """The served World's ``delete_run`` (``DELETE /v1/runs/{run_id}``)."""
        return bool((await self.request("DELETE", f"/v1/runs/{_segment(run_id)}"))["deleted"])

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> HttpWorld:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def _answer(response: httpx.Response) -> Any:
    try:
        body = response.json() if response.content else None
    except ValueError:
        body = response.text
    if response.is_success:
        return body
    raise error_from_body(response.status_code, body)


class _Runs:
    def __init__(self, world: HttpWorld) -> None:
        self.world = world

    async def get(self, run_id: str, *, resolve_data: ResolveData = "all") -> Run:
        return await self.world.model(Run, "GET", f"/v1/runs/{_segment(run_id)}",
                                      params={"resolveData": resolve_data})

    async def list(self, *, workflow_name: str | None = None, status: str | Sequence[str] | None = None,
                   cursor: str | None = None, limit: int = 50, resolve_data: ResolveData = "none") -> RunPage:
        statuses = None if status is None else [status] if isinstance(status, str) else list(status)
        if statuses == []:
            return RunPage()  # (matches nothing, like SQL IN (); a query cannot say an empty list)
        return await self.world.model(RunPage, "GET", "/v1/runs", params={
            "workflowName": workflow_name, "status": statuses, "cursor": cursor, "limit": limit,
            "resolveData": resolve_data})

    async def wait_for_terminal_status(self, run_id: str, *, timeout: float = 30.0,
                                       resolve_data: ResolveData = "all") -> Run:
        """The server holds the request up to 60 s; a longer ``timeout`` is several such waits."""
        import time

        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            left = max(0.0, deadline - time.monotonic())
            run = await self.world.model(Run, "GET", f"/v1/runs/{_segment(run_id)}/wait",
                                         params={"timeout": left, "resolveData": resolve_data})
            if run.is_terminal or time.monotonic() >= deadline:
                return run

    async def set_attributes(self, run_id: str, changes: Sequence[AttributeChange | Mapping[str, Any]]) -> EventResult:
        wire = [c.to_wire() if isinstance(c, AttributeChange) else dict(c) for c in changes]
        return await self.world.model(EventResult, "POST", f"/v1/runs/{_segment(run_id)}/attributes",
                                      body={"changes": wire})


class _Steps:
    def __init__(self, world: HttpWorld) -> None:
        self.world = world

    async def get(self, run_id: str, step_id: str, *, resolve_data: ResolveData = "all") -> Step:
        return await self.world.model(Step, "GET", f"/v1/runs/{_segment(run_id)}/steps/{_segment(step_id)}",
                                      params={"resolveData": resolve_data})

    async def list(self, run_id: str, *, cursor: str | None = None, limit: int = 100,
                   resolve_data: ResolveData = "all") -> StepPage:
        return await self.world.model(StepPage, "GET", f"/v1/runs/{_segment(run_id)}/steps",
                                      params={"cursor": cursor, "limit": limit, "resolveData": resolve_data})


def _event_wire(event: CreateEventRequest | Mapping[str, Any]) -> Any:
    if isinstance(event, CreateEventRequest):
        wire = event.to_wire()
        if event.event_data is not None:
            wire["eventData"] = event.event_data.model_dump(mode="json", by_alias=True, exclude_none=True)
        return wire
    return dict(event)


class _Events:
    def __init__(self, world: HttpWorld) -> None:
        self.world = world

    async def create(self, run_id: str | None, event: CreateEventRequest | Mapping[str, Any], *,
                     event_count: int | None = None, in_band: bool = False, expected_seq_in_band: int | None = None,
                     resolve_data: ResolveData = "all", after_step_body: bool = False) -> EventResult:
        params = {"eventCount": event_count, "inBand": in_band or None, "expectedSeqInBand": expected_seq_in_band,
                  "resolveData": resolve_data, "afterStepBody": after_step_body or None}
        return await self.world.model(EventResult, "POST", "/v1/events", body={
            "runId": run_id, "event": _event_wire(event), "params": {k: v for k, v in params.items() if v is not None}})

    async def create_batch(self, run_id: str, events: Sequence[CreateEventRequest | Mapping[str, Any]], *,
                           in_band: bool = False, expected_seq_in_band: int | None = None,
                           resolve_data: ResolveData = "all", atomic: bool = False, stamp: datetime | None = None,
                           expect_seq: int | None = None) -> EventBatchResult:
        if stamp is not None and stamp.tzinfo is None:
            raise InvalidInputError("stamp needs an in-band write and a timezone-aware time", field="stamp")
        params = {"inBand": in_band or None, "expectedSeqInBand": expected_seq_in_band, "resolveData": resolve_data,
                  "atomic": atomic or None, "stamp": stamp.isoformat() if stamp else None, "expectSeq": expect_seq}
        return await self.world.model(EventBatchResult, "POST", f"/v1/runs/{_segment(run_id)}/events/batch", body={
            "events": [_event_wire(e) for e in events], "params": {k: v for k, v in params.items() if v is not None}})

    async def list(self, run_id: str, *, cursor: str | None = None, limit: int = 1000,
                   resolve_data: ResolveData = "all") -> EventPage:
        return await self.world.model(EventPage, "GET", f"/v1/runs/{_segment(run_id)}/events",
                                      params={"cursor": cursor, "limit": limit, "resolveData": resolve_data})

    async def list_by_correlation_id(self, run_id: str, correlation_id: str, *, cursor: str | None = None,
                                     limit: int = 1000, resolve_data: ResolveData = "all") -> EventPage:
        return await self.world.model(
            EventPage, "GET", f"/v1/runs/{_segment(run_id)}/events/by-correlation-id/{_segment(correlation_id)}",
            params={"cursor": cursor, "limit": limit, "resolveData": resolve_data})


def _hook(raw: Any) -> HookRecord:
    return HookRecord.model_validate(raw)


class _Hooks:
    def __init__(self, world: HttpWorld) -> None:
        self.world = world

    async def get(self, hook_id: str, *, run_id: str | None = None, resolve_data: ResolveData = "all") -> HookRecord:
        return _hook(await self.world.request("GET", f"/v1/hooks/{_segment(hook_id)}",
                                              params={"runId": run_id, "resolveData": resolve_data}))

    async def get_by_token(self, token: str, *, resolve_data: ResolveData = "all") -> HookRecord:
        return _hook(await self.world.request("GET", f"/v1/hooks/by-token/{_segment(token)}",
                                              params={"resolveData": resolve_data}))

    async def list(self, run_id: str, *, cursor: str | None = None, limit: int = 100,
                   resolve_data: ResolveData = "all") -> HookPage:
        return await self.world.model(HookPage, "GET", "/v1/hooks", params={
            "runId": run_id, "cursor": cursor, "limit": limit, "resolveData": resolve_data})

    async def resumed_by(self, resume_id: str) -> tuple[str, str] | None:
        answer = await self.world.request("GET", "/v1/hooks/by-resume-id", params={"resumeId": resume_id})
        holder = answer.get("holder")
        return None if holder is None else (str(holder["runId"]), str(holder["hookId"]))


class _Published:
    """``world.published`` of the served World (``GET /v1/published``): what its queue's consumers registered, so
    the ``Client`` of an ``HttpClient`` refuses at start a name none of them registers, exactly as a ``Client`` on
    that World does (``Client.refuse_unpublished``, ``_published.model.judge``). Only a consumer publishes (``awsworld
    dev``, the flow function, ``awsworld serve`` running MODULEs), never a caller over HTTP."""

    def __init__(self, world: HttpWorld) -> None:
        self.world = world

    async def publish(self, publication: Publication) -> None:
        raise InvalidInputError("publications are written by the code that consumes the World's queue (awsworld dev, "
                                "the flow function, awsworld serve with MODULEs), not over HTTP", field="published")

    async def read(self) -> list[Publication]:
        answer = await self.world.request("GET", "/v1/published")
        return [Publication.from_json(json.dumps(raw)) for raw in answer["publications"]]


def _tagged(chunk: Chunk, field: str) -> dict[str, str]:
    import base64

    return {"__type": "Uint8Array", "data": base64.b64encode(chunk_bytes(chunk, field)).decode("ascii")}


class _Streams:
    def __init__(self, world: HttpWorld) -> None:
        self.world = world

    def _path(self, run_id: str, name: str) -> str:
        return f"/v1/runs/{_segment(run_id)}/streams/{_segment(name)}"

    async def write(self, run_id: str, name: str, chunk: Chunk) -> None:
        await self.write_multi(run_id, name, [chunk])

    async def write_multi(self, run_id: str, name: str, chunks: Sequence[Chunk]) -> None:
        if isinstance(chunks, str | bytes):
            raise InvalidInputError("chunks must be a sequence of chunks, not one chunk", field="chunks")
        await self.world.request("POST", self._path(run_id, name) + "/chunks",
                                 body={"chunks": [_tagged(c, f"chunks[{i}]") for i, c in enumerate(chunks)]})

    async def close(self, run_id: str, name: str) -> None:
        await self.world.request("POST", self._path(run_id, name) + "/close", body={})

    async def get(self, run_id: str, name: str, start_index: int = 0) -> AsyncIterator[bytes]:
        """The live read, framed (``framed=1``: each chunk behind its 4-byte length) so every chunk comes back
        as it was written, however the transport splits the bytes."""
        async with self.world.http.stream("GET", self._path(run_id, name), timeout=httpx.Timeout(None, connect=10.0),
                                          params={"startIndex": start_index, "framed": 1}) as response:
            if not response.is_success:
                await response.aread()
                _answer(response)
            pending = bytearray()
            async for piece in response.aiter_bytes():
                pending += piece
                while len(pending) >= FRAME.size:
                    (size,) = FRAME.unpack_from(pending)
                    if len(pending) < FRAME.size + size:
                        break
                    yield bytes(pending[FRAME.size:FRAME.size + size])
                    del pending[:FRAME.size + size]

    async def get_chunks(self, run_id: str, name: str, *, limit: int = 100,
                         cursor: str | None = None) -> StreamChunkPage:
        import base64

        raw = await self.world.request("GET", self._path(run_id, name) + "/chunks",
                                       params={"limit": limit, "cursor": cursor})
        return StreamChunkPage(data=[StreamChunk(index=c["index"], data=base64.b64decode(c["data"]["data"]))
                                     for c in raw["data"]], cursor=raw["cursor"], has_more=raw["hasMore"],
                               done=raw["done"])

    async def get_info(self, run_id: str, name: str) -> StreamInfo:
        return await self.world.model(StreamInfo, "GET", self._path(run_id, name) + "/info")

    async def list(self, run_id: str) -> list[str]:
        return list((await self.world.request("GET", f"/v1/runs/{_segment(run_id)}/streams"))["streams"])

    def create_write_session(self, run_id: str, name: str, writer_id: str) -> StreamWriteSession:
        raise InvalidInputError("write sessions are for a runtime's writers; over HTTP, write and close",
                                field="writerId")
