"""The UI says which schedule started a run: the run list, the run page and the JSON API (httpx on the app)."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from awsworld import Schedule, workflow
from awsworld.testing import WorkflowTestEnv
from awsworld.ui import create_app


@workflow(name="ui.scheduled")
async def scheduled(label: str) -> str:
    return label


async def test_the_run_list_and_page_show_the_schedule_and_tick() -> None:
    async with WorkflowTestEnv(start_time=datetime(2026, 3, 2, tzinfo=UTC)) as env:
        await env.client.schedules.create("ui-hourly", scheduled, Schedule(every="1h", args=("<b>x</b>",)))
        await env.sleep("1h1m")
        manual = await env.client.schedules.trigger("ui-hourly")
        plain = await env.client.start(scheduled, "plain")
        await env.idle()
        app = create_app(env.world)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            runs = (await http.get("/api/runs", params={"workflow": "ui.scheduled"})).json()["runs"]
            by_id = {r["runId"]: r["schedule"] for r in runs}
            assert by_id[plain.run_id] is None
            assert by_id[manual.run_id] is not None and by_id[manual.run_id]["trigger"] == "manual"
            [ticked] = [s for s in by_id.values() if s is not None and s["trigger"] == "tick"]
            assert ticked == {"id": "ui-hourly", "tick": "2026-03-02T01:00:00.000Z", "trigger": "tick"}
            page = (await http.get("/", params={"workflow": "ui.scheduled"})).text
            assert "schedule ui-hourly 2026-03-02T01:00:00.000Z" in page
            assert page.count("schedule ui-hourly") == 2, "the manual and the tick's run; the plain run has none"
            run_id = next(r for r, s in by_id.items() if s is not None and s["trigger"] == "tick")
            run_page = (await http.get(f"/runs/{run_id}")).text
            assert "started by" in run_page and "schedule ui-hourly 2026-03-02T01:00:00.000Z" in run_page
            assert (await http.get(f"/api/runs/{run_id}")).json()["schedule"] == ticked
