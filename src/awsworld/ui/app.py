"""The ASGI app (Starlette) and how it is served (uvicorn, on loopback only).

Safe by default: it answers only requests addressed to a loopback name (``Host`` is checked, so a web page
elsewhere cannot reach it through DNS rebinding) and not sent by a page of another site (``Origin``; the rule is
``_http/loopback.py``'s), it is read-only unless built with ``allow_writes`` (and then
only cancel and resume, which also need the ``X-Awsworld-Write`` header: a cross-site form cannot set it), and
it renders every stored value escaped. It logs no requests, so no run ids or payloads end up in a terminal log.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .._http.loopback import LOOPBACK_HOSTS, loopback_host, loopback_origin
from .._published.model import unknown_workflow_note
from .._timeline import failed_run_hint, timeline_rows
from ..client.client import Client, cancel_reason
from ..client.limits import queued_runs
from ..client.waits import describe_waits
from ..world.clock import clock_of
from ..world.errors import InvalidInputError, NotFoundError, WorldError
from ..world.protocol import World
from . import api
from .api import UIState
from .model import picture
from .pages import esc, layout, run_page, runs_page
from .reader import Reader

WRITE_HEADER = "x-awsworld-write"


def check_loopback(host: str) -> str:
    """``host`` if it is a loopback address; anything else is refused (the UI has no authentication)."""
    if host not in LOOPBACK_HOSTS:
        raise ValueError(f"awsworld ui serves on loopback only (127.0.0.1), not {host!r}")
    return host


class Guard:
    """Refuse requests not addressed to a loopback host (421) or sent by another site's page (403), and writes unless
    allowed and marked (403)."""

    def __init__(self, app: ASGIApp, *, allow_writes: bool) -> None:
        self.app = app
        self.allow_writes = allow_writes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
            if not loopback_host(headers.get("host", "")):
                await PlainTextResponse("awsworld ui answers on 127.0.0.1 only", status_code=421)(scope, receive, send)
                return
            if not loopback_origin(headers.get("origin")):
                await PlainTextResponse("awsworld ui answers its own pages only, not another site's",
                                        status_code=403)(scope, receive, send)
                return
            if scope["method"] not in ("GET", "HEAD"):
                if not self.allow_writes:
                    await JSONResponse({"error": "read-only: start awsworld ui with --allow-writes"},
                                       status_code=403)(scope, receive, send)
                    return
                if headers.get(WRITE_HEADER) != "1":
                    await JSONResponse({"error": f"writes need the {WRITE_HEADER} header"},
                                       status_code=403)(scope, receive, send)
                    return
        await self.app(scope, receive, send)


async def runs_view(request: Request) -> Response:
    q = request.query_params
    ui = api.state(request)
    found, next_cursor = await api.list_runs(ui, q, limit=50)
    workflow = q.get("workflow") or None
    note = (await unknown_workflow_note(ui.world, ui.client.registry, workflow)
            if workflow and not found and not q.get("cursor") else None)  # a typo lists nothing: say which it is
    return HTMLResponse(runs_page(found, next_cursor, workflow=workflow, status=q.get("status") or None,
                                  since=q.get("since") or None, cursor=q.get("cursor") or None, note=note,
                                  queued=await queued_runs(ui.world, found)))


async def run_view(request: Request) -> Response:
    """A run's page. World requests: ``runs.get``, ``events.list`` (one per 1,000 events not yet remembered),
    ``streams.list`` and one ``streams.get_info`` per stream, and one ``runs.get`` for the parent's status and
    for each of the first ``api.LINKED_STATUSES`` children's; stream contents and whole values load on demand.
    A live run's page reads its steps too (``steps.list``), and a run or step that waits for a limit reads that
    limit's pool (``client.limits.limit_waits``): its "waits on" lines are ``awsworld describe``'s
    (``client.waits.describe_waits``)."""
    ui = api.state(request)
    run_id = request.path_params["run_id"]
    unreadable: str | None = None
    try:
        # At once: the log's pages are sequential (cursors), the rest need not wait for them.
        view, events, streams = await asyncio.gather(ui.world.runs.get(run_id, resolve_data="none"),
                                                     ui.reader.events(run_id), api.stream_infos(ui, run_id))
    except (NotFoundError, InvalidInputError):
        raise
    except WorldError as error:
        # The World cannot read the run's values (an encrypted run whose key KMS refuses to unwrap:
        # EncryptionKeyError): the page shows what is stored in plain text, as `awsworld describe` does (status,
        # times, steps, the timeline's events), and says why the values are missing.
        unreadable = str(error)
        view, events, streams = await asyncio.gather(ui.world.runs.get(run_id, resolve_data="none"),
                                                     ui.reader.events_without_values(run_id),
                                                     api.stream_infos(ui, run_id))
    pic = picture(run_id, events)
    statuses = await api.linked_statuses(ui, view, pic.children)
    _, waits = await api.run_waits(ui.world, view, events)
    now = clock_of(ui.world).now()  # (a test environment's virtual time: a sleep's end "in 2 d" of its clock)
    html = run_page(view, pic=pic, rows=timeline_rows(events), streams=streams, statuses=statuses,
                    allow_writes=ui.allow_writes, now=now, waits_on=describe_waits(waits, now),
                    cancel_reason=cancel_reason(events) if view.status == "cancelled" else None,
                    rerun=await failed_run_hint(ui.world, view) if view.status == "failed" else None,
                    unreadable=unreadable)
    return HTMLResponse(html)


async def _refused(request: Request, error: Exception) -> Response:
    """An unknown run or hook (404), a bad filter (400), anything else the World refused (500, a value it cannot
    read: an encrypted run's key KMS refuses, say): its message, as the CLI prints it, JSON under /api/, a page
    elsewhere (not a bare "Internal Server Error")."""
    if request.url.path.startswith("/api/"):
        return api.refused(error)
    code = api.refusal_status(error)
    title = {404: "not found", 400: "refused"}.get(code, "could not read")
    return HTMLResponse(layout(title, f"<main><p>{esc(error)}</p></main>"), status_code=code)


def create_app(world: World | None = None, *, open_world: Callable[[], AbstractAsyncContextManager[World]] | None
               = None, allow_writes: bool = False) -> Starlette:
    """The UI on ``world`` (a ``MemoryWorld`` in tests, an ``AWSWorld``), or on the World ``open_world()``
    opens when the server starts (an ``AWSWorld`` must be opened on the server's own event loop)."""
    if (world is None) == (open_world is None):
        raise ValueError("pass world or open_world")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if open_world is None:
            yield
            return
        async with open_world() as opened:
            _attach(app, opened, allow_writes)
            yield

    routes = [
        Route("/", runs_view), Route("/runs/{run_id}", run_view),
        Route("/api/runs", api.runs), Route("/api/runs/{run_id}", api.run),
        Route("/api/runs/{run_id}/events", api.events),
        Route("/api/runs/{run_id}/events/{event_id}/value", api.value),
        Route("/api/runs/{run_id}/streams", api.streams), Route("/api/runs/{run_id}/streams/{name}", api.stream),
        Route("/api/runs/{run_id}/cancel", api.cancel, methods=["POST"]),
        Route("/api/hooks/resume", api.resume, methods=["POST"]),
    ]
    app = Starlette(routes=routes, lifespan=lifespan, middleware=[Middleware(Guard, allow_writes=allow_writes)],
                    exception_handlers={WorldError: _refused})
    if world is not None:
        _attach(app, world, allow_writes)
    return app


def _attach(app: Starlette, world: World, allow_writes: bool) -> None:
    app.state.ui = UIState(world, Reader(world), Client(world), allow_writes)


def serve(app: Any, *, host: str = "127.0.0.1", port: int = 8765, signals: bool = True) -> Any:
    """A uvicorn server for ``app`` on a loopback ``host`` (``await server.serve()`` runs it). ``signals=False``
    leaves Ctrl-C to the caller (``awsworld dev --ui``, a test): uvicorn would otherwise take SIGINT for itself
    and stop only the UI. A request under way at the stop has ``GRACEFUL_SECONDS`` to end."""
    import uvicorn

    from .._http.listen import GRACEFUL_SECONDS

    config = uvicorn.Config(app, host=check_loopback(host), port=port, log_level="warning", access_log=False,
                            lifespan="on", timeout_graceful_shutdown=GRACEFUL_SECONDS)
    if signals:
        return uvicorn.Server(config)

    class Quiet(uvicorn.Server):
        def capture_signals(self) -> Any:
            return contextlib.nullcontext()

    return Quiet(config)
