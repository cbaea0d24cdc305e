"""The JSON API the pages' script calls (and scripts may too): runs, a run's new events for the live refresh,
one event's whole value, streams; and, only when the UI was started with ``--allow-writes``, cancel and resume.

A live refresh is one HTTP request, ``GET /api/runs/{id}/events?since=N``, costing the World two requests
(``runs.get`` without values, one ``events.list`` page after the remembered cursor; see ``reader``), plus one
``GET .../streams/{name}?cursor=`` (one ``streams.get_chunks``) per stream the viewer opened that is still open.
"""

from __future__ import annotations

import asyncio
import base64
import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse

from .._engine.parking import parked_run, shown_status
from .._timeline import error_lines, error_part, read_steps, timeline_rows, when
from .._worker.error_shapes import error_summary
from ..authoring.durations import parse_duration
from ..client.client import Client, cancel_reason, run_views
from ..client.limits import limit_waits, queued_runs
from ..client.waits import waiting_on, with_limits
from ..schedules.info import schedule_json
from ..world.entities import Run
from ..world.errors import InvalidInputError, NotFoundError
from ..world.events import Event
from ..world.pages import MAX_RUNS_PAGE
from ..world.protocol import World
from ..world.streams import StreamInfo
from .model import parent_of, picture
from .pages import event_rows, timeline_html
from .reader import Reader

STREAM_PAGE = 100  # chunks per stream request
LINKED_STATUSES = 20
"""A run page shows the status of its parent and of its first this-many children: one metadata-only ``runs.get``
each, all at once, so a page costs at most 1 + LINKED_STATUSES more World requests however many children the run
started (later children are listed as plain links)."""


@dataclass
class UIState:
    """What every request handler reads (``app.state.ui``): the World, the log cache behind the live refresh, a
    client for writes, and whether writes are allowed."""

    world: World
    reader: Reader
    client: Client
    allow_writes: bool


def state(request: Request) -> UIState:
    return request.app.state.ui


def number(text: str | None, default: int, *, low: int = 0, high: int = 1_000_000) -> int:
    """A query parameter as an int within bounds (a malformed one is the default, not a 500)."""
    try:
        return max(low, min(high, int(text))) if text is not None else default
    except ValueError:
        return default


def created_since(text: str | None) -> datetime | None:
    """The run list's time filter: a duration back from now (``30m``, ``2h``, ``7d``) or an ISO time."""
    if not text:
        return None
    try:
        return datetime.now(UTC) - parse_duration(text, what="since")
    except (TypeError, ValueError):
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInputError(f"since: {text!r} is neither a duration (30m, 2h, 7d) nor an ISO time",
                                field="since") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


# World pages one time-filtered request reads at most while they hold too few runs created since the filter's time.
SINCE_PAGES = 10


async def list_runs(ui: UIState, params: Mapping[str, str], *, limit: int) -> tuple[list[Run], str | None]:
    """One page of runs for the filters in ``params`` (workflow, status, since, cursor), and the next cursor.

    Listings are in run-id order, which is not creation order (a scheduled run's id carries its tick's time, so a
    backfill made now lists among old runs; a caller's id sorts by its text), so a run created before ``since``
    says nothing of the runs after it: the filter reads on, up to ``SINCE_PAGES`` pages a request (each asking for
    the runs still missing) until ``limit`` runs are kept, and the cursor goes on from there while the listing has
    more."""
    since = created_since(params.get("since"))
    cursor = params.get("cursor") or None
    kept: list[Run] = []
    for _ in range(SINCE_PAGES if since is not None else 1):
        page = await ui.world.runs.list(workflow_name=params.get("workflow") or None,
                                        status=params.get("status") or None, cursor=cursor,
                                        limit=limit - len(kept))  # (a page shows ``limit`` runs at most)
        kept += [r for r in page.data if since is None or r.created_at >= since]
        cursor = page.cursor if page.has_more else None
        if cursor is None or len(kept) >= limit:
            break
    return kept, cursor


async def linked_statuses(ui: UIState, run: Run, children: list[str]) -> dict[str, str]:
    """The status of ``run``'s parent and of its first ``LINKED_STATUSES`` children, by run id (``not found``
    for a run no longer stored: its retention ended), read as ``awsworld describe`` reads its children
    (``client.client.run_views``)."""
    parent = parent_of(run)
    ids = ([parent] if parent else []) + children[:LINKED_STATUSES]
    return {run_id: view.status if view is not None else "not found"
            for run_id, view in (await run_views(ui.world, ids)).items()}


def _parked(run: Run) -> dict[str, Any] | None:
    """A parked run's mark (``_engine.parking``): since when, where, the divergence outlined; None otherwise."""
    parked = parked_run(run.status, run.attributes)
    return None if parked is None else parked.to_json()


async def runs(request: Request) -> JSONResponse:
    q = request.query_params
    ui = state(request)
    found, cursor = await list_runs(ui, q, limit=number(q.get("limit"), 50, low=1, high=MAX_RUNS_PAGE))
    queued = await queued_runs(ui.world, found)
    return JSONResponse({"runs": [{"runId": r.run_id, "workflow": r.workflow_name, "status": r.status,
                                   "createdAt": when(r.created_at), "completedAt": when(r.completed_at),
                                   "error": error_summary(r.error), "errorCode": r.error_code,
                                   "schedule": schedule_json(r.execution_context), "parked": _parked(r),
                                   "queued": queued.get(r.run_id)}
                                  for r in found],
                         "cursor": cursor})


async def run_waits(world: World, view: Run, events: list[Event]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(what waits for a limit across runs, everything the run waits on): ``client.limits.limit_waits`` and
    ``client.waits``'s entries as ``awsworld describe`` reads them (``waitingOn``), so the page and ``describe``
    say the same. A live run's steps are read for it (one ``steps.list`` page per 1,000 steps); an ended run waits
    on nothing and costs no read."""
    limited = await limit_waits(world, view.run_id, view.status, view.execution_context, events)
    if view.is_terminal:
        return limited, []
    steps = await read_steps(world, view.run_id, values=False)
    return limited, with_limits(waiting_on(view.status, steps, events), limited)


async def run(request: Request) -> JSONResponse:
    ui = state(request)
    run_id = request.path_params["run_id"]
    view, events = await asyncio.gather(ui.world.runs.get(run_id, resolve_data="none"), ui.reader.events(run_id))
    pic = picture(run_id, events)
    statuses = await linked_statuses(ui, view, pic.children)
    parent = parent_of(view)
    limited, waiting = await run_waits(ui.world, view, events)
    return JSONResponse({
        "runId": view.run_id, "workflow": view.workflow_name, "status": view.status,
        "createdAt": when(view.created_at), "startedAt": when(view.started_at),
        "completedAt": when(view.completed_at), "attributes": dict(view.attributes), "parked": _parked(view),
        **error_part(view.error, view.error_code),
        "cancelReason": cancel_reason(events) if view.status == "cancelled" else None,  # as describe --json
        "parentRunId": parent, "parentStatus": statuses.get(parent) if parent else None,
        "schedule": schedule_json(view.execution_context),
        "limitWaits": limited,  # a limit across runs holds its start, or a step's (client.limits.limit_waits)
        "waitingOn": waiting,  # everything a live run waits on, as describe --json's waitingOn (client/waits.py)
        "children": pic.children, "childStatuses": {c: statuses[c] for c in pic.children if c in statuses},
        "lanes": [{"kind": lane.kind, "name": lane.label, "status": lane.status, "createdAt": when(lane.created),
                   "endedAt": when(lane.ended), "childRunId": lane.child_run_id, "path": lane.path or None,
                   "attempts": [{"attempt": a.number, "start": when(a.start), "end": when(a.end),
                                 "outcome": a.outcome, "error": a.error, "inline": a.inline}
                                for a in lane.attempts]}
                  for lane in pic.lanes],
        "hooks": [{"hookId": h.hook_id, "token": h.token, "webhook": h.webhook, "disposed": h.disposed,
                   "state": h.state, "payloads": [p for _, _, p in h.payloads], "heartbeats": h.heartbeats,
                   "lastHeartbeatAt": when(h.last_heartbeat)} for h in pic.hooks],
    })


async def events(request: Request) -> JSONResponse:
    """The live refresh: the events after the ``since`` the page holds (rows and JSON), the re-rendered
    timeline, the run's status, and ``more`` when a page of events was not all there is (poll again soon)."""
    ui = state(request)
    run_id = request.path_params["run_id"]
    since = number(request.query_params.get("since"), 0)
    view = await ui.world.runs.get(run_id, resolve_data="none")
    all_events, more = await ui.reader.refresh(run_id)
    rows = timeline_rows(all_events)
    pic = picture(run_id, all_events)
    now = None if view.is_terminal else datetime.now(UTC)
    return JSONResponse({
        "status": view.status, "shownStatus": shown_status(view.status, view.attributes),
        "terminal": view.is_terminal, "count": len(rows), "more": more,
        "events": [row.to_json() for row in rows[since:]],
        "rows": event_rows(run_id, rows[since:]), "timeline": timeline_html(pic, now=now),
    })


async def value(request: Request) -> JSONResponse:
    """One event's value (or error) whole: what the page cut to ``VALUE_CHARS``."""
    ui = state(request)
    run_id, event_id = request.path_params["run_id"], request.path_params["event_id"]
    for row in timeline_rows(await ui.reader.events(run_id)):
        if row.event_id == event_id:
            traceback = "\n".join(error_lines(row.error_details)) or None
            return JSONResponse({"eventId": event_id, "value": row.shown_value if row.has_value else None,
                                 "error": row.error, "errorDetails": row.error_details, "traceback": traceback})
    return JSONResponse({"error": f"run {run_id} has no event {event_id}"}, status_code=404)


async def streams(request: Request) -> JSONResponse:
    ui = state(request)
    run_id = request.path_params["run_id"]
    infos = await stream_infos(ui, run_id)
    return JSONResponse([{"name": n, "chunks": i.tail_index + 1, "closed": i.done} for n, i in infos])


async def stream_infos(ui: UIState, run_id: str) -> list[tuple[str, StreamInfo]]:
    """The run's streams and what each holds: ``streams.list``, then one ``streams.get_info`` per stream, at once."""
    names = await ui.world.streams.list(run_id)
    infos = await asyncio.gather(*(ui.world.streams.get_info(run_id, name) for name in names))
    return list(zip(names, infos, strict=True))


async def stream(request: Request) -> JSONResponse:
    """One page of a stream's chunks (``cursor`` for the next): UTF-8 chunks as ``text``, others ``base64``."""
    ui = state(request)
    run_id, name = request.path_params["run_id"], request.path_params["name"]
    page = await ui.world.streams.get_chunks(run_id, name, limit=STREAM_PAGE,
                                             cursor=request.query_params.get("cursor") or None)
    chunks: list[dict[str, Any]] = []
    for chunk in page.data:
        try:
            chunks.append({"index": chunk.index, "text": chunk.data.decode("utf-8")})
        except UnicodeDecodeError:
            chunks.append({"index": chunk.index, "base64": base64.b64encode(chunk.data).decode()})
    return JSONResponse({"chunks": chunks, "cursor": page.cursor, "more": page.has_more, "closed": page.done})


async def cancel(request: Request) -> JSONResponse:
    ui = state(request)
    run_id = request.path_params["run_id"]
    await ui.client.cancel(run_id, reason="cancelled from awsworld ui")
    return JSONResponse({"runId": run_id, "cancelled": True})


async def resume(request: Request) -> JSONResponse:
    ui = state(request)
    try:
        body = json.loads(await request.body() or b"{}")
    except ValueError:
        body = None
    if not isinstance(body, dict) or not isinstance(body.get("token"), str):  # pyright: ignore[reportUnknownMemberType]
        return JSONResponse({"error": "expected {\"token\": ..., \"payload\": ...}"}, status_code=400)
    event = await ui.client.resume_hook(body["token"], body.get("payload"))  # pyright: ignore[reportUnknownMemberType, reportUnknownArgumentType]
    return JSONResponse({"eventId": event.event_id, "runId": event.run_id})


def refusal_status(error: Exception) -> int:
    """404 for what does not exist, 400 for a bad filter or value, 500 for any other refusal of the World."""
    return 404 if isinstance(error, NotFoundError) else 400 if isinstance(error, InvalidInputError) else 500


def refused(error: Exception) -> JSONResponse:
    """A World's refusal as JSON, its message in ``error`` (``refusal_status``)."""
    return JSONResponse({"error": str(error)}, status_code=refusal_status(error))
