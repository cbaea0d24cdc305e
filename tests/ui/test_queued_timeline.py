"""The timeline of a run that waited for a slot of its workflow's concurrency limit shows the wait: a lane of its
own, ``queued for workflow:<name> key '<key>'``, from the run's creation to its start (``ui.model.picture``, drawn by
``ui.pages``, in the run JSON's ``lanes``), and ``awsworld events`` says it on the ``run_started`` row. The timeline
used to start with a blank stretch as long as the wait: no lane covers a run before its first step."""

from __future__ import annotations

from datetime import timedelta

import httpx

from awsworld import Client, Concurrency, create_hook, workflow
from awsworld._timeline import timeline_rows
from awsworld.testing import WorkflowTestEnv
from awsworld.ui import create_app
from awsworld.ui.model import picture

WAITED = timedelta(minutes=5)
LIMIT = "workflow:ui.queued key 'k'"


@workflow(name="ui.queued", concurrency=Concurrency(1, key=lambda key, token: key))
async def queued(key: str, token: str) -> str:
    async with create_hook(token=token) as hook:
        return str(await hook)


async def test_a_run_that_waited_for_its_slot_shows_the_wait_for_what_it_is() -> None:
    async with WorkflowTestEnv() as env:
        holder = await env.client.start(queued, "k", "ui-queued:1")
        await holder.wait_for_hook("ui-queued:1")
        waiting = await env.client.start(queued, "k", "ui-queued:2")
        await env.sleep(WAITED.total_seconds())  # (virtual time: the second run waits for the slot the first holds)
        app = create_app(env.world)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            # While it waits: the lane runs to now, and the live timeline draws it.
            [lane] = picture(waiting.run_id, await waiting.events()).lanes
            assert (lane.kind, lane.label, lane.status, lane.ended) == ("queued", f"queued for {LIMIT}", "waiting",
                                                                        None)
            live = (await http.get(f"/api/runs/{waiting.run_id}/events")).json()["timeline"]
            assert "data-kind='queued'" in live and "for a slot of workflow:ui.queued key &#x27;k&#x27;" in live

            await env.client.resume_hook("ui-queued:1", "first")
            assert await holder.result(timeout=30) == "first"
            await waiting.wait_for_hook("ui-queued:2")
            events = await waiting.events()
            created = next(e.created_at for e in events if e.event_type == "run_created")
            started = next(e.created_at for e in events if e.event_type == "run_started")
            assert started - created >= WAITED
            pic = picture(waiting.run_id, events)
            lane = pic.lanes[0]  # it heads the timeline, where the blank stretch was
            assert (lane.kind, lane.label, lane.status) == ("queued", f"queued for {LIMIT}", "started")
            assert (lane.created, lane.ended) == (created, started)
            assert [other.kind for other in pic.lanes[1:]] == ["hook"]

            data = (await http.get(f"/api/runs/{waiting.run_id}")).json()
            assert data["lanes"][0] == {"kind": "queued", "name": f"queued for {LIMIT}", "status": "started",
                                        "createdAt": created.isoformat(), "endedAt": started.isoformat(),
                                        "childRunId": None, "path": None, "attempts": []}
            page = (await http.get(f"/runs/{waiting.run_id}")).text
            # (the wait as it was: 5 min of virtual time, and the virtual clock runs on with the real one under load)
            waited = f"{(started - created).total_seconds():.1f} s"
            assert f"title='queued {waited} for a slot of workflow:ui.queued key &#x27;k&#x27;'" in page

        [row] = [r for r in timeline_rows(events) if r.event_type == "run_started"]
        assert row.detail == f"queued 5 min for {LIMIT}"
        # The holder took its slot at once: its lane is there too, a sliver, the same words.
        [first] = [lane for lane in picture(holder.run_id, await holder.events()).lanes if lane.kind == "queued"]
        assert first.status == "started" and first.ended is not None and first.ended - first.created < WAITED


async def test_a_run_started_without_its_workflows_code_shows_its_wait_in_words_not_as_a_lane() -> None:
    """docs/how-to/run-viewer.md: the lane reads the slot the start recorded, and a start without the workflow's
    code (a script's ``Client(AWSWorld())``) records none; the summary's "waits on" line finds the run among the
    limit's waiters all the same."""
    async with WorkflowTestEnv() as env:
        holder = await env.client.start(queued, "k", "ui-queued:3")
        await holder.wait_for_hook("ui-queued:3")
        waiting = await Client(env.world).start("ui.queued", "k", "ui-queued:4")  # (no registry: no code)
        await env.sleep(WAITED.total_seconds())
        assert picture(waiting.run_id, await waiting.events()).lanes == []
        app = create_app(env.world)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://127.0.0.1") as http:
            page = (await http.get(f"/runs/{waiting.run_id}")).text
        assert "data-kind='queued'" not in page
        assert (f"<th>waits on</th><td>its start: a slot of {LIMIT} (place 1 of 1; held by run {holder.run_id})"
                in page.replace("&#x27;", "'")), page
