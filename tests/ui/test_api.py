"""The UI's JSON API and pages against a MemoryWorld holding a real run (httpx on the ASGI app, no sockets)."""

from __future__ import annotations

import contextlib
import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from awsworld import Schedule, workflow
from awsworld.testing import WorkflowTestEnv
from awsworld.ui import check_loopback, create_app

from .conftest import XSS, Demo, live_flow, ordered


@pytest.fixture
async def http(demo: Demo) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(demo.env.world)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as client:
        yield client


async def test_run_list_filters_and_pages(http: httpx.AsyncClient, demo: Demo) -> None:
    page = await http.get("/", params={"workflow": "ui.order"})
    assert page.status_code == 200
    assert demo.run_id in page.text and demo.child_run_id not in page.text
    data = (await http.get("/api/runs", params={"status": "completed", "limit": "1"})).json()
    assert len(data["runs"]) == 1 and data["cursor"]
    rest = (await http.get("/api/runs", params={"status": "completed", "cursor": data["cursor"]})).json()
    assert {r["runId"] for r in data["runs"] + rest["runs"]} == {demo.run_id, demo.child_run_id}
    assert (await http.get("/api/runs", params={"status": "failed"})).json()["runs"] == []
    html = (await http.get("/", params={"status": "completed"})).text
    assert "next page" not in html  # two runs fit one page of 50
    first = (await http.get("/", params={"status": "completed", "since": "30d"})).text
    assert demo.run_id in first  # the environment's clock is close to now
    future = (await http.get("/api/runs", params={"since": "2999-01-01T00:00:00"})).json()
    assert future == {"runs": [], "cursor": None}
    assert (await http.get("/api/runs", params={"since": "soon"})).status_code == 400
    for limit in ("100", "101", "200", "5000"):  # the World's bound (101 to 200 were passed on to it: a 400)
        many = await http.get("/api/runs", params={"status": "completed", "limit": limit})
        assert (many.status_code, len(many.json()["runs"])) == (200, 2), (limit, many.text)


async def test_run_json_has_lanes_retries_hooks_and_children(http: httpx.AsyncClient, demo: Demo) -> None:
    data = (await http.get(f"/api/runs/{demo.run_id}")).json()
    assert data["status"] == "completed" and data["children"] == [demo.child_run_id]
    assert data["attributes"] == {"customer": XSS}
    names = [lane["name"] for lane in data["lanes"] if lane["kind"] == "step"]
    assert sorted(names) == sorted(["ui.reserve", "ui.reserve", "ui.charge", "ui.pack", "child run"])
    charge = next(lane for lane in data["lanes"] if lane["name"] == "ui.charge")
    assert [a["outcome"] for a in charge["attempts"]] == ["retrying", "completed"]
    assert "payment API timed out" in charge["attempts"][0]["error"]
    assert [lane["kind"] for lane in data["lanes"]].count("wait") == 1
    assert data["hooks"][0]["token"] == "address:o-1" and data["hooks"][0]["payloads"] == [{"address": XSS}]
    assert data["childStatuses"] == {demo.child_run_id: "completed"} and data["parentStatus"] is None
    child = (await http.get(f"/api/runs/{demo.child_run_id}")).json()
    assert child["parentRunId"] == demo.run_id and child["parentStatus"] == "completed"


async def test_run_page_shows_everything_escaped(http: httpx.AsyncClient, demo: Demo) -> None:
    page = await http.get(f"/runs/{demo.run_id}")
    assert page.status_code == 200
    html = page.text
    assert XSS not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert len(re.findall(r"<script>", html)) == 1  # only the page's own script
    assert html.count("data-kind='step'") == 5 and "data-kind='wait'" in html and "data-kind='hook'" in html
    assert "payment API timed out" in html and "b-backoff" in html
    completed = "<span class='status s-completed'>completed</span>"
    assert f"/runs/{demo.child_run_id}'>{demo.child_run_id}</a> {completed}" in html  # the child, with its status
    assert "progress" in html  # the stream
    assert "attribute customer" in html
    assert "data-live='0'" in html and "cancel this run" not in html
    child = (await http.get(f"/runs/{demo.child_run_id}")).text
    assert f"/runs/{demo.run_id}'>{demo.run_id}</a> {completed}" in child  # the parent, with its status


async def test_large_values_and_streams_on_demand(http: httpx.AsyncClient, demo: Demo) -> None:
    html = (await http.get(f"/runs/{demo.run_id}")).text
    event_id = re.search(r"data-value='([^']+)'", html)
    assert event_id is not None and "x" * 2000 not in html
    value = (await http.get(f"/api/runs/{demo.run_id}/events/{event_id.group(1)}/value")).json()
    assert value["value"] == "x" * 2000
    streams = (await http.get(f"/api/runs/{demo.run_id}/streams")).json()
    assert streams == [{"name": "progress", "chunks": 1, "closed": True}]
    chunks = (await http.get(f"/api/runs/{demo.run_id}/streams/progress")).json()
    assert chunks["chunks"] == [{"index": 0, "text": f"packed {XSS}\n"}] and chunks["closed"]


async def test_live_refresh_returns_only_new_events(http: httpx.AsyncClient, demo: Demo) -> None:
    first = (await http.get(f"/api/runs/{demo.run_id}/events")).json()
    assert first["terminal"] and first["count"] == len(first["events"]) > 10
    again = (await http.get(f"/api/runs/{demo.run_id}/events", params={"since": first["count"]})).json()
    assert again["events"] == [] and again["rows"] == "" and "data-kind='step'" in again["timeline"]


async def test_unknown_run_is_404_and_bad_filters_400(http: httpx.AsyncClient) -> None:
    assert (await http.get("/runs/wrun_nope")).status_code == 404
    assert (await http.get("/api/runs/wrun_nope")).status_code == 404
    assert (await http.get("/", params={"status": "<b>odd</b>"})).status_code == 400
    bad = await http.get("/api/runs", params={"status": "odd", "limit": "many"})
    assert bad.status_code == 400 and "odd" in bad.json()["error"]


async def test_read_only_by_default(http: httpx.AsyncClient, demo: Demo) -> None:
    refused = await http.post(f"/api/runs/{demo.run_id}/cancel", headers={"X-Awsworld-Write": "1"})
    assert refused.status_code == 403 and "read-only" in refused.json()["error"]
    assert (await http.post("/api/hooks/resume", json={"token": "t"})).status_code == 403


async def test_writes_need_the_flag_and_the_header(demo: Demo) -> None:
    app = create_app(demo.env.world, allow_writes=True)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as http:
        assert (await http.post("/api/hooks/resume", json={"token": "t"})).status_code == 403  # no header
        unknown = await http.post("/api/hooks/resume", json={"token": "nope"}, headers={"X-Awsworld-Write": "1"})
        assert unknown.status_code == 404  # reached the handler: the hook does not exist
        garbled = await http.post("/api/hooks/resume", content=b"{nope", headers={"X-Awsworld-Write": "1"})
        assert garbled.status_code == 400


async def test_loopback_only(demo: Demo) -> None:
    app = create_app(demo.env.world)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://evil.example") as http:
        assert (await http.get("/")).status_code == 421
    async with httpx.AsyncClient(transport=transport, base_url="http://localhost:8765") as http:
        assert (await http.get("/")).status_code == 200
        # A page of another site (the browser's Origin) gets nothing; the viewer's own pages are answered.
        assert (await http.get("/api/runs", headers={"Origin": "https://evil.example"})).status_code == 403
        assert (await http.get("/api/runs", headers={"Origin": "null"})).status_code == 403
        assert (await http.get("/api/runs", headers={"Origin": "http://localhost:8765"})).status_code == 200
    for host in ("0.0.0.0", "192.168.1.2", "example.com"):
        with pytest.raises(ValueError, match="loopback"):
            check_loopback(host)
    assert check_loopback("127.0.0.1") == "127.0.0.1"


WRITE = {"X-Awsworld-Write": "1"}


@contextlib.asynccontextmanager
async def writable() -> AsyncIterator[tuple[WorkflowTestEnv, httpx.AsyncClient]]:
    """A fresh test environment, and the UI on its World started with ``--allow-writes``."""
    async with WorkflowTestEnv() as env:
        app = create_app(env.world, allow_writes=True)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            yield env, http


async def test_allowed_writes_resume_and_cancel() -> None:
    async with writable() as (env, http):
        run = await env.client.start(live_flow)
        await run.wait_for_hook("live:go")
        page = (await http.get(f"/runs/{run.run_id}")).text
        assert "cancel this run" in page and "data-write=resume" in page
        resumed = await http.post("/api/hooks/resume", json={"token": "live:go", "payload": {"ok": 1}},
                                  headers=WRITE)
        assert resumed.status_code == 200 and resumed.json()["runId"] == run.run_id
        assert await run.result() == {"ok": 1}
        assert "cancel this run" not in (await http.get(f"/runs/{run.run_id}")).text  # ended: no buttons
        second = await env.client.start(live_flow)
        await second.wait_for_hook("live:go")
        assert (await http.post(f"/api/runs/{second.run_id}/cancel", headers=WRITE)).status_code == 200
        view = await env.world.runs.wait_for_terminal_status(second.run_id, timeout=10)
        assert view.status == "cancelled"


async def test_a_codec_hooks_resume_box_sends_the_codecs_text_and_a_dict_is_a_400() -> None:
    """The resume box of a hook created with a codec sends what is typed as the codec's text (``data-codec``), not
    parsed as JSON; a dict sent to the API is refused with a 400 and nothing recorded, the run still waiting."""
    async with writable() as (env, http):
        run = await env.client.start(ordered)
        await run.wait_for_hook("ui-order:1")
        page = (await http.get(f"/runs/{run.run_id}")).text
        assert re.search(r"<textarea id='payload-hook_1_[^']+' rows=1></textarea> <button data-write=resume "
                         r"[^>]* data-codec=1>resume</button>", page), page
        before = await run.events()
        refused = await http.post("/api/hooks/resume", json={"token": "ui-order:1",
                                                              "payload": {"sku": "tea", "quantity": 1}},
                                  headers=WRITE)
        assert refused.status_code == 400 and "codec's text" in refused.json()["error"], refused.text
        assert await run.events() == before and await run.status() == "running"
        resumed = await http.post("/api/hooks/resume", json={"token": "ui-order:1",
                                                              "payload": '{"sku": "tea", "quantity": 1}'},
                                  headers=WRITE)
        assert resumed.status_code == 200, resumed.text
        assert await run.result() == {"sku": "tea", "quantity": 1}


async def test_heartbeats_show_as_heartbeats_never_as_payloads() -> None:
    async with WorkflowTestEnv() as env:
        app = create_app(env.world)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            run = await env.client.start(live_flow)
            await run.wait_for_hook("live:go")
            await env.client.heartbeat_hook("live:go")
            beat = await env.client.heartbeat_hook("live:go")
            await env.client.resume_hook("live:go", {"ok": 2})
            assert await run.result() == {"ok": 2}
            hook = (await http.get(f"/api/runs/{run.run_id}")).json()["hooks"][0]
            assert hook["payloads"] == [{"ok": 2}], "the heartbeats are not payloads"
            assert hook["heartbeats"] == 2 and hook["lastHeartbeatAt"] == beat.created_at.isoformat()
            page = (await http.get(f"/runs/{run.run_id}")).text
            assert "2 heartbeat(s), last" in page


@workflow(name="ui.tick")
async def tick() -> str:
    return "ticked"


async def test_the_time_filter_keeps_a_run_created_since_whose_id_sorts_among_older_runs() -> None:
    """The run list's "created within" filter stopped paging at the first run created before it, as if listings
    were in creation order; they are in run-id order, and a backfilled run's id carries its tick's time, so the
    runs a backfill made a minute ago (ticks of days before) were left out, with no next page to find them."""
    start = datetime(2026, 3, 1, tzinfo=UTC)
    async with WorkflowTestEnv(start_time=start) as env:
        await env.client.schedules.create("hourly", tick, Schedule(every="1h"))
        await env.client.schedules.pause("hourly")
        older = [await env.client.start(tick) for _ in range(3)]
        await env.sleep(timedelta(days=2))
        fresh = await env.client.start(tick)
        backfilled = await env.client.schedules.backfill("hourly", start - timedelta(hours=3),
                                                         start - timedelta(hours=1))
        assert len(backfilled) == 2
        for run in [*older, fresh, *(env.client.get_run(r) for r in backfilled)]:
            await run.result()
        since = (start + timedelta(days=2) - timedelta(minutes=1)).isoformat()
        app = create_app(env.world)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            found: list[str] = []
            cursor = None
            for _ in range(10):
                params = {"since": since, "limit": "2"} | ({"cursor": cursor} if cursor else {})
                data = (await http.get("/api/runs", params=params)).json()
                assert len(data["runs"]) <= 2, data
                found += [r["runId"] for r in data["runs"]]
                cursor = data["cursor"]
                if not cursor:
                    break
            assert sorted(found) == sorted([fresh.run_id, *backfilled]), found
            page = (await http.get("/", params={"since": since})).text
            assert all(run_id in page for run_id in backfilled)
