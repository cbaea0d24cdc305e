"""The run viewer shows a parked run as parked (``_engine.parking``): the runs table's status, the run page's status,
since when, where and the ways out (escaped), its JSON, and the live refresh's status (httpx on the ASGI app over a
WorkflowTestEnv whose code changed under a run, no sockets)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import pytest

from awsworld import create_hook, step, workflow
from awsworld._engine.parking import PARKED_ATTRIBUTE
from awsworld.authoring.definitions import REGISTRY, WorkflowDef
from awsworld.testing import WorkflowTestEnv
from awsworld.ui import create_app

TOKEN = "ui-parked:<b>go</b>"


@step(name="ui_parked.label")
async def label(text: str) -> str:
    return text


@workflow(name="ui_parked.waits")
async def waits(text: str) -> object:
    await label(text)
    return await create_hook(token=TOKEN)


async def relabels(text: str) -> object:
    await label(text + "!")
    return await create_hook(token=TOKEN)


@pytest.fixture
async def parked(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[WorkflowTestEnv, str]]:
    monkeypatch.setenv("AWSWORLD_ON_DIVERGENCE", "park")
    async with WorkflowTestEnv() as env:
        run = await env.client.start(waits, "<i>x</i>")
        await run.wait_for_hook(TOKEN)
        monkeypatch.setitem(REGISTRY.workflows, "ui_parked.waits", WorkflowDef("ui_parked.waits", relabels))
        await env.client.resume_hook(TOKEN, "yes")
        await env.idle()
        view = await env.world.runs.get(run.run_id, resolve_data="none")
        assert view.status == "running" and PARKED_ATTRIBUTE in view.attributes
        yield env, run.run_id


async def test_a_parked_run_reads_parked_in_every_view(parked: tuple[WorkflowTestEnv, str]) -> None:
    env, run_id = parked
    app = create_app(env.world)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
        table = (await http.get("/")).text
        assert f"{run_id}</a></td><td>ui_parked.waits</td><td><span class='status s-parked'>parked</span>" in table
        listed = (await http.get("/api/runs")).json()["runs"]
        mark = next(r for r in listed if r["runId"] == run_id)["parked"]
        assert (mark["position"], mark["change"]) == ("step 1", "arguments"), mark
        assert (await http.get(f"/api/runs/{run_id}")).json()["parked"] == mark
        refresh = (await http.get(f"/api/runs/{run_id}/events?since=0")).json()
        assert (refresh["status"], refresh["shownStatus"]) == ("running", "parked")
        page = (await http.get(f"/runs/{run_id}")).text
        assert "<span class='status s-parked' id='status'>parked</span>" in page
        assert ("<th>parked</th><td>since " in page and "its replay differs from its log at <code>step 1 (event 3): "
                "the log has label(…), the code called label(…) with other arguments</code>" in page), page
        assert f"`awsworld fail {run_id}` ends it instead" in page
        assert PARKED_ATTRIBUTE not in page, "shown as parked, not as a raw attribute"
        assert "<i>x</i>" not in page and "<b>go</b>" not in page, "every stored value is escaped"
